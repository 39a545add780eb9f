"""SVIM: top-k frequent items of set-valued data under LDP, one-shot and longitudinal.

Users are split once, at random, into G1/G2/G3 (40/10/50 %, math §9.2); each reports once per
timestamp with the whole budget:

1. **Candidates (G1).** PSFO(1) over I ∪ {⊥}: a uniform item of v, or ⊥ if v is empty.
   C = the 2k items with the largest estimates (all items when d <= 2k).
2. **Length (G2).** L_u = |v_u ∩ C| in {0..|C|} through a plain FO; θ̂ clipped at 0;
   ℓ = min{L >= 1 : Σ_{i<=L} θ̂_i >= 0.9 Σ_{i>=1} θ̂_i}.
3. **Estimation (G3).** PS_ℓ(v_u ∩ C) through PSFO(ℓ) over C ∪ dummies; f̂(x) = ℓ·f̂_FO(x).
4. **Correction.** f̂'(x) = u(ℓ)·f̂(x), u(ℓ) = Σ iθ̂_i / (Σ_{i<=ℓ} iθ̂_i + ℓ Σ_{i>ℓ} θ̂_i).
5. **Output.** The k candidates with the largest f̂' and their f̂'.

Longitudinal mode (math §9.5): the groups are fixed for all τ timestamps, each group feeds one
memoizing chain over a time-stable domain with one shared, memoized dummy: G1 over I ∪ {⊥},
G2 over {0..|C|}, G3 over I ∪ {⊥} (``domain="items"``, the default of math §9.5: a changing C_t
only changes which estimates are read) or over |C| sticky slots ∪ {⊥} (``domain="slots"``:
an item keeps its slot, hence its memo, while it stays a candidate). Policy ``"reestimate"``
(default) reruns steps 1-2 at every t; ``"freeze"`` keeps C, ℓ and u(ℓ) from t = 0, and G1
and G2 report only at t = 0 (a public, data-independent schedule, so their silence afterwards
reveals nothing).

References: WLJ's SVIM as reconstructed in docs/math.md §9.2, §9.5, §9.8.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.setvalued.common import (
    IntArray,
    Timeline,
    TopK,
    check_shares,
    split_groups,
    top_indices,
)
from longldp.apps.setvalued.miner import DOMAINS, MinerConfig, MinerRun, postprocess_name
from longldp.simulate import Population

OWNER = "SVIM"


@dataclass(frozen=True)
class SVIMParams:
    """SVIM's tunable constants, with the defaults of docs/math.md §9 (math §9.2, §9.8).

    Parameters
    ----------
    shares : tuple of 3 floats, default=(0.4, 0.1, 0.5)
        Shares of G1 (candidates), G2 (length), G3 (estimation); both reference codes.
    candidate_factor : int, default=2
        |C| = candidate_factor·k (capped at the item domain size).
    percentile : float, default=0.9
        q of the percentile rule for ℓ ("≥", clipped θ̂; math §9.8.6).
    length_cap : int or None, default=None
        Optional cap on ℓ (vvv214 uses 30); None caps only at |C|.
    domain : {"items", "slots"}, default="items"
        Longitudinal estimation domain of G3 (see the module docstring).
    """

    shares: tuple[float, float, float] = (0.4, 0.1, 0.5)
    candidate_factor: int = 2
    percentile: float = 0.9
    length_cap: int | None = None
    domain: str = "items"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shares", check_shares(OWNER, "shares", self.shares, 3))
        check.integer(OWNER, "candidate_factor", self.candidate_factor, minimum=1)
        check.probability(OWNER, "percentile", self.percentile)
        if self.length_cap is not None:
            check.integer(OWNER, "length_cap", self.length_cap, minimum=1)
        object.__setattr__(self, "domain", check.choice(OWNER, "domain", self.domain, DOMAINS))

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "shares": list(self.shares)}


@dataclass(frozen=True)
class SVIM(MinerConfig):
    """SVIM (WLJ; math §9.2, §9.5) configured once, run on any data.

    The fields of :class:`~longldp.apps.setvalued.miner.MinerConfig` (``run``: see
    :class:`~longldp.apps.setvalued.miner.TimelineMiner`), with 1 <= k <= the item domain size,
    ``params`` an :class:`SVIMParams`, and ``postprocess`` applied to every FO's full estimate
    vector (items and dummies) before dummies are dropped and before ℓ-scaling ([002] uses
    ``"norm-sub"``).
    """

    owner = OWNER

    params: SVIMParams = field(default_factory=SVIMParams)

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> SVIMRun:
        """Groups G1/G2/G3 drawn once (math §9.2)."""
        return SVIMRun(self, timeline, split_groups(timeline.n, self.params.shares, rng), engine)


class SVIMRun(MinerRun):
    """SVIM's state over timestamps: fixed groups, their oracles, candidates, ℓ.

    ``population`` is shared when SVSM runs SVIM on its first three groups.
    """

    owner = OWNER

    def __init__(
        self,
        svim: SVIM,
        timeline: Timeline,
        groups: list[IntArray],
        engine: str,
        population: Population | None = None,
    ):
        d = timeline.d
        if svim.k > d:
            raise ValueError(
                f"{OWNER}: 'k' must be at most the item domain size {d} (fewer than k items "
                f"exist); got {svim.k}. Pass k = min(k, {d}) to estimate every item."
            )
        super().__init__(svim, timeline, svim.oracle, engine, population)
        self.prm = svim.params
        self.n_c = min(self.prm.candidate_factor * svim.k, d)
        self.groups = dict(zip(("G1", "G2", "G3"), groups, strict=True))
        size3 = d + 1 if self.prm.domain == "items" else self.n_c + 1
        self.add_groups(self.groups, {"G1": d + 1, "G2": self.n_c + 1, "G3": size3})
        self.coding = self.prm.domain if self.spec.longitudinal else "rank"

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict[str, Any]]:
        """Run timestamp t; returns the top-k items and the diagnostics."""
        base, rows = self.timeline.rows(t)
        diag: dict[str, Any] = {"t": t}
        if self.fresh(t):
            # 1. candidates: PSFO(1) over I ∪ {⊥} (G1); 2. lengths |v ∩ C| (G2)
            f1, psfo = self.report_items("G1", base, rows[self.groups["G1"]], 1, rng)
            self.cands = top_indices(f1, self.n_c, rng)
            diag["phase1"] = psfo.describe()
            lengths = self.membership(base).counts(rows[self.groups["G2"]])
            diag["phase2"] = self.estimate_length("G2", lengths, self.n_c + 1, rng)
        # 3. estimation: PS_ℓ(v ∩ C) (G3); 4. correction u(ℓ)
        users = rows[self.groups["G3"]]
        f_c, psfo = self.report_candidates("G3", base, users, self.ell, self.coding, rng)
        diag["phase3"] = psfo.describe()
        freqs = self.u * f_c
        order = top_indices(freqs, self.miner.k)
        diag.update(
            ell=self.ell,
            correction=self.u,
            n_candidates=int(self.cands.size),
            candidates=self.cands.tolist(),
            estimates=freqs.tolist(),
            theta=self.theta.tolist(),
        )
        keys = tuple((int(x),) for x in self.cands[order])
        return TopK(keys, freqs[order]), diag

    def params_record(self) -> dict[str, Any]:
        """Every setting of the run."""
        return {
            **self.base_params(),
            "n_candidates": self.n_c,
            "oracle": self.spec.describe(),
            "svim": self.prm.describe(),
            "policy": self.miner.policy,
            "postprocess": postprocess_name(self.postprocess),
            "engine": self.engine,
            "dummies": "shared, memoized" if self.spec.longitudinal else "distinct",
            "group_sizes": {name: int(g.size) for name, g in self.groups.items()},
            "ties": "larger estimate first; candidates: random; output: candidate order",
        }
