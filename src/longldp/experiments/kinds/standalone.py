"""The ``standalone`` kind: frequency oracles compared on their own, MSE_avg over τ.

For every dataset attribute, repetition, protocol, ε∞ and α of the study, one cell interpolates
the attribute to τ timestamps (`longldp.data.to_longitudinal`), collects every timestamp
through the protocol with the study's engine (`longldp.simulate.simulate`, no
post-processing), then applies each post-processing of the study to the *same* raw estimates
and computes MSE_avg ([002] eq. 1) and the MSE of each timestamp. A cell gives one row per
post-processing.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 10                            # default τ of the datasets (each may set its own)
    engine = "per-user"                 # or "reports", "count-level"
    eps_perm = [0.5, 1.0, 2.0]          # ε∞ grid
    alpha = [0.1, 0.4, 0.6]             # α = ε1/ε∞ grid, each in (0, 1)
    postprocess = ["none", "algorithm-1"]
    metrics = ["mse_avg", "mse_per_timestamp", "max_spent_epsilon"]
    datasets = [{name = "adult", attributes = ["age"], tau = 260}]   # see experiments.datasets
    protocols = [{name = "L-GRR", calibration = "paper", label = "L-GRR (paper)"}, ...]

A protocol entry is ``name`` (a longitudinal protocol of the registry), an optional ``label``
(default: the name; labels must differ) and the protocol's own options (``calibration``,
``hash_pool``, ``b``, ``d`` ...). ε∞ goes in as ``eps_perm`` and ε1 = α·ε∞ as ``eps_1``; a
protocol without ε1 (dBitFlipPM) runs once per ε∞ with ``alpha`` left empty (null). A
combination the protocol cannot reach (L-OUE and L-SOUE above their maximum α) raises
`ValueError` at construction: its rows are kept with ``status = "skipped"`` and the message in
``skip_reason``.

Random streams (`longldp.experiments.seeding`): synthetic data ``(0, d)``; the permutations of
attribute a of dataset d in repetition r ``(1, d, a, r)``, shared by every protocol, ε∞ and α
of that repetition; the protocol's randomness of a cell ``(2, d, a, r, p, e, l)``.
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
from longldp import metrics as mt
from longldp import postprocess as pp
from longldp.data import to_longitudinal
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import DatasetSpec, attribute_codes, parse_dataset
from longldp.experiments.kinds import Cell, StudyKind
from longldp.simulate import ENGINES, simulate

__all__ = ["KIND", "METRICS", "ProtocolSpec", "StandaloneSpec", "run_cell"]

#: Metrics a study can ask for; ``mse_avg`` is always computed.
METRICS = ("mse_avg", "mse_per_timestamp", "max_spent_epsilon")
NONE = "none"
#: Parameters the grid sets; a protocol entry may not give them.
_GRID_PARAMETERS = ("k", "eps_perm", "eps_1", "eps")
#: Probe used to check a protocol entry's options before any data is read.
_PROBE = {"k": 64, "eps_perm": 1.0, "eps_1": 0.1}


@dataclass(frozen=True)
class ProtocolSpec:
    """A checked protocol entry: registry name, label, options, and whether it takes ε1."""

    label: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    takes_eps_1: bool = True

    def build(self, k: int, eps_perm: float, eps_1: float | None) -> ll.FrequencyOracle:
        """The protocol object of one cell (raises `ValueError` when unreachable)."""
        params: dict[str, Any] = {"k": k, "eps_perm": eps_perm, **self.options}
        if self.takes_eps_1:
            params["eps_1"] = eps_1
        return ll.protocol(self.name, **params)

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "label": self.label,
            "name": self.name,
            "options": dict(self.options),
            "takes_eps_1": self.takes_eps_1,
        }


@dataclass(frozen=True)
class StandaloneSpec:
    """The checked keys of a standalone study."""

    datasets: tuple[DatasetSpec, ...]
    protocols: tuple[ProtocolSpec, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...]
    postprocess: tuple[str, ...]
    metrics: tuple[str, ...]
    engine: str


KEYS: tuple[sc.Key, ...] = (
    sc.Key("tau", sc.integer(1)),
    sc.Key("engine", sc.choice(ENGINES), default="per-user"),
    sc.Key("eps_perm", sc.number_list(what="ε∞ values"), required=True),
    sc.Key("alpha", sc.number_list(lower=0.0, upper=1.0, what="α values"), required=True),
    sc.Key("postprocess", sc.string_list([NONE, *pp.METHODS]), default=(NONE,)),
    sc.Key("metrics", sc.string_list(METRICS), default=METRICS),
    sc.Key("datasets", sc.table_list, required=True),
    sc.Key("protocols", sc.table_list, required=True),
)


def parse_protocol(where: str, table: Any) -> ProtocolSpec:
    """Check one protocol entry: a longitudinal registry name, a label and known options."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    infos = {i.name: i for i in ll.list_protocols() if i.longitudinal}
    allowed_names = ", ".join(repr(n) for n in infos)
    raw = table.get("name")
    if raw is None:
        raise ValueError(f"{where}: missing required key 'name'.")
    try:
        name = ll.get_protocol_class(sc.string(where, "name", raw)).name
    except ValueError:
        raise sc.fail(where, "name", f"one of {allowed_names}", raw) from None
    if name not in infos:
        raise sc.fail(where, "name", f"a longitudinal protocol: one of {allowed_names}", raw)
    info = infos[name]
    option_names = [p for p in info.parameters if p not in _GRID_PARAMETERS]
    keys = [sc.Key("name", sc.string, required=True), sc.Key("label", sc.string)]
    keys += [sc.Key(o, _option) for o in option_names]
    try:
        values = sc.check_table(where, table, keys)
    except ValueError as err:
        if any(g in table for g in _GRID_PARAMETERS):
            raise ValueError(f"{err} (k, eps_perm and eps_1 come from the grid)") from None
        raise
    options = {o: values[o] for o in option_names if values[o] is not None}
    spec = ProtocolSpec(
        label=values["label"] or name,
        name=name,
        options=options,
        takes_eps_1="eps_1" in info.parameters,
    )
    buckets = options.get("b")
    probe_k = max(_PROBE["k"], buckets if isinstance(buckets, int) else 0)
    try:
        spec.build(probe_k, _PROBE["eps_perm"], _PROBE["eps_1"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: bad options for {name}: {err}") from None
    return spec


def _option(where: str, name: str, value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    raise sc.fail(where, name, "a number, a string or a boolean", value)


def parse(values: dict[str, Any], where: str) -> StandaloneSpec:
    """Turn the checked top-level values into a `StandaloneSpec` (checks each entry)."""
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
    if "mse_avg" not in values["metrics"]:
        raise sc.fail(where, "metrics", "a list that includes 'mse_avg'", list(values["metrics"]))
    return StandaloneSpec(
        datasets=datasets,
        protocols=protocols,
        eps_perm=values["eps_perm"],
        alpha=values["alpha"],
        postprocess=values["postprocess"],
        metrics=values["metrics"],
        engine=values["engine"],
    )


def _skip_reason(proto: ProtocolSpec, k: int, eps_perm: float, eps_1: float | None) -> str | None:
    try:
        proto.build(k, eps_perm, eps_1)
    except ValueError as err:
        return str(err)
    return None


def cells(study: Any) -> list[Cell]:
    """Every cell of a standalone study, in table order (see the module docstring)."""
    spec: StandaloneSpec = study.spec
    out: list[Cell] = []
    for d, ds in enumerate(spec.datasets):
        # what a cell depends on: not the other attributes of its dataset
        ds_json = {k: v for k, v in ds.as_json().items() if k not in ("attributes", "domain_sizes")}
        for a, (attribute, k) in enumerate(zip(ds.attributes, ds.domain_sizes, strict=True)):
            reasons: dict[tuple[int, int, int], str | None] = {}
            for r in range(study.repetitions):
                for p, proto in enumerate(spec.protocols):
                    alphas = list(enumerate(spec.alpha)) if proto.takes_eps_1 else [(0, None)]
                    for e, eps in enumerate(spec.eps_perm):
                        for l, alpha in alphas:
                            eps_1 = None if alpha is None else alpha * eps
                            if (p, e, l) not in reasons:
                                reasons[p, e, l] = _skip_reason(proto, k, eps, eps_1)
                            params = {
                                "dataset": ds_json,
                                "attribute": attribute,
                                "k": k,
                                "protocol": proto.as_json(),
                                "eps_perm": eps,
                                "alpha": alpha,
                                "eps_1": eps_1,
                                "rep": r,
                                "engine": spec.engine,
                                "postprocess": list(spec.postprocess),
                                "metrics": list(spec.metrics),
                                "data_key": [seeding.DATA, d],
                                "permutation_key": [seeding.PERMUTATION, d, a, r],
                                "skip_reason": reasons[p, e, l],
                            }
                            key = (seeding.CELL, d, a, r, p, e, l)
                            out.append(Cell("standalone", study.seed, key, params, len(out)))
    return out


@functools.lru_cache(maxsize=2)
def _values(
    dataset: str, attribute: str, entropy: int, data_key: tuple[int, ...], perm_key: tuple[int, ...]
) -> np.ndarray:
    """values[τ, n] of one (dataset, attribute, repetition), cached per process."""
    spec = json.loads(dataset)
    codes = attribute_codes(spec, attribute, entropy, data_key)
    values = to_longitudinal(np.asarray(codes), spec["tau"], seeding.generator(entropy, perm_key))
    values.flags.writeable = False
    return values


class _KeepChannel:
    """A post-processor that changes nothing and remembers the channel it was given."""

    channel: pp.ChannelInfo | None = None

    def __call__(self, estimates: np.ndarray, total: float, channel: Any) -> np.ndarray:
        self.channel = channel
        return estimates


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Rows of one standalone cell: one per post-processing (a pure function of the cell)."""
    prm = cell.params
    ds, proto = prm["dataset"], prm["protocol"]
    base = {
        "dataset": ds["label"],
        "attribute": prm["attribute"],
        "k": prm["k"],
        "n": ds["n"],
        "tau": ds["tau"],
        "protocol": proto["label"],
        "protocol_name": proto["name"],
        "options": json.dumps(proto["options"], sort_keys=True),
        "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"],
        "eps_1": prm["eps_1"],
        "engine": prm["engine"],
        "rep": prm["rep"],
        "data_spawn_key": prm["permutation_key"],
    }
    if prm["skip_reason"] is not None:
        return [
            base | {"postprocess": m, "status": "skipped", "skip_reason": prm["skip_reason"]}
            for m in prm["postprocess"]
        ]
    start = time.perf_counter()
    values = _values(
        json.dumps(ds, sort_keys=True),
        prm["attribute"],
        cell.entropy,
        tuple(prm["data_key"]),
        tuple(prm["permutation_key"]),
    )
    oracle = ProtocolSpec(**proto).build(prm["k"], prm["eps_perm"], prm["eps_1"])
    keep = _KeepChannel()
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    sim = simulate(oracle, values, rng, engine=prm["engine"], postprocess=keep)
    sim_seconds = time.perf_counter() - start
    spent = None
    if "max_spent_epsilon" in prm["metrics"] and sim.spent_epsilon is not None:
        spent = float(np.max(sim.spent_epsilon))
    base |= {"eps_1": float(oracle.eps_1), "max_spent_epsilon": spent}
    rows = []
    for method in prm["postprocess"]:
        start = time.perf_counter()
        try:
            estimates = _postprocess(method, sim.estimates, keep.channel)
        except ValueError as err:
            rows.append(
                base | {"postprocess": method, "status": "skipped", "skip_reason": str(err)}
            )
            continue
        per_t = mt.mse_per_timestamp(estimates, sim.truth)
        rows.append(
            base
            | {
                "postprocess": method,
                "status": "ok",
                "mse_avg": float(np.mean(per_t)),
                "mse_per_timestamp": per_t.tolist()
                if "mse_per_timestamp" in prm["metrics"]
                else None,
                "runtime_s": sim_seconds + time.perf_counter() - start,
            }
        )
    return rows


def _postprocess(method: str, raw: np.ndarray, channel: pp.ChannelInfo | None) -> np.ndarray:
    """Apply one post-processing to every timestamp's raw estimates (``"none"``: a copy)."""
    if method == NONE:
        return raw
    return np.stack([pp.apply(method, row, 1.0, channel) for row in raw])


COLUMNS: tuple[pa.Field, ...] = (
    pa.field("dataset", pa.string()),
    pa.field("attribute", pa.string()),
    pa.field("k", pa.int64()),
    pa.field("n", pa.int64()),
    pa.field("tau", pa.int64()),
    pa.field("protocol", pa.string()),
    pa.field("protocol_name", pa.string()),
    pa.field("options", pa.string()),
    pa.field("eps_perm", pa.float64()),
    pa.field("alpha", pa.float64()),
    pa.field("eps_1", pa.float64()),
    pa.field("postprocess", pa.string()),
    pa.field("engine", pa.string()),
    pa.field("rep", pa.int64()),
    pa.field("data_spawn_key", pa.list_(pa.int64())),
    pa.field("mse_avg", pa.float64()),
    pa.field("mse_per_timestamp", pa.list_(pa.float64())),
    pa.field("max_spent_epsilon", pa.float64()),
)

KIND = StudyKind(
    name="standalone",
    keys=KEYS,
    parse=parse,
    cells=cells,
    run_cell=run_cell,
    columns=COLUMNS,
    summary_by=("dataset", "attribute", "protocol", "alpha", "postprocess"),
    pivot="eps_perm",
    metric="mse_avg",
)
