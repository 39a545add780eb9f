"""Hadamard response (docs/math.md §2.6): what is particular to it. The common tests (channel,
wire, clients, unbiasedness and variance, engines, audit, server, archive) enroll it from the
registry."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp import attacks as atk
from longldp import privacy
from longldp.attacks.defences.detection import detect_fake_reports


def sylvester(K: int) -> np.ndarray:
    """The Sylvester matrix by its recursion H_2m = [[H, H], [H, −H]] (independent of the
    library's parity formula)."""
    H = np.ones((1, 1), dtype=np.int64)
    while H.shape[0] < K:
        H = np.block([[H, H], [H, -H]])
    return H


@pytest.mark.parametrize("k", [2, 3, 7, 8, 13])
def test_channel_supports_and_epsilon_by_enumeration(k):
    """K is the smallest power of two above k; the channel is (2.7) on the columns 1..k of the
    Sylvester matrix; P0 = ½ for every pair; ε = ln(P1/(1 − P1)) = ε."""
    eps = 0.7
    proto = ll.protocol("HR", k=k, eps=eps)
    K = proto.K
    assert K > k and K // 2 <= k and K & (K - 1) == 0
    H = sylvester(K)
    a = math.exp(eps)
    want = np.where(H[:, 1 : k + 1].T == 1, 2 * a / (K * (1 + a)), 2 / (K * (1 + a)))
    channel = proto.report_channel()
    assert np.allclose(channel, want, rtol=1e-14)
    assert np.allclose(channel.sum(axis=1), 1.0, rtol=1e-14)
    inside = H[:, 1 : k + 1].T == 1  # C_v as rows of H
    for v, u in itertools.product(range(k), repeat=2):
        supported = channel[v][inside[u]].sum()
        assert supported == pytest.approx(proto.P1 if u == v else 0.5, rel=1e-12)
    assert privacy.channel_epsilon(channel) == pytest.approx(eps, rel=1e-12)


def test_support_counts_by_transform_equal_the_direct_count():
    proto = ll.protocol("HR", k=13, eps=1.0)
    rows = np.random.default_rng(0).integers(0, proto.K, size=500)
    H = sylvester(proto.K)
    direct = (H[rows][:, 1 : proto.k + 1] == 1).sum(axis=0)
    assert np.array_equal(proto.support_counts(rows), direct)


def test_sampler_draws_the_channel():
    """Per value, the frequencies of the K rows within 5 standard errors of (2.7)."""
    proto = ll.protocol("HR", k=5, eps=1.5)
    n = 40_000
    rng = np.random.default_rng(1)
    for v in range(proto.k):
        counts = np.bincount(proto.perturb(np.full(n, v), rng=rng), minlength=proto.K)
        p = proto.report_channel()[v]
        assert np.all(np.abs(counts / n - p) <= 5 * np.sqrt(p * (1 - p) / n)), v


def test_bad_input_and_size():
    with pytest.raises(ValueError, match="'k'"):
        ll.protocol("HR", k=1, eps=1.0)
    with pytest.raises(ValueError, match="'eps'"):
        ll.protocol("HR", k=4, eps=-1.0)
    proto = ll.protocol("hadamard-response", k=4, eps=1.0)
    with pytest.raises(ValueError, match="reports"):
        proto.support_counts(np.array([proto.K]))
    assert proto.report_nbytes == 1 and ll.protocol("HR", k=300, eps=1.0).report_nbytes == 2


def test_mga_reports_support_every_target_and_what_their_columns_span():
    """The outputs supporting all of T are the rows orthogonal to the targets' columns, so they
    also support every value whose column is a XOR of targets' columns (a target-free extra
    gain the closed form accounts for), and no other value more than half the time."""
    proto = ll.protocol("HR", k=8, eps=1.0)
    targets = [5, 6, 7]  # columns 6, 7, 8; 6 XOR 7 = 1 is value 0's column
    support = atk.expected_support(proto, "MGA", targets)
    assert np.all(support[targets] == 1.0) and support[0] == 1.0
    assert np.all(support[1:5] == 0.5)
    rec = atk.craft_reports(proto, "MGA", targets, 100, rng=0)
    H = sylvester(proto.K)
    assert np.all(H[rec][:, np.array(targets) + 1] == 1)


def test_detection_refuses_it():
    proto = ll.protocol("HR", k=8, eps=1.0)
    with pytest.raises(ValueError, match="not be independent"):
        detect_fake_reports(proto, np.zeros(10, dtype=np.int64))
