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
from longldp import postprocess as pp
from longldp.apps.setvalued.common import (
    POLICIES,
    FloatArray,
    IntArray,
    MembershipIndex,
    MiningResult,
    Timeline,
    TopK,
    check_shares,
    sample_one_item,
    split_groups,
    sticky_slots,
    top_indices,
)
from longldp.apps.setvalued.oracle import FOInstance, OracleSpec, population_budget
from longldp.apps.setvalued.psfo import PSFO, pad_and_sample, percentile_length, truncation_factor
from longldp.data import SetData

OWNER = "SVIM"
#: Encodings of the longitudinal estimation domain (math §9.5).
DOMAINS = ("items", "slots")


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


def check_common(app: Any, owner: str, min_k: int = 1) -> None:
    """Validate and normalize the fields every mining app shares (called from __post_init__):
    k >= ``min_k``, the policy, the post-processing name and the oracle spec."""
    k = check.integer(owner, "k", app.k, minimum=1)
    if k < min_k:
        raise ValueError(
            f"{owner}: 'k' must be >= {min_k} (with k = 1 no itemset of size >= 2 can be a "
            f"candidate); got {k}."
        )
    policy = check.choice(owner, "policy", app.policy, POLICIES)
    if isinstance(app.postprocess, str):
        pp.get_method(app.postprocess)
    elif app.postprocess is not None and not callable(app.postprocess):
        raise ValueError(f"{owner}: 'postprocess' must be a method name, a callable or None.")
    if not isinstance(app.oracle, OracleSpec):
        raise ValueError(f"{owner}: 'oracle' must be an OracleSpec (see make_spec).")
    object.__setattr__(app, "k", k)
    object.__setattr__(app, "policy", policy)


@dataclass(frozen=True)
class SVIM:
    """SVIM (WLJ; math §9.2, §9.5) configured once, run on any data.

    Parameters
    ----------
    k : int
        Output size, 1 <= k <= item domain size.
    oracle : OracleSpec
        One-shot (ε; ``"adaptive"`` by default) or longitudinal (ε∞, ε1) oracle.
    params : SVIMParams, optional
    policy : {"reestimate", "freeze"}, default="reestimate"
        Longitudinal candidates and ℓ: re-estimated every timestamp, or kept from t = 0.
    postprocess : str, callable or None, default=None
        Applied to every FO's full estimate vector (items and dummies) before dummies are
        dropped and before ℓ-scaling ([002] uses ``"norm-sub"``).
    """

    k: int
    oracle: OracleSpec
    params: SVIMParams = field(default_factory=SVIMParams)
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
        """Run over every timestamp of ``data``.

        Parameters
        ----------
        data : SetData, LongitudinalSets or sequence of SetData
        rng : numpy.random.Generator or seed
        engine : {"count-level", "per-user", "reports"}, default="count-level"
        n_items : int, optional
            Public item domain size (default: the data's).

        Returns
        -------
        MiningResult
        """
        gen = np.random.default_rng(rng)
        timeline = Timeline(data, n_items)
        groups = split_groups(timeline.n, self.params.shares, gen)
        run = SVIMRun(self, timeline, groups, engine)
        steps = [run.step(t, gen) for t in range(timeline.tau)]
        return run.result(steps)


