"""SW's distribution estimate: the exact transition matrix, its O(d) operator, EM and EMS
(docs/math.md §20.6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp.privacy import numeric as nm
from longldp.protocols.numeric import oneshot, sw


@pytest.mark.parametrize(("eps", "d", "d_out"), [(0.2, 16, 16), (1.0, 40, 64), (4.0, 33, 17)])
def test_transition_matrix_columns_and_operator(eps, d, d_out):
    m = sw.transition_matrix(eps, d, d_out)
    np.testing.assert_allclose(m.sum(axis=0), 1.0, rtol=1e-12)
    assert m.min() > 0
    op = sw.SWOperator(eps, d, d_out)
    rng = np.random.default_rng(1)
    theta, r = rng.random(d), rng.random(d_out)
    np.testing.assert_allclose(op.matvec(theta), m @ theta, rtol=1e-10)
    np.testing.assert_allclose(op.rmatvec(r), m.T @ r, rtol=1e-10)


def test_transition_matrix_against_sampler():
    """Column i against SW reports of values uniform on input bucket i (5 binomial SE)."""
    eps, d, d_out, n = 1.0, 8, 12, 60_000
    m = sw.transition_matrix(eps, d, d_out)
    rng = np.random.default_rng(3)
    for i in (0, 3, 7):
        t = (i + rng.random(n)) / d
        counts = sw.report_counts(oneshot.sw_sample(t, eps, rng), eps, d_out)
        se = np.sqrt(m[:, i] * (1 - m[:, i]) / n)
        assert np.all(np.abs(counts / n - m[:, i]) <= 5 * se)


def test_em_recovers_theta_from_expected_counts():
    """Fed the exact expected counts N·Mθ, EM (no smoothing) converges to θ (the MLE)."""
    eps, d, d_out = 1.5, 10, 20
    m = sw.transition_matrix(eps, d, d_out)
    theta = np.linspace(1, 3, d) ** 2
    theta /= theta.sum()
    res = sw.ems(1e6 * (m @ theta), m, smoothing=False, tol=1e-12, max_iter=200_000)
    np.testing.assert_allclose(res.theta, theta, atol=2e-3)


def test_ems_on_real_ages_close_in_wasserstein():
    """SW + EMS on Adult's ages: W1 to the true bucketed distribution is a small share of the
    range, far below that of the uniform guess, and the EMS mean is close to the true mean."""
    from longldp.data.numeric import numeric_values

    ages = numeric_values("adult", "age")
    t = (ages - 17) / (90 - 17)
    rng = np.random.default_rng(8)
    d = 64
    res = sw.estimate_distribution(oneshot.sw_sample(t, 2.0, rng), 2.0, d, d)
    truth = sw.histogram(t, d)
    w_est = sw.wasserstein(res.theta, truth)
    w_uniform = sw.wasserstein(np.full(d, 1 / d), truth)
    assert w_est < 0.2 * w_uniform
    assert abs(sw.distribution_mean(res.theta) - t.mean()) < 0.02
    assert res.theta.sum() == pytest.approx(1.0)


def test_wasserstein_closed_form():
    """W1 of two point masses a bucket apart is one bucket width."""
    p, q = np.zeros(10), np.zeros(10)
    p[2], q[5] = 1.0, 1.0
    assert sw.wasserstein(p, q) == pytest.approx(3 / 10)


def test_sw_unbiased_mean_is_linear():
    """E[y | t] = A0 + A1·t: the debiasing of SW is exact (checked on the density, §20.6)."""
    s = nm.sw_params(0.9)
    a0, a1 = s.mean_affine()
    ys = np.linspace(-s.b, 1 + s.b, 200_001)
    mid, dy = (ys[1:] + ys[:-1]) / 2, np.diff(ys)
    for t0 in (0.0, 0.4, 1.0):
        assert float(np.sum(mid * s.density(t0, mid) * dy)) == pytest.approx(a0 + a1 * t0, abs=1e-6)
    assert math.isclose(a1, 1 - s.q * (1 + 2 * s.b), rel_tol=1e-12)
