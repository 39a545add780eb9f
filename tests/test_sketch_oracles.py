"""Sketch oracles over open item spaces (docs/math.md §21): exact ε by enumeration, samplers
against their channels, unbiasedness and variance (collision term included) at 5 standard
errors, and bad input.

Every statistical tolerance is Z = 5 standard errors from the analytic variance (means) or from
the sample's fourth moment (variances), as in tests/test_statistics.py; seeds are fixed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from longldp import privacy
from longldp.privacy import sketch as fs
from longldp.protocols.hadamard import hadamard_parity
from longldp.protocols.sketch import oracles as so

Z = 5.0
KINDS = fs.SKETCH_KINDS


def sample_variance_and_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    R = x.shape[0]
    dev = x - x.mean(axis=0)
    s2 = (dev**2).sum(axis=0) / (R - 1)
    m4 = (dev**4).mean(axis=0)
    return s2, np.sqrt(np.maximum(m4 - s2**2 * (R - 3) / (R - 1), 0.0) / R)


# ------------------------------------------------------------------------------------------
# Exact ε: the channel enumerated from the sampler's own probabilities
# ------------------------------------------------------------------------------------------


def bits_channel(m: int, p: float, q: float) -> np.ndarray:
    """Pr[bit vector y | column b]: bit b set with p, the others with q (independent)."""
    ys = np.array(list(itertools.product([0, 1], repeat=m)), dtype=bool)
    rows = []
    for b in range(m):
        prob = np.where(ys, q, 1 - q)
        prob[:, b] = np.where(ys[:, b], p, 1 - p)
        rows.append(prob.prod(axis=1))
    return np.array(rows)


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_cms_and_the_exact_epsilon(eps):
    for kind in ("cms", "the"):
        mom = fs.sketch_moments(kind, eps, 4, hashed=False)
        exact = privacy.channel_epsilon(bits_channel(4, mom.P1, mom.q))
        claim = fs.sketch_epsilon(kind, eps)
        assert exact <= claim <= exact + 1e-9
    # CMS spends exactly its ε; THE's thresholded bits spend less than the nominal ε.
    assert fs.sketch_epsilon("cms", eps) == pytest.approx(eps, rel=1e-9)
    assert fs.sketch_epsilon("the", eps) < eps


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_hcms_exact_epsilon(eps):
    m = 8
    keep = fs.rr_keep_probability(eps)
    # outputs (l, bit), l uniform: Pr = (1/m)·(keep if bit = parity(l, b) else 1 − keep)
    chan = np.zeros((m, 2 * m))
    for b in range(m):
        par = hadamard_parity(np.arange(m), b)
        chan[b, 0::2] = np.where(par == 0, keep, 1 - keep) / m
        chan[b, 1::2] = np.where(par == 1, keep, 1 - keep) / m
    exact = privacy.channel_epsilon(chan)
    assert exact <= fs.sketch_epsilon("hcms", eps) <= exact + 1e-9


def test_pcs_exact_epsilon():
    m, eps = 4, 1.5
    keep = fs.rr_keep_probability(eps, "PCS")
    ys = np.array(list(itertools.product([0, 1], repeat=m)), dtype=bool)
    chan = []
    for b in range(m):
        for g in (1, -1):
            good = ys[:, b] == (g > 0)
            chan.append(np.where(good, keep, 1 - keep) / 2 ** (m - 1))
    exact = privacy.channel_epsilon(np.array(chan))
    assert exact <= fs.sketch_epsilon("pcs", eps) <= exact + 1e-9


def test_she_density_ratio_reaches_epsilon():
    eps = 1.3
    b = fs.she_scale(eps)
    rng = np.random.default_rng(1)
    y = rng.uniform(-3, 4, size=(20_000, 2))
    y[0] = [1.5, -0.5]  # a point where the bound is attained: y_b >= 1, y_b' <= 0

    def logdens(y: np.ndarray, col: int) -> np.ndarray:
        e = np.zeros(2)
        e[col] = 1.0
        return -np.abs(y - e).sum(axis=1) / b

    ratio = logdens(y, 0) - logdens(y, 1)
    assert ratio.max() == pytest.approx(eps, rel=1e-12)
    assert ratio.max() <= fs.sketch_epsilon("she", eps)


@pytest.mark.parametrize("kind", ["cms", "hcms"])
def test_memoized_chain_epsilons_by_enumeration(kind):
    eps_perm, eps_1 = 3.0, 1.0
    p1, q1, p2, q2 = fs.sketch_chain(kind, eps_perm, eps_1)
    P1, P0 = privacy.chain_support(p1, q1, p2, q2)
    e_inf, e_1 = fs.chain_epsilons(kind, eps_perm, eps_1)
    if kind == "cms":
        one, perm = bits_channel(3, P1, P0), bits_channel(3, p1, q1)
        assert e_1 == pytest.approx(eps_1, rel=1e-9)
    else:
        one = np.array([[P1, 1 - P1], [1 - P1, P1]])
        perm = np.array([[p1, q1], [q1, p1]])
    assert privacy.channel_epsilon(one) <= e_1 <= privacy.channel_epsilon(one) + 1e-9
    assert privacy.channel_epsilon(perm) <= e_inf <= privacy.channel_epsilon(perm) + 1e-9
    assert e_inf == pytest.approx(eps_perm, rel=1e-9)


def test_samplers_realize_their_channels():
    """Output frequencies of the samplers for a fixed input against the enumerated channel."""
    rng = np.random.default_rng(7)
    N, m = 40_000, 3
    for kind in ("cms", "the"):
        cfg = so.SketchConfig(kind, m, eps=1.0, hashed=False)
        p, q = cfg.round1
        bits = so.ue_bits(np.full(N, 1), m, p, q, rng)
        ys = np.unpackbits(bits, axis=1, count=m)
        idx = ys @ (1 << np.arange(m)[::-1])
        freq = np.bincount(idx, minlength=2**m) / N
        expect = bits_channel(m, p, q)[1]
        assert np.all(np.abs(freq - expect) <= Z * np.sqrt(expect * (1 - expect) / N))
    keep = fs.rr_keep_probability(1.0)
    l_rows, bit = so.hcms_report(np.full(N, 5), 8, keep, rng)
    agree = bit == hadamard_parity(l_rows, 5)
    assert abs(agree.mean() - keep) <= Z * math.sqrt(keep * (1 - keep) / N)
    assert np.all(np.abs(np.bincount(l_rows, minlength=8) / N - 1 / 8) <= Z * math.sqrt(7 / 64 / N))


# ------------------------------------------------------------------------------------------
# Unbiasedness and variance, collisions included (hash functions redrawn every repetition)
# ------------------------------------------------------------------------------------------

COUNTS = np.array([300, 150, 90, 60])  # items 0..3 held by 600 users; item 999 by nobody
QUERY = np.array([0, 1, 2, 3, 999], dtype=np.uint64)
N = int(COUNTS.sum())
FREQ = np.append(COUNTS / N, 0.0)
SUM_F2 = float(np.sum((COUNTS / N) ** 2))


def estimates(kind: str, R: int, engine: str, seed: int, m: int = 8, d: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = np.repeat(np.arange(COUNTS.size, dtype=np.uint64), COUNTS)
    out = np.empty((R, QUERY.size))
    for r in range(R):
        cfg = so.SketchConfig(kind, m, d, eps=2.0, salt=r)  # a fresh public hash draw
        rows = so.draw_rows(N, d, rng)
        state = so.simulate_state(cfg, keys, rows, rng, engine)
        out[r] = so.estimate(cfg, state, QUERY)
    return out


def check_moments(est: np.ndarray, mom: fs.SketchMoments) -> None:
    R = est.shape[0]
    var = mom.variance(N, FREQ, SUM_F2)
    assert np.all(np.abs(est.mean(axis=0) - FREQ) <= Z * np.sqrt(var / R))
    s2, se = sample_variance_and_se(est)
    assert np.all(np.abs(s2 - var) <= Z * se), (s2, var)


@pytest.mark.parametrize("kind", KINDS)
def test_unbiased_with_stated_variance_reports(kind):
    est = estimates(kind, 700, "reports", seed=11)
    check_moments(est, so.SketchConfig(kind, 8, 4, eps=2.0).moments)


@pytest.mark.parametrize("kind", so.COUNT_LEVEL_KINDS)
def test_unbiased_with_stated_variance_count_level(kind):
    est = estimates(kind, 3000, "count-level", seed=12)
    check_moments(est, so.SketchConfig(kind, 8, 4, eps=2.0).moments)


def test_collision_term_is_needed():
    """With a heavy item the collision term is a large part of the variance of an item nobody
    holds: the variance without it is rejected by the same 5-SE test."""
    est = estimates("cms", 3000, "count-level", seed=13, m=4, d=2)
    mom = so.SketchConfig("cms", 4, 2, eps=2.0).moments
    s2, se = sample_variance_and_se(est[:, -1:])
    without = (mom.v0) / (N * mom.gap**2)
    assert abs(s2[0] - mom.variance(N, 0.0, SUM_F2)) <= Z * se[0]
    assert abs(s2[0] - without) > Z * se[0]


@pytest.mark.parametrize("kind", ["she", "the", "hcms"])
def test_identity_sketch_is_the_classical_oracle(kind):
    """hashed=False: no collisions, P0 = q; unbiased with Wang et al.'s variance (1.2)."""
    rng = np.random.default_rng(21)
    m, R = 4, 600
    keys = np.repeat(np.arange(4, dtype=np.uint64), COUNTS)
    cfg = so.SketchConfig(kind, m, eps=1.5, hashed=False)
    rows = np.zeros(N, dtype=np.int64)
    est = np.array(
        [so.estimate(cfg, so.simulate_state(cfg, keys, rows, rng), np.arange(4)) for _ in range(R)]
    )
    var = cfg.moments.variance(N, COUNTS / N)
    assert cfg.moments.P0 == cfg.moments.q
    assert np.all(np.abs(est.mean(axis=0) - COUNTS / N) <= Z * np.sqrt(var / R))
    s2, se = sample_variance_and_se(est)
    assert np.all(np.abs(s2 - var) <= Z * se)


