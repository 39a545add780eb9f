"""Square wave's distribution estimate: bucketed reports, exact transition matrix, EM with
smoothing (EMS) (Li et al. 2020; docs/math.md §20.6).

The reports y ∈ [−b, 1 + b] are counted in ``d_out`` equal buckets; the input [0, 1] is cut into
``d`` equal buckets. M[j, i] = Pr[y in output bucket j | t uniform in input bucket i] is computed
exactly (:func:`transition_matrix`), and EMS finds the distribution θ over the input buckets
that maximizes the likelihood of the bucket counts, smoothing θ after every M step with the
binomial kernel (1, 2, 1)/4 (Silverman, Jones, Wilson and Nychka 1990, as [LI20] does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import numeric as nm

#: Stopping rule of the EMS loop, as the reference code of [LI20]: stop when the log-likelihood
#: (of all the counts) improves by less than ``TOL`` after at least three iterations, or when
#: θ moves by less than 1/N in L1, or after ``MAX_ITER`` iterations.
TOL = 1e-3
MAX_ITER = 10_000


def _ramp2(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.where(x > 0, 0.5 * x * x, 0.0)


def _band_area(
    c: NDArray[np.float64], d: NDArray[np.float64], a: NDArray[np.float64], e: NDArray[np.float64],
    z: float,
) -> NDArray[np.float64]:  # fmt: skip
    """Area of {(y, v) ∈ [c, d] × [a, e] : y − v ≤ z}, by inclusion–exclusion over the corners
    of the second antiderivative R(x) = max(x, 0)²/2 of the indicator."""
    return _ramp2(z - c + e) - _ramp2(z - d + e) - _ramp2(z - c + a) + _ramp2(z - d + a)


def transition_matrix(eps: float, d: int, d_out: int) -> NDArray[np.float64]:
    """M[j, i] = Pr[report in output bucket j | t uniform on input bucket i] (math (20.14)).

    The density is q everywhere on [−b, 1 + b] plus (p − q) where |y − t| ≤ b, so
    M[j, i] = q·|B_j| + (p − q)·area{(y, t) ∈ B_j × I_i : |y − t| ≤ b}/|I_i|, the area by
    :func:`_band_area`. Each column sums to 1.
    """
    d = check.integer("SW", "d", d, minimum=2)
    d_out = check.integer("SW", "d_out", d_out, minimum=2)
    sw = nm.sw_params(eps)
    out_edges = -sw.b + (1 + 2 * sw.b) * np.arange(d_out + 1) / d_out
    in_edges = np.arange(d + 1) / d
    c, dd = out_edges[:-1, None], out_edges[1:, None]
    a, e = in_edges[None, :-1], in_edges[None, 1:]
    band = _band_area(c, dd, a, e, sw.b) - _band_area(c, dd, a, e, -sw.b)
    return sw.q * (dd - c) + (sw.p - sw.q) * band / (e - a)


def bucket_index(reports: ArrayLike, eps: float, d_out: int) -> NDArray[np.int64]:
    """The output bucket of each SW report among d_out equal buckets of [−b, 1 + b] (the last
    one closed); reports outside [−b, 1 + b] are refused."""
    d_out = check.integer("SW", "d_out", d_out, minimum=2)
    sw = nm.sw_params(eps)
    y = np.asarray(reports, dtype=np.float64)
    j = np.floor((y + sw.b) * (d_out / (1 + 2 * sw.b))).astype(np.int64)
    bad = (j < -1) | (j > d_out) | ~np.isfinite(y)
    if bad.any():
        raise check._fail(
            "SW", "reports", f"numbers in [{-sw.b:.6g}, {1 + sw.b:.6g}]",
            check.Described(f"{float(y[bad][0])!r}"),
        )  # fmt: skip
    return np.clip(j, 0, d_out - 1)


def report_counts(reports: ArrayLike, eps: float, d_out: int) -> NDArray[np.int64]:
    """Counts of SW reports in the d_out equal buckets of [−b, 1 + b] (the last one closed)."""
    return np.bincount(bucket_index(reports, eps, d_out), minlength=d_out)


class _SecondAntiderivative:
    """G2(x) = ∫_{−∞}^{x} ∫_{−∞}^{s} g for a piecewise-constant g on K equal cells of width w
    starting at x0 (g = 0 outside), at a fixed set of points: the index and offset of every
    point are computed once, each call is O(K + points)."""

    def __init__(self, x0: float, w: float, cells: int, points: NDArray[np.float64]) -> None:
        end = x0 + cells * w
        xc = np.clip(points, x0, end)
        self.k = np.minimum(np.floor((xc - x0) / w).astype(np.int64), cells - 1)
        self.delta = xc - (x0 + self.k * w)
        self.beyond = np.maximum(points - end, 0.0)
        self.w = w

    def __call__(self, g: NDArray[np.float64]) -> NDArray[np.float64]:
        g1 = np.empty(g.size + 1)
        g1[0] = 0.0
        np.cumsum(g * self.w, out=g1[1:])
        g2 = np.empty(g.size + 1)
        g2[0] = 0.0
        np.cumsum(g1[:-1] * self.w + g * (self.w * self.w / 2), out=g2[1:])
        k, dl = self.k, self.delta
        return g2[k] + g1[k] * dl + g[k] * (dl * dl / 2) + g1[-1] * self.beyond


class SWOperator:
    """M and Mᵀ of :func:`transition_matrix` applied in O(d + d_out) (ours, math (20.15)).

    (Mθ)_j = q·w·Σθ + (p − q)·∫_{B_j} [F(y + b) − F(y − b)] dy, F the CDF of θ spread uniformly
    over its buckets, so each output bucket needs the second antiderivative of θ's density at
    its two edges shifted by ±b; Mᵀr is the same construction with the roles of the two grids
    exchanged. Equal to the dense matrix products up to rounding (tests/test_numeric_sw.py).
    """

    def __init__(self, eps: float, d: int, d_out: int) -> None:
        self.d = check.integer("SW", "d", d, minimum=2)
        self.d_out = check.integer("SW", "d_out", d_out, minimum=2)
        sw = nm.sw_params(eps)
        self.sw = sw
        self.w = (1 + 2 * sw.b) / self.d_out
        self.h = 1.0 / self.d
        out_edges = -sw.b + self.w * np.arange(self.d_out + 1)
        in_edges = self.h * np.arange(self.d + 1)
        self._in = _SecondAntiderivative(
            0.0, self.h, self.d, np.concatenate([out_edges + sw.b, out_edges - sw.b])
        )
        self._out = _SecondAntiderivative(
            -sw.b, self.w, self.d_out, np.concatenate([in_edges + sw.b, in_edges - sw.b])
        )

    @property
    def shape(self) -> tuple[int, int]:
        """(d_out, d), as the matrix."""
        return self.d_out, self.d

    def matvec(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """Mθ."""
        m = self.d_out + 1
        g = self._in(theta / self.h)
        band = np.diff(g[:m]) - np.diff(g[m:])
        return self.sw.q * self.w * theta.sum() + (self.sw.p - self.sw.q) * band

    def rmatvec(self, r: NDArray[np.float64]) -> NDArray[np.float64]:
        """Mᵀr."""
        m = self.d + 1
        g = self._out(r)
        band = np.diff(g[:m]) - np.diff(g[m:])
        return self.sw.q * self.w * r.sum() + (self.sw.p - self.sw.q) / self.h * band


class DenseOperator:
    """Any transition matrix as an operator (matvec, rmatvec) for :func:`ems`."""

    def __init__(self, matrix: ArrayLike) -> None:
        self.m = np.asarray(matrix, dtype=np.float64)

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix's shape."""
        return self.m.shape  # type: ignore[return-value]

    def matvec(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """Mθ."""
        return self.m @ theta

    def rmatvec(self, r: NDArray[np.float64]) -> NDArray[np.float64]:
        """Mᵀr."""
        return self.m.T @ r


def _smooth_linear(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    """The linear part of the smoothing, along the first axis: (1, 2, 1)/4 inside, the kernel
    cut at the ends and renormalized there ((2, 1)/3 and (1, 2)/3)."""
    out = 2.0 * theta
    out[1:] += theta[:-1]
    out[:-1] += theta[1:]
    out[0] /= 3.0
    out[-1] /= 3.0
    out[1:-1] /= 4.0
    return out


def _smoothing(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    """(1, 2, 1)/4 binomial smoothing, then the total brought back to 1."""
    out = _smooth_linear(theta)
    return out / out.sum()


@dataclass(frozen=True)
class EMSResult:
    """θ over the input buckets, the iterations run and the final log-likelihood."""

    theta: NDArray[np.float64]
    iterations: int
    loglik: float


def ems(
    counts: ArrayLike,
    operator: SWOperator | DenseOperator | ArrayLike,
    *,
    smoothing: bool = True,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> EMSResult:
    """EM (``smoothing=False``) or EMS for θ from bucket counts and a transition operator.

    One step: θ ← θ ⊙ Mᵀ(c / Mθ) / N, then the smoothing; stop by :data:`TOL` (math §20.6).
    ``operator`` is an :class:`SWOperator`, a :class:`DenseOperator` or a matrix.
    """
    op = operator if hasattr(operator, "matvec") else DenseOperator(operator)  # type: ignore[arg-type]
    cnt = np.asarray(counts, dtype=np.float64)
    d_out, d = op.shape  # type: ignore[union-attr]
    if cnt.shape != (d_out,):
        raise check._fail(
            "EMS", "counts", f"a vector of {d_out} bucket counts",
            check.Described(f"shape {cnt.shape}"),
        )  # fmt: skip
    total = cnt.sum()
    if total <= 0:
        raise check._fail("EMS", "counts", "at least one report", check.Described("none"))
    live = cnt > 0
    theta = np.full(d, 1.0 / d)
    pred = op.matvec(theta)  # type: ignore[union-attr]
    old = float(cnt[live] @ np.log(pred[live]))
    it = 0
    for it in range(1, max_iter + 1):
        new = theta * op.rmatvec(cnt / pred) / total  # type: ignore[union-attr]
        new /= new.sum()
        if smoothing:
            new = _smoothing(new)
        moved = float(np.abs(new - theta).sum())
        theta = new
        pred = op.matvec(theta)  # type: ignore[union-attr]
        ll = float(cnt[live] @ np.log(pred[live]))
        done = moved < 1.0 / total or (it > 2 and abs(ll - old) < tol)
        old = ll
        if done:
            break
    return EMSResult(theta, it, old)


#: The delta method is dense (d × d_out matrices, a d × d solve): it is computed when
#: d·d_out ≤ COVARIANCE_MAX_CELLS (1,024 × 1,024 buckets: about 1 s on one core); above, the
#: standard error is NaN (:func:`covariance_applies`).
COVARIANCE_MAX_CELLS = 1 << 20


def covariance_applies(d: int, d_out: int) -> bool:
    """Whether :func:`ems_covariance` is computed for d input and d_out output buckets."""
    return int(d) * int(d_out) <= COVARIANCE_MAX_CELLS


def _dense(operator: SWOperator | DenseOperator | ArrayLike) -> NDArray[np.float64]:
    """The matrix of an operator (column by column) or of a matrix-like."""
    if hasattr(operator, "matvec"):
        _, d = operator.shape  # type: ignore[union-attr]
        return np.stack([operator.matvec(e) for e in np.eye(d)], axis=1)  # type: ignore[union-attr]
    return np.asarray(operator, dtype=np.float64)


def ems_jacobian(
    counts: ArrayLike,
    operator: SWOperator | DenseOperator | ArrayLike,
    theta: ArrayLike,
    *,
    smoothing: bool = True,
) -> NDArray[np.float64]:
    """G = dθ̂/dc (d × d_out) of the EM(S) estimate θ̂ = ``theta`` of ``counts``, through its
    fixed point (ours, docs/math.md §20.14, (20.32)).

    One step is θ ← F(θ, c) = S(n(R(θ, c))): R(θ, c) = θ ⊙ Mᵀ(c ⊘ Mθ)/N the EM update, n the
    division by the total and S the smoothing (:func:`_smoothing`; the identity for EM). At the
    fixed point θ̂ = F(θ̂, c), so dθ̂ = (I − ∂F/∂θ)⁻¹·∂F/∂c·dc. Dense: O(d²·d_out + d³).
    """
    m = _dense(operator)
    d_out, d = m.shape
    c = np.asarray(counts, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    if c.shape != (d_out,) or th.shape != (d,):
        raise check._fail(
            "EMS", "counts, theta", f"vectors of {d_out} counts and {d} shares",
            check.Described(f"shapes {c.shape}, {th.shape}"),
        )  # fmt: skip
    total = c.sum()
    if total <= 0:
        raise check._fail("EMS", "counts", "at least one report", check.Described("none"))
    fit = m @ th
    a = m.T @ (c / fit) / total
    r = th * a
    d_r_theta = np.diag(a) - (th[:, None] * m.T) @ (m * (c / (fit * fit))[:, None]) / total
    d_r_c = (th[:, None] * m.T / fit[None, :] - r[:, None]) / total
    s_r = r.sum()
    step = (np.eye(d) - np.outer(r / s_r, np.ones(d))) / s_r  # the division by the total
    if smoothing:
        k = _smooth_linear(np.eye(d))
        y = k @ (r / s_r)
        step = (np.eye(d) - np.outer(y / y.sum(), np.ones(d))) @ k @ step / y.sum()
    return np.linalg.solve(np.eye(d) - step @ d_r_theta, step @ d_r_c)


def count_covariance(channel: ArrayLike, theta: ArrayLike, n: float) -> NDArray[np.float64]:
    """Cov[c] of the bucket counts of n reports of fixed users, a share θ_i of them in input
    bucket i, each reporting through the column i of ``channel`` (d_out × d): the sum of the
    users' own multinomial covariances, n·(diag(Wθ) − W·diag(θ)·Wᵀ) (math (20.33))."""
    w = np.asarray(channel, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    th = th / th.sum()
    return float(n) * (np.diag(w @ th) - (w * th[None, :]) @ w.T)


def ems_covariance(
    counts: ArrayLike,
    operator: SWOperator | DenseOperator | ArrayLike,
    theta: ArrayLike,
    *,
    smoothing: bool = True,
) -> NDArray[np.float64]:
    """Cov[θ̂] ≈ G·Cov[c]·Gᵀ of the EM(S) estimate (:func:`ems_jacobian`) with the counts'
    covariance of fixed users (:func:`count_covariance` at θ̂): the delta method through the
    fixed point (ours, docs/math.md §20.14, (20.34)).

    What it is: the first-order sampling covariance of the estimator over the mechanism's
    randomness, about the point it tends to, for the users who reported (as the means' (20.2));
    not the smoothing's and the bucket model's bias, which it does not see.
    """
    m = _dense(operator)
    g = ems_jacobian(counts, m, theta, smoothing=smoothing)
    cov = g @ count_covariance(m, theta, float(np.sum(counts))) @ g.T
    return (cov + cov.T) / 2


def estimate_distribution(
    reports: ArrayLike, eps: float, d: int = 1024, d_out: int = 1024, *, smoothing: bool = True
) -> EMSResult:
    """SW + EMS: θ over d equal buckets of [0, 1] from reports counted in d_out buckets."""
    return ems(report_counts(reports, eps, d_out), SWOperator(eps, d, d_out), smoothing=smoothing)


def distribution_mean(theta: ArrayLike) -> float:
    """The mean in t units of a distribution over d equal buckets of [0, 1] (bucket centres)."""
    th = np.asarray(theta, dtype=np.float64)
    return float(th @ ((np.arange(th.size) + 0.5) / th.size))


def wasserstein(p: ArrayLike, q: ArrayLike, spacing: float | None = None) -> float:
    """W1 between two distributions over the same equally spaced points or buckets of [0, 1]:
    Σ|P − Q|·spacing with P, Q the cumulative sums; spacing 1/d for d buckets (the default),
    1/s for the s + 1 grid points of L-SW. Multiply by hi − lo for the declared units."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    step = 1.0 / p.size if spacing is None else float(spacing)
    return float(np.abs(np.cumsum(p - q)).sum() * step)


def grid_distribution(t: ArrayLike, s: int) -> NDArray[np.float64]:
    """The expected distribution of α-point-rounded values over the grid j/s, j = 0..s: each
    value t puts 1 − frac(st) on ⌊st⌋ and frac(st) on the next point (linear binning); what
    L-SW estimates (math §20.11)."""
    t = np.asarray(t, dtype=np.float64)
    st = s * t
    low = np.minimum(np.floor(st).astype(np.int64), s)
    phi = st - low
    out = np.bincount(low, weights=1 - phi, minlength=s + 1)
    out += np.bincount(np.minimum(low + 1, s), weights=phi, minlength=s + 1)
    return out / t.size


def histogram(t: ArrayLike, d: int) -> NDArray[np.float64]:
    """The distribution of values t ∈ [0, 1] over d equal buckets (t = 1 in the last)."""
    t = np.asarray(t, dtype=np.float64)
    j = np.minimum(np.floor(t * d).astype(np.int64), d - 1)
    return np.bincount(j, minlength=d) / t.size
