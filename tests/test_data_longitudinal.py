"""Longitudinal interpolation: the distribution is the same at every timestamp, users move."""

from __future__ import annotations

import numpy as np
import pytest

from longldp.data import (
    Domain,
    LongitudinalSets,
    LongitudinalTable,
    SetData,
    Table,
    bms_pos_standin,
    load,
    permutations,
    to_longitudinal,
    zipf,
)


def test_permutations():
    p = permutations(1000, 6, np.random.default_rng(0))
    assert p.shape == (6, 1000) and p.dtype == np.int32
    assert np.array_equal(p[0], np.arange(1000))
    assert np.all(np.sort(p, axis=1) == np.arange(1000))
    assert not np.array_equal(p[1], p[2])
    assert permutations(0, 3, np.random.default_rng(0)).shape == (3, 0)


def test_single_valued_array():
    rng = np.random.default_rng(1)
    x = zipf(5000, 20, rng, s=1.2)
    v = to_longitudinal(x, 8, rng)
    assert v.shape == (8, 5000) and v.dtype == x.dtype
    assert np.array_equal(v[0], x)
    h0 = np.bincount(x, minlength=20)
    for t in range(8):
        assert np.array_equal(np.bincount(v[t], minlength=20), h0)
    for t in range(1, 8):
        assert (v[t] != x).mean() > 0.5  # values move between users
    assert to_longitudinal(x, 1, rng).shape == (1, 5000)


def test_table_rows_move_together():
    adult = load("adult")
    lt = to_longitudinal(adult, 5, np.random.default_rng(2))
    assert isinstance(lt, LongitudinalTable) and lt.tau == len(lt) == 5 and lt.n == adult.n
    m0 = adult.to_matrix()
    rows0 = m0[np.lexsort(m0.T[::-1])]
    for t, table in enumerate(lt):
        for attr in adult.attributes:
            assert np.array_equal(table.histogram(attr), adult.histogram(attr))
        mt = table.to_matrix()
        assert np.array_equal(mt[np.lexsort(mt.T[::-1])], rows0)  # same multiset of rows
        if t:
            assert (mt[:, 0] != m0[:, 0]).mean() > 0.5
    ages = lt.values("age")
    assert ages.shape == (5, adult.n) and np.array_equal(ages[0], adult["age"])


def test_sets_move_whole():
    base = bms_pos_standin(seed=4, n=3000)
    ls = to_longitudinal(base, 6, np.random.default_rng(5))
    assert isinstance(ls, LongitudinalSets) and ls.tau == 6 and ls.n == 3000
    assert ls.at(0) is base
    sets0 = sorted(map(tuple, base.to_lists()))
    size_hist = np.bincount(base.lengths)
    lengths = ls.lengths()
    assert lengths.shape == (6, 3000)
    for t, s in enumerate(ls):
        assert np.array_equal(np.bincount(s.lengths, minlength=size_hist.size), size_hist)
        assert np.array_equal(s.item_counts(), base.item_counts())
        assert sorted(map(tuple, s.to_lists())) == sets0
        assert np.array_equal(lengths[t], s.lengths)
        if t:
            assert (s.lengths != base.lengths).mean() > 0.5
    assert np.array_equal(ls.at(-1).items, ls.at(5).items)


def test_small_explicit_example():
    s = SetData.from_lists([[0], [1, 2], []], domain=3)
    ls = to_longitudinal(s, 3, np.random.default_rng(0))
    for t in range(3):
        assert sorted(map(tuple, ls.at(t).to_lists())) == [(), (0,), (1, 2)]
        assert ls.at(t).to_lists() == [s.to_lists()[i] for i in ls.perm[t]]


def test_deterministic_given_rng_seed():
    t = Table({"a": np.arange(100) % 7}, {"a": Domain(7)})
    a = to_longitudinal(t, 4, np.random.default_rng(9)).values("a")
    b = to_longitudinal(t, 4, np.random.default_rng(9)).values("a")
    assert np.array_equal(a, b)


@pytest.mark.parametrize("tau", [0, -2, 1.5, True, "3"])
def test_bad_tau(tau):
    with pytest.raises(ValueError, match="tau must be an integer >= 1"):
        to_longitudinal(np.zeros(3, dtype=int), tau, np.random.default_rng(0))


def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"numpy\.random\.Generator"):
        to_longitudinal(np.zeros(3, dtype=int), 2, 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1-D array"):
        to_longitudinal(np.zeros((3, 2), dtype=int), 2, rng)
    with pytest.raises(ValueError, match="integer codes"):
        to_longitudinal(np.zeros(3), 2, rng)
    with pytest.raises(ValueError, match="Table or a SetData"):
        to_longitudinal({"a": 1}, 2, rng)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="n must be"):
        permutations(-1, 2, rng)