class SVIMRun:
    """SVIM's state over timestamps: fixed groups, oracle instances, candidates, ℓ."""

    def __init__(self, svim: SVIM, timeline: Timeline, groups: list[IntArray], engine: str):
        d = timeline.d
        if svim.k > d:
            raise ValueError(
                f"{OWNER}: 'k' must be at most the item domain size {d} (fewer than k items "
                f"exist); got {svim.k}. Pass k = min(k, {d}) to estimate every item."
            )
        self.svim, self.timeline, self.spec = svim, timeline, svim.oracle
        self.prm = svim.params
        self.n_c = min(self.prm.candidate_factor * svim.k, d)
        self.groups = dict(zip(("G1", "G2", "G3"), groups, strict=True))
        self.inst = {name: FOInstance(name, users, engine) for name, users in self.groups.items()}
        self.engine = engine
        if self.spec.longitudinal:
            size3 = d + 1 if self.prm.domain == "items" else self.n_c + 1
            self.chains = {
                "G1": self.spec.chain(d + 1),
                "G2": self.spec.chain(self.n_c + 1),
                "G3": self.spec.chain(size3),
            }
        self.cands: IntArray = np.zeros(0, dtype=np.int64)
        self.ell, self.u = 1, 1.0
        self.theta: FloatArray = np.zeros(0)
        self.slots: list | None = None
        self._index: tuple[SetData, bytes, MembershipIndex] | None = None

    # ------------------------------------------------------------------ phases
    def membership(self, base: SetData) -> MembershipIndex:
        """The membership index of the current candidates C over ``base`` (cached)."""
        key = self.cands.tobytes()
        if self._index is not None and self._index[0] is base and self._index[1] == key:
            return self._index[2]
        member = np.zeros(self.timeline.d, dtype=bool)
        member[self.cands] = True
        index = MembershipIndex(base, member)
        self._index = (base, key, index)
        return index

    def _candidates(self, base: SetData, rows: IntArray, rng: np.random.Generator) -> dict:
        d, users = self.timeline.d, rows[self.groups["G1"]]
        start = base.indptr[users]
        m = base.indptr[users + 1] - start
        r = pad_and_sample(m, 1, rng)
        items, _ = sample_one_item(base, users, r)
        psfo = self._psfo("G1", d, 1)
        support = self.inst["G1"].collect(psfo.oracle, psfo.encode(r, m, items), rng, psfo.eps)
        f1 = psfo.estimate(support, users.size, self.svim.postprocess)
        self.cands = top_indices(f1, self.n_c, rng)
        return psfo.describe()

    def _length(self, base: SetData, rows: IntArray, rng: np.random.Generator) -> dict:
        users = rows[self.groups["G2"]]
        lengths = self.membership(base).counts(users)
        oracle = self.chains["G2"] if self.spec.longitudinal else self.spec.plain(self.n_c + 1)
        support = self.inst["G2"].collect(oracle, lengths, rng, self.spec.eps)
        theta = oracle.estimate(support, users.size, self.svim.postprocess)
        self.theta = np.clip(theta, 0.0, None)
        self.ell = percentile_length(self.theta, self.prm.percentile, self.prm.length_cap)
        self.u = truncation_factor(self.theta, self.ell)
        return {"fo": oracle.name, "fo_domain": oracle.k}

    def _psfo(self, group: str, d: int, ell: int) -> PSFO:
        if self.spec.longitudinal:
            chain = self.chains[group]
            return self.spec.chain_psfo(chain, chain.k - 1, ell)
        return self.spec.psfo(d, ell)

    def _estimate(self, base: SetData, rows: IntArray, rng: np.random.Generator) -> tuple:
        users = rows[self.groups["G3"]]
        index = self.membership(base)
        m = index.counts(users)
        r = pad_and_sample(m, self.ell, rng)
        real = r < m
        items = index.pick(users[real], r[real])
        reportable = None
        if not self.spec.longitudinal:
            rank = np.full(self.timeline.d, -1, dtype=np.int64)
            rank[self.cands] = np.arange(self.cands.size)
            psfo, codes_of_c = self._psfo("G3", self.n_c, self.ell), np.arange(self.n_c)
            real_codes = rank[items]
        elif self.prm.domain == "items":
            psfo, codes_of_c, real_codes = self._psfo("G3", 0, self.ell), self.cands, items
            reportable = np.append(self.cands, self.timeline.d)
        else:
            self.slots = sticky_slots(self.slots, self.cands.tolist(), self.n_c)
            slot_of = np.full(self.timeline.d, -1, dtype=np.int64)
            filled = [(s, x) for s, x in enumerate(self.slots) if x is not None]
            slot_of[[x for _, x in filled]] = [s for s, _ in filled]
            psfo, codes_of_c = self._psfo("G3", self.n_c, self.ell), slot_of[self.cands]
            real_codes = slot_of[items]
        codes = psfo.encode(r, m, real_codes)
        support = self.inst["G3"].collect(psfo.oracle, codes, rng, psfo.eps)
        est = psfo.estimate(support, users.size, self.svim.postprocess, reportable)
        return est[codes_of_c], psfo.describe()

    # ------------------------------------------------------------------ one timestamp
    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict[str, Any]]:
        """Run timestamp t; returns the top-k items and the diagnostics."""
        base, rows = self.timeline.rows(t)
        diag: dict[str, Any] = {"t": t}
        if self.svim.policy == "reestimate" or t == 0:
            diag["phase1"] = self._candidates(base, rows, rng)
            diag["phase2"] = self._length(base, rows, rng)
        f_c, diag["phase3"] = self._estimate(base, rows, rng)
        freqs = self.u * f_c
        order = top_indices(freqs, self.svim.k)
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

    def params_record(self, engine: str) -> dict[str, Any]:
        """Every setting of the run."""
        return {
            "app": OWNER,
            "k": self.svim.k,
            "n": self.timeline.n,
            "tau": self.timeline.tau,
            "n_items": self.timeline.d,
            "n_candidates": self.n_c,
            "oracle": self.spec.describe(),
            "svim": self.prm.describe(),
            "policy": self.svim.policy,
            "postprocess": _pp_name(self.svim.postprocess),
            "engine": engine,
            "dummies": "shared, memoized" if self.spec.longitudinal else "distinct",
            "group_sizes": {name: int(g.size) for name, g in self.groups.items()},
            "ties": "larger estimate first; candidates: random; output: candidate order",
        }

    def result(self, steps: list[tuple[TopK, dict]]) -> MiningResult:
        budget = population_budget(self.timeline.n, list(self.inst.values()))
        return MiningResult(
            app=OWNER,
            target="items",
            k=self.svim.k,
            topk=tuple(s[0] for s in steps),
            diagnostics=tuple(s[1] for s in steps),
            params=self.params_record(self.engine),
            groups=dict(self.groups),
            budget=budget,
        )


def _pp_name(postprocess: Any) -> str | None:
    if postprocess is None or isinstance(postprocess, str):
        return postprocess
    return getattr(postprocess, "__name__", repr(postprocess))
