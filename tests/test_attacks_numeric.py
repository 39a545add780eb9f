"""Poisoning of numeric mean estimation (docs/attacks.md §13): the expected estimate (13.1)
against simulation, the fine-grained target, Laplace's unbounded output attack."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp.attacks import numeric as pn
from longldp.data.numeric import numeric_values
from longldp.protocols.numeric import moments

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


# ---------------------------------------------------------------------- the variance

VAR_AGES = AGES[:4000]


@pytest.mark.parametrize(("name", "budget"), CASES)
@pytest.mark.parametrize("attack", ["input", "output"])
def test_poisoned_variance_matches_the_expected_estimates(name, budget, attack):
    """A split collection of 4,000 ages and 5% fakes aiming at mean 40 and variance 200 (the
    genuine: 38.7 and 171.7): over 40 seeded runs the server's split estimates (20.28) of the
    mean and the variance within 5 SE of (13.2)–(13.3)."""
    proto = ll.protocol(name, lo=17, hi=90, **budget)
    mean, var = float(VAR_AGES.mean()), float(VAR_AGES.var())
    plan = pn.plan_variance(proto, attack, mean, var, VAR_AGES.size, 0.05, 40.0, 200.0)
    rng = np.random.default_rng(23)
    got_mean, got_var = [], []
    for _ in range(40):
        genuine = moments.perturb_split(proto, VAR_AGES, rng)
        est = pn.poisoned_variance(proto, genuine, pn.variance_fake_reports(proto, plan, rng))
        got_mean.append(est.mean)
        got_var.append(est.variance)
    for got, want in ((got_mean, plan.expected_mean), (got_var, plan.expected_variance)):
        assert abs(np.mean(got) - want) <= 5 * np.std(got, ddof=1) / math.sqrt(len(got))
    if plan.reachable_variance:
        assert plan.expected_variance == pytest.approx(200.0)


def test_variance_plan_closed_form_and_reach():
    proto = ll.protocol("PM", eps=2.0, lo=17, hi=90)
    mean, var = float(VAR_AGES.mean()), float(VAR_AGES.var())
    u_bar = 2 * (mean - 17) / 73 - 1
    m2 = u_bar**2 + var / 36.5**2
    # no fakes: (13.3) is the unbiased estimator's expectation, the genuine variance itself
    none = pn.expected_split_estimates((2000, 2000, 0, 0), u_bar, m2, 0.3, 0.9)
    assert none[0] == pytest.approx(u_bar) and none[1] * 36.5**2 == pytest.approx(var)
    # without a target: the largest upward push; output poisoning reaches further than input
    inp = pn.plan_variance(proto, "input", mean, var, VAR_AGES.size, 0.05)
    out = pn.plan_variance(proto, "output", mean, var, VAR_AGES.size, 0.05)
    assert inp.fake_square_u == 1.0 and not inp.reachable_variance
    assert out.expected_gain > inp.expected_gain > 0
    assert inp.expected_mean == pytest.approx(mean)  # no mean target: the mean stays
    # Laplace's output poisoning is bounded only by its report grid (math §20.12)
    lap = ll.protocol("Laplace", eps=2.0, lo=17, hi=90)
    assert pn.plan_variance(lap, "output", mean, var, VAR_AGES.size, 0.05).expected_gain > (
        5 * out.expected_gain
    )
    with pytest.raises(ValueError, match="'genuine_variance' must be a number in"):
        pn.plan_variance(proto, "input", mean, 36.5**2, VAR_AGES.size, 0.05)
    with pytest.raises(ValueError, match="'genuine_mean' must be a number in"):
        pn.plan_variance(proto, "input", 100.0, var, VAR_AGES.size, 0.05)
