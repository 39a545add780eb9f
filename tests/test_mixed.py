"""Mixed multidimensional collection (docs/math.md §20.10): the plans, the analytic MSE against
simulation, the adaptive choice, the budgets over time, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp.apps.mixed import (
    CategoricalAttribute,
    MixedCollection,
    NumericAttribute,
    mixed_table,
    numeric_chain_choice,
)
from longldp.privacy import numeric as nm

ATTRS, COLS = mixed_table(
    "lending-club", numeric=["funded_amnt", "int_rate"], categorical=["term", "sub_grade"]
)


@pytest.mark.parametrize("method", ["sampling", "SPL", "SMP", "adaptive"])
def test_expected_mse_matches_simulation(method):
    """The mean over repetitions of each attribute's squared error against its analytic
    expectation ((20.23), (20.24), (7.2)), within 5 standard errors of the mean."""
    mc = MixedCollection(ATTRS, method, eps=6.0)
    errs = np.array([mc.collect(COLS, seed).squared_errors()[0] for seed in range(60)])
    want = mc.expected_mse(COLS)
    se = errs.std(axis=0, ddof=1) / math.sqrt(len(errs))
    assert np.all(np.abs(errs.mean(axis=0) - want) <= 5 * se), (errs.mean(axis=0), want, se)


def test_wang_k_and_the_plans():
    assert nm.sampled_attributes(6.0, 4) == 2 and nm.sampled_attributes(1.0, 4) == 1
    assert nm.sampled_attributes(30.0, 4) == 4
    sampling = MixedCollection(ATTRS, "sampling", eps=6.0)
    assert sampling.k_sampled == 2
    assert [p.eps for p in sampling.protos] == [3.0] * 4
    spl = MixedCollection(ATTRS, "SPL", eps=6.0)
    assert [p.eps for p in spl.protos] == [1.5] * 4
    adaptive = MixedCollection(ATTRS, "adaptive", eps=6.0)
    names = [p.name for p in adaptive.protos]
    assert names[:2] == ["HM", "HM"]  # the least worst case among Duchi, PM, HM (math §20.7)
    for p, a in zip(adaptive.protos[2:], ATTRS[2:], strict=True):  # GRR or OUE by V*
        other = "OUE" if p.name == "GRR" else "GRR"
        from longldp.protocols import protocol

        assert p.approx_variance(1) <= protocol(other, k=a.k, eps=6.0).approx_variance(1)
    users = adaptive.assign(1000, 0)
    assert sorted(np.concatenate(users).tolist()) == list(range(1000))  # a partition
    draws = sampling.assign(1000, 1)
    per_user = np.bincount(np.concatenate(draws), minlength=1000)
    assert np.all(per_user == 2)  # k distinct attributes per user


def test_numeric_chain_choice_follows_the_horizon():
    """At τ = 1 every form reports Duchi's bit at ε1 (a tie: the first, L-1BitMean); over a
    long horizon the memo's variance decides, and at ε∞ = 4 a PM or HM memo wins (math (20.21));
    ε1 ≥ ε∞/2 leaves only L-1BitMean."""
    assert numeric_chain_choice(0, 1, 4.0, 1.0, 1).name == "L-1BitMean"
    assert numeric_chain_choice(0, 1, 4.0, 1.0, 100).name in ("L-PM", "L-HM")
    assert numeric_chain_choice(0, 1, 4.0, 2.5, 100).name == "L-1BitMean"


def test_over_time_budgets_and_static_values():
    mc = MixedCollection(ATTRS, "adaptive", eps_perm=4.0, eps_1=1.0, horizon=5)
    res = mc.collect_over_time([COLS] * 3, 7)
    assert res.squared_errors().shape == (3, 4)
    # every user reports one attribute three times from one memo per key: min(3ε1, m·ε∞')
    assert res.spent_epsilon is not None
    assert np.all(res.spent_epsilon <= 3 * 1.0 + 1e-9)
    assert sum(res.reporters) == len(COLS[0])


def test_bad_input():
    with pytest.raises(ValueError, match="mixed: 'method' must be one of"):
        MixedCollection(ATTRS, "random", eps=1.0)
    with pytest.raises(ValueError, match="'budget'"):
        MixedCollection(ATTRS, "SMP", eps=1.0, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'attributes'"):
        MixedCollection((), "SMP", eps=1.0)
    with pytest.raises(ValueError, match="non-empty range"):
        NumericAttribute("x", 3.0, 3.0)
    with pytest.raises(ValueError, match="'k' must be an integer"):
        CategoricalAttribute("c", 1)
    mc = MixedCollection(ATTRS, "SMP", eps=1.0)
    with pytest.raises(ValueError, match="4 arrays per timestamp"):
        mc.collect(COLS[:3], 0)
