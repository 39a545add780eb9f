"""dBitFlipPM (Ding et al. 2017): Microsoft's telemetry mechanism, the peer LOLOHA compares with.

The domain [0, k) is cut into b contiguous buckets. Each user samples d distinct buckets once,
forever; for each sampled bucket j it sends the bit 1[bucket(v) = j], kept with probability
p = e^{ε∞/2}/(e^{ε∞/2} + 1) and flipped otherwise. The d answer bits are memoized per bucket
value (one round: p2 = 1, q2 = 0), so a user never spends more than ε∞ per distinct bucket.

The estimate is per *bucket* (length b; b = k by default gives values):
f̂_j = (b/(n·d)) · Σ_{users who sampled j} (x_j − q)/(p − q)   ([DIN17] §3.1, Theorem 1),
whose support is the pair (ones C_j, samplers S_j) = row 0 and row 1 of a (2, b) array.

References: [DIN17] Ding, Kulkarni, Yekhanin, NeurIPS 2017, §3.1; [ARC23] appendix (which
prints V* without the square: see :func:`longldp.privacy.dbitflip_unit_variance`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp import privacy
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._memo import DenseMemoStore, MemoStore, make_memo_store
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import (
    FrequencyOracle,
    PopulationStep,
    ReportKind,
    bytes_to_uint,
    frequencies,
    min_bytes,
    packed_column_sums,
    row_slices,
    set_derived,
    uint_to_bytes,
)
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import ExactChannel


class SampledBitsReports(ReportKind):
    """(d sampled buckets, one bit each) (dBitFlipPM): bit j answers "is my value's bucket
    the j-th sampled one?", kept with p and flipped otherwise."""

    name: ClassVar[str] = "sampled-bits"
    statistic: ClassVar[str] = "bits"

    def output_space_size(self, proto: Any) -> int:
        return math.comb(proto.n_buckets, proto.d) * 2**proto.d

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """Every sampled d-subset S and every d-bit answer: Pr[(S, y) | v] (no round 2: the
        report is the memo, so both channels are this one)."""
        ch = proto.report_channel()
        return ExactChannel((ch,), (ch,))

    def width(self, proto: Any) -> int:
        return int(proto.d)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.uint8]:
        return np.asarray(reports["bits"], dtype=np.uint8)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.bool_]:
        """Bit j of a client points at v when its j-th sampled bucket is v's bucket."""
        vals = np.atleast_1d(np.asarray(values, dtype=np.int64))
        bucket = privacy.bucket_of(vals, proto.k, proto.n_buckets)
        return np.asarray(reports["buckets"])[:, None, :] == bucket[None, :, None]

    def indistinguishable(self, proto: Any, a: Any, b: Any) -> str | None:
        bucket = privacy.bucket_of(np.array([a, b]), proto.k, proto.n_buckets)
        return "fall in the same bucket" if bucket[0] == bucket[1] else None

    def attack_kind(self, proto: Any) -> str:
        return "bucket-bits"


#: dBitFlipPM's report kind.
SAMPLED_BITS = SampledBitsReports()


