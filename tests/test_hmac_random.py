"""HmacRandom: a deterministic, keyed stream with SecureRandom's draws."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest

from longldp.protocols import HmacRandom

KEY = bytes(range(32))


def test_stream_is_hmac_of_context_and_counter():
    rng = HmacRandom(KEY, b"ctx")
    block0 = hmac.new(KEY, b"ctx" + (0).to_bytes(8, "big"), hashlib.sha256).digest()
    block1 = hmac.new(KEY, b"ctx" + (1).to_bytes(8, "big"), hashlib.sha256).digest()
    words = np.frombuffer(block0 + block1, dtype="<u8")
    expected = (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
    np.testing.assert_array_equal(rng.random(3), expected[:3])
    np.testing.assert_array_equal(rng.random(1), expected[3:4])  # the buffer carries over
    np.testing.assert_array_equal(rng.random(), expected[4])


def test_deterministic_per_key_and_context():
    a = HmacRandom(KEY, b"one").integers(0, 1000, 50)
    np.testing.assert_array_equal(a, HmacRandom(KEY, b"one").integers(0, 1000, 50))
    assert not np.array_equal(a, HmacRandom(KEY, b"two").integers(0, 1000, 50))
    assert not np.array_equal(a, HmacRandom(bytes(32), b"one").integers(0, 1000, 50))


def test_draws_are_uniform():
    rng = HmacRandom(KEY, b"uniform")
    u = rng.random(20_000)
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / u.size)
    counts = np.bincount(rng.integers(3, 8, size=(100, 100)).ravel() - 3, minlength=5)
    assert counts.sum() == 10_000
    # 5 standard errors of a binomial(10000, 1/5) count
    assert np.all(np.abs(counts - 2000) < 5 * np.sqrt(10_000 * 0.2 * 0.8))


def test_bad_keys_refused():
    with pytest.raises(ValueError, match="at least 16 bytes"):
        HmacRandom(b"short", b"")
    with pytest.raises(ValueError, match="'context' must be bytes"):
        HmacRandom(KEY, "text")  # type: ignore[arg-type]
