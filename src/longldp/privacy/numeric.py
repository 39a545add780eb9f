"""Privacy math of the numeric mechanisms: one formula, one place (docs/math.md §20).

Pure functions of the budget (scalars; the few functions of a value broadcast over arrays):
the parameters every sampler reads, the exact per-report variances, the privacy of the
memoizing two-round forms and their accounting. The samplers and estimators that use them are
in :mod:`longldp.protocols.numeric`.

Coordinates (math §20.1). A value x of a declared range [lo, hi] is mapped to
``t = (x − lo)/(hi − lo)`` in [0, 1] and ``u = 2t − 1`` in [−1, 1]. Laplace, Duchi, PM and HM
are written in u, SW and 1BitMean in t; every variance here is in u units, as the quadratic
:class:`UnitVariance` ``V(u) = v0 + v1·u + v2·u²`` of one debiased report (multiply by
((hi − lo)/2)² for the declared units).

References
----------
[DUC18] Duchi, Jordan, Wainwright, "Minimax optimal procedures for locally private
        estimation", JASA 113(521), 2018 (the one-dimensional mechanism).
[WAN19] Wang, Xiao, Yang, Zhao, Hui, Shin, Shin, Yu, "Collecting and analyzing multidimensional
        data with local differential privacy", ICDE 2019 (PM, HM, sampling of attributes).
[LI20]  Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić, "Estimating numerical distributions under
        local differential privacy", SIGMOD 2020 (Square Wave, EMS).
[DIN17] Ding, Kulkarni, Yekhanin, "Collecting telemetry data privately", NeurIPS 2017
        (1BitMean, α-point rounding, memoization, output perturbation).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import UNIFORM_GRID, channel_epsilon, drawn, spent_epsilon

#: The one-shot numeric mechanisms, in the order the docs list them (math §20.2–§20.6).
ONE_SHOT = ("Laplace", "Duchi", "PM", "HM", "SW", "1BitMean")

#: Mechanisms whose unbiased reports can be memoized by the two-round form of math §20.9
#: (a bounded output with E[y | u] = u): the memo mechanism of L-1BitMean, L-PM, L-HM.
MEMO_MECHANISMS = ("Duchi", "PM", "HM")


def _real(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise check._fail(owner, name, "a finite real number", value)
    x = float(value)
    if not math.isfinite(x):
        raise check._fail(owner, name, "a finite real number", value)
    return x


def numeric_range(owner: str, lo: Any, hi: Any) -> tuple[float, float]:
    """The declared range [lo, hi] of a numeric attribute: finite reals with lo < hi.

    An empty (lo = hi) or reversed (lo > hi) range is refused with one ``ValueError`` line.
    """
    lo_f, hi_f = _real(owner, "lo", lo), _real(owner, "hi", hi)
    if not lo_f < hi_f:
        raise check._fail(
            owner, "range", "a non-empty range lo < hi", check.Described(f"[{lo!r}, {hi!r}]")
        )
    if not math.isfinite(hi_f - lo_f):
        raise check._fail(
            owner, "range", "a range whose width is a finite float",
            check.Described(f"[{lo!r}, {hi!r}]"),
        )  # fmt: skip
    return lo_f, hi_f


# --------------------------------------------------------------------------------------------
# The variance of one debiased report, a quadratic in u (math §20.1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitVariance:
    """Var[û | u] = v0 + v1·u + v2·u² of one debiased report, in u units (math (20.2)).

    Every mechanism of math §20 has a per-report variance of this form, so the variance of the
    mean of n reports on fixed data depends on the data only through m1 = mean(u) and
    m2 = mean(u²): Var[ū̂] = (v0 + v1·m1 + v2·m2)/n.
    """

    v0: float
    v1: float = 0.0
    v2: float = 0.0

    def at(self, u: ArrayLike) -> NDArray[np.float64]:
        """V(u), elementwise."""
        u = np.asarray(u, dtype=np.float64)
        return self.v0 + self.v1 * u + self.v2 * u * u

    def worst(self) -> float:
        """max over u in [−1, 1] of V(u): at an end, or at the vertex of a concave V."""
        cands = [-1.0, 1.0]
        if self.v2 < 0:
            cands.append(min(1.0, max(-1.0, -self.v1 / (2 * self.v2))))
        return float(max(self.at(np.array(cands))))

    def of_mean(self, n: int, m1: ArrayLike, m2: ArrayLike) -> NDArray[np.float64]:
        """Var of the mean of n reports on data with mean(u) = m1 and mean(u²) = m2."""
        m1, m2 = np.asarray(m1, dtype=np.float64), np.asarray(m2, dtype=np.float64)
        return (self.v0 + self.v1 * m1 + self.v2 * m2) / n

    def second_moment(self) -> tuple[float, float, float]:
        """E[û² | u] = V(u) + u² as coefficients (c0, c1, c2), for plug-in moment estimates."""
        return self.v0, self.v1, self.v2 + 1.0


# --------------------------------------------------------------------------------------------
# Laplace (math §20.2)
# --------------------------------------------------------------------------------------------


def laplace_scale(eps: float) -> float:
    """Scale 2/ε of the Laplace noise added to u ∈ [−1, 1] (sensitivity 2)."""
    return 2.0 / check.budget("Laplace", "eps", eps)


def laplace_variance(eps: float) -> UnitVariance:
    """Var[y | u] = 2·(2/ε)² = 8/ε² for every u."""
    b = laplace_scale(eps)
    return UnitVariance(2.0 * b * b)


# --------------------------------------------------------------------------------------------
# Duchi et al. and 1BitMean (math §20.3)
# --------------------------------------------------------------------------------------------


def duchi_slope(eps: float) -> float:
    """tanh(ε/2) = (e^ε − 1)/(e^ε + 1): Pr[y = +C | u] = (1 + u·tanh(ε/2))/2."""
    return math.tanh(check.budget("Duchi", "eps", eps) / 2)


def duchi_bound(eps: float) -> float:
    """C = (e^ε + 1)/(e^ε − 1) = 1/tanh(ε/2): the two outputs are ±C."""
    return 1.0 / duchi_slope(eps)


def duchi_threshold(
    eps: float, u: ArrayLike, out: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """x = 1/2 + tanh(ε/2)·u/2, what the sampler compares its uniform with (output +C when the
    uniform is below x). For uniforms on the 2⁻⁵³ grid, ``w < x`` and ``w < drawn(x)`` are the
    same event, so the sampler skips the rounding and the claims read
    :func:`duchi_probability` = drawn(x) (math §20.12). ``out``: an array of u's shape to write
    x into (the samplers' work arrays); the same two roundings either way."""
    x = np.multiply(np.asarray(u, dtype=np.float64), 0.5 * duchi_slope(eps), out=out)
    x += 0.5
    return x


def duchi_probability(eps: float, u: ArrayLike) -> NDArray[np.float64]:
    """Pr[output +C | u] = (1 + u·tanh(ε/2))/2 ([DUC18]; restated in [WAN19] §III).

    The sampler's own threshold (:func:`duchi_threshold`) as the sampler realizes it
    (⌈x·2⁵³⌉/2⁵³, ``privacy.drawn``, math §16.1); 1BitMean's Pr[bit = 1 | t] is the same
    number at u = 2t − 1 ([DIN17], 1BitMean).
    """
    return drawn_array(duchi_threshold(eps, u))


def drawn_array(p: ArrayLike) -> NDArray[np.float64]:
    """:func:`longldp.privacy.drawn` elementwise: ⌈p·2⁵³⌉/2⁵³, what ``u < p`` realizes."""
    return np.ceil(np.asarray(p, dtype=np.float64) * UNIFORM_GRID) / UNIFORM_GRID


def duchi_variance(eps: float) -> UnitVariance:
    """Var[y | u] = C² − u² (y = ±C with mean u)."""
    c = duchi_bound(eps)
    return UnitVariance(c * c, 0.0, -1.0)


# --------------------------------------------------------------------------------------------
# Piecewise mechanism (math §20.4)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PMParams:
    """PM at ε ([WAN19] §III, the piecewise mechanism; math (20.7)).

    Outputs in [−C, C], density p on [ℓ(u), r(u)] and q elsewhere, with
    ℓ(u) = (C + 1)u/2 − width/2 and r(u) = ℓ(u) + width, width = C − 1. The sampler draws the
    centre piece with probability ``center`` = e^{ε/2}/(e^{ε/2} + 1) as it realizes it
    (``privacy.drawn``) and places the output uniformly in the piece, so p = center/width and
    q = (1 − center)/(C + 1): p/q is e^ε to float precision, and the claims read these values
    (math §16.1, §20.7).
    """

    C: float
    width: float
    center: float
    p: float
    q: float

    def left(self, u: ArrayLike) -> NDArray[np.float64]:
        """ℓ(u), the left end of the high-density piece."""
        return (self.C + 1) / 2 * np.asarray(u, dtype=np.float64) - self.width / 2

    def density(self, u: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        """f(y | u) on [−C, C] (0 outside), from the same p, q, ℓ the sampler inverts."""
        u, y = np.asarray(u, dtype=np.float64), np.asarray(y, dtype=np.float64)
        lft = self.left(u)
        inside = (y >= lft) & (y <= lft + self.width)
        out = np.where(inside, self.p, self.q)
        return np.where(np.abs(y) <= self.C, out, 0.0)


def pm_params(eps: float) -> PMParams:
    """C = (e^{ε/2} + 1)/(e^{ε/2} − 1), width C − 1 = 2/(e^{ε/2} − 1) (from expm1, not by
    subtraction), centre probability e^{ε/2}/(e^{ε/2} + 1) drawn, p and q from them."""
    eps = check.budget("PM", "eps", eps)
    em1 = math.expm1(eps / 2)
    width = 2.0 / em1
    center = drawn(1.0 / (1.0 + math.exp(-eps / 2)))
    c = 1.0 + width
    return PMParams(C=c, width=width, center=center, p=center / width, q=(1.0 - center) / (c + 1))


def pm_variance(eps: float) -> UnitVariance:
    """Var[y | u] = u²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²).

    As [WAN19] §III states it; re-derived in math (20.7).
    """
    eps = check.budget("PM", "eps", eps)
    s, em1 = math.exp(eps / 2), math.expm1(eps / 2)
    return UnitVariance((s + 3) / (3 * em1 * em1), 0.0, 1.0 / em1)


# --------------------------------------------------------------------------------------------
# Hybrid mechanism (math §20.5)
# --------------------------------------------------------------------------------------------


def hm_eps_star() -> float:
    """ε* ≈ 0.6094: below it HM is Duchi's mechanism alone (math (20.9)).

    ε* = 2 ln s*, s* the real root of 3s³ − s² + s − 7 = 0, where PM's variance at u = 0
    equals Duchi's C² ([WAN19] §III prints ε* ≈ 0.61 and a closed form of the same root).
    Solved by Cardano's formula for the one real root.
    """
    # 3s³ − s² + s − 7 = 0 → s = z + 1/9 with z³ + P z + Q = 0.
    a, b, c, d = 3.0, -1.0, 1.0, -7.0
    P = (3 * a * c - b * b) / (3 * a * a)
    Q = (2 * b**3 - 9 * a * b * c + 27 * a * a * d) / (27 * a**3)
    disc = math.sqrt(Q * Q / 4 + P**3 / 27)
    z = math.copysign(abs(-Q / 2 + disc) ** (1 / 3), -Q / 2 + disc) + math.copysign(
        abs(-Q / 2 - disc) ** (1 / 3), -Q / 2 - disc
    )
    return 2 * math.log(z - b / (3 * a))


def hm_beta(eps: float) -> float:
    """Probability of the PM branch: 1 − e^{−ε/2} for ε > ε*, else 0 ([WAN19] §III; math (20.8))."""
    eps = check.budget("HM", "eps", eps)
    return drawn(-math.expm1(-eps / 2)) if eps > hm_eps_star() else 0.0


def hm_variance(eps: float) -> UnitVariance:
    """β·V_PM(u) + (1 − β)·V_Duchi(u): both branches are unbiased (math (20.10)). For ε > ε*
    the u² terms cancel and V = (e^{ε/2}+3)/(3e^{ε/2}(e^{ε/2}−1)) + (e^ε+1)²/(e^{ε/2}(e^ε−1)²)."""
    beta = hm_beta(eps)
    vp, vd = pm_variance(eps), duchi_variance(eps)
    return UnitVariance(beta * vp.v0 + (1 - beta) * vd.v0, 0.0, beta * vp.v2 + (1 - beta) * vd.v2)


# --------------------------------------------------------------------------------------------
# Square wave (math §20.6)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SWParams:
    """SW at ε ([LI20], the square wave mechanism; math (20.11)).

    Outputs in [−b, 1 + b], density p within b of t, q elsewhere. The sampler draws the centre
    piece with probability ``center`` = 2bp as it realizes it (``privacy.drawn``); p and q are
    read from it (p = center/(2b), q = 1 − center: the rest of [−b, 1 + b] has length 1).
    """

    b: float
    center: float
    p: float
    q: float

    def density(self, t: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        """f(y | t) on [−b, 1 + b] (0 outside), from the p, q, b the sampler inverts."""
        t, y = np.asarray(t, dtype=np.float64), np.asarray(y, dtype=np.float64)
        out = np.where(np.abs(y - t) <= self.b, self.p, self.q)
        return np.where((y >= -self.b) & (y <= 1 + self.b), out, 0.0)

    def mean_affine(self) -> tuple[float, float]:
        """(A0, A1) with E[y | t] = A0 + A1·t: A0 = q(1 + 2b)/2, A1 = 2b(p − q) (ours, (20.12))."""
        return self.q * (1 + 2 * self.b) / 2, 2 * self.b * (self.p - self.q)


def sw_params(eps: float) -> SWParams:
    """b = (εe^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)), centre probability 2be^ε/(2be^ε + 1) drawn
    ([LI20]: the b that maximizes the mutual-information bound)."""
    eps = check.budget("SW", "eps", eps)
    e = math.exp(eps)
    # e^ε − 1 − ε and εe^ε − e^ε + 1 lose all digits to cancellation at small ε: series there.
    if eps < 1e-3:
        den = eps * eps / 2 + eps**3 / 6 + eps**4 / 24
        num = eps * eps / 2 + eps**3 / 3 + eps**4 / 8
    else:
        den = math.expm1(eps) - eps
        num = eps * e - math.expm1(eps)
    b = num / (2 * e * den)
    center = drawn(1.0 / (1.0 + 1.0 / (2 * b * e)))
    return SWParams(b=b, center=center, p=center / (2 * b), q=1.0 - center)


def sw_variance(eps: float) -> UnitVariance:
    """Var[û | u] of SW's unbiased mean estimate û = 2(y − A0)/A1 − 1, in u units (ours, (20.13)).

    E[y² | t] = q((1 + b)³ + b³)/3 + (p − q)(2b t² + 2b³/3); Var[y | t] = E[y²] − (A0 + A1 t)²,
    a quadratic in t, re-expressed in u = 2t − 1 and multiplied by (2/A1)².
    """
    sw = sw_params(eps)
    b, p, q = sw.b, sw.p, sw.q
    a0, a1 = sw.mean_affine()
    # Var[y | t] = c0 + c1 t + c2 t²
    c0 = q * ((1 + b) ** 3 + b**3) / 3 + (p - q) * 2 * b**3 / 3 - a0 * a0
    c1 = -2 * a0 * a1
    c2 = (p - q) * 2 * b - a1 * a1
    # t = (u + 1)/2
    k = 4.0 / (a1 * a1)
    return UnitVariance(k * (c0 + c1 / 2 + c2 / 4), k * (c1 / 2 + c2 / 2), k * (c2 / 4))


# --------------------------------------------------------------------------------------------
# Exact channels of piecewise-constant densities over a finite set of inputs (math §20.7)
# --------------------------------------------------------------------------------------------


def _cell_channel(
    edges_of: list[tuple[float, float]], levels: NDArray, breaks: NDArray, lo: float, hi: float
) -> NDArray[np.float64]:
    """Pr[y in cell | input] for densities that are q + (p − q)·1[y ∈ [a_i, b_i]] on [lo, hi]:
    the cells between all the breakpoints, where every input's density is constant."""
    cuts = np.unique(np.clip(np.concatenate([[lo, hi], breaks]), lo, hi))
    left, right = cuts[:-1], cuts[1:]
    mid = (left + right) / 2
    rows = []
    for (a, b), (p, q) in zip(edges_of, levels, strict=True):
        dens = np.where((mid >= a) & (mid <= b), p, q)
        rows.append(dens * (right - left))
    return np.array(rows)


def pm_channel(eps: float, u: ArrayLike) -> NDArray[np.float64]:
    """PM's exact channel over the inputs u: Pr[y in cell | u] on the cells between every
    ℓ(u), r(u) and ±C, where every input's density is constant, so no ratio is lost to the
    cells: its ε is PM's (math §20.4, §20.7)."""
    pm = pm_params(eps)
    lft = np.atleast_1d(pm.left(u))
    pieces = [(float(a), float(a) + pm.width) for a in lft]
    breaks = np.array([x for ab in pieces for x in ab])
    return _cell_channel(pieces, [(pm.p, pm.q)] * len(pieces), breaks, -pm.C, pm.C)


def sw_channel(eps: float, t: ArrayLike) -> NDArray[np.float64]:
    """SW's exact channel over the inputs t, on the cells between every t ± b (math §20.6)."""
    sw = sw_params(eps)
    tt = np.atleast_1d(np.asarray(t, dtype=np.float64))
    pieces = [(float(x) - sw.b, float(x) + sw.b) for x in tt]
    breaks = np.array([x for ab in pieces for x in ab])
    return _cell_channel(pieces, [(sw.p, sw.q)] * len(pieces), breaks, -sw.b, 1 + sw.b)


def duchi_channel(eps: float, u: ArrayLike) -> NDArray[np.float64]:
    """Duchi's channel over the inputs u: columns (−C, +C), from :func:`duchi_probability`."""
    plus = np.atleast_1d(duchi_probability(eps, u))
    return np.stack([1.0 - plus, plus], axis=1)


def hm_channel(eps: float, u: ArrayLike) -> NDArray[np.float64]:
    """HM's exact channel over the inputs u: β times PM's cells, then (1 − β) times Duchi's
    two atoms (math §20.5)."""
    beta = hm_beta(eps)
    atoms = (1.0 - beta) * duchi_channel(eps, u)  # the branch, then Duchi's own draw
    if beta == 0.0:
        return atoms
    return np.concatenate([beta * pm_channel(eps, u), atoms], axis=1)


def memo_channel(mechanism: str, eps_perm: float, u: ArrayLike) -> NDArray[np.float64]:
    """The exact channel of a memo of the two-round forms (Duchi, PM or HM at ε∞) over u."""
    key = check.choice("memo_channel", "mechanism", mechanism, ("duchi", "1bitmean", "pm", "hm"))
    if key in ("duchi", "1bitmean"):
        return duchi_channel(eps_perm, u)
    return pm_channel(eps_perm, u) if key == "pm" else hm_channel(eps_perm, u)


def chain_report_channel(
    mechanism: str, eps_perm: float, eps_1: float, s: int
) -> NDArray[np.float64]:
    """One report of L-1BitMean / L-PM / L-HM over the grid values u_j = 2j/s − 1: columns
    (bit 0, bit 1), Pr[1 | u_j] = Σ_cells Pr[cell | u_j]·(1 + κ·E[y1 | cell])/2, the memo's mean
    taken from its own channel (cell midpoints and atoms), not from the closed form (20.17).
    A value between two grid points has a row that mixes two grid rows (the offset)."""
    eps_perm, eps_1 = chain_budgets(mechanism, eps_perm, eps_1)
    s = check.integer("chain_report_channel", "s", s, minimum=1)
    u = 2.0 * np.arange(s + 1) / s - 1.0
    memo = memo_channel(mechanism, eps_perm, u)
    values = _memo_values(mechanism, eps_perm, u)
    one = memo @ round2_probability(eps_1, values)
    return np.stack([1.0 - one, one], axis=1)


def _memo_values(mechanism: str, eps_perm: float, u: NDArray) -> NDArray[np.float64]:
    """The mean memo value of each column of :func:`memo_channel` (cell midpoints, atoms)."""
    key = mechanism.lower()
    c_d = duchi_bound(eps_perm)
    atoms = np.array([-c_d, c_d])
    if key in ("duchi", "1bitmean") or (key == "hm" and hm_beta(eps_perm) == 0.0):
        return atoms
    pm = pm_params(eps_perm)
    lft = pm.left(u)
    cuts = np.unique(np.clip(np.concatenate([[-pm.C, pm.C], lft, lft + pm.width]), -pm.C, pm.C))
    mids = (cuts[:-1] + cuts[1:]) / 2
    return mids if key == "pm" else np.concatenate([mids, atoms])


# --------------------------------------------------------------------------------------------
# One table (math §20.7)
# --------------------------------------------------------------------------------------------


def unit_variance(mechanism: str, eps: float) -> UnitVariance:
    """The per-report variance of a one-shot mechanism's debiased report (math §20.7)."""
    table = {
        "laplace": laplace_variance,
        "duchi": duchi_variance,
        "1bitmean": duchi_variance,
        "pm": pm_variance,
        "hm": hm_variance,
        "sw": sw_variance,
    }
    key = check.choice("unit_variance", "mechanism", mechanism, tuple(table))
    return table[key](eps)


def worst_variance(mechanism: str, eps: float, n: int = 1) -> float:
    """Worst-case variance of the mean of n reports, max_u V(u)/n, in u units."""
    n = check.integer("worst_variance", "n", n, minimum=1)
    return unit_variance(mechanism, eps).worst() / n


def best_mechanism(eps: float, candidates: tuple[str, ...] = ("Duchi", "PM", "HM")) -> str:
    """The candidate of least worst-case variance at ε (first in order on a tie).

    The numeric side of ALLOMFREE's adaptive choice (math §20.10).
    """
    return min(candidates, key=lambda m: (unit_variance(m, eps).worst(), candidates.index(m)))


# --------------------------------------------------------------------------------------------
# Longitudinal: α-point rounding, memo, second round (math §20.8–§20.9)
# --------------------------------------------------------------------------------------------


def rounding_keys(t: ArrayLike, s: int, a: ArrayLike) -> NDArray[np.int64]:
    """α-point rounding ([DIN17]; math (20.16)): key j = min(⌊s·t + a⌋, s), grid j/s.

    ``a`` ∈ [0, 1) is the user's offset, drawn once; Pr_a[j = ⌊st⌋ + 1] = frac(st), so
    E[j/s] = t. The key is also what the memo is kept under, so the ledger counts memos by it.
    """
    s = check.integer("rounding_keys", "s", s, minimum=1)
    t = np.asarray(t, dtype=np.float64)
    j = np.floor(s * t + np.asarray(a, dtype=np.float64)).astype(np.int64)
    return np.minimum(j, s)


def rounding_variance(u: ArrayLike, s: int) -> NDArray[np.float64]:
    """Var over the offset of the rounded u_j = 2j/s − 1: 4φ(1 − φ)/s², φ = frac(s(u + 1)/2)."""
    s = check.integer("rounding_variance", "s", s, minimum=1)
    st = s * (np.asarray(u, dtype=np.float64) + 1) / 2
    phi = st - np.floor(st)
    return 4 * phi * (1 - phi) / (s * s)


#: Largest grid :func:`default_grid` proposes: beyond it the rounding term is below 1/4096 of
#: a unit variance while every memo a changing value uses still costs ε∞.
GRID_CAP = 64


def default_grid(mechanism: str, eps_perm: float, share: float = 0.05) -> int:
    """The smallest s whose worst rounding term (1 + v2)/s² is at most ``share`` of the memo
    mechanism's worst variance at ε∞ (math §20.9), at most :data:`GRID_CAP`: 1 for a Duchi
    memo, whose rounding costs nothing; a few to a dozen for PM and HM memos."""
    key = check.choice("default_grid", "mechanism", mechanism, ("duchi", "1bitmean", "pm", "hm"))
    share = check.positive_float("default_grid", "share", share)
    if key in ("duchi", "1bitmean") or (key == "hm" and hm_beta(eps_perm) == 0.0):
        return 1
    vm = unit_variance(key, eps_perm)
    return min(GRID_CAP, max(1, math.ceil(math.sqrt((1 + vm.v2) / (share * vm.worst())) - 1e-12)))


def memo_bound(mechanism: str, eps_perm: float) -> float:
    """C_M = max |y1| of the memo mechanism at ε∞: Duchi's C (``"Duchi"`` or ``"1BitMean"``),
    or PM's C (PM, and HM with β > 0)."""
    key = check.choice("memo_bound", "mechanism", mechanism, ("duchi", "1bitmean", "pm", "hm"))
    if key in ("duchi", "1bitmean") or (key == "hm" and hm_beta(eps_perm) == 0.0):
        return duchi_bound(eps_perm)
    return pm_params(eps_perm).C


#: ε1 within this relative distance of 2·artanh(1/C_M) is refused: the bound's float error
#: (at ε1 = ε∞/2 a PM memo's drawn round-2 probability is 1; math §20.9).
EPS_1_MARGIN = 1e-9


def max_eps_1(mechanism: str, eps_perm: float) -> float:
    """Largest per-report ε1 of the two-round form: 2·artanh(1/C_M) (math (20.18)).

    ε∞ for a Duchi memo (L-1BitMean), ε∞/2 for a PM memo (and HM with β > 0). The bound is
    excluded: there round 2 would be deterministic at the extreme memos (ε2 = ∞); so is its
    float neighbourhood (:data:`EPS_1_MARGIN`, :func:`chain_budgets`).
    """
    return 2 * math.atanh(1.0 / memo_bound(mechanism, eps_perm))


def eps_1_allowed(mechanism: str, eps_perm: float, eps_1: float) -> bool:
    """Whether the two-round form with this memo mechanism takes ε1 at ε∞: below
    2·artanh(1/C_M) less its float margin (math (20.18))."""
    return eps_1 < max_eps_1(mechanism, eps_perm) * (1 - EPS_1_MARGIN)


def chain_budgets(
    mechanism: str, eps_perm: float, eps_1: float, owner: str | None = None
) -> tuple[float, float]:
    """Check 0 < ε1 < ε1_max(ε∞) of the two-round form (one ``ValueError`` line otherwise,
    naming ``owner``, by default L-<mechanism>)."""
    owner = owner or f"L-{mechanism}"
    eps_perm, eps_1 = check.chain_budgets(owner, eps_perm, eps_1)
    if not eps_1_allowed(mechanism, eps_perm, eps_1):
        top = max_eps_1(mechanism, eps_perm)
        raise check._fail(
            owner, "eps_1", f"a finite number in (0, {top:.6g}) (the largest per-report ε of a "
            f"{mechanism} memo at eps_perm={eps_perm:g}, docs/math.md §20.9)", eps_1,
        )  # fmt: skip
    return eps_perm, eps_1


def round2_slope(eps_1: float) -> float:
    """κ = tanh(ε1/2): round 2 reports 1 with probability (1 + κ·y1)/2 given the memo y1."""
    return math.tanh(check.positive_float("round2_slope", "eps_1", eps_1) / 2)


def round2_threshold(eps_1: float, y1: ArrayLike) -> NDArray[np.float64]:
    """x = 1/2 + κ·y1/2, κ = tanh(ε1/2): round 2 reports 1 when its uniform is below x (as
    :func:`duchi_threshold`, the claims read :func:`round2_probability` = drawn(x))."""
    return 0.5 + 0.5 * round2_slope(eps_1) * np.asarray(y1, dtype=np.float64)


def round2_probability(eps_1: float, y1: ArrayLike) -> NDArray[np.float64]:
    """Pr[report bit = 1 | memo y1] = (1 + κ·y1)/2, κ = tanh(ε1/2) (math (20.17)), as the
    sampler realizes it (``privacy.drawn`` of :func:`round2_threshold`)."""
    return drawn_array(round2_threshold(eps_1, y1))


def round2_epsilon(mechanism: str, eps_perm: float, eps_1: float) -> float:
    """ε2 of round 2 alone: ln((1 + κC_M)/(1 − κC_M)), what each later report adds in (4.2)."""
    eps_perm, eps_1 = chain_budgets(mechanism, eps_perm, eps_1)
    x = round2_slope(eps_1) * memo_bound(mechanism, eps_perm)
    return 2 * math.atanh(x)


def flip_probability(eps_perm: float, eps_1: float) -> float:
    """γ of L-1BitMean's output perturbation: 1 − 2γ = tanh(ε1/2)/tanh(ε∞/2) (math (20.19)).

    A Duchi memo ±C∞ with round 2 of (20.17) flips the memo's bit with probability γ: it is
    [DIN17]'s output perturbation, calibrated so that one report costs exactly ε1.
    """
    eps_perm, eps_1 = chain_budgets("1BitMean", eps_perm, eps_1)
    return 0.5 * (1 - math.tanh(eps_1 / 2) / math.tanh(eps_perm / 2))


def flip_report_epsilon(eps_perm: float, gamma: float) -> float:
    """ε1 of one L-1BitMean report for a flip probability γ ∈ [0, 1/2) given directly:
    2·artanh((1 − 2γ)·tanh(ε∞/2)) ([DIN17]'s γ form)."""
    eps_perm = check.budget("L-1BitMean", "eps_perm", eps_perm)
    g = check.probability("L-1BitMean", "gamma", gamma)
    if g >= 0.5:
        raise check._fail("L-1BitMean", "gamma", "a number in [0, 0.5)", gamma)
    return 2 * math.atanh((1 - 2 * g) * math.tanh(eps_perm / 2))


def chain_variances(
    mechanism: str, eps_perm: float, eps_1: float, s: int, u: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(V1, Vtot) of one user's debiased report at value u (math (20.20)).

    Vtot = 1/κ² − u² (every report is Duchi's channel at ε1); V1 = Var(E[û | memo state]) =
    V_M(u) + (1 + v2)·ρ(u) with V_M the memo mechanism's variance at ε∞ (v2 its u² coefficient)
    and ρ the rounding variance; for a binary memo (Duchi) the rounding adds nothing.
    """
    eps_perm, eps_1 = chain_budgets(mechanism, eps_perm, eps_1)
    u = np.asarray(u, dtype=np.float64)
    kappa = round2_slope(eps_1)
    v_tot = 1.0 / (kappa * kappa) - u * u
    key = mechanism.lower()
    if key in ("duchi", "1bitmean") or (key == "hm" and hm_beta(eps_perm) == 0.0):
        return duchi_variance(eps_perm).at(u), v_tot
    vm = unit_variance(key, eps_perm)
    return vm.at(u) + (1 + vm.v2) * rounding_variance(u, s), v_tot


# --------------------------------------------------------------------------------------------
# L-SW: the memoized distribution form (math §20.11)
# --------------------------------------------------------------------------------------------


def sw_bucket_edges(eps: float, d_out: int) -> NDArray[np.float64]:
    """The d_out + 1 edges of the equal output buckets of [−b, 1 + b]."""
    d_out = check.integer("SW", "d_out", d_out, minimum=2)
    b = sw_params(eps).b
    return -b + (1 + 2 * b) * np.arange(d_out + 1) / d_out


def sw_grid_channel(eps_perm: float, s: int, d_out: int) -> NDArray[np.float64]:
    """W1[j, m] = Pr[SW(t_j) at ε∞ falls in output bucket m], t_j = j/s (math (20.25)).

    q·|B_m| + (p − q)·|B_m ∩ [t_j − b, t_j + b]|: the density of (20.11) integrated exactly.
    """
    s = check.integer("L-SW", "s", s, minimum=1)
    sw = sw_params(eps_perm)
    edges = sw_bucket_edges(eps_perm, d_out)
    t = np.arange(s + 1)[:, None] / s
    lo, hi = edges[None, :-1], edges[None, 1:]
    overlap = np.clip(np.minimum(hi, t + sw.b) - np.maximum(lo, t - sw.b), 0.0, None)
    return sw.q * (hi - lo) + (sw.p - sw.q) * overlap


def _grr_composed(w1: NDArray[np.float64], lam: float) -> tuple[float, float, NDArray[np.float64]]:
    """(p2, q2, W) for a GRR round 2 of odds λ = (p2 − q2)/q2 over the buckets of W1."""
    q2 = 1.0 / (w1.shape[1] + lam)
    p2 = (1.0 + lam) * q2
    return p2, q2, q2 + (p2 - q2) * w1


def lsw_round2(eps_perm: float, eps_1: float, s: int, d_out: int) -> tuple[float, float]:
    """(p2, q2) of L-SW's round 2, GRR over the d_out buckets, so that one report costs ε1 over
    every input, exactly up to float rounding and never above (math (20.26)); ``ValueError`` if
    ε1 is not below the memo's own ε.

    The report channel is W = q2 + (p2 − q2)·W1 = q2·(1 + λW1), λ = (p2 − q2)/q2, and its ε grows
    with λ: λ is the largest value, found by bisection on the very matrix the sampler's
    probabilities give, whose ε is at most ε1; then q2 = 1/(d_out + λ), p2 = (1 + λ)·q2.
    """
    eps_perm, eps_1 = check.chain_budgets("L-SW", eps_perm, eps_1)
    w1 = sw_grid_channel(eps_perm, s, d_out)
    top = channel_epsilon(w1)
    if not eps_1 < top:
        raise check._fail(
            "L-SW", "eps_1", f"a finite number in (0, {top:.6g}) (the ε of one bucketed SW memo "
            f"at eps_perm={eps_perm:g}, docs/math.md §20.11)", eps_1,
        )  # fmt: skip

    def eps_of(lam: float) -> float:
        return channel_epsilon(_grr_composed(w1, lam)[2])

    lo, hi = 0.0, 1.0
    while eps_of(hi) <= eps_1:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if eps_of(mid) <= eps_1:
            lo = mid
        else:
            hi = mid
    p2, q2, _ = _grr_composed(w1, lo)
    return p2, q2


def lsw_report_channel(eps_perm: float, eps_1: float, s: int, d_out: int) -> NDArray[np.float64]:
    """W[j, r] = Pr[report r | rounded value t_j] = Σ_m W1[j, m]·R2[m, r] (math (20.26))."""
    p2, q2 = lsw_round2(eps_perm, eps_1, s, d_out)
    return q2 + (p2 - q2) * sw_grid_channel(eps_perm, s, d_out)


# --------------------------------------------------------------------------------------------
# Accounting over time (math §20.9, for the ledger of docs/math.md §4)
# --------------------------------------------------------------------------------------------


def distinct_per_row(keys: ArrayLike) -> NDArray[np.int64]:
    """Number of distinct values in each row of an (n, τ) integer array (vectorized)."""
    k = np.sort(np.asarray(keys), axis=-1)
    if k.shape[-1] == 0:
        return np.zeros(k.shape[:-1], dtype=np.int64)
    return 1 + np.count_nonzero(np.diff(k, axis=-1), axis=-1)


def rounding_key_bound(t: ArrayLike, s: int) -> NDArray[np.int64]:
    """Per row of an (n, τ) array of values t ∈ [0, 1]: an upper bound on the distinct memo
    keys that holds for every offset, the distinct members of {⌊st⌋, min(⌊st⌋ + 1, s)} over
    the row (math (20.22)); for a ledger that does not know the users' offsets."""
    s = check.integer("rounding_key_bound", "s", s, minimum=1)
    t = np.asarray(t, dtype=np.float64)
    low = np.floor(s * t).astype(np.int64)
    low = np.minimum(low, s)
    both = np.concatenate([low, np.minimum(low + 1, s)], axis=-1)
    return distinct_per_row(both)


def chain_spent_epsilon(keys: ArrayLike, eps_perm: float, eps_1: float) -> NDArray[np.float64]:
    """Per user ε spent by τ reports whose memo keys are the rows of ``keys`` (n, τ):
    min(τ·ε1, m·ε∞) with m the distinct keys (docs/math.md (4.1) and (20.22), scope of §4)."""
    k = np.asarray(keys)
    if k.ndim != 2:
        raise check._fail(
            "chain_spent_epsilon", "keys", "an (n, τ) array",
            check.Described(f"shape {k.shape}"),
        )  # fmt: skip
    return np.asarray(spent_epsilon(k.shape[1], distinct_per_row(k), eps_1, eps_perm), float)


# --------------------------------------------------------------------------------------------
# Several attributes (math §20.10)
# --------------------------------------------------------------------------------------------


def sampled_attributes(eps: float, d: int) -> int:
    """k = max(1, min(d, ⌊ε/2.5⌋)) attributes per user, each at ε/k ([WAN19] §IV)."""
    eps = check.budget("sampled_attributes", "eps", eps)
    d = check.integer("sampled_attributes", "d", d, minimum=1)
    return max(1, min(d, math.floor(eps / 2.5)))


# --------------------------------------------------------------------------------------------
# The variance of the values from split users (math §20.13)
# --------------------------------------------------------------------------------------------


def split_sizes(n: int, share: float = 0.5) -> tuple[int, int]:
    """(n_A, n_B): n_A = round(share·n) users report x, the n_B = n − n_A others the centred
    square; n_A ≥ 2 (the pair statistic) and n_B ≥ 1 (math §20.13)."""
    n = check.integer("split", "n", n, minimum=3)
    share = check.positive_float("split", "share", share, upper=1.0)
    n_a = min(n - 1, max(2, round(share * n)))
    return n_a, n - n_a


def split_variance_variance(var: UnitVariance, n: int, n_mean: int, moments: ArrayLike) -> float:
    """Var of the split estimate of the variance, to first order (math (20.30)), in u units.

    ``var``: one report's V(u) (the same mechanism and ε in both groups); ``n_mean``: the users
    of group A (they report x); ``moments``: (m1, m2, m3, m4), the means of u, u², u³, u⁴ over
    the n users. With f_A = n_A/n, S the population (co)variances with divisor n − 1,

        ((n − 1)/n)²·[ mean V(2u² − 1)/(4n_B) + S²(u²)(1 − f_B)/n_B
                       + 4ū²·(mean V(u)/n_A + S²(u)(1 − f_A)/n_A) + 4ū·S(u², u)/n ],

    the last term the covariance the split leaves between the two groups' means.
    """
    n = check.integer("split", "n", n, minimum=3)
    n_a = check.integer("split", "n_mean", n_mean, minimum=2, maximum=n - 1)
    n_b = n - n_a
    m1, m2, m3, m4 = (float(m) for m in np.asarray(moments, dtype=np.float64))
    k = n / (n - 1)
    s_u, s_sq, s_cross = k * (m2 - m1 * m1), k * (m4 - m2 * m2), k * (m3 - m1 * m2)
    v_u = var.v0 + var.v1 * m1 + var.v2 * m2  # mean V(u)
    v_w = var.v0 + var.v1 * (2 * m2 - 1) + var.v2 * (4 * m4 - 4 * m2 + 1)  # mean V(2u² − 1)
    part_b = v_w / (4 * n_b) + s_sq * (1 - n_b / n) / n_b
    part_a = 4 * m1 * m1 * (v_u / n_a + s_u * (1 - n_a / n) / n_a)
    return ((n - 1) / n) ** 2 * (part_b + part_a + 4 * m1 * s_cross / n)
