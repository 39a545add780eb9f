"""Real numeric attributes at full resolution, with declared ranges (docs/math.md §20, DATA.md).

- **Adult**: the numeric attributes are bundled rank-coded in ``adult.parquet`` with the value
  as each code's label, so the exact values are the labels of the codes (no extra file).
- **Census-Income (KDD)**: its 7 continuous attributes, left out of the coded
  ``census_income.parquet``, are in ``census_income_numeric.parquet`` (same row order).
- **Lending Club** (modeldata): 10 numeric attributes unbinned in
  ``lending_club_numeric.parquet`` (same row order as ``lending_club.parquet``, where they are
  binned), amounts and rates among them.

Every attribute has a *declared range* [lo, hi]: a public bound of the attribute (its top-code,
a legal or product limit, a round number above the largest recorded value), never the data's
own minimum and maximum, which would leak the extreme records. Mechanisms are run on that range.
Files are checked against their SHA-256 (written by ``scripts/extract_data.py --only-numeric``).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray

#: file and SHA-256 of the bundled numeric files, as written by scripts/extract_data.py.
NUMERIC_FILES = {
    "census-income": (
        "census_income_numeric.parquet",
        "c5cb86468a38039797ac6b1822719dbb7ddb2c98eb73eb29611a9db7619a83c7",
    ),
    "lending-club": (
        "lending_club_numeric.parquet",
        "49a79a40b641a1e85ff3ed3ac4ef2cc22a37e6e11143394851e631fb85fbf7af",
    ),
}

#: Adult's numeric attributes (values from the labels of adult.parquet) and declared ranges.
ADULT_NUMERIC = {
    "age": (17.0, 90.0, "years (the extract keeps persons older than 16; top-coded at 90)"),
    "education-num": (1.0, 16.0, "years of education, coded 1..16"),
    "capital-gain": (0.0, 99999.0, "dollars (top-coded at 99999)"),
    "capital-loss": (0.0, 5000.0, "dollars (a round bound above the largest recorded, 4,356)"),
    "hours-per-week": (1.0, 99.0, "hours (the CPS caps usual hours at 99)"),
}


@dataclass(frozen=True)
class NumericAttribute:
    """One real numeric attribute: its dataset, name, declared range, unit and row count."""

    dataset: str
    name: str
    lo: float
    hi: float
    unit: str
    n: int


def _read_numeric(dataset: str) -> tuple[dict[str, NDArray[np.float64]], dict]:
    fname, digest = NUMERIC_FILES[dataset]
    raw = resources.files("longldp.data").joinpath("bundled", fname).read_bytes()
    if hashlib.sha256(raw).hexdigest() != digest:
        raise ValueError(f"{fname}: checksum mismatch (the bundled file was altered).")
    try:
        import pyarrow.parquet as pq
    except ModuleNotFoundError as err:  # pragma: no cover - the data extra is installed in CI
        raise ImportError(
            f"longldp.data.numeric: the bundled files are Parquet, which needs pyarrow (the "
            f"'data' extra: pip install 'longldp[data]'); {err}."
        ) from None
    table = pq.read_table(io.BytesIO(raw))
    meta = json.loads(table.schema.metadata[b"longldp"])
    cols = {c: table.column(c).to_numpy().astype(np.float64) for c in table.column_names}
    return cols, meta["columns"]


def _adult() -> tuple[dict[str, NDArray[np.float64]], dict]:
    from longldp.data.registry import load

    table = load("adult")
    cols, meta = {}, {}
    for name, (lo, hi, unit) in ADULT_NUMERIC.items():
        labels = np.array([float(v) for v in table.domains[name].labels])
        cols[name] = labels[table.columns[name]]
        meta[name] = {"lo": lo, "hi": hi, "unit": unit}
    return cols, meta


def _dataset(dataset: str) -> tuple[dict[str, NDArray[np.float64]], dict]:
    return _cached(dataset.strip().lower().replace("_", "-"))


@functools.lru_cache(maxsize=8)
def _cached(key: str) -> tuple[dict[str, NDArray[np.float64]], dict]:
    """Each dataset read once per process; its arrays are read-only (shared by every caller)."""
    cols, meta = _read_key(key)
    for arr in cols.values():
        arr.setflags(write=False)
    return cols, meta


def _read_key(key: str) -> tuple[dict[str, NDArray[np.float64]], dict]:
    if key == "adult":
        return _adult()
    if key not in NUMERIC_FILES:
        known = ", ".join(["adult", *NUMERIC_FILES])
        raise ValueError(f"longldp.data.numeric: 'dataset' must be one of {known}; got {key!r}.")
    return _read_numeric(key)


def numeric_attributes(dataset: str | None = None) -> list[NumericAttribute]:
    """The bundled real numeric attributes (of one dataset, or of all)."""
    names = [dataset] if dataset is not None else ["adult", *NUMERIC_FILES]
    out = []
    for ds in names:
        cols, meta = _dataset(ds)
        key = ds.strip().lower().replace("_", "-")
        for name, x in cols.items():
            m = meta[name]
            out.append(
                NumericAttribute(key, name, float(m["lo"]), float(m["hi"]), m["unit"], x.size)
            )
    return out


def numeric_values(dataset: str, attribute: str) -> NDArray[np.float64]:
    """The values of one numeric attribute (float64, one per row of the dataset)."""
    cols, _ = _dataset(dataset)
    if attribute not in cols:
        raise ValueError(
            f"longldp.data.numeric: 'attribute' must be one of {', '.join(cols)} for "
            f"{dataset!r}; got {attribute!r}."
        )
    return cols[attribute]


def numeric_range(dataset: str, attribute: str) -> tuple[float, float]:
    """The declared range [lo, hi] of one numeric attribute."""
    for a in numeric_attributes(dataset):
        if a.name == attribute:
            return a.lo, a.hi
    numeric_values(dataset, attribute)  # raises the one-line error naming the attributes
    raise AssertionError("unreachable")  # pragma: no cover
