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
from longldp.apps.setvalued.oracle import OracleSpec
from longldp.data import SetData

OWNER = "LDPMiner-SH"
OUTPUTS = ("phase2", "thesis")


@dataclass(frozen=True)
class LDPMinerSH:
    """LDPMiner with the SH oracle (ε/2 per phase).

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

    def run(
        self,
        data: SetData | Any,
        rng: Any = None,
        engine: str = "count-level",
        n_items: int | None = None,
    ) -> GFIMResult:
        """Run over every timestamp; the result has GFIM's shape (``estimates`` per t)."""
        gen = np.random.default_rng(rng)
        miner = LDPMiner(self.k, self.oracle, self.params)
        run = LDPMinerRun(miner, Timeline(data, n_items), engine)
        steps, estimates = [], []
        for t in range(run.timeline.tau):
            top, diag = run.step(t, gen)
            f1, cands, f2 = run.f1, run.cands, run.f2
            w = 1.0
            if self.output == "thesis":
                f2, w = combine_estimates(f1[cands], f2, "thesis", run.L, run.ell2, 1, 1)
                order = top_indices(f2, self.k)
                top = TopK(tuple((int(x),) for x in cands[order]), f2[order])
            f_hat = f1.copy()
            f_hat[cands] = f2
            steps.append((top, diag))
            estimates.append(
                {"f_hat": f_hat, "f1": f1, "candidates": cands, "f2": f2, "w": w, "L2": run.ell2}
            )
        mining = run.result(steps)
        mining.params.update(app=OWNER, output=self.output)
        return GFIMResult(mining, tuple(estimates))
