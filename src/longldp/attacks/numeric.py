"""Poisoning of numeric mean estimation (docs/attacks.md §13).

After Li, Wang, Shi, Zhang, Zhao, Chen and Ren, "Fine-grained poisoning attacks to local
differential privacy protocols for mean and variance estimation", USENIX Security 2023 ([LI23]):
m fake users join n genuine ones (fake share β = m/(n + m), as
:func:`longldp.attacks.threat.fake_count` counts them) and push the server's mean estimate of a
numeric mechanism (docs/math.md §20).

- **Input poisoning** (IPA): the fakes run the honest client on chosen inputs x*, so their
  debiased reports have mean u* = 2(x* − lo)/(hi − lo) − 1 ∈ [−1, 1];
- **output poisoning** (OPA): the fakes send crafted reports whose debiased values have the mean
  ŷ* they need, anywhere in the range of debiased reports the server accepts:
  [û_min, û_max] (:func:`report_extremes`): ±C for Duchi's sign, ±C_PM for PM and HM, SW's
  [−b, 1 + b] debiased, ±1/κ for the bits of the two-round forms, and for Laplace the ends of
  its report grid, [−1, 1] widened by 20 noise scales (the mechanism itself is unbounded:
  the grid is what bounds its poisoning, math §20.12).

The server averages all n + m debiased reports, so (ours, from the estimator of math §20.1)

    E[ū̂] = (1 − β)·ū + β·ŷ,   gain = E[ū̂] − ū = β·(ŷ − ū),                          (13.1)

ŷ = u* (input) or the fakes' crafted mean (output). [LI23]'s *fine-grained* goal is a target
mean x_t: the fakes choose ŷ = (ū_t − (1 − β)·ū)/β, reachable when it lies in [−1, 1] (input)
or [û_min, û_max] (output); otherwise the closest end, the largest gain there is.

**The variance** ([LI23] attack mean and variance together). longldp estimates the variance
from split users (docs/math.md §20.13, :mod:`longldp.protocols.numeric.moments`): group A
reports x, group B the centred square (x − c)². The fakes are dealt to the groups in the same
share; those in A push the mean (their debiased reports average ȳ1, u units), those in B the
mean of the squares (their debiased values of u² average ȳ2). The expected poisoned estimate
is in closed form (docs/attacks.md (13.2)–(13.3), exact given the group sizes):
:func:`plan_variance`, :func:`variance_fake_reports`, :func:`poisoned_variance`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.attacks.threat import fake_count
from longldp.privacy import numeric as nm
from longldp.protocols.numeric import moments

OWNER = "numeric poisoning"
ATTACKS = ("input", "output")


def _mean_proto(proto: Any) -> Any:
    return moments.mean_protocol(proto, OWNER)


def report_extremes(proto: Any) -> tuple[float, float]:
    """[û_min, û_max]: the debiased values (u units) of the lowest and highest report the
    server accepts (the ends of the report grid, math §20.12)."""
    p = _mean_proto(proto)
    return _debiased(p, _extreme_report(p, low=True)), _debiased(p, _extreme_report(p, low=False))


def _extreme_report(proto: Any, low: bool) -> NDArray:
    if proto.report_kind == "sign":
        return np.array([0 if low else 1], dtype=np.uint8)
    lo, hi = proto.report_range()
    return proto.quantize(np.array([lo if low else hi]))


def _debiased(proto: Any, reports: NDArray) -> float:
    """The mean debiased value (u units) of report records, from the protocol's own support."""
    support = np.asarray(proto.support_counts(reports), dtype=np.float64)
    s1, _ = proto.unit_sums(support, len(reports))
    return float(s1) / len(reports)


@dataclass(frozen=True)
class MeanPoisoning:
    """One attack's plan: the fakes' count and the mean ŷ of their debiased reports (u units),
    the expected estimate (declared units) and the target when one was given."""

    attack: str
    n_fake: int
    beta: float
    fake_mean_u: float
    expected_estimate: float
    expected_gain: float
    target: float | None
    reachable: bool


def plan(
    proto: Any,
    attack: str,
    genuine_mean: float,
    n_genuine: int,
    beta: float,
    target: float | None = None,
) -> MeanPoisoning:
    """The fakes' mean ŷ for a target mean (fine-grained, [LI23]) or, without one, the largest
    upward push; the expected estimate and gain by (13.1), in declared units."""
    p = _mean_proto(proto)
    attack = check.choice(OWNER, "attack", attack, ATTACKS)
    n = check.integer(OWNER, "n_genuine", n_genuine, minimum=1)
    m = fake_count(n, beta)
    b = m / (n + m)
    half = (p.hi - p.lo) / 2
    u_bar = (float(genuine_mean) - p.lo) / half - 1.0
    low, high = (-1.0, 1.0) if attack == "input" else report_extremes(p)
    if target is None:
        want = high
    else:
        u_t = (float(target) - p.lo) / half - 1.0
        want = (u_t - (1 - b) * u_bar) / b
    reachable = target is not None and low <= want <= high
    y = min(high, max(low, want))
    est_u = (1 - b) * u_bar + b * y
    est = p.lo + half * (est_u + 1.0)
    return MeanPoisoning(attack, m, b, y, est, est - float(genuine_mean), target, reachable)


