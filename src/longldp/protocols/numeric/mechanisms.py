"""The registered numeric mechanisms: the three roles over the kernels (docs/design.md §2.8).

Each class is a frozen dataclass of the mechanism, estimator and codec roles whose hooks call
the kernels of :mod:`longldp.protocols.numeric` and the formulas of
:mod:`longldp.privacy.numeric` (docs/math.md §20); nothing is computed twice.

| name | wire id | report | estimand | rounds |
|---|---|---|---|---|
| ``Laplace`` | 50 | a real (u + Lap(2/ε)) | mean | one-shot |
| ``Duchi`` | 51 | one bit (±C) | mean | one-shot |
| ``PM`` | 52 | a real in [−C, C] | mean | one-shot |
| ``HM`` | 53 | a real (PM's, or Duchi's ±C) | mean | one-shot |
| ``SW`` | 54 | a real in [−b, 1 + b] | distribution (EMS over d buckets) | one-shot |
| ``1BitMean`` | 55 | one bit | mean | one-shot |
| ``L-1BitMean`` | 56 | one bit | mean | memo chain (Duchi memo) |
| ``L-PM`` | 57 | one bit | mean | memo chain (PM memo) |
| ``L-HM`` | 58 | one bit | mean | memo chain (HM memo) |
| ``L-SW`` | 59 | one bucket of d_out | distribution over s + 1 grid points | memo chain |

Inputs are reals of the declared range [lo, hi] (:class:`~longldp.protocols.traits.Interval`;
``clip=True`` clips instead of refusing and the clipping is counted). Reports carry the
mechanism's own coordinates (u ∈ [−1, 1] for Laplace, PM, HM; t ∈ [0, 1] for SW); a bit is
Duchi's sign. The support (what a server accumulates) is ``[ones]`` for bit reports,
``[Σû, Σû²]`` (u units) for real ones, bucket counts for the distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import numeric as nm
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._estimate import Estimate, normal_quantile
from longldp.protocols._memo import make_memo_store
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import bytes_to_uint, min_bytes, uint_to_bytes
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import Estimator
from longldp.protocols.mechanism import Mechanism
from longldp.protocols.numeric import chains, oneshot, sw
from longldp.protocols.numeric._range import NumericRange
from longldp.protocols.report_kinds import ContinuousReport, ExactChannel, ReportKind
from longldp.protocols.traits import Estimand, Interval

#: Inputs the exact channels are enumerated over: the ends and three points inside (the
#: channel of any other input mixes these rows for the two-round forms; for the one-shot
#: mechanisms the ends attain the claim, math §20.3–§20.6).
AUDIT_POINTS = 5


# ---------------------------------------------------------------------- report kinds


class _NumericKind:
    """What the numeric report kinds share: their own law of a client's reports (for the
    audits) and the refusal of the frequency attacks."""

    def log_likelihoods(self, proto: Any, reports: Any, values: Any, memoized: bool) -> NDArray:
        return proto.report_log_likelihoods(reports, values, memoized)

    def attack_kind(self, proto: Any) -> str:
        raise ValueError(
            f"no frequency attack applies to '{proto.name}': its estimate is a {proto.estimand} "
            "(estimates_frequencies is False); poisoning of a numeric mean is measured by "
            "longldp.attacks.numeric (docs/attacks.md §13)."
        )


class SignReports(_NumericKind, ReportKind):
    """One bit per report, Duchi's sign (Duchi, 1BitMean, and every report of the two-round
    forms): an exact channel over a grid of inputs, from the sampler's own probabilities."""

    name: ClassVar[str] = "sign"
    statistic: ClassVar[str] = "symbols"

    def output_space_size(self, proto: Any) -> int:
        return 2

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """Rows at the two ends (the audits' inputs, which attain the claims, math §20.3,
        §20.9): one report, and the memo."""
        return ExactChannel(
            (proto.end_rows(proto.report_channel()),), (proto.end_rows(proto.memo_channel()),)
        )

    def width(self, proto: Any) -> int:
        return 2

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return np.asarray(reports, dtype=np.int64)

    def symbol_channel(self, proto: Any) -> NDArray[np.float64]:
        """Pr[bit | end] of one report at the two ends of the range."""
        return proto.end_rows(proto.report_channel())


class BucketReports(_NumericKind, ReportKind):
    """One of d_out output buckets (L-SW): an exact channel over the grid points."""

    name: ClassVar[str] = "bucket"
    statistic: ClassVar[str] = "symbols"

    def output_space_size(self, proto: Any) -> int:
        return int(proto.d_out)

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """Rows at the two ends (grid points 0 and s): one report, and the memo."""
        return ExactChannel(
            (proto.end_rows(proto.report_channel()),), (proto.end_rows(proto.memo_channel()),)
        )

    def width(self, proto: Any) -> int:
        return int(proto.d_out)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return np.asarray(reports, dtype=np.int64)

    def symbol_channel(self, proto: Any) -> NDArray[np.float64]:
        """Pr[bucket | end] of one report at the two ends of the range."""
        return proto.end_rows(proto.report_channel())


class RealReports(_NumericKind, ContinuousReport):
    """A real number with a density that is not piecewise constant (Laplace): no finite exact
    channel; the claim is the density ratio's supremum (math §20.2), and the audit bins the
    reports for its black-box game."""

    name: ClassVar[str] = "real"

    def report_range(self, proto: Any) -> tuple[float, float]:
        return proto.audit_range()


class PiecewiseReports(_NumericKind, ContinuousReport):
    """A real number whose density, for every input, is constant between a finite set of
    breakpoints (PM, HM's continuous part, SW): the channel over the cells between all the
    breakpoints of the audited inputs is exact (no ratio is lost inside a cell, math §20.7), and
    the audit may also bin the reports for its black-box game."""

    name: ClassVar[str] = "piecewise"
    exact: ClassVar[bool] = True

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """Rows at the two ends over the density's cells (they attain the claim)."""
        ch = proto.end_rows(proto.report_channel())
        return ExactChannel((ch,), (ch,))

    def report_range(self, proto: Any) -> tuple[float, float]:
        return proto.report_range()


SIGN = SignReports()
BUCKET = BucketReports()
REAL = RealReports()
PIECEWISE = PiecewiseReports()


# ---------------------------------------------------------------------- the shared base


