"""Randomness for clients and simulations.

Simulation passes a seeded :class:`numpy.random.Generator`. A deployed client must not: a
predictable generator lets the server undo the randomization, which breaks LDP. By default a
client draws from the operating system's cryptographic source (``os.urandom``) through
:class:`SecureRandom`, which offers the two methods the protocols use.
"""

from __future__ import annotations

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
    return 1 if size is None else int(np.prod(size))


class SecureRandom:
    """Uniform draws from ``os.urandom`` (the OS CSPRNG), shaped like NumPy's Generator API."""

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]:
        """Floats uniform on [0, 1) with 53 random bits each."""
        words = np.frombuffer(os.urandom(8 * _count(size)), dtype=np.uint64) >> np.uint64(11)
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
            raise ValueError(f"SecureRandom.integers: 'high' must be > 'low'; got {low}, {high}.")
        limit = _TWO64 - _TWO64 % span
        n = _count(size)
        words: list[int] = []
        while len(words) < n:
            raw = np.frombuffer(os.urandom(8 * (n - len(words))), dtype=np.uint64)
            words.extend(int(w) for w in raw if int(w) < limit)
        out = np.array([low + w % span for w in words], dtype=np.int64)
        return out.reshape(() if size is None else size)


def as_random_source(rng: RandomSource | int | np.random.SeedSequence | None) -> RandomSource:
    """Normalize ``rng``: a Generator/SecureRandom passes through, a seed builds a Generator.

    ``None`` gives a fresh OS-seeded Generator: fine for simulation, but clients use
    :class:`SecureRandom` instead (see :meth:`FrequencyOracle.client`).
    """
    if isinstance(rng, (np.random.Generator, SecureRandom)):
        return rng
    return np.random.default_rng(rng)
