"""The ``felip`` kind: FELIP's multi-dimensional range queries over τ timestamps (seed 002 §8.2).

For every dataset, repetition, oracle and ε∞ of the study, one cell runs FELIP
(`longldp.apps.felip.pipeline`) over the dataset interpolated to τ timestamps and scores the study's
query workload: MSE_t over the queries (answers as fractions of n) at every timestamp and
their mean MSE_avg (seed 002 eq. 1 applied to query answers, math §8.12). A cell gives one row.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 1                             # default τ of the datasets (each may set its own)
    engine = "count-level"              # or "per-user", "reports" (longldp.apps.felip.pipeline)
    calibration = "exact"               # default L-GRR/LOLOHA round-2 calibration of the oracles
    eps_perm = [0.1, 0.5, 1.0]          # ε∞ grid (ε of every report for a one-shot oracle)
    alpha = [0.1]                       # α = ε1/ε∞ grid, each in (0, 1) (chains only)
    lam = 3                             # λ, attributes per query
    n_queries = 100                     # queries of the workload
    workload_dir = "results/felip/workloads"   # default: results/<study name>/workloads
    datasets = [{name = "adult", tau = 260, label = "Adult"},
                {name = "bms-pos", tau = 15, rows = 50000, label = "BMS-POS"}]
    oracles = [{oracle = "OLOLOHA", calibration = "paper", label = "OLOLOHA (paper)"},
               {oracle = "L-OSUE"}, {oracle = "OUE"}]

A dataset entry names a `longldp.apps.felip.data.felip_table` dataset (``adult``, ``loan`` /
``loans-full-schema``, ``big5`` / ``bfive``, ``bfi``, ``bms-pos``) with optional ``label``,
``tau``, ``attributes`` (a list of its columns; default: the study's 12, BMS-POS's 6),
``max_domain`` (coarsening, default 50) and ``rows`` (BMS-POS: the stand-in's size; other
tables: resample that many rows with replacement). Timestamps are built by permuting whole
rows (`longldp.data.to_longitudinal`): the joint distribution and the true answers are the same
at every t.

An oracle entry is ``oracle`` (anything `longldp.apps.felip.plan_felip` accepts: a chain such as
``"OLOLOHA"``, ``"L-OSUE"``, ``"L-GRR"``, a one-shot oracle such as ``"OUE"``, or
``"adaptive"``), an optional ``label`` (default: the name; labels must differ) and an optional
``calibration`` overriding the study's. A chain runs at ε∞ with ε1 = α·ε∞, once per α. A
one-shot oracle is a reference without memoization: every user reports afresh at every
timestamp with ε = ε∞, so its rows have no α and its budget over τ timestamps is τ·ε∞ (it is
not private at the level of the chains; it shows what the grids could do at that ε).

The workload is generated once per study and dataset, in the parent process, by
`longldp.apps.felip.queries.generate_workload` with a seed drawn from the study's stream
``(4, d)``, and saved as ``<workload_dir>/<dataset label>.json``. A later run (a resume) loads
that file instead of generating again, after checking that it fits the dataset (same
attributes and domains, λ and number of queries); a file that does not fit is an error naming
``workload_dir``. The workload's JSON is part of each cell's parameters, so a changed workload
gives new cell ids; rows record its file name and SHA-256.

Random streams (`longldp.experiments.seeding`): the row permutations of dataset d in
repetition r ``(1, d, r)`` and the partition of its users among the grids ``(3, d, r)`` are
shared by every oracle and ε∞ of that repetition (common random numbers, so oracles are
compared on the same data and groups); the reports of a cell ``(2, d, r, o, e, l)`` (oracle o,
ε∞ index e, α index l; l = 0 for a one-shot oracle); the workload of dataset d ``(4, d)``.

`summary_markdown` and `plot_study` turn a results table into the study's summary table (mean
MSE_avg with a 95% t-interval per dataset × oracle × ε∞, and paired gaps between two oracles)
and its plots. Without the ``longldp`` command::

    python -m longldp.experiments.kinds.felip RESULTS.parquet --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from longldp import data as lldata
from longldp.apps.felip import data as fd
from longldp.apps.felip import pipeline as fe
from longldp.apps.felip.estimate import EstimationOptions
from longldp.apps.felip.grids import FelipSchema
from longldp.apps.felip.queries import Workload, generate_workload
from longldp.apps.felip.sizing import oracle_spec
from longldp.data import to_longitudinal
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import Cell, StudyKind
from longldp.protocols import get_protocol_class

__all__ = [
    "ASSIGNMENT",
    "COLUMNS",
    "KIND",
    "WORKLOAD",
    "DatasetEntry",
    "FelipStudySpec",
    "OracleEntry",
    "gap_rows",
    "main",
    "plot_study",
    "run_cell",
    "summary_markdown",
]

#: Namespace of the streams that partition the users among the grids.
ASSIGNMENT = 3
#: Namespace of the streams that seed the workloads.
WORKLOAD = 4
_CALIBRATIONS = ("exact", "paper")
_DATASET_NAMES = ("adult", "loan", "loans-full-schema", "big5", "bfive", "bfi", "bms-pos")
_ADAPTIVE = {"adaptive": False, "adaptive-longitudinal": True}


# ---------------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class DatasetEntry:
    """A checked dataset entry (see the module docstring).

    Attributes
    ----------
    label : str
        Name in the results (the ``dataset`` column) and of the workload file.
    name : str
        `felip_table` name as written.
    tau : int
        Timestamps.
    attributes : tuple of str or None
        Columns to use (None: the study's default choice).
    max_domain : int or None
        Coarsening of larger domains (None: keep them).
    rows : int or None
        BMS-POS: the stand-in's size; other tables: rows resampled with replacement.
    """

    label: str
    name: str
    tau: int
    attributes: tuple[str, ...] | None = None
    max_domain: int | None = 50
    rows: int | None = None

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "label": self.label,
            "name": self.name,
            "tau": self.tau,
            "attributes": None if self.attributes is None else list(self.attributes),
            "max_domain": self.max_domain,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class OracleEntry:
    """A checked oracle entry: label, `plan_felip` oracle name, calibration, chain or not."""

    label: str
    oracle: str
    calibration: str
    longitudinal: bool

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "label": self.label,
            "oracle": self.oracle,
            "calibration": self.calibration,
            "longitudinal": self.longitudinal,
        }


@dataclass(frozen=True)
class FelipStudySpec:
    """The checked keys of a felip study."""

    datasets: tuple[DatasetEntry, ...]
    oracles: tuple[OracleEntry, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...]
    lam: int
    n_queries: int
    engine: str
    calibration: str
    workload_dir: str | None


KEYS: tuple[sc.Key, ...] = (
    sc.Key("tau", sc.integer(1), default=1),
    sc.Key("engine", sc.choice(fe.ENGINES), default="count-level"),
    sc.Key("calibration", sc.choice(_CALIBRATIONS), default="exact"),
    sc.Key("eps_perm", sc.number_list(what="ε∞ values"), required=True),
    sc.Key("alpha", sc.number_list(lower=0.0, upper=1.0, what="α values"), default=(0.1,)),
    sc.Key("lam", sc.integer(1), default=3),
    sc.Key("n_queries", sc.integer(1), default=100),
    sc.Key("workload_dir", sc.string),
    sc.Key("datasets", sc.table_list, required=True),
    sc.Key("oracles", sc.table_list, required=True),
)


def _name_list(where: str, name: str, value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and v.strip() for v in value)
        or len(set(value)) != len(value)
    ):
        raise sc.fail(where, name, "a non-empty list of distinct column names", value)
    return tuple(v.strip() for v in value)


@functools.lru_cache(maxsize=8)
def _columns_of(name: str) -> tuple[str, ...]:
    """Columns a dataset entry may select."""
    key = fd.ALIASES.get(name, name)
    if key == "bms-pos":
        return fd.BMS_POS_ATTRIBUTES
    base = lldata.load(key)
    return tuple(base.attributes)


def parse_dataset_entry(where: str, table: Any, default_tau: int) -> DatasetEntry:
    """Check one dataset entry (see the module docstring); raises `ValueError` naming the key."""
    keys = (
        sc.Key("name", sc.choice(_DATASET_NAMES), required=True),
        sc.Key("label", sc.string),
        sc.Key("tau", sc.integer(1)),
        sc.Key("attributes", _name_list),
        sc.Key("max_domain", sc.integer(2), default=50),
        sc.Key("rows", sc.integer(1)),
    )
    values = sc.check_table(where, table, keys)
    name = values["name"]
    attributes = values["attributes"]
    if attributes is not None:
        known = _columns_of(name)
        unknown = [a for a in attributes if a not in known]
        if unknown:
            raise sc.fail(where, "attributes", f"columns of {name!r}: {', '.join(known)}", unknown)
        if len(attributes) < 2:
            raise sc.fail(where, "attributes", "at least 2 columns", list(attributes))
    return DatasetEntry(
        label=values["label"] or name,
        name=name,
        tau=values["tau"] if values["tau"] is not None else default_tau,
        attributes=attributes,
        max_domain=values["max_domain"],
        rows=values["rows"],
    )


def parse_oracle_entry(where: str, table: Any, calibration: str) -> OracleEntry:
    """Check one oracle entry (see the module docstring); raises `ValueError` naming the key."""
    keys = (
        sc.Key("oracle", sc.string, required=True),
        sc.Key("label", sc.string),
        sc.Key("calibration", sc.choice(_CALIBRATIONS)),
    )
    values = sc.check_table(where, table, keys)
    raw = values["oracle"]
    if raw.lower() in _ADAPTIVE:
        name, longitudinal = raw.lower(), _ADAPTIVE[raw.lower()]
    else:
        try:
            cls = get_protocol_class(raw)
        except ValueError as err:
            raise sc.fail(where, "oracle", f"a protocol name ({err})", raw) from None
        name, longitudinal = cls.name, bool(cls.longitudinal)
    entry = OracleEntry(
        label=values["label"] or name,
        oracle=name,
        calibration=values["calibration"] or calibration,
        longitudinal=longitudinal,
    )
    try:
        oracle_spec(name, 1.0, None, 0.1 if longitudinal else None, entry.calibration)
    except ValueError as err:
        raise sc.fail(where, "oracle", f"an oracle FELIP can use ({err})", raw) from None
    return entry


def parse(values: dict[str, Any], where: str) -> FelipStudySpec:
    """Turn the checked top-level values into a `FelipStudySpec` (checks each entry)."""
    datasets = tuple(
        parse_dataset_entry(f"{where}: datasets[{i}]", t, values["tau"])
        for i, t in enumerate(values["datasets"])
    )
    oracles = tuple(
        parse_oracle_entry(f"{where}: oracles[{i}]", t, values["calibration"])
        for i, t in enumerate(values["oracles"])
    )
    for what, labels in (
        ("datasets", [d.label for d in datasets]),
        ("oracles", [o.label for o in oracles]),
    ):
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise sc.fail(where, what, "entries with distinct labels (set 'label')", dup)
    files = [_slug(d.label) for d in datasets]
    if len(set(files)) != len(files):
        raise sc.fail(where, "datasets", "labels that give distinct workload file names", files)
    return FelipStudySpec(
        datasets=datasets,
        oracles=oracles,
        eps_perm=values["eps_perm"],
        alpha=values["alpha"],
        lam=values["lam"],
        n_queries=values["n_queries"],
        engine=values["engine"],
        calibration=values["calibration"],
        workload_dir=values["workload_dir"],
    )


# ---------------------------------------------------------------------------------- workloads


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "dataset"


@functools.lru_cache(maxsize=4)
def _table(dataset: str) -> lldata.Table:
    """The timestamp-0 table of a dataset entry (JSON text), cached per process."""
    ds = json.loads(dataset)
    return fd.felip_table(
        ds["name"], attributes=ds["attributes"], max_domain=ds["max_domain"], rows=ds["rows"]
    )


def workload_dir(study: Any) -> Path:
    """Folder of a study's workloads: its ``workload_dir`` or ``results/<name>/workloads``."""
    spec: FelipStudySpec = study.spec
    if spec.workload_dir is not None:
        return Path(spec.workload_dir)
    return Path("results") / study.name / "workloads"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}"
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def study_workload(study: Any, d: int) -> tuple[Path, str]:
    """Load or generate (and save) the workload of dataset ``d``; return its path and text.

    Parameters
    ----------
    study : Study
        A checked felip study.
    d : int
        Index of the dataset in the study's list.

    Returns
    -------
    (Path, str)
        The workload file and its JSON text.

    Raises
    ------
    ValueError
        When λ exceeds the dataset's attributes, or a saved workload does not fit the dataset
        (the message names ``workload_dir``).
    """
    spec: FelipStudySpec = study.spec
    ds = spec.datasets[d]
    table = _table(json.dumps(ds.as_json(), sort_keys=True))
    schema = FelipSchema.from_table(table)
    if spec.lam > schema.d:
        raise sc.fail(
            study.name, "lam", f"at most the {schema.d} attributes of {ds.label!r}", spec.lam
        )
    path = workload_dir(study) / f"{_slug(ds.label)}.json"
    if path.is_file():
        text = path.read_text()
        try:
            saved = Workload.from_json(text)
        except (ValueError, KeyError, TypeError) as err:
            raise sc.fail(
                study.name, "workload_dir", f"a folder of valid workloads ({err})", str(path)
            ) from None
        fits = (
            saved.schema == schema
            and saved.n == table.n
            and saved.lam == spec.lam
            and len(saved.queries) == spec.n_queries
        )
        if not fits:
            raise sc.fail(
                study.name,
                "workload_dir",
                f"a folder whose {path.name} fits dataset {ds.label!r} (same attributes, n, λ "
                "and number of queries); delete the file to generate it again",
                str(path),
            )
        return path, text
    seed = int(seeding.stream(study.seed, (WORKLOAD, d)).generate_state(1)[0])
    workload = generate_workload(
        table, schema, lam=spec.lam, n_queries=spec.n_queries, seed=seed, dataset=ds.label
    )
    text = workload.to_json()
    _write_atomic(path, text)
    return path, text


