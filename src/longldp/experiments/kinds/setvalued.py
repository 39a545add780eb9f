"""The ``setvalued`` kind: SVIM, SVSM and LDPMiner on set-valued data, one-shot or longitudinal.

One cell runs one app (`longldp.apps.setvalued.mine`) over every timestamp of one dataset for
one (repetition, protocol, ε∞, α, post-processing) and scores it against the exact ground
truth. A cell gives one row per *target*: ``"items"`` for SVIM and LDPMiner; ``"itemsets"`` and
``"items"`` for SVSM, whose internal SVIM is scored too (this is how [002] runs SVIM and SVSM
jointly). Metrics are the top-k MSE_avg of seed [000] and the precision, recall, F1 and NCR of
WLJ, each averaged over the τ timestamps; the per-timestamp values are kept as lists.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 5                             # default τ of the datasets (each may set its own)
    engine = "count-level"              # or "per-user", "reports"
    apps = ["svim", "svsm"]             # "svim", "svsm", "ldpminer"
    k = 64                              # top-k; items: min(k, |I|) (all items if fewer)
    eps_perm = [0.5, 1.0, 2.0]          # ε∞ grid (ε of a one-shot protocol)
    alpha = [0.6]                       # α = ε1/ε∞ grid (longitudinal protocols only)
    postprocess = ["none"]              # or "norm-sub", ... (longldp.postprocess.METHODS)
    policy = "reestimate"               # or "freeze" (candidates and ℓ after t = 0)
    mse_reading = "literal"             # or "estimated" (how a false positive enters the MSE)
    per_timestamp = true                # keep the per-timestamp metric lists
    datasets = [
      {name = "bms-pos-standin", tau = 15},                  # stand-in: optional n, seed
      {name = "movielens", tau = 1, n = 500},                # bundled sets: n = first rows
      {name = "bfi", attributes = ["A1", "C1", "E1", "N1", "O1"], label = "Bfive"},
      {name = "lending-club", attributes = ["sub_grade", "delinq_2yrs"],
       exclude = {delinq_2yrs = ["0"]}},                     # table -> item sets
    ]
    protocols = [
      {name = "L-GRR", calibration = "paper", label = "L-GRR (paper)"},
      {name = "OLOLOHA"},
      {name = "adaptive", label = "one-shot"},              # one-shot PSFO (GRR/OLH choice)
    ]

A dataset entry names a bundled set-valued dataset or stand-in (``longldp datasets``: kind
``sets``) or a bundled table. A table becomes item sets with `longldp.data.table_to_itemsets`
(one item per attribute=value pair; ``attributes`` selects and orders the attributes,
``exclude`` drops values from the sets and the item domain). ``n`` keeps the first ``n`` rows
(a stand-in is generated with ``n`` sets instead; ``seed`` is the stand-in's own seed,
default 0). A protocol entry is ``name`` (``"adaptive"``, a one-shot registry name such as
``"OLH"``, or a longitudinal chain such as ``"L-OSUE"``), an optional ``label`` (default: the
name) and the protocol's options (``calibration``, ``hash_pool`` ...). A longitudinal chain
takes ε∞ = ``eps_perm`` and ε1 = α·ε∞ (one cell per α); a one-shot protocol takes
ε = ``eps_perm`` and runs once per value, with ``alpha`` empty. A combination the chain cannot
reach (L-OUE above its largest α; LDPMiner runs each phase at half of ε∞ and ε1) is kept with
``status = "skipped"`` and the message in ``skip_reason``.

Ground truth is computed once per dataset and process (`setvalued_truth` of the timestamp-0
data is exact for every timestamp, because later timestamps permute whole sets) and cached
with its lazily mined top-k lists; the interpolated data of a repetition is cached too.

Random streams (`longldp.experiments.seeding`): the permutations of dataset d in repetition r
``(1, d, r)``, shared by every app, protocol, ε∞, α and post-processing of that repetition
(common random numbers); the mechanism's randomness of a cell ``(2, d, r, a, p, e, l, m)``
(app a, protocol p, ε∞ index e, α index l — 0 for one-shot protocols —, post-processing m).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longldp import data
from longldp import postprocess as pp
from longldp.apps.setvalued import mining as sv
from longldp.apps.setvalued.metrics import SetValuedTruth
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, ProtocolEntry, StudyKind
from longldp.simulate import ENGINES

__all__ = [
    "KIND",
    "METRICS",
    "SetDatasetSpec",
    "SetProtocolSpec",
    "SetValuedSpec",
    "load_sets",
    "run_cell",
]

#: Metrics of every row (averaged over τ, and per timestamp as ``<metric>_t``).
METRICS = ("mse", "precision", "recall", "f1", "ncr")
NONE = base.NONE
ADAPTIVE = "adaptive"
APP_NAMES = tuple(sv.APPS)
#: Domain size at which a chain is checked against a budget (reachability only).
_PROBE_K = 64


@dataclass(frozen=True)
class SetDatasetSpec(base.PlainEntry):
    """A checked dataset entry: where the sets come from, how many, and τ.

    Attributes
    ----------
    name : str
        Registry name (``longldp.data.load``).
    label : str
        Name shown in the results (default: ``name``).
    tau : int
        Number of timestamps.
    source : {"sets", "table"}
        Bundled set-valued data or stand-in, or a table turned into item sets.
    n : int or None
        First ``n`` rows (tables, bundled sets) or the stand-in's size.
    seed : int
        Stand-in seed.
    attributes : tuple of str or None
        Table attributes (default: all).
    exclude : mapping of str to tuple of str
        Table values dropped from the sets and the item domain.
    """

    name: str
    label: str
    tau: int
    source: str
    n: int | None = None
    seed: int = 0
    attributes: tuple[str, ...] | None = None
    exclude: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


#: A protocol entry of this kind: ``"adaptive"``, a one-shot oracle or a chain.
SetProtocolSpec = ProtocolEntry


@dataclass(frozen=True, kw_only=True)
class SetValuedSpec(GridSpec):
    """The checked keys of a set-valued study (datasets: `SetDatasetSpec`)."""

    protocols: tuple[ProtocolEntry, ...]
    apps: tuple[str, ...]
    k: int
    postprocess: tuple[str, ...]
    policy: str
    mse_reading: str
    per_timestamp: bool


def _boolean(where: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise sc.fail(where, name, "true or false", value)
    return value


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(),
    base.engine_key(ENGINES, "count-level"),
    sc.Key("apps", sc.string_list(APP_NAMES), required=True),
    sc.Key("k", sc.integer(1), default=64),
    base.EPS_PERM,
    base.alpha_key(),
    base.postprocess_key([NONE, *pp.METHODS]),
    sc.Key("policy", sc.choice(sv.POLICIES), default="reestimate"),
    sc.Key("mse_reading", sc.choice(sv.MSE_READINGS), default="literal"),
    sc.Key("per_timestamp", _boolean, default=True),
    base.entries_key("datasets"),
    base.entries_key("protocols"),
)


def _exclude(where: str, name: str, value: Any) -> dict[str, tuple[str, ...]]:
    allowed = "a table of attribute = [labels to drop]"
    if not isinstance(value, Mapping):
        raise sc.fail(where, name, allowed, value)
    out = {}
    for attr, labels in value.items():
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise sc.fail(where, name, allowed, value)
        out[str(attr)] = tuple(labels)
    return out


def _kinds_of_datasets() -> dict[str, str]:
    return {info.name: info.kind for info in data.list_datasets()}


def parse_dataset(where: str, table: Any, default_tau: int | None) -> SetDatasetSpec:
    """Check one dataset entry (registry name, τ, row limit, table → item-set options)."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    kinds = _kinds_of_datasets()
    raw = table.get("name")
    if raw is None:
        raise ValueError(f"{where}: missing required key 'name'.")
    name = sc.string(where, "name", raw).lower()
    if name not in kinds:
        raise sc.fail(where, "name", "one of " + ", ".join(repr(n) for n in kinds), raw)
    source = "sets" if kinds[name] == "sets" else "table"
    keys = [
        sc.Key("name", sc.string, required=True),
        sc.Key("label", sc.string),
        sc.Key("tau", sc.integer(1)),
        sc.Key("n", sc.integer(1)),
    ]
    if name.endswith("-standin"):
        keys.append(sc.Key("seed", sc.integer(0), default=0))
    if source == "table":
        keys += [sc.Key("attributes", sc.string_list()), sc.Key("exclude", _exclude, default={})]
    values = sc.check_table(where, table, keys)
    tau = values["tau"] if values["tau"] is not None else default_tau
    if tau is None:
        raise ValueError(f"{where}: missing key 'tau' (give it here or at the top level).")
    spec = SetDatasetSpec(
        name=name,
        label=values["label"] or name,
        tau=tau,
        source=source,
        n=values["n"],
        seed=values.get("seed") or 0,
        attributes=values.get("attributes"),
        exclude=values.get("exclude") or {},
    )
    if source == "table":  # cheap: check attributes and excluded labels now
        try:
            load_sets(json.dumps(spec.as_json(), sort_keys=True))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return spec


