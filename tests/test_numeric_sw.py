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


# ------------------------------------------------------------------ L-SW (math §20.11)


@pytest.mark.parametrize(
    ("eps_perm", "eps_1", "s", "d_out"), [(2.0, 0.8, 8, 16), (4.0, 1.0, 16, 8)]
)
def test_lsw_channels_exact(eps_perm, eps_1, s, d_out):
    """The memo (bucketed SW at ε∞ on the grid) costs ε∞, one report exactly ε1 (never more),
    also for values between grid points (their row mixes two grid rows, by the offset)."""
    from longldp import privacy

    w1 = nm.sw_grid_channel(eps_perm, s, d_out)
    np.testing.assert_allclose(w1.sum(axis=1), 1.0, rtol=1e-12)
    eps_memo = privacy.channel_epsilon(w1)
    assert eps_memo <= eps_perm * (1 + 1e-12)  # bucketing is post-processing
    b = nm.sw_params(eps_perm).b
    if (1 + 2 * b) / d_out <= 2 * b:  # a bucket fits within b of t = 0: the bound is attained
        assert eps_memo == pytest.approx(eps_perm, rel=1e-9)
    else:
        assert eps_memo < eps_perm
    w = nm.lsw_report_channel(eps_perm, eps_1, s, d_out)
    eps_report = privacy.channel_epsilon(w)
    assert eps_report <= eps_1 and eps_report == pytest.approx(eps_1, rel=1e-9)
    t = np.linspace(0, 1, 97)
    low = np.floor(s * t).astype(int)
    phi = s * t - low
    rows = (1 - phi)[:, None] * w[np.minimum(low, s)] + phi[:, None] * w[np.minimum(low + 1, s)]
    assert privacy.channel_epsilon(rows) <= eps_1 * (1 + 1e-12)


def test_lsw_sampler_follows_its_channel():
    from longldp.protocols.numeric import chains

    rng = np.random.default_rng(9)
    s, d_out, n = 6, 12, 60_000
    w = nm.lsw_report_channel(3.0, 1.0, s, d_out)
    for j in (0, 2, 6):
        state = chains.new_memo(n, s, rng)
        reports = chains.sw_perturb(np.full(n, j / s), state, 3.0, 1.0, d_out, rng)
        emp = np.bincount(reports, minlength=d_out) / n
        assert np.all(np.abs(emp - w[j]) <= 5 * np.sqrt(w[j] * (1 - w[j]) / n))


def test_lsw_estimate_over_epochs_on_real_ages():
    """L-SW on Adult's ages: with 8 epochs pooled the W1 error falls to that of the memos."""
    from longldp.data.numeric import numeric_values
    from longldp.protocols.numeric import chains

    ages = numeric_values("adult", "age")
    t = (ages - 17) / 73
    rng = np.random.default_rng(12)
    s, d_out = 32, 64
    truth = sw.grid_distribution(t, s)
    state = chains.new_memo(t.size, s, rng)
    reports = [chains.sw_perturb(t, state, 4.0, 1.0, d_out, rng) for _ in range(8)]
    one = chains.sw_estimate(reports[0], 4.0, 1.0, s, d_out)
    many = chains.sw_estimate(np.concatenate(reports), 4.0, 1.0, s, d_out)
    w_one = sw.wasserstein(one.theta, truth, 1 / s)
    w_many = sw.wasserstein(many.theta, truth, 1 / s)
    w_uniform = sw.wasserstein(np.full(s + 1, 1 / (s + 1)), truth, 1 / s)
    assert w_many < 0.5 * w_one < 0.5 * w_uniform
    assert state.distinct().max() <= 2  # constant values: at most two keys each
    with pytest.raises(ValueError, match="L-SW: 'eps_1'"):
        nm.lsw_round2(2.0, 1.99, 1, 2)  # a two-bucket memo costs less than ε∞ = 2


def test_grid_distribution_is_the_rounding_law():
    """Linear binning onto the grid equals the empirical law of α-rounded keys (5 SE)."""
    rng = np.random.default_rng(2)
    t = rng.beta(2, 3, 50_000)
    s = 5
    keys = nm.rounding_keys(t, s, rng.random(t.size))
    emp = np.bincount(keys, minlength=s + 1) / t.size
    exp = sw.grid_distribution(t, s)
    assert np.all(np.abs(emp - exp) <= 5 * np.sqrt(exp * (1 - exp) / t.size) + 1e-12)
    assert sw.distribution_mean(exp) != pytest.approx(t.mean())  # bucket centres ≠ grid points
    assert float(exp @ (np.arange(s + 1) / s)) == pytest.approx(float(t.mean()), rel=1e-12)
