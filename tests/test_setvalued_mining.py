"""Candidate itemsets, set queries, exact ground truth and metrics of set-valued mining.

Every vectorized routine is compared with a brute-force enumeration on small inputs; metrics
are checked on hand-made cases.
"""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import pytest

from longldp.apps.setvalued.common import ContainmentIndex, MembershipIndex, TopK
from longldp.apps.setvalued.metrics import (
    TimestampTruth,
    apriori_top_k,
    itemset_counts,
    ncr,
    precision_recall_f1,
    topk_mse,
)
from longldp.apps.setvalued.svsm import best_first, candidate_itemsets
from longldp.data import SetData


def _brute_best(a: np.ndarray, n_keep: int) -> list[tuple[int, ...]]:
    """Every non-empty tuple of positions, sorted by (score desc, size, tuple)."""
    entries = []
    for size in range(1, a.size + 1):
        for t in itertools.combinations(range(a.size), size):
            score = functools.reduce(operator.mul, (a[i] for i in t[1:]), a[t[0]])
            entries.append((-score, size, t))
    entries.sort()
    return [t for _, _, t in entries[:n_keep]]


@pytest.mark.parametrize("r", [1, 2, 4, 7, 9])
@pytest.mark.parametrize("n_keep", [1, 3, 8, 25, 600])
@pytest.mark.parametrize("kind", ["distinct", "ties"])
def test_best_first_matches_brute_force(r, n_keep, kind):
    rng = np.random.default_rng(100 * r + n_keep)
    if kind == "distinct":
        a = np.sort(rng.uniform(0, 0.9, r))[::-1]
    else:  # repeated scores and zeros: the tie rule decides
        a = np.sort(rng.choice([0.0, 0.3, 0.6, 0.9], r))[::-1]
    got, values = best_first(a, n_keep)
    assert got == _brute_best(a, n_keep)
    assert len(values) == len(got)


def test_best_first_with_unsorted_scores():
    a = np.array([0.2, 0.9 * 0.99, 0.5, 0.0, 0.7])
    for n_keep in (4, 9, 31):
        assert best_first(a, n_keep)[0] == _brute_best(a, n_keep)


def test_candidate_itemsets_are_the_best_tuples_of_size_two_or_more():
    items = np.array([40, 7, 13, 2, 99, 5])
    freqs = np.array([0.5, 0.4, 0.3, 0.2, -0.1, 0.05])  # a negative estimate scores 0
    sets, scores = candidate_itemsets(items, freqs, n_itemsets=6, n_keep=9, scale=0.9)
    a = 0.9 * np.clip(freqs, 0, None) / 0.5
    order = np.lexsort((np.arange(6), -a))
    brute = [t for t in _brute_best(a[order], 9) if len(t) >= 2][:6]
    assert sets == [tuple(sorted(int(items[order[p]]) for p in t)) for t in brute]
    assert np.all(np.diff(scores) <= 0)
    assert all(len(s) >= 2 for s in sets)


def _random_sets(n: int, d: int, seed: int) -> SetData:
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, d + 1)
    lists = [
        sorted(
            rng.choice(d, size=min(d, rng.integers(0, 6)), replace=False, p=weights / weights.sum())
        )
        for _ in range(n)
    ]
    return SetData.from_lists(lists, d)


def test_membership_index_matches_brute_force():
    data = _random_sets(300, 12, 1)
    member = np.zeros(12, dtype=bool)
    member[[0, 3, 5, 11]] = True
    index = MembershipIndex(data, member)
    rows = np.random.default_rng(2).integers(0, data.n, 500)
    inside = [[x for x in data.row(u) if member[x]] for u in rows]
    assert index.counts(rows).tolist() == [len(w) for w in inside]
    for j in range(5):
        has = np.array([len(w) > j for w in inside])
        got = index.pick(rows[has], np.full(int(has.sum()), j))
        assert got.tolist() == [w[j] for w, h in zip(inside, has, strict=True) if h]


@pytest.mark.parametrize("d", [12, 70])  # one and two mask words
def test_containment_index_matches_brute_force(d):
    data = _random_sets(400, d, d)
    rng = np.random.default_rng(d)
    pool = min(d, 8)  # frequent items, so that rows contain candidates
    cands = sorted(
        {tuple(sorted(rng.choice(pool, size=s, replace=False).tolist())) for s in (2, 2, 3, 3, 4)}
    )
    if d > 64:  # candidates over more than 64 items: two mask words
        cands += [(i, i + 1) for i in range(0, d - 1, 2)] + [(0, 1, d - 1)]
    rows = rng.integers(0, data.n, 600)
    universe = sorted({x for c in cands for x in c})
    assert len(universe) > 64 or d < 64
    superset = np.zeros(d, dtype=bool)
    superset[[*universe, d - 2]] = True  # a candidate set C holding every itemset's items
    held = [set(data.row(u).tolist()) for u in rows]
    inside = [[j for j, c in enumerate(cands) if set(c) <= h] for h in held]
    for within in (None, MembershipIndex(data, superset)):
        index = ContainmentIndex(data, rows, cands, within)
        assert index.counts().tolist() == [len(w) for w in inside]
        for j in range(len(cands)):
            has = np.flatnonzero([len(w) > j for w in inside])
            got = index.pick(has, np.full(has.size, j))
            assert sorted(got.tolist()) == sorted(inside[u][j] for u in has)


