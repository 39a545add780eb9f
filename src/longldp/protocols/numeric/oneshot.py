"""One-shot numeric mechanisms: vectorized samplers and unbiased mean estimates (math §20.2–§20.7).

Pure functions: arrays in, arrays out, randomness from an explicit generator. Every sampler
draws only ``rng.random(size)`` (uniforms on [0, 1)), the one method a client's secure source
(:class:`longldp.protocols.SecureRandom`) and a NumPy ``Generator`` share, and reads its
probabilities from :mod:`longldp.privacy.numeric`, the same expressions the exact-privacy
checks and the variances use.

Reports. Laplace, PM, HM and SW report a real number; Duchi and 1BitMean report one bit (Duchi's
output ±C is the bit b read as C(2b − 1)). :func:`debias` turns a report into û, an unbiased
estimate of the user's u ∈ [−1, 1]; the mean of the û is the mean estimate, and its variance on
fixed data is (v0 + v1·m1 + v2·m2)/n (:class:`longldp.privacy.numeric.UnitVariance`).

References [DUC18], [WAN19], [LI20], [DIN17]: as listed in :mod:`longldp.privacy.numeric`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import numeric as nm
from longldp.protocols._estimate import normal_quantile
from longldp.protocols.numeric._range import NumericRange

Generator = np.random.Generator


def _uniform(rng: object, size: int | tuple[int, ...]) -> NDArray[np.float64]:
    return rng.random(size)  # type: ignore[attr-defined,no-any-return]


# --------------------------------------------------------------------------------------------
# Samplers (u or t in, reports out)
# --------------------------------------------------------------------------------------------


#: Users per block of the samplers' arithmetic. A sampler draws its uniforms in the order the
#: client specification lists them (docs/client-spec.md §3.4) and, for a batch, each kind of
#: uniform for the whole batch before the next kind; a kind that comes last (or alone) is drawn
#: block by block, which is the same stream (a generator's uniforms come one 64-bit output each,
#: in order), and the arithmetic runs block by block in work arrays allocated once per call
#: (:func:`_work`): they stay in the CPU cache, and no temporary is allocated per operation
#: (fresh pages cost as much as the arithmetic; benchmarks/README.md, bench_numeric).
BLOCK = 1 << 15


def _blocks(n: int) -> range:
    return range(0, n, BLOCK)


@dataclass(frozen=True)
class _Work:
    """Work arrays of one sampler call, one block long: float64 ``reals`` and a boolean ``mask``.

    The arithmetic writes into them with ``out=``; selections are a 0/1 mask times a constant
    added (exact: x + 0 is x, and no operand here is −0) or :func:`numpy.putmask`, never a
    ``where=`` ufunc or ``copyto(where=)``: on a random mask they cost 20 and 12 plain passes,
    ``putmask`` 5.5 and a mask product 2 (NumPy 2.4; benchmarks/README.md, bench_numeric).
    """

    reals: tuple[NDArray[np.float64], ...]
    mask: NDArray[np.bool_]

    def cut(self, m: int) -> tuple[tuple[NDArray[np.float64], ...], NDArray[np.bool_]]:
        """The first m entries of every work array (the last block may be short)."""
        return tuple(r[:m] for r in self.reals), self.mask[:m]


def _work(n: int, reals: int) -> _Work:
    m = min(BLOCK, n)
    return _Work(tuple(np.empty(m) for _ in range(reals)), np.empty(m, dtype=np.bool_))


def laplace_sample(u: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.float64]:
    """y = u + Lap(2/ε) by inversion of one uniform U: r = frac(2U) ∈ [0, 1) gives the
    magnitude −ln(1 − r) ~ Exp(1) (finite: 1 − r > 0), U ≥ 1/2 the sign (math §20.2)."""
    scale = nm.laplace_scale(eps)
    flat_u = np.ravel(u)
    out = np.empty(flat_u.size)
    for first in _blocks(flat_u.size):
        sl = slice(first, first + BLOCK)
        mag = out[sl]
        w = 2.0 * _uniform(rng, mag.size)
        upper = w >= 1.0
        w -= upper
        np.log1p(-w, out=mag)  # −Exp(1)
        mag *= (1.0 - 2.0 * upper) * scale  # the sign: + for U ≥ 1/2
        mag += flat_u[sl]
    return out.reshape(np.shape(u))


def duchi_sample(u: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.uint8]:
    """Bit b with Pr[b = 1 | u] = (1 + u·tanh(ε/2))/2; the output is C(2b − 1) (math §20.3).
    One uniform per user, compared with :func:`~longldp.privacy.numeric.duchi_threshold`."""
    flat_u = np.ravel(u)
    out = np.empty(flat_u.size, dtype=np.uint8)
    bits = out.view(np.bool_)
    for first in _blocks(flat_u.size):
        sl = slice(first, first + BLOCK)
        ub = flat_u[sl]
        np.less(_uniform(rng, ub.size), nm.duchi_threshold(eps, ub), out=bits[sl])
    return out.reshape(np.shape(u))


def onebit_sample(t: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.uint8]:
    """1BitMean ([DIN17]): Pr[b = 1 | t] = 1/(e^ε + 1) + t(e^ε − 1)/(e^ε + 1), which is
    Duchi's channel at u = 2t − 1 (math §20.3)."""
    return duchi_sample(2.0 * t - 1.0, eps, rng)