_ONE_SHOT_PSFO = {ADAPTIVE: ProtocolEntry("", ADAPTIVE, {}, False, False)}


def parse_protocol(where: str, table: Any) -> ProtocolEntry:
    """Check one protocol entry: ``"adaptive"`` or a registry name, a label and its options."""
    return base.parse_protocol_entry(where, table, one_shot=True, extra=_ONE_SHOT_PSFO)[0]


def parse(values: dict[str, Any], where: str) -> SetValuedSpec:
    """Turn the checked top-level values into a `SetValuedSpec` (checks each entry)."""
    datasets, protocols = base.parse_grid(where, values, parse_dataset, "protocols", parse_protocol)
    if values["alpha"] is None and any(p.uses_alpha for p in protocols):
        raise ValueError(
            f"{where}: missing key 'alpha' (the α grid of the longitudinal protocols)."
        )
    chosen = {k: values[k] for k in ("k", "postprocess", "policy", "mse_reading", "per_timestamp")}
    return SetValuedSpec(
        protocols=protocols,
        apps=tuple(a.lower() for a in values["apps"]),
        **chosen,
        **base.grid_values(values, datasets),
    )


def _reachable(proto: ProtocolEntry, app: str, eps_perm: float, eps_1: float | None) -> None:
    """Raise `ValueError` when the chain cannot run at this budget (LDPMiner: half per phase)."""
    if proto.name == ADAPTIVE or not proto.longitudinal:
        return
    half = 0.5 if app == "ldpminer" else 1.0
    proto.build(_PROBE_K, half * eps_perm, None if eps_1 is None else half * eps_1)


