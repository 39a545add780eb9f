"""Local-hashing oracles, one-shot (BLH, OLH) and memoized (BiLOLOHA, OLOLOHA).

Each user draws one hash function H: [k] → [g] and keeps it forever; the report is the hash
function's id and a randomized bucket. It supports every v with H(v) = bucket, so P0 = 1/g over
the draw of H. LOLOHA runs L-GRR over the g buckets and memoizes per *bucket*, so a user holds
at most g memos whatever the domain ([ARC23] §4).

Hash family: z = s + (x + 1)·γ mixed by the xor-shift-multiply rounds of the SplitMix64
finalizer (Steele, Lea and Flood, OOPSLA 2014), whose top 32 bits are mapped to [0, g) by a
multiply-shift; s is a 63-bit seed and γ = 2⁶⁴/φ.
We first used the 2-universal ((a·x + b) mod P) mod g, but it is only pairwise independent:
for g > 2, H(v) and H(v + 1) are correlated given H(w), which couples the supports of adjacent
values (a range query's variance came out 15% above the count-level law) and breaks the pool
variance formula. A fully mixed 64-bit hash behaves as independent uniform buckets, which is
what docs/math.md §2.4 and docs/design.md §4
assume. Privacy does not depend on it: given H the report is L-GRR
over g buckets whatever H is. By default every user has its own seed (``hash_id``, 8 bytes in
the report). With ``hash_pool = m`` users pick one of m public seeds (``hash_id`` = its index):
aggregation is then O(m·k) instead of O(n·k), at the price of the variance in
:func:`longldp.privacy.pool_extra_variance` (docs/math.md §2.4).

References: [WAN17] §4.4 (BLH, OLH); [ARC23] (LOLOHA); docs/math.md §2.3–§2.4, §3.4.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.channels import grr_matrix
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._memo import DenseMemoStore, MemoStore, PopulationMemo, make_memo_store
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    PopulationStep,
    ReportKind,
    bytes_to_uint,
    grr_round,
    min_bytes,
    packed_column_sums,
    row_slices,
    set_derived,
    uint_to_bytes,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import ExactChannel, HashFamily, hash_channel

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_SEED_LIMIT = 1 << 63
REPORT_DTYPE = np.dtype([("hash_id", "<i8"), ("bucket", "<i8")])
#: Largest per-population table (bytes) of LOLOHA's per-user bucket masks kept by the per-user
#: engine; larger populations × g × k hash at every report instead (same law, slower).
HASH_CACHE_LIMIT = 256 * 2**20


def mix_hash(seed: NDArray, x: NDArray, g: int) -> NDArray[np.int64]:
    """H_seed(x) = ⌊top32(mix(seed + (x + 1)·γ)) · g / 2³²⌋, broadcasting.

    uint64 arithmetic wraps mod 2⁶⁴. The last step maps the top 32 mixed bits to [0, g) by a
    multiply-shift instead of a division (bias below g/2³²), computed in place to keep the
    users × values temporaries few.
    """
    with np.errstate(over="ignore"):
        z = np.asarray(x).astype(np.uint64) + np.uint64(1)
        z = z * _GAMMA + np.asarray(seed).astype(np.uint64)
        z ^= z >> np.uint64(30)
        z *= _MIX1
        z ^= z >> np.uint64(27)
        z *= _MIX2
        z >>= np.uint64(32)  # the well-mixed top half
        z *= np.uint64(g)
        z >>= np.uint64(32)
    return z.astype(np.int64)


#: BLH's and OLH's rows of docs/client-spec.md (their JavaScript family is lh.js).
ONE_SHOT_CLIENT = ClientSpec(
    family="lh",
    chain="GRR over g buckets at ε (BLH: g = 2; OLH: g = G_OLH(ε))",
    round2="1, 0",
    eps_1="ρ(ln(P1(g − 1)/N1))",
    eps_perm="ρ(ln(p1/q1))",
    state="hash id: an integer in [0, 2⁶³) (no pool) or [0, m) (`hash_pool` = m)",
    memo_key=(
        "H_s(v) over g buckets (wire-format §3), s = the hash id, or pool seed[id] (appendix A)"
    ),
    round1="y = GRR(key, g, p1)",
    draws2="none (one-shot)",
    derived=("g",),
)
#: LOLOHA's rows: L-GRR over the g buckets.
CHAIN_CLIENT = dataclasses.replace(
    ONE_SHOT_CLIENT,
    chain="GRR over g at a",
    round2="p2 = D(P_cal(g, a, b)), q2 = (1 − p2)/(g − 1)",
    draws2="GRR(y, g, p2)",
)


class HashedReports(ReportKind):
    """(a hash function of a public family, a bucket of [0, g)): local hashing. The report
    supports every v with H(v) = bucket; given H it is the chain over the g buckets."""

    name: ClassVar[str] = "hashed"
    statistic: ClassVar[str] = "symbols"

    def hash_family(self, proto: Any) -> HashFamily:
        return HashFamily(proto, proto.hash_pool, proto.g)

    def output_space_size(self, proto: Any) -> int | None:
        family = self.hash_family(proto)
        return None if family.size is None else family.size * family.range

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """Given H, Pr[(H, y) | v] = Pr[y | H(v)] of GRR(p1) then GRR(p2) over the g buckets."""
        r1 = grr_matrix(proto.p1, proto.g)
        both = r1 @ grr_matrix(proto.p2, proto.g)
        return hash_channel(proto, self.hash_family(proto), (both, r1), rng)

    def width(self, proto: Any) -> int:
        return int(proto.g)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return np.asarray(reports["bucket"], dtype=np.int64)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.int64]:
        """H_u(v): the bucket each client's function gives each value."""
        vals = np.atleast_1d(np.asarray(values, dtype=np.int64))
        return proto.hash_buckets(np.asarray(reports["hash_id"])[:, None], vals[None, :])

    def value_table(self, proto: Any) -> NDArray[np.int64] | None:
        ids = self.hash_family(proto).ids()
        if ids is None:
            return None
        return proto.hash_buckets(ids[:, None], np.arange(proto.k, dtype=np.int64)[None, :])

    def attack_kind(self, proto: Any) -> str:
        return "hashed"


