"""Unbiased means with the exact variance, one-shot and over time (docs/math.md §20).

Every check compares with an independent expectation and a tolerance of five standard errors
derived from the analytic variance (fixed seeds): the mean of debiased reports against the true
value, their sample variance against V(u) (the standard error of a sample variance from the
sample's fourth moment), at the interval's ends and inside.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp.privacy import numeric as nm
from longldp.protocols import numeric as num
from longldp.protocols.numeric import chains, oneshot

N = 20_000


def assert_mean_and_variance(u_hat: np.ndarray, u0: float, v: float) -> None:
    """Mean within 5 SE of u0 and sample variance within 5 SE of v."""
    n = u_hat.size
    assert abs(u_hat.mean() - u0) <= 5 * math.sqrt(v / n)
    centred = u_hat - u_hat.mean()
    s2 = float(np.mean(centred**2))
    m4 = float(np.mean(centred**4))
    se_s2 = math.sqrt(max(m4 - s2 * s2, 1e-300) / n)
    assert abs(s2 - v) <= 5 * se_s2 + 1e-12


@pytest.mark.parametrize("mechanism", list(oneshot.KERNELS))
@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("u0", [-1.0, 0.3, 1.0])
def test_one_shot_unbiased_with_exact_variance(mechanism, eps, u0):
    k = oneshot.kernel(mechanism)
    rng = np.random.default_rng([7, int(eps * 10), int(u0 * 10 + 10)])
    u = np.full(N, u0)
    x = (u + 1) / 2 if k.coordinate == "t" else u
    reports = k.sample(x, eps, rng)
    assert_mean_and_variance(k.debias(reports, eps), u0, float(k.variance(eps).at(u0)))


def test_variances_against_numerical_integration():
    """V(u) of PM and SW from the closed forms against ∫(y − u)² f(y | u) dy done by the
    midpoint rule on the densities (an independent route to (20.7) and (20.13))."""
    for eps in (0.4, 1.5, 5.0):
        pm = nm.pm_params(eps)
        y = np.linspace(-pm.C, pm.C, 400_001)
        mid, dy = (y[1:] + y[:-1]) / 2, np.diff(y)
        sw = nm.sw_params(eps)
        ys = np.linspace(-sw.b, 1 + sw.b, 400_001)
        mids, dys = (ys[1:] + ys[:-1]) / 2, np.diff(ys)
        a0, a1 = sw.mean_affine()
        for u0 in (-1.0, -0.2, 0.7, 1.0):
            f = pm.density(u0, mid)
            assert float(np.sum(f * dy)) == pytest.approx(1.0, abs=1e-5)
            assert float(np.sum(mid * f * dy)) == pytest.approx(u0, abs=1e-5)
            var = float(np.sum((mid - u0) ** 2 * f * dy))
            assert var == pytest.approx(float(nm.pm_variance(eps).at(u0)), rel=1e-4)
            t0 = (u0 + 1) / 2
            g = sw.density(t0, mids)
            mean_y = float(np.sum(mids * g * dys))
            assert mean_y == pytest.approx(a0 + a1 * t0, abs=1e-5)
            var_u = 4 * float(np.sum((mids - mean_y) ** 2 * g * dys)) / a1**2
            assert var_u == pytest.approx(float(nm.sw_variance(eps).at(u0)), rel=1e-4)


def test_worst_cases_are_the_maxima_over_the_interval():
    u = np.linspace(-1, 1, 2001)
    for name in oneshot.KERNELS:
        for eps in (0.3, 1.0, 4.0):
            v = nm.unit_variance(name, eps)
            assert v.worst() == pytest.approx(float(v.at(u).max()), rel=1e-9)


def test_known_closed_forms():
    """Printed forms: Laplace 8/ε²; Duchi's worst C²; HM above ε* ([WAN19] eq. for HM)."""
    assert nm.laplace_variance(1.3).v0 == pytest.approx(8 / 1.3**2)
    e = 2.0
    c = (math.exp(e) + 1) / math.expm1(e)
    assert nm.duchi_variance(e).worst() == pytest.approx(c * c)
    s = math.exp(e / 2)
    printed = (s + 3) / (3 * s * (s - 1)) + (math.exp(e) + 1) ** 2 / (s * math.expm1(e) ** 2)
    assert nm.hm_variance(e).worst() == pytest.approx(printed, rel=1e-12)


