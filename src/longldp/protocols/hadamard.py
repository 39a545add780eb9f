"""Hadamard randomized response: SH (one-shot) and L-SH (its memoized chain).

SH is the Hadamard form of Bassily and Smith's succinct histogram as used by GFIM (Zhang,
"GFIM", bachelor thesis, BUPT 2018, Alg. 2; after Nguyen et al. 2016): with
m = 2^⌈log₂ k⌉ and the Sylvester Hadamard matrix H[j, v] = (−1)^popcount(j AND v) (0-based),
a user holding v draws a row j uniformly from [0, m), independent of the data, and sends
(j, s) with s = b·H[j, v], where b = +1 with probability p = e^ε/(e^ε + 1), else −1.

It is BLH (binary local hashing, [WAN17] §4.4) with the Hadamard rows as the hash family:
the bucket is the parity bit x = popcount(j AND v) mod 2 (so H[j, v] = (−1)^x), and round 1
is GRR over the two buckets. For v ≠ w, H[j, v]·H[j, w] = H[j, v XOR w] is ±1 with
probability ½ each over the row, so a non-holder supports v with probability exactly P0 = ½
and the supports of distinct values are uncorrelated; the estimator and its variance are
BLH's (docs/math.md, "Hadamard randomized response").

Aggregation never forms the m × k matrix: with σ_u = (−1)^bucket and T[j] = Σ_{u: j_u = j} σ_u
(one bincount), the support counts are C(v) = (n + (H·T)[v])/2, and H·T is a fast
Walsh–Hadamard transform, log₂ m butterfly passes, O(m log m) (:func:`fwht`).

L-SH keeps one row per user forever and memoizes round 1 per (user, bit): it is BiLOLOHA
([ARC23]) over the Hadamard family, with at most two memos per user, so the spent budget is at
most min(t·ε1, 2·ε∞).

References: [WAN17] §4.4; [ARC23]; Bassily and Smith, STOC 2015; docs/math.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols import lh
from longldp.protocols._memo import PopulationMemo
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import OneShot, ReportKind, bytes_to_uint, min_bytes, uint_to_bytes
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.lh import _LOLOHA, REPORT_DTYPE, HashedReports, _LocalHashing, _set_chain
from longldp.protocols.report_kinds import HashFamily

#: Largest domain handled (m = 2^26 rows; the transform holds m int64 sums).
MAX_K = 1 << 26


def hadamard_size(k: int) -> int:
    """m = 2^⌈log₂ k⌉, the smallest Sylvester order with at least k columns."""
    return 1 << max(0, (int(k) - 1).bit_length())


def hadamard_parity(rows: ArrayLike, cols: ArrayLike) -> NDArray[np.int64]:
    """x = popcount(j AND v) mod 2, so that H[j, v] = (−1)^x (broadcasting, no matrix kept)."""
    j = np.asarray(rows, dtype=np.int64)
    v = np.asarray(cols, dtype=np.int64)
    return (np.bitwise_count(j & v) & 1).astype(np.int64)


def hadamard_matrix(m: int) -> NDArray[np.int64]:
    """The explicit m × m Sylvester matrix (tests and small demos only)."""
    idx = np.arange(m, dtype=np.int64)
    return 1 - 2 * hadamard_parity(idx[:, None], idx[None, :])


def fwht(x: ArrayLike) -> NDArray:
    """H·x over the last axis (length a power of two): the fast Walsh–Hadamard transform.

    log₂ m butterfly passes (a, b) → (a + b, a − b) on blocks of doubling size; O(m log m)
    work, unnormalized (the Sylvester H with ±1 entries, H[j, v] = (−1)^popcount(j AND v)).
    """
    a = np.array(x, copy=True)
    m = a.shape[-1]
    if m < 1 or m & (m - 1):
        raise ValueError(f"fwht: the last axis must have a power-of-two length; got {m}.")
    lead = a.shape[:-1]
    h = 1
    while h < m:
        blocks = a.reshape(*lead, m // (2 * h), 2, h)
        top = blocks[..., 0, :] + blocks[..., 1, :]
        bottom = blocks[..., 0, :] - blocks[..., 1, :]
        a = np.stack([top, bottom], axis=-2).reshape(*lead, m)
        h *= 2
    return a


#: SH's and L-SH's rows of docs/client-spec.md: the hashing rows with the Hadamard rows as the
#: family (their JavaScript family is lh.js).
SH_CLIENT = dataclasses.replace(
    lh.ONE_SHOT_CLIENT,
    chain="GRR over 2 at ε",
    state="row j: an integer in [0, 2^⌈log₂k⌉)",
    memo_key="popcount(j AND v) mod 2",
    round1="y = GRR(key, 2, p1)",
)
LSH_CLIENT = dataclasses.replace(
    SH_CLIENT,
    chain="GRR over g at a",
    round2=lh.CHAIN_CLIENT.round2,
    draws2="GRR(y, 2, p2)",
)


class HadamardReports(HashedReports):
    """(a Sylvester Hadamard row, a bit): local hashing over the m Hadamard rows, a public
    family of two-bucket functions (the report supports v when parity(row, v) = bit)."""

    name: ClassVar[str] = "hadamard"

    def hash_family(self, proto: Any) -> HashFamily:
        return HashFamily(proto, proto.m, 2)

    def attack_kind(self, proto: Any) -> str:
        return "hadamard"


#: The report kind of SH and L-SH.
HADAMARD = HadamardReports()


class _Hadamard(_LocalHashing):
    """Hadamard rows as the hash family of a two-bucket local-hashing oracle."""

    report_kind: ClassVar[ReportKind] = HADAMARD

    m: int

    def _check_hadamard(self) -> None:
        self._validate_common()
        check.integer(self.name, "k", self.k, minimum=2, maximum=MAX_K)
        object.__setattr__(self, "m", hadamard_size(self.k))

    @property
    def P0(self) -> float:  # type: ignore[override]
        """½ exactly: H[j, v]·H[j, w] = H[j, v XOR w] is ±1 with probability ½ over j."""
        return 0.5

    def pool_seeds(self) -> NDArray[np.int64]:
        raise ValueError(f"{self.name}: the Hadamard rows are the (public) hash family.")

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"hash_id": np.asarray(rng.integers(0, self.m, size=m), np.int64)}

    def hash_buckets(self, hash_ids: ArrayLike, values: ArrayLike) -> NDArray[np.int64]:
        """The parity popcount(row AND v) mod 2 (the bucket H_row(v)), broadcasting."""
        return hadamard_parity(hash_ids, values)

    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = np.asarray(reports)
        if rep.dtype != REPORT_DTYPE or rep.ndim != 1:
            raise ValueError(
                f"{self.name}: 'reports' must be a 1-D array of dtype {REPORT_DTYPE}; "
                f"got {rep.dtype} {rep.shape}."
            )
        check.domain_values(self.name, rep["bucket"], 2, "reports['bucket']")
        check.domain_values(self.name, rep["hash_id"], self.m, "reports['hash_id'] (the row)")
        return rep

    def _bucket_masks(self, memo: PopulationMemo, who: NDArray[np.int64], state: dict) -> None:
        """No per-user masks: the server's own aggregation of the (row, bit) reports is
        O(n + m log m), so the per-user engine builds the reports (exact over time)."""
        return None

    def row_sums(self, reports: NDArray) -> NDArray[np.int64]:
        """T[j] = Σ_{u: j_u = j} σ_u with σ_u = (−1)^bucket_u (one bincount, length m)."""
        rep = self._check_reports(reports)
        # One integer histogram of (row, bit), then T[j] = #(j, 0) − #(j, 1).
        pairs = np.bincount(rep["hash_id"] * 2 + rep["bucket"], minlength=2 * self.m)
        pairs = pairs.reshape(self.m, 2)
        return (pairs[:, 0] - pairs[:, 1]).astype(np.int64)

    def support_from_row_sums(self, row_sums: ArrayLike, n: int) -> NDArray[np.int64]:
        """C(v) = (n + (H·T)[v])/2 for v < k, by one fast Walsh–Hadamard transform."""
        t = np.asarray(row_sums, dtype=np.int64)
        if t.shape != (self.m,):
            raise ValueError(f"{self.name}: 'row_sums' must have shape ({self.m},); got {t.shape}.")
        return (n + fwht(t)[: self.k]) // 2

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """C(v) = #{u : parity(j_u, v) = bucket_u} via :meth:`row_sums` and :func:`fwht`:
        O(n + m log m), never the m × k matrix."""
        rep = self._check_reports(reports)
        return self.support_from_row_sums(self.row_sums(rep), rep.size)

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(reports)
        return np.hstack(
            [uint_to_bytes(rep["hash_id"], min_bytes(self.m - 1)), uint_to_bytes(rep["bucket"], 1)]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        out = np.empty(rows.shape[0], dtype=REPORT_DTYPE)
        out["hash_id"] = bytes_to_uint(rows[:, :-1])
        out["bucket"] = bytes_to_uint(rows[:, -1:])
        return self._check_reports(out)


@dataclass(frozen=True)
class SH(OneShot, _Hadamard):
    """Hadamard randomized response: BLH with Sylvester Hadamard rows as the hash family.

    Zhang 2018 (GFIM) Alg. 2, corrected (docs/gfim.md): c_ε = (e^ε + 1)/(e^ε − 1), ±1 entries.
    The count-level path draws C(v) = Bin(n_v, p) + Bin(n − n_v, ½) independently over v: the
    exact law of each C(v), with the exact (zero) covariances of the per-user path.
    """

    k: int
    eps: float
    name: ClassVar[str] = "SH"
    #: The device's row, kept for life and sent in every report.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HADAMARD_ROW)
    wire_id: ClassVar[int] = 15
    client_spec: ClassVar[ClientSpec | None] = SH_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 20, "eps": 1.0}, (19, 0, 5)),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0},)
    g: int = field(init=False)
    m: int = field(init=False)
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False)
    q2: float = field(init=False)
    hash_pool: None = field(init=False, default=None)
    pool_seed: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._check_hadamard()
        _set_chain(self, 2, privacy.grr_probabilities(self.eps, 2)[0], 1.0)

    @property
    def c_eps(self) -> float:
        """c_ε = (e^ε + 1)/(e^ε − 1) = 1/(2p − 1): the estimator's scale, f̂ = c_ε·(H·T)/n."""
        return 1.0 / (2.0 * self.p1 - 1.0)


