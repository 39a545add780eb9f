"""LDPMiner-SH: the GFIM thesis's baseline, the library's LDPMiner with the SH oracle.

Qin et al., "Heavy hitter estimation over set-valued data with local differential privacy"
(LDPMiner), CCS 2016, as used by Zhang's GFIM thesis §4: every user takes part in both phases
at ε/2 each; phase 1 is sampling S-Hist (L = ℓ) over [d], C = the top 2k; phase 2 is sampling
S-Hist over C, padded to |C| = 2k (WLJ's casting, the thesis does not say); the output is the
top k of f̂2 within C. This is :class:`longldp.apps.setvalued.ldpminer.LDPMiner` with
``OracleSpec("SH", eps)`` (or a memoizing chain: two memo tables at (ε∞/2, ε1/2)).

The thesis does not say whether its baseline output used f̂2 or its eq. 3-5 combination;
``output="thesis"`` applies (f̂1 + (ℓ − 1)f̂2)/ℓ on C as an option. The estimates of every
item are returned (f̂2 on C, f̂1 elsewhere) so the relative error of true top-k items outside
the output can be scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.gfim.gfim import GFIMResult, combine_estimates
from longldp.apps.setvalued.common import Timeline, TopK, top_indices
from longldp.apps.setvalued.ldpminer import LDPMiner, LDPMinerParams, LDPMinerRun
from longldp.apps.setvalued.miner import TimelineMiner
from longldp.apps.setvalued.oracle import OracleSpec

OWNER = "LDPMiner-SH"
OUTPUTS = ("phase2", "thesis")


@dataclass(frozen=True)
class LDPMinerSH(TimelineMiner):
    """LDPMiner with the SH oracle (ε/2 per phase); ``run`` returns GFIM's result shape
    (``estimates`` per t; see :class:`~longldp.apps.setvalued.miner.TimelineMiner`).

    Parameters
    ----------
    k : int
        Output size.
    oracle : OracleSpec
        The **total** budget (default SH at ε = 2); each phase runs at half of it.
    params : LDPMinerParams, optional
        ``L`` (None: the 90th percentile of the true sizes, like GFIM's ℓ), ``phase2_pad``.
    output : {"phase2", "thesis"}, default="phase2"
    """

    k: int
    oracle: OracleSpec = field(default_factory=lambda: OracleSpec("SH", eps=2.0))
    params: LDPMinerParams = field(default_factory=LDPMinerParams)
    output: str = "phase2"

    def __post_init__(self) -> None:
        object.__setattr__(self, "output", check.choice(OWNER, "output", self.output, OUTPUTS))

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> LDPMinerSHRun:
        """LDPMiner's run (every user in both phases) with GFIM's estimates."""
        return LDPMinerSHRun(LDPMiner(self.k, self.oracle, self.params), timeline, engine, self)


class LDPMinerSHRun(LDPMinerRun):
    """LDPMiner's state plus, per timestamp, the estimates of every item (GFIM's shape)."""

    def __init__(self, miner: LDPMiner, timeline: Timeline, engine: str, app: LDPMinerSH):
        super().__init__(miner, timeline, engine)
        self.output = app.output

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict, dict]:
        """LDPMiner's timestamp t, then the thesis's combination if asked, and f̂ of all items."""
        top, diag = super().step(t, rng)
        f1, cands, f2 = self.f1, self.cands, self.f2
        w = 1.0
        if self.output == "thesis":
            f2, w = combine_estimates(f1[cands], f2, "thesis", self.L, self.ell2, 1, 1)
            order = top_indices(f2, self.miner.k)
            top = TopK(tuple((int(x),) for x in cands[order]), f2[order])
        f_hat = f1.copy()
        f_hat[cands] = f2
        estimates = {"f_hat": f_hat, "f1": f1, "candidates": cands, "f2": f2, "w": w}
        return top, diag, {**estimates, "L2": self.ell2}

    def params_record(self) -> dict[str, Any]:
        """LDPMiner's settings, under this baseline's name, with the output rule."""
        return {**super().params_record(), "app": OWNER, "output": self.output}

    def result(self, steps: list[tuple[Any, ...]]) -> GFIMResult:  # type: ignore[override]
        """The mining result and every timestamp's estimates."""
        return GFIMResult(super().result(steps), tuple(s[2] for s in steps))