class NumericMechanism(Mechanism, Estimator, ReportCodec):
    """Shared machinery: the Interval domain, the unit map, the support and its codec."""

    input_domain: ClassVar[type] = Interval
    estimand: ClassVar[Estimand] = Estimand.MEAN
    lo: float
    hi: float
    clip: bool

    @property
    def chain_probabilities(self) -> None:
        """None: a numeric report is not a two-round chain over values (math §20)."""
        return None

    def _check_range(self) -> None:
        lo, hi = nm.numeric_range(self.name, self.lo, self.hi)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        if not isinstance(self.clip, (bool, np.bool_)):
            raise check._fail(self.name, "clip", "True or False", self.clip)
        object.__setattr__(self, "clip", bool(self.clip))

    @property
    def domain(self) -> Interval:
        """Reals in [lo, hi]; outside refused unless ``clip`` (then counted)."""
        return Interval(self.lo, self.hi, self.clip)

    @property
    def declared(self) -> NumericRange:
        """The declared range and its unit maps."""
        return NumericRange(self.lo, self.hi, owner=self.name)

    def _unit(self, values: ArrayLike) -> NDArray[np.float64]:
        """t of (already checked) values."""
        return self.declared.t_of(values)

    # -- claims: the ε of the exact channels (Laplace's is its density ratio), plus what the
    # float samplers may add to them (math §20.12)
    def single_report_epsilon(self) -> float:
        """ε of one report: of :meth:`report_channel`, the exact channel the samplers' own
        probabilities give (math §20.7), plus :meth:`report_slack`, rounded up."""
        return privacy.round_up(
            privacy.channel_epsilon(self.report_channel()) + self.report_slack()
        )

    def first_round_epsilon(self) -> float:
        """ε of one memo: of :meth:`memo_channel` (one-shot mechanisms: one report's), plus
        :meth:`memo_slack`, rounded up."""
        return privacy.round_up(privacy.channel_epsilon(self.memo_channel()) + self.memo_slack())

    def memo_slack(self) -> float:
        """One-shot: a memo is a report (math §20.12)."""
        return self.report_slack()

    @property
    def repeats_memo(self) -> bool:
        """Every report is a fresh round 2 (or a fresh draw): never a copy of the memo."""
        return False

    def end_rows(self, channel: NDArray[np.float64]) -> NDArray[np.float64]:
        """The rows of a channel over :meth:`audit_inputs` (or the grid) at the two ends, the
        inputs the audits' codes 0 and 1 stand for (:meth:`Interval.as_inputs`)."""
        return channel[[0, -1]]

    def audit_inputs(self) -> NDArray[np.float64]:
        """The inputs the exact channels are enumerated over (declared units)."""
        return self.declared.x_of_t(np.linspace(0.0, 1.0, AUDIT_POINTS))

    # ------------------------------------------------------------------ count level
    def perturb_support(
        self, values: ArrayLike, memo: Any, rng: Any = None, users: ArrayLike | None = None
    ) -> NDArray:
        """The support of :meth:`perturb`'s reports (inputs are reals: no value counts, so the
        reports are drawn; O(n))."""
        return self.support_counts(self.perturb(values, memo, rng, users))

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        """Refused: a numeric mechanism has no count level (:meth:`_sample_support`)."""
        return self._sample_support(np.asarray(true_counts), 0, rng)

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray:
        raise ValueError(
            f"{self.name}: no count-level sampling: its inputs are reals of [{self.lo:g}, "
            f"{self.hi:g}], not codes with value counts (use the per-user or reports engine)."
        )

    # ------------------------------------------------------------------ one client
    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        """(memo key, round-1 input) of one real value (checked by the domain): the rounding
        key of a two-round form; for a one-shot mechanism, which memoizes nothing, the checked
        value's 8 bytes (binary64, big-endian), from which a device client of another language
        reads the value back (docs/client-spec.md §3.4)."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise check._fail(self.name, "value", f"a real number in [{self.lo:g}, {self.hi:g}]",
                              value)  # fmt: skip
        x = self.domain.check(self.name, np.array([value], dtype=np.float64), "value")
        keys = self._memo_key(x, state)
        if self.longitudinal:
            return int(keys[0]), keys
        return x.astype(">f8").tobytes(), keys

    def clipped(self, values: ArrayLike) -> int:
        """How many of ``values`` a client clips (0 unless ``clip``; refused otherwise)."""
        return self.domain.clip_values(self.name, values)[1]


class _MeanEstimator(NumericMechanism):
    """Mean of the debiased reports and its standard error by math (20.3), in declared units."""

    def unit_variance(self) -> nm.UnitVariance:
        """V(u) of one debiased report (math (20.2))."""
        raise NotImplementedError

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        return (1,)

    def unit_sums(self, support: NDArray[np.float64], n: int) -> tuple[NDArray, NDArray]:
        """(Σû, Σû²) of a support of n reports, in u units (û the debiased reports, math §20.1):
        what the mean (20.3) and the split variance (20.28) are computed from."""
        raise NotImplementedError

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """lo + (hi − lo)(Σû/n + 1)/2: the unbiased mean (math §20.1)."""
        s1, _ = self.unit_sums(support, n)
        return self.declared.mean_from_u(s1 / n)[..., None]

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        """The mean clipped to [lo, hi]."""
        return np.clip(raw, self.lo, self.hi)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """(v0 + v1·m1 + v2·m2)/n at m1 = the plug-in mean and m2 by the rule of (20.3)."""
        var = self.unit_variance()
        m1 = 2.0 * (np.asarray(plug_in, dtype=np.float64)[..., 0] - self.lo) / (self.hi - self.lo)
        m1 = np.clip(m1 - 1.0, -1.0, 1.0)
        if var.v2 > 0:
            _, s2 = self.unit_sums(np.asarray(support, dtype=np.float64), n)
            c0, c1, c2 = var.second_moment()
            m2 = np.clip((s2 / n - c0 - c1 * m1) / c2, m1 * m1, 1.0)
        else:
            m2 = m1 * m1
        v = np.maximum(var.of_mean(n, m1, m2), 0.0)
        return self.declared.variance_from_u(v)[..., None]

    def variance(self, n: int, values: ArrayLike) -> float:
        """Exact variance of the mean of n reports of users holding ``values`` (declared units;
        ``values`` of length n, math (20.2))."""
        u = 2.0 * self._unit(self.domain.check(self.name, values)) - 1.0
        return float(self.declared.variance_from_u(self.unit_variance().of_mean(
            check.integer(self.name, "n", n, minimum=1), u.mean(), np.mean(u * u))))  # fmt: skip

    def worst_variance(self, n: int) -> float:
        """max over data in [lo, hi] of the variance of the mean of n reports."""
        n = check.integer(self.name, "n", n, minimum=1)
        return float(self.declared.variance_from_u(self.unit_variance().worst() / n))

    def accuracy_figure(self, n: int) -> tuple[str, float] | None:
        """The worst-case variance of the mean (:meth:`worst_variance`)."""
        return "worst Var", self.worst_variance(n)

    def estimate_labels(self) -> list[str]:
        """One position: the mean of the declared range."""
        return [f"mean of [{self.lo:g}, {self.hi:g}]"]

    def true_mean(self, values: ArrayLike) -> NDArray[np.float64]:
        """What the estimate targets: the mean of the values (shape of the estimate)."""
        return np.array([float(np.mean(self.domain.check(self.name, values)))])


class _BitSupport(_MeanEstimator):
    """Bit reports: support [ones]; û = C_r(2b − 1) with C_r = 1/κ of one report."""

    def report_slope(self) -> float:
        """κ with Pr[b = 1 | u] = (1 + κu)/2 for one report."""
        raise NotImplementedError

    def unit_variance(self) -> nm.UnitVariance:
        """1/κ² − u²: one report is Duchi's channel (math (20.6), (20.20))."""
        kappa = self.report_slope()
        return nm.UnitVariance(1.0 / (kappa * kappa), 0.0, -1.0)

    @property
    def support_shape(self) -> tuple[int, ...]:
        return (1,)

    def unit_sums(self, support: NDArray[np.float64], n: int) -> tuple[NDArray, NDArray]:
        c = 1.0 / self.report_slope()
        ones = np.asarray(support, dtype=np.float64)[..., 0]
        return c * (2.0 * ones - n), np.full(ones.shape, c * c * n)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """[number of ones]."""
        b = check.domain_values(self.name, reports, 2, "reports")
        return np.array([int(np.count_nonzero(b))], dtype=np.int64)

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        b = check.domain_values(self.name, records, 2, "reports")
        return b.astype(np.uint8).reshape(-1, 1)

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.uint8]:
        raw = np.asarray(rows, dtype=np.uint8).reshape(-1, 1)[:, 0]
        return check.domain_values(self.name, raw, 2, "reports").astype(np.uint8)


#: Real reports are sent as the index of one of GRID = 2³¹ equal cells of the report range,
#: read back as the cell's midpoint (codes GRID and GRID + 1: HM's two atoms, exactly).
GRID_BITS = nm.GRID_BITS
GRID = nm.GRID