def _all_supports(data: SetData) -> dict[tuple[int, ...], int]:
    sets = [set(data.row(u).tolist()) for u in range(data.n)]
    out = {}
    for size in range(1, data.domain.size + 1):
        for s in itertools.combinations(range(data.domain.size), size):
            out[s] = sum(set(s) <= h for h in sets)
    return out


@pytest.mark.parametrize("k", [1, 3, 5, 10, 30])
def test_apriori_top_k_matches_brute_force(k):
    data = _random_sets(250, 7, 11)
    counts = data.item_counts()
    supp = _all_supports(data)
    keys, got = apriori_top_k(data, k)
    top_items = set(np.lexsort((np.arange(7), -counts))[: min(k, 7)].tolist())
    restricted = sorted((-c, len(s), s) for s, c in supp.items() if set(s) <= top_items)[:k]
    assert keys == [s for _, _, s in restricted]
    assert got.tolist() == [-c for c, _, _ in restricted]
    if len(set(counts.tolist())) == counts.size:  # no tied items: global top-k is the same
        assert keys == [s for _, _, s in sorted((-c, len(s), s) for s, c in supp.items())[:k]]
    assert itemset_counts(data, keys).tolist() == got.tolist()


def test_apriori_restriction_is_exact_without_item_ties():
    lists = [[0, 1, 2]] * 9 + [[0, 1]] * 6 + [[0, 3]] * 4 + [[1, 4]] * 2 + [[2]] * 1
    data = SetData.from_lists(lists, 5)
    assert len(set(data.item_counts().tolist())) == 5
    supp = _all_supports(data)
    for k in (2, 4, 6):
        want = [s for _, _, s in sorted((-c, len(s), s) for s, c in supp.items())[:k]]
        assert apriori_top_k(data, k)[0] == want


def _truth() -> TimestampTruth:
    # f(0) = .6, f(1) = .5, f(2) = .3, f(3) = .2, f(4) = .1, f({0,1}) = .4
    lists = [[0, 1, 2], [0, 1, 3], [0, 1], [0, 1, 4], [0, 2], [0], [1], [2, 3], [], []]
    return TimestampTruth(SetData.from_lists(lists, 6))


def test_truth_frequencies_and_top_k():
    tt = _truth()
    assert tt.top_items(3) == [(0,), (1,), (2,)]
    assert tt.frequencies([(0,), (1,), (0, 1), (5,), (2, 3)]).tolist() == [0.6, 0.5, 0.4, 0, 0.1]
    assert tt.top_itemsets(4) == [(0,), (1,), (0, 1), (2,)]


def test_topk_mse_by_hand():
    tt = _truth()
    true = [(0,), (1,), (2,)]
    reported = TopK(((1,), (0,), (3,)), np.array([0.45, 0.7, 0.25]))
    # X = {2}: 0.3²; Y = {3}: f(3)² = 0.2² (literal) or 0.25² (estimated); V = {0, 1}
    hits = (0.6 - 0.7) ** 2 + (0.5 - 0.45) ** 2
    assert topk_mse(reported, true, tt) == pytest.approx((0.09 + 0.04 + hits) / 4)
    assert topk_mse(reported, true, tt, "estimated") == pytest.approx((0.09 + 0.0625 + hits) / 4)
    perfect = TopK(((0,), (1,), (2,)), np.array([0.6, 0.5, 0.3]))
    assert topk_mse(perfect, true, tt) == pytest.approx(0.0)
    sets = TopK(((0, 1), (0,)), np.array([0.5, 0.6]))
    assert topk_mse(sets, [(0,), (1,)], tt) == pytest.approx((0.25 + 0.16 + 0.0) / 3)
    with pytest.raises(ValueError, match="reading"):
        topk_mse(reported, true, tt, "zero")


def test_precision_recall_f1_and_ncr_by_hand():
    true = [("a",), ("b",), ("c",), ("d",)]
    reported = [("b",), ("d",), ("x",), ("y",)]
    assert precision_recall_f1(reported, true) == (0.5, 0.5, 0.5)
    # qualities k + 1 − i: a 4, b 3, c 2, d 1; found b and d: (3 + 1)/10
    assert ncr(reported, true) == pytest.approx(0.4)
    assert ncr(true, true) == pytest.approx(1.0)
    assert ncr([("a",)], true) == pytest.approx(0.4)  # the top item weighs most, not least
    assert ncr([("d",)], true) == pytest.approx(0.1)
    p, r, f1 = precision_recall_f1([("a",), ("b",)], true)
    assert (p, r) == (1.0, 0.5) and f1 == pytest.approx(2 / 3)
    assert precision_recall_f1([("z",)], true) == (0.0, 0.0, 0.0)
