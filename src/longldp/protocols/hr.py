"""Hadamard response (HR): a one-shot oracle whose report is one of K = 2^⌈log₂(k + 1)⌉ rows.

Acharya, Sun and Zhang, "Hadamard response: estimating distributions privately, efficiently,
and with little communication", AISTATS 2019 ([ASZ19] §3, the scheme for the high-privacy
regime). With the Sylvester matrix H[y, j] = (−1)^popcount(y AND j) of order K, value v ∈ [k]
is column v + 1 (column 0 is all ones) and C_v = {y : H[y, v + 1] = +1} is half the rows. A
user holding v reports y uniform on C_v with probability P1 = e^ε/(e^ε + 1), else uniform on
its complement:

    Pr[y | v] = 2·P1/K (y ∈ C_v),   2·(1 − P1)/K (otherwise),   ε = ln(P1/(1 − P1)),

and y supports every value u with y ∈ C_u. Two columns agree on exactly half the rows, so a
non-holder supports v with P0 = ½: the estimator and variance are every oracle's (docs/math.md
§1, §2.6), f̂_v = (C_v/n − ½)/(P1 − ½). A report is log₂K bits; the server's support counts
are C_v = (n + (H·T)[v + 1])/2 for the histogram T of the reports, one fast Walsh–Hadamard
transform, O(n + K log K).

The sampler draws one uniform u (y ∈ C_v iff u < P1) and one uniform row r of [0, K); r is kept
when it is on the wanted side of column v + 1, else its bit at the lowest set bit of v + 1 is
flipped (which moves it to the other side): y is then uniform on the wanted half.

Not implemented: [ASZ19]'s general scheme for large ε (blocks of smaller Hadamard matrices,
order-optimal when e^ε is large); at ε > 1 this scheme's variance is above SS's and OLH's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.linkage import Linkage
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    ReportKind,
    bytes_to_uint,
    min_bytes,
    set_derived,
    uint_to_bytes,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.hadamard import MAX_K, fwht, hadamard_parity
from longldp.protocols.report_kinds import EnumeratedReports


class HadamardResponseReports(EnumeratedReports):
    """One row y of [0, K) that supports every value v with H[y, v + 1] = +1: an enumerated
    channel (K outputs) whose support sets the attacks can craft with (``enumerated``)."""

    def supports(self, proto: Any, outputs: ArrayLike) -> NDArray[np.bool_]:
        """(len(outputs), k): output y supports value v (y ∈ C_v)."""
        y = np.asarray(outputs, dtype=np.int64)
        columns = np.arange(1, proto.k + 1, dtype=np.int64)
        return hadamard_parity(y[:, None], columns[None, :]) == 0

    def records(self, proto: Any, outputs: ArrayLike) -> NDArray[np.int64]:
        """Report records of outputs (the row itself)."""
        return np.asarray(outputs, dtype=np.int64)

    def attack_kind(self, proto: Any) -> str:
        return "enumerated"


#: Hadamard response's report kind.
HADAMARD_RESPONSE = HadamardResponseReports()


@dataclass(frozen=True)
class HR(OneShot, FrequencyOracle):
    """Hadamard response at ε: a row of the K × K Sylvester matrix, in C_v w.p. e^ε/(e^ε + 1)
    ([ASZ19] §3, the high-privacy scheme)."""

    k: int
    eps: float
    K: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "HR"
    aliases: ClassVar[tuple[str, ...]] = ("hadamard-response",)
    #: Nothing persists: no per-device state, every report a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    wire_id: ClassVar[int] = 23
    report_kind: ClassVar[ReportKind] = HADAMARD_RESPONSE
    client_spec: ClassVar[ClientSpec | None] = ClientSpec(
        family="hr",
        chain="p1 = D(1/(1 + e^(−ε))), q1 = 0.5; K = 2^⌈log₂(k + 1)⌉",
        round2="1, 0",
        eps_1="ρ(ln(p1/(1 − p1)))",
        eps_perm="the same",
        state="none",
        memo_key="v",
        round1=(
            "one float u, then an integer r in [0, K); c = v + 1, b = the lowest set bit of c; "
            "y = r if (popcount(r AND c) mod 2 = 0) = (u < p1), else r XOR b"
        ),
        draws2="none (one-shot)",
        derived=("K",),
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "eps": 1.0}, (3, 3, 9, 0)),
        VectorCase({"k": 7, "eps": 2.5}, (6, 0, 6), suffix="full"),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)

    def __post_init__(self) -> None:
        self._validate_common()
        check.integer(self.name, "k", self.k, minimum=2, maximum=MAX_K - 1)
        p1, p0 = privacy.hadamard_response_probabilities(self.eps)
        set_derived(self, K=privacy.hadamard_response_size(self.k), p1=p1, q1=p0)

    # ------------------------------------------------------------------ privacy
    def single_report_epsilon(self) -> float:
        """ln(P1/(1 − P1)) of the sampler's threshold P1 (the channel's worst ratio)."""
        return privacy.round_up(privacy.hadamard_response_epsilon(self.p1))

    def first_round_epsilon(self) -> float:
        return self.single_report_epsilon()

    # ------------------------------------------------------------------ client
    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """u, then r; y = r when r is on the wanted side of column v + 1, else r XOR b."""
        v = np.asarray(keys, dtype=np.int64)
        want = rng.random(v.shape) < self.p1  # y ∈ C_v
        r = np.asarray(rng.integers(0, self.K, size=v.shape), dtype=np.int64)
        column = v + 1
        inside = hadamard_parity(r, column) == 0
        return np.where(inside == want, r, r ^ (column & -column))

    # ------------------------------------------------------------------ server
    def _check_rows(self, reports: NDArray) -> NDArray[np.int64]:
        return check.domain_values(self.name, reports, self.K, "reports")

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """C_v = (n + (H·T)[v + 1])/2 with T the histogram of the rows: one transform."""
        y = self._check_rows(reports).ravel()
        transformed = fwht(np.bincount(y, minlength=self.K).astype(np.int64))
        return (y.size + transformed[1 : self.k + 1]) // 2

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """C_v = Bin(n_v, P1) + Bin(n − n_v, ½): each C_v's exact law. Across values the counts
        are drawn independently, whereas one report's supports of u and v are correlated when
        (u + 1) XOR (v + 1) is the column of the user's value (not reproduced, as for SS and
        dBitFlipPM; docs/math.md §2.6)."""
        return rng.binomial(counts, self.P1) + rng.binomial(n - counts, self.P0)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        return self._sample_support(counts, totals, rng)  # the draws broadcast over timestamps

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        return uint_to_bytes(self._check_rows(reports), min_bytes(self.K - 1))

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return self._check_rows(bytes_to_uint(rows))

    # ------------------------------------------------------------------ the enumerated channel
    def report_space_size(self) -> int:
        """K rows."""
        return self.K

    def report_channel(self) -> NDArray[np.float64]:
        """Pr[y | v] = 2·P1/K on C_v, 2·(1 − P1)/K off it (the sampler's P1 and its complement)."""
        rows = np.arange(self.K, dtype=np.int64)
        inside = hadamard_parity(rows[None, :], np.arange(1, self.k + 1)[:, None]) == 0
        return np.where(inside, 2.0 * self.p1 / self.K, 2.0 * (1.0 - self.p1) / self.K)

    def report_index(self, reports: NDArray) -> NDArray[np.int64]:
        """The row is the column of the channel."""
        return self._check_rows(reports).ravel()
