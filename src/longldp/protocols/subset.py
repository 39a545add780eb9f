"""Subset selection (SS): a one-shot oracle whose report is a size-ω subset of the domain.

Wang, Huang, Wang, Lin, Chen, "Mutual information optimally local private discrete distribution
estimation", 2016 ([WAN16] §4); Ye and Barg, "Optimal schemes for discrete distribution
estimation under locally differential privacy", IEEE Trans. Inf. Theory 64(8), 2018 ([YE18]).
A user holding v reports a subset Y of [k] of size ω, drawn with Pr[Y | v] ∝ e^ε if v ∈ Y and
∝ 1 otherwise; sampled as: v ∈ Y with probability P1 = ω·e^ε/(ω·e^ε + k − ω), then the other
members uniformly from [k] \\ {v} (ω − 1 of them, or ω). Y supports every value it holds:

    P1 = ω·e^ε/(ω·e^ε + k − ω),   P0 = (ω − P1)/(k − 1),   ε = ln[P1·(k − ω)/((1 − P1)·ω)],

and the estimator and its variance are every oracle's (docs/math.md §1, §2.5). ω defaults to
the integer minimising V* near k/(e^ε + 1) (:func:`longldp.privacy.subset_size`); ω = 1 is GRR.

A report is the subset as k bits, packed like a unary-encoding report (⌈k/8⌉ bytes, exactly ω
bits set); its exact channel is enumerated by :meth:`SubsetSelection.report_channel` for the
audit (report kind ``enumerated``).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.linkage import Linkage
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    ReportKind,
    packed_column_sums,
    row_slices,
    set_derived,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import EnumeratedReports


class SubsetReports(EnumeratedReports):
    """An enumerated report that is a subset of fixed size ω of the domain, supporting its
    members: attackable as ``subset`` (docs/attacks.md §1) when its report space is exactly
    the C(k, ω) subsets."""

    def attack_kind(self, proto: Any) -> str:
        omega = proto.omega
        if (
            isinstance(omega, int)
            and 1 <= omega < proto.k
            and proto.report_space_size() == math.comb(proto.k, omega)
        ):
            return "subset"
        raise ValueError(
            f"'{proto.name}' has an enumerated report space that is not the subsets "
            "of a fixed size 'omega' of the domain; its reports are opaque to the attacks (no "
            "attack knows which values they support)."
        )


#: Subset selection's report kind.
SUBSETS = SubsetReports()


@dataclass(frozen=True)
class SubsetSelection(OneShot, FrequencyOracle):
    """Subset selection at ε: report ω of the k values, the own value with P1 ([WAN16], [YE18])."""

    k: int
    eps: float
    omega: int | None = None
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    not_p1: float = field(init=False, repr=False)
    name: ClassVar[str] = "SS"
    linkage: ClassVar[Linkage] = Linkage()
    aliases: ClassVar[tuple[str, ...]] = ("subset-selection",)
    wire_id: ClassVar[int] = 22
    client_spec: ClassVar[ClientSpec | None] = ClientSpec(
        family="ss",
        chain=(
            "with A = ω·e^ε: p1 = D(A/(A + k − ω)), q1 = (ω − p1)/(k − 1); also n1 = 1 − p1 (exact)"
        ),
        round2="1, 0",
        eps_1="ρ(ln(p1·(k − ω)/(n1·ω)))",
        eps_perm="the same",
        state="none",
        memo_key="v",
        round1=(
            "one float u′: v is held if u′ < p1; then k floats u_i with u_v replaced by 2; Y = "
            "the ω − 1 indices of smallest u, plus v if held, else the index of the ω-th "
            "smallest; the report is Y as k bits. Equal u (probability below k²·2⁻⁵⁴) are ordered "
            "by index here, whereas NumPy's `argpartition` in the Python client leaves their "
            "order unspecified"
        ),
        draws2="none (one-shot)",
        derived=("omega",),
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "eps": 1.0}, (3, 3, 9, 0)),
        VectorCase({"k": 20, "eps": 0.5, "omega": 7}, (19, 0, 7), suffix="omega"),
    )
    report_kind: ClassVar[ReportKind] = SUBSETS
    #: At ε = 0.5 the V*-optimal ω is 2 for k = 6 (1, GRR, at k ≤ 3).
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 0.5},)

    def __post_init__(self) -> None:
        self._validate_common()
        if self.omega is None:
            omega = privacy.subset_size(self.eps, self.k)
        else:
            omega = check.integer(self.name, "omega", self.omega, minimum=1, maximum=self.k - 1)
        set_derived(self, omega=omega)
        p1, p0, not_p1 = privacy.subset_probabilities(self.eps, self.k, omega)
        set_derived(self, p1=p1, q1=p0, not_p1=not_p1)

    @property
    def nbytes(self) -> int:
        """Bytes of one report body: ⌈k/8⌉."""
        return (self.k + 7) // 8

    def single_report_epsilon(self) -> float:
        """ln[P1·(k − ω)/((1 − P1)·ω)] (= ε): the worst ratio of the sampler's subsets."""
        assert self.omega is not None
        return privacy.round_up(privacy.subset_epsilon(self.p1, self.not_p1, self.k, self.omega))

    def first_round_epsilon(self) -> float:
        return self.single_report_epsilon()

    # ------------------------------------------------------------------ client
    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """v ∈ Y w.p. P1 (one uniform each); the others: the smallest of k uniform keys, the
        user's own value excluded (the ω − 1 smallest, plus the ω-th when v is left out)."""
        assert self.omega is not None
        out = np.empty((keys.size, self.nbytes), dtype=np.uint8)
        for rows in row_slices(keys.size, self.k):
            v = keys[rows]
            m = v.size
            held = rng.random(m) < self.p1
            noise = rng.random((m, self.k))
            noise[np.arange(m), v] = 2.0  # never among the smallest
            chosen = np.argpartition(noise, self.omega - 1, axis=1)[:, : self.omega]
            chosen[:, -1] = np.where(held, v, chosen[:, -1])
            bits = np.zeros((m, self.k), dtype=bool)
            bits[np.arange(m)[:, None], chosen] = True
            out[rows] = np.packbits(bits, axis=1)
        return out

    # ------------------------------------------------------------------ server
    def _check_rows(self, reports: NDArray) -> NDArray[np.uint8]:
        rows = np.asarray(reports)
        if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != self.nbytes:
            raise ValueError(
                f"{self.name}: 'reports' must be packed subsets, uint8 of shape "
                f"(n, {self.nbytes}); got {rows.dtype} {rows.shape}."
            )
        bits = np.unpackbits(rows, axis=1)
        if np.any(bits[:, self.k :]) or np.any(bits.sum(axis=1) != self.omega):
            raise ValueError(
                f"{self.name}: every report must hold exactly omega = {self.omega} of the "
                f"values 0..{self.k - 1}."
            )
        return rows

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """How often each value is in the reported subsets (column sums of the bits)."""
        return packed_column_sums(self._check_rows(reports), self.k)

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """C_v = Bin(n_v, P1) + Bin(n − n_v, P0): each C_v's exact law. Across values the
        counts are drawn independently, whereas a subset holds exactly ω values (a small
        negative correlation that is not reproduced; docs/design.md §4)."""
        return rng.binomial(counts, self.P1) + rng.binomial(n - counts, self.P0)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        return self._sample_support(counts, totals, rng)

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        return self._check_rows(reports)

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.uint8]:
        return self._check_rows(rows)

    # ------------------------------------------------------------------ the enumerated channel
    def report_space_size(self) -> int:
        """C(k, ω) subsets."""
        assert self.omega is not None
        return math.comb(self.k, self.omega)

    @functools.cached_property
    def _subsets(self) -> NDArray[np.bool_]:
        """Every ω-subset (rows, lexicographic order) as a k-bit mask."""
        assert self.omega is not None
        combos = list(itertools.combinations(range(self.k), self.omega))
        masks = np.zeros((len(combos), self.k), dtype=bool)
        for i, c in enumerate(combos):
            masks[i, list(c)] = True
        return masks

    def report_channel(self) -> NDArray[np.float64]:
        """Pr[Y | v] = P1/C(k−1, ω−1) if v ∈ Y, else (1 − P1)/C(k−1, ω), for every ω-subset Y
        (the sampler's probabilities: v ∈ Y w.p. P1, the rest uniform)."""
        assert self.omega is not None
        held = self.p1 / math.comb(self.k - 1, self.omega - 1)
        free = self.not_p1 / math.comb(self.k - 1, self.omega)
        return np.where(self._subsets.T, held, free)

    def report_index(self, reports: NDArray) -> NDArray[np.int64]:
        """The row of :attr:`_subsets` (column of the channel) of each report."""
        packed = np.packbits(self._subsets, axis=1)
        table = {row.tobytes(): i for i, row in enumerate(packed)}
        rows = self._check_rows(reports)
        return np.array([table[row.tobytes()] for row in rows], dtype=np.int64)
