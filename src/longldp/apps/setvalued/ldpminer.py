"""LDPMiner (Qin et al., CCS 2016) as cast by WLJ: the baseline of SVIM (math §9.4).

Every user takes part in **both** phases, each with half the budget (sequential composition);
there is no amplification, no length estimation and no correction factor:

1. **Phase 1.** PSFO(L, FO₁, ε/2) over I with one shared dummy (no amplification, so a shared
   dummy is ε/2-LDP); f̂₁(x) = L·f̂_FO(x); C = the 2k items with the largest f̂₁.
2. **Phase 2.** PSFO(ℓ₂, FO₂, ε/2) over C, ℓ₂ = |C| (pads to 2k and never truncates; WLJ's
   casting) or ``phase2_pad="L"`` (CorneyHeY); output the top k of ℓ₂·f̂_FO.

L is a public set-size bound. Default: the 90th percentile of the **true** set sizes at t = 0,
as CorneyHeY does; this is not private and favours the baseline (recorded in the result).
FO₁/FO₂ default to BLH (the law of Bassily-Smith's succinct histogram: P1 = p, P0 = 1/2,
Bassily and Smith, STOC 2015) and SUE (basic RAPPOR), Qin's choices in today's registry.

Longitudinal mode (math §9.5): two memoizing instances (phase 1 over I ∪ {⊥}; phase 2 over
I ∪ {⊥} or |C| sticky slots ∪ {⊥}), each at (ε∞/2, ε1/2), every user in both, one shared
memoized dummy. ``"freeze"`` keeps C from t = 0 and phase 1 reports only at t = 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.setvalued.common import FloatArray, Timeline, TopK, top_indices
from longldp.apps.setvalued.miner import DOMAINS, MinerConfig, MinerRun, postprocess_name
from longldp.apps.setvalued.psfo import ADAPTIVE
from longldp.data import SetData
from longldp.protocols import get_protocol_class

OWNER = "LDPMiner"
PHASE2_PADS = ("candidates", "L")


@dataclass(frozen=True)
class LDPMinerParams:
    """LDPMiner's constants (math §9.4, §9.8.11).

    Parameters
    ----------
    candidate_factor : int, default=2
        |C| = candidate_factor·k (WLJ's casting, CorneyHeY).
    L : int or None, default=None
        Public set-size bound of phase 1; None = the ``L_percentile`` quantile of the true set
        sizes at t = 0 (non-private, favours the baseline).
    L_percentile : float, default=0.9
    fo_phase1, fo_phase2 : str, default="BLH", "SUE"
        One-shot FOs when the oracle spec is ``"adaptive"``; a named one-shot spec uses its FO
        in both phases; longitudinal specs use their chain in both phases.
    phase2_pad : {"candidates", "L"}, default="candidates"
    domain : {"items", "slots"}, default="items"
        Longitudinal domain of phase 2.
    """

    candidate_factor: int = 2
    L: int | None = None
    L_percentile: float = 0.9
    fo_phase1: str = "BLH"
    fo_phase2: str = "SUE"
    phase2_pad: str = "candidates"
    domain: str = "items"

    def __post_init__(self) -> None:
        check.integer(OWNER, "candidate_factor", self.candidate_factor, minimum=1)
        if self.L is not None:
            check.integer(OWNER, "L", self.L, minimum=1)
        check.probability(OWNER, "L_percentile", self.L_percentile)
        for name in ("fo_phase1", "fo_phase2"):
            if get_protocol_class(getattr(self, name)).longitudinal:
                raise ValueError(f"{OWNER}: '{name}' must be a one-shot oracle name.")
        object.__setattr__(
            self,
            "phase2_pad",
            check.choice(OWNER, "phase2_pad", self.phase2_pad, ("candidates", "l")),
        )
        if self.phase2_pad == "l":
            object.__setattr__(self, "phase2_pad", "L")
        object.__setattr__(self, "domain", check.choice(OWNER, "domain", self.domain, DOMAINS))


def true_length_bound(data: SetData, q: float) -> int:
    """Smallest L >= 1 with at least a fraction q of the users holding <= L items."""
    lengths = np.sort(data.lengths)
    idx = max(0, int(np.ceil(q * lengths.size)) - 1)
    return max(1, int(lengths[idx]))


@dataclass(frozen=True)
class LDPMiner(MinerConfig):
    """The LDPMiner baseline (math §9.4) configured once, run on any data.

    The fields of :class:`~longldp.apps.setvalued.miner.MinerConfig` (``run``: see
    :class:`~longldp.apps.setvalued.miner.TimelineMiner`), with 1 <= k <= the item domain size,
    ``params`` an :class:`LDPMinerParams`, and ``oracle`` the *total* budget: each phase runs
    at half of it.
    """

    owner = OWNER

    params: LDPMinerParams = field(default_factory=LDPMinerParams)

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> LDPMinerRun:
        """Every user reports in both phases: no groups to draw."""
        return LDPMinerRun(self, timeline, engine)


class LDPMinerRun(MinerRun):
    """LDPMiner's state over timestamps: two reporting groups of every user, one per phase."""

    owner = OWNER
    dummies = "shared"

    def __init__(self, miner: LDPMiner, timeline: Timeline, engine: str):
        d = timeline.d
        if miner.k > d:
            raise ValueError(
                f"{OWNER}: 'k' must be at most the item domain size {d}; got {miner.k}."
            )
        # each phase runs at half the budget (sequential composition)
        super().__init__(miner, timeline, miner.oracle.scaled(0.5), engine)
        self.prm = miner.params
        self.n_c = min(self.prm.candidate_factor * miner.k, d)
        q = self.prm.L_percentile
        self.L = self.prm.L if self.prm.L is not None else true_length_bound(timeline.at(0), q)
        self.ell2 = self.n_c if self.prm.phase2_pad == "candidates" else self.L
        self.groups = {"all": np.arange(timeline.n, dtype=np.int64)}
        size2 = d + 1 if self.prm.domain == "items" else self.n_c + 1
        self.add_groups({"phase1": None, "phase2": None}, {"phase1": d + 1, "phase2": size2})
        self.coding = self.prm.domain if self.spec.longitudinal else "rank"
        #: The latest phase-1 estimates of every item and phase-2 estimates of ``cands``
        #: (what a caller needs to score the estimates of items outside the output).
        self.f1: FloatArray = np.zeros(d, dtype=np.float64)
        self.f2: FloatArray = np.zeros(0, dtype=np.float64)

    def fo_name(self, group: str) -> str:
        """``"adaptive"`` stands for Qin's FOs: BLH in phase 1, SUE in phase 2."""
        if self.spec.protocol == ADAPTIVE:
            return self.prm.fo_phase1 if group == "phase1" else self.prm.fo_phase2
        return self.spec.protocol

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict[str, Any]]:
        """Run timestamp t."""
        base, rows = self.timeline.rows(t)
        diag: dict[str, Any] = {"t": t}
        if self.fresh(t):
            self.f1, psfo = self.report_items("phase1", base, rows, self.L, rng)
            self.cands = top_indices(self.f1, self.n_c, rng)
            diag["phase1"] = psfo.describe()
        self.f2, psfo = self.report_candidates("phase2", base, rows, self.ell2, self.coding, rng)
        order = top_indices(self.f2, self.miner.k)
        diag.update(phase2=psfo.describe(), n_candidates=int(self.n_c), L=self.L, ell2=self.ell2)
        return TopK(tuple((int(x),) for x in self.cands[order]), self.f2[order]), diag

    def params_record(self) -> dict[str, Any]:
        """Every setting of the run."""
        return {
            **self.base_params(),
            "n_candidates": self.n_c,
            "oracle": self.miner.oracle.describe(),
            "per_phase_oracle": self.spec.describe(),
            "fo_phase1": self.fo_name("phase1"),
            "fo_phase2": self.fo_name("phase2"),
            "ldpminer": asdict(self.prm),
            "L": self.L,
            "L_rule": "given" if self.prm.L is not None else "true-length percentile (non-private)",
            "policy": self.miner.policy,
            "postprocess": postprocess_name(self.postprocess),
            "engine": self.engine,
            "dummies": "shared" + (", memoized" if self.spec.longitudinal else ""),
            "ties": "larger estimate first; candidates: random; output: candidate order",
        }
