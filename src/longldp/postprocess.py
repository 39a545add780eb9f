"""Post-processing of LDP frequency-estimate vectors (docs/math.md §5).

An unbiased frequency oracle returns estimates that may be negative and need not sum to the
known total. Every method here is a pure function ``(estimates, total, channel) -> estimates``
that returns a new float array and never modifies its input. ``channel`` describes the oracle
that produced the estimates; only ``base-cut`` (its variance), ``ibu`` and ``mle`` (its channel)
read it, the other methods accept and ignore it so that all methods share one call shape.

This is a leaf module: it imports only NumPy and SciPy, so the protocol objects can call it.

References
----------
.. [W20] T. Wang, M. Lopuhaä-Zwakenberg, Z. Li, B. Škorić, N. Li, "Locally Differentially
   Private Frequency Estimation with Consistency", NDSS 2020 (arXiv:1905.08320), the section
   that defines the post-processing methods Base-Pos, Base-Cut, Norm, Norm-Mul, Norm-Cut and
   Norm-Sub.
.. [D08] J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient Projections onto the
   l1-Ball for Learning in High Dimensions", ICML 2008, Fig. 1 (sort-based simplex projection).
.. [S002] Seed [002]: Marreiras Neto et al., "Locally differentially private applications with
   longitudinal data" (docs/math.md §15), Algorithm 1; corrected in docs/math.md §5.2.
.. [AA01] D. Agrawal, C. C. Aggarwal, "On the Design and Quantification of Privacy Preserving
   Data Mining Algorithms", PODS 2001 (the iterative Bayesian / EM reconstruction).
.. [A23] H. H. Arcolezi et al., 2023: IBU as the aggregator of GRR-based longitudinal chains.
.. [P26] C. A. Pinzón et al., "Estimating the true distribution of data collected with
   randomized response", AAAI 2026 (arXiv:2601.08603): the maximum-likelihood estimate of a
   k-RR histogram in closed form.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "METHODS",
    "ChannelInfo",
    "PostProcessor",
    "algorithm_1",
    "apply",
    "base_cut",
    "base_pos",
    "get_method",
    "ibu",
    "mle",
    "norm",
    "norm_cut",
    "norm_mul",
    "norm_sub",
]

FloatArray = NDArray[np.float64]
PostProcessor = Callable[..., FloatArray]

# Observed report frequencies rebuilt from GRR estimates are exact up to float rounding; a value
# below -_OBS_ATOL cannot come from a GRR channel and means the inputs do not match each other.
_OBS_ATOL = 1e-9
# P1 + (k-1) P0 = 1 holds exactly in theory; allow the rounding of the solvers that produced P1, P0.
_ROW_SUM_ATOL = 1e-9


def _fail(owner: str, name: str, allowed: str, got: Any) -> ValueError:
    # Same message shape as longldp._validate (which this leaf module may not import).
    return ValueError(f"{owner}: '{name}' must be {allowed}; got {got!r}.")


def _short(value: Any) -> Any:
    # Keep error messages readable when a large array is passed.
    if isinstance(value, np.ndarray) and value.size > 8:
        return f"array(shape={value.shape}, dtype={value.dtype})"
    return value


@dataclass(frozen=True)
class ChannelInfo:
    """What some methods need to know about the oracle that produced the estimates.

    A report *supports* value v with probability ``P1`` when the user's value is v and ``P0``
    when it is not (docs/math.md §1.1); the estimator is f̂ = (C/n − P0)/(P1 − P0).

    Parameters
    ----------
    P1 : float
        Probability that a report supports v when the user's value is v.
    P0 : float
        Probability that a report supports v when the user's value is not v; ``0 <= P0 < P1 <= 1``.
    n : int
        Number of reports behind the estimates (>= 1).
    grr_type : bool, default=False
        True when each report supports exactly one value (GRR, L-GRR). IBU needs this, because
        only then is the channel the k-by-k matrix A[y, v] = P1 if y == v else P0.
    """

    P1: float
    P0: float
    n: int
    grr_type: bool = False

    def __post_init__(self) -> None:
        owner = "ChannelInfo"
        for name in ("P1", "P0"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise _fail(owner, name, "a number in [0, 1]", value)
            if not (0.0 <= float(value) <= 1.0):
                raise _fail(owner, name, "a number in [0, 1]", value)
        if not self.P1 > self.P0:
            raise _fail(owner, "P1", f"greater than P0 = {self.P0!r}", self.P1)
        if isinstance(self.n, bool) or not isinstance(self.n, numbers.Integral) or self.n < 1:
            raise _fail(owner, "n", "an integer >= 1", self.n)
        if not isinstance(self.grr_type, bool | np.bool_):
            raise _fail(owner, "grr_type", "a bool", self.grr_type)

    @property
    def approx_variance(self) -> float:
        """Variance V* of one estimate at true frequency 0.

        V* = P0 (1 − P0) / (n (P1 − P0)²)   (docs/math.md §1.2; [W20], the variance of pure FOs).
        """
        return self.P0 * (1.0 - self.P0) / (self.n * (self.P1 - self.P0) ** 2)


def _validated(owner: str, estimates: ArrayLike, total: float) -> tuple[FloatArray, float]:
    """Check the common arguments and return a private float64 copy of the estimates."""
    arr = np.asarray(estimates)
    if arr.dtype.kind not in "iuf":
        raise _fail(owner, "estimates", "an array of real numbers", _short(arr))
    if arr.ndim != 1:
        raise _fail(owner, "estimates", f"a 1-D array (got {arr.ndim}-D)", _short(arr))
    if arr.size == 0:
        raise _fail(owner, "estimates", "a non-empty array", _short(arr))
    # astype(copy=True) so no method can write through to the caller's array.
    out = arr.astype(np.float64, copy=True)
    if not np.all(np.isfinite(out)):
        raise _fail(owner, "estimates", "finite (no NaN or inf)", _short(arr))
    if isinstance(total, bool) or not isinstance(total, numbers.Real):
        raise _fail(owner, "total", "a finite number > 0", total)
    t = float(total)
    if not math.isfinite(t) or t <= 0.0:
        raise _fail(owner, "total", "a finite number > 0", total)
    return out, t


def _optional_channel(owner: str, channel: Any) -> None:
    # Methods that do not read the channel still reject a wrong object: it signals a mix-up.
    if channel is not None and not isinstance(channel, ChannelInfo):
        raise _fail(owner, "channel", "a ChannelInfo or None", channel)


def _required_channel(owner: str, channel: Any) -> ChannelInfo:
    if channel is None:
        raise _fail(owner, "channel", "a ChannelInfo (this method needs P1, P0 and n)", None)
    if not isinstance(channel, ChannelInfo):
        raise _fail(owner, "channel", "a ChannelInfo", channel)
    return channel


def base_pos(
    estimates: ArrayLike, total: float = 1.0, channel: ChannelInfo | None = None
) -> FloatArray:
    """Base-Pos: replace negative estimates by 0; no renormalisation.

    f'_v = max(f̂_v, 0).

    Source: [W20], Base-Pos. The result is non-negative; its sum is not controlled.

    Parameters
    ----------
    estimates : array_like, shape (k,)
        Frequency estimates (finite; may be negative).
    total : float, default=1.0
        Known total of the true frequencies (validated, unused here).
    channel : ChannelInfo or None, default=None
        Unused.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, _ = _validated("base_pos", estimates, total)
    _optional_channel("base_pos", channel)
    return np.maximum(f, 0.0)


