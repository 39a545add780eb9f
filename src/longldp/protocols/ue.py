"""Unary-encoding oracles, one-shot (SUE, OUE) and memoized (L-SUE, L-OUE, L-OSUE, L-SOUE).

A report is a k-bit vector, bit-packed (``numpy.packbits``, big bit order) into ⌈k/8⌉ bytes.
Round 1 one-hot encodes the value and keeps the 1 with p1, sets each 0 with q1; round 2 acts on
every memoized bit independently with (p2, q2). Bits are independent, so a report supports v
with probability P1 (value v) or P0 (otherwise), and one report's ε is
ln[P1(1−P0)/(P0(1−P1))] ([002] eq. 6).

References: [WAN17] §4.2 (SUE, OUE); [ERL14] (RAPPOR = L-SUE); [ARC22] §4.3 (L-OUE, L-OSUE,
L-SOUE); docs/math.md §3.3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import privacy
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._memo import DenseMemoStore, MemoStore, make_memo_store
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    PopulationStep,
    ReportKind,
    packed_column_sums,
    row_slices,
    set_derived,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import BitReports

#: The report kind of the unary encodings: k independent bits.
BITS = BitReports()


#: SUE's rows of docs/client-spec.md; the other unary encodings differ in their chain (their
#: JavaScript family is ue.js).
SUE_CLIENT = ClientSpec(
    family="ue",
    chain="p1 = D(1/(1 + e^(−ε/2))), q1 = 1 − p1",
    round2="1, 0",
    eps_1="ρ(ln(P1·N0/(P0·N1)))",
    eps_perm="ρ(ln(p1(1 − q1)/(q1(1 − p1))))",
    state="none",
    memo_key="v",
    round1="k floats u_i: bit_i = u_i < q1; then one float u: bit_v = u < p1",
    draws2="none (one-shot)",
)
OUE_CLIENT = dataclasses.replace(SUE_CLIENT, chain="p1 = 0.5, q1 = D(1/(e^ε + 1))")
#: Round 2 of the unary-encoding chains, per memo bit.
_UE_ROUND2 = (
    "k floats u_i: if p2 = 1 − q2 exactly, bit_i = memo_i XOR (u_i < q2), else bit_i = "
    "u_i < (memo_i ? p2 : q2)"
)
LSUE_CLIENT = dataclasses.replace(
    SUE_CLIENT,
    chain="SUE at a",
    round2="p2 = D(0.5·(1 + tanh(b/4)/tanh(a/4))), q2 = 1 − p2",
    draws2=_UE_ROUND2,
)
LOSUE_CLIENT = dataclasses.replace(
    LSUE_CLIENT, chain="OUE at a", round2="p2 = D(expm1(a + b)/((e^b + 1)·expm1(a))), q2 = 1 − p2"
)
LOUE_CLIENT = dataclasses.replace(
    LSUE_CLIENT, chain="OUE at a", round2="p2 = 0.5, q2 = D(Q(p1, q1, b))"
)
LSOUE_CLIENT = dataclasses.replace(LOUE_CLIENT, chain="SUE at a")


class _UnaryEncoding(FrequencyOracle):
    """Shared machinery: packed bit vectors, bitwise rounds, column sums."""

    report_kind: ClassVar[ReportKind] = BITS

    @property
    def nbytes(self) -> int:
        return (self.k + 7) // 8

    def single_report_epsilon(self) -> float:
        """ln[P1(1−P0)/(P0(1−P1))]: two inputs differ in two bits (exact channel)."""
        N1, N0 = privacy.chain_nonsupport(self.p1, self.q1, self.p2, self.q2)
        return privacy.round_up(privacy.ue_report_epsilon(self.P1, self.P0, N1, N0))

    def first_round_epsilon(self) -> float:
        return privacy.round_up(privacy.ue_report_epsilon(self.p1, self.q1))

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.k, (self.nbytes,), np.uint8)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        out = np.empty((keys.size, self.nbytes), dtype=np.uint8)
        for rows in row_slices(keys.size, self.k):
            v = keys[rows]
            bits = rng.random((v.size, self.k)) < self.q1
            bits[np.arange(v.size), v] = rng.random(v.size) < self.p1
            out[rows] = np.packbits(bits, axis=1)
        return out

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        """Bit i of the report is 1 w.p. p2 if the memo bit is set, else q2. With p2 = 1 − q2
        exactly (L-SUE, L-OSUE; both on the sampler's grid, so the complement is exact) that is
        the memo XOR flips of probability q2, on packed bytes."""
        out = np.empty_like(payload)
        symmetric = self.p2 == 1.0 - self.q2
        for rows in row_slices(payload.shape[0], self.k):
            u = rng.random((rows.stop - rows.start, self.k))
            if symmetric:
                out[rows] = payload[rows] ^ np.packbits(u < self.q2, axis=1)
            else:
                memo = np.unpackbits(payload[rows], axis=1, count=self.k).astype(bool)
                out[rows] = np.packbits(np.where(memo, u < self.p2, u < self.q2), axis=1)
        return out

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray[np.int64]:
        """Bit i of the reports sums to Bin(#memos with bit i set, p2) + Bin(the rest, q2)."""
        ones = packed_column_sums(memos, self.k)
        return rng.binomial(ones, self.p2) + rng.binomial(memos.shape[0] - ones, self.q2)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """Column sums of the packed bit vectors."""
        return packed_column_sums(self._check_rows(reports), self.k)

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """C_v = Bin(n_v, P1) + Bin(n − n_v, P0), independent over v: the bits of one report are
        independent, so this is the exact joint law of the column sums."""
        return rng.binomial(counts, self.P1) + rng.binomial(n - counts, self.P0)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        return self._sample_support(counts, totals, rng)  # the draws broadcast over timestamps

    def _check_rows(self, reports: NDArray) -> NDArray[np.uint8]:
        rows = np.asarray(reports)
        if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != self.nbytes:
            raise ValueError(
                f"{self.name}: 'reports' must be packed bit vectors, uint8 of shape "
                f"(n, {self.nbytes}); got {rows.dtype} {rows.shape}."
            )
        pad = self.nbytes * 8 - self.k
        if pad and np.any(rows[:, -1] & np.uint8((1 << pad) - 1)):
            raise ValueError(f"{self.name}: 'reports' has bits set beyond position k = {self.k}.")
        return rows

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        return self._check_rows(reports)

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.uint8]:
        return self._check_rows(rows)


def _set_chain(obj: object, p1: float, q1: float, p2: float, q2: float) -> None:
    set_derived(obj, p1=p1, q1=q1, p2=p2, q2=q2)


@dataclass(frozen=True)
class _OneShotUE(OneShot, _UnaryEncoding):
    k: int
    eps: float
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)