class _RealCodec(NumericMechanism):
    """Real reports on a fixed grid (math §20.12): the client sends the index of the cell of
    its output among :data:`GRID` equal cells of :meth:`grid_range` (4 bytes, big-endian), and a
    report record is that cell's midpoint.

    Why: a float output's low-order bits depend on the arithmetic that produced it, hence on the
    input (Mironov, CCS 2012); the black-box audit refutes ε from them (bit tests on the binary64
    body). A cell index of a grid that does not depend on the input carries the output's law
    only. Values at a mechanism's atoms (HM's ±C) keep their own codes.
    """

    def report_range(self) -> tuple[float, float]:
        """Every report lies in this interval (mechanism coordinates):
        :func:`privacy.numeric.report_range`."""
        return nm.report_range(self.kernel_name, self.eps)  # type: ignore[attr-defined]

    def atoms(self) -> tuple[float, ...]:
        """Outputs with positive probability (HM's Duchi branch), sent by their own codes."""
        return nm.report_atoms(self.kernel_name, self.eps)  # type: ignore[attr-defined]

    def _cell(self) -> tuple[float, float]:
        return oneshot.grid_cell(*self.report_range())

    def report_slack(self) -> float:
        """The realized channel over the grid's cells may exceed the exact one by
        :func:`privacy.numeric.realized_slack` (math §20.12)."""
        return nm.realized_slack(self.kernel_name, self.eps)  # type: ignore[attr-defined]

    def quantize(self, y: ArrayLike) -> NDArray[np.float64]:
        """The midpoint of each output's cell (atoms unchanged); outputs beyond the range are
        clamped to it first (Laplace's tails past 20 scales): :func:`oneshot.quantize`."""
        return oneshot.quantize(y, *self.report_range(), self.atoms())

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray[np.float64]:
        return self.quantize(payload)

    def _codes(self, records: ArrayLike) -> NDArray[np.int64]:
        """The code of each record; a record that is neither a cell midpoint nor an atom is
        refused (no client sends it)."""
        arr = np.asarray(records)
        if arr.dtype == bool or arr.dtype.kind not in "iuf":
            raise check._fail(self.name, "reports", "real numbers",
                              check.Described(f"dtype {arr.dtype}"))  # fmt: skip
        x = arr.astype(np.float64).reshape(-1)
        lo, w = self._cell()
        with np.errstate(invalid="ignore"):
            idx = np.floor((x - lo) / w)
        ok = np.isfinite(idx) & (idx >= 0) & (idx < GRID)
        codes = np.where(ok, idx, 0).astype(np.int64)
        ok &= lo + (codes + 0.5) * w == x
        for k, a in enumerate(self.atoms()):
            hit = x == a
            codes = np.where(hit, GRID + k, codes)
            ok |= hit
        if not ok.all():
            raise check._fail(
                self.name, "reports", f"cell midpoints of the {GRID}-cell grid over "
                f"[{lo:.6g}, {lo + GRID * w:.6g}] (or an atom)",
                check.Described(f"{float(x[~ok][0])!r}"),
            )  # fmt: skip
        return codes

    def _check_reals(self, y: ArrayLike) -> NDArray[np.float64]:
        self._codes(y)
        return np.asarray(y, dtype=np.float64)

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        return uint_to_bytes(self._codes(records), 4)

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.float64]:
        codes = bytes_to_uint(np.asarray(rows, dtype=np.uint8).reshape(-1, 4))
        atoms = self.atoms()
        bad = codes >= GRID + len(atoms)
        if bad.any():
            raise check._fail(self.name, "reports", f"codes below {GRID + len(atoms)}",
                              int(codes[bad][0]))  # fmt: skip
        lo, w = self._cell()
        out = lo + (np.minimum(codes, GRID - 1) + 0.5) * w
        for k, a in enumerate(atoms):
            out = np.where(codes == GRID + k, a, out)
        return out


class _RealMean(_RealCodec, _MeanEstimator):
    """Real reports estimating the mean: support [Σû, Σû²] (u units, float)."""

    report_kind: ClassVar[ReportKind] = REAL

    @property
    def support_shape(self) -> tuple[int, ...]:
        return (2,)

    def unit_sums(self, support: NDArray[np.float64], n: int) -> tuple[NDArray, NDArray]:
        s = np.asarray(support, dtype=np.float64)
        return s[..., 0], s[..., 1]

    def support_counts(self, reports: NDArray) -> NDArray[np.float64]:
        """[Σû, Σû²] of the debiased reports."""
        k = oneshot.kernel(self.kernel_name)  # type: ignore[attr-defined]
        u_hat = k.debias(self._check_reals(reports), self.eps)  # type: ignore[attr-defined]
        return np.array([float(u_hat.sum()), float(np.dot(u_hat, u_hat))])


# ---------------------------------------------------------------------- device clients
# The cells of docs/client-spec.md's tables (§3.2, §3.3, §4.2); t, u, the audit inputs, the
# channel ε and the report grid are its §3.4.

_ONE_SHOT = "none (one-shot)"
_AUDIT_EPS = "ρ(ε of the exact channel over the 5 audit inputs + σ, §3.4)"
_VALUE_KEY = "v as 8 bytes (binary64, big-endian)"


def _one_shot_client(
    chain: str, round1: str, probabilities: tuple[str, ...], eps_1: str = _AUDIT_EPS
) -> ClientSpec:
    """The cells of a one-shot numeric mechanism: no state, no memo, no round 2."""
    return ClientSpec(
        family="numeric",
        chain=chain,
        round2=_ONE_SHOT,
        eps_1=eps_1,
        eps_perm="the same",
        state="none",
        memo_key=_VALUE_KEY,
        round1=round1,
        draws2=_ONE_SHOT,
        probabilities=probabilities,
    )


LAPLACE_CLIENT = _one_shot_client(
    "β = 2/ε; report range R = [−1 − 20β, 1 + 20β]",
    "floats w, v: h = [2w ≥ 1], c = 1 − (2w − h), R = c − v·2⁻⁵²; if c = 2⁻⁵², one more float z: "
    "R = R − z·2⁻¹⁰⁵; y = u + (1 − 2h)·β·log(R); R's cell of y",
    ("scale",),
    eps_1="ρ(2/β + σ, §3.4)",
)
DUCHI_CLIENT = _one_shot_client(
    "κ = tanh(ε/2); Pr[bit 1 | u] = D(1/2 + κu/2)",
    "one float w: bit = [w < D(1/2 + κu/2)] (one byte)",
    ("slope",),
)
PM_CLIENT = _one_shot_client(
    "w = 2/expm1(ε/2), C = 1 + w, c = D(1/(1 + e^(−ε/2))); R = [−C, C]",
    "floats v, z; ℓ = (C + 1)/2·u − w/2: y = v·w + ℓ if z < c, else o + w·[o ≥ ℓ] with "
    "o = v·(C + 1) − C; R's cell of y",
    ("width", "center"),
)
HM_CLIENT = _one_shot_client(
    "β = D(−expm1(−ε/2)) if ε > ε* (§3.4), else 0; PM's w, C, c and Duchi's κ at ε, "
    "C_D = 1/κ; R = [−max(C, C_D), max(C, C_D)], atoms −C_D, C_D",
    "floats z, v: y = C_D if v < D(1/2 + κu/2), else −C_D; if β > 0 and z < β, y = PM's "
    "draw (two more floats), moved to the next float towards 0 if it equals −C_D or C_D; R's cell "
    "of y, or the atom's code",
    ("beta", "width", "center"),
)
SW_CLIENT = _one_shot_client(
    "b = (εe^ε − expm1(ε))/(2e^ε(expm1(ε) − ε)) (below ε = 10⁻³ by series, §3.4), "
    "c = D(1/(1 + 1/(2be^ε))); R = [−b, 1 + b]",
    "floats v, z: y = v·2b + t − b if z < c, else v − b + 2b·[v ≥ t]; R's cell of y",
    ("b", "center"),
)
CHAIN_CLIENT = ClientSpec(
    family="numeric",
    chain=(
        "memo M at ε∞ (L-1BitMean: Duchi; L-PM: PM; L-HM: HM) of the grid value u_j = 2j/s − 1; "
        "s given or the default grid (§3.4)"
    ),
    round2="κ = tanh(ε1/2); Pr[bit 1 | y1] = D(1/2 + κ·y1/2); ε1 < 2·artanh(1/C_M)",
    eps_1="ρ(ε of one report's exact channel over the s + 1 grid values + σ1, §3.4)",
    eps_perm="ρ(ε of one memo's exact channel over the grid values + σ, §3.4)",
    state="offset a: one float",
    memo_key="j = min(⌊s·t + a⌋, s)",
    round1=(
        "y1 = M's one-shot draw at ε∞ of u_j; PM, HM: the midpoint of its cell of M's report "
        "range R (HM's atoms as they are; a real, never sent)"
    ),
    draws2="one float w: bit = [w < D(1/2 + κ·y1/2)] (one byte)",
    probabilities=("slope",),
)
LSW_CLIENT = ClientSpec(
    family="numeric",
    chain="memo: SW at ε∞ of t_j = j/s, as its bucket among d_out equal buckets of [−b, 1 + b]",
    round2=(
        "GRR over the d_out buckets: q2 = 1/(d_out + λ), p2 = (1 + λ)·q2, λ the largest whose "
        "report ε ≤ ε1 (bisection, §3.4)"
    ),
    eps_1="ρ(ε of one report's exact channel over the s + 1 grid values + σ1, §3.4)",
    eps_perm="ρ(ε of one memo's exact channel over the grid values + σ, §3.4)",
    state="offset a: one float",
    memo_key="j = min(⌊s·t + a⌋, s)",
    round1="SW's draw y at ε∞ of t_j; bucket min(d_out − 1, ⌊(y + b)·d_out/(1 + 2b)⌋)",
    draws2="floats w, z: o = ⌊w·(d_out − 1)⌋, o += [o ≥ memo]; report memo if z < p2, else o",
    probabilities=("p2", "q2"),
)