def fake_reports(proto: Any, poisoning: MeanPoisoning, rng: Any) -> NDArray:
    """The fakes' report records: honest clients on the input x* with u* = ŷ (input attack), or
    crafted reports (output attack): one bit set with probability λ = (ŷ − û_min)/(û_max −
    û_min) for sign reports, the one real report whose debiased value is ŷ otherwise."""
    p = _mean_proto(proto)
    return _fakes(p, poisoning.attack, poisoning.n_fake, poisoning.fake_mean_u, rng)


def _fakes(p: Any, attack: str, m: int, y: float, rng: Any) -> NDArray:
    """m fake reports of ``p`` whose debiased values average y (u units) in expectation."""
    gen = np.random.default_rng(rng)
    if attack == "input":
        x = p.lo + (p.hi - p.lo) * (y + 1.0) / 2.0
        return p.perturb(np.full(m, x), p.new_memo(m), gen)
    if p.report_kind == "sign":  # bits: a share λ of ones, drawn so that E[share] = λ exactly
        low, high = report_extremes(p)
        lam = (y - low) / (high - low)
        return (gen.random(m) < lam).astype(np.uint8)
    # real reports: every fake sends the grid report nearest the one whose debiased value is ŷ
    lo, hi = p.report_range()
    ends = p.quantize(np.array([lo, hi]))
    a = _debiased(p, ends[:1])
    slope = (_debiased(p, ends[1:]) - a) / (ends[1] - ends[0])
    return p.quantize(np.full(m, ends[0] + (y - a) / slope))


def poisoned_mean(proto: Any, genuine: NDArray, fakes: NDArray) -> float:
    """The server's mean estimate (declared units) of the genuine and fake reports together."""
    p = _mean_proto(proto)
    support = p.support_counts(genuine) + p.support_counts(fakes)
    return float(p.estimate(support, len(genuine) + len(fakes))[0])


# ---------------------------------------------------------------------- the variance


@dataclass(frozen=True)
class VariancePoisoning:
    """One attack on a split collection (docs/math.md §20.13): the genuine and fake users per
    group, the fakes' means ȳ1 (group A, u units) and ȳ2 (group B, of u²), and the expected
    estimates of the mean and of the variance (declared units, (13.2)–(13.3))."""

    attack: str
    beta: float
    n_genuine: tuple[int, int]
    n_fake: tuple[int, int]
    fake_mean_u: float
    fake_square_u: float
    genuine_variance: float
    expected_mean: float
    expected_variance: float
    expected_gain: float
    target_mean: float | None
    target_variance: float | None
    reachable_mean: bool
    reachable_variance: bool


def _moments_u(p: Any, mean: float, variance: float) -> tuple[float, float]:
    """(ū, mean u²) of genuine data with this mean and (population) variance."""
    half = (p.hi - p.lo) / 2
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not p.lo <= mean <= p.hi:
        raise check._fail(OWNER, "genuine_mean", f"a number in [{p.lo:g}, {p.hi:g}]", mean)
    u_bar = (float(mean) - p.lo) / half - 1.0
    top = half * half * max(0.0, 1.0 - u_bar * u_bar)
    if (
        isinstance(variance, bool) or not isinstance(variance, (int, float))
        or not 0.0 <= variance <= top * (1 + 1e-12)
    ):  # fmt: skip
        raise check._fail(
            OWNER, "genuine_variance",
            f"a number in [0, {top:.6g}] (the largest variance of data in [lo, hi] with that mean)",
            variance,
        )  # fmt: skip
    return u_bar, u_bar * u_bar + float(variance) / (half * half)


def expected_split_estimates(
    sizes: tuple[int, int, int, int], u_bar: float, m2: float, y1: float, y2: float
) -> tuple[float, float]:
    """(E[mean], E[variance]) in u units of the split estimator (20.28) on n_A + m_A reports of
    x and n_B + m_B of the square, the fakes' debiased values averaging y1 and y2 (u², with
    E[y_j·y_l] = y1² between two fakes: independent or identical reports) (13.2)–(13.3)."""
    n_a, n_b, m_a, m_b = sizes
    n = n_a + n_b
    big_a, big_b = n_a + m_a, n_b + m_b
    big = big_a + big_b
    g2 = (n * u_bar * u_bar - m2) / (n - 1)  # E[u_k·u_l], k ≠ l, of the genuine users
    pairs = (n_a * (n_a - 1) * g2 + 2 * n_a * m_a * u_bar * y1 + m_a * (m_a - 1) * y1 * y1) / (
        big_a * (big_a - 1)
    )
    squares = (n_b * m2 + m_b * y2) / big_b
    return (n_a * u_bar + m_a * y1) / big_a, (big - 1) / big * (squares - pairs)


