"""RAPPOR with Bloom filters of strings: the encoder of the paper and of google/rappor.

A client in cohort j hashes its string with h hashes into k bits (google/rappor's Python
client, "rappor-md5-1byte": :func:`~longldp.protocols.rappor._hashing.bloom_bits`), then runs
the PRR/IRR chain (:mod:`longldp.protocols.rappor._chain`). Aggregated support is google/rappor's
counts matrix: one row per cohort, column 0 the number of reports N_j, column 1 + i the number of
reports with bit i set; the estimate is, per cohort and bit, the share of clients whose Bloom
bit is set (decoded against candidate strings by :mod:`longldp.apps.rappor`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._rng import as_random_source
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.rappor._chain import CLIENT, ONE_TIME_CLIENT, CohortShares, OneTime
from longldp.protocols.rappor._hashing import (
    as_bytes,
    bloom_indices,
    bloom_pairs,
    candidate_map,
    pack_indices,
)
from longldp.protocols.traits import Strings

BLOOM_HASHES = ("rappor-md5-1byte",)


@dataclass(frozen=True)
class RAPPOR(CohortShares):
    """RAPPOR ([ERL14]): Bloom filter of a string (k bits, h hashes, m cohorts), PRR f, IRR p, q.

    Parameters
    ----------
    k, h, m : Bloom bits (≤ 256), hashes (≤ 16), cohorts.
    f : PRR noise rate in (0, 1) (f = 0 memoizes the true bits: use ``RAPPOR-one-time``).
    p, q : IRR rates P(1 | PRR 0), P(1 | PRR 1) in [0, 1], p ≠ q.
    bloom_hash : the hashing ("rappor-md5-1byte", google/rappor's).
    """

    k: int
    h: int = 2
    m: int = 1
    f: float = 0.5
    p: float = 0.5
    q: float = 0.75
    bloom_hash: str = "rappor-md5-1byte"
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    name: ClassVar[str] = "RAPPOR"
    #: The cohort, kept for life and sent in every report (shared by about n/m devices; with
    #: m = 1 it links nothing, which the class-level trait does not distinguish), and memos.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT, Persistent.MEMO)
    wire_id: ClassVar[int] = 14
    client_spec: ClassVar[ClientSpec | None] = CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase(
            {"k": 16, "h": 2, "m": 4, "f": 0.5, "p": 0.25, "q": 0.75},
            ("apple", "pear", "apple", "crème brûlée"),
        ),
        VectorCase(
            {"k": 12, "h": 3, "f": 0.25, "p": 0.5, "q": 0.75}, ("a", "b", "a"), suffix="one-cohort"
        ),
    )
    input_domain: ClassVar[type[Strings]] = Strings
    test_params: ClassVar[tuple[dict, ...]] = (
        {"k": 8, "h": 2, "m": 2, "f": 0.5, "p": 0.25, "q": 0.75},
    )

    def __post_init__(self) -> None:
        own = self.name
        check.choice(own, "bloom_hash", self.bloom_hash, BLOOM_HASHES)
        check.integer(own, "k", self.k, minimum=1, maximum=256)
        check.integer(own, "h", self.h, minimum=1, maximum=16)
        self._check_m()
        self._set_chain()

    @property
    def differing_bits(self) -> tuple[int, int]:  # type: ignore[override]
        """Two strings' filters differ in at most h bits each way."""
        return (self.h, self.h)

    @property
    def domain(self) -> Strings:
        """Strings (str or bytes); codes stand for the strings ``"value-<code>"``."""
        return Strings()

    def encode(self, values: Any, cohorts: ArrayLike) -> NDArray[np.uint8]:
        """Packed Bloom filters (n, ⌈k/8⌉) of ``values`` for clients in ``cohorts``."""
        coh = self._check_cohorts(cohorts)
        if isinstance(values, (str, bytes)):
            vals: Any = [values]
        else:
            vals = values if isinstance(values, np.ndarray) else list(values)
        if len(vals) != coh.size:
            raise ValueError(
                f"{self.name}: {len(vals)} values for {coh.size} cohorts; give one each."
            )
        return pack_indices(bloom_indices(vals, coh, self.h, self.k), self.k)

    def _check_value(self, value: Any) -> Any:
        if not isinstance(value, (str, bytes)):
            raise ValueError(f"{self.name}: 'value' must be a string or bytes; got {value!r}.")
        return as_bytes(self.name, value)

    def _parse_values(self, values: Any) -> tuple[Any, int]:
        vals = values if isinstance(values, np.ndarray) else list(values)
        return vals, len(vals)

    def _pattern_rows(
        self, parsed: Any, cohorts: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
        inv, table = bloom_pairs(parsed, cohorts, self.h, self.k)
        return inv, pack_indices(table, self.k)

    def possible_encodings(self) -> NDArray[np.bool_]:
        """Every Bloom filter with 1..h set bits (any set a string can hash to, any cohort)."""
        sets = [c for r in range(1, self.h + 1) for c in itertools.combinations(range(self.k), r)]
        out = np.zeros((len(sets), self.k), dtype=bool)
        for i, s in enumerate(sets):
            out[i, list(s)] = True
        return out

    # ------------------------------------------------------------------ count level
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
        source, R, n_j, T = self._count_level(strings, counts, rng, reports_per_client, bloom_map)
        return self._support(*self._report_ones(source, R, n_j, T))

    def _report_ones(
        self, source: Any, R: int, n_j: NDArray[np.int64], T: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """((m, k) report ones, (m,) reports) of R reports per client: PRR then IRR."""
        prr = source.binomial(T, self.p1) + source.binomial(n_j[:, None] - T, self.q1)
        ones = source.binomial(R * prr, self.p2) + source.binomial(
            R * (n_j[:, None] - prr), self.q2
        )
        return ones, R * n_j

    def _count_level(
        self,
        strings: Sequence[str | bytes],
        counts: ArrayLike,
        rng: Any,
        reports_per_client: int,
        bloom_map: NDArray[np.int64] | None,
    ) -> tuple[Any, int, NDArray[np.int64], NDArray[np.int64]]:
        """(source, reports per client, clients N_j per cohort, (m, k) true ones T): the
        checked inputs, multinomial cohorts, and the Bloom bits they set."""
        source = as_random_source(rng)
        cnt = np.asarray(counts)
        if cnt.dtype == bool or not np.issubdtype(cnt.dtype, np.integer) or cnt.ndim != 1:
            raise ValueError(f"{self.name}: 'counts' must be a 1-D integer vector.")
        if cnt.size and cnt.min() < 0:
            raise ValueError(f"{self.name}: 'counts' must be >= 0; got {int(cnt.min())}.")
        R = check.integer(self.name, "reports_per_client", reports_per_client, minimum=1)
        idx = self._bloom_map(strings, cnt.size, bloom_map)
        per = source.multinomial(cnt, np.full(self.m, 1.0 / self.m))  # (M, m)
        return source, R, per.sum(axis=0), self.true_ones(idx, per)

    def _bloom_map(
        self, strings: Sequence[str | bytes], M: int, bloom_map: NDArray | None
    ) -> NDArray[np.int64]:
        if bloom_map is None:
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


@dataclass(frozen=True)
class RapporOneTime(OneTime, RAPPOR):
    """One-time RAPPOR with Bloom filters ([ERL14] §5.1): one report per client, PRR then IRR
    afresh (f = 0 allowed: a single randomized response with (p, q))."""

    name: ClassVar[str] = "RAPPOR-one-time"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT)
    wire_id: ClassVar[int] = 19
    client_spec: ClassVar[ClientSpec | None] = ONE_TIME_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 16, "h": 2, "m": 4, "f": 0.0, "p": 0.25, "q": 0.75}, ("apple", "pear")),
    )
    test_params: ClassVar[tuple[dict, ...]] = (
        {"k": 8, "h": 2, "m": 2, "f": 0.0, "p": 0.25, "q": 0.75},
    )

    def _report_ones(
        self, source: Any, R: int, n_j: NDArray[np.int64], T: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """One report per client: per (cohort, bit) Bin(T, q*) + Bin(N_j − T, p*)."""
        if R != 1:
            raise ValueError(f"{self.name}: one-time RAPPOR sends one report per client.")
        return source.binomial(T, self.P1) + source.binomial(n_j[:, None] - T, self.P0), n_j
