"""Subset selection (math §2.5): what the common tests do not check by themselves."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import longldp as ll
from longldp import privacy


def test_reports_hold_omega_values_with_the_enumerated_law():
    """Every report is a subset of size ω, and the frequency of each subset over many users
    holding v is the enumerated channel's Pr[Y | v] (5 binomial SE per subset)."""
    proto = ll.protocol("SS", k=5, eps=0.7, omega=2)
    n = 60_000
    reports = proto.perturb(np.full(n, 3), rng=np.random.default_rng(1))
    bits = np.unpackbits(reports, axis=1, count=5)
    assert np.all(bits.sum(axis=1) == 2)
    seen = np.bincount(proto.report_index(reports), minlength=proto.report_space_size())
    law = proto.report_channel()[3]
    assert law.sum() == pytest.approx(1.0)
    assert np.all(np.abs(seen - n * law) < 5 * np.sqrt(n * law * (1 - law)))


def test_channel_ratio_is_eps_and_omega_one_is_grr():
    for k, omega in itertools.product((3, 6), (1, 2)):
        proto = ll.protocol("SS", k=k, eps=1.3, omega=omega)
        ch = proto.report_channel()
        assert np.log(ch.max(axis=0) / ch.min(axis=0)).max() == pytest.approx(1.3)
    ss, grr = ll.protocol("SS", k=7, eps=1.0, omega=1), ll.protocol("GRR", k=7, eps=1.0)
    assert (ss.P1, ss.P0) == pytest.approx((grr.P1, grr.P0))


@pytest.mark.parametrize(("k", "eps"), [(6, 0.5), (74, 1.0), (200, 2.5), (2, 3.0)])
def test_default_omega_minimises_vstar(k, eps):
    def vstar(omega: int) -> float:
        return ll.protocol("SS", k=k, eps=eps, omega=omega).approx_variance(1000)

    best = min(range(1, k), key=vstar)
    omega = ll.protocol("SS", k=k, eps=eps).omega
    assert vstar(omega) == pytest.approx(vstar(best))
    assert abs(omega - k / (math.exp(eps) + 1)) <= 1


def test_claim_is_the_samplers_at_large_budgets():
    """1 − P1 is the exact complement of P1 as the sampler draws it (privacy.drawn), not a
    second closed form (k − ω)/(ω·e^ε + k − ω), which at ε = 30 put the claim below the
    sampler's ε (issue 27); the claim is the sampler's ε, computed exactly, and lies within the
    grid's resolution, 2⁻⁵³/(1 − P1) relative to ln's argument, of the budget."""
    p1, _, not_p1 = privacy.subset_probabilities(privacy.EPS_MAX, 10, 3)
    assert p1 == privacy.drawn(p1) and not_p1 == 1.0 - p1
    exact = Fraction(p1) * 7 / ((1 - Fraction(p1)) * 3)
    got = privacy.subset_epsilon(p1, not_p1, 10, 3)
    assert got == pytest.approx(math.log(exact.numerator) - math.log(exact.denominator), rel=1e-15)
    assert abs(got - privacy.EPS_MAX) <= 2.0**-53 / not_p1


def test_bad_omega_and_reports_are_refused():
    with pytest.raises(ValueError, match=r"'omega' must be an integer in \[1, 4\]"):
        ll.protocol("SS", k=5, eps=1.0, omega=5)
    proto = ll.protocol("SS", k=5, eps=1.0, omega=2)
    with pytest.raises(ValueError, match="exactly omega = 2"):
        proto.support_counts(np.packbits(np.array([[1, 1, 1, 0, 0]], dtype=bool), axis=1))
