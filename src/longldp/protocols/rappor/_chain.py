"""What every RAPPOR encoder shares: the PRR/IRR chain over an encoding, cohorts, reports.

Erlingsson, Pihur, Korolova, "RAPPOR", CCS 2014 ([ERL14]). A client encodes its value into k
bits (the encoder is the class: Bloom filter, one-hot, boolean), then runs the two-round
unary-encoding chain of L-SUE (:mod:`longldp.protocols.ue`):

- permanent randomized response (PRR, round 1, memoized): each bit becomes 1 w.p. f/2, 0 w.p.
  f/2, or stays; as a chain p1 = 1 − f/2, q1 = f/2;
- instantaneous randomized response (IRR, round 2, fresh for every report): bit 1 w.p. q if the
  PRR bit is 1, p otherwise; as a chain p2 = q, q2 = p (RAPPOR swaps the UE letters).

Both ε are h times the chain's per-pair value: ε∞ = 2h·ln((1−f/2)/(f/2)) and
ε1 = h·ln[q*(1−p*)/(p*(1−q*))] (:func:`longldp.privacy.rappor_eps_inf`, ``rappor_eps_1``).

A one-time variant (:class:`OneTime`, the paper's "one-time RAPPOR") sends one report per
client: PRR then IRR drawn afresh for every report, nothing memoized, f = 0 allowed. As a
protocol it is a one-shot oracle whose round 1 is the composed channel (q*, p*).

A report is (cohort, k bits); its body is the cohort (u16 big-endian) then the bits packed
big-bit-order, ⌈k/8⌉ bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.channels import bit_matrix, unary_channel
from longldp.protocols._memo import PopulationMemo
from longldp.protocols._rng import RandomSource, as_random_source
from longldp.protocols.base import (
    PopulationStep,
    ReportKind,
    packed_column_sums,
    row_slices,
)
from longldp.protocols.clientspec import ClientSpec
from longldp.protocols.rappor._hashing import MAX_COHORTS
from longldp.protocols.rappor.client import rappor_client
from longldp.protocols.report_kinds import ExactChannel
from longldp.protocols.traits import Estimand
from longldp.protocols.ue import _UnaryEncoding

#: docs/client-spec.md's rows of every RAPPOR encoder (their JavaScript family is rappor.js).
CLIENT = ClientSpec(
    family="rappor",
    chain="q1 = D(f/2), p1 = 1 − q1",
    round2="p2 = D(q), q2 = D(p)",
    eps_1=(
        "encodings differ in (x, y) bits (Bloom (h, h), one-hot (1, 1), boolean (1, 0)); "
        "B(P1, P0, N1, N0) with B(h, l, n_h, n_l) = x·|ln(h·n_l/(l·n_h))| if x = y, else "
        "max(x·U + y·V, y·U + x·V) with U = max(ln(h/l), ln(n_h/n_l)), V = max(ln(l/h), "
        "ln(n_l/n_h)); ∞ if any of the four is 0; ρ of it"
    ),
    eps_perm="ρ(B(p1, q1, 1 − p1, 1 − q1))",
    state="cohort: an integer in [0, m) when m > 1; 0 (no draw) when m = 1",
    memo_key="the packed encoding E (§4.3)",
    round1=(
        "k floats u_i: bit_i = u_i < (E_i ? p1 : q1) (PRR; one-time: PRR and IRR in one draw, "
        "(p1, q1) = (q*, p*))"
    ),
    draws2="UE round 2 (p2 = q, q2 = p)",
)
#: The one-time variants' rows: one report, PRR and IRR in one draw.
ONE_TIME_CLIENT = dataclasses.replace(
    CLIENT,
    chain="D(q*), D(p*) with (q*, p*) = (P1, P0) of the chain (1 − f/2, f/2, q, p) (§3.3)",
    round2="1, 0",
    eps_perm="ε1",
    draws2="none (one-shot)",
)

#: Memo keys of Bloom patterns: ids in a population's pattern table.
PATTERN_KEY_RANGE = 1 << 31


class CohortBitsReports(ReportKind):
    """(a cohort, the k bits of a randomized encoding of the value) (RAPPOR): every bit goes
    through PRR then IRR independently; the encoding depends on the value and the cohort."""

    name: ClassVar[str] = "cohort-bits"
    statistic: ClassVar[str] = "bits"
    #: Largest number of encodings × outputs the exact channel enumerates.
    MAX_CELLS: ClassVar[int] = 1 << 24

    def output_space_size(self, proto: Any) -> int:
        return int(proto.m) * 2 ** int(proto.k)

    def channel(self, proto: Any, rng: Any) -> ExactChannel:
        """Every encoding a client can hold (``proto.possible_encodings()``) through the PRR
        and IRR bit channels (a one-time variant's round 1 is already the composed channel)."""
        patterns = proto.possible_encodings()
        if patterns.shape[0] * 2**proto.k > self.MAX_CELLS:
            raise ValueError(
                f"{proto.name}: the exact audit enumerates {patterns.shape[0]} encodings × "
                f"2^{proto.k} outputs; use a smaller k or h."
            )
        b1 = bit_matrix(proto.p1, proto.q1)
        both = b1 @ bit_matrix(proto.p2, proto.q2)
        return ExactChannel(
            (unary_channel(proto.k, both, patterns),), (unary_channel(proto.k, b1, patterns),)
        )

    def width(self, proto: Any) -> int:
        return int(proto.k)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.uint8]:
        bits = np.ascontiguousarray(np.asarray(reports)["bits"])
        return np.unpackbits(bits, axis=1, count=proto.k)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.bool_]:
        """The encoding of each value in each client's cohort: (n, V, k)."""
        cohorts = np.asarray(np.asarray(reports)["cohort"], dtype=np.int64).ravel()
        # The cohorts present, and each report's index among them (cohorts are < m: no sort).
        present = np.flatnonzero(np.bincount(cohorts, minlength=int(proto.m)))
        index = np.zeros(int(proto.m), dtype=np.int64)
        index[present] = np.arange(present.size)
        return self._masks(proto, values, present)[index[cohorts]]

    def value_table(self, proto: Any) -> NDArray[np.bool_]:
        """The encodings of every audited input in every cohort: (m, V, k)."""
        size = proto.domain_size or proto.k
        values = proto.as_inputs(np.arange(size))
        return self._masks(proto, values, np.arange(proto.m, dtype=np.int64))

    def differing_bits(self, proto: Any) -> tuple[int, int]:
        return tuple(proto.differing_bits)  # type: ignore[return-value]

    @staticmethod
    def _masks(proto: Any, values: Any, cohorts: NDArray[np.int64]) -> NDArray[np.bool_]:
        vals = list(values) if not isinstance(values, np.ndarray) else values
        size, count = len(vals), int(cohorts.size)
        if count == 0 or size == 0:
            return np.zeros((count, size, proto.k), dtype=bool)
        # One encode call for every (cohort, value) pair, cohort-major.
        every = np.tile(vals, count) if isinstance(vals, np.ndarray) else vals * count
        packed = proto.encode(every, np.repeat(np.asarray(cohorts, dtype=np.int64), size))
        bits = np.unpackbits(packed, axis=1, count=proto.k).astype(bool)
        return bits.reshape(count, size, proto.k)

    def attack_kind(self, proto: Any) -> str:
        """Attackable as ``unary`` iff the estimate is a frequency vector, there is one cohort
        and every possible encoding is one-hot (RAPPOR-onehot)."""
        if not proto.estimates_frequencies:
            raise ValueError(
                f"'{proto.name}' estimates, per cohort, the share of clients whose encoded bit "
                "is set (estimates_frequencies is False), not a frequency vector over values, so "
                "a gain on target values is undefined; attack RAPPOR's string decoder with "
                "longldp.attacks.apps.promote_string."
            )
        if int(proto.m) != 1 or not np.array_equal(
            proto.possible_encodings(), np.eye(proto.k, dtype=bool)
        ):
            raise ValueError(
                f"'{proto.name}' reports cohort bits whose encoding is not one-hot in one "
                "cohort; no attack knows which values such a report supports."
            )
        return "unary"


