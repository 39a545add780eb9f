"""Poisoning of numeric mean estimation (docs/attacks.md §13): the expected estimate (13.1)
against simulation, the fine-grained target, Laplace's unbounded output attack."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp.attacks import numeric as pn
from longldp.data.numeric import numeric_values

AGES = numeric_values("adult", "age")[:5000]
CASES = [
    ("Laplace", {"eps": 1.0}),
    ("Duchi", {"eps": 1.0}),
    ("PM", {"eps": 2.0}),
    ("HM", {"eps": 2.0}),
    ("1BitMean", {"eps": 1.0}),
    ("L-PM", {"eps_perm": 2.0, "eps_1": 0.8}),
    ("L-1BitMean", {"eps_perm": 2.0, "eps_1": 0.8}),
]


@pytest.mark.parametrize(("name", "budget"), CASES)
@pytest.mark.parametrize("attack", ["input", "output"])
def test_poisoned_mean_matches_the_expected_estimate(name, budget, attack):
    proto = ll.protocol(name, lo=17, hi=90, **budget)
    plan = pn.plan(proto, attack, AGES.mean(), AGES.size, 0.05, target=45.0)
    rng = np.random.default_rng(3)
    got = []
    for _ in range(40):
        genuine = proto.perturb(AGES, proto.new_memo(AGES.size), rng)
        got.append(pn.poisoned_mean(proto, genuine, pn.fake_reports(proto, plan, rng)))
    se = np.std(got, ddof=1) / math.sqrt(len(got))
    assert abs(np.mean(got) - plan.expected_estimate) <= 5 * se
    assert plan.expected_gain > 0  # upward, toward the target above the mean


def test_fine_grained_targets_and_bounds():
    proto = ll.protocol("PM", eps=2.0, lo=17, hi=90)
    mean = float(AGES.mean())
    near = pn.plan(proto, "output", mean, AGES.size, 0.1, target=mean + 1.0)
    assert near.reachable and near.expected_estimate == pytest.approx(mean + 1.0)
    far = pn.plan(proto, "input", mean, AGES.size, 0.1, target=90.0)
    assert not far.reachable and far.fake_mean_u == 1.0  # inputs stop at the range's end
    top = pn.report_extremes(proto)[1]
    assert top == pytest.approx(ll.privacy.numeric.pm_params(2.0).C)
    # output poisoning reaches further than input poisoning: C > 1
    out = pn.plan(proto, "output", mean, AGES.size, 0.1)
    assert out.expected_gain > far.expected_gain


def test_laplace_output_poisoning_is_bounded_only_by_its_grid():
    """Laplace's noise is unbounded; its reports are sent on a grid 20 noise scales beyond
    [−1, 1] (math §20.12), so its output attack reaches that far: far more than PM's."""
    lap = ll.protocol("Laplace", eps=1.0, lo=17, hi=90)
    pm = ll.protocol("PM", eps=1.0, lo=17, hi=90)
    mean = float(AGES.mean())
    lap_gain = pn.plan(lap, "output", mean, AGES.size, 0.01).expected_gain
    pm_gain = pn.plan(pm, "output", mean, AGES.size, 0.01).expected_gain
    assert pn.report_extremes(lap)[1] == pytest.approx(1 + 20 * 2.0, rel=1e-6)
    assert lap_gain > 5 * pm_gain > 0


def test_refusals():
    with pytest.raises(ValueError, match="estimand"):
        pn.plan(ll.protocol("SW", eps=1.0, lo=0, hi=1), "input", 0.5, 100, 0.1)
    with pytest.raises(ValueError, match="'attack' must be one of"):
        pn.plan(ll.protocol("PM", eps=1.0, lo=0, hi=1), "both", 0.5, 100, 0.1)
    with pytest.raises(ValueError, match="no frequency attack applies to 'PM'"):
        ll.protocol("PM", eps=1.0, lo=0, hi=1).report_kind.attack_kind(
            ll.protocol("PM", eps=1.0, lo=0, hi=1)
        )
