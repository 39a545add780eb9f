"""Mixed multidimensional collection: numeric and categorical attributes of the same users
(docs/math.md §20.10; docs/mixed.md).

Every user holds d attributes, some numeric (each with its declared range), some categorical.
Four methods:

- **sampling** (Wang et al., ICDE 2019, §IV): each user picks k = max(1, min(d, ⌊ε/2.5⌋))
  attributes uniformly without replacement and reports each at ε/k; the aggregator scales each
  attribute's sum by d/k over n (math (20.23));
- **SPL**: every user reports every attribute at ε/d (estimate over all n users);
- **SMP**: every user reports one attribute, dealt by an exactly balanced random partition, with
  the whole budget; the estimate is the mean over the attribute's reporters (math (20.24));
- **adaptive** (ALLOMFREE extended to numbers): SMP where each attribute takes the mechanism of
  least worst-case variance at its budget: for a categorical attribute ALLOMFREE's rule
  (GRR or OUE one-shot, L-GRR or L-OSUE over time, math §7), for a numeric one HM one-shot
  (math §20.7) and, over τ epochs, the memoized form (L-1BitMean, L-PM, L-HM) of least
  worst-case time-average variance (20.21) at the horizon among those its ε1 allows (20.18).

One-shot budgets are ``eps``; over time ``eps_perm`` and ``eps_1`` (each attribute's chain at
the method's share). Users are simulated through :class:`longldp.simulate.Population`, one
reporting group per attribute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import numeric as nm
from longldp.protocols import get_protocol_class, protocol
from longldp.protocols.mechanism import Mechanism
from longldp.simulate import Population

OWNER = "mixed"
METHODS = ("sampling", "SPL", "SMP", "adaptive")
#: The numeric two-round forms the adaptive choice picks among, by memo mechanism.
NUMERIC_CHAINS = {"Duchi": "L-1BitMean", "PM": "L-PM", "HM": "L-HM"}


@dataclass(frozen=True)
class NumericAttribute:
    """A numeric attribute and its declared range [lo, hi]."""

    name: str
    lo: float
    hi: float

    def __post_init__(self) -> None:
        nm.numeric_range(f"{OWNER} attribute {self.name!r}", self.lo, self.hi)


@dataclass(frozen=True)
class CategoricalAttribute:
    """A categorical attribute over [0, k)."""

    name: str
    k: int

    def __post_init__(self) -> None:
        check.integer(f"{OWNER} attribute {self.name!r}", "k", self.k, minimum=2)


Attribute = NumericAttribute | CategoricalAttribute


@dataclass(frozen=True)
class MixedCollection:
    """One mixed collection's plan: its attributes, method and budget (module docstring)."""

    attributes: tuple[Attribute, ...]
    method: str = "adaptive"
    eps: float | None = None
    eps_perm: float | None = None
    eps_1: float | None = None
    horizon: int = 1
    numeric: str = "HM"
    categorical: str = "OUE"
    engine: str = "per-user"
    protos: tuple[Mechanism, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        attrs = tuple(self.attributes)
        if not attrs or not all(
            isinstance(a, (NumericAttribute, CategoricalAttribute)) for a in attrs
        ):
            raise check._fail(
                OWNER, "attributes", "NumericAttribute or CategoricalAttribute objects, >= 1",
                check.Described(f"{len(attrs)} given"),
            )  # fmt: skip
        object.__setattr__(self, "attributes", attrs)
        object.__setattr__(self, "method", _method(self.method))
        if (self.eps is None) == (self.eps_perm is None):
            raise check._fail(OWNER, "budget", "'eps' (one-shot) or 'eps_perm' with 'eps_1'",
                              check.Described("both or neither"))  # fmt: skip
        if self.eps is not None:
            object.__setattr__(self, "eps", check.budget(OWNER, "eps", self.eps))
        else:
            if self.eps_1 is None:
                raise check._fail(OWNER, "eps_1", "given with 'eps_perm'", None)
            e, e1 = check.chain_budgets(OWNER, self.eps_perm, self.eps_1)
            object.__setattr__(self, "eps_perm", e)
            object.__setattr__(self, "eps_1", e1)
        check.integer(OWNER, "horizon", self.horizon, minimum=1)
        object.__setattr__(self, "protos", tuple(self._plan()))

    # ------------------------------------------------------------------ the plan
    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.attributes)

    @property
    def longitudinal(self) -> bool:
        """Reports over time through two-round forms (a budget ε∞, ε1)."""
        return self.eps is None

    @property
    def k_sampled(self) -> int:
        """Attributes each user reports: Wang et al.'s k for sampling, d for SPL, 1 otherwise."""
        if self.method == "sampling":
            return nm.sampled_attributes(
                self.eps if self.eps is not None else self.eps_perm, self.d
            )
        return self.d if self.method == "SPL" else 1

    def _share(self) -> float:
        return 1.0 / self.k_sampled

    def _plan(self) -> list[Mechanism]:
        share = self._share()
        out = []
        for a in self.attributes:
            if self.longitudinal:
                e, e1 = self.eps_perm * share, self.eps_1 * share  # type: ignore[operator]
                out.append(self._chain_for(a, e, e1))
            else:
                out.append(self._one_shot_for(a, self.eps * share))  # type: ignore[operator]
        return out

    def _one_shot_for(self, a: Attribute, eps: float) -> Mechanism:
        if isinstance(a, NumericAttribute):
            name = nm.best_mechanism(eps) if self.method == "adaptive" else self.numeric
            return protocol(name, eps=eps, lo=a.lo, hi=a.hi)
        if self.method == "adaptive":  # ALLOMFREE's rule one-shot: the smaller V* of GRR, OUE
            cands = [protocol(n, k=a.k, eps=eps) for n in ("GRR", "OUE")]
            return min(cands, key=lambda p: p.approx_variance(1))
        return protocol(self.categorical, k=a.k, eps=eps)

    def _chain_for(self, a: Attribute, eps_perm: float, eps_1: float) -> Mechanism:
        if isinstance(a, NumericAttribute):
            if self.method == "adaptive":
                return numeric_chain_choice(a.lo, a.hi, eps_perm, eps_1, self.horizon)
            name = NUMERIC_CHAINS.get(self.numeric, self.numeric)
            return protocol(name, eps_perm=eps_perm, eps_1=eps_1, lo=a.lo, hi=a.hi)
        if self.method == "adaptive":
            from longldp.apps.multidim import allomfree_protocol

            return allomfree_protocol(a.k, eps_perm, eps_1, calibration="exact")
        name = self.categorical if get_protocol_class(self.categorical).longitudinal else "L-OSUE"
        return protocol(name, k=a.k, eps_perm=eps_perm, eps_1=eps_1)

    # ------------------------------------------------------------------ the users
    def assign(self, n: int, rng: Any) -> list[NDArray[np.int64]]:
        """Each attribute's reporters: all users (SPL), a balanced partition (SMP, adaptive),
        or each user's k attributes drawn uniformly without replacement (sampling)."""
        n = check.integer(OWNER, "n", n, minimum=self.d)
        gen = np.random.default_rng(rng)
        if self.method == "SPL":
            return [np.arange(n, dtype=np.int64)] * self.d
        if self.method in ("SMP", "adaptive"):
            order = gen.permutation(n)
            return [np.sort(part).astype(np.int64) for part in np.array_split(order, self.d)]
        k = self.k_sampled
        picks = np.argsort(gen.random((n, self.d)), axis=1)[:, :k]  # k distinct per user
        return [np.flatnonzero((picks == j).any(axis=1)).astype(np.int64) for j in range(self.d)]

    def collect(self, columns: Sequence[ArrayLike], rng: Any) -> MixedResult:
        """One timestamp: ``columns`` holds one array per attribute (n users each)."""
        return self.collect_over_time([columns], rng)

    def collect_over_time(self, timestamps: Sequence[Sequence[ArrayLike]], rng: Any) -> MixedResult:
        """τ timestamps, each one array per attribute; the reporting groups (and their memos)
        are kept across them. Every estimate is in the attribute's units (numeric: the mean;
        categorical: the frequencies)."""
        steps = list(timestamps)
        if not steps:
            raise check._fail(OWNER, "timestamps", "at least one", check.Described("none"))
        n = len(np.asarray(steps[0][0]))
        gen = np.random.default_rng(rng)
        groups_users = self.assign(n, gen)
        pop = Population(n, self.engine, OWNER)
        groups = [
            pop.group(p, users, a.name)
            for p, users, a in zip(self.protos, groups_users, self.attributes, strict=True)
        ]
        estimates: list[list[NDArray]] = [[] for _ in range(self.d)]
        truth: list[list[NDArray]] = [[] for _ in range(self.d)]
        for cols in steps:
            if len(cols) != self.d:
                raise check._fail(OWNER, "columns", f"{self.d} arrays per timestamp",
                                  check.Described(f"{len(cols)}"))  # fmt: skip
            vals = [np.asarray(c)[u] for c, u in zip(cols, groups_users, strict=True)]
            supports = pop.support(vals, gen)
            for j, (p, g, a) in enumerate(zip(self.protos, groups, self.attributes, strict=True)):
                estimates[j].append(self._estimate(p, supports[j], g.n, n, a))
                truth[j].append(_truth(np.asarray(cols[j]), a))
        return MixedResult(
            self,
            [np.stack(e) for e in estimates],
            [np.stack(t) for t in truth],
            [g.n for g in groups],
            pop.budget()["epsilon"] if self.longitudinal else None,
            n,
        )

    def _estimate(self, p: Mechanism, support: NDArray, n_j: int, n: int, a: Attribute) -> NDArray:
        raw = np.asarray(p.estimate(support, n_j), dtype=np.float64)  # type: ignore[attr-defined]
        if self.method != "sampling":
            return raw
        scale = n_j * self.d / (n * self.k_sampled)  # Wang et al.: Σ over reporters × d/(nk)
        if isinstance(a, NumericAttribute):  # the mean in u units is what scales
            u = 2.0 * (raw - a.lo) / (a.hi - a.lo) - 1.0
            return a.lo + (a.hi - a.lo) * (scale * u + 1.0) / 2.0
        return scale * raw

    # ------------------------------------------------------------------ analytic MSE
    def expected_mse(self, columns: Sequence[ArrayLike]) -> NDArray[np.float64]:
        """Per attribute, the expected squared error of one timestamp's estimate on these data,
        over the reports and the assignment (numeric: of the mean, declared units; categorical:
        averaged over its k values): (20.23) for sampling, (20.24) and (7.2) for SMP and
        adaptive, the mechanism's variance over n for SPL."""
        cols = [np.asarray(c) for c in columns]
        n = cols[0].size
        out = []
        for p, a, c in zip(self.protos, self.attributes, cols, strict=True):
            var, target2, scale = _per_user_moments(p, c, a)
            if self.method == "SPL":
                out.append(scale * var.mean() / n)
            elif self.method == "sampling":
                ratio = self.d / self.k_sampled
                out.append(scale * float(np.mean(ratio * (var + target2) - target2)) / n)
            else:
                n_j = n / self.d
                out.append(scale * var.mean() / n_j + _spread(c, a) * (n - n_j) / (n_j * (n - 1)))
        return np.array(out)