def _pm_block(
    u: NDArray[np.float64], v: NDArray[np.float64], z: NDArray[np.float64], pm: nm.PMParams,
    out: NDArray[np.float64], lft: NDArray[np.float64], inner: NDArray[np.float64],
    mask: NDArray[np.bool_],
) -> None:  # fmt: skip
    """PM's outputs of one block from its uniforms v (position) and z (piece), into ``out``:
    uniform on [ℓ(u), r(u)] if z < ``pm.center``, else uniform on the rest of [−C, C]; ``lft``,
    ``inner`` and ``mask`` are work arrays as long as ``out`` (ℓ(u), the centre piece)."""
    c = pm.C
    np.multiply(u, (c + 1) / 2, out=lft)  # ℓ(u), as PMParams.left computes it
    lft -= pm.width / 2
    np.multiply(v, c + 1, out=out)
    out -= c  # uniform on [−C, 1): the part at or past ℓ moves up by the centre's width
    np.greater_equal(out, lft, out=mask)
    np.multiply(mask, pm.width, out=inner)
    out += inner
    np.multiply(v, pm.width, out=inner)
    inner += lft
    np.less(z, pm.center, out=mask)
    np.putmask(out, mask, inner)


def pm_sample(u: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.float64]:
    """PM ([WAN19] §III): with probability e^{ε/2}/(e^{ε/2} + 1) (``pm.center``, as drawn)
    uniform on [ℓ(u), r(u)], else uniform on the rest of [−C, C] (length C + 1) (math §20.4).

    One uniform v places the output in either piece (v(C − 1) from ℓ, or v(C + 1) − C shifted
    past the centre piece), another, z, chooses the piece: every position keeps its precision
    at large ε, where C − 1 is tiny. The batch's v, then its z (block by block); arithmetic in
    the call's work arrays (:class:`_Work`).
    """
    pm = nm.pm_params(eps)
    flat_u = np.ravel(u)
    out = _uniform(rng, flat_u.size)  # the batch's v, replaced block by block by the reports
    work = _work(flat_u.size, 3)
    for first in _blocks(flat_u.size):
        ob = out[first : first + BLOCK]
        (vb, lft, inner), mask = work.cut(ob.size)
        np.copyto(vb, ob)
        _pm_block(
            flat_u[first : first + BLOCK], vb, _uniform(rng, ob.size), pm, ob, lft, inner, mask
        )
    return out.reshape(np.shape(u))


def hm_sample(u: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.float64]:
    """HM ([WAN19] §III): PM with probability β, else Duchi's ±C (math §20.5).

    One uniform w chooses the branch (w < β), another Duchi's sign for the users of its branch
    (one uniform for both would make the +C atom vanish at large ε, where β + (1 − β)·Pr[+C]
    rounds to β: an infinite ε as the sampler realizes it). The stream: the batch's w, then its
    sign uniforms, then PM's v and z for the branch's users only; w, the signs and the z block by
    block (:data:`BLOCK`). ±C is the bit times 2C less C, exactly.
    """
    beta = nm.hm_beta(eps)
    c = nm.duchi_bound(eps)
    flat_u = np.ravel(u)
    n = flat_u.size
    picks = [np.flatnonzero(_uniform(rng, min(BLOCK, n - f)) < beta) for f in _blocks(n)]
    y = np.empty(n)
    work = _work(n, 4)
    for first in _blocks(n):
        yb = y[first : first + BLOCK]
        (thr, *_), bit = work.cut(yb.size)
        nm.duchi_threshold(eps, flat_u[first : first + BLOCK], out=thr)
        np.less(_uniform(rng, yb.size), thr, out=bit)
        np.multiply(bit, 2.0 * c, out=yb)
        yb -= c
    if beta > 0.0:
        k = sum(p.size for p in picks)
        v = _uniform(rng, k)  # then the z, block by block (the last kind of uniform)
        pm = nm.pm_params(eps)
        first = 0
        for block, at in zip(_blocks(n), picks, strict=True):  # the branch's users, block by block
            last = first + at.size
            (lft, inner, ub, placed), mask = work.cut(at.size)
            np.take(flat_u[block : block + BLOCK], at, out=ub)
            _pm_block(ub, v[first:last], _uniform(rng, at.size), pm, placed, lft, inner, mask)
            y[block : block + BLOCK][at] = placed
            first = last
    return y.reshape(np.shape(u))