#: The report kind of the local-hashing oracles.
HASHED = HashedReports()


class _LocalHashing(FrequencyOracle):
    """Shared machinery of the hashing oracles; subclasses set ``g`` and the chain."""

    report_kind: ClassVar[ReportKind] = HASHED

    g: int
    hash_pool: int | None
    pool_seed: int

    @functools.cached_property
    def P0(self) -> float:
        """1/g: a user whose value is not v supports v when H collides them (probability 1/g)."""
        return 1.0 / self.g

    def single_report_epsilon(self) -> float:
        """Given H, a report is the L-GRR chain over g buckets: ln[P1 (g−1)/(1 − P1)]."""
        N1, _ = privacy.chain_nonsupport(self.p1, self.q1, self.p2, self.q2)
        return privacy.round_up(math.log(self.P1 * (self.g - 1) / N1))

    def first_round_epsilon(self) -> float:
        return privacy.round_up(math.log(self.p1 / self.q1))

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """Exact variance; with a hash pool ``f`` must be the whole length-k distribution and
        the pool's extra variance (docs/math.md §2.4) is added."""
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

    def first_round_variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """V1 with R0 = 1/g; a hash pool's extra variance is fixed for all reports, so it is
        part of V1 too."""
        base = super().first_round_variance(n, f)
        if self.hash_pool is None or not self.longitudinal:
            return base
        return base + self.variance(n, f) - super().variance(n, f)

    # -- hash functions
    def _check_hashing(self) -> None:
        self._validate_common()
        if self.hash_pool is not None:
            check.integer(self.name, "hash_pool", self.hash_pool, minimum=1)
            check.integer(self.name, "pool_seed", self.pool_seed, minimum=0)

    def pool_seeds(self) -> NDArray[np.int64]:
        """The public pool's hash seeds, derived from ``pool_seed``."""
        if self.hash_pool is None:
            raise ValueError(f"{self.name}: no hash pool is configured ('hash_pool' is None).")
        gen = np.random.default_rng(np.random.SeedSequence([self.pool_seed, 0x10CA1]))
        return gen.integers(0, _SEED_LIMIT, self.hash_pool, dtype=np.int64)

    def _seeds(self, hash_id: NDArray[np.int64]) -> NDArray[np.int64]:
        return hash_id if self.hash_pool is None else self.pool_seeds()[hash_id]

    def hash_buckets(self, hash_ids: ArrayLike, values: ArrayLike) -> NDArray[np.int64]:
        """H_id(v) for report hash ids (per-user seeds or pool indices), broadcasting."""
        ids = np.asarray(hash_ids, dtype=np.int64)
        return mix_hash(self._seeds(ids), np.asarray(values, dtype=np.int64), self.g)

    def hash_records(self, hash_ids: ArrayLike, buckets: ArrayLike) -> NDArray:
        """Report records (hash id, bucket)."""
        ids = np.asarray(hash_ids, dtype=np.int64)
        out = np.empty(ids.size, dtype=REPORT_DTYPE)
        out["hash_id"] = ids.ravel()
        out["bucket"] = np.asarray(buckets, dtype=np.int64).ravel()
        return out

    def new_hash_ids(self, m: int, rng: RandomSource) -> NDArray[np.int64]:
        """The hash ids m new clients draw (their per-user state)."""
        return self._new_state(m, rng)["hash_id"]

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        high = _SEED_LIMIT if self.hash_pool is None else self.hash_pool
        return {"hash_id": np.asarray(rng.integers(0, high, size=m), np.int64)}

    def _memo_key(self, values: NDArray[np.int64], state: dict) -> NDArray[np.int64]:
        return self.hash_buckets(state["hash_id"], values)

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.g, (), np.int64)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        return grr_round(keys, self.g, self.p1, rng)

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        return self.hash_records(state["hash_id"], payload)

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
        elif ids.size and ids.min() < 0:
            raise ValueError(f"{self.name}: 'reports' holds a negative hash_id.")
        return rep

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """C_v = #{u : H_u(v) = bucket_u}, hashing users × values in chunks (no per-user loop);
        with a pool, a bucket histogram per function then one gather: O(m·k)."""
        rep = self._check_reports(reports)
        values = np.arange(self.k, dtype=np.int64)
        if self.hash_pool is not None:
            per_fn = np.bincount(
                rep["hash_id"] * self.g + rep["bucket"], minlength=self.hash_pool * self.g
            ).reshape(self.hash_pool, self.g)
            table = mix_hash(self.pool_seeds()[:, None], values[None, :], self.g)
            return np.take_along_axis(per_fn, table, axis=1).sum(axis=0)
        total = np.zeros(self.k, dtype=np.int64)
        seeds, buckets = rep["hash_id"], rep["bucket"]
        # Small blocks keep the uint64 temporaries in cache (measured 2x over 4M-cell blocks).
        step = max(1, (1 << 17) // self.k)
        for start in range(0, rep.size, step):
            block = slice(start, start + step)
            hashed = mix_hash(seeds[block, None], values[None, :], self.g)
            total += np.count_nonzero(hashed == buckets[block, None], axis=0)
        return total

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """Per-user hashing: C_v = Bin(n_v, P1) + Bin(n − n_v, 1/g), independent over v (the
        exact law when hash values of distinct inputs are independent and uniform, design §4).
        With a pool: users spread over the m public functions, each function's buckets drawn
        as a GRR histogram, then the same gather as the server: exact for that pool."""
        if self.hash_pool is None:
            return rng.binomial(counts, self.P1) + rng.binomial(n - counts, 1.0 / self.g)
        m, g = self.hash_pool, self.g
        values = np.arange(self.k, dtype=np.int64)
        table = mix_hash(self.pool_seeds()[:, None], values[None, :], g)  # (m, k)
        per_fn_value = rng.multinomial(counts, np.full(m, 1.0 / m)).T  # (m, k) users
        true_buckets = np.zeros((m, g), dtype=np.int64)
        np.add.at(true_buckets, (np.arange(m)[:, None], table), per_fn_value)
        q = (1 - self.P1) / (g - 1)
        kept = rng.binomial(true_buckets, self.P1 - q)
        n_rest = true_buckets.sum(axis=1) - kept.sum(axis=1)
        reported = kept + rng.multinomial(n_rest, np.full(g, 1.0 / g))
        return np.take_along_axis(reported, table, axis=1).sum(axis=0)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        if self.hash_pool is not None:
            return super()._sample_support_batch(counts, totals, rng)
        return rng.binomial(counts, self.P1) + rng.binomial(totals - counts, 1.0 / self.g)

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(reports)
        id_width = 8 if self.hash_pool is None else min_bytes(self.hash_pool - 1)
        return np.hstack(
            [
                uint_to_bytes(rep["hash_id"], id_width),
                uint_to_bytes(rep["bucket"], min_bytes(self.g - 1)),
            ]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        id_width = rows.shape[1] - min_bytes(self.g - 1)
        out = np.empty(rows.shape[0], dtype=REPORT_DTYPE)
        out["hash_id"] = bytes_to_uint(rows[:, :id_width])
        out["bucket"] = bytes_to_uint(rows[:, id_width:])
        return self._check_reports(out)


def _set_chain(obj: object, g: int, p1: float, p2: float) -> None:
    q2 = (1 - p2) / (g - 1) if p2 < 1 else 0.0
    set_derived(obj, g=g, p1=p1, q1=(1 - p1) / (g - 1), p2=p2, q2=q2)


@dataclass(frozen=True)
class _OneShotLH(OneShot, _LocalHashing):
    k: int
    eps: float
    hash_pool: int | None = None
    pool_seed: int = 0
    g: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)


@dataclass(frozen=True)
class BLH(_OneShotLH):
    """Binary local hashing: g = 2, GRR over the two buckets at ε ([WAN17] §4.4)."""

    name: ClassVar[str] = "BLH"
    #: The device's hash seed (or pool index), kept for life and sent in every report.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HASH_SEED)
    wire_id: ClassVar[int] = 4
    client_spec: ClassVar[ClientSpec | None] = ONE_SHOT_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 50, "eps": 1.0}, (7, 7, 49)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)

    def __post_init__(self) -> None:
        self._check_hashing()
        _set_chain(self, 2, privacy.grr_probabilities(self.eps, 2)[0], 1.0)


