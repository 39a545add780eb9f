"""Set-valued mining under LDP, one-shot and longitudinal: SVIM, SVSM, LDPMiner (front door).

One call per study cell (dataset, app, protocol, budget, repetition) runs the app over every
timestamp and scores it against the exact ground truth::

    run = mine(data, "SVSM", k=64, protocol="L-OSUE", eps_perm=1.0, alpha=0.1,
               rng=seed, postprocess="norm-sub", truth=truth)
    run.rows()      # one dict per (target, timestamp): metrics, ℓ, u(ℓ), |C|
    run.summary()   # per target: metrics averaged over timestamps (mse -> MSE_avg)

Compute ``truth = setvalued_truth(data)`` once per dataset and pass it to every cell; it is
shared by all timestamps of a `LongitudinalSets` (whole sets are permuted, so it is exact).

Modules: :mod:`~longldp.apps.setvalued.psfo` (PSFO), :mod:`~longldp.apps.setvalued.oracle`
(oracle choice), :mod:`~longldp.apps.setvalued.miner` (the miners' base, over a
:class:`longldp.simulate.Population`), :mod:`~longldp.apps.setvalued.svim`,
:mod:`~longldp.apps.setvalued.svsm`, :mod:`~longldp.apps.setvalued.ldpminer`,
:mod:`~longldp.apps.setvalued.metrics`, :mod:`~longldp.apps.setvalued.common`. Design and
sources: ``docs/setvalued.md`` and ``docs/math.md`` §9.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.apps.setvalued.common import POLICIES, MiningResult, Timeline, TopK
from longldp.apps.setvalued.ldpminer import LDPMiner, LDPMinerParams
from longldp.apps.setvalued.metrics import (
    MSE_READINGS,
    MetricTable,
    SetValuedTruth,
    apriori_top_k,
    evaluate,
    ncr,
    precision_recall_f1,
    setvalued_truth,
    topk_mse,
)
from longldp.apps.setvalued.oracle import OracleSpec, make_spec
from longldp.apps.setvalued.psfo import (
    PSFO,
    adaptive_choice,
    amplified_epsilon,
    oneshot_psfo,
    pad_and_sample,
    percentile_length,
    psfo_channel,
    truncation_factor,
)
from longldp.apps.setvalued.svim import SVIM, SVIMParams
from longldp.apps.setvalued.svsm import SVSM, SVSMParams, best_first, candidate_itemsets

OWNER = "mine"
APPS = {"svim": "SVIM", "svsm": "SVSM", "ldpminer": "LDPMiner"}
_CLASSES = {
    "SVIM": (SVIM, SVIMParams),
    "SVSM": (SVSM, SVSMParams),
    "LDPMiner": (LDPMiner, LDPMinerParams),
}
#: Diagnostics copied into every row, when the app reports them.
_ROW_DIAGNOSTICS = ("ell", "correction", "n_candidates", "L", "ell2")


@dataclass(frozen=True)
class SetValuedRun:
    """One study cell: the mining result and its metrics per target.

    Attributes
    ----------
    result : MiningResult
    metrics : dict of str to MetricTable
        ``"items"`` (SVIM, LDPMiner, and SVSM's internal SVIM) and ``"itemsets"`` (SVSM).
    """

    result: MiningResult
    metrics: dict[str, MetricTable]

    def _results(self) -> dict[str, MiningResult]:
        out = {self.result.target: self.result}
        if self.result.items is not None:
            out["items"] = self.result.items
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per (target, timestamp): metrics and scalar diagnostics."""
        rows = []
        results = self._results()
        for target, table in self.metrics.items():
            diags = results[target].diagnostics
            for row, diag in zip(table.rows(), diags, strict=True):
                extra = {key: diag[key] for key in _ROW_DIAGNOSTICS if key in diag}
                rows.append({"app": self.result.app, **row, **extra})
        return rows

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per target: every metric averaged over timestamps, plus the MSE reading."""
        return {
            target: {**table.averages(), "reading": table.reading, "k": table.k}
            for target, table in self.metrics.items()
        }


def mine(
    data: Any,
    app: str,
    *,
    k: int,
    protocol: str = "adaptive",
    eps: float | None = None,
    eps_perm: float | None = None,
    eps_1: float | None = None,
    alpha: float | None = None,
    rng: Any = None,
    engine: str = "count-level",
    policy: str = "reestimate",
    postprocess: str | pp.PostProcessor | None = None,
    params: SVIMParams | SVSMParams | LDPMinerParams | None = None,
    truth: SetValuedTruth | None = None,
    mse_reading: str = "literal",
    n_items: int | None = None,
    **protocol_options: Any,
) -> SetValuedRun:
    """Run one app over every timestamp of ``data`` and score it (one study cell).

    Parameters
    ----------
    data : SetData, LongitudinalSets or sequence of SetData
    app : {"SVIM", "SVSM", "LDPMiner"}
        Case-insensitive. SVSM also scores its internal SVIM (target ``"items"``), which is how
        [002] runs SVIM and SVSM jointly.
    k : int
        Output size.
    protocol : str, default="adaptive"
        ``"adaptive"`` or a one-shot registry name with ``eps``; a longitudinal chain with
        ``eps_perm`` and ``eps_1`` or ``alpha`` (see :class:`OracleSpec`).
    eps, eps_perm, eps_1, alpha : float, optional
    rng : numpy.random.Generator or seed
    engine : {"count-level", "per-user", "reports"}, default="count-level"
    policy : {"reestimate", "freeze"}, default="reestimate"
    postprocess : str, callable or None, default=None
    params : SVIMParams, SVSMParams or LDPMinerParams, optional
        The app's constants (defaults: those of docs/math.md §9).
    truth : SetValuedTruth, optional
        Ground truth of ``data`` (computed here if omitted; pass it to share across cells).
    mse_reading : {"literal", "estimated"}, default="literal"
        How a false positive enters the top-k MSE (math §9.6).
    n_items : int, optional
        Public item domain size.
    **protocol_options
        ``calibration``, ``hash_pool``, dBitFlipPM's ``d``.

    Returns
    -------
    SetValuedRun
    """
    if not isinstance(app, str) or app.strip().lower() not in APPS:
        raise ValueError(f"{OWNER}: 'app' must be one of {', '.join(APPS.values())}; got {app!r}.")
    name = APPS[app.strip().lower()]
    check.choice(OWNER, "mse_reading", mse_reading, MSE_READINGS)
    spec = make_spec(
        protocol, eps=eps, eps_perm=eps_perm, eps_1=eps_1, alpha=alpha, **protocol_options
    )
    cls, params_cls = _CLASSES[name]
    if params is not None and not isinstance(params, params_cls):
        raise ValueError(f"{OWNER}: 'params' must be a {params_cls.__name__} for {name}.")
    miner = cls(k, spec, params or params_cls(), policy, postprocess)
    result = miner.run(data, rng, engine, n_items)
    if truth is None:
        truth = setvalued_truth(data, n_items)
    metrics = {result.target: evaluate(result, truth, mse_reading)}
    if result.items is not None:
        metrics["items"] = evaluate(result.items, truth, mse_reading)
    return SetValuedRun(result, metrics)


__all__ = [
    "APPS",
    "MSE_READINGS",
    "POLICIES",
    "PSFO",
    "SVIM",
    "SVSM",
    "LDPMiner",
    "LDPMinerParams",
    "MetricTable",
    "MiningResult",
    "OracleSpec",
    "SVIMParams",
    "SVSMParams",
    "SetValuedRun",
    "SetValuedTruth",
    "Timeline",
    "TopK",
    "adaptive_choice",
    "amplified_epsilon",
    "apriori_top_k",
    "best_first",
    "candidate_itemsets",
    "evaluate",
    "make_spec",
    "mine",
    "ncr",
    "oneshot_psfo",
    "pad_and_sample",
    "percentile_length",
    "precision_recall_f1",
    "psfo_channel",
    "setvalued_truth",
    "topk_mse",
    "truncation_factor",
]
