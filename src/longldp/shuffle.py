"""Central privacy of shuffled reports, and of a whole longitudinal collection (docs/math.md §17).

When n devices each send one ε0-LDP report through a shuffler (a relay that strips identities
and mixes the reports) the analyst sees a multiset, and the central guarantee is a much smaller
(ε, δ). This module computes it and carries it to a whole collection of memoized reports:

- :func:`clones_closed_form`: the closed form of Feldman, McMillan and Talwar ([FMT21],
  Theorem 3.1), valid for ε0 ≤ ln(n / (16 ln(4/δ))) (:func:`clones_closed_form_valid`).
- :func:`clones_delta` / :func:`clones_epsilon`: their numerical bound ([FMT21] Theorem 3.2,
  Appendix E): the hockey-stick divergence of the two "clone" distributions, summed exactly over
  the binomial number of clones in one vectorized pass, and the smallest ε meeting δ by a
  safeguarded Newton search (about ten evaluations).
- :func:`shuffled_rr_epsilon`: a lower bound, the exact central ε of shuffled binary randomized
  response (an ε0-LDP randomizer, so no valid upper bound may fall below it).
- composition over epochs or memos: basic, advanced ([DRV10]) and the optimal composition of
  (ε, δ) pairs, computed from their privacy-loss distribution ([KOV15]);
  :func:`compose_pld_dp_accounting` cross-checks it with Google's ``dp_accounting`` when that
  optional package is installed (extra ``accounting``).
- :func:`collection_bound` / :func:`central_summary`: the memo-aware figure for a collection of
  τ epochs: the minimum of the routes valid for the protocol's linkage trait (per memo, per
  device tuple, per epoch only for clients where nothing persists), with the assumptions they
  need (docs/math.md §17.4–§17.6).

NumPy and SciPy only (SciPy for binomial probabilities); this module is not imported by
``import longldp``.

References
----------
[FMT21] V. Feldman, A. McMillan, K. Talwar, "Hiding among the clones: a simple and nearly
        optimal analysis of privacy amplification by shuffling", FOCS 2021 (arXiv:2012.12803),
        Theorems 3.1 and 3.2, Appendix E; authors' code apple/ml-shuffling-amplification.
[EFM19] Ú. Erlingsson, V. Feldman, I. Mironov, A. Raghunathan, K. Talwar, A. Thakurta,
        "Amplification by shuffling: from local to central differential privacy via
        anonymity", SODA 2019.
[DRV10] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and differential privacy", FOCS 2010
        (advanced composition; Dwork and Roth 2014, Theorem 3.20).
[KOV15] P. Kairouz, S. Oh, P. Viswanath, "The composition theorem for differential privacy",
        ICML 2015, Theorem 3.3 (optimal composition of (ε, δ)-DP mechanisms).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from longldp import _validate as check
from longldp.privacy.linkage import Linkage

__all__ = [
    "CentralSummary",
    "CollectionBound",
    "Composed",
    "Route",
    "central_summary",
    "clones_closed_form",
    "clones_closed_form_valid",
    "clones_delta",
    "clones_epsilon",
    "collection_bound",
    "compose_advanced",
    "compose_optimal",
    "compose_pld_dp_accounting",
    "compose_shuffled",
    "optimal_composition_delta",
    "shuffled_rr_delta",
    "shuffled_rr_epsilon",
]

#: Relative precision of the ε searches: the returned upper bound is within this much (times
#: max(1, ε)) of the exact root of its δ(ε) curve, and on the safe side of it.
EPS_TOL = 1e-9

#: Binomial mass of the clone count left outside the summed window, as a fraction of δ. It is
#: added to δ in full (each term of the sum is at most 1), so the bound stays valid.
TAIL_FRACTION = 1e-6

#: Fractions of the total δ given to the per-mechanism δ0 when composing m shuffled mechanisms:
#: δ0 = f·δ/m, the rest to the composition. The best of these is kept (docs/math.md §17.3).
DELTA_SPLITS = (0.05, 0.2, 0.5, 0.8)


# ------------------------------------------------------------------------------ arguments


def _n(owner: str, n: Any) -> int:
    return check.integer(owner, "n", n, minimum=1)


def _delta(owner: str, delta: Any) -> float:
    return check.positive_float(owner, "delta", delta, upper=1.0)


#: Largest ε0 the shuffle bounds take: e^{ε0} must stay finite in float64 (e^{709.8} does not).
#: Past a few tens there is nothing left to amplify anyway (n·e^{−ε0} clones); a route whose
#: local ε exceeds this keeps its local ε, which is always valid (docs/math.md §17.5).
EPS0_MAX = 600.0


def _eps0(owner: str, eps0: Any) -> float:
    # Not privacy.EPS_MAX (30): the ε0 of a device's whole tuple of reports (τ·ε1) can be large.
    return check.positive_float(owner, "eps0", eps0, upper=EPS0_MAX)


# ------------------------------------------------------------------------------ closed form


def clones_closed_form_valid(eps0: float, n: int, delta: float) -> bool:
    """Whether the closed form applies: ε0 ≤ ln(n / (16 ln(4/δ))) ([FMT21] Theorem 3.1).

    We use ln(4/δ), the condition of the authors' code; readings of the theorem with ln(2/δ)
    accept slightly larger ε0, so ours is the stricter of the two (docs/math.md §17.1).
    """
    eps0 = _eps0("clones_closed_form_valid", eps0)
    n = _n("clones_closed_form_valid", n)
    delta = _delta("clones_closed_form_valid", delta)
    limit = n / (16.0 * math.log(4.0 / delta))
    return limit > 1.0 and eps0 <= math.log(limit)


def clones_closed_form(eps0: float, n: int, delta: float) -> float:
    """Closed-form central ε of n shuffled ε0-LDP reports ([FMT21] Theorem 3.1).

    With a = 8·√(e^{ε0} ln(4/δ)/n) + 8·e^{ε0}/n and ε' = ln(1 + a),

        ε = ln(1 + a·(1 − e^{−ε0}) / (1 + e^{−ε0−ε'})),

    the expression of the authors' code (apple/ml-shuffling-amplification,
    ``closedformanalysis``), which reproduces their 0.5378 at n = 10⁵, ε0 = 4, δ = 10⁻⁶. The
    theorem is also read with (1 + e^{−ε0}) in the denominator (0.5346 there); ours is the
    larger, so never the less conservative (docs/math.md §17.1).

    Raises ``ValueError`` outside the validity condition (:func:`clones_closed_form_valid`).
    """
    owner = "clones_closed_form"
    eps0, n, delta = _eps0(owner, eps0), _n(owner, n), _delta(owner, delta)
    if not clones_closed_form_valid(eps0, n, delta):
        raise ValueError(
            f"{owner}: 'eps0' must be <= ln(n / (16 ln(4/delta))) for the closed form (the "
            f"validity condition of [FMT21] Theorem 3.1) at n = {n}, delta = {delta:g}; got "
            f"{eps0!r}. Use clones_epsilon (the numerical bound) instead."
        )
    a = 8.0 * math.sqrt(math.exp(eps0) * math.log(4.0 / delta) / n) + 8.0 * math.exp(eps0) / n
    eps_inner = math.log1p(a)
    return math.log1p(a * (-math.expm1(-eps0)) / (1.0 + math.exp(-eps0 - eps_inner)))


# ------------------------------------------------------------------------------ numerical bound


@dataclass(frozen=True)
class _Window:
    """Integer points x of a Binomial(m, p) holding all but ``tail`` of its mass, with pmf w."""

    x: NDArray[np.float64]
    w: NDArray[np.float64]
    tail: float


def _binomial_window(m: int, p: float, tail: float) -> _Window:
    """Smallest-effort window of Binomial(m, p) whose outside mass is at most ``tail``.

    The half-width comes from Bernstein's inequality, P(|X − mp| ≥ t) ≤ 2·exp(−t²/(2(σ² + t/3))),
    solved for t at ``tail``; the mass actually left outside is then computed exactly.
    """
    if m == 0:
        return _Window(np.zeros(1), np.ones(1), 0.0)
    mean, var = m * p, m * p * (1.0 - p)
    log_term = math.log(2.0 / tail)
    t = log_term / 3.0 + math.sqrt((log_term / 3.0) ** 2 + 2.0 * var * log_term)
    lo, hi = max(0, math.floor(mean - t)), min(m, math.ceil(mean + t))
    x = np.arange(lo, hi + 1, dtype=np.float64)
    w = np.exp(stats.binom.logpmf(x, m, p))
    outside = float(stats.binom.cdf(lo - 1, m, p) + stats.binom.sf(hi, m, p)) if m else 0.0
    return _Window(x, w, outside)


def _half_binomial_pmf(k: NDArray, c: NDArray) -> NDArray:
    """Binomial(c, 1/2) pmf at k (0 outside [0, c]); SciPy's is accurate to ~1e-15 relative
    where a difference of log-gamma values loses ~1e-9 at c ~ 10⁶."""
    return stats.binom.pmf(k, c, 0.5)


#: Every this many clone counts, the cdf recurrence of :func:`_half_binomial_cdf_below` is
#: re-anchored on SciPy's binomial cdf, so rounding cannot accumulate.
_ANCHOR_EVERY = 256


def _half_binomial_cdf_below(kappa: NDArray, c: NDArray) -> NDArray:
    """F_c(κ_c − 1) = Pr[Binomial(c, 1/2) ≤ κ_c − 1] along consecutive c with κ nondecreasing
    by steps of 0 or 1.

    The binomial cdf (an incomplete beta function) costs ~15 µs per point at c ~ 10⁵–10⁶ in
    SciPy (``scipy.special.bdtr`` is faster but only accurate to ~1e-9 there); a recurrence
    costs two pmf evaluations. Pascal's rule gives
    F_{c+1}(j) = F_c(j) − ½·b_c(j), and a step of κ adds b_{c+1}(κ_c):

        F_{c+1}(κ_{c+1} − 1) = F_c(κ_c − 1) − ½·b_c(κ_c − 1) + [κ_{c+1} > κ_c]·b_{c+1}(κ_c),

    summed by a cumulative sum and re-anchored on ``scipy.stats.binom.cdf`` every
    :data:`_ANCHOR_EVERY` points (ours; tests/test_shuffle.py checks it against the cdf).
    """
    if c.size == 1:
        step = np.zeros(0)
    else:
        grows = kappa[1:] > kappa[:-1]
        step = -0.5 * _half_binomial_pmf(kappa[:-1] - 1, c[:-1])
        step += np.where(grows, _half_binomial_pmf(kappa[:-1], c[1:]), 0.0)
    running = np.concatenate([[0.0], np.cumsum(step)])
    anchors = np.arange(0, c.size, _ANCHOR_EVERY)
    exact = stats.binom.cdf(kappa[anchors] - 1, c[anchors], 0.5)
    owner = np.arange(c.size) // _ANCHOR_EVERY
    out = exact[owner] + running - running[anchors][owner]
    return np.clip(out, 0.0, 1.0)


def _clone_terms(eps: float, eps0: float, c: NDArray) -> tuple[NDArray, NDArray]:
    """Per clone count c: the hockey-stick h_c(ε) of the clone pair and Q_c of its set.

    Given c clones, track the count a = c − A + 1 − Δ of (17.2), with A ~ Binomial(c, 1/2) and
    Δ ~ Bernoulli(α), α = e^{ε0}/(e^{ε0} + 1): its law is P(a) = α·b_c(a) + (1 − α)·b_c(a − 1)
    under P and Q(a) = (1 − α)·b_c(a) + α·b_c(a − 1) under Q. P(a)/Q(a) decreases in a, so
    {P ≥ e^ε Q} = {a ≤ κ}, κ = ⌊(c + 1)/(1 + R)⌋, R = (e^ε − e^{−ε0})/(1 − e^{ε−ε0}), and

        h_c = Σ_{a≤κ} P(a) − e^ε Q(a) = (α − e^ε(1 − α))·b_c(κ) − (e^ε − 1)·F_c(κ − 1)

    with b_c, F_c the pmf and cdf of A (docs/math.md §17.2, eq. 17.3). Also returns
    Q_c(a ≤ κ) = (1 − α)·b_c(κ) + F_c(κ − 1), for the derivative dδ/dε = −e^ε·E[Q_c].
    ``c`` must be consecutive integers (a binomial window).
    """
    ratio = math.exp(eps - eps0)
    R = (math.exp(eps) - math.exp(-eps0)) / (1.0 - ratio)
    kappa = np.floor((c + 1.0) / (1.0 + R))
    b = _half_binomial_pmf(kappa, c)
    F = _half_binomial_cdf_below(kappa, c)
    one_minus_alpha = math.exp(-eps0) / (1.0 + math.exp(-eps0))  # 1 − α
    gap = (1.0 - ratio) / (1.0 + math.exp(-eps0))  # α − e^ε(1 − α)
    h = np.maximum(gap * b - math.expm1(eps) * F, 0.0)
    return h, one_minus_alpha * b + F


class _CloneCurve:
    """δ(ε) of n shuffled ε0-LDP reports from the clone reduction, for one (ε0, n)."""

    def __init__(self, eps0: float, n: int, tail: float) -> None:
        self.eps0 = eps0
        # The number of clones among the other n − 1 reports: Binomial(n − 1, e^{−ε0}).
        self.window = _binomial_window(n - 1, math.exp(-eps0), tail)
        self.evaluations = 0

    def __call__(self, eps: float) -> tuple[float, float]:
        """(δ(ε), dδ/dε): the exact sum over the window, plus the mass outside it."""
        self.evaluations += 1
        if eps >= self.eps0:
            return self.window.tail, 0.0
        h, q = _clone_terms(eps, self.eps0, self.window.x)
        w = self.window.w
        return float(w @ h) + self.window.tail, -math.exp(eps) * float(w @ q)


def clones_delta(eps: float, eps0: float, n: int) -> float:
    """δ(ε) of n shuffled ε0-LDP reports by the numerical clone bound ([FMT21] Theorem 3.2).

    δ(ε) = Σ_c Pr[C = c]·h_c(ε) with C ~ Binomial(n − 1, e^{−ε0}) the number of clones and h_c
    the hockey-stick divergence of the clone pair given c (:func:`_clone_terms`). The pair is
    symmetric (a ↦ c + 1 − a maps P to Q), so one direction suffices. The sum runs over all c
    but a binomial mass of at most 10⁻¹⁵, which is added (docs/math.md §17.2).
    """
    owner = "clones_delta"
    eps0, n = _eps0(owner, eps0), _n(owner, n)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps >= 0:
        raise ValueError(f"{owner}: 'eps' must be a number >= 0; got {eps!r}.")
    return _CloneCurve(eps0, n, 1e-15)(float(eps))[0]


def _search(
    curve: Callable[[float], tuple[float, float]],
    target: float,
    lo: float,
    hi: float,
    at_lo: tuple[float, float],
) -> tuple[float, float]:
    """Bracket the root of δ(ε) = target for a nonincreasing δ: (lo, hi) with δ(lo) > target
    ≥ δ(hi) and hi − lo ≤ EPS_TOL·max(1, hi). On entry δ(lo) > target ≥ δ(hi), and ``at_lo``
    is (δ, dδ/dε) at lo, where the search starts.

    Newton's method on ln δ(ε) − ln target (δ falls roughly exponentially in ε, so its log is
    close to linear), safeguarded by bisection whenever a step leaves the bracket; once Newton
    has converged from one side, a probe one tolerance beyond it closes the bracket.
    """
    log_target = math.log(target)
    x = lo
    value, slope = at_lo
    for _ in range(200):
        if x != lo:
            value, slope = curve(x)
        above = value > target
        if above:
            lo = x
        else:
            hi = x
        tol = EPS_TOL * max(1.0, hi)
        if hi - lo <= tol:
            break
        nxt = math.nan
        if value > 0 and slope < 0:
            nxt = x - (math.log(value) - log_target) * value / slope
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        elif abs(nxt - x) < 0.5 * tol:
            # Converged from one side: probe just past the root to close the bracket.
            nxt = min(x + tol, 0.5 * (x + hi)) if above else max(x - tol, 0.5 * (x + lo))
        x = nxt
    return lo, hi


def clones_epsilon(eps0: float, n: int, delta: float) -> float:
    """Numerical central ε of n shuffled ε0-LDP reports at δ ([FMT21] Theorem 3.2).

    The smallest ε with :func:`clones_delta` ≤ δ, from above: the returned ε satisfies
    δ(ε) ≤ δ (with the mass outside the summed window, at most 10⁻⁶·δ, added) and lies within
    10⁻⁹·max(1, ε) of the exact root. Never more than ε0 (shuffling is a post-processing of
    the reports) nor, where it applies, than :func:`clones_closed_form`. Each evaluation of δ
    is one vectorized pass over the clone counts, and the search needs about ten; n = 10⁶ takes
    well under a second (benchmarks/bench_shuffle.py).

    Parameters
    ----------
    eps0 : float
        ε of each report's local randomizer (> 0).
    n : int
        Number of shuffled reports (>= 1), the target's included.
    delta : float
        δ of the central guarantee, in (0, 1).
    """
    owner = "clones_epsilon"
    return _clones_epsilon(_eps0(owner, eps0), _n(owner, n), _delta(owner, delta))


@lru_cache(maxsize=256)
def _clones_epsilon(eps0: float, n: int, delta: float) -> float:
    # Cached: a collection's routes and summaries ask for the same (ε0, n, δ) several times.
    curve = _CloneCurve(eps0, n, TAIL_FRACTION * delta)
    at_zero = curve(0.0)
    if at_zero[0] <= delta:
        return 0.0
    hi = eps0
    if clones_closed_form_valid(eps0, n, delta):
        hi = min(hi, clones_closed_form(eps0, n, delta))
    if curve(hi)[0] > delta:  # only at ε0 (the tail can be > δ when δ is extreme)
        return eps0
    return _search(curve, delta, 0.0, hi, at_zero)[1]


# ------------------------------------------------------------------------------ lower bound


class _RRCurve:
    """Exact δ(ε) of shuffled binary randomized response, every other user holding 0.

    The analyst sees S = B + X with B ~ Binomial(n − 1, q) (the others' ones), q = 1/(e^{ε0}+1)
    and X ~ Bernoulli(q) if the target holds 0, Bernoulli(1 − q) if it holds 1. The window of B
    drops a mass of at most ``tail``, which can only lower δ: a lower bound stays a lower bound.
    """

    def __init__(self, eps0: float, n: int, tail: float) -> None:
        q = 1.0 / (1.0 + math.exp(eps0))
        win = _binomial_window(n - 1, q, tail)
        b = np.concatenate([win.w, [0.0]])  # B(s) for s = lo .. hi + 1
        b_prev = np.concatenate([[0.0], win.w])  # B(s − 1)
        self.p0 = (1.0 - q) * b + q * b_prev
        self.p1 = q * b + (1.0 - q) * b_prev
        self.evaluations = 0

    def __call__(self, eps: float) -> tuple[float, float]:
        self.evaluations += 1
        g = math.exp(eps)
        best, slope = 0.0, 0.0
        for p, q in ((self.p0, self.p1), (self.p1, self.p0)):
            d = p - g * q
            keep = d > 0
            value = float(d[keep].sum())
            if value >= best:
                best, slope = value, -g * float(q[keep].sum())
        return best, slope


def shuffled_rr_delta(eps: float, eps0: float, n: int) -> float:
    """Exact central δ(ε) of n shuffled binary randomized-response reports at ε0 (others 0).

    Binary RR with keep probability e^{ε0}/(e^{ε0} + 1) is ε0-LDP, so this δ(ε) is attained by
    a real shuffled protocol and lower-bounds the δ(ε) of any valid amplification bound.
    """
    owner = "shuffled_rr_delta"
    eps0, n = _eps0(owner, eps0), _n(owner, n)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps >= 0:
        raise ValueError(f"{owner}: 'eps' must be a number >= 0; got {eps!r}.")
    return _RRCurve(eps0, n, 1e-18)(float(eps))[0]


def shuffled_rr_epsilon(eps0: float, n: int, delta: float) -> float:
    """Lower bound on the central ε of n shuffled ε0-LDP reports: shuffled binary RR's own.

    The largest ε found with δ_RR(ε) > δ (:func:`shuffled_rr_delta`), so every ε below the
    returned value violates (ε, δ)-DP for this protocol; no bound that holds for all ε0-LDP
    randomizers can be smaller (docs/math.md §17.2).
    """
    owner = "shuffled_rr_epsilon"
    eps0, n, delta = _eps0(owner, eps0), _n(owner, n), _delta(owner, delta)
    curve = _RRCurve(eps0, n, 1e-18)
    at_zero = curve(0.0)
    if at_zero[0] <= delta:
        return 0.0
    if curve(eps0)[0] > delta:  # pragma: no cover - δ_RR(ε0) = 0 for binary RR
        return eps0
    return _search(curve, delta, 0.0, eps0, at_zero)[0]


# ------------------------------------------------------------------------------ composition


def compose_advanced(eps: float, count: int, delta_slack: float) -> float:
    """Advanced composition: ``count`` (ε, δ0)-DP mechanisms are (ε', count·δ0 + δ')-DP with

        ε' = min(count·ε, √(2·count·ln(1/δ'))·ε + count·ε·(e^ε − 1))

    ([DRV10]; Dwork and Roth 2014, Theorem 3.20), δ' = ``delta_slack``; the caller adds
    count·δ0 to the total δ. Kept for comparison: :func:`compose_optimal` is never larger.
    """
    owner = "compose_advanced"
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < math.inf:
        raise ValueError(f"{owner}: 'eps' must be a finite number >= 0; got {eps!r}.")
    count = check.integer(owner, "count", count, minimum=1)
    delta_slack = _delta(owner, delta_slack)
    spread = math.sqrt(2 * count * math.log(1 / delta_slack)) * eps
    return min(count * eps, spread + count * eps * math.expm1(eps))


def optimal_composition_delta(eps: float, delta0: float, count: int, eps_total: float) -> float:
    """Exact δ at ``eps_total`` of ``count`` composed (ε, δ0)-DP mechanisms ([KOV15] Thm 3.3).

    Every (ε, δ0)-DP mechanism is a post-processing of the canonical one: with probability δ0
    it reveals its input (privacy loss +∞), otherwise it is randomized response with losses ±ε.
    The composition's privacy-loss distribution is therefore +∞ with mass 1 − (1 − δ0)^m and
    (m − 2j)·ε with mass (1 − δ0)^m·C(m, j)·p^{m−j}(1 − p)^j, p = e^ε/(1 + e^ε), and

        δ(ε') = 1 − (1 − δ0)^m·(1 − Σ_j Pr[L = (m − 2j)ε]·max(0, 1 − e^{ε' − (m − 2j)ε}))

    (docs/math.md §17.3).
    """
    m = count
    j = np.arange(m + 1)
    losses = (m - 2 * j) * eps
    weights = stats.binom.pmf(j, m, 1.0 / (1.0 + math.exp(eps)))
    pure = float(weights @ np.maximum(0.0, -np.expm1(eps_total - losses)))
    survive = math.exp(m * math.log1p(-delta0))
    return 1.0 - survive * (1.0 - pure)


def compose_optimal(eps: float, delta0: float, count: int, delta: float) -> float:
    """Smallest ε' such that ``count`` composed (ε, δ0)-DP mechanisms are (ε', δ)-DP.

    From :func:`optimal_composition_delta` (decreasing in ε'), by bisection to 10⁻¹²; returned
    from above. Requires δ > 1 − (1 − δ0)^count (else no finite ε' exists: ``ValueError``).
    """
    owner = "compose_optimal"
    count = check.integer(owner, "count", count, minimum=1)
    delta = _delta(owner, delta)
    if count == 1:
        if delta < delta0:
            raise ValueError(f"{owner}: 'delta' must be >= delta0 = {delta0:g}; got {delta!r}.")
        return eps
    floor = -math.expm1(count * math.log1p(-delta0))
    if not delta > floor:
        raise ValueError(
            f"{owner}: 'delta' must be > 1 - (1 - delta0)^count = {floor:g} (the mass of "
            f"infinite privacy loss); got {delta!r}."
        )
    lo, hi = 0.0, count * eps
    if optimal_composition_delta(eps, delta0, count, 0.0) <= delta:
        return 0.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if optimal_composition_delta(eps, delta0, count, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def compose_pld_dp_accounting(eps: float, delta0: float, count: int, delta: float) -> float:
    """The same composition by Google's ``dp_accounting`` PLD accountant (optional extra).

    ``from_privacy_parameters((ε, δ0)).self_compose(count).get_epsilon_for_delta(δ)``: its
    privacy-loss distribution of an (ε, δ0) pair is the canonical one of
    :func:`optimal_composition_delta`, discretized pessimistically, so the two agree up to the
    discretization (tests/test_shuffle.py). Raises ``ModuleNotFoundError`` without the package
    (``pip install 'longldp[accounting]'``).
    """
    from dp_accounting.pld import common, privacy_loss_distribution

    params = common.DifferentialPrivacyParameters(eps, delta0)
    pld = privacy_loss_distribution.from_privacy_parameters(params)
    return float(pld.self_compose(count).get_epsilon_for_delta(delta))


@dataclass(frozen=True)
class Composed:
    """(ε, δ) of m composed shuffled mechanisms, with the per-mechanism (ε0, δ0) it used."""

    epsilon: float
    delta: float
    per_mechanism_epsilon: float
    per_mechanism_delta: float
    count: int
    method: str


def compose_shuffled(eps0: float, n: int, count: int, delta: float) -> Composed:
    """Central (ε, δ) of ``count`` independent shuffles of n ε0-LDP reports each.

    Each shuffle is (ε_s(δ0), δ0)-DP by :func:`clones_epsilon`; the count of them compose by
    :func:`compose_optimal` (never worse than basic or advanced composition) at total δ. δ0 is
    the best of f·δ/count for f in :data:`DELTA_SPLITS` (docs/math.md §17.3).
    """
    owner = "compose_shuffled"
    count = check.integer(owner, "count", count, minimum=1)
    if count == 1:
        e = clones_epsilon(eps0, n, delta)
        return Composed(e, delta, e, delta, 1, "single")
    best: Composed | None = None
    for frac in DELTA_SPLITS:
        delta0 = frac * delta / count
        e0 = clones_epsilon(eps0, n, delta0)
        total = compose_optimal(e0, delta0, count, delta)
        if best is None or total < best.epsilon:
            best = Composed(total, delta, e0, delta0, count, "optimal (ε, δ) composition")
    assert best is not None
    return best


# ------------------------------------------------------------------------------ a collection


@dataclass(frozen=True)
class Route:
    """One valid way to bound the whole collection (docs/math.md §17.4–§17.5)."""

    name: str
    epsilon: float
    delta: float
    how: str


@dataclass(frozen=True)
class CollectionBound:
    """Central (ε, δ) of a whole collection of τ epochs: every valid route and their minimum;
    ``excluded`` names each route the protocol's linkage rules out, with the reason."""

    epsilon: float
    delta: float
    route: str
    routes: tuple[Route, ...]
    excluded: tuple[tuple[str, str], ...] = ()


def collection_bound(
    eps_1: float,
    eps_perm: float | None,
    n: int,
    epochs: int,
    delta: float,
    memos: int = 1,
    *,
    linkage: Linkage,
) -> CollectionBound:
    """Central (ε, δ) of τ epochs of n devices, each sending one report per epoch, shuffled.

    ``eps_perm`` None means a one-shot client (ε1 per report, nothing memoized); otherwise a
    memoizing chain where each of the device's ``memos`` distinct memos is ε∞-LDP and each
    report ε1-LDP. ``linkage`` is what persists per device (the protocol's ``linkage`` trait,
    :class:`longldp.privacy.linkage.Linkage`); it must have a memo exactly when ``eps_perm``
    is given. Only the routes proven under it are offered (docs/math.md §17.4–§17.5):

    - **memo** (chains): the collection is a post-processing of the shuffled multisets of
      memos, so it costs the shuffled ε∞ once per memo, composed over the ``memos``; not when
      the reports carry a persistent field and the device holds several memos (the field
      links them, so the per-memo multisets are not independent shuffles);
    - **epochs** (nothing persists): each epoch's shuffle costs the shuffled ε1, composed over
      the τ epochs. Not for memoized chains (their epochs share the memo), nor for reports
      that carry a per-device field (a hash seed, a Hadamard row, a cohort, a bucket map),
      which links a device's epochs;
    - **tuple** (all): per-epoch shuffles, linked by any field or not, are a post-processing of
      shuffling each device's whole τ-tuple of reports, an ε_L-LDP randomizer with
      ε_L = min(τ·ε1, d·ε∞) (τ·ε1 for one-shot clients): the shuffled ε_L.

    The figure is the smallest. All routes need a trusted shuffler, anonymous transport, one
    report per device per epoch and, for chains, devices whose memo keys change at the same
    epochs (the value itself for most chains; the hashed value for LOLOHA, the sampled bucket
    of dBitFlipPM, the cohort's filter for Bloom RAPPOR; in particular values that never
    change); see docs/math.md §17.4 and §17.6.
    """
    owner = "collection_bound"
    eps_1 = _eps0(owner, eps_1)
    n = _n(owner, n)
    epochs = check.integer(owner, "epochs", epochs, minimum=1)
    delta = _delta(owner, delta)
    memos = check.integer(owner, "memos", memos, minimum=1, maximum=epochs)
    if not isinstance(linkage, Linkage):
        raise ValueError(
            f"{owner}: 'linkage' must be a Linkage (the protocol's trait); got {linkage!r}."
        )
    if linkage.memoized != (eps_perm is not None):
        raise ValueError(
            f"{owner}: 'eps_perm' must be given exactly for a linkage with a memo; got "
            f"eps_perm = {eps_perm!r} with linkage {linkage.describe()!r}."
        )
    valid = linkage.routes(memos)
    routes: list[Route] = []
    if eps_perm is None:
        eps_local = epochs * eps_1
    else:
        eps_perm = _eps0(owner, eps_perm)
        eps_local = min(epochs * eps_1, memos * eps_perm)
    if "memo" in valid:
        assert eps_perm is not None
        per_memo = compose_shuffled(eps_perm, n, memos, delta)
        how = f"shuffled ε∞ = {per_memo.per_mechanism_epsilon:.4g}"
        if memos > 1:
            how += f" at δ0 = {per_memo.per_mechanism_delta:.3g}, composed over {memos} memos"
        routes.append(Route("memo", per_memo.epsilon, delta, how))
    if "epochs" in valid:
        per_epoch = compose_shuffled(eps_1, n, epochs, delta)
        routes.append(
            Route(
                "epochs",
                per_epoch.epsilon,
                delta,
                f"shuffled ε per epoch {per_epoch.per_mechanism_epsilon:.4g} at "
                f"δ0 = {per_epoch.per_mechanism_delta:.3g}, composed over {epochs} epochs",
            )
        )
    # Shuffling never costs more than the local budget; past EPS0_MAX keep the local ε.
    tuple_eps = clones_epsilon(eps_local, n, delta) if eps_local < EPS0_MAX else eps_local
    linked = " (linked by " + " and ".join(map(str, linkage.linked_by)) + ")"
    routes.append(
        Route(
            "tuple",
            tuple_eps,
            delta,
            f"shuffled device tuple{linked if linkage.linkable else ''}, ε_L = {eps_local:.4g}",
        )
    )
    best = min(routes, key=lambda r: r.epsilon)
    excluded = tuple(linkage.excluded(memos).items())
    return CollectionBound(best.epsilon, delta, best.name, tuple(routes), excluded)


#: What the shuffled figures assume, printed beside them (docs/math.md §17.6).
ASSUMPTIONS = (
    "a trusted shuffler that mixes each epoch's reports and strips identities",
    "anonymous transport: no device id, account, address or timing links a report to a device",
    "one report per device per epoch, from devices independent of one another",
    "for memoizing chains, devices whose memo keys change at the same epochs (e.g. values that "
    "never change; for LOLOHA, dBitFlipPM and Bloom RAPPOR the key is the hashed value, the "
    "sampled bucket or the cohort's filter, which depend on the device)",
)


@dataclass(frozen=True)
class CentralSummary:
    """Local and shuffled central privacy of one protocol's collection (docs/math.md §17).

    ``per_report`` and ``per_memo`` are LDP budgets (ε1 and ε∞; one-shot clients: ε, and no
    memo); ``per_epoch`` the shuffled ε of one epoch's reports seen alone; ``per_memo_shuffled``
    the shuffled ε∞; ``collection_local`` the device's whole LDP budget min(τ·ε1, d·ε∞)
    (one-shot: τ·ε); ``collection`` the shuffled figure of the whole collection, with its
    ``route``. ``linkage`` says what persists per device, ``linked_by`` the persistent fields
    every report carries (which link a device's epochs) and ``excluded`` the routes they rule
    out, with the reason (docs/math.md §17.4).
    """

    protocol: str
    longitudinal: bool
    n: int
    epochs: int
    memos: int
    delta: float
    per_report: float
    per_memo: float | None
    per_epoch: float
    per_memo_shuffled: float | None
    collection_local: float
    collection: float
    route: str
    routes: tuple[Route, ...]
    assumptions: tuple[str, ...] = field(default=ASSUMPTIONS)
    linkage: str = "nothing"
    linked_by: tuple[str, ...] = ()
    excluded: tuple[tuple[str, str], ...] = ()

    def linkage_words(self) -> str:
        """What the persistent fields do to the figures, in one or two sentences ("" when the
        reports carry none)."""
        if not self.linked_by:
            return ""
        fields = " and ".join(self.linked_by)
        return (
            f"Every {self.protocol} report carries the device's {fields}, kept for life, so an "
            "analyst who sees several epochs links each device's reports even behind a "
            "shuffler: the per-epoch figure holds only for one epoch seen alone, and the "
            "whole-collection figure uses only the routes that stay valid for linked reports "
            f"(here {self.route}), never the composition of per-epoch shuffles "
            "(docs/math.md §17.4)."
        )

    def words(self) -> str:
        """One paragraph for a collection page: the figures and who may rely on them."""
        d = f"{self.delta:.3g}"
        memo = "" if self.per_memo is None else f", one memo at most ε∞ = {self.per_memo:.3g}"
        linked = self.linkage_words()
        return (
            f"Without a shuffler: one report reveals at most ε = {self.per_report:.3g}{memo}, "
            f"a device over {self.epochs} epochs at most ε = {self.collection_local:.3g}. "
            f"If each epoch's {self.n:,} reports reach the analyst only through a trusted "
            f"shuffler: one epoch is ({self.per_epoch:.3g}, {d})-DP and the whole collection "
            f"({self.collection:.3g}, {d})-DP (route {self.route}, docs/math.md §17). "
            + (linked + " " if linked else "")
            + "A server that authenticates devices sees who sent what: toward it only the "
            "first figures hold."
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (routes as a list of dicts), with :meth:`words`."""
        out = asdict(self)
        out["routes"] = [asdict(r) for r in self.routes]
        out["assumptions"] = list(self.assumptions)
        out["linked_by"] = list(self.linked_by)
        out["excluded"] = [{"route": r, "why": why} for r, why in self.excluded]
        out["words"] = self.words()
        return out


def central_summary(
    proto: Any, n: int, epochs: int, delta: float = 1e-6, memos: int = 1
) -> CentralSummary:
    """Local and shuffled central ε of a protocol's collection: per report, per memo, per epoch
    and for the whole collection of ``epochs`` epochs at ``n`` devices (docs/math.md §17).

    ``proto`` is a protocol object (``longldp.protocol(...)``); its ε0 are read from its exact
    channels: ``single_report_epsilon()`` per report and, for memoizing protocols,
    ``first_round_epsilon()`` per memo (one-shot oracles and one-time RAPPOR keep no memo), and
    the routes from its ``linkage`` trait (what persists per device: a hash seed, a Hadamard
    row, a cohort or a bucket map in every report links a device's epochs). ``memos``:
    distinct memos per device (1 when values never change). A protocol without a finite ε0,
    or whose reports depend on the device's past values (its ``history`` trait), is refused with
    ``ValueError``.
    """
    owner = "central_summary"
    name = getattr(proto, "name", type(proto).__name__)
    if getattr(proto, "history", None) is not None:  # the declared trait (design §2.5)
        raise ValueError(
            f"{owner}: protocol {name}'s reports depend on each device's own past values (a "
            "history-dependent mechanism); the routes of docs/math.md §17.4 are proven for "
            "reports of each epoch's value and are not offered for it."
        )
    try:
        eps_report = float(proto.single_report_epsilon())
        longitudinal = bool(proto.longitudinal)  # one-shot and one-time RAPPOR: no memo
        eps_memo = float(proto.first_round_epsilon()) if longitudinal else None
        linkage = proto.linkage
    except AttributeError:
        raise ValueError(
            f"{owner}: 'proto' must be a protocol object with a known ε0 "
            f"(single_report_epsilon) and a linkage trait; got {proto!r}."
        ) from None
    for label, value in (("ε of one report", eps_report), ("ε∞ of a memo", eps_memo)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(
                f"{owner}: protocol {name} has no finite ε0 ({label} is {value!r}); shuffling "
                "amplifies only a finite local ε."
            )
    n = _n(owner, n)
    epochs = check.integer(owner, "epochs", epochs, minimum=1)
    delta = _delta(owner, delta)
    bound = collection_bound(eps_report, eps_memo, n, epochs, delta, memos, linkage=linkage)
    per_epoch = clones_epsilon(eps_report, n, delta)
    per_memo_shuffled = None if eps_memo is None else clones_epsilon(eps_memo, n, delta)
    local = epochs * eps_report if eps_memo is None else min(epochs * eps_report, memos * eps_memo)
    return CentralSummary(
        protocol=name,
        longitudinal=longitudinal,
        n=n,
        epochs=epochs,
        memos=memos,
        delta=delta,
        per_report=eps_report,
        per_memo=eps_memo,
        per_epoch=per_epoch,
        per_memo_shuffled=per_memo_shuffled,
        collection_local=local,
        collection=bound.epsilon,
        route=bound.route,
        routes=bound.routes,
        linkage=linkage.describe(),
        linked_by=tuple(str(f) for f in linkage.linked_by),
        excluded=bound.excluded,
    )