def plan_variance(
    proto: Any,
    attack: str,
    genuine_mean: float,
    genuine_variance: float,
    n_genuine: int,
    beta: float,
    target_mean: float | None = None,
    target_variance: float | None = None,
    share: float = 0.5,
) -> VariancePoisoning:
    """The fakes' plan against a split collection ([LI23]'s fine-grained goal: a target mean
    and a target variance at once, docs/attacks.md §13.2).

    ``genuine_variance`` is the population variance (1/n)Σ(x − x̄)² of the n genuine values.
    The m = :func:`fake_count` fakes are dealt to the groups in ``share`` (m_A = round(share·m)).
    Group A's fakes take ȳ1 for the target mean (none: ȳ1 = ū, the mean left where it is);
    group B's then take ȳ2 for the target variance (none: the largest push upward); each is
    clipped to what the attack reaches: ȳ1 ∈ [−1, 1] and ȳ2 ∈ [0, 1] for input poisoning, the
    debiased ends of the report grids for output poisoning (:func:`report_extremes`).
    """
    p = _mean_proto(proto)
    attack = check.choice(OWNER, "attack", attack, ATTACKS)
    n = check.integer(OWNER, "n_genuine", n_genuine, minimum=3)
    n_a, n_b = nm.split_sizes(n, share)
    m = fake_count(n, beta)
    m_a = min(m, round(share * m))
    m_b = m - m_a
    u_bar, m2 = _moments_u(p, genuine_mean, genuine_variance)
    half2 = ((p.hi - p.lo) / 2) ** 2
    if attack == "input":
        (low1, high1), (low2, high2) = (-1.0, 1.0), (0.0, 1.0)
    else:
        low1, high1 = report_extremes(p)
        w_lo, w_hi = report_extremes(moments.square_protocol(p))
        low2, high2 = (w_lo + 1) / 2, (w_hi + 1) / 2
    big_a, big_b = n_a + m_a, n_b + m_b
    big = big_a + big_b
    y1, reach_mean = u_bar, False
    if target_mean is not None and m_a:
        u_t = 2 * (float(target_mean) - p.lo) / (p.hi - p.lo) - 1.0
        want = (big_a * u_t - n_a * u_bar) / m_a
        reach_mean = low1 <= want <= high1
        y1 = min(high1, max(low1, want))
    sizes = (n_a, n_b, m_a, m_b)
    y2, reach_var = high2, False
    if target_variance is not None and m_b:
        _, var_without = expected_split_estimates(sizes, u_bar, m2, y1, 0.0)
        # E[variance] is var_without + (big − 1)/big·m_b·y2/big_b: solve for the target
        want = (float(target_variance) / half2 - var_without) * big * big_b / ((big - 1) * m_b)
        reach_var = low2 <= want <= high2
        y2 = min(high2, max(low2, want))
    mean_u, var_u = expected_split_estimates(sizes, u_bar, m2, y1, y2)
    expected_variance = half2 * var_u
    return VariancePoisoning(
        attack, m / (n + m), (n_a, n_b), (m_a, m_b), y1, y2, float(genuine_variance),
        float(p.declared.mean_from_u(mean_u)), expected_variance,
        expected_variance - float(genuine_variance), target_mean, target_variance,
        bool(reach_mean), bool(reach_var),
    )  # fmt: skip


def variance_fake_reports(
    proto: Any, poisoning: VariancePoisoning, rng: Any
) -> tuple[NDArray, NDArray]:
    """The fakes' reports of group A (of x, debiased mean ȳ1) and of group B (of the square,
    debiased mean 2ȳ2 − 1 in the square protocol's u units), as :func:`fake_reports` makes
    them: honest clients on chosen inputs, or crafted reports."""
    p = _mean_proto(proto)
    gen = np.random.default_rng(rng)
    m_a, m_b = poisoning.n_fake
    fa = _fakes(p, poisoning.attack, m_a, poisoning.fake_mean_u, gen)
    sq = moments.square_protocol(p)
    fb = _fakes(sq, poisoning.attack, m_b, 2.0 * poisoning.fake_square_u - 1.0, gen)
    return fa, fb


def poisoned_variance(
    proto: Any, genuine: tuple[NDArray, NDArray], fakes: tuple[NDArray, NDArray]
) -> moments.VarianceEstimate:
    """The server's split estimate (20.28) of the genuine and fake reports of both groups."""
    p = _mean_proto(proto)
    sq = moments.square_protocol(p)
    (ga, gb), (fa, fb) = genuine, fakes
    return moments.estimate_population_variance(
        p, p.support_counts(ga) + p.support_counts(fa), len(ga) + len(fa),
        sq.support_counts(gb) + sq.support_counts(fb), len(gb) + len(fb),
    )  # fmt: skip