def norm(
    estimates: ArrayLike, total: float = 1.0, channel: ChannelInfo | None = None
) -> FloatArray:
    """Norm: shift every estimate by the same amount so that the sum equals ``total``.

    f'_v = f̂_v + (total − Σ_u f̂_u) / k.

    Source: [W20], Norm. The sum is exactly ``total`` (up to rounding); entries may stay
    negative. For unbiased estimates that already sum to the total this is the identity.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None
        Unused.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, t = _validated("norm", estimates, total)
    _optional_channel("norm", channel)
    return f + (t - f.sum()) / f.size


def norm_mul(
    estimates: ArrayLike, total: float = 1.0, channel: ChannelInfo | None = None
) -> FloatArray:
    """Norm-Mul: clip negatives to 0, then scale multiplicatively so the sum equals ``total``.

    f'_v = total · max(f̂_v, 0) / Σ_u max(f̂_u, 0).

    Source: [W20], Norm-Mul. Non-negative with sum ``total``. When no estimate is positive the
    ratio is undefined; we then return the uniform vector total/k (the same choice as
    :func:`algorithm_1`), the only answer that favours no value.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None
        Unused.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, t = _validated("norm_mul", estimates, total)
    _optional_channel("norm_mul", channel)
    pos = np.maximum(f, 0.0)
    s = pos.sum()
    if s <= 0.0:
        return np.full(f.size, t / f.size)
    return pos * (t / s)


