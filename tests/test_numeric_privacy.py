"""Exact privacy of the numeric mechanisms (docs/math.md §20).

Discrete outputs (Duchi, 1BitMean, every report of L-1BitMean, L-PM, L-HM) are enumerated from
the sampler's own probability expressions and their ε computed by ``privacy.channel_epsilon``.
Continuous outputs (Laplace, PM, SW, HM) are checked through the densities the samplers invert:
two density levels in ratio e^ε and a support that does not depend on the input (the proof of
math §20.2–§20.6), plus a Dvoretzky–Kiefer–Wolfowitz test that the sampler realizes the density.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp import privacy
from longldp.privacy import numeric as nm
from longldp.protocols.numeric import chains, oneshot

EPS = (0.3, 1.0, 3.0)
U_GRID = np.linspace(-1.0, 1.0, 41)


def dkw_tolerance(n: int, alpha: float = 1e-9) -> float:
    """sup |F_n − F| exceeds this with probability ≤ alpha (DKW inequality, Massart's constant)."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))


# ------------------------------------------------------------------ discrete outputs, enumerated


@pytest.mark.parametrize("eps", EPS)
def test_duchi_and_1bitmean_channel_is_exactly_eps(eps):
    p1 = nm.duchi_probability(eps, U_GRID)
    channel = np.stack([1 - p1, p1], axis=1)
    assert privacy.channel_epsilon(channel) == pytest.approx(eps, rel=1e-12)
    # 1BitMean in t: Ding et al.'s printed form 1/(e^ε + 1) + t(e^ε − 1)/(e^ε + 1)
    t = (U_GRID + 1) / 2
    printed = 1 / (math.exp(eps) + 1) + t * math.expm1(eps) / (math.exp(eps) + 1)
    np.testing.assert_allclose(p1, printed, rtol=1e-13)


def _rounding_enumeration(u: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each u: the two keys the offset can give and their probabilities (exact)."""
    st = s * (u + 1) / 2
    lo = np.floor(st)
    phi = st - lo
    return lo.astype(int), np.minimum(lo + 1, s).astype(int), phi


def _memo_mean(mechanism: str, eps_perm: float, u: np.ndarray) -> np.ndarray:
    """E[y1 | u] by integrating the memo mechanism's density piece by piece (not its closed
    form): the exact Pr[report = 1 | u] of round 2 is (1 + κ·E[y1 | u])/2."""
    if mechanism == "Duchi" or nm.hm_beta(eps_perm) == 0.0:
        c = nm.duchi_bound(eps_perm)
        return c * (2 * nm.duchi_probability(eps_perm, u) - 1)
    pm = nm.pm_params(eps_perm)
    lft = pm.left(u)
    rgt = lft + pm.width
    # ∫ y f(y) dy over [−C, ℓ), [ℓ, r], (r, C]: each piece density × length × midpoint
    pieces = (
        pm.q * (lft + pm.C) * (lft - pm.C) / 2
        + pm.p * (rgt - lft) * (lft + rgt) / 2
        + pm.q * (pm.C - rgt) * (pm.C + rgt) / 2
    )
    if mechanism == "PM":
        return pieces
    beta = nm.hm_beta(eps_perm)
    c = nm.duchi_bound(eps_perm)
    return beta * pieces + (1 - beta) * c * (2 * nm.duchi_probability(eps_perm, u) - 1)


@pytest.mark.parametrize("mechanism", ["Duchi", "PM", "HM"])
@pytest.mark.parametrize(("eps_perm", "alpha"), [(1.0, 0.3), (3.0, 0.45), (0.5, 0.4)])
def test_chain_report_channel_is_exactly_eps_1(mechanism, eps_perm, alpha):
    """One report of L-1BitMean / L-PM / L-HM, the offset and the memo integrated out exactly."""
    eps_1 = alpha * eps_perm
    assert eps_1 < nm.max_eps_1(mechanism, eps_perm)  # the cases stay within the maximum
    s = 5
    lo, hi, phi = _rounding_enumeration(U_GRID, s)
    grid = 2.0 * np.arange(s + 1) / s - 1
    memo_mean = _memo_mean(mechanism, eps_perm, grid)
    p_one = (1 - phi) * nm.round2_probability(eps_1, memo_mean[lo]) + phi * nm.round2_probability(
        eps_1, memo_mean[hi]
    )
    channel = np.stack([1 - p_one, p_one], axis=1)
    assert privacy.channel_epsilon(channel) == pytest.approx(eps_1, rel=1e-10)
    # round 2 alone, between the extreme memos ±C_M: the ε2 of (4.2)
    cm = nm.memo_bound(mechanism, eps_perm)
    r2 = nm.round2_probability(eps_1, np.array([-cm, cm]))
    eps2 = privacy.channel_epsilon(np.stack([1 - r2, r2], axis=1))
    assert eps2 == pytest.approx(nm.round2_epsilon(mechanism, eps_perm, eps_1), rel=1e-10)
    assert eps2 >= eps_1


def test_max_eps_1_closed_forms():
    for e in (0.4, 1.0, 2.5, 6.0):
        assert nm.max_eps_1("Duchi", e) == pytest.approx(e, rel=1e-12)
        assert nm.max_eps_1("PM", e) == pytest.approx(e / 2, rel=1e-12)
    # HM is Duchi below ε*, PM above
    assert nm.max_eps_1("HM", 0.5) == pytest.approx(0.5, rel=1e-12)
    assert nm.max_eps_1("HM", 2.0) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(("eps_perm", "eps_1"), [(1.0, 0.4), (2.0, 1.5)])
def test_flip_probability_round_trip_and_tau_reports(eps_perm, eps_1):
    """γ ↔ ε1, and the exact ε of τ reports of one L-1BitMean memo: the count c of ones is a
    two-component mixture, so ε_τ = max_c |ln Pr[c | 1]/Pr[c | 0]| (math §13.2, one bit)."""
    gamma = nm.flip_probability(eps_perm, eps_1)
    assert nm.flip_report_epsilon(eps_perm, gamma) == pytest.approx(eps_1, rel=1e-12)
    pi1, pi0 = (float(nm.duchi_probability(eps_perm, u)) for u in (1.0, -1.0))
    previous = 0.0
    for tau in (1, 2, 5, 40):
        c = np.arange(tau + 1)
        log_keep = c * math.log(1 - gamma) + (tau - c) * math.log(gamma)
        log_flip = c * math.log(gamma) + (tau - c) * math.log(1 - gamma)
        l1 = np.logaddexp(math.log(pi1) + log_keep, math.log(1 - pi1) + log_flip)
        l0 = np.logaddexp(math.log(pi0) + log_keep, math.log(1 - pi0) + log_flip)
        eps_tau = float(np.max(np.abs(l1 - l0)))
        bound = min(tau * eps_1, eps_perm)  # (4.1) with one memo
        assert eps_tau <= privacy.round_up(bound)
        assert eps_tau >= previous - 1e-12
        previous = eps_tau
    assert eps_tau == pytest.approx(eps_perm, rel=0.05)  # → ε∞ as τ grows


# ------------------------------------------------------------------ continuous outputs


@pytest.mark.parametrize("eps", EPS)
def test_pm_density_two_levels_fixed_support(eps):
    pm = nm.pm_params(eps)
    assert pm.p / pm.q == pytest.approx(math.exp(eps), rel=1e-12)
    assert pm.p * pm.width + pm.q * (pm.C + 1) == pytest.approx(1.0, rel=1e-12)
    y = np.linspace(-pm.C, pm.C, 2001)
    dens = pm.density(U_GRID[:, None], y[None, :])
    assert set(np.unique(dens)) <= {pm.p, pm.q}
    ratio = dens.max(axis=0) / dens.min(axis=0)
    assert ratio.max() == pytest.approx(math.exp(eps), rel=1e-12)
    assert np.all(pm.density(0.0, np.array([-pm.C - 1e-9, pm.C + 1e-9])) == 0)


@pytest.mark.parametrize("eps", EPS)
def test_sw_density_two_levels_fixed_support(eps):
    sw = nm.sw_params(eps)
    assert sw.p / sw.q == pytest.approx(math.exp(eps), rel=1e-12)
    assert 2 * sw.b * sw.p + sw.q == pytest.approx(1.0, rel=1e-12)
    assert 0 < sw.b < 0.5
    t = (U_GRID + 1) / 2
    y = np.linspace(-sw.b, 1 + sw.b, 2001)
    dens = sw.density(t[:, None], y[None, :])
    assert set(np.unique(dens)) <= {sw.p, sw.q}
    assert (dens.max(axis=0) / dens.min(axis=0)).max() == pytest.approx(math.exp(eps), rel=1e-12)


def test_sw_b_small_eps_series_is_continuous():
    below, above = nm.sw_params(1e-3 * (1 - 1e-9)), nm.sw_params(1e-3)
    assert below.b == pytest.approx(above.b, rel=1e-9)
    assert nm.sw_params(1e-6).b == pytest.approx(0.5, rel=1e-5)  # b → 1/2 as ε → 0


@pytest.mark.parametrize("eps", EPS)
def test_laplace_log_density_ratio_at_most_eps(eps):
    scale = nm.laplace_scale(eps)
    y = np.linspace(-6, 6, 4001)
    logf = -np.abs(y[None, :] - U_GRID[:, None]) / scale
    assert (logf.max(axis=0) - logf.min(axis=0)).max() == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("eps", [0.3, 0.61, 1.0, 3.0])
def test_hm_atoms_and_density_ratios(eps):
    beta = nm.hm_beta(eps)
    atom_plus = (1 - beta) * nm.duchi_probability(eps, U_GRID)
    atoms = np.stack([(1 - beta) - atom_plus, atom_plus], axis=1)
    assert privacy.channel_epsilon(atoms) == pytest.approx(eps, rel=1e-12)
    if beta > 0:  # the continuous part is β times PM's density: the same ratio
        pm = nm.pm_params(eps)
        y = np.linspace(-pm.C, pm.C, 1001)
        dens = beta * pm.density(U_GRID[:, None], y[None, :])
        assert (dens.max(axis=0) / dens.min(axis=0)).max() == pytest.approx(math.exp(eps))


def test_hm_eps_star_and_beta_are_the_minimax():
    e_star = nm.hm_eps_star()
    assert e_star == pytest.approx(0.61, abs=0.005)  # [WAN19] prints ε* ≈ 0.61
    # at ε*, PM's variance at u = 0 equals Duchi's (an independent route to the same root)
    assert nm.pm_variance(e_star).v0 == pytest.approx(nm.duchi_variance(e_star).v0, rel=1e-10)
    betas = np.linspace(0, 1, 2001)
    for eps in (0.3, 0.8, 1.5, 4.0):
        vp, vd = nm.pm_variance(eps), nm.duchi_variance(eps)
        worst = [
            max(b * vp.at(u) + (1 - b) * vd.at(u) for u in (0.0, 1.0)) for b in betas
        ]  # V is linear in u², so its max over [−1, 1] is at u = 0 or u = ±1
        best = betas[int(np.argmin(worst))]
        assert abs(best - nm.hm_beta(eps)) <= 1 / 2000 + 1e-12
        hm_worst = nm.hm_variance(eps).worst()
        assert hm_worst <= min(worst) * (1 + 1e-12)  # no β on the grid does better
        assert hm_worst == pytest.approx(min(worst), rel=1e-3)


# ------------------------------------------------------------------ samplers realize the law


def _pm_cdf(pm: nm.PMParams, u: float, y: np.ndarray) -> np.ndarray:
    lft = float(pm.left(u))
    rgt = lft + pm.width
    inner = np.clip(y, lft, rgt) - lft
    return pm.q * (np.clip(y, -pm.C, pm.C) + pm.C) + (pm.p - pm.q) * inner


def _sw_cdf(sw: nm.SWParams, t: float, y: np.ndarray) -> np.ndarray:
    inner = np.clip(y, t - sw.b, t + sw.b) - (t - sw.b)
    return sw.q * (np.clip(y, -sw.b, 1 + sw.b) + sw.b) + (sw.p - sw.q) * inner


@pytest.mark.parametrize("u0", [-1.0, 0.35, 1.0])
def test_samplers_follow_their_densities(u0):
    rng = np.random.default_rng(20)
    n = 40_000
    tol = dkw_tolerance(n)
    eps = 1.2
    u = np.full(n, u0)
    pm = nm.pm_params(eps)
    y = np.sort(oneshot.pm_sample(u, eps, rng))
    emp = np.arange(1, n + 1) / n
    assert np.max(np.abs(emp - _pm_cdf(pm, u0, y))) < tol
    sw = nm.sw_params(eps)
    t0 = (u0 + 1) / 2
    y = np.sort(oneshot.sw_sample(np.full(n, t0), eps, rng))
    assert np.max(np.abs(emp - _sw_cdf(sw, t0, y))) < tol
    beta, c_d = nm.hm_beta(eps), nm.duchi_bound(eps)
    y = np.sort(oneshot.hm_sample(u, eps, rng))
    minus = (1 - beta) * (1 - float(nm.duchi_probability(eps, u0)))  # the atom at −C_D
    hm_cdf = beta * _pm_cdf(pm, u0, y) + minus * (y >= -c_d) + (1 - beta - minus) * (y >= c_d)
    # with atoms, compare the empirical CDF at and just below every observed value
    at = np.searchsorted(y, y, side="right") / n
    below = np.searchsorted(y, y, side="left") / n
    hm_below = beta * _pm_cdf(pm, u0, y) + minus * (y > -c_d) + (1 - beta - minus) * (y > c_d)
    assert max(np.max(np.abs(at - hm_cdf)), np.max(np.abs(below - hm_below))) < tol
    scale = nm.laplace_scale(eps)
    z = np.sort(oneshot.laplace_sample(u, eps, rng)) - u0
    lap_cdf = np.where(z < 0, 0.5 * np.exp(z / scale), 1 - 0.5 * np.exp(-z / scale))
    assert np.max(np.abs(emp - lap_cdf)) < tol


def test_chain_memo_mechanisms_follow_round1():
    """Round 1 of L-PM draws PM at ε∞ on the rounded value (its law, by DKW)."""
    rng = np.random.default_rng(21)
    n, eps_perm = 40_000, 2.0
    grid_u = np.full(n, 0.2)
    y1 = np.sort(chains.round1("PM", grid_u, eps_perm, rng))
    emp = np.arange(1, n + 1) / n
    assert np.max(np.abs(emp - _pm_cdf(nm.pm_params(eps_perm), 0.2, y1))) < dkw_tolerance(n)


@pytest.mark.parametrize("mechanism", ["PM", "HM"])
def test_tau_reports_of_a_continuous_memo(mechanism):
    """τ reports of one L-PM / L-HM memo, exactly: the count c of ones has
    Pr[c | u] = ∫ Binom(c; τ, (1 + κy)/2) dF(y | u); the density is piecewise constant, so
    Gauss–Legendre on each piece is exact for this degree-τ polynomial. ε_τ stays within
    min(τ·ε1, ε∞) (4.1) and grows towards ε∞ (the memo's ε)."""
    from math import comb

    eps_perm, eps_1 = 3.0, 1.2
    kappa = nm.round2_slope(eps_1)
    pm = nm.pm_params(eps_perm)
    beta = 1.0 if mechanism == "PM" else nm.hm_beta(eps_perm)
    c_d = nm.duchi_bound(eps_perm)
    us = np.linspace(-1, 1, 9)  # grid values (the rounding mixes their rows: no larger ratio)

    def pr_counts(tau: int, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Σ_i w_i·Binom(c; τ, (1 + κ·y_i)/2) for c = 0..τ."""
        cs = np.arange(tau + 1)
        binom = np.array([comb(tau, int(c)) for c in cs], dtype=float)
        one = (1 + kappa * y)[:, None] / 2
        return (binom * one**cs * (1 - one) ** (tau - cs) * w[:, None]).sum(axis=0)

    previous = 0.0
    for tau in (1, 3, 8, 30):
        nodes, weights = np.polynomial.legendre.leggauss(tau // 2 + 2)

        rows = []
        for u in us:
            lft = float(pm.left(u))
            pieces = [(-pm.C, lft, pm.q), (lft, lft + pm.width, pm.p), (lft + pm.width, pm.C, pm.q)]
            row = np.zeros(tau + 1)
            for a, b, dens in pieces:
                y = (b - a) / 2 * nodes + (a + b) / 2
                row += beta * pr_counts(tau, y, dens * (b - a) / 2 * weights)
            if beta < 1:  # HM's Duchi atoms at ±C_D
                plus = float(nm.duchi_probability(eps_perm, u))
                row += (1 - beta) * pr_counts(
                    tau, np.array([c_d, -c_d]), np.array([plus, 1 - plus])
                )
            rows.append(row)
        channel = np.array(rows)
        np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-10)
        eps_tau = privacy.channel_epsilon(channel)
        assert eps_tau <= privacy.round_up(min(tau * eps_1, eps_perm))
        assert eps_tau >= previous - 1e-12
        previous = eps_tau
    assert eps_tau > 0.6 * eps_perm  # thirty reports reveal most of the memo


# ------------------------------------------------------------------ what the sampler realizes


def _realized(t: float):  # type: ignore[no-untyped-def]
    """Pr[u < t] for a 53-bit uniform u: ⌈t·2⁵³⌉/2⁵³, exactly (tests/test_sampler_thresholds.py)."""
    from fractions import Fraction

    return Fraction(math.ceil(Fraction(t) * 2**53), 2**53)


def _ln(x) -> float:  # type: ignore[no-untyped-def]
    return math.log(x.numerator) - math.log(x.denominator)


@pytest.mark.parametrize("eps", [15.0, 23.5, 30.0])
def test_claims_equal_what_the_samplers_realize_at_high_eps(eps):
    """At high ε the small probabilities are a few grid steps of a 53-bit uniform; every claim
    must cover the channel the sampler realizes (thresholds ⌈t·2⁵³⌉/2⁵³, exactly) and equal it
    up to the claims' outward rounding: Duchi's bit at the ends, PM's and SW's branch (their
    density ratio is the branch odds over the pieces' lengths), the bits of the two-round forms
    between the extreme memos."""
    import longldp as ll

    slack = 2e-12
    duchi = ll.protocol("Duchi", eps=eps, lo=0.0, hi=1.0)
    hi_t, lo_t = (float(nm.duchi_probability(eps, u)) for u in (1.0, -1.0))
    plus, minus = _realized(hi_t), _realized(lo_t)
    real = max(_ln(plus / minus), _ln((1 - minus) / (1 - plus)))
    claim = duchi.single_report_epsilon()
    assert real <= claim <= real * (1 + slack) + slack
    for name, params in (("PM", nm.pm_params(eps)),):
        proto = ll.protocol(name, eps=eps, lo=0.0, hi=1.0)
        from fractions import Fraction

        center = _realized(params.center)  # the branch the sampler draws (pm_sample)
        ratio = (center / Fraction(params.width)) / ((1 - center) / Fraction(params.C + 1))
        real = _ln(ratio)
        claim = proto.single_report_epsilon()
        assert real <= claim <= real * (1 + slack) + slack
    sw_p = nm.sw_params(eps)
    center = _realized(sw_p.center)  # the branch sw_sample draws
    from fractions import Fraction

    real = _ln((center / Fraction(2 * sw_p.b)) / (1 - center))
    claim = ll.protocol("SW", eps=eps, lo=0.0, hi=1.0, d=8, d_out=8).single_report_epsilon()
    assert real <= claim <= real * (1 + slack) + slack
    # the two-round forms: one report between the extreme memos (round 2's ε2 of (4.2)) and
    # the memo itself (Duchi's bit at ε∞)
    chain = ll.protocol("L-1BitMean", eps_perm=eps, eps_1=eps / 2, lo=0.0, hi=1.0)
    c = nm.duchi_bound(eps)
    up, down = (_realized(float(nm.round2_probability(eps / 2, y))) for y in (c, -c))
    eps2 = max(_ln(up / down), _ln((1 - down) / (1 - up)))
    assert eps2 >= chain.single_report_epsilon() * (1 - slack)  # a report costs ≤ round 2's ε2
    assert nm.round2_epsilon("Duchi", eps, eps / 2) == pytest.approx(eps2, rel=1e-9)


def test_comparing_with_the_threshold_is_comparing_with_its_drawn_value():
    """The samplers compare their uniform w with the threshold x, the claims read drawn(x)
    (math §20.12): on the 2⁻⁵³ grid, w < x and w < drawn(x) agree, at the grid points on
    either side of x and at x itself when x is one."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.random(5000), np.floor(rng.random(1000) * 2**53) / 2**53,
                        nm.duchi_threshold(3.0, rng.uniform(-1, 1, 1000))])  # fmt: skip
    top = np.ceil(x * 2**53)
    for k in (top - 2, top - 1, top, top + 1):
        w = np.clip(k, 0, 2**53 - 1) * 2.0**-53
        np.testing.assert_array_equal(w < x, w < nm.drawn_array(x))
