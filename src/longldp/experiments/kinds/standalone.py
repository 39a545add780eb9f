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

import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp import metrics as mt
from longldp import postprocess as pp
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import parse_dataset
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, ProtocolEntry, StudyKind
from longldp.simulate import ENGINES, simulate

__all__ = ["KIND", "METRICS", "ProtocolSpec", "StandaloneSpec", "run_cell"]

#: Metrics a study can ask for; ``mse_avg`` is always computed.
METRICS = ("mse_avg", "mse_per_timestamp", "max_spent_epsilon")
#: A protocol entry of this kind (a longitudinal registry protocol).
ProtocolSpec = ProtocolEntry


@dataclass(frozen=True, kw_only=True)
class StandaloneSpec(GridSpec):
    """The checked keys of a standalone study (datasets: `DatasetSpec`)."""

    protocols: tuple[ProtocolEntry, ...]
    postprocess: tuple[str, ...]
    metrics: tuple[str, ...]


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(),
    base.engine_key(ENGINES, "per-user"),
    base.EPS_PERM,
    base.alpha_key(required=True),
    base.postprocess_key([base.NONE, *pp.METHODS]),
    sc.Key("metrics", sc.string_list(METRICS), default=METRICS),
    base.entries_key("datasets"),
    base.entries_key("protocols"),
)


def _protocol(where: str, table: Any) -> ProtocolEntry:
    return base.parse_protocol_entry(where, table)[0]


def parse(values: dict[str, Any], where: str) -> StandaloneSpec:
    """Turn the checked top-level values into a `StandaloneSpec` (checks each entry)."""
    datasets, protocols = base.parse_grid(where, values, parse_dataset, "protocols", _protocol)
    if "mse_avg" not in values["metrics"]:
        raise sc.fail(where, "metrics", "a list that includes 'mse_avg'", list(values["metrics"]))
    chosen = {k: values[k] for k in ("postprocess", "metrics")}
    return StandaloneSpec(protocols=protocols, **chosen, **base.grid_values(values, datasets))


def cells(study: Any) -> list[Cell]:
    """Every cell of a standalone study, in table order (see the module docstring)."""
    spec: StandaloneSpec = study.spec
    reasons = base.SkipReasons()

    def params(v: Any, at: Any) -> dict[str, Any]:
        d, a, proto, k = at["dataset"], at["attribute"], v["protocol"], v["attribute"][1]
        eps, alpha = v["eps_perm"], v["alpha"]
        eps_1 = base.eps_1_at(eps, alpha)
        # what a cell depends on: not the other attributes of its dataset
        skip = ("attributes", "domain_sizes")
        return {
            "dataset": {x: y for x, y in v["dataset"].as_json().items() if x not in skip},
            "attribute": v["attribute"][0],
            "k": k,
            "protocol": proto.as_json("longitudinal"),
            "eps_perm": eps,
            "alpha": alpha,
            "eps_1": eps_1,
            "rep": v["rep"],
            "engine": spec.engine,
            "postprocess": list(spec.postprocess),
            "metrics": list(spec.metrics),
            "data_key": [seeding.DATA, d],
            "permutation_key": [seeding.PERMUTATION, d, a, v["rep"]],
            "skip_reason": reasons(
                (d, a, at["protocol"], at["eps_perm"], at["alpha"]), proto.build, k, eps, eps_1
            ),
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "attribute": lambda v: enumerate(
            zip(v["dataset"].attributes, v["dataset"].domain_sizes, strict=True)
        ),
        "rep": range(study.repetitions),
        **base.budget_axes("protocol", spec.protocols, spec, lambda p: p.takes_eps_1),
    }
    return base.grid(study, "standalone", axes, params)


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
    row = {
        "dataset": ds["label"], "attribute": prm["attribute"], "k": prm["k"], "n": ds["n"],
        "tau": ds["tau"], "protocol": proto["label"], "protocol_name": proto["name"],
        "options": json.dumps(proto["options"], sort_keys=True), "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"], "eps_1": prm["eps_1"], "engine": prm["engine"],
        "rep": prm["rep"], "data_spawn_key": prm["permutation_key"],
    }  # fmt: skip
    if prm["skip_reason"] is not None:
        return base.skipped_rows(row, "postprocess", prm["postprocess"], prm["skip_reason"])
    start = time.perf_counter()
    (values,) = base.longitudinal_codes(
        json.dumps(ds, sort_keys=True),
        (prm["attribute"],),
        cell.entropy,
        tuple(prm["data_key"]),
        tuple(prm["permutation_key"]),
    )
    entry = ProtocolEntry(**proto, longitudinal=True)
    oracle = entry.build(prm["k"], prm["eps_perm"], prm["eps_1"])
    keep = _KeepChannel()
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    sim = simulate(oracle, values, rng, engine=prm["engine"], postprocess=keep)
    spent = None
    if "max_spent_epsilon" in prm["metrics"] and sim.spent_epsilon is not None:
        spent = float(np.max(sim.spent_epsilon))
    row |= {"eps_1": float(oracle.eps_1), "max_spent_epsilon": spent}
    return base.postprocess_rows(
        row,
        prm["postprocess"],
        lambda method: base.apply_postprocess(method, sim.estimates, keep.channel),
        lambda est: base.mse_columns(
            mt.mse_per_timestamp(est, sim.truth), "mse_per_timestamp" in prm["metrics"]
        ),
        time.perf_counter() - start,
    )


COLUMNS = base.columns(
    "dataset:str attribute:str k:int n:int tau:int protocol:str protocol_name:str options:str "
    "eps_perm:float alpha:float eps_1:float postprocess:str engine:str rep:int "
    "data_spawn_key:[int] mse_avg:float mse_per_timestamp:[float] max_spent_epsilon:float"
)

KIND = StudyKind(
    "standalone", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "attribute", "protocol", "alpha", "postprocess"),
)  # fmt: skip