def cells(study: Any) -> list[Cell]:
    """Every cell of a set-valued study, in table order (see the module docstring)."""
    spec: SetValuedSpec = study.spec
    reasons = base.SkipReasons()

    def params(v: Any, at: Any) -> dict[str, Any]:
        proto, app, eps, alpha = v["protocol"], v["app"], v["eps_perm"], v["alpha"]
        eps_1 = base.eps_1_at(eps, alpha)
        point = (app, at["protocol"], at["eps_perm"], at["alpha"])
        return {
            "dataset": v["dataset"].as_json(),
            "app": app,
            "k": spec.k,
            "protocol": proto.as_json(),
            "eps_perm": eps,
            "alpha": alpha,
            "eps_1": eps_1,
            "rep": v["rep"],
            "engine": spec.engine,
            "postprocess": v["postprocess"],
            "policy": spec.policy,
            "mse_reading": spec.mse_reading,
            "per_timestamp": spec.per_timestamp,
            "permutation_key": [seeding.PERMUTATION, at["dataset"], v["rep"]],
            "skip_reason": reasons(point, _reachable, proto, app, eps, eps_1),
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "rep": range(study.repetitions),
        "app": spec.apps,
        **base.budget_axes("protocol", spec.protocols, spec, lambda p: p.uses_alpha),
        "postprocess": spec.postprocess,
    }
    return base.grid(study, "setvalued", axes, params)


@functools.lru_cache(maxsize=2)
def load_sets(dataset: str) -> data.SetData:
    """Timestamp-0 item sets of a dataset entry (JSON of `SetDatasetSpec`), cached per process.

    Parameters
    ----------
    dataset : str
        ``json.dumps(SetDatasetSpec.as_json(), sort_keys=True)``.

    Returns
    -------
    longldp.data.SetData
    """
    spec = json.loads(dataset)
    name, n = spec["name"], spec["n"]
    if name.endswith("-standin"):
        sets = data.load(name, seed=spec["seed"], n=n)
        assert isinstance(sets, data.SetData)
        return sets
    loaded = data.load(name)
    if spec["source"] == "table":
        assert isinstance(loaded, data.Table)
        if n is not None and n < loaded.n:
            loaded = loaded.take(np.arange(n))
        return data.table_to_itemsets(loaded, spec["attributes"], spec["exclude"] or None)
    assert isinstance(loaded, data.SetData)
    if n is not None and n < loaded.n:
        loaded = loaded.take(np.arange(n))
    return loaded


