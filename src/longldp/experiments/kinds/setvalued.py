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
import pyarrow as pa

import longldp as ll
from longldp import data
from longldp import postprocess as pp
from longldp.apps.setvalued import mining as sv
from longldp.apps.setvalued.metrics import SetValuedTruth
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import Cell, StudyKind

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
NONE = "none"
ADAPTIVE = "adaptive"
APP_NAMES = tuple(sv.APPS)
#: Parameters the grid sets; a protocol entry may not give them.
_GRID_PARAMETERS = ("k", "eps_perm", "eps_1", "eps")
_PROBE = {"k": 64, "eps_perm": 1.0, "eps_1": 0.5, "eps": 1.0}


@dataclass(frozen=True)
class SetDatasetSpec:
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

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "name": self.name,
            "label": self.label,
            "tau": self.tau,
            "source": self.source,
            "n": self.n,
            "seed": self.seed,
            "attributes": None if self.attributes is None else list(self.attributes),
            "exclude": {a: list(v) for a, v in self.exclude.items()},
        }


@dataclass(frozen=True)
class SetProtocolSpec:
    """A checked protocol entry: label, registry name (or ``"adaptive"``) and options."""

    label: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    longitudinal: bool = True
    takes_eps_1: bool = True

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "label": self.label,
            "name": self.name,
            "options": dict(self.options),
            "longitudinal": self.longitudinal,
            "takes_eps_1": self.takes_eps_1,
        }


@dataclass(frozen=True)
class SetValuedSpec:
    """The checked keys of a set-valued study."""

    datasets: tuple[SetDatasetSpec, ...]
    protocols: tuple[SetProtocolSpec, ...]
    apps: tuple[str, ...]
    k: int
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...] | None
    postprocess: tuple[str, ...]
    policy: str
    mse_reading: str
    engine: str
    per_timestamp: bool


