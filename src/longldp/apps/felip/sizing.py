"""FELIP's grid sizes from the query selectivity, and the frequency oracle of every grid.

Source: docs/math.md §8.4 (objectives), §8.5 (oracle per grid), §8.10
(ambiguities and the options offered here), §8.11 (longitudinal chains). Sizes minimise the
squared non-uniformity error plus the noise variance (HDG, Yang et al. 2020, §5; [C]
``choose_granularity.py``). V(k) is the variance of one cell's frequency with k cells and
n/m users: V(k) = m·u(k)/n where u(k) = n·V* is the oracle's unit variance (math §1.2,
``approx_variance(1)``), so one-shot GRR gives V_GRR(k) = m(e^ε + k − 2)/(n(e^ε − 1)²), OUE gives
V_OUE = 4m·e^ε/(n(e^ε − 1)²), and a longitudinal chain its V* (math §8.11).

Objectives, r_a the expected fraction of D_a a query covers, α1 = 0.7, α2 = 0.03:

- 1-D numerical:  E1(x) = (α1/x)² + x·r_a·V(x);
- 2-D numerical:  E2(x, y) = (2α2(x·r_a + y·r_b)/(x·y))² + (x·r_a)(y·r_b)·V(x·y);
- numerical × categorical (y = D_b, r_b = 1/D_b): (2α2·r_b/x)² + x·r_a·D_b·r_b·V(x·D_b);
- categorical × categorical: (D_a, D_b).

We minimise over the integers (2 <= x <= D_a, math §8.10.6: at least 2 cells per numerical axis)
by brute force instead of [C]'s sympy ``nsolve``. When V depends on k (GRR, L-GRR) the search
skips every size whose variance term alone, bounded below by x·r·V(k_min), exceeds the error
at the smallest size; exact because those V are non-decreasing in k (checked in the tests).

Options (math §8.4, §8.10):

- ``size_rule`` chooses, for each grid, among the optima of the candidate oracles:
  ``"error"`` (default, [R]) keeps the optimum with the smallest E; ``"variance"`` ([C])
  keeps the candidate with the smallest V at its own optimum. At n = 10⁶, d = 6, ε = 1, r = 0.5
  the 2-D rules disagree: [C]'s keeps GRR (3, 3), the E rule OUE (4, 4).
- ``unify`` makes one g2 per numerical attribute from its d − 1 pair sizes: ``"code"``
  (default, reproduces [C]) max(2, ⌊mean⌋ − 1), ``"mean"`` max(2, round(mean)).
- The 1-D size is then raised to g2 if smaller (nesting, math §8.3 [R]).
- Oracle of a grid with k cells (math §8.5): the candidate with the smallest V(k); ties go to the
  later candidate, so with ("GRR", "OUE") GRR is used exactly when k < 3e^ε + 2.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.felip.grids import CATEGORICAL, OWNER, FelipSchema
from longldp.privacy import Budget
from longldp.protocols import FrequencyOracle, get_protocol_class, protocol

#: One-shot FELIP: GRR or OUE chosen per grid (math §8.5).
ADAPTIVE = ("GRR", "OUE")
#: An ALLOMFREE-style per-grid choice among longitudinal chains (math §8.11 optional extension).
ADAPTIVE_LONGITUDINAL = ("L-GRR", "L-OSUE")
SIZE_RULES = ("error", "variance")
UNIFY_MODES = ("code", "mean")
#: HDG's non-uniformity constants (math §8.1; Yang et al. 2020).
ALPHA1 = 0.7
ALPHA2 = 0.03
_UNSUPPORTED = {"DBitFlipPM"}


@lru_cache(maxsize=65536)
def _build(name: str, k: int, eps: float, eps_1: float | None, calibration: str) -> FrequencyOracle:
    cls = get_protocol_class(name)
    params: dict[str, Any] = {"k": k, **Budget.at_level(eps, eps_1, cls.budget_params).given()}
    fields = {f for f in cls.__dataclass_fields__ if cls.__dataclass_fields__[f].init}  # type: ignore[attr-defined]
    if "calibration" in fields:
        params["calibration"] = calibration
    return protocol(name, **params)


@lru_cache(maxsize=65536)
def _unit(name: str, k: int, eps: float, eps_1: float | None, calibration: str) -> float:
    return _build(name, k, eps, eps_1, calibration).approx_variance(1)


@dataclass(frozen=True)
class OracleSpec:
    """Which frequency oracle(s) FELIP's grids may use, and their budget.

    Build it with :func:`oracle_spec`. ``candidates`` has one name (every grid uses it) or
    several (each grid takes the one with the smallest variance at its cell count).

    Attributes
    ----------
    candidates : tuple of str
        Canonical registry names, all one-shot or all longitudinal.
    eps : float
        ε of a one-shot oracle, or ε∞ of a chain.
    eps_1 : float or None
        ε1 of a chain (None for one-shot oracles).
    calibration : str
        L-GRR / LOLOHA round-2 calibration (math §3.2).
    """

    candidates: tuple[str, ...]
    eps: float
    eps_1: float | None
    calibration: str = "exact"
    longitudinal: bool = field(init=False)

    def __post_init__(self) -> None:
        kinds = {get_protocol_class(c).longitudinal for c in self.candidates}
        object.__setattr__(self, "longitudinal", kinds == {True})

    def build(self, name: str, k: int) -> FrequencyOracle:
        """Protocol ``name`` over k cells at this budget (cached)."""
        return _build(name, int(k), self.eps, self.eps_1, self.calibration)

    def unit_variance(self, name: str, k: int) -> float:
        """u(k) = n·V* of ``name`` with k cells: P0(1 − P0)/(P1 − P0)² (math §1.2)."""
        return _unit(name, int(k), self.eps, self.eps_1, self.calibration)

    def constant_in_k(self, name: str) -> bool:
        """True when u(k) does not depend on k (UE chains, OUE, local hashing)."""
        vals = {self.unit_variance(name, k) for k in (2, 3, 97)}
        return len(vals) == 1

    def variance_curve(self, name: str, k: np.ndarray) -> np.ndarray:
        """u(k) for an array of cell counts."""
        k = np.asarray(k, dtype=np.int64)
        if self.constant_in_k(name):
            return np.full(k.shape, self.unit_variance(name, 2))
        uniq, inv = np.unique(k, return_inverse=True)
        vals = np.array([self.unit_variance(name, int(x)) for x in uniq])
        return vals[inv].reshape(k.shape)

    def choose(self, k: int) -> str:
        """The candidate with the smallest V at k cells; ties go to the later one (math §8.5)."""
        best = self.candidates[0]
        for name in self.candidates[1:]:
            if self.unit_variance(name, k) <= self.unit_variance(best, k):
                best = name
        return best


def oracle_spec(
    oracle: str | Sequence[str],
    eps: float,
    eps_1: float | None = None,
    alpha: float | None = None,
    calibration: str = "exact",
) -> OracleSpec:
    """Validate an oracle choice and its budget.

    Parameters
    ----------
    oracle : str or sequence of str
        ``"adaptive"`` (one-shot GRR or OUE per grid, FELIP's own rule), ``"adaptive-longitudinal"``
        (L-GRR or L-OSUE per grid), one registry name (``"OUE"``, ``"L-OSUE"``, ``"OLOLOHA"``,
        ...), or a sequence of candidates of one kind.
    eps : float
        ε (one-shot) or ε∞ (chains).
    eps_1, alpha : float, optional
        Chains only: ε1, or α with ε1 = α·ε∞ (give one).
    calibration : {"exact", "paper"}, default="exact"
    """
    if isinstance(oracle, str):
        key = oracle.strip().lower()
        names: tuple[str, ...] = (
            ADAPTIVE
            if key == "adaptive"
            else ADAPTIVE_LONGITUDINAL
            if key == "adaptive-longitudinal"
            else (oracle,)
        )
    elif isinstance(oracle, Sequence) and oracle and all(isinstance(o, str) for o in oracle):
        names = tuple(oracle)
    else:
        raise ValueError(
            f"{OWNER}: 'oracle' must be a protocol name, 'adaptive', 'adaptive-longitudinal' or "
            f"a sequence of names; got {oracle!r}."
        )
    try:
        classes = [get_protocol_class(o) for o in names]
    except ValueError as exc:
        raise ValueError(f"{OWNER}: 'oracle': {exc}") from None
    canon = tuple(c.name for c in classes)
    if any(c in _UNSUPPORTED for c in canon):
        raise ValueError(f"{OWNER}: 'oracle' must report one cell per user; got {canon}.")
    forms = {tuple(c.budget_params) for c in classes}
    if len(forms) != 1:
        raise ValueError(
            f"{OWNER}: 'oracle' candidates must be all one-shot or all chains of one budget "
            f"form; got {canon}."
        )
    calibration = check.choice(OWNER, "calibration", calibration, ("exact", "paper"))
    # ``eps`` is the level: ε of a one-shot oracle, ε∞ of a chain; the one parser does the rest
    (takes,) = forms
    level = {"eps": eps} if takes == ("eps",) else {"eps_perm": eps}
    budget = Budget(eps_1=eps_1, alpha=alpha, **level).parameters(
        f"{OWNER}: {'/'.join(canon)}", takes
    )
    return OracleSpec(
        canon, budget.get("eps", budget.get("eps_perm")), budget.get("eps_1"), calibration
    )


def grr_threshold(eps: float) -> float:
    """3e^ε + 2: one-shot GRR beats OUE on a grid of k cells iff k < this (math §8.5)."""
    return 3.0 * math.exp(check.positive_float(OWNER, "eps", eps)) + 2.0


# ---------------------------------------------------------------------------------- objectives


@dataclass(frozen=True)
class SizeChoice:
    """The optimum of one grid's objective for one candidate oracle."""

    oracle: str
    sizes: tuple[int, ...]
    error: float
    variance: float


def _scale(spec: OracleSpec, name: str, n: int, m: int):
    """k ↦ V(k) = m·u(k)/n, vectorized."""
    return lambda k: m * spec.variance_curve(name, k) / n


def optimum_1d(
    spec: OracleSpec, name: str, n: int, m: int, domain: int, r: float, alpha1: float = ALPHA1
) -> SizeChoice:
    """argmin over 2 <= x <= D of E1(x) = (α1/x)² + x·r·V(x) (math §8.4)."""
    V = _scale(spec, name, n, m)
    lo = min(2, domain)
    xs = np.arange(lo, domain + 1)
    if not spec.constant_in_k(name):
        e_ref = (alpha1 / lo) ** 2 + lo * r * V(np.array([lo]))[0]
        xs = xs[xs * r * V(np.array([lo]))[0] <= e_ref]
    err = (alpha1 / xs) ** 2 + xs * r * V(xs)
    i = int(np.argmin(err))
    x = int(xs[i])
    return SizeChoice(name, (x,), float(err[i]), float(V(np.array([x]))[0]))


def optimum_2d(
    spec: OracleSpec,
    name: str,
    n: int,
    m: int,
    domains: tuple[int, int],
    r: tuple[float, float],
    kinds: tuple[str, str],
    alpha2: float = ALPHA2,
) -> SizeChoice:
    """The 2-D optimum of math §8.4 for a pair (numerical/categorical axes handled)."""
    V = _scale(spec, name, n, m)
    (da, db), (ra, rb) = domains, r
    cat = (kinds[0] == CATEGORICAL, kinds[1] == CATEGORICAL)
    if cat[0] and cat[1]:
        return SizeChoice(name, (da, db), math.nan, float(V(np.array([da * db]))[0]))
    if cat[0] or cat[1]:
        # x on the numerical axis, the categorical one keeps its D cells (y = D_c, r_c = 1/D_c).
        dn, rn, dc = (db, rb, da) if cat[0] else (da, ra, db)
        xs = np.arange(min(2, dn), dn + 1)

        def err_nc(x: np.ndarray) -> np.ndarray:
            return (2 * alpha2 / (dc * x)) ** 2 + x * rn * V(x * dc)

        if not spec.constant_in_k(name):
            vmin = V(np.array([xs[0] * dc]))[0]
            xs = xs[xs * rn * vmin <= err_nc(xs[:1])[0]]
        err = err_nc(xs)
        i = int(np.argmin(err))
        x = int(xs[i])
        sizes = (dc, x) if cat[0] else (x, dc)
        return SizeChoice(name, sizes, float(err[i]), float(V(np.array([x * dc]))[0]))
    xs = np.arange(min(2, da), da + 1)[:, None]
    ys = np.arange(min(2, db), db + 1)[None, :]

    def err_nn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (2 * alpha2 * (x * ra + y * rb) / (x * y)) ** 2 + (x * ra) * (y * rb) * V(x * y)

    X, Y = np.broadcast_arrays(xs, ys)
    X, Y = X.ravel(), Y.ravel()
    if not spec.constant_in_k(name):
        vmin = V(np.array([X[0] * Y[0]]))[0]
        keep = X * Y * ra * rb * vmin <= err_nn(X[:1], Y[:1])[0]
        X, Y = X[keep], Y[keep]
    err = err_nn(X, Y)
    i = int(np.argmin(err))
    x, y = int(X[i]), int(Y[i])
    return SizeChoice(name, (x, y), float(err[i]), float(V(np.array([x * y]))[0]))


def _pick(choices: list[SizeChoice], rule: str) -> SizeChoice:
    """Among candidate optima: smallest E ("error") or smallest own V ("variance"); ties later."""
    key = "error" if rule == "error" else "variance"
    best = choices[0]
    for c in choices[1:]:
        a, b = getattr(c, key), getattr(best, key)
        if (math.isnan(b) and not math.isnan(a)) or a <= b:
            best = c
    return best


@dataclass(frozen=True)
class GridSizes:
    """Final sizes and what produced them.

    Attributes
    ----------
    g1, g2 : tuple of int
        Per attribute: cells of its 1-D grid (0 = none) and of its axis in the 2-D grids.
    one_d : dict
        Attribute index → the chosen 1-D :class:`SizeChoice` (before nesting raised it).
    pairs : dict
        (a, b) → the chosen 2-D :class:`SizeChoice` (before unification).
    m : int
        Number of grids the sizes assume.
    """

    g1: tuple[int, ...]
    g2: tuple[int, ...]
    one_d: dict[int, SizeChoice]
    pairs: dict[tuple[int, int], SizeChoice]
    m: int


def grid_count(schema: FelipSchema) -> int:
    """m = #1-D grids + C(d, 2) (math §8.2.1)."""
    d = schema.d
    ones = d if d == 1 else sum(k != CATEGORICAL for k in schema.kinds)
    return ones + d * (d - 1) // 2


def choose_sizes(
    schema: FelipSchema,
    n: int,
    spec: OracleSpec,
    selectivity: Sequence[float],
    *,
    size_rule: str = "error",
    unify: str = "code",
    alpha1: float = ALPHA1,
    alpha2: float = ALPHA2,
) -> GridSizes:
    """All grid sizes of math §8.4 for n users (sizes are fixed before the first report).

    Parameters
    ----------
    schema : FelipSchema
    n : int
        Number of users.
    spec : OracleSpec
    selectivity : sequence of float
        r_a in (0, 1] per attribute (categorical attributes use 1/D_a whatever is given).
    size_rule : {"error", "variance"}, default="error"
    unify : {"code", "mean"}, default="code"
    alpha1, alpha2 : float
        HDG's non-uniformity constants.
    """
    n = check.integer(OWNER, "n", n, minimum=1)
    size_rule = check.choice(OWNER, "size_rule", size_rule, SIZE_RULES)
    unify = check.choice(OWNER, "unify", unify, UNIFY_MODES)
    alpha1 = check.positive_float(OWNER, "alpha1", alpha1)
    alpha2 = check.positive_float(OWNER, "alpha2", alpha2)
    d, kinds, doms = schema.d, schema.kinds, schema.domains
    if len(selectivity) != d:
        raise ValueError(f"{OWNER}: 'selectivity' needs one value per attribute ({d}).")
    r = [
        1.0 / doms[a]
        if kinds[a] == CATEGORICAL
        else check.positive_float(OWNER, f"selectivity[{a}]", selectivity[a], upper=1.0 + 1e-12)
        for a in range(d)
    ]
    m = grid_count(schema)
    if m > n:
        raise ValueError(f"{OWNER}: 'n' must be at least the number of grids m = {m}; got {n}.")
    pairs: dict[tuple[int, int], SizeChoice] = {}
    for a, b in itertools.combinations(range(d), 2):
        opts = [
            optimum_2d(
                spec, c, n, m, (doms[a], doms[b]), (r[a], r[b]), (kinds[a], kinds[b]), alpha2
            )
            for c in spec.candidates
        ]
        pairs[(a, b)] = _pick(opts, size_rule)
    g2 = []
    for a in range(d):
        if kinds[a] == CATEGORICAL:
            g2.append(doms[a])
            continue
        own = [c.sizes[pair.index(a)] for pair, c in pairs.items() if a in pair]
        if not own:
            g2.append(min(2, doms[a]))
            continue
        mean = sum(own) / len(own)
        size = math.floor(mean) - 1 if unify == "code" else math.floor(mean + 0.5)
        g2.append(min(doms[a], max(2, size)))
    g1, one_d = [], {}
    for a in range(d):
        if kinds[a] == CATEGORICAL:
            g1.append(doms[a] if d == 1 else 0)  # a lone categorical attribute: one cell a value
            continue
        opts = [optimum_1d(spec, c, n, m, doms[a], r[a], alpha1) for c in spec.candidates]
        one_d[a] = _pick(opts, size_rule)
        g1.append(max(one_d[a].sizes[0], g2[a]) if d > 1 else one_d[a].sizes[0])
    if d == 1:
        g2 = [g1[0]]  # no 2-D grid: the "2-D partition" is the 1-D grid itself
    return GridSizes(tuple(g1), tuple(g2), one_d, pairs, m)


__all__ = [
    "ADAPTIVE",
    "ADAPTIVE_LONGITUDINAL",
    "ALPHA1",
    "ALPHA2",
    "SIZE_RULES",
    "UNIFY_MODES",
    "GridSizes",
    "OracleSpec",
    "SizeChoice",
    "choose_sizes",
    "grid_count",
    "grr_threshold",
    "optimum_1d",
    "optimum_2d",
    "oracle_spec",
]