# ---------------------------------------------------------------------- one-shot


@dataclass(frozen=True)
class _OneShot(NumericMechanism):
    """A one-shot numeric mechanism at ε: every report is a fresh draw. Its parameters: the
    declared range, ε and ``clip`` (SW adds its buckets)."""

    longitudinal: ClassVar[bool] = False
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    kernel_name: ClassVar[str]
    lo: float
    hi: float
    eps: float
    clip: bool = False

    def __post_init__(self) -> None:
        self._check_range()
        object.__setattr__(self, "eps", check.budget(self.name, "eps", self.eps))

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray:
        k = oneshot.kernel(self.kernel_name)
        t = self._unit(keys)
        return k.sample(t if k.coordinate == "t" else 2.0 * t - 1.0, self.eps, rng)

    def first_round_epsilon(self) -> float:
        """Nothing is memoized: what one report reveals."""
        return self.single_report_epsilon()

    def report_log_likelihoods(
        self, reports: Any, values: Any, memoized: bool
    ) -> NDArray[np.float64]:
        """(n, V): Σ_t ln f(y_t | x_v) of fresh reports (the audits' and the linkage attack's
        law, from the densities and probabilities the samplers use)."""
        x = self._unit(self.domain.check(self.name, values))
        return sum(self.log_density(np.asarray(rep), x) for rep in reports)

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        """(n, V) ln f(y_i | t_v) of one report per client (t ∈ [0, 1])."""
        raise NotImplementedError


@dataclass(frozen=True)
class Laplace(_OneShot, _RealMean):
    """Laplace noise of scale 2/ε on u ∈ [−1, 1]: the mean of the reports (math §20.2)."""

    name: ClassVar[str] = "Laplace"
    wire_id: ClassVar[int] = 50
    client_spec: ClassVar[ClientSpec | None] = LAPLACE_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": 0.0, "hi": 100.0, "eps": 1.0}, (37.5, 37.5, 0.0, 100.0)),
    )
    kernel_name: ClassVar[str] = "Laplace"
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = ({"eps": 1.0, "lo": 0.0, "hi": 10.0},)

    def unit_variance(self) -> nm.UnitVariance:
        return nm.laplace_variance(self.eps)

    @property
    def scale(self) -> float:
        """2/ε: the noise's scale in u units."""
        return nm.laplace_scale(self.eps)

    def single_report_epsilon(self) -> float:
        """Δ/scale = 2/(2/ε), the log-density ratio's supremum (math §20.2), plus what the
        float sampler and the grid may add (math §20.12), rounded up."""
        return privacy.round_up(2.0 / nm.laplace_scale(self.eps) + self.report_slack())

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        b = nm.laplace_scale(self.eps)
        u = 2.0 * np.asarray(t)[None, :] - 1.0
        return -np.abs(np.asarray(y, dtype=np.float64)[:, None] - u) / b - math.log(2 * b)

    def audit_range(self) -> tuple[float, float]:
        """Where the binned black-box game looks: the report range [−1 − 20·scale, 1 + 20·scale]
        (all but e^{−20} of the mass; the noise beyond is clamped to its ends, math §20.12)."""
        return self.report_range()


@dataclass(frozen=True)
class Duchi(_OneShot, _BitSupport):
    """Duchi, Jordan and Wainwright's one-dimensional mechanism: ±C with
    Pr[+C] = (1 + u·tanh(ε/2))/2 (math §20.3); one bit per report."""

    name: ClassVar[str] = "Duchi"
    wire_id: ClassVar[int] = 51
    client_spec: ClassVar[ClientSpec | None] = DUCHI_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": -1.0, "hi": 1.0, "eps": 1.0}, (0.25, -1.0, 1.0, 0.25)),
    )
    kernel_name: ClassVar[str] = "Duchi"
    report_kind: ClassVar[ReportKind] = SIGN
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = ({"eps": 1.0, "lo": 0.0, "hi": 10.0},)

    def report_slope(self) -> float:
        return nm.duchi_slope(self.eps)

    @property
    def slope(self) -> float:
        """κ = tanh(ε/2): Pr[bit 1 | u] = (1 + κu)/2."""
        return nm.duchi_slope(self.eps)

    def report_channel(self) -> NDArray[np.float64]:
        """Pr[bit | input] over :meth:`audit_inputs`, from :func:`privacy.numeric.duchi_channel`."""
        return nm.duchi_channel(self.eps, 2.0 * self._unit(self.audit_inputs()) - 1.0)

    def memo_channel(self) -> NDArray[np.float64]:
        """Nothing is memoized: the report's channel."""
        return self.report_channel()

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        plus = nm.duchi_probability(self.eps, 2.0 * np.asarray(t) - 1.0)[None, :]
        bit = np.asarray(y, dtype=np.float64)[:, None]
        return np.log(np.where(bit > 0.5, plus, 1.0 - plus))


@dataclass(frozen=True)
class OneBitMean(Duchi):
    """1BitMean (Ding, Kulkarni and Yekhanin 2017): Duchi's channel on t = (x − lo)/(hi − lo),
    the bit 1 with probability 1/(e^ε + 1) + t(e^ε − 1)/(e^ε + 1) (math §20.3)."""

    name: ClassVar[str] = "1BitMean"
    wire_id: ClassVar[int] = 55
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": 0.0, "hi": 40.0, "eps": 2.0}, (10.0, 40.0, 0.0)),
    )
    kernel_name: ClassVar[str] = "1BitMean"
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = ({"eps": 2.0, "lo": -5.0, "hi": 5.0},)


class _PMConstants:
    """PM's constants at ε, which PM and HM (its PM branch) draw with."""

    eps: float

    @property
    def width(self) -> float:
        """w = C − 1 = 2/expm1(ε/2): the length of PM's high-density piece."""
        return nm.pm_params(self.eps).width

    @property
    def center(self) -> float:
        """The probability of PM's high-density piece, as drawn."""
        return nm.pm_params(self.eps).center


@dataclass(frozen=True)
class PM(_PMConstants, _OneShot, _RealMean):
    """The piecewise mechanism of Wang et al. 2019: a real of [−C, C], density e^ε times
    higher on [ℓ(u), r(u)] (math §20.4)."""

    name: ClassVar[str] = "PM"
    wire_id: ClassVar[int] = 52
    client_spec: ClassVar[ClientSpec | None] = PM_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": 0.0, "hi": 10.0, "eps": 2.0}, (3.0, 10.0, 0.0, 7.25)),
        VectorCase(
            {"lo": 0.0, "hi": 10.0, "eps": 2.0, "clip": True},
            (12.5, -3.0, 4.0),
            suffix="clip",
            max_epsilon=5.0,
        ),
    )
    kernel_name: ClassVar[str] = "PM"
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = ({"eps": 2.0, "lo": 0.0, "hi": 10.0},)

    report_kind: ClassVar[ReportKind] = PIECEWISE

    def unit_variance(self) -> nm.UnitVariance:
        return nm.pm_variance(self.eps)

    def report_channel(self) -> NDArray[np.float64]:
        """PM's exact channel over the audit inputs (the density's cells, math §20.7)."""
        return nm.pm_channel(self.eps, 2.0 * self._unit(self.audit_inputs()) - 1.0)

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        u = 2.0 * np.asarray(t)[None, :] - 1.0
        return np.log(nm.pm_params(self.eps).density(u, np.asarray(y, dtype=np.float64)[:, None]))


