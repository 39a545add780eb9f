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
from longldp import postprocess as pp
from longldp.apps.setvalued.common import (
    IntArray,
    MembershipIndex,
    MiningResult,
    Timeline,
    TopK,
    sample_one_item,
    sticky_slots,
    top_indices,
)
from longldp.apps.setvalued.oracle import FOInstance, OracleSpec, population_budget
from longldp.apps.setvalued.psfo import ADAPTIVE, PSFO, oneshot_psfo, pad_and_sample
from longldp.apps.setvalued.svim import DOMAINS, _pp_name, check_common
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
class LDPMiner:
    """The LDPMiner baseline (math §9.4) configured once, run on any data.

    Parameters
    ----------
    k : int
        Output size, 1 <= k <= item domain size.
    oracle : OracleSpec
        The *total* budget: each phase runs at half of it.
    params : LDPMinerParams, optional
    policy : {"reestimate", "freeze"}, default="reestimate"
    postprocess : str, callable or None, default=None
    """

    k: int
    oracle: OracleSpec
    params: LDPMinerParams = field(default_factory=LDPMinerParams)
    policy: str = "reestimate"
    postprocess: str | pp.PostProcessor | None = None

    def __post_init__(self) -> None:
        check_common(self, OWNER)

    def run(
        self,
        data: SetData | Any,
        rng: Any = None,
        engine: str = "count-level",
        n_items: int | None = None,
    ) -> MiningResult:
        """Run over every timestamp of ``data``."""
        gen = np.random.default_rng(rng)
        run = LDPMinerRun(self, Timeline(data, n_items), engine)
        steps = [run.step(t, gen) for t in range(run.timeline.tau)]
        return run.result(steps)


class LDPMinerRun:
    """LDPMiner's state over timestamps."""

    def __init__(self, miner: LDPMiner, timeline: Timeline, engine: str):
        d = timeline.d
        if miner.k > d:
            raise ValueError(
                f"{OWNER}: 'k' must be at most the item domain size {d}; got {miner.k}."
            )
        self.miner, self.timeline, self.prm, self.engine = miner, timeline, miner.params, engine
        self.half = miner.oracle.scaled(0.5)
        self.n_c = min(self.prm.candidate_factor * miner.k, d)
        q = self.prm.L_percentile
        self.L = self.prm.L if self.prm.L is not None else true_length_bound(timeline.at(0), q)
        self.ell2 = self.n_c if self.prm.phase2_pad == "candidates" else self.L
        users = np.arange(timeline.n, dtype=np.int64)
        self.inst = {p: FOInstance(p, users, engine) for p in ("phase1", "phase2")}
        if self.half.longitudinal:
            size2 = d + 1 if self.prm.domain == "items" else self.n_c + 1
            self.chains = {"phase1": self.half.chain(d + 1), "phase2": self.half.chain(size2)}
        self.cands: IntArray = np.zeros(0, dtype=np.int64)
        self.slots: list | None = None
        #: The latest phase-1 estimates of every item and phase-2 estimates of ``cands``
        #: (what a caller needs to score the estimates of items outside the output).
        self.f1: np.ndarray = np.zeros(d, dtype=np.float64)
        self.f2: np.ndarray = np.zeros(0, dtype=np.float64)

    def _fo(self, phase: str) -> str:
        if self.half.protocol == ADAPTIVE:
            return self.prm.fo_phase1 if phase == "phase1" else self.prm.fo_phase2
        return self.half.protocol

    def _psfo(self, phase: str, d: int, ell: int) -> PSFO:
        if self.half.longitudinal:
            chain = self.chains[phase]
            return self.half.chain_psfo(chain, chain.k - 1, ell)
        assert self.half.eps is not None
        opts = self.half.options
        return oneshot_psfo(d, ell, self.half.eps, self._fo(phase), "shared", False, **opts)

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict[str, Any]]:
        """Run timestamp t."""
        base, rows = self.timeline.rows(t)
        d, n = self.timeline.d, self.timeline.n
        diag: dict[str, Any] = {"t": t}
        if self.miner.policy == "reestimate" or t == 0:
            start = base.indptr[rows]
            m = base.indptr[rows + 1] - start
            r = pad_and_sample(m, self.L, rng)
            items, _ = sample_one_item(base, rows, r)
            psfo = self._psfo("phase1", d, self.L)
            codes = psfo.encode(r, m, items)
            support = self.inst["phase1"].collect(psfo.oracle, codes, rng, psfo.eps)
            f1 = psfo.estimate(support, n, self.miner.postprocess)
            self.cands = top_indices(f1, self.n_c, rng)
            self.f1 = f1
            diag["phase1"] = psfo.describe()
        member = np.zeros(d, dtype=bool)
        member[self.cands] = True
        index = MembershipIndex(base, member)
        m = index.counts(rows)
        r = pad_and_sample(m, self.ell2, rng)
        real = r < m
        items = index.pick(rows[real], r[real])
        reportable = None
        if not self.half.longitudinal:
            rank = np.full(d, -1, dtype=np.int64)
            rank[self.cands] = np.arange(self.n_c)
            psfo, code_of, real_codes = self._psfo("phase2", self.n_c, self.ell2), None, rank[items]
            code_of = np.arange(self.n_c)
        elif self.prm.domain == "items":
            psfo, code_of, real_codes = self._psfo("phase2", d, self.ell2), self.cands, items
            reportable = np.append(self.cands, d)
        else:
            self.slots = sticky_slots(self.slots, self.cands.tolist(), self.n_c)
            slot_of = np.full(d, -1, dtype=np.int64)
            for s, x in enumerate(self.slots):  # <= 2k slots, not users
                if x is not None:
                    slot_of[x] = s
            psfo, code_of, real_codes = (
                self._psfo("phase2", self.n_c, self.ell2),
                slot_of[self.cands],
                slot_of[items],
            )
        codes = psfo.encode(r, m, real_codes)
        support = self.inst["phase2"].collect(psfo.oracle, codes, rng, psfo.eps)
        est = psfo.estimate(support, n, self.miner.postprocess, reportable)[code_of]
        self.f2 = est
        order = top_indices(est, self.miner.k)
        diag.update(phase2=psfo.describe(), n_candidates=int(self.n_c), L=self.L, ell2=self.ell2)
        return TopK(tuple((int(x),) for x in self.cands[order]), est[order]), diag

    def result(self, steps: list[tuple[TopK, dict]]) -> MiningResult:
        params = {
            "app": OWNER,
            "k": self.miner.k,
            "n": self.timeline.n,
            "tau": self.timeline.tau,
            "n_items": self.timeline.d,
            "n_candidates": self.n_c,
            "oracle": self.miner.oracle.describe(),
            "per_phase_oracle": self.half.describe(),
            "fo_phase1": self._fo("phase1"),
            "fo_phase2": self._fo("phase2"),
            "ldpminer": asdict(self.prm),
            "L": self.L,
            "L_rule": "given" if self.prm.L is not None else "true-length percentile (non-private)",
            "policy": self.miner.policy,
            "postprocess": _pp_name(self.miner.postprocess),
            "engine": self.engine,
            "dummies": "shared" + (", memoized" if self.half.longitudinal else ""),
            "ties": "larger estimate first; candidates: random; output: candidate order",
        }
        return MiningResult(
            app=OWNER,
            target="items",
            k=self.miner.k,
            topk=tuple(s[0] for s in steps),
            diagnostics=tuple(s[1] for s in steps),
            params=params,
            groups={"all": np.arange(self.timeline.n, dtype=np.int64)},
            budget=population_budget(self.timeline.n, list(self.inst.values())),
        )