@dataclass(frozen=True)
class LSH(_Hadamard, _LOLOHA):
    """Longitudinal SH: a fixed Hadamard row per user, memo per (user, bit) = BiLOLOHA over
    the Hadamard family (docs/gfim.md, longitudinal GFIM); at most two memos per user."""

    name: ClassVar[str] = "L-SH"
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HADAMARD_ROW, Persistent.MEMO)
    wire_id: ClassVar[int] = 16
    client_spec: ClassVar[ClientSpec | None] = LSH_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 20, "eps_perm": 2.0, "eps_1": 1.0}, (3, 4, 3)),
        # A one-bit memo per value: the case above keeps its memos under a wrong round-1
        # derivation with probability about 1/8; twelve memo keys at ε1 = 0.25 do not
        # (tests/test_client_vectors.py checks it).
        VectorCase({"k": 40, "eps_perm": 1.0, "eps_1": 0.25}, (*range(12), 0), suffix="memos"),
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"eps_perm": 2.0, "eps_1": 1.0},)
    m: int = field(init=False)

    def __post_init__(self) -> None:
        self._check_hadamard()
        self._set_g(2)

    def _check_hashing(self) -> None:
        self._validate_common()
        if self.hash_pool is not None:
            raise ValueError(f"{self.name}: 'hash_pool' must be None (the rows are the family).")