@dataclass(frozen=True)
class HM(_PMConstants, _OneShot, _RealMean):
    """The hybrid mechanism of Wang et al. 2019: PM with probability β, else Duchi's ±C
    (math §20.5)."""

    name: ClassVar[str] = "HM"
    wire_id: ClassVar[int] = 53
    client_spec: ClassVar[ClientSpec | None] = HM_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": 0.0, "hi": 10.0, "eps": 3.0}, (3.0, 9.5, 0.0, 5.0, 3.0)),
        VectorCase({"lo": 0.0, "hi": 10.0, "eps": 0.5}, (3.0, 10.0), suffix="duchi"),
    )
    kernel_name: ClassVar[str] = "HM"
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = ({"eps": 1.5, "lo": 0.0, "hi": 10.0},)

    report_kind: ClassVar[ReportKind] = PIECEWISE

    def unit_variance(self) -> nm.UnitVariance:
        return nm.hm_variance(self.eps)

    @property
    def beta(self) -> float:
        """The probability of the PM branch, as drawn (0 below ε*)."""
        return nm.hm_beta(self.eps)

    def report_channel(self) -> NDArray[np.float64]:
        """HM's exact channel (PM's cells and Duchi's atoms) over the audit inputs."""
        return nm.hm_channel(self.eps, 2.0 * self._unit(self.audit_inputs()) - 1.0)

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        """Duchi's atoms ±C carry (1 − β)·Pr[±C | u] (a PM output hits them with probability
        0); any other output β times PM's density."""
        beta, c = nm.hm_beta(self.eps), nm.duchi_bound(self.eps)
        u = 2.0 * np.asarray(t)[None, :] - 1.0
        yy = np.asarray(y, dtype=np.float64)[:, None]
        plus = nm.duchi_probability(self.eps, u)
        with np.errstate(divide="ignore"):
            atom = np.log((1.0 - beta) * np.where(yy > 0, plus, 1.0 - plus))
            cont = np.log(beta * nm.pm_params(self.eps).density(u, yy)) if beta > 0 else -np.inf
        return np.where(np.abs(yy) == c, atom, cont)


@dataclass(frozen=True)
class SW(_OneShot, _RealCodec):
    """Square wave (Li et al. 2020): a real of [−b, 1 + b], density e^ε times higher within b of
    t; the server estimates the distribution over d buckets by EMS (math §20.6)."""

    d: int = 256
    d_out: int = 256
    name: ClassVar[str] = "SW"
    wire_id: ClassVar[int] = 54
    client_spec: ClassVar[ClientSpec | None] = SW_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"lo": 0.0, "hi": 10.0, "eps": 1.5, "d": 16, "d_out": 16}, (2.0, 8.0, 10.0)),
    )
    kernel_name: ClassVar[str] = "SW"
    report_kind: ClassVar[ReportKind] = PIECEWISE
    estimand: ClassVar[Estimand] = Estimand.DISTRIBUTION
    #: Nothing persists: every report is a fresh draw.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict[str, Any], ...]] = (
        {"eps": 2.0, "lo": 0.0, "hi": 10.0, "d": 16, "d_out": 16},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "d", check.integer(self.name, "d", self.d, minimum=2))
        object.__setattr__(self, "d_out", check.integer(self.name, "d_out", self.d_out, minimum=2))

    @property
    def b(self) -> float:
        """The half-width b of the high-density piece."""
        return nm.sw_params(self.eps).b

    @property
    def center(self) -> float:
        """The probability of the high-density piece, as drawn."""
        return nm.sw_params(self.eps).center

    def report_channel(self) -> NDArray[np.float64]:
        """SW's exact channel over the audit inputs (the density's cells, math §20.6)."""
        return nm.sw_channel(self.eps, self._unit(self.audit_inputs()))

    def log_density(self, y: NDArray, t: NDArray) -> NDArray[np.float64]:
        tt = np.asarray(t)[None, :]
        return np.log(nm.sw_params(self.eps).density(tt, np.asarray(y, dtype=np.float64)[:, None]))

    # -- the distribution estimator
    @property
    def support_shape(self) -> tuple[int, ...]:
        return (self.d_out,)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        return (self.d,)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """Counts of the reports in the d_out buckets of [−b, 1 + b]."""
        return sw.report_counts(self._check_reals(reports), self.eps, self.d_out)

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """The EMS distribution over the d buckets of [lo, hi] (not unbiased: EMS is the
        estimator of [LI20]; math §20.6), row by row."""
        counts = np.asarray(support, dtype=np.float64)
        op = sw.SWOperator(self.eps, self.d, self.d_out)
        rows = counts.reshape(-1, self.d_out)
        out = np.stack([sw.ems(r, op).theta if r.sum() > 0 else np.full(self.d, np.nan)
                        for r in rows])  # fmt: skip
        return out.reshape(*counts.shape[:-1], self.d)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var of each bucket's share: the diagonal of :meth:`distribution_covariance` (the
        delta method through EMS's fixed point, math §20.14), row by row; NaN for a row without
        reports. Sampling noise only: the smoothing's bias is not in it."""
        return _rows_variance(self.distribution_covariance, support, plug_in, self.d_out)

    def distribution_covariance(
        self, support: ArrayLike, theta: ArrayLike
    ) -> NDArray[np.float64]:
        """Cov of the EMS distribution ``theta`` of one row of bucket counts (d × d), by
        :func:`sw.ems_covariance` through the exact transition matrix (math (20.34)); NaN above
        :data:`sw.COVARIANCE_MAX_CELLS` buckets (d·d_out)."""
        if not sw.covariance_applies(self.d, self.d_out):
            return np.full((self.d, self.d), np.nan)
        m = sw.transition_matrix(self.eps, self.d, self.d_out)
        return sw.ems_covariance(np.asarray(support, dtype=np.float64), m, theta)

    def distribution_mean_estimate(
        self, support: ArrayLike, n: int, level: float = 0.95
    ) -> Estimate:
        """The mean (declared units) of the EMS distribution of one row of bucket counts, with
        its standard error gᵀ·Cov·g (g the bucket centres, math (20.35)) and normal interval:
        sampling noise about what EMS tends to; the smoothing's bias is not in it."""
        counts = np.asarray(support, dtype=np.float64)
        if counts.shape != (self.d_out,):
            raise check._fail(self.name, "support", f"one row of {self.d_out} bucket counts",
                              check.Described(f"shape {counts.shape}"))  # fmt: skip
        theta = self.unbiased(counts, n)
        g = (np.arange(self.d) + 0.5) / self.d
        se = (self.hi - self.lo) * math.sqrt(max(float(g @ self.distribution_covariance(
            counts, theta) @ g), 0.0))  # fmt: skip
        mean = self.distribution_mean(theta)
        z = normal_quantile(level)
        one = np.array([mean])
        return Estimate(int(n), None, float(level), one, one, np.array([se]),
                        one - z * se, one + z * se)  # fmt: skip

    def estimate_labels(self) -> list[str]:
        """Each bucket's range in declared units."""
        e = self.bucket_edges()
        return [f"[{e[j]:.6g}, {e[j + 1]:.6g}{']' if j == self.d - 1 else ')'}"
                for j in range(self.d)]  # fmt: skip

    def bucket_edges(self) -> NDArray[np.float64]:
        """The d + 1 edges of the estimate's buckets, in declared units."""
        return self.declared.x_of_t(np.arange(self.d + 1) / self.d)

    def distribution_mean(self, theta: ArrayLike) -> float:
        """The mean (declared units) of a distribution over the d buckets (bucket centres)."""
        return float(self.declared.x_of_t(sw.distribution_mean(theta)))

    def true_distribution(self, values: ArrayLike) -> NDArray[np.float64]:
        """What the estimate targets: the values' histogram over the d buckets."""
        return sw.histogram(self._unit(self.domain.check(self.name, values)), self.d)


# ---------------------------------------------------------------------- two-round forms