@dataclass(frozen=True)
class SUE(_OneShotUE):
    """Symmetric UE (basic one-time RAPPOR): p = e^{ε/2}/(e^{ε/2}+1), q = 1 − p ([WAN17] §4.2)."""

    name: ClassVar[str] = "SUE"
    linkage: ClassVar[Linkage] = Linkage()
    wire_id: ClassVar[int] = 2
    client_spec: ClassVar[ClientSpec | None] = SUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 12, "eps": 2.0}, (0, 11, 11)),
    )

    def __post_init__(self) -> None:
        self._validate_common()
        _set_chain(self, *privacy.sue_probabilities(self.eps), 1.0, 0.0)


@dataclass(frozen=True)
class OUE(_OneShotUE):
    """Optimized UE: p = 1/2, q = 1/(e^ε+1) ([WAN17] §4.2, eq. 11)."""

    name: ClassVar[str] = "OUE"
    linkage: ClassVar[Linkage] = Linkage()
    wire_id: ClassVar[int] = 3
    client_spec: ClassVar[ClientSpec | None] = OUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (VectorCase({"k": 12, "eps": 1.5}, (5, 5, 2)),)

    def __post_init__(self) -> None:
        self._validate_common()
        _set_chain(self, *privacy.oue_probabilities(self.eps), 1.0, 0.0)