def test_mean_estimate_in_declared_units_covers():
    """estimate_mean's interval covers the true mean about 95% of the time (5 binomial SE), on
    real data: the ages of Adult's first 2,000 persons, range [17, 90]."""
    from longldp.data.numeric import numeric_values

    ages = numeric_values("adult", "age")[:2000]
    truth = float(ages.mean())
    rng = np.random.default_rng(11)
    reps = 200
    for name in oneshot.KERNELS:
        hits = 0
        for _ in range(reps):
            pert = num.perturb(name, ages, 1.0, rng, lo=17, hi=90)
            est = num.estimate_mean(name, pert.reports, 1.0, lo=17, hi=90)
            hits += est.lower <= truth <= est.upper
            assert est.se <= est.worst_se * (1 + 1e-12)
        assert abs(hits / reps - 0.95) <= 5 * math.sqrt(0.95 * 0.05 / reps), name
    exact = num.mean_variance("PM", ages, 1.0, lo=17, hi=90)
    worst = num.worst_mean_variance("PM", ages.size, 1.0, lo=17, hi=90)
    assert 0 < exact <= worst


@pytest.mark.parametrize("mechanism", ["Duchi", "PM", "HM"])
def test_chain_per_report_and_time_average_variance(mechanism):
    """L-1BitMean / L-PM / L-HM on users whose value never changes: each report unbiased with
    Vtot, the user's τ-report average with V1 + (Vtot − V1)/τ (math (20.21))."""
    eps_perm, eps_1, s, tau = 2.0, 0.7, 6, 6
    rng = np.random.default_rng(13)
    for u0 in (-1.0, 0.45):
        t = np.full(N, (u0 + 1) / 2)
        state = chains.new_memo(N, s, rng)
        bits = np.stack(
            [chains.perturb(mechanism, t, state, eps_perm, eps_1, rng) for _ in range(tau)]
        )
        u_hat = chains.debias(bits, eps_1)
        v1, vtot = (float(x) for x in nm.chain_variances(mechanism, eps_perm, eps_1, s, u0))
        assert_mean_and_variance(u_hat[0], u0, vtot)
        assert_mean_and_variance(u_hat.mean(axis=0), u0, v1 + (vtot - v1) / tau)
        assert np.all(state.distinct() <= 2)  # a constant value uses at most two grid keys


def test_chain_rounding_keys_exact_law():
    """α-point rounding: the upper key with probability frac(s·t) (5 binomial SE)."""
    rng = np.random.default_rng(5)
    s = 7
    for t0 in (0.0, 0.23, 0.5, 1.0):
        a = rng.random(N)
        keys = nm.rounding_keys(np.full(N, t0), s, a)
        lo = math.floor(s * t0)
        phi = s * t0 - lo
        assert set(np.unique(keys)) <= {lo, min(lo + 1, s)}
        share = float(np.mean(keys == lo + 1))
        assert abs(share - phi) <= 5 * math.sqrt(max(phi * (1 - phi), 1e-12) / N)
        assert float(np.mean(keys / s)) == pytest.approx(
            t0, abs=5 * math.sqrt(float(nm.rounding_variance(2 * t0 - 1, s)) / 4 / N) + 1e-12
        )


def test_chain_accounting_matches_memos():
    """The ledger's count of memo keys equals the memos the simulated clients drew."""
    rng = np.random.default_rng(17)
    n, s, tau = 500, 4, 12
    state = chains.new_memo(n, s, rng)
    traj = np.clip(rng.normal(0.5, 0.2, (tau, n)), 0, 1)
    keys = []
    for step in range(tau):
        chains.perturb("PM", traj[step], state, 2.0, 0.6, rng)
        keys.append(nm.rounding_keys(traj[step], s, state.offsets))
    key_matrix = np.stack(keys, axis=1)
    np.testing.assert_array_equal(nm.distinct_per_row(key_matrix), state.distinct())
    spent = nm.chain_spent_epsilon(key_matrix, 2.0, 0.6)
    np.testing.assert_allclose(spent, np.minimum(tau * 0.6, state.distinct() * 2.0))