class _Rounded:
    """The privacy ledger's memo keys of the forms that memoize per α-rounded value (math §20.8,
    §19.6)."""

    name: str
    domain: Interval

    def _memo_key(self, values: NDArray, state: dict) -> NDArray[np.int64]:
        raise NotImplementedError

    def ledger_keys(self, trajectories: NDArray, state: Any = None) -> NDArray:
        """The α-rounded key of every report of (n, τ) trajectories (numbers, checked by the
        ledger) when ``state["offset"]`` gives the n users' offsets (as a population's
        ``memo.state`` holds them); without it the values as integers (their bit patterns, −0
        made +0), whose distinct count bounds the distinct keys from above (a user's key is a
        function of her value)."""
        x = np.asarray(trajectories, dtype=np.float64)
        if state is None:
            return (x + 0.0).view(np.int64)
        if not isinstance(state, dict) or "offset" not in state:
            raise ValueError(
                f"{self.name}: 'state' must hold the users' rounding offsets under 'offset' "
                "(a population's memo.state)."
            )
        offset = np.asarray(state["offset"], dtype=np.float64)
        if offset.shape != x.shape[:1] or not np.all((offset >= 0) & (offset < 1)):
            raise ValueError(
                f"{self.name}: state['offset'] must be {x.shape[0]} offsets in [0, 1), one per "
                f"user; got shape {offset.shape}."
            )
        return self._memo_key(x, {"offset": offset[:, None]})


@dataclass(frozen=True)
class _Chain(_Rounded, _BitSupport):
    """A memoized two-round form: α-point rounding, a memo per key at ε∞, one bit per report
    (math §20.8–§20.9). Its parameters: the declared range, ε∞, ε1, the grid s (None: the
    default grid) and ``clip``."""

    longitudinal: ClassVar[bool] = True
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")
    report_kind: ClassVar[ReportKind] = SIGN
    memo_mechanism: ClassVar[str]
    lo: float
    hi: float
    eps_perm: float
    eps_1: float
    s: int | None = None
    clip: bool = False

    def __post_init__(self) -> None:
        self._check_range()
        eps_perm, eps_1 = nm.chain_budgets(
            self.memo_mechanism, self.eps_perm, self.eps_1, owner=self.name
        )
        object.__setattr__(self, "eps_perm", eps_perm)
        object.__setattr__(self, "eps_1", eps_1)
        s = nm.default_grid(self.memo_mechanism, eps_perm) if self.s is None else self.s
        object.__setattr__(self, "s", check.integer(self.name, "s", s, minimum=1, maximum=4096))

    @classmethod
    def max_alpha(cls, eps_perm: float, **params: Any) -> float:
        """ε1/ε∞ below 2·artanh(1/C_M)/ε∞ (math (20.18)): 1 for a Duchi memo, 1/2 for PM, less
        the float margin :data:`~longldp.privacy.numeric.EPS_1_MARGIN`."""
        return nm.max_eps_1(cls.memo_mechanism, eps_perm) * (1 - nm.EPS_1_MARGIN) / eps_perm

    def report_slope(self) -> float:
        return nm.round2_slope(self.eps_1)

    @property
    def slope(self) -> float:
        """κ = tanh(ε1/2) of round 2: Pr[bit 1 | y1] = (1 + κ·y1)/2."""
        return nm.round2_slope(self.eps_1)

    # -- claims from the exact channels
    def report_channel(self) -> NDArray[np.float64]:
        """One report over the grid values (offset and memo integrated out, math §20.9)."""
        return nm.chain_report_channel(self.memo_mechanism, self.eps_perm, self.eps_1, self.s)

    def memo_channel(self) -> NDArray[np.float64]:
        """One memo over the grid values (Duchi's two outputs, or PM's cells and HM's atoms)."""
        u = 2.0 * np.arange(self.s + 1) / self.s - 1.0  # type: ignore[operator]
        return nm.memo_channel(self.memo_mechanism, self.eps_perm, u)

    def report_slack(self) -> float:
        """A report's probability moves with the memo's realized law and the cell midpoints:
        :func:`privacy.numeric.chain_report_slack` (math §20.12; 0 for a Duchi memo)."""
        s = int(self.s)  # type: ignore[arg-type]
        return nm.chain_report_slack(self.memo_mechanism, self.eps_perm, self.eps_1, s)

    def memo_slack(self) -> float:
        """A PM or HM memo is a cell of the memo mechanism's grid at ε∞:
        :func:`privacy.numeric.realized_slack` (math §20.12; 0 for a Duchi memo)."""
        return nm.realized_slack(self.memo_mechanism, self.eps_perm)

    def report_log_likelihoods(
        self, reports: Any, values: Any, memoized: bool
    ) -> NDArray[np.float64]:
        """(n, V) ln Pr[the τ bits of client i | x_v], exactly (math §20.9).

        Memoized: the offset gives key ⌊s·t⌋ or the next with probabilities 1 − φ, φ, and given
        the key the bits are Bernoulli((1 + κy1)/2) around one memo y1, integrated over the
        memo's law: Duchi's two atoms, or Gauss–Legendre on each piece of PM's density (exact
        for the degree-τ polynomial), plus HM's atoms. Not memoized: fresh reports, each of
        Duchi's channel at ε1.
        """
        x = self._unit(self.domain.check(self.name, values))
        bits = np.stack([np.asarray(r, dtype=np.float64) for r in reports], axis=1)
        tau = bits.shape[1]
        kappa = nm.round2_slope(self.eps_1)
        if not memoized:
            one = 0.5 + 0.5 * kappa * (2.0 * x - 1.0)
            c = bits.sum(axis=1)[:, None]
            return c * np.log(one)[None, :] + (tau - c) * np.log(1.0 - one)[None, :]
        c = bits.sum(axis=1)
        s = int(self.s)  # type: ignore[arg-type]
        low = np.minimum(np.floor(s * x).astype(np.int64), s)
        phi = s * x - low
        per_key = self._memo_count_log_laws(c, tau, kappa)  # (n, s + 1)
        out = []
        for j0, p in zip(low, phi, strict=True):
            j1 = min(j0 + 1, s)
            with np.errstate(divide="ignore"):
                both = np.stack([per_key[:, j0] + np.log1p(-p), per_key[:, j1] + np.log(p)])
            out.append(np.logaddexp(both[0], both[1]) if p > 0 else per_key[:, j0])
        return np.stack(out, axis=1)

    def _memo_count_log_laws(self, c: NDArray, tau: int, kappa: float) -> NDArray[np.float64]:
        """(n, s + 1): ln E_{y1 | key j}[p^c (1 − p)^{τ − c}], p = (1 + κ·y1)/2."""
        s = int(self.s)  # type: ignore[arg-type]
        u = 2.0 * np.arange(s + 1) / s - 1.0
        nodes, rows = _memo_quadrature(self.memo_mechanism, self.eps_perm, u, tau)
        p = 0.5 + 0.5 * kappa * nodes  # (m,)
        logs = c[:, None] * np.log(p)[None, :] + (tau - c)[:, None] * np.log1p(-p)[None, :]
        with np.errstate(divide="ignore"):
            return np.stack([_logsumexp(logs + np.log(w)[None, :]) for w in rows], axis=1)

    def round2_epsilon(self) -> float:
        """ε2 of round 2 alone (what each later report adds in math (4.2))."""
        return nm.round2_epsilon(self.memo_mechanism, self.eps_perm, self.eps_1)

    def time_average_variance(self, n: int, values: ArrayLike, tau: int) -> float:
        """Var of the mean of τ epochs' means of users whose values never change (declared
        units): mean over users of V1 + (Vtot − V1)/τ, over n² (math (20.21))."""
        u = 2.0 * self._unit(self.domain.check(self.name, values)) - 1.0
        v1, vtot = nm.chain_variances(self.memo_mechanism, self.eps_perm, self.eps_1, self.s, u)
        per = privacy.time_average_variance(vtot, v1, tau)
        return float(self.declared.variance_from_u(per.sum() / (n * n)))

    # -- hooks
    def _memo_store(self, n_users: int) -> Any:
        return make_memo_store(n_users, int(self.s) + 1, (), np.float64)  # type: ignore[arg-type]

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"offset": rng.random(m)}

    def _memo_key(self, values: NDArray, state: dict) -> NDArray[np.int64]:
        return nm.rounding_keys(self._unit(values), int(self.s), state["offset"])  # type: ignore[arg-type]

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray[np.float64]:
        grid_u = 2.0 * np.asarray(keys, dtype=np.float64) / self.s - 1.0  # type: ignore[operator]
        return chains.round1(self.memo_mechanism, grid_u, self.eps_perm, rng)

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray[np.uint8]:
        y1 = np.asarray(payload, dtype=np.float64)
        return (rng.random(y1.shape) < nm.round2_threshold(self.eps_1, y1)).astype(np.uint8)

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = self._new_state(1, np.random.default_rng(0))
        memo = self._round1(np.zeros(1, dtype=np.int64), state, np.random.default_rng(0))
        return self._round2(memo, np.random.default_rng(0)), state