@dataclass(frozen=True)
class _UEChain(_UnaryEncoding):
    k: int
    eps_perm: float
    eps_1: float
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    longitudinal: ClassVar[bool] = True
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")
    test_params: ClassVar[tuple[dict, ...]] = ({"eps_perm": 2.0, "eps_1": 1.0},)


@dataclass(frozen=True)
class LSUE(_UEChain):
    """L-SUE (RAPPOR): SUE(ε∞) memoized, symmetric round 2 with 2p2−1 = tanh(ε1/4)/tanh(ε∞/4)."""

    name: ClassVar[str] = "L-SUE"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    wire_id: ClassVar[int] = 7
    client_spec: ClassVar[ClientSpec | None] = LSUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 16, "eps_perm": 3.0, "eps_1": 1.0}, (2, 2, 15)),
    )

    def __post_init__(self) -> None:
        self._validate_common()
        p2 = privacy.lsue_p2(self.eps_perm, self.eps_1)
        _set_chain(self, *privacy.sue_probabilities(self.eps_perm), p2, 1 - p2)


@dataclass(frozen=True)
class LOSUE(_UEChain):
    """L-OSUE: OUE(ε∞) memoized, symmetric round 2, p2 = (ab−1)/((b+1)(a−1)) ([ARC22] eq. 15).

    One report behaves exactly like OUE at ε1: V* = 4e^{ε1}/(n(e^{ε1}−1)²).
    """

    name: ClassVar[str] = "L-OSUE"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    wire_id: ClassVar[int] = 10
    client_spec: ClassVar[ClientSpec | None] = LOSUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 100, "eps_perm": 2.0, "eps_1": 0.8}, (42, 42, 99, 0, 42)),
    )

    def __post_init__(self) -> None:
        self._validate_common()
        p2 = privacy.losue_p2(self.eps_perm, self.eps_1)
        _set_chain(self, *privacy.oue_probabilities(self.eps_perm), p2, 1 - p2)


@dataclass(frozen=True)
class LOUE(_UEChain):
    """L-OUE: OUE(ε∞) memoized, round 2 with p2 = 1/2 and q2 solving the ε1 quadratic.

    Reaches only α = ε1/ε∞ below :func:`longldp.privacy.max_alpha` ("l-oue").
    """

    name: ClassVar[str] = "L-OUE"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    wire_id: ClassVar[int] = 8
    client_spec: ClassVar[ClientSpec | None] = LOUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 16, "eps_perm": 2.0, "eps_1": 0.5}, (0, 9, 0)),
    )

    @classmethod
    def max_alpha(cls, eps_perm: float, **params: Any) -> float:
        """:func:`longldp.privacy.max_alpha` of L-OUE."""
        return privacy.max_alpha(cls.name, eps_perm)

    def __post_init__(self) -> None:
        self._validate_common()
        q2 = privacy.loue_q2(self.eps_perm, self.eps_1)
        _set_chain(self, *privacy.oue_probabilities(self.eps_perm), 0.5, q2)


@dataclass(frozen=True)
class LSOUE(_UEChain):
    """L-SOUE: SUE(ε∞) memoized, round 2 with p2 = 1/2 and q2 solving the ε1 quadratic."""

    name: ClassVar[str] = "L-SOUE"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    wire_id: ClassVar[int] = 9
    client_spec: ClassVar[ClientSpec | None] = LSOUE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 16, "eps_perm": 2.0, "eps_1": 0.5}, (8, 8, 1)),
    )

    @classmethod
    def max_alpha(cls, eps_perm: float, **params: Any) -> float:
        """:func:`longldp.privacy.max_alpha` of L-SOUE."""
        return privacy.max_alpha(cls.name, eps_perm)

    def __post_init__(self) -> None:
        self._validate_common()
        q2 = privacy.lsoue_q2(self.eps_perm, self.eps_1)
        _set_chain(self, *privacy.sue_probabilities(self.eps_perm), 0.5, q2)