def cells(study: Any) -> list[Cell]:
    """Every cell of a felip study, in table order; saves or reuses the workloads."""
    spec: FelipStudySpec = study.spec
    out: list[Cell] = []
    for d, ds in enumerate(spec.datasets):
        path, text = study_workload(study, d)
        workload = {
            "file": path.name,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "json": json.loads(text),
        }
        for r in range(study.repetitions):
            for o, orc in enumerate(spec.oracles):
                alphas = list(enumerate(spec.alpha)) if orc.longitudinal else [(0, None)]
                for e, eps in enumerate(spec.eps_perm):
                    for l, alpha in alphas:
                        params = {
                            "dataset": ds.as_json(),
                            "oracle": orc.as_json(),
                            "eps_perm": eps,
                            "alpha": alpha,
                            "rep": r,
                            "engine": spec.engine,
                            "workload": workload,
                            "permutation_key": [seeding.PERMUTATION, d, r],
                            "assignment_key": [ASSIGNMENT, d, r],
                        }
                        key = (seeding.CELL, d, r, o, e, l)
                        out.append(Cell("felip", study.seed, key, params, len(out)))
    return out


# ---------------------------------------------------------------------------------- one cell


@functools.lru_cache(maxsize=4)
def _workload(sha256: str, text: str) -> Workload:
    return Workload.from_json(text)