def _logsumexp(a: NDArray) -> NDArray[np.float64]:
    top = np.max(a, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.sum(np.exp(a - top), axis=1, keepdims=True)))[:, 0]


def _memo_quadrature(
    mechanism: str, eps_perm: float, u: NDArray, tau: int
) -> tuple[NDArray, list[NDArray]]:
    """Nodes y and, per grid value u_j, weights w_j with E[g(y1) | u_j] = Σ w_j·g(y) exactly
    for polynomials g of degree ≤ τ: Duchi's atoms, Gauss–Legendre on each cell of PM's
    piecewise-constant density (weight = density × node weight), HM's mixture."""
    c_d = nm.duchi_bound(eps_perm)
    key = mechanism.lower()
    if key in ("duchi", "1bitmean") or (key == "hm" and nm.hm_beta(eps_perm) == 0.0):
        plus = nm.duchi_probability(eps_perm, u)
        return np.array([-c_d, c_d]), [np.array([1 - p, p]) for p in plus]
    pm = nm.pm_params(eps_perm)
    gl_x, gl_w = np.polynomial.legendre.leggauss(tau // 2 + 2)
    lft = pm.left(u)
    cuts = np.unique(np.clip(np.concatenate([[-pm.C, pm.C], lft, lft + pm.width]), -pm.C, pm.C))
    a, b = cuts[:-1], cuts[1:]
    nodes = ((b - a)[:, None] / 2 * gl_x[None, :] + (a + b)[:, None] / 2).ravel()
    half = ((b - a)[:, None] / 2 * gl_w[None, :]).ravel()
    mids = np.repeat((a + b) / 2, gl_x.size)
    beta = 1.0 if key == "pm" else nm.hm_beta(eps_perm)
    rows = []
    for uj, lj in zip(u, lft, strict=True):
        dens = np.where((mids >= lj) & (mids <= lj + pm.width), pm.p, pm.q)
        w = beta * dens * half
        if key == "hm":  # Duchi's atoms: the branch, then its own draw
            plus = float(nm.duchi_probability(eps_perm, uj))
            w = np.concatenate([w, (1 - beta) * np.array([1 - plus, plus])])
        rows.append(w)
    if key == "hm":
        nodes = np.concatenate([nodes, [-c_d, c_d]])
    return nodes, rows


#: A device keeps its rounding offset and its memos; neither is sent.
_MEMO = Linkage.of(Persistent.MEMO)
_CHAIN_TEST = {"eps_perm": 2.0, "eps_1": 0.8, "lo": 0.0, "hi": 10.0, "s": 4}


@dataclass(frozen=True)
class L1BitMean(_Chain):
    """1BitMean with α-point rounding, memoization and output perturbation (Ding et al. 2017),
    the flip calibrated so that one report costs ε1 (math (20.19))."""

    name: ClassVar[str] = "L-1BitMean"
    wire_id: ClassVar[int] = 56
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        # s = 8, not the default 1: seven memos of one bit each, so that a wrong round-1
        # derivation changes some (tests/test_client_vectors.py)
        VectorCase(
            {"lo": 0.0, "hi": 10.0, "eps_perm": 2.0, "eps_1": 1.0, "s": 8},
            (0.0, 3.0, 7.0, 3.0, 10.0, 5.5, 1.0),
        ),
    )
    memo_mechanism: ClassVar[str] = "Duchi"
    linkage: ClassVar[Linkage] = _MEMO
    test_params: ClassVar[tuple[dict[str, Any], ...]] = (_CHAIN_TEST,)

    @property
    def gamma(self) -> float:
        """The flip probability of the output perturbation."""
        return nm.flip_probability(self.eps_perm, self.eps_1)


@dataclass(frozen=True)
class LPM(_Chain):
    """A PM memo at ε∞ per rounded value, one Duchi-channel bit at ε1 per report (ours, math
    §20.9); ε1 < ε∞/2."""

    name: ClassVar[str] = "L-PM"
    wire_id: ClassVar[int] = 57
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase(
            {"lo": 0.0, "hi": 10.0, "eps_perm": 3.0, "eps_1": 1.0, "s": 8},
            (3.0, 9.0, 1.0, 5.0, 3.0),
            max_epsilon=3.5,
        ),
    )
    memo_mechanism: ClassVar[str] = "PM"
    linkage: ClassVar[Linkage] = _MEMO
    test_params: ClassVar[tuple[dict[str, Any], ...]] = (_CHAIN_TEST,)


@dataclass(frozen=True)
class LHM(_Chain):
    """An HM memo at ε∞ per rounded value, one Duchi-channel bit at ε1 per report (ours, math
    §20.9); ε1 < ε∞/2 when HM mixes in PM."""

    name: ClassVar[str] = "L-HM"
    wire_id: ClassVar[int] = 58
    client_spec: ClassVar[ClientSpec | None] = CHAIN_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase(
            {"lo": -5.0, "hi": 5.0, "eps_perm": 4.0, "eps_1": 1.0, "s": 4}, (0.0, 0.0, -5.0, 5.0)
        ),
    )
    memo_mechanism: ClassVar[str] = "HM"
    linkage: ClassVar[Linkage] = _MEMO
    test_params: ClassVar[tuple[dict[str, Any], ...]] = (_CHAIN_TEST,)