@dataclass(frozen=True)
class OLH(_OneShotLH):
    """Optimized local hashing: g = the integer minimising V* (≈ e^ε + 1) ([WAN17] §4.4)."""

    name: ClassVar[str] = "OLH"
    #: The device's hash seed (or pool index), kept for life and sent in every report.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HASH_SEED)
    wire_id: ClassVar[int] = 5
    client_spec: ClassVar[ClientSpec | None] = ONE_SHOT_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 50, "eps": 3.0}, (1, 2, 1)),
        VectorCase(
            {"k": 50, "eps": 3.0, "hash_pool": 16, "pool_seed": 3}, (4, 4, 30), suffix="pool"
        ),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)

    def __post_init__(self) -> None:
        self._check_hashing()
        g = privacy.olh_optimal_g(self.eps)
        _set_chain(self, g, privacy.grr_probabilities(self.eps, g)[0], 1.0)


@dataclass(frozen=True)
class _LOLOHA(_LocalHashing):
    """LOLOHA's memo key is the user's bucket H_u(v) (math §3.4)."""

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
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return grr_round(payload, self.g, self.p2, rng)

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray[np.int64]:
        """Round 2 per user, then C_v = #{u : H_u(v) = y_u} with each user's H_u kept for all
        calls, as the real client does: exact jointly over v and over time (a non-holder of v
        supports it at every report whose bucket is H_u(v), a fixed bucket, so its supports
        are correlated over time). Each user's buckets of the whole domain are hashed once and
        kept as g bit-packed masks of {v : H_u(v) = b}; a call gathers the mask of each user's
        reported bucket and sums columns, O(n·k/8). When the masks would exceed
        :data:`HASH_CACHE_LIMIT` bytes, or with a hash pool, the reports are built and
        aggregated as the server does (exact too, O(n·k) hashing per call)."""
        buckets = self._round2(memos, rng)
        masks = self._bucket_masks(step.memo, step.users, step.state)
        if masks is None:
            return self.support_counts(self._make_reports(buckets, step.state))
        rows = np.take(masks.reshape(-1, masks.shape[2]), step.users * self.g + buckets, axis=0)
        return packed_column_sums(rows, self.k)

    def _bucket_masks(
        self, memo: PopulationMemo, who: NDArray[np.int64], state: dict
    ) -> NDArray[np.uint8] | None:
        """masks[u, b] = packbits(H_u(v) = b for v in [0, k)), filled once per user (lazily)."""
        nbytes = (self.k + 7) // 8
        if self.hash_pool is not None or memo.n_users * self.g * nbytes > HASH_CACHE_LIMIT:
            return None
        if "bucket_masks" not in memo.cache:
            memo.cache["bucket_masks"] = np.zeros((memo.n_users, self.g, nbytes), dtype=np.uint8)
            memo.cache["has_masks"] = np.zeros(memo.n_users, dtype=bool)
        masks, done = memo.cache["bucket_masks"], memo.cache["has_masks"]
        need = np.flatnonzero(~done[who])
        if need.size:
            ids = state["hash_id"][need]
            values = np.arange(self.k, dtype=np.int64)[None, :]
            buckets = np.arange(self.g, dtype=np.int64)[None, :, None]
            for rows in row_slices(need.size, self.g * self.k):
                hashed = self.hash_buckets(ids[rows, None], values)  # (m, k): H_u(v)
                masks[who[need[rows]]] = np.packbits(hashed[:, None, :] == buckets, axis=2)
            done[who[need]] = True
        return masks

    def _set_g(self, g: int) -> None:
        self._check_hashing()
        set_derived(self, calibration=self.calibration.lower())
        p1 = privacy.grr_probabilities(self.eps_perm, g)[0]
        _set_chain(self, g, p1, privacy.lgrr_p2(g, self.eps_perm, self.eps_1, self.calibration))

    def ledger_keys(self, trajectories: NDArray, state: Any = None) -> NDArray:
        """H_u(v) of every report when ``state["hash_id"]`` gives the users' hash ids; without
        it the values, whose distinct count bounds the distinct buckets from above."""
        x = np.asarray(trajectories)
        if state is None:
            return x
        ids = np.asarray(state["hash_id"], dtype=np.int64)
        return self.hash_buckets(ids[:, None], x)