#: RAPPOR's report kind.
COHORT_BITS = CohortBitsReports()


class RapporMemo(PopulationMemo):
    """A population's client state: cohorts (in ``state``), PRR memos, and the table of
    distinct encodings that memo keys index (so equal filters share a PRR, as in google/rappor
    where the PRR is a function of the bits)."""

    def __init__(self, n_users: int, store: Any, has_state: NDArray[np.bool_]):
        super().__init__(n_users, store, has_state=has_state)
        self.patterns: dict[bytes, int] = {}


class RapporChain(_UnaryEncoding):
    """The PRR/IRR chain of every RAPPOR encoder; subclasses are the encoders.

    An encoder class supplies ``encode(values, cohorts)`` (packed encodings),
    ``_parse_values(values)`` (the population path's input check), ``possible_encodings()``
    (every encoding a client can hold, for the exact audit), ``differing_bits`` and
    ``as_inputs(codes)``.
    """

    k: int
    h: int
    m: int
    f: float
    p: float
    q: float
    longitudinal: ClassVar[bool] = True
    report_kind: ClassVar[ReportKind] = COHORT_BITS
    #: RAPPOR's own parameters: PRR f, IRR p and q (ε∞ and ε1 follow, with h).
    budget_params: ClassVar[tuple[str, ...]] = ("f", "p", "q")

    @classmethod
    def setting_params(
        cls, k: int, eps_perm: float, eps_1: float, one_shot_eps: float | None = None
    ) -> dict[str, Any]:
        """RAPPOR at a listing setting: (f, p, q) matched to L-SUE at (ε∞, ε1), one hash and
        one cohort (h = m = 1) where the encoder takes them (docs/math.md §11)."""
        from longldp.protocols.ue import LSUE  # a sibling family, only for the matching

        lsue = LSUE(k=k, eps_perm=eps_perm, eps_1=eps_1)
        own = {"k": k, "h": 1, "m": 1, "f": 2 * lsue.q1, "p": lsue.q2, "q": lsue.p2}
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        return {name: v for name, v in own.items() if name in fields}
    budget_note: ClassVar[str] = (
        "RAPPOR tuned by ε∞ and ε1 instead (one-hot, f and q set by the budgets) is L-SUE: "
        'use protocol "L-SUE".'
    )
    #: Most bits set by one input and not the other, both ways (exact lifetime audit).
    differing_bits: ClassVar[tuple[int, int]] = (1, 1)

    # ------------------------------------------------------------------ parameters
    def _check_rates(self, allow_f0: bool = False) -> tuple[float, float, float]:
        """Validate f, p, q; return them (f = 0 only when nothing is memoized)."""
        own = self.name
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
        if f == 0 and not allow_f0:
            raise ValueError(
                f"{own}: 'f' must be > 0 for longitudinal use (f = 0 memoizes the true bits: "
                "ε∞ = ∞); use the one-time variant for a single report per client."
            )
        return f, p, q

    def _set_chain(self) -> None:
        """(p1, q1, p2, q2) = (1 − f/2, f/2, q, p), each as its sampler draws it
        (:func:`longldp.privacy.drawn`; p1 the exact complement of q1)."""
        f, p, q = self._check_rates()
        q1 = privacy.drawn(f / 2)
        object.__setattr__(self, "p1", 1.0 - q1)
        object.__setattr__(self, "q1", q1)
        object.__setattr__(self, "p2", privacy.drawn(q))
        object.__setattr__(self, "q2", privacy.drawn(p))

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
        """ε1 = h·ln[q*(1−p*)/(p*(1−q*))] ([ERL14] Theorem 2) for encodings that differ in h
        bits each way; in general :func:`longldp.privacy.rappor_bits_epsilon` of
        ``differing_bits`` (boolean RAPPOR: one bit, one way), at (q*, p*) = (P1, P0) of the
        stored chain, the probabilities its samplers draw with, and their complements summed
        per round (:func:`longldp.privacy.chain_nonsupport`)."""
        n1, n0 = privacy.chain_nonsupport(self.p1, self.q1, self.p2, self.q2)
        eps = privacy.rappor_bits_epsilon(self.P1, self.P0, *self.differing_bits, n1, n0)
        return privacy.round_up(eps)

    def first_round_epsilon(self) -> float:
        """ε∞ = 2h·ln((1−f/2)/(f/2)) ([ERL14] Theorem 1); in general
        :func:`longldp.privacy.rappor_bits_epsilon` of ``differing_bits`` at the PRR's stored
        (p1, q1) (:func:`longldp.privacy.rappor_prr_epsilon` is the same from f)."""
        eps = privacy.rappor_bits_epsilon(self.p1, self.q1, *self.differing_bits)
        return privacy.round_up(eps)

    @property
    def effective(self) -> tuple[float, float]:
        """(q*, p*): P(report bit 1 | encoded bit 1), P(report bit 1 | encoded bit 0)."""
        return self.P1, self.P0

    # ------------------------------------------------------------------ shapes
    @property
    def report_dtype(self) -> np.dtype:
        """Records of (cohort int64, the packed report bits)."""
        return np.dtype([("cohort", np.int64), ("bits", np.uint8, (self.nbytes,))])

    @property
    def report_nbytes(self) -> int:
        return 2 + self.nbytes

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

    def _check_m(self) -> None:
        check.integer(self.name, "m", self.m, minimum=1, maximum=MAX_COHORTS)

    # ------------------------------------------------------------------ encoders
    def encode(self, values: Any, cohorts: ArrayLike) -> NDArray[np.uint8]:
        """Packed encodings (n, ⌈k/8⌉) of ``values`` for clients in ``cohorts``."""
        raise NotImplementedError

    def _parse_values(self, values: Any) -> tuple[Any, int]:
        """The population path's values, checked, and their number."""
        raise NotImplementedError

    def possible_encodings(self) -> NDArray[np.bool_]:
        """Every encoding (P, k) a client can hold (the exact audit's channel inputs)."""
        raise NotImplementedError

    def _encodings(self, keys: NDArray[np.int64], state: dict) -> NDArray[np.uint8]:
        """Packed encodings of round 1's inputs (the population path keeps them in state)."""
        return state["bloom"]

    def _round1_bits(
        self, enc: NDArray[np.uint8], hi: float, lo: float, rng: RandomSource
    ) -> NDArray[np.uint8]:
        """Each encoded bit becomes 1 w.p. ``hi`` (bit set) or ``lo`` (not set), packed."""
        out = np.empty_like(enc)
        for rows in row_slices(enc.shape[0], self.k):
            bits = np.unpackbits(enc[rows], axis=1, count=self.k).astype(bool)
            u = rng.random(bits.shape)
            out[rows] = np.packbits(np.where(bits, u < hi, u < lo), axis=1)
        return out

    # ------------------------------------------------------------------ population path
    def new_memo(self, n_users: int) -> RapporMemo:
        """Empty state for ``n_users`` clients (cohorts drawn on first report, kept forever)."""
        n_users = check.integer(self.name, "n_users", n_users, minimum=1)
        store = self._memo_store(n_users) if self.longitudinal else None
        return RapporMemo(n_users, store, has_state=np.zeros(n_users, dtype=bool))

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        """Each client's cohort, uniform on [0, m), drawn once (no draw when m = 1)."""
        if self.m == 1:
            return {"cohort": np.zeros(m, dtype=np.int64)}
        return {"cohort": np.asarray(rng.integers(0, self.m, size=m), dtype=np.int64)}

    def _check_population_values(self, values: Any) -> tuple[Any, int]:
        return self._parse_values(values)

    def _population_memo(self, memo: PopulationMemo | None, n: int) -> PopulationMemo:
        memo = super()._population_memo(memo, n)
        if not isinstance(memo, RapporMemo):
            raise ValueError(f"{self.name}: 'memo' must come from {self.name}'s new_memo.")
        return memo

    def _memo_keys(
        self, parsed: Any, memo: PopulationMemo, state: dict
    ) -> tuple[Any, NDArray[np.int64]]:
        """(values, memo keys) of one call; the default: the values are the keys."""
        return parsed, parsed

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        out = np.empty(payload.shape[0], dtype=self.report_dtype)
        out["cohort"] = state["cohort"]
        out["bits"] = payload
        return out

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = {"cohort": np.zeros(1, dtype=np.int64)}
        return np.zeros((1, self.nbytes), dtype=np.uint8), state

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

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray[np.int64]:
        """Per cohort and bit: Bin(#PRR ones, q) + Bin(#PRR zeros, p)."""
        ones, n_j = self._cohort_sums(memos, step.state["cohort"])
        drawn = rng.binomial(ones, self.p2) + rng.binomial(n_j[:, None] - ones, self.q2)
        return self._support(drawn, n_j)

    def _support(self, ones: NDArray[np.int64], n_j: NDArray[np.int64]) -> NDArray[np.int64]:
        """google/rappor's (m, k + 1) counts matrix: N_j, then the ones of each bit."""
        return np.concatenate([n_j[:, None], ones], axis=1)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """google/rappor's (m, k + 1) counts matrix of a batch of reports."""
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

    def check_reports(self, records: ArrayLike) -> NDArray:
        """Records with fields cohort and bits, every cohort and bit checked (1-D)."""
        return self._check_reports(np.asarray(records))

    # ------------------------------------------------------------------ bytes
    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        rec = self._check_reports(reports)
        out = np.empty((rec.size, 2 + self.nbytes), dtype=np.uint8)
        out[:, :2] = rec["cohort"].astype(">u2").view(np.uint8).reshape(-1, 2)
        out[:, 2:] = rec["bits"]
        return out

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        coh = rows[:, :2].copy().view(">u2").ravel().astype(np.int64)
        rec = np.empty(rows.shape[0], dtype=self.report_dtype)
        rec["cohort"] = coh
        rec["bits"] = rows[:, 2:]
        return self._check_reports(rec)

    # ------------------------------------------------------------------ one client
    def client(self, rng: RandomSource | None = None, **options: Any) -> Any:
        """One device (:func:`~longldp.protocols.rappor.client.rappor_client`: ``secret``,
        ``cohort``, ``prr_source``, ``metric``, ``memo``, ``round1``, ``round2``): a cohort, a
        memoized PRR per distinct encoding, a fresh IRR from ``rng``."""
        return rappor_client(self, rng, **options)

    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        """(the packed encoding as bytes, the packed encoding): the PRR is memoized per
        encoding, as in google/rappor where it is a function of the bits."""
        enc = self.encode([self._check_value(value)], state["cohort"])
        return enc.tobytes(), enc

    def client_round1(self, encoded: Any, state: dict, rng: RandomSource) -> NDArray:
        """PRR of one encoding (a one-time variant: PRR then IRR, (q*, p*))."""
        return self._round1_bits(encoded, self.p1, self.q1, rng)