@functools.lru_cache(maxsize=2)
def _timeline(
    dataset: str, names: tuple[str, ...], entropy: int, key: tuple[int, ...]
) -> lldata.LongitudinalTable:
    """The dataset interpolated to τ timestamps (whole rows permuted), cached per process."""
    ds = json.loads(dataset)
    table = _table(dataset).select(list(names))
    return to_longitudinal(table, ds["tau"], seeding.generator(entropy, key))


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """The row of one felip cell (a pure function of the cell)."""
    prm = cell.params
    ds, orc, wl = prm["dataset"], prm["oracle"], prm["workload"]
    start = time.perf_counter()
    dataset = json.dumps(ds, sort_keys=True)
    workload = _workload(wl["sha256"], json.dumps(wl["json"], sort_keys=True))
    schema = workload.schema
    data = _timeline(dataset, schema.names, cell.entropy, tuple(prm["permutation_key"]))
    n = data.base.n
    plan = fe.plan_felip(
        schema,
        n,
        orc["oracle"],
        prm["eps_perm"],
        alpha=prm["alpha"],
        calibration=orc["calibration"],
        selectivity=workload.selectivity,
    )
    options = EstimationOptions()
    groups = plan.assign(seeding.generator(cell.entropy, prm["assignment_key"]))
    result = fe.simulate_felip(
        plan,
        data,
        workload,
        seeding.generator(cell.entropy, cell.spawn_key),
        engine=prm["engine"],
        groups=groups,
        options=options,
    )
    per_t = result.mse_per_timestamp
    g1, g2 = [int(g) for g in plan.layout.g1], [int(g) for g in plan.layout.g2]
    two_d = [g.k for g in plan.grids if len(g.attributes) == 2]
    hash_g = sorted({int(p.g) for p in plan.protocols if hasattr(p, "g")})
    names = sorted({p.name for p in plan.protocols})
    row = {
        "dataset": ds["label"],
        "dataset_name": ds["name"],
        "n": int(n),
        "d": schema.d,
        "tau": int(ds["tau"]),
        "oracle": orc["label"],
        "oracle_name": orc["oracle"],
        "grid_oracles": "/".join(names),
        "calibration": orc["calibration"],
        "longitudinal": bool(orc["longitudinal"]),
        "eps_perm": float(prm["eps_perm"]),
        "alpha": prm["alpha"],
        "eps_1": None if plan.spec.eps_1 is None else float(plan.spec.eps_1),
        "engine": prm["engine"],
        "postprocess": options.postprocess,
        "rep": int(prm["rep"]),
        "lam": workload.lam,
        "n_queries": len(workload.queries),
        "workload_file": wl["file"],
        "workload_sha256": wl["sha256"],
        "m": plan.m,
        "g1": g1,
        "g2": g2,
        "grid_sizes": f"1-D {_span(g1)} cells; 2-D axes {_span(g2)}; "
        f"2-D cells {_span(two_d)}; total {plan.layout.total_cells}",
        "total_cells": int(plan.layout.total_cells),
        "hash_g": hash_g or None,
        "mean_rounds": float(np.mean(result.rounds)),
        "mse_avg": float(np.mean(per_t)),
        "mse_per_timestamp": [float(v) for v in per_t],
        "runtime_s": time.perf_counter() - start,
    }
    return [row]