def norm_cut(
    estimates: ArrayLike, total: float = 1.0, channel: ChannelInfo | None = None
) -> FloatArray:
    """Norm-Cut: keep the largest estimates whose sum stays within ``total``; zero the rest.

    θ* = smallest θ > 0 with Σ_{v : f̂_v ≥ θ} f̂_v ≤ total;   f'_v = f̂_v if f̂_v ≥ θ* else 0.

    Source: [W20], Norm-Cut: negative and small positive estimates are set to 0 so that the
    total becomes (at most) 1, the threshold being the smallest θ with
    Σ_{v : f̂_v ≥ θ} f̂_v ≤ 1; here 1 is generalised to ``total``.

    Notes
    -----
    Our reading of that definition:

    - θ ranges over positive values only, so negative estimates are always zeroed (otherwise a
      very negative θ would bring negative estimates back into the sum).
    - Kept estimates are returned unchanged: there is no rescaling, so the promise is
      ``f' >= 0`` and ``sum(f') <= total``, not equality. The sum falls short of ``total`` by
      less than the sum of the next (largest) tie group of zeroed estimates.
    - Ties are kept or cut together (the condition is on f̂_v ≥ θ).
    - If the positive estimates already sum to at most ``total`` the result is Base-Pos.
    - If the largest estimate alone exceeds ``total``, no θ keeps anything: the result is 0.

    The authors' public code (vvv214/LDP_Protocols, post-process/norm_cut.py) differs: it also
    keeps the estimate that makes the running sum cross the total and then rescales
    multiplicatively to the total. That is a hybrid of Norm-Cut and Norm-Mul; use
    :func:`norm_sub` or :func:`norm_mul` when the sum must equal the total.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None
        Unused.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, t = _validated("norm_cut", estimates, total)
    _optional_channel("norm_cut", channel)
    out = np.maximum(f, 0.0)
    if out.sum() <= t:
        return out
    desc = np.sort(out[out > 0.0])[::-1]
    csum = np.cumsum(desc)
    # A cut may only fall between two different values, so only the last index of each tie
    # group is a candidate end of the kept prefix.
    group_end = np.append(desc[1:] < desc[:-1], True)
    ok = np.flatnonzero(group_end & (csum <= t))
    if ok.size == 0:
        return np.zeros_like(out)
    theta = desc[ok[-1]]
    out[out < theta] = 0.0
    return out


def norm_sub(
    estimates: ArrayLike, total: float = 1.0, channel: ChannelInfo | None = None
) -> FloatArray:
    """Norm-Sub: Euclidean projection onto the scaled simplex {f ≥ 0, Σ f = total}.

    f'_v = max(f̂_v − θ, 0) with θ such that Σ_v max(f̂_v − θ, 0) = total. With u = f̂ sorted in
    decreasing order and c_j = Σ_{i ≤ j} u_i,  ρ = max{j : u_j − (c_j − total)/j > 0} and
    θ = (c_ρ − total)/ρ.

    Source: [W20], Norm-Sub (subtract δ = −θ from every estimate, clip at 0, repeat until
    consistent); the closed form and its O(k log k) sort-based search are [D08], Fig. 1.
    Non-negative with sum ``total``; among all such vectors it is the closest to f̂ in L2.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None
        Unused.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, t = _validated("norm_sub", estimates, total)
    _optional_channel("norm_sub", channel)
    u = np.sort(f)[::-1]
    j = np.arange(1, u.size + 1)
    thetas = (np.cumsum(u) - t) / j
    # In exact arithmetic j = 1 always qualifies (u_1 − (u_1 − total) = total > 0); the guard
    # covers the rounding of that difference when |u_1| dwarfs total.
    qualifies = np.flatnonzero(u - thetas > 0.0)
    rho = qualifies[-1] if qualifies.size else 0
    return np.maximum(f - thetas[rho], 0.0)