class CohortShares(RapporChain):
    """Encoders whose support is the (m, k + 1) counts matrix and whose estimate is, per cohort
    and bit, the share of clients whose encoded bit is set (Bloom, boolean). Memo keys are ids
    of distinct encodings in the population's pattern table."""

    estimand: ClassVar[Estimand] = Estimand.COHORT_SHARES

    @property
    def support_shape(self) -> tuple[int, ...]:
        """google/rappor's counts matrix: (m, k + 1)."""
        return (self.m, self.k + 1)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """Per cohort and bit: (m, k)."""
        return (self.m, self.k)

    def _memo_store(self, n_users: int) -> Any:
        from longldp.protocols._memo import MemoStore

        return MemoStore(n_users, PATTERN_KEY_RANGE, (self.nbytes,), np.uint8)

    def _pattern_rows(
        self, parsed: Any, cohorts: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
        """(index of each client's distinct encoding, packed distinct encodings)."""
        raise NotImplementedError

    def _memo_keys(
        self, parsed: Any, memo: PopulationMemo, state: dict
    ) -> tuple[Any, NDArray[np.int64]]:
        assert isinstance(memo, RapporMemo)
        coh = self._check_cohorts(state["cohort"])
        inv, upacked = self._pattern_rows(parsed, coh)
        # Memo key: the id of the distinct pattern (equal filters share one PRR).
        ids = np.array(
            [memo.patterns.setdefault(row.tobytes(), len(memo.patterns)) for row in upacked],
            dtype=np.int64,
        )
        state["bloom"] = upacked[inv]
        keys = ids[inv]
        return keys, keys

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """PRR of the encoded bits."""
        return self._round1_bits(self._encodings(keys, state), self.p1, self.q1, rng)

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        """Not for per-cohort shares: use :meth:`RAPPOR.sample_counts` (strings)."""
        raise ValueError(
            f"{self.name}: sample_support takes value counts of the one-hot encoder; for "
            "strings use sample_counts(strings, counts, rng)."
        )

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        return self.sample_support(counts, n, rng)

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """Per cohort and bit the share t̂_ij/N_j of clients whose encoded bit is set:
        (c_ij/N_j − p*)/(q* − p*); NaN for empty cohorts."""
        n_j = support[..., :1]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(n_j > 0, support[..., 1:] / np.where(n_j > 0, n_j, 1), np.nan)
        return (share - self.P0) / (self.P1 - self.P0)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per cohort j, the variance of a share of N_j reports (NaN for an empty cohort)."""
        n_j = np.asarray(support)[:, 0]
        out = np.full(plug_in.shape, np.nan)
        for j in np.flatnonzero(n_j):
            out[j] = self.variance(int(n_j[j]), plug_in[j])
        return out


class OneTime:
    """Mixin of the one-time variants: one report per client, PRR then IRR drawn afresh for
    every report (nothing memoized, f = 0 allowed); a one-shot oracle whose round 1 is the
    composed channel (q*, p*) and whose every report costs ε1."""

    longitudinal: ClassVar[bool] = False
    k: int
    m: int
    f: float
    p: float
    q: float
    P1: float
    P0: float

    def _set_chain(self) -> None:
        f, p, q = self._check_rates(allow_f0=True)  # type: ignore[attr-defined]
        q_star, p_star = privacy.rappor_effective(p, q, f)
        object.__setattr__(self, "p1", privacy.drawn(q_star))  # as the one draw realizes them
        object.__setattr__(self, "q1", privacy.drawn(p_star))
        object.__setattr__(self, "p2", 1.0)
        object.__setattr__(self, "q2", 0.0)

    def first_round_epsilon(self) -> float:
        """Nothing is memoized: ε1."""
        return self.single_report_epsilon()  # type: ignore[attr-defined]

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """PRR then IRR in one draw: each encoded bit is 1 w.p. q* (set) or p* (not set)."""
        enc = self._encodings(keys, state)  # type: ignore[attr-defined]
        return self._round1_bits(enc, self.P1, self.P0, rng)  # type: ignore[attr-defined]

    def perturb_support(
        self, values: Any, memo: PopulationMemo, rng: Any = None, users: ArrayLike | None = None
    ) -> NDArray:
        """Support of :meth:`perturb` at count level: per cohort and bit,
        Bin(#set, q*) + Bin(#unset, p*) of the clients' encodings."""
        source = as_random_source(rng)
        step = self._population_step(values, memo, users, source)  # type: ignore[attr-defined]
        step.memo.reports[step.users] += 1
        enc = self._encodings(step.keys, step.state)  # type: ignore[attr-defined]
        ones, n_j = self._cohort_sums(enc, step.state["cohort"])  # type: ignore[attr-defined]
        drawn = source.binomial(ones, self.P1) + source.binomial(n_j[:, None] - ones, self.P0)
        return self._support(drawn, n_j)  # type: ignore[attr-defined]