@pytest.mark.parametrize("kind", ["cms", "hcms"])
def test_memoized_reports_unbiased_with_chain_variance(kind):
    """Round 1 memoized, round 2 re-randomized: one epoch's estimate has the chain's moments."""
    rng = np.random.default_rng(31)
    m, d, R = 8, 4, 600
    keys = np.repeat(np.arange(4, dtype=np.uint64), COUNTS)
    out = np.empty((R, QUERY.size))
    for r in range(R):
        cfg = so.SketchConfig(kind, m, d, eps_perm=3.0, eps_1=1.0, salt=r)
        rows = so.draw_rows(N, d, rng)
        _, _, p2, q2 = cfg.chain
        memo = so.perturb(cfg, keys, rows, rng)  # round 1 at the chain's (p1, q1)
        if kind == "cms":
            rep = (so.rerandomize_bits(memo[0], m, p2, q2, rng),)
        else:
            rep = (memo[0], so.rerandomize_bit(memo[1], p2, rng))
        out[r] = so.estimate(cfg, so.aggregate(cfg, rep, rows), QUERY)
    check_moments(out, so.SketchConfig(kind, m, d, eps_perm=3.0, eps_1=1.0).moments)


def test_the_optimal_theta_minimises_variance():
    for eps in (0.5, 2.0, 5.0):
        th = fs.the_optimal_theta(eps)
        assert 0.5 <= th < 1
        grid = np.linspace(0.5, 0.999, 500)
        assert (
            fs.the_unit_variance(eps, th) <= min(fs.the_unit_variance(eps, t) for t in grid) + 1e-12
        )