def _method(value: Any) -> str:
    allowed = {m.lower(): m for m in METHODS}
    key = check.choice(OWNER, "method", value, tuple(allowed))
    return allowed[key]


def numeric_chain_choice(
    lo: float, hi: float, eps_perm: float, eps_1: float, horizon: int
) -> Mechanism:
    """The numeric two-round form of least worst-case time-average variance (20.21) at the
    horizon, among L-1BitMean, L-PM, L-HM whose ε1 is allowed (20.18); ties to the first."""
    best, best_v = None, math.inf
    u = np.linspace(-1.0, 1.0, 201)
    for memo, name in NUMERIC_CHAINS.items():
        if not nm.eps_1_allowed(memo, eps_perm, eps_1):
            continue
        s = nm.default_grid(memo, eps_perm)
        v1, vtot = nm.chain_variances(memo, eps_perm, eps_1, s, u)
        worst = float(np.max(privacy.time_average_variance(vtot, v1, horizon)))
        if worst < best_v - 1e-15:
            best, best_v = name, worst
    assert best is not None  # L-1BitMean allows every ε1 < ε∞
    return protocol(best, eps_perm=eps_perm, eps_1=eps_1, lo=lo, hi=hi)


def _truth(values: NDArray, a: Attribute) -> NDArray[np.float64]:
    if isinstance(a, NumericAttribute):
        return np.array([float(np.mean(values))])
    return np.bincount(values.astype(np.int64), minlength=a.k) / values.size