def _boolean(where: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise sc.fail(where, name, "true or false", value)
    return value


KEYS: tuple[sc.Key, ...] = (
    sc.Key("tau", sc.integer(1)),
    sc.Key("engine", sc.choice(sv.ENGINES), default="count-level"),
    sc.Key("apps", sc.string_list(APP_NAMES), required=True),
    sc.Key("k", sc.integer(1), default=64),
    sc.Key("eps_perm", sc.number_list(what="ε∞ values"), required=True),
    sc.Key("alpha", sc.number_list(lower=0.0, upper=1.0, what="α values")),
    sc.Key("postprocess", sc.string_list([NONE, *pp.METHODS]), default=(NONE,)),
    sc.Key("policy", sc.choice(sv.POLICIES), default="reestimate"),
    sc.Key("mse_reading", sc.choice(sv.MSE_READINGS), default="literal"),
    sc.Key("per_timestamp", _boolean, default=True),
    sc.Key("datasets", sc.table_list, required=True),
    sc.Key("protocols", sc.table_list, required=True),
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


def _option(where: str, name: str, value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    raise sc.fail(where, name, "a number, a string or a boolean", value)


def parse_protocol(where: str, table: Any) -> SetProtocolSpec:
    """Check one protocol entry: ``"adaptive"`` or a registry name, a label and its options."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    infos = {i.name: i for i in ll.list_protocols()}
    allowed_names = ", ".join(repr(n) for n in [ADAPTIVE, *infos])
    raw = table.get("name")
    if raw is None:
        raise ValueError(f"{where}: missing required key 'name'.")
    name = sc.string(where, "name", raw)
    if name.lower() == ADAPTIVE:
        name, option_names, longitudinal, takes_eps_1 = ADAPTIVE, [], False, False
    else:
        try:
            name = ll.get_protocol_class(name).name
        except ValueError:
            raise sc.fail(where, "name", f"one of {allowed_names}", raw) from None
        info = infos[name]
        option_names = [p for p in info.parameters if p not in _GRID_PARAMETERS]
        longitudinal = bool(info.longitudinal)
        takes_eps_1 = "eps_1" in info.parameters
    keys = [sc.Key("name", sc.string, required=True), sc.Key("label", sc.string)]
    keys += [sc.Key(o, _option) for o in option_names]
    try:
        values = sc.check_table(where, table, keys)
    except ValueError as err:
        if any(g in table for g in _GRID_PARAMETERS):
            raise ValueError(f"{err} (k, eps_perm and eps_1 come from the grid)") from None
        raise
    options = {o: values[o] for o in option_names if values[o] is not None}
    spec = SetProtocolSpec(values["label"] or name, name, options, longitudinal, takes_eps_1)
    if name != ADAPTIVE:
        try:
            _build_probe(spec, _PROBE["eps_perm"], _PROBE["eps_1"])
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}: bad options for {name}: {err}") from None
    return spec


def _build_probe(proto: SetProtocolSpec, eps_perm: float, eps_1: float | None) -> None:
    """Construct the registry protocol once (raises `ValueError` when unreachable)."""
    params: dict[str, Any] = {"k": _PROBE["k"], **proto.options}
    if proto.longitudinal:
        params["eps_perm"] = eps_perm
        if proto.takes_eps_1:
            params["eps_1"] = eps_1
    else:
        params["eps"] = eps_perm
    ll.protocol(proto.name, **params)


def parse(values: dict[str, Any], where: str) -> SetValuedSpec:
    """Turn the checked top-level values into a `SetValuedSpec` (checks each entry)."""
    datasets = tuple(
        parse_dataset(f"{where}: datasets[{i}]", t, values["tau"])
        for i, t in enumerate(values["datasets"])
    )
    protocols = tuple(
        parse_protocol(f"{where}: protocols[{i}]", t) for i, t in enumerate(values["protocols"])
    )
    for what, labels in (
        ("datasets", [d.label for d in datasets]),
        ("protocols", [p.label for p in protocols]),
    ):
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise sc.fail(where, what, "entries with distinct labels (set 'label')", dup)
    if values["alpha"] is None and any(p.longitudinal and p.takes_eps_1 for p in protocols):
        raise ValueError(
            f"{where}: missing key 'alpha' (the α grid of the longitudinal protocols)."
        )
    return SetValuedSpec(
        datasets=datasets,
        protocols=protocols,
        apps=tuple(a.lower() for a in values["apps"]),
        k=values["k"],
        eps_perm=values["eps_perm"],
        alpha=values["alpha"],
        postprocess=values["postprocess"],
        policy=values["policy"],
        mse_reading=values["mse_reading"],
        engine=values["engine"],
        per_timestamp=values["per_timestamp"],
    )


def _skip_reason(
    proto: SetProtocolSpec, app: str, eps_perm: float, eps_1: float | None
) -> str | None:
    """Why the chain cannot run at this budget (LDPMiner: half of it per phase), or None."""
    if proto.name == ADAPTIVE or not proto.longitudinal:
        return None
    half = 0.5 if app == "ldpminer" else 1.0
    try:
        _build_probe(proto, half * eps_perm, None if eps_1 is None else half * eps_1)
    except ValueError as err:
        return str(err)
    return None


def cells(study: Any) -> list[Cell]:
    """Every cell of a set-valued study, in table order (see the module docstring)."""
    spec: SetValuedSpec = study.spec
    out: list[Cell] = []
    reasons: dict[tuple[str, int, int, int], str | None] = {}
    for d, ds in enumerate(spec.datasets):
        for r in range(study.repetitions):
            for a, app in enumerate(spec.apps):
                for p, proto in enumerate(spec.protocols):
                    chain_alpha = proto.longitudinal and proto.takes_eps_1
                    alphas = list(enumerate(spec.alpha or ())) if chain_alpha else [(0, None)]
                    for e, eps in enumerate(spec.eps_perm):
                        for l, alpha in alphas:
                            eps_1 = None if alpha is None else alpha * eps
                            if (app, p, e, l) not in reasons:
                                reasons[app, p, e, l] = _skip_reason(proto, app, eps, eps_1)
                            for m, method in enumerate(spec.postprocess):
                                params = {
                                    "dataset": ds.as_json(),
                                    "app": app,
                                    "k": spec.k,
                                    "protocol": proto.as_json(),
                                    "eps_perm": eps,
                                    "alpha": alpha,
                                    "eps_1": eps_1,
                                    "rep": r,
                                    "engine": spec.engine,
                                    "postprocess": method,
                                    "policy": spec.policy,
                                    "mse_reading": spec.mse_reading,
                                    "per_timestamp": spec.per_timestamp,
                                    "permutation_key": [seeding.PERMUTATION, d, r],
                                    "skip_reason": reasons[app, p, e, l],
                                }
                                key = (seeding.CELL, d, r, a, p, e, l, m)
                                out.append(Cell("setvalued", study.seed, key, params, len(out)))
    return out


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
    base = {
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
        return [
            base | {"target": t, "status": "skipped", "skip_reason": prm["skip_reason"]}
            for t in targets
        ]
    sets = load_sets(ds_key)
    truth = _truth(ds_key)
    values = _longitudinal(ds_key, cell.entropy, tuple(prm["permutation_key"]))
    n_items = int(sets.domain.size)
    k = prm["k"] if prm["app"] == "svsm" else min(prm["k"], n_items)
    budget: dict[str, Any]
    if proto["longitudinal"]:
        budget = {"eps_perm": prm["eps_perm"]}
        if proto["takes_eps_1"]:
            budget["eps_1"] = prm["eps_1"]
    else:
        budget = {"eps": prm["eps_perm"]}
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
        row = base | {
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
            row[f"{m}_t"] = [float(x) for x in table.values[m]] if prm["per_timestamp"] else None
        rows.append(row)
    return rows


COLUMNS: tuple[pa.Field, ...] = (
    pa.field("dataset", pa.string()),
    pa.field("n", pa.int64()),
    pa.field("n_items", pa.int64()),
    pa.field("tau", pa.int64()),
    pa.field("app", pa.string()),
    pa.field("target", pa.string()),
    pa.field("k", pa.int64()),
    pa.field("protocol", pa.string()),
    pa.field("protocol_name", pa.string()),
    pa.field("options", pa.string()),
    pa.field("longitudinal", pa.bool_()),
    pa.field("eps_perm", pa.float64()),
    pa.field("alpha", pa.float64()),
    pa.field("eps_1", pa.float64()),
    pa.field("postprocess", pa.string()),
    pa.field("policy", pa.string()),
    pa.field("engine", pa.string()),
    pa.field("mse_reading", pa.string()),
    pa.field("rep", pa.int64()),
    pa.field("data_spawn_key", pa.list_(pa.int64())),
    pa.field("mse_avg", pa.float64()),
    pa.field("precision", pa.float64()),
    pa.field("recall", pa.float64()),
    pa.field("f1", pa.float64()),
    pa.field("ncr", pa.float64()),
    pa.field("ell_mean", pa.float64()),
    *(pa.field(f"{m}_t", pa.list_(pa.float64())) for m in METRICS),
)

KIND = StudyKind(
    name="setvalued",
    keys=KEYS,
    parse=parse,
    cells=cells,
    run_cell=run_cell,
    columns=COLUMNS,
    summary_by=("dataset", "app", "target", "protocol", "alpha", "postprocess"),
    pivot="eps_perm",
    metric="mse_avg",
)
