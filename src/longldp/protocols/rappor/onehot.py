"""Basic RAPPOR: a one-hot encoding of an int in [0, k), no cohorts (h = m = 1).

The chain is L-SUE's with RAPPOR's parameter names (p1 = 1 − f/2, q1 = f/2, p2 = q, q2 = p):
round 1 is L-SUE's draw, so both give identical reports from one seed, and the support is the k
column sums of every UE oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._rng import RandomSource
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.rappor._chain import CLIENT, ONE_TIME_CLIENT, OneTime, RapporChain
from longldp.protocols.ue import _UnaryEncoding


@dataclass(frozen=True)
class RapporOneHot(RapporChain):
    """Basic RAPPOR ([ERL14] §5.1): one-hot encoding of an int in [0, k), PRR f, IRR p, q."""

    k: int
    f: float = 0.5
    p: float = 0.5
    q: float = 0.75
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    h: ClassVar[int] = 1
    m: ClassVar[int] = 1
    name: ClassVar[str] = "RAPPOR-onehot"
    #: No cohorts (m = 1): reports carry nothing per device; a memo per value.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.MEMO)
    wire_id: ClassVar[int] = 17
    client_spec: ClassVar[ClientSpec | None] = CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "f": 0.5, "p": 0.25, "q": 0.75}, (2, 9, 2, 0)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"f": 0.5, "p": 0.25, "q": 0.75},)

    def __post_init__(self) -> None:
        check.integer(self.name, "k", self.k, minimum=2)
        self._set_chain()

    def encode(self, values: Any, cohorts: ArrayLike) -> NDArray[np.uint8]:
        """Packed one-hot rows (n, ⌈k/8⌉) of ints in [0, k) (cohorts: all 0)."""
        self._check_cohorts(cohorts)
        vals = check.domain_values(self.name, np.asarray(values), self.k).ravel()
        return np.packbits(vals[:, None] == np.arange(self.k)[None, :], axis=1)

    def _check_value(self, value: Any) -> int:
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{self.name}: 'value' must be an int; got {value!r}.")
        return int(check.domain_values(self.name, np.array([value]), self.k, "value")[0])

    def _parse_values(self, values: Any) -> tuple[Any, int]:
        vals = check.domain_values(self.name, np.asarray(values), self.k).ravel()
        return vals, vals.size

    def possible_encodings(self) -> NDArray[np.bool_]:
        """The k one-hot vectors."""
        return np.eye(self.k, dtype=bool)

    def _encodings(self, keys: NDArray[np.int64], state: dict) -> NDArray[np.uint8]:
        return np.packbits(keys[:, None] == np.arange(self.k)[None, :], axis=1)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """Exactly L-SUE's round 1 (the PRR of a one-hot vector)."""
        return _UnaryEncoding._round1(self, keys, state, rng)

    def _support(self, ones: NDArray[np.int64], n_j: NDArray[np.int64]) -> NDArray[np.int64]:
        """The k column sums (one cohort): every UE oracle's support."""
        return ones[0]


@dataclass(frozen=True)
class RapporOneHotOneTime(OneTime, RapporOneHot):
    """Basic one-time RAPPOR ([ERL14] §5.1): one report per client, f = 0 allowed (then one
    randomized response per bit with (p, q): ε = ln 3 at p = 0.5, q = 0.75)."""

    name: ClassVar[str] = "RAPPOR-onehot-one-time"
    linkage: ClassVar[Linkage] = Linkage()
    wire_id: ClassVar[int] = 20
    client_spec: ClassVar[ClientSpec | None] = ONE_TIME_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 10, "f": 0.25, "p": 0.5, "q": 0.75}, (4, 4)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"f": 0.0, "p": 0.5, "q": 0.75},)