def _per_user_moments(p: Mechanism, c: NDArray, a: Attribute) -> tuple[NDArray, NDArray, float]:
    """(per user: the variance of its report's unbiased contribution, and the square of what it
    estimates; the factor to the attribute's units). Numeric: V(u_i) and u_i² in u units, the
    factor ((hi − lo)/2)²; categorical: averaged over the k values, (hold + (k − 1)·other)/k
    and 1/k (math (1.2) per user), factor 1."""
    if isinstance(a, NumericAttribute):
        u = 2.0 * (c.astype(np.float64) - a.lo) / (a.hi - a.lo) - 1.0
        if p.longitudinal:  # every report of a two-round form is Duchi's channel at ε1
            kappa = nm.round2_slope(p.eps_1)  # type: ignore[attr-defined]
            var = 1.0 / kappa**2 - u * u
        else:
            var = p.unit_variance().at(u)  # type: ignore[attr-defined]
        return var, u * u, ((a.hi - a.lo) / 2) ** 2
    P1, P0 = p.P1, p.P0  # type: ignore[attr-defined]
    hold = P1 * (1 - P1) / (P1 - P0) ** 2
    other = P0 * (1 - P0) / (P1 - P0) ** 2
    return (
        np.full(c.size, (hold + (a.k - 1) * other) / a.k),
        np.full(c.size, 1.0 / a.k),
        1.0,
    )