@dataclass(frozen=True)
class DBitFlipPM(FrequencyOracle):
    """dBitFlipPM with b buckets (default k) and d sampled buckets per user (default 1).

    ``d = b`` is bBitFlipPM. One report's ε is ε∞ when d ≥ 2 (two sampled bits can both differ
    between two values) and ε∞/2 when d = 1.
    """

    k: int
    eps_perm: float
    b: int | None = None
    d: int = 1
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "dBitFlipPM"
    #: The sampled buckets, kept for life and sent in every report, and a memo per bucket.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.BUCKET_MAP, Persistent.MEMO)
    aliases: ClassVar[tuple[str, ...]] = ("dBitFlip",)
    longitudinal: ClassVar[bool] = True
    wire_id: ClassVar[int] = 13
    client_spec: ClassVar[ClientSpec | None] = ClientSpec(
        family="dbitflip",
        chain="p1 = D(1/(1 + e^(−a/2))), q1 = 1 − p1",
        round2="1, 0",
        eps_1="ρ(min(d, 2)·ln(p1/q1))",
        eps_perm="the same",
        state=(
            "d < b: b floats; the sampled buckets are the indices of the d smallest (ties: lower "
            "index first), ascending; d = b: 0…b−1, no draw"
        ),
        memo_key="bucket ⌊v·b/k⌋",
        round1="d floats u_i: bit_i = (sampled_i = key) if u_i < p1, else its negation",
        draws2="none (the report is the memo)",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"k": 20, "eps_perm": 2.0, "b": 10, "d": 3}, (0, 1, 19, 0)),
        VectorCase({"k": 8, "eps_perm": 1.0, "b": 4, "d": 4}, (7, 6, 0), suffix="all"),
    )
    report_kind: ClassVar[ReportKind] = SAMPLED_BITS
    #: One round: ε∞ alone sets it (one report costs min(d, 2)·ε∞/2).
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm",)
    #: d = 1, d = 3 (two sampled bits can differ), and d = b = 2 (bBitFlipPM: nothing sampled).
    test_params: ClassVar[tuple[dict, ...]] = (
        {"eps_perm": 2.0, "d": 1},
        {"eps_perm": 2.0, "d": 3},
        {"eps_perm": 2.0, "b": 2, "d": 2},
    )

    def __post_init__(self) -> None:
        k = check.integer(self.name, "k", self.k, minimum=2)
        eps = check.budget(self.name, "eps_perm", self.eps_perm)
        b = k if self.b is None else check.integer(self.name, "b", self.b, minimum=2, maximum=k)
        set_derived(self, b=b)
        check.integer(self.name, "d", self.d, minimum=1, maximum=b)
        p = privacy.drawn(1.0 / (1.0 + math.exp(-eps / 2)))  # as the sampler draws it
        set_derived(self, p1=p, q1=1.0 - p)

    @property
    def n_buckets(self) -> int:
        assert self.b is not None
        return self.b

    @property
    def estimate_size(self) -> int:
        return self.n_buckets

    @property
    def eps_1(self) -> float:  # type: ignore[override]
        """No second round: one report costs what its memo costs."""
        return self.single_report_epsilon()

    @property
    def report_dtype(self) -> np.dtype:
        return np.dtype([("buckets", "<i8", (self.d,)), ("bits", "u1", (self.d,))])

    def frequencies_from_counts(self, counts: ArrayLike, n: int) -> NDArray[np.float64]:
        """dBitFlipPM estimates buckets: the bucket histogram / n."""
        return np.asarray(counts, dtype=np.float64) @ self._bucket_onehot() / n

    def _bucket_onehot(self) -> NDArray[np.int64]:
        """(k, b) matrix mapping each value to its bucket."""
        return np.eye(self.n_buckets, dtype=np.int64)[
            privacy.bucket_of(np.arange(self.k), self.k, self.n_buckets)
        ]

    def single_report_epsilon(self) -> float:
        """Exact channel: given the public sample, two values differ in at most min(d, 2) bits,
        each a ratio of p/q = e^{ε∞/2}."""
        return privacy.round_up(min(self.d, 2) * math.log(self.p1 / self.q1))

    def first_round_epsilon(self) -> float:
        return self.single_report_epsilon()

    def approx_variance(self, n: int) -> float:
        n = check.integer(self.name, "n", n, minimum=1)
        return float(privacy.dbitflip_unit_variance(self.eps_perm, self.n_buckets, self.d)) / n

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """n·Var = (b/d)·e^{ε/2}/(e^{ε/2}−1)² + f·(b/d − 1) (ours, see the privacy module)."""
        n = check.integer(self.name, "n", n, minimum=1)
        freqs = frequencies(self.name, f)
        return privacy.dbitflip_unit_variance(self.eps_perm, self.n_buckets, self.d, freqs) / n

    def first_round_variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """No second round: the reports are the memos, so the whole variance is fixed by them."""
        return self.variance(n, f)

    def postprocess_channel(self, n: int) -> pp.ChannelInfo:
        # Base-cut reads V* from here: give it dBitFlipPM's own, through an equivalent channel.
        frac = self.d / self.n_buckets
        return pp.ChannelInfo(P1=frac * self.p1, P0=frac * self.q1, n=n, grr_type=False)

    @property
    def support_shape(self) -> tuple[int, ...]:
        """Row 0: ones per bucket; row 1: users who sampled the bucket."""
        return (2, self.n_buckets)

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """f̂_j = (b/(n·d))·(C_j − S_j·q)/(p − q), from ``support = [C; S]``."""
        ones, samplers = support[..., 0, :], support[..., 1, :]
        return self.n_buckets / (n * self.d) * (ones - samplers * self.q1) / (self.p1 - self.q1)

    def report_channel(self) -> NDArray[np.float64]:
        """Pr[(S, y) | v] for every sampled d-subset S of the buckets (lexicographic) and every
        d-bit answer y (S-major): the exact one-report channel from the sampler's p."""
        b, d, p = self.n_buckets, self.d, self.p1
        bucket = privacy.bucket_of(np.arange(self.k), self.k, b)
        subsets = list(itertools.combinations(range(b), d))
        cols = []
        for s in subsets:
            truth = (np.array(s)[None, :] == bucket[:, None]).astype(int)
            for y in itertools.product((0, 1), repeat=d):
                prob = np.where(np.array(y)[None, :] == truth, p, 1 - p).prod(axis=1)
                cols.append(prob / len(subsets))
        return np.array(cols).T

    # -- client side
    @property
    def samples_everything(self) -> bool:
        """d = b (bBitFlipPM): every user answers every bucket, so nothing is sampled."""
        return self.d == self.n_buckets

    def _sampled(self, state: dict, m: int) -> NDArray[np.int64]:
        if self.samples_everything:
            return np.broadcast_to(np.arange(self.n_buckets, dtype=np.int64), (m, self.d))
        return state["sampled"]

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        b, d = self.n_buckets, self.d
        if self.samples_everything:
            return {}
        out = np.empty((m, d), dtype=np.int64)
        for rows in row_slices(m, b):
            # The d smallest of b uniform keys are a uniform d-subset.
            keys = rng.random((rows.stop - rows.start, b))
            out[rows] = np.sort(np.argpartition(keys, d - 1, axis=1)[:, :d], axis=1)
        return {"sampled": out}

    def _memo_key(self, values: NDArray[np.int64], state: dict) -> NDArray[np.int64]:
        return privacy.bucket_of(values, self.k, self.n_buckets)

    def ledger_keys(self, trajectories: NDArray, state: Any = None) -> NDArray:
        """A memo per bucket value: the buckets of the values (public, no state needed)."""
        return privacy.bucket_of(trajectories, self.k, self.n_buckets)

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.n_buckets, ((self.d + 7) // 8,), np.uint8)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """The d answer bits, bit-packed (a memo per bucket value)."""
        truth = self._sampled(state, keys.size) == keys[:, None]
        keep = rng.random(truth.shape) < self.p1
        return np.packbits(np.where(keep, truth, ~truth), axis=1)

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        out = np.empty(payload.shape[0], dtype=self.report_dtype)
        out["buckets"] = self._sampled(state, payload.shape[0])
        out["bits"] = np.unpackbits(payload, axis=1, count=self.d)
        return out

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray[np.int64]:
        """No second round: the reports are the memos; count them without building records."""
        if self.samples_everything:
            ones = packed_column_sums(memos, self.d)
            return np.vstack([ones, np.full(self.n_buckets, memos.shape[0], dtype=np.int64)])
        where = step.state["sampled"].ravel()
        bits = np.unpackbits(memos, axis=1, count=self.d).ravel()
        ones = np.bincount(where, weights=bits, minlength=self.n_buckets).astype(np.int64)
        return np.vstack([ones, np.bincount(where, minlength=self.n_buckets)])

    # -- server side
    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = np.asarray(reports)
        if rep.dtype != self.report_dtype or rep.ndim != 1:
            raise ValueError(
                f"{self.name}: 'reports' must be a 1-D array of dtype {self.report_dtype}; "
                f"got {rep.dtype} {rep.shape}."
            )
        check.domain_values(self.name, rep["buckets"], self.n_buckets, "reports['buckets']")
        if rep.size and rep["bits"].max() > 1:
            raise ValueError(f"{self.name}: 'reports['bits']' must hold 0 or 1.")
        return rep

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """Row 0: ones per bucket; row 1: users who sampled the bucket."""
        rep = self._check_reports(reports)
        where = rep["buckets"].ravel()
        ones = np.bincount(where, weights=rep["bits"].ravel(), minlength=self.n_buckets)
        return np.vstack([ones.astype(np.int64), np.bincount(where, minlength=self.n_buckets)])

    def _sample_support(self, counts: NDArray, n: Any, rng: RandomSource) -> NDArray[np.int64]:
        """Per bucket j (broadcasting over leading timestamp axes): samplers among its
        holders m1 ~ Bin(N_j, d/b), among the others m0 ~ Bin(n − N_j, d/b); ones =
        Bin(m1, p) + Bin(m0, q). Each bucket's (C_j, S_j) has its exact law; across buckets
        the counts are drawn independently, whereas each user samples exactly d buckets (a
        small negative correlation that is not reproduced)."""
        held = counts @ self._bucket_onehot()
        frac = self.d / self.n_buckets
        m1 = rng.binomial(held, frac)
        m0 = rng.binomial(n - held, frac)
        ones = rng.binomial(m1, self.p1) + rng.binomial(m0, self.q1)
        return np.stack([ones, m1 + m0], axis=-2)

    def _sample_support_batch(self, counts: NDArray, totals: NDArray, rng: RandomSource) -> NDArray:
        return self._sample_support(counts, totals, rng)

    def encode_bodies(self, reports: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(reports)
        width = min_bytes(self.n_buckets - 1)
        ids = uint_to_bytes(rep["buckets"].ravel(), width).reshape(rep.size, self.d * width)
        return np.hstack([ids, np.packbits(rep["bits"], axis=1)])

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        width = min_bytes(self.n_buckets - 1)
        ids = rows[:, : self.d * width].reshape(-1, width)
        out = np.empty(rows.shape[0], dtype=self.report_dtype)
        out["buckets"] = bytes_to_uint(ids).reshape(rows.shape[0], self.d)
        out["bits"] = np.unpackbits(rows[:, self.d * width :], axis=1, count=self.d)
        return self._check_reports(out)
