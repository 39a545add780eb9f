"""RAPPOR of one boolean: k = h = 1, the bit is the value (0/1 or False/True), m cohorts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.rappor._chain import CLIENT, ONE_TIME_CLIENT, CohortShares, OneTime
from longldp.protocols.traits import Categorical


@dataclass(frozen=True)
class RapporBoolean(CohortShares):
    """Boolean RAPPOR ([ERL14] §4): one bit (the value) in m cohorts, PRR f, IRR p, q."""

    m: int = 1
    f: float = 0.5
    p: float = 0.5
    q: float = 0.75
    k: int = field(init=False, default=1)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    h: ClassVar[int] = 1
    differing_bits: ClassVar[tuple[int, int]] = (1, 0)
    name: ClassVar[str] = "RAPPOR-boolean"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT, Persistent.MEMO)
    wire_id: ClassVar[int] = 18
    client_spec: ClassVar[ClientSpec | None] = CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 3, "f": 0.5, "p": 0.25, "q": 0.75}, (1, 0, 1, 1)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 2, "f": 0.5, "p": 0.25, "q": 0.75},)

    def __post_init__(self) -> None:
        self._check_m()
        self._set_chain()

    @property
    def domain(self) -> Categorical:
        """Two inputs: 0 (False) and 1 (True)."""
        return Categorical(2, booleans=True)

    def _ints(self, values: Any, name: str = "values") -> NDArray[np.int64]:
        arr = np.asarray(values)
        if arr.dtype == bool:
            arr = arr.astype(np.int64)
        return check.domain_values(self.name, arr, 2, name).ravel()

    def encode(self, values: Any, cohorts: ArrayLike) -> NDArray[np.uint8]:
        """Packed one-bit rows (n, 1): the value's bit."""
        self._check_cohorts(cohorts)
        return np.packbits((self._ints(values) == 1)[:, None], axis=1)

    def _check_value(self, value: Any) -> int:
        if not isinstance(value, (int, np.integer, bool, np.bool_)):
            raise ValueError(f"{self.name}: 'value' must be 0, 1, False or True; got {value!r}.")
        return int(self._ints(np.array([value]), "value")[0])

    def _parse_values(self, values: Any) -> tuple[Any, int]:
        ints = self._ints(values)
        return ints, ints.size

    def _pattern_rows(
        self, parsed: Any, cohorts: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
        """(value, cohort) pairs, at most 2m distinct encodings."""
        inv = parsed * self.m + cohorts
        return inv, np.packbits(np.arange(2 * self.m)[:, None] // self.m == 1, axis=1)

    def possible_encodings(self) -> NDArray[np.bool_]:
        """The two one-bit patterns."""
        return np.array([[False], [True]])


@dataclass(frozen=True)
class RapporBooleanOneTime(OneTime, RapporBoolean):
    """One-time boolean RAPPOR: one report per client, f = 0 allowed."""

    name: ClassVar[str] = "RAPPOR-boolean-one-time"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT)
    wire_id: ClassVar[int] = 21
    client_spec: ClassVar[ClientSpec | None] = ONE_TIME_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"f": 0.0, "p": 0.25, "q": 0.75}, (0, 1)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 2, "f": 0.0, "p": 0.25, "q": 0.75},)