COLUMNS: tuple[pa.Field, ...] = (
    pa.field("dataset", pa.string()),
    pa.field("dataset_name", pa.string()),
    pa.field("n", pa.int64()),
    pa.field("d", pa.int64()),
    pa.field("tau", pa.int64()),
    pa.field("oracle", pa.string()),
    pa.field("oracle_name", pa.string()),
    pa.field("grid_oracles", pa.string()),
    pa.field("calibration", pa.string()),
    pa.field("longitudinal", pa.bool_()),
    pa.field("eps_perm", pa.float64()),
    pa.field("alpha", pa.float64()),
    pa.field("eps_1", pa.float64()),
    pa.field("engine", pa.string()),
    pa.field("postprocess", pa.string()),
    pa.field("rep", pa.int64()),
    pa.field("lam", pa.int64()),
    pa.field("n_queries", pa.int64()),
    pa.field("workload_file", pa.string()),
    pa.field("workload_sha256", pa.string()),
    pa.field("m", pa.int64()),
    pa.field("g1", pa.list_(pa.int64())),
    pa.field("g2", pa.list_(pa.int64())),
    pa.field("grid_sizes", pa.string()),
    pa.field("total_cells", pa.int64()),
    pa.field("hash_g", pa.list_(pa.int64())),
    pa.field("mean_rounds", pa.float64()),
    pa.field("mse_avg", pa.float64()),
    pa.field("mse_per_timestamp", pa.list_(pa.float64())),
)