def sw_sample(t: NDArray[np.float64], eps: float, rng: object) -> NDArray[np.float64]:
    """SW ([LI20]): with probability 2bp (``sw.center``, as drawn) uniform on [t − b, t + b],
    else uniform on the rest of [−b, 1 + b] (length 1) (math §20.6). Two uniforms, as
    :func:`pm_sample` (the batch's v, then its z block by block)."""
    sw = nm.sw_params(eps)
    b = sw.b
    flat_t = np.ravel(t)
    out = _uniform(rng, flat_t.size)  # the batch's v, replaced block by block by the reports
    work = _work(flat_t.size, 2)
    for first in _blocks(flat_t.size):
        sl = slice(first, first + BLOCK)
        tb, ob = flat_t[sl], out[sl]
        (vb, inner), mask = work.cut(ob.size)
        np.copyto(vb, ob)
        np.subtract(vb, b, out=ob)  # v − b on [−b, t − b), v + b past it
        np.greater_equal(vb, tb, out=mask)
        np.multiply(mask, 2 * b, out=inner)
        ob += inner
        np.multiply(vb, 2 * b, out=inner)
        inner += tb
        inner -= b
        np.less(_uniform(rng, ob.size), sw.center, out=mask)
        np.putmask(ob, mask, inner)
    return out.reshape(np.shape(t))


# --------------------------------------------------------------------------------------------
# Debiasing: report → unbiased estimate û of u
# --------------------------------------------------------------------------------------------


def _identity(y: NDArray, eps: float) -> NDArray[np.float64]:
    return np.asarray(y, dtype=np.float64)


def _bit_debias(b: NDArray, eps: float) -> NDArray[np.float64]:
    return nm.duchi_bound(eps) * (2.0 * np.asarray(b, dtype=np.float64) - 1.0)


def _sw_debias(y: NDArray, eps: float) -> NDArray[np.float64]:
    a0, a1 = nm.sw_params(eps).mean_affine()
    return 2.0 * (np.asarray(y, dtype=np.float64) - a0) / a1 - 1.0


@dataclass(frozen=True)
class NumericKernel:
    """One one-shot mechanism's pieces: its coordinate (``"u"`` ∈ [−1, 1] or ``"t"`` ∈ [0, 1]),
    what a report is (``"real"`` or ``"bit"``), the sampler, the debiasing map to û, the
    per-report variance, and the affine form û = a + b·report (for aggregating sums)."""

    name: str
    coordinate: str
    report: str
    sample: Callable[[NDArray[np.float64], float, object], NDArray]
    debias: Callable[[NDArray, float], NDArray[np.float64]]
    variance: Callable[[float], nm.UnitVariance]

    def affine(self, eps: float) -> tuple[float, float]:
        """(a, b) with û = a + b·report."""
        a = float(self.debias(np.zeros(1), eps)[0])
        return a, float(self.debias(np.ones(1), eps)[0]) - a


#: The one-shot mechanisms by name (math §20.7); names as registered (case-insensitive lookup
#: through :func:`kernel`).
KERNELS: dict[str, NumericKernel] = {
    k.name: k
    for k in (
        NumericKernel("Laplace", "u", "real", laplace_sample, _identity, nm.laplace_variance),
        NumericKernel("Duchi", "u", "bit", duchi_sample, _bit_debias, nm.duchi_variance),
        NumericKernel("PM", "u", "real", pm_sample, _identity, nm.pm_variance),
        NumericKernel("HM", "u", "real", hm_sample, _identity, nm.hm_variance),
        NumericKernel("SW", "t", "real", sw_sample, _sw_debias, nm.sw_variance),
        NumericKernel("1BitMean", "t", "bit", onebit_sample, _bit_debias, nm.duchi_variance),
    )
}


def kernel(name: str) -> NumericKernel:
    """The kernel of a one-shot mechanism by name (case-insensitive)."""
    by_lower = {k.lower(): v for k, v in KERNELS.items()}
    key = check.choice("numeric mechanism", "mechanism", name, tuple(by_lower))
    return by_lower[key]


