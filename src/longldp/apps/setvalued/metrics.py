"""Exact ground truth and the accuracy metrics of set-valued mining (math §9.3, §9.6).

Ground truth (fractions of all n users):

- items: f(x) = #{u : x ∈ v_u}/n; the true top-k ranks by f, ties to the smaller id;
- itemsets: f(S) = #{u : S ⊆ v_u}/n; the true top-k (singletons included) is mined exactly by
  a level-wise Apriori restricted to the true top-k items (every item of a top-k itemset is
  itself a top-k item, ties aside, math §9.3), ranked by (support desc, size asc, item tuple).

Metrics at each timestamp t, with T the true and R the reported top-k:

- **top-k MSE** of [000] §8 (math §9.6): X = T∖R, Y = R∖T, V = T∩R,
  MSE_t = [Σ_X f(x)² + Σ_Y f(y)² + Σ_V (f(v) − f̂(v))²] / (|X| + |Y| + |V|).
  ``reading="literal"`` (default) uses the true f(y) of a false positive, as printed;
  ``"estimated"`` uses f̂(y) (the "zero-filled answer" reading). MSE_avg = mean over t.
- WLJ's metrics (math §9.6): **precision** |R∩T|/|R|, **recall** |R∩T|/|T|, **F1** their
  harmonic mean, and **NCR** = Σ_{x∈R∩T} (k + 1 − rank_T(x)) / (k(k+1)/2) (quality k+1−i,
  not CorneyHeY's inverted quality = rank).

Every metric is also averaged over timestamps ([002]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.apps.setvalued.common import (
    FloatArray,
    IntArray,
    MiningResult,
    Timeline,
    TopK,
    row_masks,
    unique_rows,
)
from longldp.data import SetData

OWNER = "setvalued metrics"
MSE_READINGS = ("literal", "estimated")
METRICS = ("mse", "precision", "recall", "f1", "ncr")
#: Candidate itemsets counted at once against the distinct row masks.
_CHUNK = 256

Key = tuple[int, ...]


# ------------------------------------------------------------------------------ bit masks


def _row_masks(data: SetData, universe: IntArray) -> tuple[NDArray[np.uint64], IntArray]:
    """Distinct masks of the rows over ``universe`` (bit j = universe[j]) and their counts."""
    words = max(1, -(-universe.size // 64))
    bitpos = np.full(max(data.domain.size, 1), -1, dtype=np.int64)
    bitpos[universe] = np.arange(universe.size)
    uniq, _, counts = unique_rows(row_masks(data.indptr, data.items, bitpos, words))
    return uniq, counts


def _set_masks(sets: Sequence[Sequence[int]], words: int) -> NDArray[np.uint64]:
    """Masks of itemsets given as bit positions."""
    out = np.zeros((len(sets), words), dtype=np.uint64)
    for j, s in enumerate(sets):  # itemsets, not users
        for b in s:
            out[j, b // 64] |= np.uint64(1) << np.uint64(b % 64)
    return out


def _supports(masks: NDArray[np.uint64], weights: IntArray, sets: NDArray[np.uint64]) -> IntArray:
    """Σ weights of the masks that contain each set (chunked over sets)."""
    out = np.zeros(sets.shape[0], dtype=np.int64)
    for lo in range(0, sets.shape[0], _CHUNK):
        block = sets[lo : lo + _CHUNK]
        inside = np.ones((masks.shape[0], block.shape[0]), dtype=bool)
        for w in range(masks.shape[1]):
            inside &= (masks[:, w, None] & block[None, :, w]) == block[None, :, w]
        out[lo : lo + _CHUNK] = weights @ inside
    return out


def itemset_counts(data: SetData, itemsets: Sequence[Key]) -> IntArray:
    """#{u : S ⊆ v_u} for each itemset S (exact; O(nnz) once plus distinct masks × sets).

    Items outside the data's domain are held by nobody (support 0).
    """
    out = np.zeros(len(itemsets), dtype=np.int64)
    ok = [i for i, s in enumerate(itemsets) if all(0 <= x < data.domain.size for x in s)]
    if not ok:
        return out
    universe = np.unique(np.fromiter((x for i in ok for x in itemsets[i]), dtype=np.int64))
    masks, weights = _row_masks(data, universe)
    pos = {int(x): j for j, x in enumerate(universe)}
    sets = _set_masks([[pos[x] for x in itemsets[i]] for i in ok], masks.shape[1])
    out[ok] = _supports(masks, weights, sets)
    return out


def apriori_top_k(data: SetData, k: int) -> tuple[list[Key], IntArray]:
    """The exact top-k itemsets (singletons included) over the true top-k items.

    Level-wise Apriori on the distinct row masks over the top min(k, d) items R: singletons,
    then every pair at once (one matrix product), then joins of kept m-itemsets sharing an
    (m−1)-prefix whose every m-subset is kept. Once k itemsets are known with k-th support θ, a
    larger itemset can only enter with support > θ, so only itemsets above θ are extended.

    Returns
    -------
    keys : list of tuple of int
        Sorted item-id tuples, ranked by (support desc, size asc, tuple asc).
    counts : numpy.ndarray of int64
        Their supports (number of users).
    """
    k = check.integer(OWNER, "k", k, minimum=1)
    counts = data.item_counts()
    r_items = np.lexsort((np.arange(counts.size), -counts))[: min(k, counts.size)]
    r_items = np.sort(r_items)
    masks, weights = _row_masks(data, r_items)
    found: dict[tuple[int, ...], int] = {(j,): int(counts[x]) for j, x in enumerate(r_items)}
    bits = np.unpackbits(masks.view(np.uint8), axis=1, bitorder="little")[:, : r_items.size]
    xw = bits.astype(np.float64)
    pair = (xw * weights[:, None]).T @ xw
    ii, jj = np.triu_indices(r_items.size, 1)
    level = {(int(a), int(b)): round(pair[a, b]) for a, b in zip(ii, jj, strict=True)}
    found.update(level)
    m = 2
    while level:
        theta = _kth(found, k)
        kept = sorted(s for s, c in level.items() if c > theta)
        kept_set = set(kept)
        cands = []
        for i, a in enumerate(kept):  # kept m-itemsets (few), not users
            for b in kept[i + 1 :]:
                if a[:-1] != b[:-1]:
                    break
                c = (*a, b[-1])
                if all(c[:j] + c[j + 1 :] in kept_set for j in range(m + 1)):
                    cands.append(c)
        if not cands:
            break
        supp = _supports(masks, weights, _set_masks(cands, masks.shape[1]))
        level = dict(zip(cands, supp.tolist(), strict=True))
        found.update(level)
        m += 1
    keys = [tuple(int(r_items[j]) for j in s) for s in found]
    vals = np.array(list(found.values()), dtype=np.int64)
    order = sorted(range(len(keys)), key=lambda i: (-vals[i], len(keys[i]), keys[i]))[:k]
    return [keys[i] for i in order], vals[order]


def _kth(found: dict[tuple[int, ...], int], k: int) -> int:
    """Support of the k-th best itemset found so far; −1 while fewer than k are known."""
    if len(found) < k:
        return -1
    vals = np.fromiter(found.values(), dtype=np.int64, count=len(found))
    return int(np.partition(vals, vals.size - k)[vals.size - k])


# ------------------------------------------------------------------------------ truth


class TimestampTruth:
    """Exact frequencies of one timestamp's data, with cached top-k lists and supports."""

    def __init__(self, data: SetData, n_items: int | None = None):
        self.data = data
        self.n = data.n
        d = data.domain.size if n_items is None else n_items
        self.item_counts = np.bincount(data.items, minlength=d).astype(np.int64)
        self._support: dict[Key, int] = {}
        self._top_sets: dict[int, tuple[list[Key], IntArray]] = {}
        self._holders: _ItemHolders | None = None

    def top_items(self, k: int) -> list[Key]:
        """True top-k items (1-tuples), best first; ties to the smaller id."""
        order = np.lexsort((np.arange(self.item_counts.size), -self.item_counts))[:k]
        return [(int(x),) for x in order]

    def top_itemsets(self, k: int) -> list[Key]:
        """True top-k itemsets (singletons included), best first (:func:`apriori_top_k`)."""
        if k not in self._top_sets:
            keys, supp = apriori_top_k(self.data, k)
            self._top_sets[k] = (keys, supp)
            self._support.update(zip(keys, supp.tolist(), strict=True))
        return self._top_sets[k][0]

    def frequencies(self, keys: Sequence[Key]) -> FloatArray:
        """True f(key) = support/n for items (1-tuples) and itemsets."""
        missing = [s for s in dict.fromkeys(keys) if len(s) > 1 and s not in self._support]
        if missing:
            if self._holders is None:
                self._holders = _ItemHolders(self.data)
            self._support.update((s, self._holders.support(s)) for s in missing)
        size = self.item_counts.size
        vals = [
            (self.item_counts[s[0]] if s[0] < size else 0) if len(s) == 1 else self._support[s]
            for s in keys
        ]
        return np.asarray(vals, dtype=np.float64) / self.n


