"""SVSM: top-k frequent itemsets of set-valued data under LDP, one-shot and longitudinal.

A share s₁ of the users (default 0.5) runs SVIM (:mod:`longldp.apps.setvalued.svim`) and
yields the top-k items R₁ with their corrected estimates f̂'. The other users split 20 % (G4,
length) / 80 % (G5, estimation) (math §9.3):

1. **Candidates** (server only, no privacy cost). Item score a(x) = 0.9·f̂'(x)/max_y f̂'(y);
   itemset score a(S) = Π_{x∈S} a(x) (independence). A best-first, level-by-level search keeps
   the 3k best tuples (singletons count); IS = the 2k best tuples of size >= 2
   (:func:`candidate_itemsets`).
2. **Length (G4).** M_u = #{S ∈ IS : S ⊆ v_u} through a plain FO; ℓ_s by the percentile rule.
3. **Estimation (G5).** PS_{ℓ_s} over the contained candidates, PSFO(ℓ_s) over IS ∪ dummies;
   f̂(S) = u(ℓ_s)·ℓ_s·f̂_FO(S).
4. **Output.** The k largest of the k SVIM singletons (f̂') and the 2k itemsets (f̂).

Longitudinal mode (math §9.5): fixed groups; G4 over {0..|IS|}, G5 over |IS| sticky slots ∪ {⊥}
(an itemset keeps its slot, hence its memo, while it stays a candidate; a time-stable
encoding of itemsets, which the sources leave open). ``"freeze"`` keeps IS, ℓ_s and u(ℓ_s) from
t = 0 (G4 reports at t = 0 only); SVIM's own policy is the same.

References: WLJ's SVSM as reconstructed in docs/math.md §9.3, §9.5, §9.8.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.apps.setvalued.common import (
    ContainmentIndex,
    FloatArray,
    IntArray,
    MiningResult,
    Timeline,
    TopK,
    max_itemsets,
    split_groups,
    sticky_slots,
)
from longldp.apps.setvalued.miner import MinerConfig, MinerRun, postprocess_name
from longldp.apps.setvalued.psfo import pad_and_sample
from longldp.apps.setvalued.svim import SVIM, SVIMParams, SVIMRun

OWNER = "SVSM"


# ------------------------------------------------------------------------------ candidates


def best_first(scores: ArrayLike, n_keep: int) -> tuple[list[tuple[int, ...]], FloatArray]:
    """The ``n_keep`` best tuples of positions 0..r−1 under the product score (math §9.3 step 2).

    A tuple is a strictly increasing sequence of positions; its score is the product of
    ``scores`` in position order. The total order is: larger score, then smaller size, then
    lexicographically smaller tuple. The search is level by level: a tuple of size m+1 is
    generated only from its prefix of size m (extensions take later positions only, so no set
    twice), and only while that prefix is kept; a level that admits nothing ends the search.
    With scores in [0, 1) an extension ranks strictly below its prefix, so the pruning is exact:
    the result equals sorting every non-empty tuple by the total order (tested against brute
    force). Each level is vectorized (<= n_keep·r extensions).

    Parameters
    ----------
    scores : array_like of float in [0, 1)
    n_keep : int

    Returns
    -------
    tuples : list of tuple of int
        Best first.
    values : numpy.ndarray
        Their scores.
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or np.any(a < 0) or np.any(a >= 1) or not np.all(np.isfinite(a)):
        raise ValueError(f"{OWNER}: 'scores' must be a non-empty vector of numbers in [0, 1).")
    n_keep = check.integer(OWNER, "n_keep", n_keep, minimum=1)
    r = a.size
    tup = np.arange(r, dtype=np.int64)[:, None]
    size = np.ones(r, dtype=np.int64)
    val = a.copy()
    tup, size, val, _ = _select(tup, size, val, np.ones(r, dtype=bool), n_keep)
    m = 1
    while True:
        parents = np.flatnonzero(size == m)
        last = tup[parents, m - 1]
        count = r - 1 - last
        total = int(count.sum())
        if total == 0:
            break
        pidx = np.repeat(parents, count)
        offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        ext = np.repeat(last, count) + 1 + offset
        width = max(tup.shape[1], m + 1)
        new = np.full((total, width), -1, dtype=np.int64)
        new[:, :m] = tup[pidx, :m]
        new[:, m] = ext
        if tup.shape[1] < width:
            tup = np.hstack([tup, np.full((tup.shape[0], width - tup.shape[1]), -1)])
        tup, size, val, fresh = _select(
            np.vstack([tup, new]),
            np.concatenate([size, np.full(total, m + 1)]),
            np.concatenate([val, val[pidx] * a[ext]]),
            np.concatenate([np.zeros(size.size, dtype=bool), np.ones(total, dtype=bool)]),
            n_keep,
        )
        if not fresh.any():
            break
        m += 1
    tuples = [tuple(int(x) for x in row[:s]) for row, s in zip(tup, size, strict=True)]
    return tuples, val


