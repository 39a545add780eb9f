"""SH (Hadamard randomized response) and L-SH: the transform, the exact channel, the memos."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp.privacy import channel_epsilon
from longldp.protocols.hadamard import fwht, hadamard_matrix, hadamard_parity, hadamard_size


def explicit_sylvester(m: int) -> np.ndarray:
    """H_1 = [1], H_2m = [[H, H], [H, −H]]: built by the recursion, not by popcount."""
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < m:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.mark.parametrize("m", [1, 2, 4, 8, 16, 32, 64])
def test_fwht_equals_explicit_hadamard_product(m: int) -> None:
    rng = np.random.default_rng(m)
    x = rng.integers(-50, 50, size=(3, m))
    h = explicit_sylvester(m)
    assert np.array_equal(hadamard_matrix(m), h)
    assert np.array_equal(fwht(x), x @ h.T)
    assert np.array_equal(fwht(x[0]), h @ x[0])


def test_fwht_rejects_non_power_of_two() -> None:
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.zeros(12))


@pytest.mark.parametrize("k", [2, 5, 8, 33, 64])
def test_support_counts_equal_explicit_inner_products(k: int) -> None:
    """The FWHT aggregation equals C(v) = #{u : s_u = H[j_u, v]} computed from the matrix."""
    proto = ll.protocol("SH", k=k, eps=1.0)
    assert proto.m == hadamard_size(k) >= k
    rng = np.random.default_rng(k)
    values = rng.integers(0, k, 3000)
    rep = proto.perturb(values, rng=rng)
    h = explicit_sylvester(proto.m)
    sign = 1 - 2 * rep["bucket"]
    explicit = np.array([(sign == h[rep["hash_id"], v]).sum() for v in range(k)])
    assert np.array_equal(proto.support_counts(rep), explicit)
    # Round 1 randomizes the parity bit of the user's own column (kept w.p. p; at the largest
    # accepted ε = 30 a flip has probability 9e-14: none among these 3000 users, fixed seed).
    sure = ll.protocol("SH", k=k, eps=30.0).perturb(values, rng=rng)
    assert np.array_equal(sure["bucket"], hadamard_parity(sure["hash_id"], values))


def full_channel(proto) -> np.ndarray:
    """Pr[(j, y) | v] over every row j and bit y, enumerated (rows uniform, chain on the bit)."""
    m = proto.m
    r1 = np.array([[proto.p1, proto.q1], [proto.q1, proto.p1]])
    r2 = np.array([[proto.p2, 1 - proto.p2], [1 - proto.p2, proto.p2]]) if proto.p2 < 1 else None
    bits = r1 if r2 is None else r1 @ r2
    cols = []
    for j, y in itertools.product(range(m), (0, 1)):
        x = hadamard_parity(j, np.arange(proto.k))
        cols.append(bits[x, y] / m)
    return np.array(cols).T


@pytest.mark.parametrize("k", [2, 3, 5, 8, 13])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_sh_exact_channel_is_eps(k: int, eps: float) -> None:
    proto = ll.protocol("SH", k=k, eps=eps)
    channel = full_channel(proto)
    assert np.allclose(channel.sum(axis=1), 1.0)
    exact = channel_epsilon(channel)
    assert exact == pytest.approx(eps, abs=1e-9)
    assert proto.single_report_epsilon() >= exact


@pytest.mark.parametrize("alpha", [0.3, 0.5, 0.8])
def test_lsh_channel_and_at_most_two_memos(alpha: float) -> None:
    eps_perm = 2.0
    proto = ll.protocol("L-SH", k=11, eps_perm=eps_perm, eps_1=alpha * eps_perm)
    assert channel_epsilon(full_channel(proto)) == pytest.approx(alpha * eps_perm, abs=1e-9)
    rng = np.random.default_rng(5)
    n, tau = 300, 12
    memo = proto.new_memo(n)
    for _ in range(tau):  # every user changes value at every timestamp
        proto.perturb(rng.integers(0, 11, n), memo, rng)
    spent = proto.spent_budget(memo)
    assert spent["memos"].max() == 2  # a user's hash maps every value to ±1: two memos at most
    want = np.minimum(tau * alpha * eps_perm, spent["memos"] * eps_perm)
    np.testing.assert_allclose(spent["epsilon"], want, rtol=1e-9)


def test_sh_c_eps_and_variance() -> None:
    proto = ll.protocol("SH", k=1000, eps=2.0)
    c = (math.e**2 + 1) / (math.e**2 - 1)
    assert proto.c_eps == pytest.approx(c)
    assert proto.m == 1024
    assert proto.approx_variance(1) == pytest.approx(c**2)


def test_sh_bad_input() -> None:
    with pytest.raises(ValueError, match="'k'"):
        ll.protocol("SH", k=1, eps=1.0)
    with pytest.raises(ValueError, match="'eps'"):
        ll.protocol("SH", k=4, eps=-1.0)
    with pytest.raises(ValueError, match="unknown parameter"):
        ll.protocol("SH", k=4, eps=1.0, hash_pool=3)
    proto = ll.protocol("SH", k=5, eps=1.0)
    rep = proto.perturb(np.arange(5), rng=np.random.default_rng(0))
    rep["hash_id"][0] = proto.m
    with pytest.raises(ValueError, match="row"):
        proto.support_counts(rep)
    with pytest.raises(ValueError, match="values"):
        proto.perturb(np.array([5]), rng=np.random.default_rng(0))


def test_sh_bytes_round_trip() -> None:
    proto = ll.protocol("SH", k=1000, eps=1.0)
    rep = proto.perturb(np.arange(1000), rng=np.random.default_rng(1))
    assert proto.report_nbytes == 3
    assert np.array_equal(proto.decode_reports(proto.encode_reports(rep)), rep)