@functools.lru_cache(maxsize=2)
def _truth(dataset: str) -> SetValuedTruth:
    """Ground truth of every timestamp: one shared object (whole sets are permuted)."""
    spec = json.loads(dataset)
    one = sv.setvalued_truth(load_sets(dataset))
    return SetValuedTruth(one.timestamps * spec["tau"])


@functools.lru_cache(maxsize=2)
def _longitudinal(dataset: str, entropy: int, perm_key: tuple[int, ...]) -> Any:
    """The interpolated data of one (dataset, repetition), cached per process."""
    spec = json.loads(dataset)
    return data.to_longitudinal(
        load_sets(dataset), spec["tau"], seeding.generator(entropy, perm_key)
    )


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Rows of one set-valued cell: one per target (a pure function of the cell)."""
    prm = cell.params
    ds, proto = prm["dataset"], prm["protocol"]
    ds_key = json.dumps(ds, sort_keys=True)
    row = {
        "dataset": ds["label"],
        "tau": ds["tau"],
        "app": sv.APPS[prm["app"]],
        "protocol": proto["label"],
        "protocol_name": proto["name"],
        "options": json.dumps(proto["options"], sort_keys=True),
        "longitudinal": proto["longitudinal"],
        "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"],
        "eps_1": prm["eps_1"],
        "postprocess": prm["postprocess"],
        "policy": prm["policy"],
        "engine": prm["engine"],
        "mse_reading": prm["mse_reading"],
        "rep": prm["rep"],
        "data_spawn_key": prm["permutation_key"],
    }
    targets = ("itemsets", "items") if prm["app"] == "svsm" else ("items",)
    if prm["skip_reason"] is not None:
        return base.skipped_rows(row, "target", targets, prm["skip_reason"])
    sets = load_sets(ds_key)
    truth = _truth(ds_key)
    values = _longitudinal(ds_key, cell.entropy, tuple(prm["permutation_key"]))
    n_items = int(sets.domain.size)
    k = prm["k"] if prm["app"] == "svsm" else min(prm["k"], n_items)
    budget = ProtocolEntry(**proto).budget(prm["eps_perm"], prm["eps_1"])
    method = None if prm["postprocess"] == NONE else prm["postprocess"]
    start = time.perf_counter()
    run = sv.mine(
        values,
        prm["app"],
        k=k,
        protocol=proto["name"],
        rng=seeding.generator(cell.entropy, cell.spawn_key),
        engine=prm["engine"],
        policy=prm["policy"],
        postprocess=method,
        truth=truth,
        mse_reading=prm["mse_reading"],
        n_items=n_items,
        **budget,
        **proto["options"],
    )
    seconds = time.perf_counter() - start
    summary = run.summary()
    diagnostics = {"items": run.result.items or run.result, "itemsets": run.result}
    rows = []
    for target in targets:
        table = run.metrics[target]
        ells = [d.get("ell") for d in diagnostics[target].diagnostics]
        out = row | {
            "target": target,
            "k": int(table.k),
            "n": int(sets.n),
            "n_items": n_items,
            "status": "ok",
            "mse_avg": summary[target]["mse"],
            **{m: summary[target][m] for m in METRICS if m != "mse"},
            "ell_mean": float(np.mean(ells)) if all(e is not None for e in ells) else None,
            "runtime_s": seconds,
        }
        for m in METRICS:
            out[f"{m}_t"] = [float(x) for x in table.values[m]] if prm["per_timestamp"] else None
        rows.append(out)
    return rows


COLUMNS = base.columns(
    "dataset:str n:int n_items:int tau:int app:str target:str k:int protocol:str "
    "protocol_name:str options:str longitudinal:bool eps_perm:float alpha:float eps_1:float "
    "postprocess:str policy:str engine:str mse_reading:str rep:int data_spawn_key:[int] "
    "mse_avg:float precision:float recall:float f1:float ncr:float ell_mean:float "
    + " ".join(f"{m}_t:[float]" for m in METRICS)
)

KIND = StudyKind(
    "setvalued", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "app", "target", "protocol", "alpha", "postprocess"),
    plot={"figure_by": ("app", "target", "alpha", "postprocess"), "panel_by": ("dataset",)},
    linear_metrics=("precision", "f1", "ncr"),
)  # fmt: skip
