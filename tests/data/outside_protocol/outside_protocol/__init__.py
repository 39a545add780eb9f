"""OUT-RR: k-ary randomized response written outside longldp, with longldp's public API only.

A user holding v in [0, k) reports v with probability p = e^ε/(e^ε + k − 1), else a uniform
other symbol (Warner's randomized response over k symbols; the same channel as longldp's GRR,
written again here to show what a third-party package writes): one module, its formulas, and an
entry point ``out-rr = "outside_protocol:OutsideRR"`` in the group ``longldp.protocols``
(docs/design.md §8 of longldp). Its wire id, 200, is in the range kept for outside protocols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy.linkage import Linkage
from longldp.protocols import FrequencyOracle, OneShot, ReportKind, SymbolReports
from longldp.protocols.base import bytes_to_uint, grr_round, min_bytes, set_derived, uint_to_bytes


@dataclass(frozen=True)
class OutsideRR(OneShot, FrequencyOracle):
    """k-ary randomized response at ε, from a package outside longldp (OUT-RR)."""

    k: int
    eps: float
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "OUT-RR"
    wire_id: ClassVar[int] = 200
    linkage: ClassVar[Linkage] = Linkage()
    report_kind: ClassVar[ReportKind] = SymbolReports()
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)

    def __post_init__(self) -> None:
        self._validate_common()
        p = 1.0 / (1.0 + (self.k - 1) * math.exp(-self.eps))
        set_derived(self, p1=p, q1=(1.0 - p) / (self.k - 1))

    def single_report_epsilon(self) -> float:
        """ln(p/q) of the sampler's p and q, rounded up."""
        eps = math.log(self.p1 / self.q1)
        return eps + 1e-12 * max(1.0, eps)

    def first_round_epsilon(self) -> float:
        return self.single_report_epsilon()

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: Any) -> NDArray[np.int64]:
        return grr_round(keys, self.k, self.p1, rng)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        y = check.domain_values(self.name, reports, self.k, "reports")
        return np.bincount(y.ravel(), minlength=self.k)

    def _sample_support(self, counts: NDArray, n: int, rng: Any) -> NDArray[np.int64]:
        kept = rng.binomial(counts, self.P1 - self.P0)
        return kept + rng.multinomial(n - int(kept.sum()), np.full(self.k, 1.0 / self.k))

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        y = check.domain_values(self.name, reports, self.k, "reports")
        return uint_to_bytes(y, min_bytes(self.k - 1))

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return check.domain_values(self.name, bytes_to_uint(rows), self.k, "reports")