KIND = StudyKind(
    name="felip",
    keys=KEYS,
    parse=parse,
    cells=cells,
    run_cell=run_cell,
    columns=COLUMNS,
    summary_by=("dataset", "oracle", "alpha"),
    pivot="eps_perm",
    metric="mse_avg",
)


# ---------------------------------------------------------------------------------- outputs


def _ok_rows(table: pa.Table) -> list[dict[str, Any]]:
    cols = [c for c in table.column_names if c != "mse_per_timestamp"]
    return [r for r in table.select(cols).to_pylist() if r["status"] == "ok"]


def _fmt_ci(values: Sequence[float]) -> str:
    from longldp.experiments.plot import band

    mean, lo, hi = band(values)
    if len(values) < 2:
        return f"{mean:.3e}"
    return f"{mean:.3e} [{lo:.2e}, {hi:.2e}]"


def summary_markdown(table: pa.Table) -> str:
    """Mean MSE_avg with a 95% t-interval per dataset × oracle × ε∞, as a Markdown table.

    Parameters
    ----------
    table : pyarrow.Table
        A felip results table.

    Returns
    -------
    str
        One row per (dataset, oracle, α), one column per ε∞; entries ``mean [low, high]``.
    """
    rows = _ok_rows(table)
    eps = sorted({r["eps_perm"] for r in rows})
    groups: dict[tuple, dict[float, list[float]]] = {}
    reps = 0
    for r in rows:
        key = (r["dataset"], r["oracle"], r["alpha"])
        groups.setdefault(key, {}).setdefault(r["eps_perm"], []).append(r["mse_avg"])
    header = ["dataset", "oracle", "α", *(f"ε∞ = {e:g}" for e in eps)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (dataset, oracle, alpha), by_eps in groups.items():
        reps = max(reps, *(len(v) for v in by_eps.values()))
        cells_ = [_fmt_ci(by_eps[e]) if e in by_eps else "" for e in eps]
        a = "–" if alpha is None else f"{alpha:g}"
        lines.append("| " + " | ".join([dataset, oracle, a, *cells_]) + " |")
    note = (
        f"Mean MSE_avg over {reps} repetitions, with the 95% Student t interval of the mean "
        "in brackets."
    )
    return note + "\n\n" + "\n".join(lines) + "\n"


def gap_rows(table: pa.Table, better: str, worse: str) -> list[dict[str, Any]]:
    """Paired gap between two oracles per dataset and ε∞ (same repetitions, same α).

    Parameters
    ----------
    table : pyarrow.Table
        A felip results table.
    better, worse : str
        Oracle labels; the gap is ``MSE_avg(worse) − MSE_avg(better)`` per repetition.

    Returns
    -------
    list of dict
        Per (dataset, ε∞): ``ratio`` (mean of ``worse`` over mean of ``better``), the mean
        relative gap ``1 − mean(better)/mean(worse)``, the mean paired difference and its 95%
        t-interval, and the repetitions paired.
    """
    from longldp.experiments.plot import band

    rows = _ok_rows(table)
    index = {(r["dataset"], r["eps_perm"], r["alpha"], r["rep"], r["oracle"]): r for r in rows}
    out: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for (dataset, eps, alpha, rep, oracle), r in index.items():
        if oracle != better:
            continue
        other = index.get((dataset, eps, alpha, rep, worse))
        if other is not None:
            out.setdefault((dataset, eps), []).append((r["mse_avg"], other["mse_avg"]))
    result = []
    for (dataset, eps), pairs in out.items():
        b = np.array([p[0] for p in pairs])
        w = np.array([p[1] for p in pairs])
        mean, lo, hi = band(list(w - b))
        result.append(
            {
                "dataset": dataset,
                "eps_perm": eps,
                "ratio": float(w.mean() / b.mean()),
                "relative_gap": float(1.0 - b.mean() / w.mean()),
                "difference": mean,
                "low": lo,
                "high": hi,
                "reps": len(pairs),
            }
        )
    return result


def gap_markdown(table: pa.Table, better: str, worse: str) -> str:
    """`gap_rows` as a Markdown table (one row per dataset, one column per ε∞)."""
    rows = gap_rows(table, better, worse)
    if not rows:
        return ""
    eps = sorted({r["eps_perm"] for r in rows})
    header = ["dataset", *(f"ε∞ = {e:g}" for e in eps)]
    lines = [
        f"Paired gap MSE_avg({worse}) − MSE_avg({better}): mean difference [95% t-interval] "
        f"and, in parentheses, 1 − mean({better})/mean({worse}). A positive gap means "
        f"{better} is better.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        by_eps = {r["eps_perm"]: r for r in rows if r["dataset"] == dataset}
        entries = []
        for e in eps:
            r = by_eps.get(e)
            if r is None:
                entries.append("")
                continue
            rel = r["relative_gap"]
            entries.append(
                f"{r['difference']:+.2e} [{r['low']:+.1e}, {r['high']:+.1e}] "
                f"({'nan' if math.isnan(rel) else f'{100 * rel:+.1f}%'})"
            )
        lines.append("| " + " | ".join([dataset, *entries]) + " |")
    return "\n".join(lines) + "\n"


def plot_study(table: pa.Table, out: str | Path) -> list[Path]:
    """MSE_avg against ε∞: one PNG with a panel per dataset, and one PNG per dataset."""
    from longldp.experiments.plot import plot_results

    out_dir = Path(out)
    paths = plot_results(table, out_dir, figure_by=(), panel_by=("dataset",), line_by="oracle")
    combined = out_dir / "mse_avg_all_datasets.png"
    paths[0].replace(combined)
    per = plot_results(table, out_dir, figure_by=("dataset",), panel_by=("tau",), line_by="oracle")
    return [combined, *per]


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``summary.md`` and the plots of a felip results table (module docstring)."""
    import pyarrow.parquet as pq

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results.parquet of a felip study")
    parser.add_argument("--out", type=Path, default=None, help="folder (default: beside it)")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("BETTER", "WORSE"),
        help="oracle labels whose paired gap to tabulate (repeatable)",
    )
    args = parser.parse_args(argv)
    path = args.results / "results.parquet" if args.results.is_dir() else args.results
    table = pq.read_table(path)
    out = args.out if args.out is not None else path.parent
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# FELIP study: summary\n", summary_markdown(table)]
    for better, worse in args.pair or []:
        parts += ["", gap_markdown(table, better, worse)]
    (out / "summary.md").write_text("\n".join(parts))
    for p in plot_study(table, out):
        print(p)
    print(out / "summary.md")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
