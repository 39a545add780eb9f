"""Generalized randomized response, one-shot (GRR) and memoized (L-GRR).

A report is a symbol of [0, k) and supports exactly the value it names, so the server's
support counts are a histogram of the reports.

References: [WAN17] §4.1 (GRR); [ARC22] §4.2 and [002] §5.1 (L-GRR);
math §3.2 (calibrations).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp import privacy
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    OneShot,
    PopulationStep,
    ReportKind,
    bytes_to_uint,
    grr_round,
    min_bytes,
    set_derived,
    uint_to_bytes,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import SymbolReports

#: The report kind of GRR-type oracles: one symbol of [0, k).
SYMBOL = SymbolReports()


#: GRR's rows of docs/client-spec.md (its JavaScript family is grr.js).
ONE_SHOT_CLIENT = ClientSpec(
    family="grr",
    chain="p1 = D(1/(1 + (k−1)·e^(−ε))), q1 = (1 − p1)/(k − 1)",
    round2="1, 0",
    eps_1="ρ(ln(P1/P0))",
    eps_perm="ρ(ln(p1/q1))",
    state="none",
    memo_key="v",
    round1="y = GRR(v, k, p1)",
    draws2="none (one-shot)",
)
#: L-GRR's rows: GRR at ε∞ memoized, GRR at p2 per report.
CHAIN_CLIENT = dataclasses.replace(
    ONE_SHOT_CLIENT,
    chain="GRR over k at a",
    round2="p2 = D(P_cal(k, a, b)), q2 = (1 − p2)/(k − 1)",
    draws2="GRR(y, k, p2)",
)


class _SymbolReports(FrequencyOracle):
    """Shared machinery of the oracles whose report is one symbol of [0, k)."""

    report_kind: ClassVar[ReportKind] = SYMBOL

    def single_report_epsilon(self) -> float:
        """ln(P1/P0): the composed channel is Pr[v|v] = P1, Pr[u|v] = P0 for all u ≠ v."""
        return privacy.round_up(privacy.grr_report_epsilon(self.P1, self.P0))

    def first_round_epsilon(self) -> float:
        """ln(p1/q1) of the stored round-1 parameters (the channel the sampler realizes)."""
        return privacy.round_up(privacy.grr_report_epsilon(self.p1, self.q1))

    def postprocess_channel(self, n: int) -> pp.ChannelInfo:
        return pp.ChannelInfo(P1=self.P1, P0=self.P0, n=n, grr_type=True)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """Histogram of the reported symbols."""
        y = check.domain_values(self.name, reports, self.k, "reports")
        return np.bincount(y.ravel(), minlength=self.k)

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray[np.int64]:
        """Each user keeps its value with probability P1 − P0, else reports a uniform symbol.

        Pr[v|v] = (P1 − P0) + P0 = P1 and Pr[u|v] = (1 − P1 + P0)/k = P0 (as P1 + (k−1)P0 = 1),
        so binomial keeps plus one uniform multinomial is the exact joint law of the histogram.
        """
        kept = rng.binomial(counts, self.P1 - self.P0)
        return kept + rng.multinomial(n - int(kept.sum()), np.full(self.k, 1.0 / self.k))

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        kept = rng.binomial(counts, self.P1 - self.P0)
        rest = totals[:, 0] - kept.sum(axis=1)
        return kept + rng.multinomial(rest, np.full(self.k, 1.0 / self.k))

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        y = check.domain_values(self.name, reports, self.k, "reports")
        return uint_to_bytes(y, min_bytes(self.k - 1))

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return check.domain_values(self.name, bytes_to_uint(rows), self.k, "reports")


@dataclass(frozen=True)
class GRR(OneShot, _SymbolReports):
    """Generalized randomized response at ε: p = e^ε/(e^ε+k−1), q = 1/(e^ε+k−1) ([WAN17] §4.1)."""

    k: int
    eps: float
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "GRR"
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    wire_id: ClassVar[int] = 1
    client_spec: ClassVar[ClientSpec | None] = ONE_SHOT_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "eps": 1.0}, (3, 3, 9, 0)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)

    def __post_init__(self) -> None:
        self._validate_common()
        p, q = privacy.grr_probabilities(self.eps, self.k)
        set_derived(self, p1=p, q1=q)

    @property
    def p(self) -> float:
        return self.p1

    @property
    def q(self) -> float:
        return self.q1

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        return grr_round(keys, self.k, self.p1, rng)


@dataclass(frozen=True)
class LGRR(_SymbolReports):
    """L-GRR: GRR(ε∞) memoized per value, then GRR over the memo for every report.

    p1 = e^{ε∞}/(e^{ε∞}+k−1), q1 = (1−p1)/(k−1), q2 = (1−p2)/(k−1), and p2 by ``calibration``
    (:func:`longldp.privacy.lgrr_p2`): ``"exact"`` (default) makes one report exactly GRR at
    ε1; ``"paper"`` is [ARC22] eq. 13, exact only for k = 2 and over-private for k > 2.
    """

    k: int
    eps_perm: float
    eps_1: float
    calibration: str = "exact"
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    name: ClassVar[str] = "L-GRR"
    #: One memo per value, never sent; reports carry nothing per device.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    longitudinal: ClassVar[bool] = True
    wire_id: ClassVar[int] = 6
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "eps_perm": 2.0, "eps_1": 1.0}, (3, 3, 7, 3, 0, 7)),
        VectorCase(
            {"k": 10, "eps_perm": 2.0, "eps_1": 1.0, "calibration": "paper"},
            (1, 2, 1, 3, 1, 4, 2),
            suffix="paper-max",
            collection="vectors-é",
            max_epsilon=4.5,
        ),
    )
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")
    test_params: ClassVar[tuple[dict, ...]] = (
        {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "exact"},
        {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "paper"},
    )

    def __post_init__(self) -> None:
        self._validate_common()
        p2 = privacy.lgrr_p2(self.k, self.eps_perm, self.eps_1, self.calibration)
        p1, q1 = privacy.grr_probabilities(self.eps_perm, self.k)
        q2 = (1 - p2) / (self.k - 1)
        set_derived(self, calibration=self.calibration.lower(), p1=p1, q1=q1, p2=p2, q2=q2)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        return grr_round(keys, self.k, self.p1, rng)

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return grr_round(payload, self.k, self.p2, rng)

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray[np.int64]:
        """Round 2 keeps a memo with p2 − q2, else draws a uniform symbol (as in
        ``_sample_support``): binomial keeps of the memo histogram plus one multinomial."""
        memo_counts = np.bincount(memos, minlength=self.k)
        kept = rng.binomial(memo_counts, self.p2 - self.q2)
        rest = int(memos.size - kept.sum())
        return kept + rng.multinomial(rest, np.full(self.k, 1.0 / self.k))
