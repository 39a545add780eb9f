"""Every protocol's claimed ε checked against its exact channel, enumerated for small domains.

The channels are built here from the per-round mechanisms (matrix products of the round
channels, enumeration of all outputs), not from the library's P1/P0 formulas, so a wrong closed
form in ``longldp.privacy`` cannot hide behind itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp.privacy import channel_epsilon, max_alpha

KS = (2, 3, 5, 8)
EPS_PERM = (0.5, 1.0, 2.0, 4.0)
ALPHAS = (0.1, 0.4, 0.6)
TOL = 1e-9
UNARY = (
    ll.protocols.SUE,
    ll.protocols.OUE,
    ll.protocols.LSUE,
    ll.protocols.LOUE,
    ll.protocols.LSOUE,
    ll.protocols.LOSUE,
)


def grr_matrix(keep: float, m: int) -> np.ndarray:
    """Round channel of GRR over m symbols: keep with ``keep``, else a uniform other symbol."""
    if m == 1:
        return np.ones((1, 1))
    off = (1 - keep) / (m - 1)
    return np.full((m, m), off) + np.eye(m) * (keep - off)


def bit_matrix(p: float, q: float) -> np.ndarray:
    """Per-bit channel, rows = input bit (0, 1), columns = output bit (0, 1)."""
    return np.array([[1 - q, q], [1 - p, p]])


def ue_channel(k: int, per_bit: np.ndarray) -> np.ndarray:
    """Channel over all 2^k output vectors of a unary encoding with independent bits."""
    outputs = np.array(list(itertools.product((0, 1), repeat=k)))
    rows = []
    for v in range(k):
        onehot = np.zeros(k, dtype=int)
        onehot[v] = 1
        rows.append(np.prod(per_bit[onehot[None, :], outputs], axis=1))
    return np.array(rows)


def hashed_channel(proto, bucket_channel: np.ndarray, rng: np.random.Generator) -> float:
    """Worst ε over sampled hash functions of the protocol's own family: given H, the report
    (H, y) has Pr[y | v] = bucket_channel[H(v), y]; H is public and independent of v."""
    worst = 0.0
    for _ in range(40):
        state = proto._new_state(1, rng)
        table = np.array([proto._memo_key(np.array([v]), state)[0] for v in range(proto.k)])
        worst = max(worst, channel_epsilon(bucket_channel[table]))
    return worst


def dbitflip_channel(proto, first_round_only: bool = False) -> np.ndarray:
    """Enumerate every sampled d-subset S and every d-bit answer: Pr[(S, y) | v]."""
    b, d, p = proto.n_buckets, proto.d, proto.p1
    bucket = (np.arange(proto.k) * b) // proto.k
    subsets = list(itertools.combinations(range(b), d))
    cols = []
    for s in subsets:
        for y in itertools.product((0, 1), repeat=d):
            truth = (np.array(s)[None, :] == bucket[:, None]).astype(int)
            prob = np.where(np.array(y)[None, :] == truth, p, 1 - p).prod(axis=1)
            cols.append(prob / len(subsets))
    return np.array(cols).T


def exact_epsilons(proto, rng) -> tuple[float, float]:
    """(single-report ε, first-round ε) from the enumerated channel."""
    k = proto.k
    if isinstance(proto, ll.protocols.DBitFlipPM):
        eps = channel_epsilon(dbitflip_channel(proto))
        return eps, eps
    if hasattr(proto, "g"):  # local hashing: GRR over g buckets per round
        g = proto.g
        r1 = grr_matrix(proto.p1, g)
        both = r1 @ grr_matrix(proto.p2, g) if proto.longitudinal else r1
        return hashed_channel(proto, both, rng), hashed_channel(proto, r1, rng)
    if isinstance(proto, UNARY):
        b1 = bit_matrix(proto.p1, proto.q1)
        both = b1 @ bit_matrix(proto.p2, proto.q2)
        return channel_epsilon(ue_channel(k, both)), channel_epsilon(ue_channel(k, b1))
    r1 = grr_matrix(proto.p1, k)
    return channel_epsilon(r1 @ grr_matrix(proto.p2, k)), channel_epsilon(r1)


def chain_cases():
    for name in ("L-GRR", "L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "BiLOLOHA", "OLOLOHA", "L-SH"):
        for k, eps_perm, alpha in itertools.product(KS, EPS_PERM, ALPHAS):
            extra = {}
            if name in ("L-GRR", "BiLOLOHA", "OLOLOHA"):
                for cal in ("exact", "paper"):
                    yield name, k, eps_perm, alpha, {"calibration": cal}
                continue
            if name in ("L-OUE", "L-SOUE") and alpha >= max_alpha(name, eps_perm):
                continue
            yield name, k, eps_perm, alpha, extra


@pytest.mark.parametrize(("name", "k", "eps_perm", "alpha", "extra"), list(chain_cases()))
def test_chain_channel_never_exceeds_claim(name, k, eps_perm, alpha, extra):
    proto = ll.protocol(name, k=k, eps_perm=eps_perm, eps_1=alpha * eps_perm, **extra)
    rng = np.random.default_rng(7)
    single, first = exact_epsilons(proto, rng)
    eps_1 = alpha * eps_perm
    # Round 1 alone (the memo reported forever) is exactly ε∞ for every chain.
    assert first <= eps_perm + TOL
    assert first == pytest.approx(eps_perm, abs=TOL)
    assert single <= eps_1 + TOL
    # The library's own figure is the exact one, rounded outward.
    assert proto.single_report_epsilon() >= single
    assert proto.single_report_epsilon() == pytest.approx(single, abs=TOL)
    assert proto.first_round_epsilon() == pytest.approx(first, abs=TOL)
    exact = extra.get("calibration", "exact") == "exact" or getattr(proto, "g", k) == 2
    if exact:
        assert single == pytest.approx(eps_1, abs=TOL)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps_perm", EPS_PERM)
def test_paper_calibration_of_lgrr_is_over_private_beyond_two_values(k, eps_perm):
    proto = ll.protocol("L-GRR", k=k, eps_perm=eps_perm, eps_1=0.5 * eps_perm, calibration="paper")
    single, _ = exact_epsilons(proto, np.random.default_rng(0))
    if k == 2:
        assert single == pytest.approx(0.5 * eps_perm, abs=TOL)
    else:
        assert single < 0.5 * eps_perm - 1e-3
        exact = ll.protocol("L-GRR", k=k, eps_perm=eps_perm, eps_1=0.5 * eps_perm)
        assert exact.approx_variance(1000) < proto.approx_variance(1000)


def test_paper_calibration_design_example():
    # docs/math.md §3.2: k = 32, ε∞ = 1, ε1 = 0.5 gives a true single-report ε of about 0.10.
    proto = ll.protocol("L-GRR", k=32, eps_perm=1.0, eps_1=0.5, calibration="paper")
    single, _ = exact_epsilons(proto, np.random.default_rng(0))
    assert single == pytest.approx(0.1023, abs=5e-4)


@pytest.mark.parametrize("name", ["GRR", "SUE", "OUE", "BLH", "OLH", "SH"])
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_one_shot_channel_equals_eps(name, k, eps):
    proto = ll.protocol(name, k=k, eps=eps)
    single, _ = exact_epsilons(proto, np.random.default_rng(3))
    assert single == pytest.approx(eps, abs=TOL)
    assert proto.single_report_epsilon() == pytest.approx(single, abs=TOL)
    assert proto.single_report_epsilon() >= single


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps_perm", EPS_PERM)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_dbitflip_channel(k, eps_perm, d):
    if d > k:
        pytest.skip("d cannot exceed the number of buckets")
    proto = ll.protocol("dBitFlipPM", k=k, eps_perm=eps_perm, d=d)
    eps = channel_epsilon(dbitflip_channel(proto))
    claimed = eps_perm if d >= 2 else eps_perm / 2
    assert eps == pytest.approx(claimed, abs=TOL)
    assert proto.single_report_epsilon() == pytest.approx(eps, abs=TOL)
    assert proto.single_report_epsilon() >= eps


def test_channel_epsilon_two_sided():
    # A ratio of exactly e^1 is ε = 1; a channel one ulp looser must not pass as ε = 1.
    e = math.e
    assert channel_epsilon([[e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]]) == (
        pytest.approx(1.0, abs=1e-12)
    )
    assert channel_epsilon([[0.9, 0.1], [0.1, 0.9]]) > 1.0
    assert channel_epsilon([[1.0, 0.0], [0.5, 0.5]]) == math.inf