def base_cut(
    estimates: ArrayLike,
    total: float = 1.0,
    channel: ChannelInfo | None = None,
    *,
    alpha: float = 0.05,
) -> FloatArray:
    """Base-Cut: zero every estimate that is not significantly above 0.

    T = Φ⁻¹(1 − α/k) · √V*,  V* = P0(1 − P0)/(n (P1 − P0)²);   f'_v = f̂_v if f̂_v ≥ T else 0.

    Source: [W20], Base-Cut (a one-sided test of f_v = 0 for each of the k values at level
    α with the Bonferroni correction; the paper uses α = 0.05). Since α ≤ 1/2 makes T ≥ 0, the
    result is non-negative; its sum is not controlled and ``total`` is only validated.

    The estimates must be in the units of V*, i.e. fractions of the ``channel.n`` reports.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
        Validated, unused.
    channel : ChannelInfo
        Required: supplies P1, P0 and n for V*.
    alpha : float, default=0.05
        Family-wise significance level, in (0, 1/2] (a larger level would give T < 0 for k = 1
        and keep negative estimates).

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, _ = _validated("base_cut", estimates, total)
    ch = _required_channel("base_cut", channel)
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0.0 < alpha <= 0.5:
        raise _fail("base_cut", "alpha", "a number in (0, 0.5]", alpha)
    z = NormalDist().inv_cdf(1.0 - float(alpha) / f.size)  # the standard normal quantile
    threshold = z * math.sqrt(ch.approx_variance)
    return np.where(f >= threshold, f, 0.0)


def algorithm_1(
    estimates: ArrayLike,
    total: float = 1.0,
    channel: ChannelInfo | None = None,
    *,
    tol: float = 1e-12,
) -> FloatArray:
    """Seed Algorithm 1, intended form: clip negatives, spread the deficit over the positives.

    Repeat: f_v ← max(f_v, 0);  P = {v : f_v > 0};  δ = (total − Σ_v f_v)/|P|;  f_v ← f_v + δ
    for v ∈ P;  until min f ≥ 0 and |Σ f − total| ≤ tol·total. If P is empty, return the
    uniform vector total/k (the source does not say; this favours no value).

    Source: [S002], Algorithm 1, with the corrections of docs/math.md §5.2. As printed, line 7 reads
    ``diff <- n - sum / |f~'_v|``, i.e. n − (sum/|f|); the prose (and termination) need
    (n − sum)/|P| with P the positive entries: with the printed line the total climbs to |f|·n
    and the loop never ends. The printed loop condition ("any negative or sum > n") also never
    reruns when sum < n without negatives, although the algorithm promises sum = n; we stop on
    both conditions. The printed loops over 0..|f| are off by one. Here ``total`` plays the
    role of the seed's n (1 for frequencies, the user count for counts).

    Notes
    -----
    Each pass that does not finish zeroes at least one more entry and the last pass leaves at
    least one positive entry, so there are at most k passes. If the first δ is ≤ 0 (the usual
    case: clipping raises the sum) every later δ is ≤ 0 too and the result equals
    :func:`norm_sub`, the projection onto the simplex (docs/math.md §5.2). If the first δ is > 0 the
    deficit goes only to entries that were positive: zero and negative entries stay at 0,
    unlike :func:`norm_sub`, which may lift them.

    Parameters
    ----------
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None
        Unused.
    tol : float, default=1e-12
        Relative tolerance on the sum; never tighter than the rounding of a k-term sum.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
        Non-negative, sum ``total``.
    """
    f, t = _validated("algorithm_1", estimates, total)
    _optional_channel("algorithm_1", channel)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0.0 < tol < 1.0:
        raise _fail("algorithm_1", "tol", "a number in (0, 1)", tol)
    k = f.size
    # A sum of k floats is only exact to about k·eps relative; a tighter stop could loop forever.
    atol = max(float(tol), 4.0 * k * np.finfo(np.float64).eps) * t
    for _ in range(k + 1):
        np.maximum(f, 0.0, out=f)
        positive = f > 0.0
        m = np.count_nonzero(positive)
        if m == 0:
            return np.full(k, t / k)
        f[positive] += (t - f.sum()) / m
        if f.min() >= 0.0 and abs(f.sum() - t) <= atol:
            return f
    raise RuntimeError(  # unreachable in exact arithmetic: see Notes
        f"algorithm_1: did not converge in {k + 1} passes; please report this input."
    )


def ibu(
    estimates: ArrayLike,
    total: float = 1.0,
    channel: ChannelInfo | None = None,
    *,
    max_iter: int = 10_000,
    tol: float = 1e-12,
) -> FloatArray:
    """Iterative Bayesian update (EM) for GRR-type channels.

    obs_y = P0 + f̂_y (P1 − P0) (the observed report frequencies), A[y, v] = P1 if y = v else
    P0, θ⁰ = 1/k, and
        θ_v ← θ_v · Σ_y obs_y A[y, v] / Σ_w A[y, w] θ_w,
    returned as total · θ. The fixed points are the maximum-likelihood distributions of the
    observed reports, so the result is non-negative with sum ``total``.

    Source: [AA01] (the iterative reconstruction); used for GRR and L-GRR in [A23]. For the
    symmetric A, (Aθ)_y = P0 Σθ + (P1 − P0) θ_y, which makes one iteration O(k) instead of
    O(k²).

    Parameters
    ----------
    estimates : array_like, shape (k,)
        Unbiased estimates from a GRR-type oracle over k values.
    total : float, default=1.0
    channel : ChannelInfo
        Required, with ``grr_type=True`` and P1 + (k − 1) P0 = 1 (each report is one value).
    max_iter : int, default=10000
        Maximum number of EM iterations; the last iterate (a valid distribution) is returned if
        the tolerance is not reached.
    tol : float, default=1e-12
        Stop when max_v |θ_v(new) − θ_v(old)| ≤ tol.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)

    Notes
    -----
    obs is rebuilt from the estimates; values below 0 by more than rounding mean the
    estimates did not come from this channel and raise ValueError. obs is normalised to sum
    1 (it does for estimates of a GRR oracle, which always sum to 1) so that the output sums
    to ``total``. Convergence is linear when the maximum-likelihood point is interior, with a
    rate that approaches 1 at small ε or for small frequencies, and sublinear when the point
    lies on the boundary of the simplex; raise ``max_iter`` if the tolerance matters.
    """
    f, t = _validated("ibu", estimates, total)
    ch = _required_channel("ibu", channel)
    if not ch.grr_type:
        raise _fail(
            "ibu",
            "channel",
            "a GRR-type ChannelInfo (grr_type=True: each report supports exactly one value); "
            "IBU needs a GRR-type channel",
            ch,
        )
    k = f.size
    row_sum = ch.P1 + (k - 1) * ch.P0
    if abs(row_sum - 1.0) > _ROW_SUM_ATOL:
        raise _fail(
            "ibu",
            "channel",
            f"a GRR-type channel over the k = {k} estimates, with P1 + (k-1) P0 = 1 "
            f"(got {row_sum!r}); IBU needs a GRR-type channel",
            ch,
        )
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise _fail("ibu", "max_iter", "an integer >= 1", max_iter)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol > 0.0:
        raise _fail("ibu", "tol", "a number > 0", tol)

    gap = ch.P1 - ch.P0
    obs = ch.P0 + f * gap
    if obs.min() < -_OBS_ATOL:
        raise _fail(
            "ibu",
            "estimates",
            f"at least -P0/(P1-P0) = {-ch.P0 / gap!r} each (observed report frequencies "
            "P0 + est (P1-P0) must be >= 0)",
            _short(f),
        )
    np.maximum(obs, 0.0, out=obs)
    mass = obs.sum()
    if not mass > 0.0:
        raise _fail("ibu", "estimates", "such that some report has P0 + est (P1-P0) > 0", _short(f))
    obs /= mass

    theta = np.full(k, 1.0 / k)
    seen = obs > 0.0
    ratio = np.zeros(k)
    for _ in range(int(max_iter)):
        # A report value never observed adds nothing to the update; skipping it also avoids
        # 0/0 when P0 = 0 (then θ_y = obs_y = 0 after one step).
        np.divide(obs, ch.P0 * theta.sum() + gap * theta, out=ratio, where=seen)
        new = theta * (ch.P0 * ratio.sum() + gap * ratio)
        done = np.max(np.abs(new - theta)) <= tol
        theta = new
        if done:
            break
    return t * theta / theta.sum()


def _mle_multinomial(obs: FloatArray, P0: float, gap: float) -> FloatArray:
    """argmax over the simplex of Σ_y o_y ln(P0 + gap·θ_y), in closed form (docs/math.md §5.3).

    KKT: on the support S, o_y/π_y = μ (π_y = P0 + gap·θ_y); off it, o_y ≤ μ·P0. With u the
    observed fractions sorted decreasingly and s_m = Σ_{i ≤ m} u_i, S is the m largest values
    for the largest m with u_m > P0·μ_m, μ_m = s_m/(gap + m·P0); θ_y = (o_y/μ − P0)/gap on S.
    """
    u = np.sort(obs)[::-1]
    m = np.arange(1, u.size + 1)
    mu = np.cumsum(u) / (gap + m * P0)
    qualifies = np.flatnonzero(u > P0 * mu)
    # m = 1 always qualifies in exact arithmetic (u_1 > P0·u_1/(gap + P0) as gap > 0).
    mu_star = mu[qualifies[-1]] if qualifies.size else mu[0]
    return np.maximum(obs / mu_star - P0, 0.0) / gap


def _composite_theta(mu: float, obs: FloatArray, P0: float, gap: float) -> tuple[FloatArray, float]:
    """θ(μ) of the composite-likelihood KKT conditions, and dΣθ/dμ.

    π_v solves o/π − (1 − o)/(1 − π) = μ: the root in [0, 1] of μπ² − (μ + 1)π + o = 0, in the
    form that avoids cancellation, 2o/((μ + 1) + √D) when μ + 1 ≥ 0 and ((μ + 1) − √D)/(2μ)
    otherwise, D = (μ + 1)² − 4μo; then θ_v = max(0, (π_v − P0)/gap). Where θ_v > 0,
    dθ_v/dμ = 1/(gap·h'(π_v)) with h'(π) = −o/π² − (1 − o)/(1 − π)².
    """
    b = mu + 1.0
    root = np.sqrt(np.maximum(b * b - 4.0 * mu * obs, 0.0))
    if b >= 0.0:
        denom = b + root  # 0 only where o = 0 and μ = −1: there π = 0
        pi = np.divide(2.0 * obs, denom, out=np.zeros_like(obs), where=denom > 0.0)
    else:
        pi = (b - root) / (2.0 * mu)
    theta = np.maximum(pi - P0, 0.0) / gap
    live = (theta > 0.0) & (pi < 1.0)
    p = pi[live]
    slope = float(np.sum(-1.0 / (gap * (obs[live] / p**2 + (1.0 - obs[live]) / (1.0 - p) ** 2))))
    return theta, slope


def _mle_composite(obs: FloatArray, P0: float, gap: float) -> FloatArray:
    """argmax over the simplex of Σ_v o_v ln π_v + (1 − o_v) ln(1 − π_v), π_v = P0 + gap·θ_v.

    The KKT conditions give θ as a decreasing function of one multiplier μ
    (:func:`_composite_theta`); μ with Σθ = 1 is found by Newton's method inside a bisection
    bracket (docs/math.md §5.3).
    """

    def excess(mu: float) -> tuple[float, float]:
        theta, slope = _composite_theta(mu, obs, P0, gap)
        return float(theta.sum()) - 1.0, slope

    # Bracket the root of Σθ(μ) − 1 (decreasing in μ): lo has excess > 0, hi has excess ≤ 0.
    mu, (value, slope) = 0.0, excess(0.0)
    if value > 0.0:
        lo, hi = 0.0, 1.0
        while excess(hi)[0] > 0.0:
            lo, hi = hi, 2.0 * hi
    else:
        lo, hi = -1.0, 0.0
        while excess(lo)[0] <= 0.0:
            lo, hi = 2.0 * lo, lo
        if value == 0.0:
            lo = hi = 0.0
    for _ in range(200):
        if value > 0.0:
            lo = mu
        else:
            hi = mu
        if abs(value) <= 1e-14 or hi - lo <= 1e-15 * max(1.0, abs(hi)):
            break
        nxt = mu - value / slope if slope < 0.0 else math.nan
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        mu = nxt
        value, slope = excess(mu)
    theta = _composite_theta(mu, obs, P0, gap)[0]
    return theta / theta.sum()


def mle(
    estimates: ArrayLike,
    total: float = 1.0,
    channel: ChannelInfo | None = None,
) -> FloatArray:
    """Maximum-likelihood distribution under the channel of the support counts.

    With o_v = P0 + (f̂_v/total)(P1 − P0) the fraction of reports supporting v (what the
    server counted) and π_v(θ) = P0 + (P1 − P0)·θ_v its probability when the users' values
    are drawn from θ, maximise over the simplex {θ ≥ 0, Σθ = 1}:

    - GRR-type channels (each report supports one value): the exact multinomial likelihood of
      the report histogram, Σ_v o_v ln π_v. Its maximiser is the fixed point IBU (EM)
      iterates towards; here it is computed exactly, in closed form from the KKT conditions.
    - other channels (unary encoding, local hashing, Hadamard, dBitFlipPM): the server keeps
      one support count per value, each exactly Binomial(n, π_v) but dependent across v
      through each user's single value; we maximise the composite likelihood
      Σ_v o_v ln π_v + (1 − o_v) ln(1 − π_v), the sum of these exact marginal likelihoods,
      by its KKT conditions and a one-dimensional bisection.

    Returns total·θ̂: non-negative, summing to ``total``. When the unbiased estimates are
    already a distribution with every entry positive (GRR-type), θ̂ equals them. A supporting
    fraction outside [0, 1] by less than 2.5/√n (five binomial standard deviations; non-GRR
    channels only, for dBitFlipPM's equivalent channel) counts as the end of the interval;
    further out is a ``ValueError``.

    Source: [P26] derive the GRR closed form (hharcolezi/multi-freq-ldpy implements it); the
    composite likelihood is ours. Both derivations: docs/math.md §5.3.

    Parameters
    ----------
    estimates : array_like, shape (k,)
        Unbiased estimates in units of ``total`` (fractions when total = 1).
    total : float, default=1.0
    channel : ChannelInfo
        Required: P1, P0 and whether the channel is GRR-type (then P1 + (k − 1) P0 = 1).

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    f, t = _validated("mle", estimates, total)
    ch = _required_channel("mle", channel)
    k = f.size
    gap = ch.P1 - ch.P0
    obs = ch.P0 + (f / t) * gap
    # A supporting fraction is in [0, 1]; estimators that divide by a random count (dBitFlipPM
    # by its samplers, seen here through an equivalent channel) can step past the ends by
    # sampling noise. Up to 5 standard deviations of a binomial fraction (0.5/√n at most) is
    # taken as the end itself; anything further means the estimates do not fit this channel.
    slack = _OBS_ATOL if ch.grr_type else _OBS_ATOL + 2.5 / math.sqrt(ch.n)
    if obs.min() < -slack or obs.max() > 1.0 + slack:
        raise _fail(
            "mle",
            "estimates",
            f"in [-P0/(P1-P0), (1-P0)/(P1-P0)] = [{-ch.P0 / gap!r}, {(1 - ch.P0) / gap!r}] "
            "each, times total (the supporting fraction P0 + est (P1-P0) must be in [0, 1], "
            f"to within {slack:.3g})",
            _short(f),
        )
    np.clip(obs, 0.0, 1.0, out=obs)
    if ch.grr_type:
        row_sum = ch.P1 + (k - 1) * ch.P0
        if abs(row_sum - 1.0) > _ROW_SUM_ATOL:
            raise _fail(
                "mle",
                "channel",
                f"a GRR-type channel over the k = {k} estimates, with P1 + (k-1) P0 = 1 "
                f"(got {row_sum!r})",
                ch,
            )
        mass = obs.sum()
        if not mass > 0.0:
            raise _fail("mle", "estimates", "such that some report is observed", _short(f))
        theta = _mle_multinomial(obs / mass, ch.P0, gap)
    else:
        theta = _mle_composite(obs, ch.P0, gap)
    return t * theta / theta.sum()


METHODS: dict[str, PostProcessor] = {
    "base-pos": base_pos,
    "norm": norm,
    "norm-mul": norm_mul,
    "norm-cut": norm_cut,
    "norm-sub": norm_sub,
    "base-cut": base_cut,
    "algorithm-1": algorithm_1,
    "ibu": ibu,
    "mle": mle,
}


def _lookup(owner: str, param: str, name: Any) -> PostProcessor:
    allowed = "one of " + ", ".join(repr(m) for m in METHODS)
    if not isinstance(name, str):
        raise _fail(owner, param, allowed, name)
    try:
        return METHODS[name.strip().lower().replace("_", "-")]
    except KeyError:
        raise _fail(owner, param, allowed, name) from None


def get_method(name: str, *, owner: str = "get_method", param: str = "name") -> PostProcessor:
    """Look up a post-processing method by name.

    Names are case-insensitive and accept ``_`` for ``-`` (``"Norm_Sub"`` is ``"norm-sub"``).

    Parameters
    ----------
    name : str
        One of the keys of :data:`METHODS`.
    owner, param : str
        Who asks and for which of its arguments, as the error message names them (the command
        line checks ``--postprocess`` this way before any work).

    Returns
    -------
    callable
        ``method(estimates, total=1.0, channel=None) -> numpy.ndarray``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the allowed names.
    """
    return _lookup(owner, param, name)


def apply(
    method: str | PostProcessor | None,
    estimates: ArrayLike,
    total: float = 1.0,
    channel: ChannelInfo | None = None,
) -> FloatArray:
    """Apply a post-processing method given by name, by function, or not at all.

    ``apply(None, f̂)`` returns a validated float64 copy of f̂; ``apply("norm-sub", f̂)`` is
    ``norm_sub(f̂)``; a callable is called as ``method(copy_of_estimates, total, channel)`` on a
    validated copy, so even a callable that writes into its argument cannot touch the caller's
    array.

    Parameters
    ----------
    method : str, callable or None
        A name accepted by :func:`get_method`, a function with the post-processing signature,
        or None for no post-processing.
    estimates : array_like, shape (k,)
    total : float, default=1.0
    channel : ChannelInfo or None, default=None

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    if method is None or callable(method):
        f, t = _validated("apply", estimates, total)
        _optional_channel("apply", channel)
        if method is None:
            return f
        return np.array(method(f, t, channel), dtype=np.float64)
    return _lookup("apply", "method", method)(estimates, total, channel)
