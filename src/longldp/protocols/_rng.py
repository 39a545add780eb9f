"""Randomness for clients and simulations.

Simulation passes a seeded :class:`numpy.random.Generator`. A deployed client must not: a
predictable generator lets the server undo the randomization, which breaks LDP. By default a
client draws from the operating system's cryptographic source (``os.urandom``) through
:class:`SecureRandom`, which offers the two methods the protocols use.

:class:`HmacRandom` offers the same two methods over a deterministic stream,
HMAC-SHA256(key, context ‖ counter): a device derives its round-1 (permanent) randomization from
a secret it keeps, so that losing its memo store reproduces the same memos instead of drawing
new ones (what the RAPPOR reference clients do for the permanent randomized response of
Erlingsson, Pihur and Korolova, CCS 2014). HMAC-SHA256 is a pseudorandom function, so for a secret
unknown to the server the stream is indistinguishable from uniform bytes and each memo has the
protocol's exact round-1 distribution; different contexts give independent streams.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

_TWO64 = 1 << 64


class RandomSource(Protocol):
    """The part of :class:`numpy.random.Generator` that client-side randomization uses."""

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]: ...

    def integers(
        self, low: int, high: int | None = None, size: int | tuple[int, ...] | None = None
    ) -> NDArray[np.int64]: ...


def _count(size: int | tuple[int, ...] | None) -> int:
    if size is None:
        return 1
    return int(size) if isinstance(size, (int, np.integer)) else math.prod(int(s) for s in size)


class _ByteRandom:
    """Uniform draws from a byte source, shaped like NumPy's Generator API.

    A float is one 8-byte little-endian word w: (w >> 11) · 2⁻⁵³. An integer of [low, high) is
    low + w mod (high − low) for the first word w below the largest multiple of the span under
    2⁶⁴ (rejection removes the modulo bias).
    """

    def _bytes(self, n: int) -> bytes:
        raise NotImplementedError

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]:
        """Floats uniform on [0, 1) with 53 random bits each."""
        words = np.frombuffer(self._bytes(8 * _count(size)), dtype="<u8") >> np.uint64(11)
        out = words.astype(np.float64) * 2.0**-53
        return out.reshape(() if size is None else size)

    def integers(
        self, low: int, high: int | None = None, size: int | tuple[int, ...] | None = None
    ) -> NDArray[np.int64]:
        """Integers uniform on [low, high), exactly (rejection removes the modulo bias)."""
        if high is None:
            low, high = 0, low
        span = int(high) - int(low)
        if span <= 0:
            raise ValueError(
                f"{type(self).__name__}.integers: 'high' must be > 'low'; got {low}, {high}."
            )
        limit = _TWO64 - _TWO64 % span
        n = _count(size)
        words: list[int] = []
        while len(words) < n:
            raw = np.frombuffer(self._bytes(8 * (n - len(words))), dtype="<u8")
            words.extend(int(w) for w in raw if int(w) < limit)
        out = np.array([int(low) + w % span for w in words], dtype=np.int64)
        return out.reshape(() if size is None else size)


class SecureRandom(_ByteRandom):
    """Uniform draws from ``os.urandom`` (the OS CSPRNG), shaped like NumPy's Generator API."""

    def _bytes(self, n: int) -> bytes:
        return os.urandom(n)


class HmacRandom(_ByteRandom):
    """A deterministic stream: block i = HMAC-SHA256(key, context ‖ i as 8 bytes big-endian).

    Blocks i = 0, 1, 2, … are concatenated and consumed in order by :meth:`random` and
    :meth:`integers` (same conversions as :class:`SecureRandom`). Equal (key, context) give
    equal draws; keep ``key`` secret (32 bytes from the OS) or the draws are predictable.
    """

    def __init__(self, key: bytes, context: bytes):
        if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
            raise ValueError("HmacRandom: 'key' must be at least 16 bytes (use 32 from the OS).")
        if not isinstance(context, (bytes, bytearray)):
            raise ValueError(f"HmacRandom: 'context' must be bytes; got {type(context).__name__}.")
        self._key = bytes(key)
        self._context = bytes(context)
        self._counter = 0
        self._buffer = b""

    def _bytes(self, n: int) -> bytes:
        need = n - len(self._buffer)
        if need > 0:
            blocks = []
            for _ in range(-(-need // 32)):
                msg = self._context + self._counter.to_bytes(8, "big")
                blocks.append(hmac.new(self._key, msg, hashlib.sha256).digest())
                self._counter += 1
            self._buffer += b"".join(blocks)
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def as_random_source(rng: RandomSource | int | np.random.SeedSequence | None) -> RandomSource:
    """Normalize ``rng``: a Generator/SecureRandom passes through, a seed builds a Generator.

    ``None`` gives a fresh OS-seeded Generator: fine for simulation, but clients use
    :class:`SecureRandom` instead (see :meth:`FrequencyOracle.client`).
    """
    if isinstance(rng, (np.random.Generator, _ByteRandom)):
        return rng
    return np.random.default_rng(rng)