@dataclass(frozen=True)
class LSW(_Rounded, NumericMechanism):
    """L-SW: SW's output bucket at ε∞ memoized per rounded value, GRR over the buckets at each
    report (one report costs ε1); the distribution over the s + 1 grid points (ours, math
    §20.11)."""

    lo: float
    hi: float
    eps_perm: float
    eps_1: float
    s: int = 32
    d_out: int = 64
    clip: bool = False
    name: ClassVar[str] = "L-SW"
    wire_id: ClassVar[int] = 59
    client_spec: ClassVar[ClientSpec | None] = LSW_CLIENT
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase(
            {"lo": 0.0, "hi": 10.0, "eps_perm": 3.0, "eps_1": 1.0, "s": 4, "d_out": 32},
            (3.0, 3.0, 7.5, 0.0),
        ),
    )
    longitudinal: ClassVar[bool] = True
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")
    report_kind: ClassVar[ReportKind] = BUCKET
    estimand: ClassVar[Estimand] = Estimand.DISTRIBUTION
    linkage: ClassVar[Linkage] = _MEMO
    test_params: ClassVar[tuple[dict[str, Any], ...]] = (
        {"eps_perm": 3.0, "eps_1": 1.0, "lo": 0.0, "hi": 10.0, "s": 4, "d_out": 32},
    )

    def __post_init__(self) -> None:
        self._check_range()
        object.__setattr__(self, "s", check.integer(self.name, "s", self.s, minimum=1,
                                                    maximum=4096))  # fmt: skip
        object.__setattr__(
            self, "d_out", check.integer(self.name, "d_out", self.d_out, minimum=2, maximum=4096)
        )
        p2, q2 = nm.lsw_round2(self.eps_perm, self.eps_1, self.s, self.d_out)
        object.__setattr__(self, "eps_perm", float(self.eps_perm))
        object.__setattr__(self, "eps_1", float(self.eps_1))
        object.__setattr__(self, "_p2q2", (p2, q2))

    @classmethod
    def max_alpha(cls, eps_perm: float, **params: Any) -> float:
        """ε1/ε∞ below the bucketed memo's own ε over ε∞ (math §20.11), at the grid and
        buckets given in ``params`` (by default s = 32, d_out = 64)."""
        memo = nm.sw_grid_channel(eps_perm, params.get("s", 32), params.get("d_out", 64))
        return privacy.channel_epsilon(memo) / eps_perm

    # -- claims
    @property
    def p2(self) -> float:
        """Round 2 keeps the memo's bucket with p2."""
        return float(self._p2q2[0])  # type: ignore[attr-defined]

    @property
    def q2(self) -> float:
        """Round 2 reports each other bucket with q2."""
        return float(self._p2q2[1])  # type: ignore[attr-defined]

    def report_channel(self) -> NDArray[np.float64]:
        """W over the grid points (math (20.26))."""
        return nm.lsw_report_channel(self.eps_perm, self.eps_1, self.s, self.d_out)

    def memo_channel(self) -> NDArray[np.float64]:
        """W1 over the grid points (math (20.25))."""
        return nm.sw_grid_channel(self.eps_perm, self.s, self.d_out)

    def report_slack(self) -> float:
        """What the float samplers may add to one report's ε: the first of
        :func:`privacy.numeric.lsw_slack` (math §20.12)."""
        return nm.lsw_slack(self.eps_perm, self.eps_1, self.s, self.d_out)[0]

    def memo_slack(self) -> float:
        """The same for one memo (the bucket of SW's computed output): the second."""
        return nm.lsw_slack(self.eps_perm, self.eps_1, self.s, self.d_out)[1]

    # -- estimator
    @property
    def support_shape(self) -> tuple[int, ...]:
        return (self.d_out,)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        return (self.s + 1,)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        b = check.domain_values(self.name, reports, self.d_out, "reports")
        return np.bincount(b.ravel(), minlength=self.d_out)

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """The distribution over the grid points, in two stages (math (20.27)), row by row."""
        p2, q2 = self._p2q2  # type: ignore[attr-defined]
        w1 = self.memo_channel().T
        counts = np.asarray(support, dtype=np.float64)
        rows = counts.reshape(-1, self.d_out)
        out = []
        for r in rows:
            total = r.sum()
            if total <= 0:
                out.append(np.full(self.s + 1, np.nan))
                continue
            share = np.clip((r / total - q2) / (p2 - q2), 0.0, None)
            if share.sum() == 0:
                share[:] = 1.0
            out.append(sw.ems(share * total, w1).theta)
        return np.stack(out).reshape(*counts.shape[:-1], self.s + 1)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var of each grid point's share: the diagonal of :meth:`distribution_covariance`,
        row by row (math §20.14); NaN for a row without reports. Sampling noise only."""
        return _rows_variance(self.distribution_covariance, support, plug_in, self.d_out)

    def distribution_covariance(
        self, support: ArrayLike, theta: ArrayLike
    ) -> NDArray[np.float64]:
        """Cov of the two-stage estimate ``theta`` of one row of bucket counts (math (20.36)):
        EMS's Jacobian through the memo channel W1 at the pseudo-counts of (20.27), times the
        covariance of those pseudo-counts, (p2 − q2)⁻² times the counts' covariance through the
        report channel W on the buckets whose share was not clipped to 0; NaN above
        :data:`sw.COVARIANCE_MAX_CELLS` ((s + 1)·d_out)."""
        p2, q2 = self._p2q2  # type: ignore[attr-defined]
        counts = np.asarray(support, dtype=np.float64)
        if not sw.covariance_applies(self.s + 1, self.d_out):
            return np.full((self.s + 1, self.s + 1), np.nan)
        total = counts.sum()
        share = (counts / total - q2) / (p2 - q2)
        live = share > 0
        if not live.any():
            return np.full((self.s + 1, self.s + 1), np.nan)
        g = sw.ems_jacobian(np.where(live, share, 0.0) * total, self.memo_channel().T, theta)
        cov_c = sw.count_covariance(self.report_channel().T, theta, total)
        g = g[:, live] / (p2 - q2)
        cov = g @ cov_c[np.ix_(live, live)] @ g.T
        return (cov + cov.T) / 2

    def report_log_likelihoods(
        self, reports: Any, values: Any, memoized: bool
    ) -> NDArray[np.float64]:
        """(n, V) ln Pr[the τ buckets of client i | x_v]: memoized, Σ_m W1[j, m]·p2^{N_m}·
        q2^{τ − N_m} over the memo's bucket m (N_m: reports equal to m), mixed over the two keys
        of the offset; not memoized, Σ_t ln W[j, y_t] (math (20.25)–(20.26))."""
        x = self._unit(self.domain.check(self.name, values))
        ys = np.stack([check.domain_values(self.name, r, self.d_out, "reports") for r in reports],
                      axis=1)  # fmt: skip
        tau = ys.shape[1]
        low = np.minimum(np.floor(self.s * x).astype(np.int64), self.s)
        phi = self.s * x - low
        if memoized:
            p2, q2 = self._p2q2  # type: ignore[attr-defined]
            counts = np.stack([np.count_nonzero(ys == m, axis=1) for m in range(self.d_out)], 1)
            per_memo = counts * math.log(p2) + (tau - counts) * math.log(q2)  # (n, d_out)
            with np.errstate(divide="ignore"):
                w1 = np.log(self.memo_channel())  # (s + 1, d_out)
            per_key = np.stack([_logsumexp(per_memo + w1[j][None, :]) for j in range(self.s + 1)],
                               axis=1)  # fmt: skip
        else:
            w = np.log(self.report_channel())
            per_key = np.stack([w[j][ys].sum(axis=1) for j in range(self.s + 1)], axis=1)
        out = []
        for j0, p in zip(low, phi, strict=True):
            j1 = min(j0 + 1, self.s)
            with np.errstate(divide="ignore"):
                mix = np.logaddexp(per_key[:, j0] + np.log1p(-p), per_key[:, j1] + np.log(p))
            out.append(mix if p > 0 else per_key[:, j0])
        return np.stack(out, axis=1)

    def estimate_labels(self) -> list[str]:
        """Each grid point in declared units (the values are linearly binned onto them)."""
        return [f"{x:.6g}" for x in self.grid()]

    def grid(self) -> NDArray[np.float64]:
        """The s + 1 grid points of the estimate, in declared units."""
        return self.declared.x_of_t(np.arange(self.s + 1) / self.s)

    def true_distribution(self, values: ArrayLike) -> NDArray[np.float64]:
        """What the estimate targets: the values linearly binned onto the grid."""
        return sw.grid_distribution(self._unit(self.domain.check(self.name, values)), self.s)

    # -- hooks
    def _memo_store(self, n_users: int) -> Any:
        return make_memo_store(n_users, self.s + 1, (), np.int64)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"offset": rng.random(m)}

    def _memo_key(self, values: NDArray, state: dict) -> NDArray[np.int64]:
        return nm.rounding_keys(self._unit(values), self.s, state["offset"])

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray[np.int64]:
        grid_t = np.asarray(keys, dtype=np.float64) / self.s
        y = oneshot.sw_sample(grid_t, self.eps_perm, rng)
        return sw.bucket_index(y, self.eps_perm, self.d_out)

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray[np.int64]:
        p2, _ = self._p2q2  # type: ignore[attr-defined]
        kept = np.asarray(payload, dtype=np.int64)
        other = np.floor(rng.random(kept.shape) * (self.d_out - 1)).astype(np.int64)
        other += other >= kept
        return np.where(rng.random(kept.shape) < p2, kept, other)

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = self._new_state(1, np.random.default_rng(0))
        memo = self._round1(np.zeros(1, dtype=np.int64), state, np.random.default_rng(0))
        return self._round2(memo, np.random.default_rng(0)), state

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        b = check.domain_values(self.name, records, self.d_out, "reports")
        return uint_to_bytes(b, min_bytes(self.d_out - 1))

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return check.domain_values(self.name, bytes_to_uint(rows), self.d_out, "reports")


def _rows_variance(
    covariance: Any, support: NDArray, plug_in: NDArray[np.float64], d_out: int
) -> NDArray[np.float64]:
    """The diagonals of ``covariance(counts, theta)`` row by row (support rows of d_out
    counts, estimate rows); NaN for a row without reports."""
    counts = np.asarray(support, dtype=np.float64).reshape(-1, d_out)
    theta = np.asarray(plug_in, dtype=np.float64)
    rows = theta.reshape(counts.shape[0], -1)
    out = np.full(rows.shape, np.nan)
    for i, (c, th) in enumerate(zip(counts, rows, strict=True)):
        if c.sum() > 0 and np.all(np.isfinite(th)):
            out[i] = np.maximum(np.diag(covariance(c, th)), 0.0)
    return out.reshape(theta.shape)


#: The numeric classes, in the order the registry lists them (one-shot first).
NUMERIC_CLASSES = (Laplace, Duchi, PM, HM, SW, OneBitMean, L1BitMean, LPM, LHM, LSW)
