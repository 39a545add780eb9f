"""RAPPOR: a UE chain behind an h-hot encoder (Bloom filter of strings, one-hot, or boolean).

Erlingsson, Pihur, Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response", CCS 2014 ([ERL14]). A client encodes its value into k bits (a Bloom filter with h
hashes in one of m cohorts, a one-hot vector, or one boolean bit), then runs the same two-round
unary-encoding chain as L-SUE (:mod:`longldp.protocols.ue`):

- permanent randomized response (PRR, round 1, memoized per distinct Bloom filter): each bit
  becomes 1 w.p. f/2, 0 w.p. f/2, or stays; as a chain p1 = 1 − f/2, q1 = f/2;
- instantaneous randomized response (IRR, round 2, fresh for every report): bit 1 w.p. q if the
  PRR bit is 1, p otherwise; as a chain p2 = q, q2 = p (RAPPOR swaps the UE letters).

Both ε are h times the chain's per-pair value: ε∞ = 2h·ln((1−f/2)/(f/2)) and
ε1 = h·ln[q*(1−p*)/(p*(1−q*))] (:func:`longldp.privacy.rappor_eps_inf`, ``rappor_eps_1``).

Hashing is google/rappor's Python client's ("rappor-md5-1byte"): MD5 of the cohort as 4 bytes
big-endian followed by the UTF-8 value; hash i is digest byte i mod k (h ≤ 16, k ≤ 256).

A report is (cohort, k bits); serialized as the cohort (u16 big-endian) followed by the bits
packed big-bit-order (bit 0 is the most significant bit of the first byte), ⌈k/8⌉ bytes.
Aggregated support is google/rappor's counts matrix: one row per cohort, column 0 the number of
reports N_j, column 1 + i the number of reports with bit i set. The one-hot encoder (h = m = 1)
is L-SUE with RAPPOR's parameter names: its support is the k column sums, as every UE oracle's.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.protocols._memo import DenseMemoStore, MemoStore, PopulationMemo
from longldp.protocols._rng import HmacRandom, RandomSource, SecureRandom, as_random_source
from longldp.protocols.base import Client, ReportKind, _user_index, packed_column_sums, row_slices
from longldp.protocols.ue import _UnaryEncoding

ENCODERS = ("bloom", "onehot", "boolean")
BLOOM_HASHES = ("rappor-md5-1byte",)
PRR_SOURCES = ("hmac", "table", "rappor-py")
#: Largest cohort the report body carries (u16).
MAX_COHORTS = 1 << 16
#: Memo keys of Bloom patterns: ids in a population's pattern table.
_PATTERN_KEY_RANGE = 1 << 31


# ---------------------------------------------------------------------- hashing and encoders
def _as_bytes(owner: str, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"{owner}: values must be str (UTF-8) or bytes; got {value!r}.")


def bloom_bits(value: str | bytes, cohort: int, h: int, k: int) -> tuple[int, ...]:
    """The h Bloom bit positions of ``value`` in ``cohort`` (google/rappor's Python client).

    MD5(cohort as 4 bytes big-endian ‖ value); hash i = digest byte i mod k. Positions may
    repeat (then the filter has fewer than h ones).
    """
    digest = hashlib.md5(struct.pack(">L", cohort) + _as_bytes("RAPPOR", value)).digest()
    return tuple(digest[i] % k for i in range(h))


def bloom_indices(
    values: Sequence[str | bytes], cohorts: ArrayLike, h: int, k: int
) -> NDArray[np.int64]:
    """Bloom positions for many (value, cohort) pairs, shape (n, h); one MD5 per distinct pair."""
    inv, table = _bloom_pairs(values, cohorts, h, k)
    return table[inv]


def _bloom_pairs(
    values: Sequence[str | bytes], cohorts: ArrayLike, h: int, k: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(index of each row's distinct (value, cohort) pair, (P, h) positions of the P pairs)."""
    coh = np.asarray(cohorts, dtype=np.int64)
    codes, uniq = _value_codes(values)
    pair = codes * MAX_COHORTS + coh
    upairs, inv = np.unique(pair, return_inverse=True)
    table = np.array(
        [bloom_bits(uniq[int(p // MAX_COHORTS)], int(p % MAX_COHORTS), h, k) for p in upairs],
        dtype=np.int64,
    ).reshape(-1, h)
    return inv.ravel(), table


def candidate_map(candidates: Sequence[str | bytes], h: int, k: int, m: int) -> NDArray[np.int64]:
    """Bloom positions of every candidate in every cohort, shape (M, m, h) (M·m MD5s)."""
    prefixes = [struct.pack(">L", j) for j in range(m)]
    md5 = hashlib.md5
    digests = b"".join(
        md5(pre + b).digest()
        for b in (_as_bytes("RAPPOR", c) for c in candidates)
        for pre in prefixes
    )
    raw = np.frombuffer(digests, dtype=np.uint8).reshape(len(candidates), m, 16)
    return (raw[:, :, :h].astype(np.int64)) % k


def _value_codes(values: Sequence[str | bytes]) -> tuple[NDArray[np.int64], list[bytes]]:
    """Integer codes of values (by their UTF-8 bytes) and the distinct byte strings.

    Arrays of str or bytes (and object arrays of one of them) are coded by ``np.unique`` (no
    Python loop over values); only the distinct values are converted one by one.
    """
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind == "O":
        try:  # noqa: SIM105  (all str or all bytes: a fixed-width array sorts in C)
            arr = np.asarray(arr.tolist())
        except (UnicodeError, ValueError):
            pass
    if arr.ndim == 1 and arr.dtype.kind in "USO":
        try:
            uniq, inv = np.unique(arr, return_inverse=True)
        except TypeError:  # mixed types in an object array
            uniq = None
        if uniq is not None:
            distinct = [_as_bytes("RAPPOR", v) for v in uniq.tolist()]
            if len(set(distinct)) == len(distinct):  # str and bytes forms of one value differ
                return inv.ravel().astype(np.int64), distinct
    seen: dict[bytes, int] = {}
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        b = _as_bytes("RAPPOR", v)
        codes[i] = seen.setdefault(b, len(seen))
    return codes, list(seen)


def _pack_indices(idx: NDArray[np.int64], k: int) -> NDArray[np.uint8]:
    """Packed rows with ones at the given positions (row i: idx[i, :])."""
    bits = np.zeros((idx.shape[0], k), dtype=bool)
    bits[np.arange(idx.shape[0])[:, None], idx] = True
    return np.packbits(bits, axis=1)


def bits_to_int(packed: ArrayLike, k: int) -> int:
    """One packed k-bit row as google/rappor's integer (bit i has weight 2^i)."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8).ravel(), count=k)
    return int(sum(1 << i for i in np.flatnonzero(bits)))


def int_to_bits(x: int, k: int) -> NDArray[np.uint8]:
    """Inverse of :func:`bits_to_int`: packed row (⌈k/8⌉ bytes) of a google/rappor integer."""
    if x < 0 or x >= 1 << k:
        raise ValueError(f"RAPPOR: the integer must be in [0, 2^{k}); got {x}.")
    bits = np.array([(x >> i) & 1 for i in range(k)], dtype=bool)
    return np.packbits(bits)


# ---------------------------------------------------------------------- the protocol
class RapporMemo(PopulationMemo):
    """A population's client state: cohorts (in ``state``), PRR memos, and the table of
    distinct Bloom patterns that memo keys index (so equal filters share a PRR, as in
    google/rappor where the PRR is a function of the bits)."""

    def __init__(self, n_users: int, store: Any, has_state: NDArray[np.bool_]):
        super().__init__(n_users, store, has_state=has_state)
        self.patterns: dict[bytes, int] = {}


@dataclass(frozen=True)
class RAPPOR(_UnaryEncoding):
    """RAPPOR ([ERL14]): Bloom filter (k bits, h hashes, m cohorts), PRR f, IRR (p, q).

    Parameters
    ----------
    k, h, m : Bloom bits, hashes, cohorts. ``encoder="onehot"`` needs h = m = 1 (basic RAPPOR,
        values are ints in [0, k)); ``encoder="boolean"`` needs k = h = 1 (values 0/1).
    f : PRR noise rate in [0, 1). f = 0 (no permanent noise, ε∞ = ∞) is refused unless
        ``one_time=True``.
    p, q : IRR rates P(1 | PRR 0), P(1 | PRR 1) in [0, 1], p ≠ q.
    one_time : one report per client: no memo; each report is PRR then IRR drawn afresh (the
        paper's one-time runs use f = 0, a single randomized response with (p, q)).
    """

    k: int
    h: int = 2
    m: int = 1
    f: float = 0.5
    p: float = 0.5
    q: float = 0.75
    one_time: bool = False
    encoder: str = "bloom"
    bloom_hash: str = "rappor-md5-1byte"
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    name: ClassVar[str] = "RAPPOR"
    longitudinal: ClassVar[bool] = True
    wire_id: ClassVar[int] = 14
    report_kind: ClassVar[ReportKind] = ReportKind.COHORT_BITS
    #: RAPPOR's own parameters: PRR f, IRR p and q (ε∞ and ε1 follow, with h).
    budget_params: ClassVar[tuple[str, ...]] = ("f", "p", "q")
    budget_note: ClassVar[str] = (
        "RAPPOR tuned by ε∞ and ε1 instead (one-hot, f and q set by the budgets) is L-SUE: "
        'use protocol "L-SUE".'
    )
    test_params: ClassVar[tuple[dict, ...]] = (
        {"h": 1, "m": 1, "f": 0.5, "p": 0.25, "q": 0.75, "encoder": "onehot"},
    )

    def __post_init__(self) -> None:
        own = self.name
        enc = check.choice(own, "encoder", self.encoder, ENCODERS)
        object.__setattr__(self, "encoder", enc)
        check.choice(own, "bloom_hash", self.bloom_hash, BLOOM_HASHES)
        if enc == "boolean":
            check.integer(own, "k", self.k, minimum=1, maximum=1)
            check.integer(own, "h", self.h, minimum=1, maximum=1)
        elif enc == "onehot":
            check.integer(own, "k", self.k, minimum=2)
            check.integer(own, "h", self.h, minimum=1, maximum=1)
            check.integer(own, "m", self.m, minimum=1, maximum=1)
        else:
            check.integer(own, "k", self.k, minimum=1, maximum=256)
            check.integer(own, "h", self.h, minimum=1, maximum=16)
        check.integer(own, "m", self.m, minimum=1, maximum=MAX_COHORTS)
        f = check.probability(own, "f", self.f)
        if f >= 1:
            raise ValueError(f"{own}: 'f' must be a number in [0, 1); got {self.f!r}.")
        p = check.probability(own, "p", self.p)
        q = check.probability(own, "q", self.q)
        if p == q:
            raise ValueError(
                f"{own}: 'p' and 'q' must differ (p = q makes reports independent of the "
                f"value); got p = q = {p}."
            )
        if not isinstance(self.one_time, bool):
            raise ValueError(f"{own}: 'one_time' must be a bool; got {self.one_time!r}.")
        if f == 0 and not self.one_time:
            raise ValueError(
                f"{own}: 'f' must be > 0 for longitudinal use (f = 0 memoizes the true bits: "
                "ε∞ = ∞); pass one_time=True for a single report per client."
            )
        object.__setattr__(self, "p1", 1 - f / 2)
        object.__setattr__(self, "q1", f / 2)
        object.__setattr__(self, "p2", q)
        object.__setattr__(self, "q2", p)

    # ------------------------------------------------------------------ privacy
    @property
    def eps_perm(self) -> float:
        """ε∞ (:meth:`first_round_epsilon`)."""
        return self.first_round_epsilon()

    @property
    def eps_1(self) -> float:
        """ε1 (:meth:`single_report_epsilon`)."""
        return self.single_report_epsilon()

    def single_report_epsilon(self) -> float:
        """ε1 = h·ln[q*(1−p*)/(p*(1−q*))] ([ERL14] Theorem 2)."""
        return privacy.round_up(privacy.rappor_eps_1(self.p, self.q, self.f, self.h))

    def first_round_epsilon(self) -> float:
        """ε∞ = 2h·ln((1−f/2)/(f/2)) ([ERL14] Theorem 1); one-time: ε1 (nothing is memoized)."""
        if self.one_time:
            return self.single_report_epsilon()
        return privacy.round_up(privacy.rappor_eps_inf(self.f, self.h))

    @property
    def effective(self) -> tuple[float, float]:
        """(q*, p*): P(report bit 1 | Bloom bit 1), P(report bit 1 | Bloom bit 0)."""
        return self.P1, self.P0

    def spent_budget(self, memo: PopulationMemo) -> dict[str, NDArray]:
        """Per client: reports t, distinct PRRs d, and min(t·ε1, d·ε∞)."""
        out = super().spent_budget(memo)
        if self.one_time:
            out["epsilon"] = memo.reports * self.single_report_epsilon()
        return out

    # ------------------------------------------------------------------ shapes
    @property
    def onehot(self) -> bool:
        return self.encoder == "onehot"

    @property
    def support_shape(self) -> tuple[int, ...]:
        """(k,) column sums for one-hot; otherwise the (m, k + 1) counts matrix."""
        return (self.k,) if self.onehot else (self.m, self.k + 1)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """(k,) frequencies for one-hot; otherwise (m, k) per-cohort shares of set bits."""
        return (self.k,) if self.onehot else (self.m, self.k)

    def _estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per cohort j, the variance of a share of N_j reports (NaN for an empty cohort)."""
        if self.onehot:
            return super()._estimate_variance(support, n, plug_in)
        n_j = np.asarray(support)[:, 0]
        out = np.full(plug_in.shape, np.nan)
        for j in np.flatnonzero(n_j):
            out[j] = self.variance(int(n_j[j]), plug_in[j])
        return out

    @property
    def report_dtype(self) -> np.dtype:
        return np.dtype([("cohort", np.int64), ("bits", np.uint8, (self.nbytes,))])

    # ------------------------------------------------------------------ encoding
    def encode(self, values: Any, cohorts: ArrayLike) -> NDArray[np.uint8]:
        """Packed encodings (n, ⌈k/8⌉) of ``values`` for clients in ``cohorts``."""
        coh = self._check_cohorts(cohorts)
        if self.encoder == "bloom":
            if isinstance(values, (str, bytes)):
                vals: Any = [values]
            else:
                vals = values if isinstance(values, np.ndarray) else list(values)
            if len(vals) != coh.size:
                raise ValueError(
                    f"{self.name}: {len(vals)} values for {coh.size} cohorts; give one each."
                )
            return _pack_indices(bloom_indices(vals, coh, self.h, self.k), self.k)
        vals = self._int_values(values)
        return (
            np.packbits(vals[:, None] == np.arange(self.k)[None, :], axis=1)
            if (self.onehot)
            else np.packbits((vals == 1)[:, None], axis=1)
        )

    def _int_values(self, values: Any) -> NDArray[np.int64]:
        arr = np.asarray(values)
        if self.encoder == "boolean" and arr.dtype == bool:
            arr = arr.astype(np.int64)
        width = self.k if self.onehot else 2
        return check.domain_values(self.name, arr, width).ravel()

    def _check_cohorts(self, cohorts: ArrayLike) -> NDArray[np.int64]:
        coh = np.atleast_1d(np.asarray(cohorts))
        if coh.dtype == bool or not np.issubdtype(coh.dtype, np.integer):
            raise ValueError(f"{self.name}: cohorts must be integers; got dtype {coh.dtype}.")
        if coh.size and (coh.min() < 0 or coh.max() >= self.m):
            bad = int(coh[(coh < 0) | (coh >= self.m)][0])
            raise ValueError(
                f"{self.name}: unknown cohort {bad}; cohorts must be in [0, m = {self.m})."
            )
        return coh.astype(np.int64, copy=False)

    # ------------------------------------------------------------------ population path
    def new_memo(self, n_users: int) -> RapporMemo:
        """Empty state for ``n_users`` clients (cohorts drawn on first report, kept forever)."""
        n_users = check.integer(self.name, "n_users", n_users, minimum=1)
        store: Any = None
        if not self.one_time:
            store = (
                super()._memo_store(n_users)
                if self.onehot
                else MemoStore(n_users, _PATTERN_KEY_RANGE, (self.nbytes,), np.uint8)
            )
        return RapporMemo(n_users, store, has_state=np.zeros(n_users, dtype=bool))

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:  # pragma: no cover
        return super()._memo_store(n_users)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        """Each client's cohort, uniform on [0, m), drawn once (no draw when m = 1)."""
        if self.m == 1:
            return {"cohort": np.zeros(m, dtype=np.int64)}
        return {"cohort": np.asarray(rng.integers(0, self.m, size=m), dtype=np.int64)}

    def _population_step(
        self, values: Any, memo: PopulationMemo | None, users: ArrayLike | None, source: Any
    ) -> tuple[PopulationMemo, NDArray[np.int64], dict, NDArray[np.int64], NDArray[np.int64]]:
        if self.encoder == "bloom":
            vals_list = values if isinstance(values, np.ndarray) else list(values)
            n = len(vals_list)
        else:
            ints = self._int_values(values)
            n = ints.size
        if memo is None:
            if not self.one_time:
                raise ValueError(f"{self.name}: 'memo' is required (use new_memo(n_users)).")
            memo = self.new_memo(max(1, n))
        if not isinstance(memo, RapporMemo):
            raise ValueError(f"{self.name}: 'memo' must come from RAPPOR.new_memo.")
        who = _user_index(self.name, users, n, memo.n_users)
        state = self._ensure_state(memo, who, source)
        if self.onehot:
            return memo, who, state, ints, ints
        coh = self._check_cohorts(state["cohort"])
        if self.encoder == "bloom":
            inv, table = _bloom_pairs(vals_list, coh, self.h, self.k)
            upacked = _pack_indices(table, self.k)
        else:
            inv = ints * self.m + coh  # boolean: (value, cohort) pairs, at most 2m
            upacked = np.packbits(np.arange(2 * self.m)[:, None] // self.m == 1, axis=1)
        # Memo key: the id of the distinct Bloom pattern (equal filters share one PRR).
        ids = np.array(
            [memo.patterns.setdefault(row.tobytes(), len(memo.patterns)) for row in upacked],
            dtype=np.int64,
        )
        state["bloom"] = upacked[inv]
        keys = ids[inv]
        return memo, who, state, keys, keys

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """PRR of the encoded bits (one-time: PRR then IRR in one draw, (q*, p*))."""
        if self.onehot and not self.one_time:
            return super()._round1(keys, state, rng)  # exactly L-SUE's round 1
        hi, lo = (self.P1, self.P0) if self.one_time else (self.p1, self.q1)
        if "bloom" in state:
            enc = state["bloom"]
        elif self.onehot:
            enc = np.packbits(keys[:, None] == np.arange(self.k)[None, :], axis=1)
        else:
            enc = np.packbits((keys % 2 == 1)[:, None], axis=1)
        out = np.empty_like(enc)
        for rows in row_slices(enc.shape[0], self.k):
            bits = np.unpackbits(enc[rows], axis=1, count=self.k).astype(bool)
            u = rng.random(bits.shape)
            out[rows] = np.packbits(np.where(bits, u < hi, u < lo), axis=1)
        return out

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        out = np.empty(payload.shape[0], dtype=self.report_dtype)
        out["cohort"] = state["cohort"]
        out["bits"] = payload
        return out

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = {"cohort": np.zeros(1, dtype=np.int64)}
        return np.zeros((1, self.nbytes), dtype=np.uint8), state

    def perturb_support(
        self, values: Any, memo: PopulationMemo, rng: Any = None, users: ArrayLike | None = None
    ) -> NDArray:
        """Support of :meth:`perturb` at count level given the memos (see the base class)."""
        if not self.one_time:
            return super().perturb_support(values, memo, rng, users)
        source = as_random_source(rng)
        memo, who, state, _, keys = self._population_step(values, memo, users, source)
        memo.reports[who] += 1
        enc = state.get("bloom")
        if enc is None:
            enc = np.packbits(keys[:, None] == np.arange(self.k)[None, :], axis=1)
        ones, n_j = self._cohort_sums(enc, state["cohort"])
        drawn = source.binomial(ones, self.P1) + source.binomial(n_j[:, None] - ones, self.P0)
        return self._support(drawn, n_j)

    def _support_from_memos(
        self,
        payload: NDArray,
        values: NDArray,
        keys: NDArray,
        state: dict,
        rng: RandomSource,
        memo: PopulationMemo,
        who: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        """Per cohort and bit: Bin(#PRR ones, q) + Bin(#PRR zeros, p)."""
        ones, n_j = self._cohort_sums(payload, state["cohort"])
        drawn = rng.binomial(ones, self.p2) + rng.binomial(n_j[:, None] - ones, self.q2)
        return self._support(drawn, n_j)

    def _cohort_sums(
        self, packed: NDArray[np.uint8], cohorts: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(m, k) bit sums per cohort and (m,) reports per cohort."""
        n_j = np.bincount(cohorts, minlength=self.m).astype(np.int64)
        ones = np.zeros((self.m, self.k), dtype=np.int64)
        if self.m == 1:
            ones[0] = packed_column_sums(packed, self.k)
            return ones, n_j
        order = np.argsort(cohorts, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(n_j)])
        rows = packed[order]
        for j in np.flatnonzero(n_j):
            ones[j] = packed_column_sums(rows[bounds[j] : bounds[j + 1]], self.k)
        return ones, n_j

    def _support(self, ones: NDArray[np.int64], n_j: NDArray[np.int64]) -> NDArray[np.int64]:
        if self.onehot:
            return ones[0]
        return np.concatenate([n_j[:, None], ones], axis=1)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """One-hot: the k column sums; else google/rappor's (m, k + 1) counts matrix."""
        rec = self._check_reports(reports)
        ones, n_j = self._cohort_sums(rec["bits"], rec["cohort"])
        return self._support(ones, n_j)

    def _check_reports(self, reports: NDArray) -> NDArray:
        rec = np.asarray(reports)
        if rec.dtype.names is None or set(rec.dtype.names) != {"cohort", "bits"}:
            raise ValueError(
                f"{self.name}: 'reports' must be records with fields cohort and bits "
                f"(as perturb returns); got dtype {rec.dtype}."
            )
        self._check_cohorts(rec["cohort"])
        self._check_rows(np.ascontiguousarray(rec["bits"]).reshape(-1, self.nbytes))
        return rec.reshape(-1)

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        """One-hot: as every UE oracle. Strings: use :meth:`sample_counts`."""
        if not self.onehot:
            raise ValueError(
                f"{self.name}: sample_support takes value counts of the one-hot encoder; for "
                "strings use sample_counts(strings, counts, rng)."
            )
        return super().sample_support(true_counts, n, rng)

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        if not self.onehot:
            raise ValueError(
                f"{self.name}: sample_support takes value counts of the one-hot encoder; for "
                "strings use sample_counts(strings, counts, rng)."
            )
        return super()._sample_support(counts, n, rng)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        return self._sample_support(counts, totals, rng)

    # ------------------------------------------------------------------ estimation
    def _unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """One-hot: frequencies. Else per cohort and bit the share t̂_ij/N_j of clients whose
        Bloom bit is set: (c_ij/N_j − p*)/(q* − p*); NaN for empty cohorts."""
        if self.onehot:
            return super()._unbiased(support, n)
        n_j = support[..., :1]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(n_j > 0, support[..., 1:] / np.where(n_j > 0, n_j, 1), np.nan)
        return (share - self.P0) / (self.P1 - self.P0)

    def sample_counts(
        self,
        strings: Sequence[str | bytes],
        counts: ArrayLike,
        rng: Any = None,
        reports_per_client: int = 1,
        bloom_map: NDArray[np.int64] | None = None,
    ) -> NDArray[np.int64]:
        """The (m, k + 1) counts matrix of clients holding ``strings`` with ``counts``, drawn
        exactly at count level (google/rappor's ``gen_counts.R``; bits are independent within a
        client): multinomial cohorts; PRR ones Bin(T, 1 − f/2) + Bin(N_j − T, f/2) per (cohort,
        bit) with T true ones; IRR ones Bin(R·PRR1, q) + Bin(R·(N_j − PRR1), p) for R reports
        per client (the same value and PRR each time). ``bloom_map`` (M, m, h) skips hashing.
        """
        source = as_random_source(rng)
        cnt = np.asarray(counts)
        if cnt.dtype == bool or not np.issubdtype(cnt.dtype, np.integer) or cnt.ndim != 1:
            raise ValueError(f"{self.name}: 'counts' must be a 1-D integer vector.")
        if cnt.size and cnt.min() < 0:
            raise ValueError(f"{self.name}: 'counts' must be >= 0; got {int(cnt.min())}.")
        R = check.integer(self.name, "reports_per_client", reports_per_client, minimum=1)
        idx = self._bloom_map(strings, cnt.size, bloom_map)
        per = source.multinomial(cnt, np.full(self.m, 1.0 / self.m))  # (M, m)
        n_j = per.sum(axis=0)
        T = self.true_ones(idx, per)
        if self.one_time:
            if R != 1:
                raise ValueError(f"{self.name}: one-time RAPPOR sends one report per client.")
            ones = source.binomial(T, self.P1) + source.binomial(n_j[:, None] - T, self.P0)
            return self._support(ones, n_j)
        prr = source.binomial(T, self.p1) + source.binomial(n_j[:, None] - T, self.q1)
        ones = source.binomial(R * prr, self.p2) + source.binomial(
            R * (n_j[:, None] - prr), self.q2
        )
        return self._support(ones, R * n_j)

    def _bloom_map(
        self, strings: Sequence[str | bytes], M: int, bloom_map: NDArray | None
    ) -> NDArray[np.int64]:
        if bloom_map is None:
            if self.encoder != "bloom":
                raise ValueError(f"{self.name}: sample_counts needs the Bloom encoder.")
            if len(strings) != M:
                raise ValueError(f"{self.name}: {len(strings)} strings for {M} counts.")
            return candidate_map(strings, self.h, self.k, self.m)
        idx = np.asarray(bloom_map, dtype=np.int64)
        if (
            idx.shape != (M, self.m, self.h)
            or idx.min(initial=0) < 0
            or idx.max(initial=0) >= self.k
        ):
            raise ValueError(
                f"{self.name}: 'bloom_map' must have shape ({M}, {self.m}, {self.h}) with "
                f"positions in [0, {self.k}); got shape {idx.shape}."
            )
        return idx

    def true_ones(self, idx: NDArray[np.int64], per_cohort: NDArray[np.int64]) -> NDArray[np.int64]:
        """(m, k) number of clients whose Bloom bit is set, from the (M, m, h) map and the
        (M, m) clients per string and cohort (a position hashed twice counts once)."""
        first = np.ones(idx.shape, dtype=bool)
        for i in range(1, idx.shape[2]):
            first[:, :, i] = np.all(idx[:, :, i : i + 1] != idx[:, :, :i], axis=2)
        rows = np.broadcast_to(np.arange(self.m)[None, :, None], idx.shape)
        flat = (rows * self.k + idx)[first]
        w = np.broadcast_to(per_cohort[:, :, None], idx.shape)[first]
        return (
            np.bincount(flat, weights=w, minlength=self.m * self.k)
            .reshape(self.m, self.k)
            .astype(np.int64)
        )

    # ------------------------------------------------------------------ client and bytes
    def client(
        self,
        rng: RandomSource | None = None,
        *,
        secret: bytes | None = None,
        cohort: int | None = None,
        prr_source: str = "hmac",
        metric: bytes = b"",
        memo: dict[bytes, bytes] | None = None,
    ) -> RapporClient:
        """One device: see :class:`RapporClient`."""
        return RapporClient(
            self,
            rng,
            secret=secret,
            cohort=cohort,
            prr_source=prr_source,
            metric=metric,
            memo=memo,
        )

    @property
    def report_nbytes(self) -> int:
        return 2 + self.nbytes

    def _encode(self, reports: NDArray) -> NDArray[np.uint8]:
        rec = self._check_reports(reports)
        out = np.empty((rec.size, 2 + self.nbytes), dtype=np.uint8)
        out[:, :2] = rec["cohort"].astype(">u2").view(np.uint8).reshape(-1, 2)
        out[:, 2:] = rec["bits"]
        return out

    def _decode(self, rows: NDArray[np.uint8]) -> NDArray:
        coh = rows[:, :2].copy().view(">u2").ravel().astype(np.int64)
        rec = np.empty(rows.shape[0], dtype=self.report_dtype)
        rec["cohort"] = coh
        rec["bits"] = rows[:, 2:]
        return self._check_reports(rec)


# ---------------------------------------------------------------------- one device
class Internals(NamedTuple):
    """What a client computes for one report; only ``report`` may leave the device."""

    bloom: NDArray[np.uint8]
    prr: NDArray[np.uint8]
    report: NDArray[np.uint8]


class RapporClient(Client):
    """One device: a permanent cohort, a memoized PRR per distinct Bloom filter, fresh IRR.

    ``prr_source``:

    - ``"hmac"`` (default): the PRR is a PRF of a device secret and the Bloom bits,
      :class:`~longldp.protocols._rng.HmacRandom` keyed by the secret with context
      0x01 ‖ len(metric) ‖ metric ‖ cohort u16 ‖ Bloom bytes, one 53-bit uniform per bit:
      bit = 1 if u < f/2, 0 if u < f, else the Bloom bit. A client that
      loses its memo reproduces the same PRR, so no averaging is possible.
    - ``"table"``: the PRR is drawn from ``rng`` once per Bloom filter and kept in the memo
      (:meth:`export_memo` / ``memo=`` persist it).
    - ``"rappor-py"``: byte-exact google/rappor Python client (k ≤ 32): HMAC-SHA256(secret,
      Bloom integer as 4 bytes big-endian); digest byte i gives a fair coin (low bit) and a noise
      decision (upper 7 bits < 128·f), so the realized f is ⌈128f⌉/128 (:attr:`realized_f`).

    The cohort defaults to HMAC(secret, "cohort" ‖ metric) mod m, i.e. fixed by the secret.
    The IRR comes from ``rng``: the OS CSPRNG unless a Generator is passed (simulation).
    The secret defaults to 32 bytes of ``os.urandom`` (from ``rng`` when it is a Generator).
    """

    def __init__(
        self,
        oracle: RAPPOR,
        rng: RandomSource | None = None,
        *,
        secret: bytes | None = None,
        cohort: int | None = None,
        prr_source: str = "hmac",
        metric: bytes = b"",
        memo: dict[bytes, bytes] | None = None,
    ):
        self.oracle = oracle
        self._rng: RandomSource = SecureRandom() if rng is None else rng
        own = oracle.name
        self.prr_source = check.choice(own, "prr_source", prr_source, PRR_SOURCES)
        if self.prr_source == "rappor-py" and oracle.k > 32:
            raise ValueError(f"{own}: prr_source 'rappor-py' needs k <= 32; got k = {oracle.k}.")
        if secret is None:
            gen_bytes = getattr(self._rng, "bytes", None)
            secret = gen_bytes(32) if gen_bytes is not None else os.urandom(32)
        if not isinstance(secret, bytes) or not secret:
            raise ValueError(f"{own}: 'secret' must be non-empty bytes.")
        if self.prr_source == "hmac" and len(secret) < 16:
            raise ValueError(
                f"{own}: 'secret' must be at least 16 bytes for prr_source 'hmac' (use 32 from "
                f"the OS); got {len(secret)}."
            )
        if not isinstance(metric, bytes) or len(metric) > 255:
            raise ValueError(f"{own}: 'metric' must be bytes of length <= 255.")
        self._secret = secret
        self.metric = metric
        if cohort is None:
            digest = hmac.new(secret, b"cohort" + metric, hashlib.sha256).digest()
            cohort = int.from_bytes(digest, "big") % oracle.m
        self.cohort = int(oracle._check_cohorts(np.array([cohort]))[0])
        self._state = {"cohort": np.array([self.cohort], dtype=np.int64)}
        self._memo: dict[bytes, NDArray[np.uint8]] = {}
        for key, val in (memo or {}).items():
            self._memo[key] = np.frombuffer(val, dtype=np.uint8).reshape(1, -1).copy()
        self._reports = 0

    @property
    def realized_f(self) -> float:
        """The PRR noise rate actually used (rappor-py quantizes f to ⌈128f⌉/128)."""
        if self.prr_source == "rappor-py":
            return math.ceil(self.oracle.f * 128) / 128
        return self.oracle.f

    @property
    def realized_epsilons(self) -> tuple[float, float]:
        """(ε∞, ε1) at the realized f: never above the protocol's (the realized f ≥ f)."""
        o = self.oracle
        f = self.realized_f
        eps_1 = privacy.round_up(privacy.rappor_eps_1(o.p, o.q, f, o.h))
        if o.one_time:
            return eps_1, eps_1
        return privacy.round_up(privacy.rappor_eps_inf(f, o.h)), eps_1

    def export_memo(self) -> dict[bytes, bytes]:
        """The PRR memo (Bloom bytes → PRR bytes) to persist for ``prr_source="table"``."""
        return {key: val.tobytes() for key, val in self._memo.items()}

    def _prr(self, bloom: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        key = bloom.tobytes()
        memo = self._memo.get(key)
        if memo is not None and not o.one_time:
            return memo
        if o.one_time:
            prr = o._round1(np.zeros(1, dtype=np.int64), {"bloom": bloom}, self._rng)
            prr = np.packbits(np.unpackbits(prr, count=o.k).astype(bool)).reshape(1, -1)
            return prr
        if self.prr_source == "table":
            prr = o._round1(np.zeros(1, dtype=np.int64), {"bloom": bloom}, self._rng)
        elif self.prr_source == "hmac":
            context = (
                b"\x01"
                + bytes([len(self.metric)])
                + self.metric
                + struct.pack(">H", self.cohort)
                + key
            )
            u = HmacRandom(self._secret, context).random(o.k)
            b = np.unpackbits(bloom.ravel(), count=o.k).astype(bool)
            bits = np.where(u < o.f / 2, True, np.where(u < o.f, False, b))
            prr = np.packbits(bits).reshape(1, -1)
        else:
            prr = self._rappor_py_prr(bloom)
        self._memo[key] = prr
        return prr

    def _rappor_py_prr(self, bloom: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        b = bits_to_int(bloom, o.k)
        digest = hmac.new(self._secret, struct.pack(">L", b), hashlib.sha256).digest()
        threshold = o.f * 128
        uniform = mask = 0
        for i in range(o.k):
            byte = digest[i]
            uniform |= (byte & 1) << i
            mask |= int((byte >> 1) < threshold) << i
        return int_to_bits((b & ~mask) | (uniform & mask), o.k).reshape(1, -1)

    def _irr(self, prr: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        if o.one_time:
            return prr
        return o._round2(prr, self._rng)

    def internal_report(self, value: Any) -> Internals:
        """Bloom filter, PRR and report of ``value`` (google/rappor's ``_internal_encode``)."""
        o = self.oracle
        if o.encoder == "bloom":
            bloom = o.encode([_as_bytes(o.name, value)], [self.cohort])
        else:
            if o.onehot and (not isinstance(value, (int, np.integer)) or isinstance(value, bool)):
                raise ValueError(f"{o.name}: 'value' must be an int; got {value!r}.")
            bloom = o.encode(np.array([int(value)]), [self.cohort])
        prr = self._prr(bloom)
        report = self._irr(prr)
        self._reports += 1
        return Internals(bloom, prr, report)

    def report(self, value: Any) -> Any:
        """One report record (cohort, bits) of ``value``."""
        bits = self.internal_report(value).report
        return self.oracle._make_reports(bits, self._state)[0]

    @property
    def memo_count(self) -> int:
        """Distinct PRRs used so far (each costs ε∞)."""
        return len(self._memo) if not self.oracle.one_time else 0

    @property
    def spent_budget(self) -> privacy.SpentBudget:
        """Reports t, distinct PRRs d and min(t·ε1, d·ε∞) (one-time: t·ε1)."""
        o = self.oracle
        if o.one_time:
            return privacy.SpentBudget(self._reports, 0, self._reports * o.single_report_epsilon())
        return privacy.spent_budget(
            self._reports, self.memo_count, o.single_report_epsilon(), o.first_round_epsilon()
        )