class _ItemHolders:
    """Per-item bit sets of the users holding it (built lazily, cached): the support of an
    itemset is the popcount of the AND of its items' bit sets, O(|S|·n/64)."""

    def __init__(self, data: SetData):
        self.n = data.n
        order = np.argsort(data.items, kind="stable")
        self.users = np.repeat(np.arange(data.n, dtype=np.int64), data.lengths)[order]
        self.ptr = np.zeros(data.domain.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(data.items, minlength=data.domain.size), out=self.ptr[1:])
        self.words = -(-data.n // 64)
        self._bits: dict[int, NDArray[np.uint64]] = {}

    def bits(self, x: int) -> NDArray[np.uint64]:
        if x not in self._bits:
            flag = np.zeros(self.words * 64, dtype=bool)
            if 0 <= x < self.ptr.size - 1:
                flag[self.users[self.ptr[x] : self.ptr[x + 1]]] = True
            self._bits[x] = np.packbits(flag, bitorder="little").view(np.uint64)
        return self._bits[x]

    def support(self, itemset: Key) -> int:
        acc = self.bits(itemset[0]).copy()
        for x in itemset[1:]:  # the items of one itemset
            acc &= self.bits(x)
        return int(np.bitwise_count(acc).sum())


@dataclass(frozen=True)
class SetValuedTruth:
    """Ground truth of every timestamp (one shared object when the data is permuted)."""

    timestamps: tuple[TimestampTruth, ...]

    @property
    def tau(self) -> int:
        return len(self.timestamps)


def setvalued_truth(data: Any, n_items: int | None = None) -> SetValuedTruth:
    """Exact ground truth of ``data`` (SetData, LongitudinalSets or sequence of SetData).

    A `LongitudinalSets` permutes whole sets, so its truth is computed once and shared by all
    timestamps (exact, not an approximation). Top-k lists are computed lazily per k.
    """
    timeline = Timeline(data, n_items)
    if timeline.permutation_invariant:
        one = TimestampTruth(timeline.at(0), timeline.d)
        return SetValuedTruth(tuple([one] * timeline.tau))
    return SetValuedTruth(
        tuple(TimestampTruth(timeline.at(t), timeline.d) for t in range(timeline.tau))
    )


# ------------------------------------------------------------------------------ metrics


def topk_mse(
    reported: TopK, true_keys: Sequence[Key], truth: TimestampTruth, reading: str = "literal"
) -> float:
    """Seed-000 top-k MSE of one timestamp (math §9.6), fractions of all n users."""
    reading = check.choice(OWNER, "reading", reading, MSE_READINGS)
    est = reported.as_dict()
    T, R = set(true_keys), set(reported.keys)
    missed, false, hits = sorted(T - R), sorted(R - T), sorted(T & R)
    total = len(missed) + len(false) + len(hits)
    if total == 0:
        return 0.0
    num = float(np.sum(truth.frequencies(missed) ** 2)) if missed else 0.0
    if false:
        y = truth.frequencies(false) if reading == "literal" else np.array([est[s] for s in false])
        num += float(np.sum(y**2))
    if hits:
        num += float(np.sum((truth.frequencies(hits) - np.array([est[s] for s in hits])) ** 2))
    return num / total


def precision_recall_f1(
    reported: Sequence[Key], true_keys: Sequence[Key]
) -> tuple[float, float, float]:
    """|R∩T|/|R|, |R∩T|/|T| and their harmonic mean (0 when both are 0)."""
    hit = len(set(reported) & set(true_keys))
    p = hit / len(reported) if reported else 0.0
    r = hit / len(true_keys) if true_keys else 0.0
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def ncr(reported: Sequence[Key], true_keys: Sequence[Key]) -> float:
    """NCR: Σ_{x∈R∩T} (k + 1 − rank_T(x)) / (k(k+1)/2), rank 1 = most frequent (math §9.6)."""
    k = len(true_keys)
    if k == 0:
        return 0.0
    quality = {key: k - i for i, key in enumerate(true_keys)}
    return sum(quality[x] for x in set(reported) if x in quality) / (k * (k + 1) / 2)


@dataclass(frozen=True)
class MetricTable:
    """Per-timestamp metrics of one target ("items" or "itemsets") of one run."""

    target: str
    k: int
    reading: str
    values: dict[str, FloatArray] = field(repr=False)

    @property
    def tau(self) -> int:
        return int(next(iter(self.values.values())).size)

    def averages(self) -> dict[str, float]:
        """Every metric averaged over timestamps (``mse`` averaged is MSE_avg)."""
        return {name: float(np.mean(v)) for name, v in self.values.items()}

    def rows(self) -> list[dict[str, Any]]:
        """One dict per timestamp."""
        return [
            {"target": self.target, "t": t, **{m: float(v[t]) for m, v in self.values.items()}}
            for t in range(self.tau)
        ]


def evaluate(result: MiningResult, truth: SetValuedTruth, reading: str = "literal") -> MetricTable:
    """Metrics of every timestamp of ``result`` against ``truth``.

    Items are compared with the true top-k items, itemsets (SVSM) with the true top-k itemsets
    (singletons included). For SVSM's items, evaluate ``result.items``.
    """
    reading = check.choice(OWNER, "reading", reading, MSE_READINGS)
    if truth.tau != result.tau:
        raise ValueError(f"{OWNER}: truth has {truth.tau} timestamps, the result {result.tau}.")
    values: dict[str, list[float]] = {m: [] for m in METRICS}
    for top, tt in zip(result.topk, truth.timestamps, strict=True):
        true_keys = (
            tt.top_itemsets(result.k) if result.target == "itemsets" else tt.top_items(result.k)
        )
        p, r, f1 = precision_recall_f1(top.keys, true_keys)
        values["mse"].append(topk_mse(top, true_keys, tt, reading))
        values["precision"].append(p)
        values["recall"].append(r)
        values["f1"].append(f1)
        values["ncr"].append(ncr(top.keys, true_keys))
    arrays = {m: np.asarray(v, dtype=np.float64) for m, v in values.items()}
    return MetricTable(result.target, result.k, reading, arrays)


__all__ = [
    "METRICS",
    "MSE_READINGS",
    "MetricTable",
    "SetValuedTruth",
    "TimestampTruth",
    "apriori_top_k",
    "evaluate",
    "itemset_counts",
    "ncr",
    "precision_recall_f1",
    "setvalued_truth",
    "topk_mse",
]
