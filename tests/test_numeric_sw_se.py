"""Standard errors of the EMS estimates (docs/math.md §20.14): the Jacobian through the fixed
point against the fixed points of perturbed counts, and calibration over seeded repetitions on
real data (Adult's ages): the 95% intervals cover the estimator's expectation within their
binomial tolerance and the standard errors match the estimates' spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp.data.numeric import numeric_values
from longldp.protocols.numeric import sw

AGES = numeric_values("adult", "age")[:3000]


def _fixed_point(counts, m, smoothing):
    """Iterate one EM(S) step until θ stops moving (no stopping rule: the fixed point)."""
    theta = np.full(m.shape[1], 1.0 / m.shape[1])
    for _ in range(20_000):
        new = theta * (m.T @ (counts / (m @ theta))) / counts.sum()
        new /= new.sum()
        if smoothing:
            new = sw._smoothing(new)
        if np.abs(new - theta).max() < 1e-15:
            break
        theta = new
    return new


@pytest.mark.parametrize("smoothing", [True, False])
def test_jacobian_against_perturbed_fixed_points(smoothing):
    m = sw.transition_matrix(2.0, 6, 9)
    counts = np.array([30.0, 55, 81, 120, 90, 70, 40, 35, 20])
    base = _fixed_point(counts, m, smoothing)
    g = sw.ems_jacobian(counts, m, base, smoothing=smoothing)
    h = 1e-4
    for j in (0, 4, 8):
        bump = counts.copy()
        bump[j] += h
        fd = (_fixed_point(bump, m, smoothing) - base) / h
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-4, atol=1e-7)


def test_sw_intervals_are_calibrated():
    """300 seeded SW collections of 3,000 ages (ε = 2, 16 × 16 buckets): for every bucket and
    for the distribution's mean, the 95% interval covers the mean of the 300 estimates in
    95% of them within 5 binomial SE, and the mean standard error is the estimates' standard
    deviation within 5 SE (relative SE 1/sqrt(2(R − 1)))."""
    proto = ll.protocol("SW", eps=2.0, lo=17, hi=90, d=16, d_out=16)
    rng = np.random.default_rng(20)
    reps = 300
    est, se, means, mean_se = [], [], [], []
    for _ in range(reps):
        support = proto.support_counts(proto.perturb(AGES, proto.new_memo(AGES.size), rng))
        e = proto.estimate_with_se(support, AGES.size)
        est.append(e.estimate)
        se.append(e.se)
        m = proto.distribution_mean_estimate(support, AGES.size)
        assert m.estimate[0] == pytest.approx(proto.distribution_mean(e.estimate))
        means.append(m.estimate[0])
        mean_se.append(m.se[0])
    _check_calibration(np.array(est), np.array(se), reps)
    _check_calibration(np.array(means)[:, None], np.array(mean_se)[:, None], reps)


def _check_calibration(est, se, reps):
    centre = est.mean(axis=0)
    cover = (np.abs(est - centre) <= 1.959963984540054 * se).mean(axis=0)
    assert np.all(np.abs(cover - 0.95) <= 5 * math.sqrt(0.95 * 0.05 / reps)), cover
    ratio = se.mean(axis=0) / est.std(axis=0, ddof=1)
    assert np.all(np.abs(ratio - 1) <= 5 / math.sqrt(2 * (reps - 1))), ratio


def test_lsw_standard_errors_match_the_spread():
    """200 seeded L-SW epochs (fresh memos) of 3,000 ages: the standard error of every grid
    point is the estimates' standard deviation within 5 SE. (Its normal interval under-covers
    at the grid points of small share, where the clip of (20.27) skews the estimate:
    docs/numeric.md.)"""
    proto = ll.protocol("L-SW", eps_perm=3.0, eps_1=1.0, lo=17, hi=90, s=8, d_out=32)
    rng = np.random.default_rng(21)
    reps = 200
    est, se = [], []
    for _ in range(reps):
        support = proto.support_counts(proto.perturb(AGES, proto.new_memo(AGES.size), rng))
        e = proto.estimate_with_se(support, AGES.size)
        est.append(e.estimate)
        se.append(e.se)
    ratio = np.mean(se, axis=0) / np.std(est, axis=0, ddof=1)
    assert np.all(np.abs(ratio - 1) <= 5 / math.sqrt(2 * (reps - 1))), ratio


def test_large_grids_have_no_standard_error():
    proto = ll.protocol("SW", eps=1.0, lo=0, hi=1, d=2048, d_out=1024)
    assert not sw.covariance_applies(proto.d, proto.d_out)
    support = proto.support_counts(proto.perturb(np.full(50, 0.5), proto.new_memo(50), 1))
    assert np.all(np.isnan(proto.estimate_with_se(support, 50).se))
