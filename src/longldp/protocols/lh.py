"""Local-hashing oracles, one-shot (BLH, OLH) and memoized (BiLOLOHA, OLOLOHA).

Each user draws one hash function H: [k] → [g] and keeps it forever; the report is the hash
function's id and a randomized bucket. It supports every v with H(v) = bucket, so P0 = 1/g over
the draw of H. LOLOHA runs L-GRR over the g buckets and memoizes per *bucket*, so a user holds
at most g memos whatever the domain ([ARC23] §4).

Hash family: ((a·x + b) mod P) mod g with P = 2³¹ − 1, a ∈ [1, P), b ∈ [0, P). By default
every user has its own (a, b), packed in the report as ``hash_id = a·2³¹ + b``. With
``hash_pool = m`` users pick one of m public functions (``hash_id`` = its index): aggregation
is then O(m·k) instead of O(n·k), at the price of the variance in
:func:`longldp.privacy.pool_extra_variance` (DESIGN §3.1).

References: [WAN17] §4.4 (BLH, OLH); [ARC23] (LOLOHA); DESIGN §3.1-3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.protocols._memo import MemoStore
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    bytes_to_uint,
    grr_round,
    min_bytes,
    row_slices,
    set_derived,
    uint_to_bytes,
)

P = privacy.HASH_PRIME
_SHIFT = 31
_MASK = (1 << _SHIFT) - 1
REPORT_DTYPE = np.dtype([("hash_id", "<i8"), ("bucket", "<i8")])


def universal_hash(a: NDArray, b: NDArray, x: NDArray, g: int) -> NDArray[np.int64]:
    """((a·x + b) mod P) mod g, broadcasting; a, x < 2³¹ so a·x fits in int64."""
    return ((a * x + b) % P) % g


class _LocalHashing(FrequencyOracle):
    """Shared machinery of the hashing oracles; subclasses set ``g`` and the chain."""

    g: int
    hash_pool: int | None
    pool_seed: int

    @property
    def P0(self) -> float:
        """1/g: a user whose value is not v supports v when H collides them (probability 1/g)."""
        return 1.0 / self.g

    def single_report_epsilon(self) -> float:
        """Given H, a report is the L-GRR chain over g buckets: ln[P1 (g−1)/(1 − P1)]."""
        return privacy.round_up(math.log(self.P1 * (self.g - 1) / (1 - self.P1)))

    def first_round_epsilon(self) -> float:
        return privacy.round_up(math.log(self.p1 / self.q1))

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """Exact variance; with a hash pool ``f`` must be the whole length-k distribution and
        the pool's extra variance (DESIGN §3.1) is added."""
        base = super().variance(n, f)
        if self.hash_pool is None:
            return base
        freqs = np.asarray(f, dtype=np.float64)
        if freqs.shape != (self.k,):
            raise ValueError(
                f"{self.name}: with a hash pool 'f' must be the whole distribution (length "
                f"{self.k}), since collisions couple the values; got shape {freqs.shape}."
            )
        return base + privacy.pool_extra_variance(freqs, self.g, self.hash_pool)

    # -- hash functions
    def _check_hashing(self) -> None:
        self._validate_common()
        check.integer(self.name, "k", self.k, minimum=2, maximum=P - 1)
        if self.hash_pool is not None:
            check.integer(self.name, "hash_pool", self.hash_pool, minimum=1)
            check.integer(self.name, "pool_seed", self.pool_seed, minimum=0)

    def pool_functions(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The public pool's (a, b) arrays, derived from ``pool_seed``."""
        if self.hash_pool is None:
            raise ValueError(f"{self.name}: no hash pool is configured ('hash_pool' is None).")
        gen = np.random.default_rng(np.random.SeedSequence([self.pool_seed, 0x10CA1]))
        return gen.integers(1, P, self.hash_pool), gen.integers(0, P, self.hash_pool)

    def _hash_params(self, hash_id: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
        if self.hash_pool is None:
            return hash_id >> _SHIFT, hash_id & _MASK
        a, b = self.pool_functions()
        return a[hash_id], b[hash_id]

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        if self.hash_pool is not None:
            return {"hash_id": np.asarray(rng.integers(0, self.hash_pool, size=m), np.int64)}
        a = np.asarray(rng.integers(1, P, size=m), np.int64)
        b = np.asarray(rng.integers(0, P, size=m), np.int64)
        return {"hash_id": (a << _SHIFT) | b}

    def _memo_key(self, values: NDArray[np.int64], state: dict) -> NDArray[np.int64]:
        a, b = self._hash_params(state["hash_id"])
        return universal_hash(a, b, values, self.g)

    def _memo_store(self, n_users: int) -> MemoStore:
        return MemoStore(n_users, self.g, (), np.int64)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        return grr_round(keys, self.g, self.p1, rng)

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        out = np.empty(payload.shape[0], dtype=REPORT_DTYPE)
        out["hash_id"] = state["hash_id"]
        out["bucket"] = payload
        return out

    # -- server
    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = np.asarray(reports)
        if rep.dtype != REPORT_DTYPE or rep.ndim != 1:
            raise ValueError(
                f"{self.name}: 'reports' must be a 1-D array of dtype {REPORT_DTYPE}; "
                f"got {rep.dtype} {rep.shape}."
            )
        check.domain_values(self.name, rep["bucket"], self.g, "reports['bucket']")
        ids = rep["hash_id"]
        if self.hash_pool is not None:
            check.domain_values(self.name, ids, self.hash_pool, "reports['hash_id']")
        elif ids.size:
            a, b = ids >> _SHIFT, ids & _MASK
            if np.any((a < 1) | (a >= P) | (b >= P)):
                raise ValueError(f"{self.name}: 'reports' holds an invalid hash_id.")
        return rep

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """C_v = #{u : H_u(v) = bucket_u}, hashing users × values in chunks (no per-user loop);
        with a pool, a bucket histogram per function then one gather: O(m·k)."""
        rep = self._check_reports(reports)
        values = np.arange(self.k, dtype=np.int64)
        if self.hash_pool is not None:
            a, b = self.pool_functions()
            per_fn = np.bincount(
                rep["hash_id"] * self.g + rep["bucket"], minlength=self.hash_pool * self.g
            ).reshape(self.hash_pool, self.g)
            table = universal_hash(a[:, None], b[:, None], values[None, :], self.g)
            return np.take_along_axis(per_fn, table, axis=1).sum(axis=0)
        total = np.zeros(self.k, dtype=np.int64)
        a, b = self._hash_params(rep["hash_id"])
        for rows in row_slices(rep.size, self.k):
            hashed = universal_hash(a[rows, None], b[rows, None], values[None, :], self.g)
            total += (hashed == rep["bucket"][rows, None]).sum(axis=0)
        return total

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """Per-user hashing: C_v = Bin(n_v, P1) + Bin(n − n_v, 1/g), independent over v (the
        exact law when hash values of distinct inputs are independent and uniform, DESIGN §6).
        With a pool: users spread over the m public functions, each function's buckets drawn
        as a GRR histogram, then the same gather as the server: exact for that pool."""
        if self.hash_pool is None:
            return rng.binomial(counts, self.P1) + rng.binomial(n - counts, 1.0 / self.g)
        m, g = self.hash_pool, self.g
        a, b = self.pool_functions()
        values = np.arange(self.k, dtype=np.int64)
        table = universal_hash(a[:, None], b[:, None], values[None, :], g)  # (m, k)
        per_fn_value = rng.multinomial(counts, np.full(m, 1.0 / m)).T  # (m, k) users
        true_buckets = np.zeros((m, g), dtype=np.int64)
        np.add.at(true_buckets, (np.arange(m)[:, None], table), per_fn_value)
        q = (1 - self.P1) / (g - 1)
        kept = rng.binomial(true_buckets, self.P1 - q)
        n_rest = true_buckets.sum(axis=1) - kept.sum(axis=1)
        reported = kept + rng.multinomial(n_rest, np.full(g, 1.0 / g))
        return np.take_along_axis(reported, table, axis=1).sum(axis=0)

    def _encode(self, reports: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(reports)
        id_width = 8 if self.hash_pool is None else min_bytes(self.hash_pool - 1)
        return np.hstack(
            [
                uint_to_bytes(rep["hash_id"], id_width),
                uint_to_bytes(rep["bucket"], min_bytes(self.g - 1)),
            ]
        )

    def _decode(self, rows: NDArray[np.uint8]) -> NDArray:
        id_width = rows.shape[1] - min_bytes(self.g - 1)
        out = np.empty(rows.shape[0], dtype=REPORT_DTYPE)
        out["hash_id"] = bytes_to_uint(rows[:, :id_width])
        out["bucket"] = bytes_to_uint(rows[:, id_width:])
        return self._check_reports(out)


def _set_chain(obj: object, g: int, p1: float, p2: float) -> None:
    q2 = (1 - p2) / (g - 1) if p2 < 1 else 0.0
    set_derived(obj, g=g, p1=p1, q1=(1 - p1) / (g - 1), p2=p2, q2=q2)


@dataclass(frozen=True)
class BLH(OneShot, _LocalHashing):
    """Binary local hashing: g = 2, GRR over the two buckets at ε ([WAN17] §4.4)."""

    k: int
    eps: float
    hash_pool: int | None = None
    pool_seed: int = 0
    g: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    name: ClassVar[str] = "BLH"

    def __post_init__(self) -> None:
        self._check_hashing()
        _set_chain(self, 2, privacy.grr_probabilities(self.eps, 2)[0], 1.0)


@dataclass(frozen=True)
class OLH(OneShot, _LocalHashing):
    """Optimized local hashing: g = the integer minimising V* (≈ e^ε + 1) ([WAN17] §4.4)."""

    k: int
    eps: float
    hash_pool: int | None = None
    pool_seed: int = 0
    g: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    name: ClassVar[str] = "OLH"

    def __post_init__(self) -> None:
        self._check_hashing()
        g = privacy.olh_optimal_g(self.eps)
        _set_chain(self, g, privacy.grr_probabilities(self.eps, g)[0], 1.0)


@dataclass(frozen=True)
class _LOLOHA(_LocalHashing):
    k: int
    eps_perm: float
    eps_1: float
    calibration: str = "exact"
    hash_pool: int | None = None
    pool_seed: int = 0
    g: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    longitudinal: ClassVar[bool] = True

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return grr_round(payload, self.g, self.p2, rng)

    def _set_g(self, g: int) -> None:
        self._check_hashing()
        set_derived(self, calibration=self.calibration.lower())
        p1 = privacy.grr_probabilities(self.eps_perm, g)[0]
        _set_chain(self, g, p1, privacy.lgrr_p2(g, self.eps_perm, self.eps_1, self.calibration))


@dataclass(frozen=True)
class BiLOLOHA(_LOLOHA):
    """LOLOHA with g = 2: L-GRR over two hash buckets, at most two memos per user ([ARC23])."""

    name: ClassVar[str] = "BiLOLOHA"

    def __post_init__(self) -> None:
        self._set_g(2)


@dataclass(frozen=True)
class OLOLOHA(_LOLOHA):
    """LOLOHA with g the integer argmin of V* (:func:`longldp.privacy.loloha_optimal_g`)."""

    name: ClassVar[str] = "OLOLOHA"

    def __post_init__(self) -> None:
        self._set_g(privacy.loloha_optimal_g(self.eps_perm, self.eps_1, self.calibration))