# --------------------------------------------------------------------------------------------
# Client side and server side, end to end in the declared units
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Perturbed:
    """Reports of a batch of users, and how many of their values were clipped (if asked)."""

    reports: NDArray
    clipped: int


def perturb(
    mechanism: str,
    values: ArrayLike,
    eps: float,
    rng: object,
    *,
    lo: float,
    hi: float,
    clip: bool = False,
) -> Perturbed:
    """Reports of ``values`` in the declared range [lo, hi] (outside refused unless ``clip``)."""
    k = kernel(mechanism)
    eps = check.budget(k.name, "eps", eps)
    unit = NumericRange(lo, hi, owner=k.name).to_unit(values, clip=clip)
    x = unit.t if k.coordinate == "t" else unit.u
    return Perturbed(k.sample(x, eps, rng), unit.clipped)


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its standard error and normal interval, in the declared units (math (20.3))."""

    n: int
    mean: float
    se: float
    lower: float
    upper: float
    level: float
    worst_se: float


def mean_moments(mechanism: str, reports: ArrayLike, eps: float) -> tuple[int, float, float]:
    """(n, Σû, Σû²) of a batch of reports: the sufficient sums a server keeps (math (20.3))."""
    k = kernel(mechanism)
    y = np.asarray(reports)
    if k.report == "bit":
        ones = int(np.count_nonzero(y))
        c = nm.duchi_bound(eps)
        return int(y.size), c * (2 * ones - y.size), c * c * y.size
    u_hat = k.debias(y, eps)
    return int(y.size), float(u_hat.sum()), float(np.dot(u_hat, u_hat))


def estimate_mean(
    mechanism: str,
    reports: ArrayLike,
    eps: float,
    *,
    lo: float,
    hi: float,
    level: float = 0.95,
) -> MeanEstimate:
    """The unbiased mean of the reports, its standard error by the plug-in rule of math (20.3),
    the normal interval and the worst-case standard error, in the declared units."""
    k = kernel(mechanism)
    eps = check.budget(k.name, "eps", eps)
    rng_ = NumericRange(lo, hi, owner=k.name)
    n, s1, s2 = mean_moments(k.name, reports, eps)
    if n == 0:
        raise check._fail(k.name, "reports", "at least one report", check.Described("none"))
    return estimate_from_sums(k.name, n, s1, s2, eps, rng_, level)


def estimate_from_sums(
    mechanism: str,
    n: int,
    s1: float,
    s2: float,
    eps: float,
    declared: NumericRange,
    level: float = 0.95,
) -> MeanEstimate:
    """The estimate of math (20.3) from the sums (n, Σû, Σû²) of :func:`mean_moments`."""
    var = kernel(mechanism).variance(eps)
    m1 = s1 / n
    m1c = min(1.0, max(-1.0, m1))
    if var.v2 > 0:
        c0, c1, c2 = var.second_moment()
        m2 = min(1.0, max(m1c * m1c, (s2 / n - c0 - c1 * m1c) / c2))
    else:
        m2 = m1c * m1c  # V decreasing in m2: the least m2 the mean allows bounds V from above
    v_u = max(float(var.of_mean(n, m1c, m2)), 0.0)
    se = float(np.sqrt(declared.variance_from_u(v_u)))
    worst = float(np.sqrt(declared.variance_from_u(var.worst() / n)))
    z = normal_quantile(level)
    mean = float(declared.mean_from_u(m1))
    return MeanEstimate(int(n), mean, se, mean - z * se, mean + z * se, float(level), worst)


def mean_variance(mechanism: str, values: ArrayLike, eps: float, *, lo: float, hi: float) -> float:
    """Exact variance of the mean estimate on these values (declared units, math (20.2))."""
    k = kernel(mechanism)
    declared = NumericRange(lo, hi, owner=k.name)
    u = declared.to_unit(values).u
    var = k.variance(check.budget(k.name, "eps", eps))
    return float(declared.variance_from_u(var.of_mean(u.size, u.mean(), np.mean(u * u))))


def worst_mean_variance(mechanism: str, n: int, eps: float, *, lo: float, hi: float) -> float:
    """Worst-case variance of the mean of n reports over all data in [lo, hi] (declared units)."""
    k = kernel(mechanism)
    declared = NumericRange(lo, hi, owner=k.name)
    n = check.integer(k.name, "n", n, minimum=1)
    return float(declared.variance_from_u(k.variance(check.budget(k.name, "eps", eps)).worst() / n))