def _spread(c: NDArray, a: Attribute) -> float:
    """The finite-population variance the reporters' subset adds (per unit of
    (n − n_j)/(n_j(n − 1))): σ² of the values, or the mean over v of f_v(1 − f_v)."""
    if isinstance(a, NumericAttribute):
        return float(c.astype(np.float64).var())
    f = np.bincount(c.astype(np.int64), minlength=a.k) / c.size
    return float(np.mean(f * (1 - f)))


@dataclass(frozen=True)
class MixedResult:
    """Estimates and truth per attribute, (τ, …) each; reporters per attribute; spent ε per
    user (over time) or None."""

    collection: MixedCollection
    estimates: list[NDArray[np.float64]]
    truth: list[NDArray[np.float64]]
    reporters: list[int]
    spent_epsilon: NDArray[np.float64] | None
    n: int

    def squared_errors(self) -> NDArray[np.float64]:
        """(τ, d): per timestamp and attribute, the squared error of the mean (numeric) or the
        mean squared error over the k values (categorical)."""
        return np.stack(
            [
                np.mean((e - t) ** 2, axis=1)
                for e, t in zip(self.estimates, self.truth, strict=True)
            ],
            axis=1,
        )

    def normalized_errors(self) -> NDArray[np.float64]:
        """:meth:`squared_errors` with each numeric attribute's divided by its range² (so the
        attributes of different units average)."""
        scale = np.array([
            (a.hi - a.lo) ** 2 if isinstance(a, NumericAttribute) else 1.0
            for a in self.collection.attributes
        ])  # fmt: skip
        return self.squared_errors() / scale[None, :]