def _select(
    tup: IntArray, size: IntArray, val: FloatArray, fresh: NDArray[np.bool_], n_keep: int
) -> tuple[IntArray, IntArray, FloatArray, NDArray[np.bool_]]:
    """Keep the n_keep best rows under (larger score, smaller size, smaller tuple)."""
    keys = [tup[:, j] for j in range(tup.shape[1] - 1, -1, -1)]
    order = np.lexsort((*keys, size, -val))[:n_keep]
    return tup[order], size[order], val[order], fresh[order]


def candidate_itemsets(
    items: ArrayLike,
    freqs: ArrayLike,
    n_itemsets: int,
    n_keep: int,
    scale: float = 0.9,
) -> tuple[list[tuple[int, ...]], FloatArray]:
    """IS: the ``n_itemsets`` best itemsets of size >= 2 over ``items`` (math §9.3 step 2).

    a(x) = scale·max(f̂'(x), 0)/max_y f̂'(y) (all 0 if no estimate is positive); items are
    ordered by (a desc, position in ``items``), :func:`best_first` keeps the ``n_keep`` best tuples
    (singletons count), and the best ``n_itemsets`` tuples of size >= 2 are returned as sorted
    tuples of item ids, best first, with their scores.
    """
    ids = np.asarray(items, dtype=np.int64)
    f = np.clip(np.asarray(freqs, dtype=np.float64), 0.0, None)
    scale = check.positive_float(OWNER, "scale", scale, upper=1.0)
    top = f.max() if f.size else 0.0
    a = scale * f / top if top > 0 else np.zeros(f.size)
    order = np.lexsort((np.arange(ids.size), -a))
    tuples, values = best_first(a[order], n_keep)
    chosen = [(t, v) for t, v in zip(tuples, values, strict=True) if len(t) >= 2][:n_itemsets]
    sets = [tuple(sorted(int(ids[order[p]]) for p in t)) for t, _ in chosen]
    return sets, np.array([v for _, v in chosen], dtype=np.float64)


# ------------------------------------------------------------------------------ the app


@dataclass(frozen=True)
class SVSMParams:
    """SVSM's tunable constants, with the defaults of docs/math.md §9 (math §9.3, §9.8.8).

    Parameters
    ----------
    svim_share : float, default=0.5
        Share s₁ of the users that runs SVIM (0.4 in vvv214, 0.5 in CorneyHeY).
    length_share : float, default=0.2
        Share of the remaining users in G4 (length); G5 gets the rest (20/80 in both codes).
    itemset_factor : int, default=2
        |IS| = itemset_factor·k (vvv214 keeps k; CorneyHeY 2k).
    keep_factor : int, default=3
        The best-first search keeps keep_factor·k tuples, singletons included.
    score_scale : float, default=0.9
        a(x) = score_scale·f̂'(x)/max f̂'.
    percentile : float, default=0.9
    length_cap : int or None, default=None
    svim : SVIMParams
        Parameters of the internal SVIM.
    """

    svim_share: float = 0.5
    length_share: float = 0.2
    itemset_factor: int = 2
    keep_factor: int = 3
    score_scale: float = 0.9
    percentile: float = 0.9
    length_cap: int | None = None
    svim: SVIMParams = field(default_factory=SVIMParams)

    def __post_init__(self) -> None:
        check.positive_float(OWNER, "svim_share", self.svim_share, upper=1.0)
        check.positive_float(OWNER, "length_share", self.length_share, upper=1.0)
        check.integer(OWNER, "itemset_factor", self.itemset_factor, minimum=1)
        check.integer(OWNER, "keep_factor", self.keep_factor, minimum=self.itemset_factor + 1)
        check.positive_float(OWNER, "score_scale", self.score_scale, upper=1.0)
        check.probability(OWNER, "percentile", self.percentile)
        if self.length_cap is not None:
            check.integer(OWNER, "length_cap", self.length_cap, minimum=1)
        if not isinstance(self.svim, SVIMParams):
            raise ValueError(f"{OWNER}: 'svim' must be an SVIMParams.")

    def shares(self) -> tuple[float, ...]:
        """Shares of G1, G2, G3 (SVIM) and G4, G5."""
        s1, rest = self.svim_share, 1.0 - self.svim_share
        return (
            *(s1 * x for x in self.svim.shares),
            rest * self.length_share,
            rest * (1.0 - self.length_share),
        )

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        out["svim"] = self.svim.describe()
        return out


@dataclass(frozen=True)
class SVSM(MinerConfig):
    """SVSM (WLJ; math §9.3, §9.5) configured once, run on any data.

    The fields of :class:`~longldp.apps.setvalued.miner.MinerConfig` (``run``: see
    :class:`~longldp.apps.setvalued.miner.TimelineMiner`; the result's ``items`` is the
    internal SVIM's result), with 2 <= k <= 2^d − 1 for d items (the internal SVIM uses
    min(k, d)) and ``params`` an :class:`SVSMParams`.
    """

    owner = OWNER
    min_k = 2

    params: SVSMParams = field(default_factory=SVSMParams)

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> SVSMRun:
        """Groups G1-G3 (SVIM) and G4/G5 drawn once (math §9.3)."""
        return SVSMRun(self, timeline, split_groups(timeline.n, self.params.shares(), rng), engine)