# ------------------------------------------------------------------------------------------
# Bad input: one line each
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "cms", "m": 1, "eps": 1.0}, "'m' must be an integer in [2,"),
        ({"kind": "hcms", "m": 12, "eps": 1.0}, "power of two"),
        ({"kind": "pcs", "m": 8, "eps": 0.0}, "'eps' must be a finite number > 0"),
        ({"kind": "she", "m": 8, "eps_perm": 2.0, "eps_1": 1.0}, "memoized form exists"),
        ({"kind": "cms", "m": 8, "d": 3, "eps": 1.0, "hashed": False}, "identity sketch"),
        ({"kind": "cms", "m": 8}, "'eps' is required"),
        ({"kind": "bloom", "m": 8, "eps": 1.0}, "'kind' must be one of"),
    ],
)
def test_bad_configuration(kwargs, message):
    with pytest.raises(ValueError, match=None) as info:
        so.SketchConfig(**kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_reports():
    cfg = so.SketchConfig("cms", 16, 4, eps=1.0)
    with pytest.raises(ValueError, match="packed reports of shape"):
        so.aggregate_bits(cfg, np.zeros((3, 1), np.uint8), np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="'rows' must be"):
        so.aggregate_bits(cfg, np.zeros((3, 2), np.uint8), np.array([0, 1, 4]))
    with pytest.raises(ValueError, match="identity sketch takes keys"):
        so.columns(so.SketchConfig("cms", 8, eps=1.0, hashed=False), np.array([9], np.uint64), [0])
    with pytest.raises(ValueError, match="no count-level sampler"):
        so.sample_state(so.SketchConfig("hcms", 8, eps=1.0), np.zeros((1, 8), int), [0], None)