@dataclass(frozen=True)
class BiLOLOHA(_LOLOHA):
    """LOLOHA with g = 2: L-GRR over two hash buckets, at most two memos per user ([ARC23])."""

    name: ClassVar[str] = "BiLOLOHA"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HASH_SEED, Persistent.MEMO)
    wire_id: ClassVar[int] = 11
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 100, "eps_perm": 2.0, "eps_1": 1.0}, (10, 11, 12, 10)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps_perm": 2.0, "eps_1": 1.0},)

    def __post_init__(self) -> None:
        self._set_g(2)


@dataclass(frozen=True)
class OLOLOHA(_LOLOHA):
    """LOLOHA with g the integer argmin of V* (:func:`longldp.privacy.loloha_optimal_g`)."""

    name: ClassVar[str] = "OLOLOHA"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HASH_SEED, Persistent.MEMO)
    wire_id: ClassVar[int] = 12
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 1000, "eps_perm": 3.0, "eps_1": 1.5}, (999, 0, 999, 500)),
        VectorCase(
            {
                "k": 1000,
                "eps_perm": 4.0,
                "eps_1": 2.0,
                "calibration": "paper",
                "hash_pool": 256,
                "pool_seed": 12345678901,
            },
            (1, 2, 3, 1),
            suffix="paper-pool",
        ),
        # The case above keeps its memos when round 1's derivation is wrong (few memo keys,
        # each kept faithfully with a high probability); with g = 25 buckets, most of them
        # memo keys, and round 1 keeping w.p. 0.86, a wrong HMAC context changes some memo
        # (tests/test_client_vectors.py checks it).
        VectorCase(
            {
                "k": 1000,
                "eps_perm": 5.0,
                "eps_1": 3.5,
                "calibration": "paper",
                "hash_pool": 64,
                "pool_seed": 2026,
            },
            (*range(60), 0),
            suffix="paper-pool-memos",
        ),
    )
    test_params: ClassVar[tuple[dict, ...]] = (
        {"eps_perm": 2.0, "eps_1": 1.0},
        {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "paper"},
    )

    def __post_init__(self) -> None:
        self._set_g(privacy.loloha_optimal_g(self.eps_perm, self.eps_1, self.calibration))
