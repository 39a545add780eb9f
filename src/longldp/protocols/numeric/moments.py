"""The variance of a numeric attribute from split users (ours, docs/math.md §20.13).

Li et al. (USENIX Security 2023) poison a variance estimated as the mean of the squares minus
the square of the mean, from two groups of users. The construction here is ours (the paper's
own estimator is not restated: docs/math.md §20.13 says why):

- the collection deals its n users at random into group A, n_A = round(share·n) users who
  report their value x with a mean mechanism M at ε on [lo, hi], and group B, the n_B others,
  who report the centred square z = (x − c)², c = (lo + hi)/2, with the same M at the same ε on
  [0, h²], h = (hi − lo)/2 (:func:`square_protocol`, :func:`centred_squares`); one report per
  user, so each pays ε once;
- in u units (u = (x − c)/h) group B's coordinate is w = 2u² − 1, so m̂2 = (mean ŵ + 1)/2
  estimates the mean of u², and with S1 = Σ_A û, S2 = Σ_A û²

      σ̂²_u = ((n − 1)/n)·(m̂2 − (S1² − S2)/(n_A(n_A − 1))),   σ̂² = h²·σ̂²_u,     (20.28)

  unbiased for the population variance (1/n)Σ(x − x̄)² over the random split and the
  mechanism's noise (math (20.29)); :func:`estimate_population_variance`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import numeric as nm
from longldp.protocols._estimate import normal_quantile

OWNER = "split variance"


def mean_protocol(proto: Any, owner: str = OWNER) -> Any:
    """``proto`` if its estimate is a mean (docs/math.md §20), else a ``ValueError``."""
    if str(getattr(proto, "estimand", "")) != "mean":
        raise check._fail(
            owner, "proto", "a numeric mechanism whose estimate is a mean (docs/math.md §20)",
            check.Described(f"{getattr(proto, 'name', proto)} "
                            f"(estimand {getattr(proto, 'estimand', None)})"),
        )  # fmt: skip
    return proto


def square_protocol(proto: Any) -> Any:
    """Group B's mechanism: ``proto`` (same class, budget and parameters) on [0, h²],
    h = (hi − lo)/2, where the centred squares (x − c)² lie."""
    p = mean_protocol(proto)
    half = (p.hi - p.lo) / 2
    return dataclasses.replace(p, lo=0.0, hi=half * half)


def centred_squares(proto: Any, values: ArrayLike) -> NDArray[np.float64]:
    """(x − c)² = h²·u² of values of [lo, hi] (checked by the protocol's domain; clipped and
    counted only with ``clip``): group B's inputs, never above h²."""
    p = mean_protocol(proto)
    u = 2.0 * p.declared.t_of(p.domain.check(p.name, values)) - 1.0
    half = (p.hi - p.lo) / 2
    return (half * half) * (u * u)


def split_users(n: int, rng: Any, share: float = 0.5) -> NDArray[np.bool_]:
    """A uniformly random split: True for the n_A users of group A (:func:`split_sizes`)."""
    n_a, _ = nm.split_sizes(n, share)
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(rng).permutation(n)[:n_a]] = True
    return mask


@dataclass(frozen=True)
class VarianceEstimate:
    """The split estimate of the variance (declared units) and what it is made of.

    ``variance`` is (20.28), unbiased (it can be negative); ``plug_in`` is it clipped to
    [0, h²], the range of a variance on [lo, hi]; ``se`` is the standard error from the reports
    (math (20.31)): exact to first order for values drawn from a larger population, and an
    upper bound about the n users' own variance; ``lower``/``upper`` = variance ∓ z·se.
    ``mean`` is group A's mean estimate (math §20.1)."""

    n_mean: int
    n_square: int
    mean: float
    variance: float
    plug_in: float
    se: float
    lower: float
    upper: float
    level: float


def estimate_population_variance(
    proto: Any,
    mean_support: ArrayLike,
    n_mean: int,
    square_support: ArrayLike,
    n_square: int,
    level: float = 0.95,
) -> VarianceEstimate:
    """(20.28) from the supports of group A (``proto``'s reports of x) and of group B
    (:func:`square_protocol`'s reports of the centred squares), with its standard error.

    The supports are what the protocols' aggregators keep (``support_counts``): for bit
    reports the count of ones, for real ones (Σû, Σû²); group sizes n_A ≥ 2, n_B ≥ 1.
    """
    p = mean_protocol(proto)
    sq = square_protocol(p)
    n_a = check.integer(OWNER, "n_mean", n_mean, minimum=2)
    n_b = check.integer(OWNER, "n_square", n_square, minimum=1)
    n = n_a + n_b
    s1, s2 = (float(x) for x in p.unit_sums(np.asarray(mean_support, dtype=np.float64), n_a))
    w1, w2 = (float(x) for x in sq.unit_sums(np.asarray(square_support, dtype=np.float64), n_b))
    m2 = (w1 / n_b + 1.0) / 2.0
    pairs = (s1 * s1 - s2) / (n_a * (n_a - 1))
    var_u = (n - 1) / n * (m2 - pairs)
    # (20.31): the groups' sample variances of the debiased reports
    mean_u = s1 / n_a
    sa = max(s2 - s1 * s1 / n_a, 0.0) / (n_a - 1)
    sb = max(w2 - w1 * w1 / n_b, 0.0) / (n_b - 1) if n_b > 1 else 0.0
    se_u = float(np.sqrt(sb / (4 * n_b) + 4 * mean_u * mean_u * sa / n_a)) * (n - 1) / n
    h2 = ((p.hi - p.lo) / 2) ** 2
    z = normal_quantile(level)
    variance, se = h2 * var_u, h2 * se_u
    return VarianceEstimate(
        n_a, n_b, float(p.declared.mean_from_u(mean_u)), variance,
        min(max(variance, 0.0), h2), se, variance - z * se, variance + z * se, float(level),
    )  # fmt: skip


def population_variance(proto: Any, values: ArrayLike) -> float:
    """What (20.28) targets: (1/n)Σ(x − x̄)² of the values (declared units)."""
    x = mean_protocol(proto).domain.check(proto.name, values)
    return float(np.var(x))


def split_variance_variance(proto: Any, values: ArrayLike, share: float = 0.5) -> float:
    """Var of (20.28) on these values to first order (math (20.30)), in declared units."""
    p = mean_protocol(proto)
    u = 2.0 * p.declared.t_of(p.domain.check(p.name, values)) - 1.0
    n_a, _ = nm.split_sizes(u.size, share)
    moments = [float(np.mean(u**k)) for k in (1, 2, 3, 4)]
    h2 = ((p.hi - p.lo) / 2) ** 2
    return h2 * h2 * nm.split_variance_variance(p.unit_variance(), u.size, n_a, moments)


def perturb_split(
    proto: Any, values: ArrayLike, rng: Any, share: float = 0.5
) -> tuple[NDArray, NDArray]:
    """Honest reports of a split collection (simulation): a random split (:func:`split_users`),
    group A's reports of x with ``proto``, group B's of the centred squares with
    :func:`square_protocol`; each user reports once, with a fresh memo."""
    p = mean_protocol(proto)
    x = p.domain.check(p.name, values)
    gen = np.random.default_rng(rng)
    in_a = split_users(x.size, gen, share)
    sq = square_protocol(p)
    a = p.perturb(x[in_a], p.new_memo(int(in_a.sum())), gen)
    b = sq.perturb(centred_squares(p, x[~in_a]), sq.new_memo(int((~in_a).sum())), gen)
    return a, b