class SVSMRun(MinerRun):
    """SVSM's state over timestamps; it owns an :class:`SVIMRun` on G1-G3 of the same
    population (one spent budget over the five groups)."""

    owner = OWNER
    target = "itemsets"

    def __init__(self, svsm: SVSM, timeline: Timeline, groups: list[IntArray], engine: str):
        d = timeline.d
        if d < 2 or svsm.k > max_itemsets(d) + d:
            raise ValueError(
                f"{OWNER}: 'k' must be at most the number of non-empty itemsets over the "
                f"{d} items ({max_itemsets(d) + d}), and at least 2 items are needed; got "
                f"k = {svsm.k}."
            )
        super().__init__(svsm, timeline, svsm.oracle, engine)
        self.prm = svsm.params
        self.k_items = min(svsm.k, d)
        svim = SVIM(self.k_items, svsm.oracle, self.prm.svim, svsm.policy, svsm.postprocess)
        self.svim = SVIMRun(svim, timeline, groups[:3], engine, self.population)
        self.groups = {"G4": groups[3], "G5": groups[4]}
        self.n_is = min(self.prm.itemset_factor * svsm.k, max_itemsets(self.k_items))
        self.add_groups(self.groups, {"G4": self.n_is + 1, "G5": self.n_is + 1})
        self.itemsets: list[tuple[int, ...]] = []

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict, TopK, dict]:
        """Timestamp t: (itemset top-k, diagnostics, SVIM's item top-k, its diagnostics)."""
        items_top, items_diag = self.svim.step(t, rng)
        base, rows = self.timeline.rows(t)
        fresh = self.fresh(t)
        diag: dict[str, Any] = {"t": t}
        if fresh:
            self.itemsets, _ = candidate_itemsets(
                items_top.items,
                items_top.freqs,
                self.n_is,
                self.prm.keep_factor * self.miner.k,
                self.prm.score_scale,
            )
        users4, users5 = rows[self.groups["G4"]], rows[self.groups["G5"]]
        n4 = users4.size if fresh else 0
        within = self.svim.membership(base)  # every item of IS is one of SVIM's candidates
        users = np.concatenate([users4[:n4], users5])
        index = ContainmentIndex(base, users, self.itemsets, within)
        if fresh:
            lengths = index.counts(slice(0, n4))
            diag["phase4"] = self.estimate_length("G4", lengths, self.n_is + 1, rng)
        m = index.counts(slice(n4, None))
        r = pad_and_sample(m, self.ell, rng)
        real = np.flatnonzero(r < m)
        picked = index.pick(n4 + real, r[real])
        if self.spec.longitudinal:  # an itemset keeps its slot (and memo) while a candidate
            self.slots = sticky_slots(self.slots, self.itemsets, self.n_is)
            slot = {key: s for s, key in enumerate(self.slots) if key is not None}
            code_of = np.array([slot[c] for c in self.itemsets], dtype=np.int64)
        else:
            code_of = np.arange(len(self.itemsets), dtype=np.int64)
        psfo = self.psfo("G5", len(self.itemsets), self.ell)
        codes = psfo.encode(r, m, code_of[picked])
        support = self.inst["G5"].support(codes, rng, psfo.oracle, psfo.eps)
        est = psfo.estimate(support, users5.size, self.postprocess)
        f_sets = self.u * est[code_of]
        keys = list(items_top.keys) + self.itemsets
        freqs = np.concatenate([items_top.freqs, f_sets])
        order = np.lexsort((np.arange(len(keys)), -freqs))[: self.miner.k]
        diag.update(
            phase5=psfo.describe(),
            ell=self.ell,
            correction=self.u,
            n_candidates=len(self.itemsets),
            candidates=[list(c) for c in self.itemsets],
            theta=self.theta.tolist(),
        )
        top = TopK(tuple(keys[i] for i in order), freqs[order])
        return top, diag, items_top, items_diag

    def params_record(self) -> dict[str, Any]:
        """Every setting of the run (group sizes of all five groups)."""
        groups = {**self.svim.groups, **self.groups}
        return {
            **self.base_params(),
            "k_items": self.k_items,
            "n_itemset_candidates": self.n_is,
            "oracle": self.spec.describe(),
            "svsm": self.prm.describe(),
            "policy": self.miner.policy,
            "postprocess": postprocess_name(self.postprocess),
            "engine": self.engine,
            "dummies": "shared, memoized" if self.spec.longitudinal else "distinct",
            "itemset_domain": "sticky slots" if self.spec.longitudinal else "IS",
            "group_sizes": {name: int(g.size) for name, g in groups.items()},
            "ties": "larger estimate first, then singletons (SVIM order), then itemsets (IS order)",
        }

    def result(self, steps: list[tuple[Any, ...]]) -> MiningResult:
        """The itemsets' result, with SVIM's as ``items`` (both carry the budget of all five
        groups) and the groups of both."""
        items = self.svim.result([(s[2], s[3]) for s in steps])
        mining = super().result(steps)
        groups = {**self.svim.groups, **self.groups}
        return dataclasses.replace(mining, groups=groups, items=items)
