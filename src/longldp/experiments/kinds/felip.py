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
    workload_dir = "workloads/felip"    # default: <output folder of the run>/workloads
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
``(4, d)``, and saved as ``<workload_dir>/<dataset label>.json`` (default: the ``workloads``
folder inside the run's output folder, ``longldp run --out``; listing the cells without a run
saves nothing). A later run (a resume) loads
that file instead of generating again, after checking that it fits the dataset (same
attributes and domains, λ and number of queries); a file that does not fit is an error naming
``workload_dir``. The workload's JSON is part of each cell's parameters, so a changed workload
gives new cell ids; rows record its file name and SHA-256.

Random streams (`longldp.experiments.seeding`): the row permutations of dataset d in
repetition r ``(1, d, r)`` and the partition of its users among the grids ``(3, d, r)`` are
shared by every oracle and ε∞ of that repetition (common random numbers, so oracles are
compared on the same data and groups); the reports of a cell ``(2, d, r, o, e, l)`` (oracle o,
ε∞ index e, α index l; l = 0 for a one-shot oracle); the workload of dataset d ``(4, d)``.

The study's summary table (mean MSE_avg with a 95% t-interval per dataset × oracle × ε∞, and
paired gaps between two oracles) and its plots come from `longldp.experiments.reports.felip`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, ProtocolEntry, StudyKind
from longldp.simulate import ENGINES

__all__ = [
    "ASSIGNMENT",
    "COLUMNS",
    "KIND",
    "WORKLOAD",
    "DatasetEntry",
    "FelipStudySpec",
    "OracleEntry",
    "run_cell",
    "study_workload",
    "workload_dir",
]

#: Namespace of the streams that partition the users among the grids.
ASSIGNMENT = 3
#: Namespace of the streams that seed the workloads.
WORKLOAD = 4
_CALIBRATIONS = ("exact", "paper")
_DATASET_NAMES = ("adult", "loan", "loans-full-schema", "big5", "bfive", "bfi", "bms-pos")
#: `plan_felip`'s own oracle names: FELIP picks the oracle of each grid.
_ADAPTIVE = {
    "adaptive": ProtocolEntry("", "adaptive", {}, longitudinal=False),
    "adaptive-longitudinal": ProtocolEntry("", "adaptive-longitudinal", {}, longitudinal=True),
}


# ---------------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class DatasetEntry(base.PlainEntry):
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


@dataclass(frozen=True)
class OracleEntry(base.PlainEntry):
    """A checked oracle entry: label, `plan_felip` oracle name, calibration, chain or not."""

    label: str
    oracle: str
    calibration: str
    longitudinal: bool


@dataclass(frozen=True, kw_only=True)
class FelipStudySpec(GridSpec):
    """The checked keys of a felip study (datasets: `DatasetEntry`)."""

    oracles: tuple[OracleEntry, ...]
    lam: int
    n_queries: int
    calibration: str
    workload_dir: str | None


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(1),
    base.engine_key(ENGINES, "count-level"),
    sc.Key("calibration", sc.choice(_CALIBRATIONS), default="exact"),
    base.EPS_PERM,
    base.alpha_key(default=(0.1,)),
    sc.Key("lam", sc.integer(1), default=3),
    sc.Key("n_queries", sc.integer(1), default=100),
    sc.Key("workload_dir", sc.string),
    base.entries_key("datasets"),
    base.entries_key("oracles"),
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
    entry, values = base.parse_protocol_entry(
        where,
        table,
        name_key="oracle",
        one_shot=True,
        extra=_ADAPTIVE,
        options=False,
        extra_keys=(sc.Key("calibration", sc.choice(_CALIBRATIONS)),),
    )
    oracle = OracleEntry(
        entry.label, entry.name, values["calibration"] or calibration, entry.longitudinal
    )
    try:
        oracle_spec(entry.name, 1.0, None, 0.1 if entry.longitudinal else None, oracle.calibration)
    except ValueError as err:
        raise sc.fail(where, "oracle", f"an oracle FELIP can use ({err})", entry.name) from None
    return oracle


def parse(values: dict[str, Any], where: str) -> FelipStudySpec:
    """Turn the checked top-level values into a `FelipStudySpec` (checks each entry)."""
    datasets, oracles = base.parse_grid(
        where, values, parse_dataset_entry, "oracles", parse_oracle_entry, values["calibration"]
    )
    files = [_slug(d.label) for d in datasets]
    if len(set(files)) != len(files):
        raise sc.fail(where, "datasets", "labels that give distinct workload file names", files)
    chosen = {k: values[k] for k in ("lam", "n_queries", "calibration", "workload_dir")}
    return FelipStudySpec(oracles=oracles, **chosen, **base.grid_values(values, datasets))


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


def workload_dir(study: Any) -> Path | None:
    """Folder of a study's workloads: its ``workload_dir`` key, else ``<out>/workloads`` in
    the run's output folder; None when neither is known (cells listed without a run)."""
    spec: FelipStudySpec = study.spec
    if spec.workload_dir is not None:
        return Path(spec.workload_dir)
    out = getattr(study, "out_dir", None)
    return None if out is None else Path(out) / "workloads"


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
    folder = workload_dir(study)
    path = (folder if folder is not None else Path("workloads")) / f"{_slug(ds.label)}.json"
    if folder is not None and path.is_file():
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
    if folder is not None:
        _write_atomic(path, text)
    return path, text


def cells(study: Any) -> list[Cell]:
    """Every cell of a felip study, in table order; saves or reuses the workloads."""
    spec: FelipStudySpec = study.spec
    workloads = []
    for d in range(len(spec.datasets)):
        path, text = study_workload(study, d)
        workloads.append(
            {
                "file": path.name,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "json": json.loads(text),
            }
        )

    def params(v: Any, at: Any) -> dict[str, Any]:
        d, r = at["dataset"], v["rep"]
        return {
            "dataset": v["dataset"].as_json(),
            "oracle": v["oracle"].as_json(),
            "eps_perm": v["eps_perm"],
            "alpha": v["alpha"],
            "rep": r,
            "engine": spec.engine,
            "workload": workloads[d],
            "permutation_key": [seeding.PERMUTATION, d, r],
            "assignment_key": [ASSIGNMENT, d, r],
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "rep": range(study.repetitions),
        **base.budget_axes("oracle", spec.oracles, spec, lambda o: o.longitudinal),
    }
    return base.grid(study, "felip", axes, params)


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
        **base.mse_columns(per_t),
        "runtime_s": time.perf_counter() - start,
    }
    return [row]


COLUMNS = base.columns(
    "dataset:str dataset_name:str n:int d:int tau:int oracle:str oracle_name:str "
    "grid_oracles:str calibration:str longitudinal:bool eps_perm:float alpha:float "
    "eps_1:float engine:str postprocess:str rep:int lam:int n_queries:int workload_file:str "
    "workload_sha256:str m:int g1:[int] g2:[int] grid_sizes:str total_cells:int hash_g:[int] "
    "mean_rounds:float mse_avg:float mse_per_timestamp:[float]"
)

KIND = StudyKind(
    "felip", KEYS, parse, cells, run_cell, COLUMNS, summary_by=("dataset", "oracle", "alpha"),
    plot={"figure_by": ("alpha",), "panel_by": ("dataset",), "line_by": "oracle"},
)  # fmt: skip
