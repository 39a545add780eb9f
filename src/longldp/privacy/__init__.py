"""Privacy math of every frequency oracle: one formula, one place (docs/math.md §1–§4).

Every function here is pure and scalar. Notation: domain size ``k``, ``eps`` for a one-shot
oracle, ``eps_perm`` (ε∞, the budget of one value memoized forever) and ``eps_1`` (ε1, the budget
of a single report) for the two-round chains, ``a = e^{eps_perm}``, ``b = e^{eps_1}``.

A two-round chain runs round 1 with ``(p1, q1)`` once per distinct value (memoized) and round 2
with ``(p2, q2)`` on the memo for every report. A report "supports" v with probability

    P1 = p1·p2 + (1−p1)·q2   (the user's value is v)
    P0 = q1·p2 + (1−q1)·q2   (it is not)

for every chain (for GRR chains because (1−p1) = (k−1)·q1), and the one unbiased estimator is
f̂ = (C/n − P0)/(P1 − P0) with the variance of :func:`estimator_variance`.

References
----------
[ARC22] Arcolezi et al., "Improving the utility of locally differentially private protocols for
        longitudinal and multidimensional frequency estimates", Digital Communications and
        Networks, 2022 (L-GRR, L-OUE, L-OSUE, L-SOUE).
[ARC23] Arcolezi et al., "Frequency estimation of evolving data under local differential privacy"
        (LOLOHA), EDBT 2023.
[WAN17] Wang et al., "Locally differentially private protocols for frequency estimation",
        USENIX Security 2017 (GRR, SUE, OUE, BLH, OLH).
[ERL14] Erlingsson et al., "RAPPOR", CCS 2014 (L-SUE).
[DIN17] Ding et al., "Collecting telemetry data privately", NeurIPS 2017 (dBitFlipPM).
[ASZ19] Acharya, Sun, Zhang, "Hadamard response: estimating distributions privately,
        efficiently, and with little communication", AISTATS 2019 (HR).
[002]   Marreiras Neto, Duarte Neto, Costa Filho, Machado, "Locally differentially private
        applications with longitudinal data" (docs/math.md §15), eqs. 3, 6, 7.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check

LGRR_CALIBRATIONS = ("exact", "paper")


_eps_pair = check.chain_budgets

#: Largest ε (ε, ε∞) any protocol accepts; larger budgets raise ``ValueError``. At ε = 30 the
#: smallest probability a client samples (GRR over two symbols: 1/(e^30 + 1) ≈ 9.4e-14) is still
#: about 850 steps of a 53-bit uniform draw, and every probability a sampler draws with is
#: stored on that grid (:func:`drawn`), so the stored parameters are the channel the sampler
#: realizes. Beyond ε ≈ 37 such a keep probability rounds to exactly 1 (the client would report
#: its true value, ε = ∞), and e^ε overflows at ε ≈ 710. Budgets this large give no meaningful
#: privacy anyway (docs/math.md §16.1).
EPS_MAX = check.EPS_MAX

#: A sampler's uniform draw u has 53 random bits: u = w·2⁻⁵³ for an integer w in [0, 2⁵³).
UNIFORM_GRID = 2.0**53


def drawn(p: float) -> float:
    """The probability that a sampler drawing ``u < p`` realizes: ⌈p·2⁵³⌉/2⁵³.

    Every client draws a Bernoulli as u < p with u = w·2⁻⁵³ (NumPy's ``Generator.random`` and
    the clients' byte sources alike, docs/client-spec.md §2.2), so Pr[u < p] = ⌈p·2⁵³⌉/2⁵³
    exactly, not p. Each probability a sampler compares with is stored as this value (exact in
    float64: a scaling by a power of two and a ceiling), so the channel, the claims and the
    estimator read the very probability the sampler realizes, and its complement 1 − p is exact
    in float64 too (both are multiples of 2⁻⁵³ in [0, 1]). The reports do not change: u < p
    and u < ⌈p·2⁵³⌉/2⁵³ agree for every u on the grid. One float expression per probability
    (docs/math.md §16.1).
    """
    return math.ceil(p * UNIFORM_GRID) / UNIFORM_GRID


#: Largest hash range g of the local-hashing protocols: the hash maps 32 mixed bits to [0, g)
#: by a multiply-shift (:func:`longldp.protocols.lh.mix_hash`), exact for g ≤ 2³².
G_MAX = 2**32


# --------------------------------------------------------------------------------------------
# One-shot oracles ([WAN17] §4)
# --------------------------------------------------------------------------------------------


def grr_probabilities(eps: float, k: int) -> tuple[float, float]:
    """GRR: p = e^ε/(e^ε+k−1), q = 1/(e^ε+k−1) ([WAN17] §4.1)."""
    eps = check.budget("GRR", "eps", eps)
    k = check.integer("GRR", "k", k, minimum=2)
    p = drawn(1.0 / (1.0 + (k - 1) * math.exp(-eps)))
    # q from the stored p: GRR's sampler moves to another symbol with probability 1 − p (exact,
    # p is on the sampler's grid), then to each of the k − 1 others uniformly.
    return p, (1.0 - p) / (k - 1)


def sue_probabilities(eps: float) -> tuple[float, float]:
    """Symmetric UE (basic one-time RAPPOR): p = e^{ε/2}/(e^{ε/2}+1), q = 1 − p ([WAN17] §4.2)."""
    eps = check.budget("SUE", "eps", eps)
    p = drawn(1.0 / (1.0 + math.exp(-eps / 2)))
    return p, 1.0 - p


def oue_probabilities(eps: float) -> tuple[float, float]:
    """Optimized UE: p = 1/2, q = 1/(e^ε+1) ([WAN17] §4.2, eq. 11)."""
    eps = check.budget("OUE", "eps", eps)
    return 0.5, drawn(1.0 / (math.exp(eps) + 1.0))


def olh_optimal_g(eps: float) -> int:
    """Integer hash range g in [2, G_MAX] minimising OLH's V*.

    V*(g) ∝ (e^ε + g − 1)²/(g − 1) is convex in g with its continuous minimum at g = e^ε + 1
    ([WAN17] §4.4); a short descent on the exact V* from there gives the integer argmin in O(1)
    steps whatever ε (no scan up to e^ε).
    """
    eps = check.budget("OLH", "eps", eps)
    return integer_argmin(lambda g: olh_unit_variance(g, eps), math.exp(eps) + 1.0)


def olh_unit_variance(g: int, eps: float) -> float:
    """n·V* of local hashing over g buckets at ε: P1 = GRR's keep probability, P0 = 1/g."""
    return float(_vstar_unit(grr_probabilities(eps, g)[0], 1.0 / g))


def subset_probabilities(eps: float, k: int, omega: int) -> tuple[float, float, float]:
    """(P1, P0, 1 − P1) of subset selection: a report is a size-ω subset of [k] that holds the
    value with probability P1 = ω·e^ε/(ω·e^ε + k − ω); a value not held is in it with
    P0 = (ω − P1)/(k − 1) ([WAN16] §4; [YE18] eq. 7; docs/math.md §2.5).

    P1 is stored as its sampler draws it (:func:`drawn`) and 1 − P1 is that value's exact
    complement, the probability the sampler leaves v out. (A closed form (k − ω)/(ω·e^ε + k − ω)
    for 1 − P1, once used here, is a second expression of the same probability: at k = 6,
    ε = 30 it put the claim at 30.00000000003 while the sampler realized 30.0000709.)"""
    a = omega * math.exp(eps)
    p1 = drawn(a / (a + k - omega))
    return p1, (omega - p1) / (k - 1), 1.0 - p1


def subset_epsilon(p1: float, not_p1: float, k: int, omega: int) -> float:
    """ε of one subset-selection report from its sampler: a subset holding v has probability
    P1/C(k−1, ω−1), one without v (1 − P1)/C(k−1, ω), so the worst ratio is
    P1·C(k−1, ω)/((1 − P1)·C(k−1, ω−1)) = P1·(k − ω)/((1 − P1)·ω) (docs/math.md §2.5)."""
    return math.log(p1 * (k - omega) / (not_p1 * omega))


def subset_size(eps: float, k: int) -> int:
    """ω in [1, k − 1] minimising subset selection's V* at ε, by descent from k/(e^ε + 1), the
    continuous optimum of [WAN16] §4.2 and [YE18] (docs/math.md §2.5)."""
    eps = check.budget("SS", "eps", eps)
    k = check.integer("SS", "k", k, minimum=2)

    def unit(omega: int) -> float:
        p1, p0, _ = subset_probabilities(eps, k, omega)
        return float(_vstar_unit(p1, p0))

    return integer_argmin(unit, k / (math.exp(eps) + 1.0), lo=1, hi=k - 1)


def hadamard_response_size(k: int) -> int:
    """K = 2^⌈log₂(k + 1)⌉, the smallest power of two above k: the outputs of Hadamard response
    over [k] (column 0 of the Sylvester matrix, all ones, is skipped; [ASZ19] §3;
    docs/math.md §2.6)."""
    return 1 << int(k).bit_length()


def hadamard_response_probabilities(eps: float) -> tuple[float, float]:
    """(P1, P0) of Hadamard response at ε: a report lands in the half C_v of the outputs that
    supports v with P1 = e^ε/(e^ε + 1) (the sampler's one threshold, 1/(1 + e^(−ε)) stored as
    the draw realizes it, :func:`drawn`), and in C_u for u ≠ v with P0 = ½ exactly, since two
    columns of a Sylvester matrix agree on half the rows ([ASZ19] §3; docs/math.md §2.6)."""
    return drawn(1.0 / (1.0 + math.exp(-eps))), 0.5


def hadamard_response_epsilon(p1: float) -> float:
    """ε of one Hadamard-response report from its sampler's threshold: an output in C_v but
    not in C_u has probability 2·P1/K under v and 2·(1 − P1)/K under u, and no ratio is larger:
    ln(P1/(1 − P1)) (docs/math.md §2.6)."""
    return math.log(p1 / (1.0 - p1))


def integer_argmin(f: Callable[[int], float], start: float, lo: int = 2, hi: int = G_MAX) -> int:
    """Smallest integer argmin in [lo, hi] of a unimodal f, by descent from ``start``.

    Used for the hash range g, where ``start`` is the continuous optimum; the descent takes a
    few steps. Raises ``RuntimeError`` if it does not settle (f not unimodal near ``start``).
    """
    g = int(min(max(round(start), lo), hi))
    fg = f(g)
    for _ in range(100_000):
        if g > lo and (down := f(g - 1)) <= fg:
            g, fg = g - 1, down
        elif g < hi and (up := f(g + 1)) < fg:
            g, fg = g + 1, up
        else:
            return g
    raise RuntimeError(f"integer_argmin: no minimum within 100000 steps of {start}.")


# --------------------------------------------------------------------------------------------
# Two-round chains ([ARC22], [ARC23], [002])
# --------------------------------------------------------------------------------------------


def lgrr_p2(k: int, eps_perm: float, eps_1: float, calibration: str = "exact") -> float:
    """Round-2 keep probability of L-GRR (q2 = (1 − p2)/(k − 1)).

    ``"paper"`` ([ARC22] §4.2, eq. 13; [002] §5.1, whose printed form is algebraically the same):
        p2 = (a·b − 1) / ((k−1)(a − b) + a·b − 1).
    It solves ε1 = ln[(p1p2 + q1q2)/(p1q2 + q1p2)], which is the true single-report ε only for
    k = 2; for k > 2 a report is more private than ε1 (the true ratio is P1/P0, docs/math.md §3.2).

    ``"exact"`` (default): p2 = (p_s − q1)/(p1 − q1) with p_s = GRR(ε1)'s keep probability, so
    the composed two-round channel *is* GRR at ε1 (P1 = p_s) and V* equals GRR's at ε1.
    """
    k = check.integer("L-GRR", "k", k, minimum=2)
    eps_perm, eps_1 = _eps_pair("L-GRR", eps_perm, eps_1)
    calibration = check.choice("L-GRR", "calibration", calibration, LGRR_CALIBRATIONS)
    # Written with expm1 and without differences of nearly equal terms, so that tiny and
    # large budgets keep full precision (a − b = b·(e^{ε∞−ε1} − 1), ab − 1 = e^{ε∞+ε1} − 1).
    # Stored as the sampler draws it (:func:`drawn`): the keep probability of round 2.
    if calibration == "paper":
        num = math.expm1(eps_perm + eps_1)
        return drawn(num / ((k - 1) * math.exp(eps_1) * math.expm1(eps_perm - eps_1) + num))
    # (p_s − q1)/(p1 − q1) with p_s, p1 GRR's keep probabilities at ε1, ε∞ and q1 = 1/(a+k−1):
    # = [b(a − 1) + (k − 1)(b − 1)] / [(b + k − 1)(a − 1)].
    num = math.exp(eps_1) * math.expm1(eps_perm) + (k - 1) * math.expm1(eps_1)
    return drawn(num / ((math.exp(eps_1) + k - 1) * math.expm1(eps_perm)))


def lsue_p2(eps_perm: float, eps_1: float) -> float:
    """L-SUE (RAPPOR's utility form): round 2 symmetric with 2p2 − 1 = tanh(ε1/4)/tanh(ε∞/4).

    Both rounds symmetric give P0 = 1 − P1 and 2P1 − 1 = (2p1 − 1)(2p2 − 1); ε1 = 2 ln(P1/P0)
    solves to the closed form ([ERL14] §3; [002] eq. 6 solved for p2 + q2 = 1).
    """
    eps_perm, eps_1 = _eps_pair("L-SUE", eps_perm, eps_1)
    return drawn(0.5 * (1.0 + math.tanh(eps_1 / 4) / math.tanh(eps_perm / 4)))


def losue_p2(eps_perm: float, eps_1: float) -> float:
    """L-OSUE: OUE(ε∞) then symmetric round 2, p2 = (a·b − 1)/((b + 1)(a − 1)) ([ARC22] eq. 15)."""
    eps_perm, eps_1 = _eps_pair("L-OSUE", eps_perm, eps_1)
    return drawn(math.expm1(eps_perm + eps_1) / ((math.exp(eps_1) + 1) * math.expm1(eps_perm)))


def _ue_q2_for_half_p2(owner: str, p1: float, q1: float, eps_perm: float, eps_1: float) -> float:
    """Solve the UE single-report equation ([002] eq. 6) for q2 with p2 = 1/2.

    With p2 fixed, P1 and P0 are linear in q2, so P1(1−P0) = b·P0(1−P1) is a quadratic; we keep
    its root in [0, 1/2). The largest reachable ε1 is at q2 = 0 (docs/math.md §3.3: a maximum α).
    """
    b = math.exp(eps_1)
    # P1 = A1 + B1·x, P0 = A0 + B0·x with x = q2.
    A1, B1 = p1 / 2, 1 - p1
    A0, B0 = q1 / 2, 1 - q1
    eps_max = ue_report_epsilon(A1, A0)
    if eps_1 >= eps_max:
        raise ValueError(
            f"{owner}: 'eps_1' must be < {eps_max:.6g} (alpha = eps_1/eps_perm < "
            f"{eps_max / eps_perm:.6g}) at eps_perm = {eps_perm:g}; got {eps_1!r}: "
            "this chain cannot reach a single-report budget that large."
        )
    c2 = B0 * B1 * (b - 1)
    c1 = B1 * (1 - A0) - A1 * B0 - b * (B0 * (1 - A1) - A0 * B1)
    c0 = A1 * (1 - A0) - b * A0 * (1 - A1)
    # Both roots without cancellation: t = −(c1 + sign(c1)·√D)/2, roots t/c2 and c0/t. A closed
    # form (not an eigenvalue solver) so that every client computes the same q2, bit for bit
    # (docs/client-spec.md §3.2).
    disc = math.sqrt(max(c1 * c1 - 4 * c2 * c0, 0.0))
    t = -0.5 * (c1 + (disc if c1 >= 0 else -disc))
    valid = [x for x in (t / c2, c0 / t) if 0 <= x < 0.5]
    if len(valid) != 1:  # pragma: no cover - excluded by the eps_max check above
        raise ValueError(f"{owner}: no valid q2 for eps_perm={eps_perm}, eps_1={eps_1}.")
    return drawn(valid[0])  # as the sampler draws it


def loue_q2(eps_perm: float, eps_1: float) -> float:
    """L-OUE: p1 = p2 = 1/2, q1 = 1/(a+1), q2 from the ε1 quadratic ([ARC22] §4.3)."""
    eps_perm, eps_1 = _eps_pair("L-OUE", eps_perm, eps_1)
    p1, q1 = oue_probabilities(eps_perm)
    return _ue_q2_for_half_p2("L-OUE", p1, q1, eps_perm, eps_1)


def lsoue_q2(eps_perm: float, eps_1: float) -> float:
    """L-SOUE: SUE(ε∞) round 1, p2 = 1/2, q2 from the ε1 quadratic ([ARC22] §4.3)."""
    eps_perm, eps_1 = _eps_pair("L-SOUE", eps_perm, eps_1)
    p1, q1 = sue_probabilities(eps_perm)
    return _ue_q2_for_half_p2("L-SOUE", p1, q1, eps_perm, eps_1)


def max_alpha(protocol: str, eps_perm: float) -> float:
    """Largest α = ε1/ε∞ that L-OUE or L-SOUE can reach at ``eps_perm`` (supremum, excluded)."""
    eps_perm = check.budget(protocol, "eps_perm", eps_perm)
    name = check.choice("max_alpha", "protocol", protocol, ("l-oue", "l-soue"))
    p1, q1 = oue_probabilities(eps_perm) if name == "l-oue" else sue_probabilities(eps_perm)
    return min(1.0, ue_report_epsilon(p1 / 2, q1 / 2) / eps_perm)


def loloha_optimal_g(eps_perm: float, eps_1: float, calibration: str = "exact") -> int:
    """OLOLOHA's hash range: the integer g in [2, G_MAX] that minimises V* of L-GRR over g buckets.

    The seeds print closed forms (:func:`loloha_g_closed_form`) that round the continuous optimum
    with ceil ([002] eq. 7) or floor ([000]); we take the exact integer argmin instead, by a
    short descent on the exact V* from the continuous optimum: X + 1 of the closed form for the
    ``"paper"`` calibration, e^{ε1} + 1 for ``"exact"`` (whose V* is OLH's at ε1).
    """
    eps_perm, eps_1 = _eps_pair("OLOLOHA", eps_perm, eps_1)
    calibration = check.choice("OLOLOHA", "calibration", calibration, LGRR_CALIBRATIONS)
    if calibration == "paper":
        start = 1.0 + _loloha_g_continuous(eps_perm, eps_1)
    else:
        start = math.exp(eps_1) + 1.0
    return integer_argmin(lambda g: loloha_unit_variance(g, eps_perm, eps_1, calibration), start)


def _loloha_g_continuous(eps_perm: float, eps_1: float) -> float:
    """X of the seeds' closed form, rewritten without cancellation.

    (1 − a² + √A)/(6(a − b)) times (√A + a² − 1)/(√A + a² − 1): the numerator becomes
    A − (a² − 1)² = 12a(a − b)(ab − 1), so X = 2a(ab − 1)/(√A + a² − 1) (ours).
    """
    a, b = math.exp(eps_perm), math.exp(eps_1)
    A = a**4 - 14 * a**2 + 12 * a * b * (1 - a * b) + 12 * a**3 * b + 1
    denom = math.sqrt(max(A, 0.0)) + math.expm1(2 * eps_perm)
    return 2 * a * math.expm1(eps_perm + eps_1) / denom


def loloha_unit_variance(g: int, eps_perm: float, eps_1: float, calibration: str) -> float:
    """n·V* of LOLOHA with hash range g: P0 = 1/g, P1 = L-GRR's P1 over g buckets ([ARC23])."""
    p1, _ = grr_probabilities(eps_perm, g)
    p2 = lgrr_p2(g, eps_perm, eps_1, calibration)
    P1, _ = chain_support(p1, (1 - p1) / (g - 1), p2, (1 - p2) / (g - 1))
    return float(_vstar_unit(P1, 1.0 / g))


def loloha_g_closed_form(eps_perm: float, eps_1: float, rounding: str = "rint") -> int:
    """The seeds' closed form g = 1 + max(1, round(X)), X = (1 − a² + √A)/(6(a − b)).

    A = a⁴ − 14a² + 12ab(1 − ab) + 12a³b + 1 with a = e^{ε∞}, b = e^{ε1} ([002] eq. 7 rounds with
    ceil, [000] with floor, the LOLOHA reference code to nearest). Kept to document the
    disagreement; :func:`loloha_optimal_g` is what OLOLOHA uses.
    """
    eps_perm, eps_1 = _eps_pair("OLOLOHA", eps_perm, eps_1)
    rounding = check.choice("loloha_g_closed_form", "rounding", rounding, ("rint", "ceil", "floor"))
    X = _loloha_g_continuous(eps_perm, eps_1)
    rounded = {"rint": round, "ceil": math.ceil, "floor": math.floor}[rounding](X)
    return 1 + max(1, int(rounded))


# --------------------------------------------------------------------------------------------
# dBitFlipPM ([DIN17] §3)
# --------------------------------------------------------------------------------------------


def bucket_of(values: ArrayLike, k: int, b: int) -> NDArray[np.int64]:
    """dBitFlipPM's bucketing of [0, k) into b contiguous buckets: ⌊v·b/k⌋ ([DIN17] §3.1)."""
    return (np.asarray(values, dtype=np.int64) * b) // k


def dbitflip_unit_variance(eps_perm: float, b: int, d: int, f: ArrayLike = 0.0) -> NDArray:
    """n·Var of dBitFlipPM's bucket estimate (ours, for the estimator with the sampler counts).

    With bit-keep probability p = e^{ε/2}/(e^{ε/2}+1) and V1 = e^{ε/2}/(e^{ε/2} − 1)²,
    n·Var[f̂_j] = (b/d)·V1 + f_j·(b/d − 1). At f = 0 this is [DIN17]'s (b/d)·V1; the LOLOHA
    appendix prints it without the square.
    """
    e = math.exp(eps_perm / 2)
    return (b / d) * e / math.expm1(eps_perm / 2) ** 2 + np.asarray(f, dtype=np.float64) * (
        b / d - 1
    )


# --------------------------------------------------------------------------------------------
# Channels, ε and variance
# --------------------------------------------------------------------------------------------


def rappor_effective(p: float, q: float, f: float) -> tuple[float, float]:
    """RAPPOR's one-report rates (q*, p*) = (P(report bit 1 | Bloom bit 1), … | Bloom bit 0).

    q* = ½f(p+q) + (1−f)q and p* = ½f(p+q) + (1−f)p ([ERL14] §3.1, Lemma 1). RAPPOR's names
    swap the UE letters: p = P(IRR 1 | PRR 0), q = P(IRR 1 | PRR 1). As a chain they are
    (p1, q1, p2, q2) = (1 − f/2, f/2, q, p), so (q*, p*) = :func:`chain_support` of it.
    """
    return chain_support(1 - f / 2, f / 2, q, p)


def rappor_eps_inf(f: float, h: int) -> float:
    """ε∞ = 2h·ln((1 − f/2)/(f/2)): the permanent response, even if known exactly.

    [ERL14] Theorem 1; two strings with disjoint Bloom bits differ in 2h positions, each
    bounded by (1 − f/2)/(f/2). Independent of k. f = 0 gives ∞ (no permanent noise).
    """
    if f <= 0:
        return math.inf
    return 2 * h * math.log((1 - f / 2) / (f / 2))


def rappor_eps_1(p: float, q: float, f: float, h: int) -> float:
    """ε1 = h·ln[q*(1−p*)/(p*(1−q*))] of one report ([ERL14] Theorem 2); inverted if p > q."""
    qs, ps = rappor_effective(p, q, f)
    return h * abs(math.log(qs * (1 - ps) / (ps * (1 - qs))))


def rappor_bits_epsilon(
    hi: float,
    lo: float,
    only_first: int,
    only_second: int,
    not_hi: float | None = None,
    not_lo: float | None = None,
) -> float:
    """ε of one report of independent bits, each 1 w.p. ``hi`` when its input bit is set and
    ``lo`` when not, for two inputs whose encodings differ in ``only_first`` bits set by the first
    input only and ``only_second`` set by the second only (docs/math.md §11).

    A bit set by the first input only contributes at most u = max(ln(hi/lo), ln((1−hi)/(1−lo)))
    to the log-ratio, one set by the second only d = max(ln(lo/hi), ln((1−lo)/(1−hi))); the
    worst output picks both: ε = max(x·u + y·d, y·u + x·d). For x = y (Bloom filters with
    x = y = h, one-hot with 1) that is x·|ln[hi(1−lo)/(lo(1−hi))]|, [ERL14] Theorem 2's form
    (:func:`rappor_eps_1`); boolean RAPPOR has x = 1, y = 0. ``not_hi``, ``not_lo``: 1 − hi and
    1 − lo when known more accurately than by subtraction (:func:`chain_nonsupport`).
    """
    x, y = int(only_first), int(only_second)
    not_hi = 1 - hi if not_hi is None else not_hi
    not_lo = 1 - lo if not_lo is None else not_lo
    if min(hi, lo, not_hi, not_lo) <= 0:
        return math.inf
    if x == y:
        return x * abs(math.log(hi * not_lo / (lo * not_hi)))
    u = max(math.log(hi / lo), math.log(not_hi / not_lo))
    d = max(math.log(lo / hi), math.log(not_lo / not_hi))
    return max(x * u + y * d, y * u + x * d)


def rappor_report_epsilon(p: float, q: float, f: float, differing: tuple[int, int]) -> float:
    """ε1 of one RAPPOR report whose encodings differ in ``differing`` = (x, y) bits:
    :func:`rappor_eps_1` (h = x) when x = y, else :func:`rappor_bits_epsilon` at (q*, p*)."""
    x, y = differing
    if x == y:
        return rappor_eps_1(p, q, f, x)
    qs, ps = rappor_effective(p, q, f)
    return rappor_bits_epsilon(qs, ps, x, y)


def rappor_prr_epsilon(f: float, differing: tuple[int, int]) -> float:
    """ε∞ of a RAPPOR PRR whose encodings differ in (x, y) bits: :func:`rappor_eps_inf`
    (2h·ln((1−f/2)/(f/2)), h = x) when x = y, else max(x, y)·ln((1 − f/2)/(f/2)) (a PRR bit
    is symmetric: u = d)."""
    x, y = differing
    if x == y:
        return rappor_eps_inf(f, x)
    if f <= 0:
        return math.inf
    return max(x, y) * math.log((1 - f / 2) / (f / 2))


def rappor_detection_bound(n: int, q: float, m_candidates: int, alpha: float = 0.05) -> float:
    """Most equally frequent strings basic one-time RAPPOR (p = ½, f = 0) can detect.

    [ERL14] appendix: T̂ has null sd √N/(2q−1); with Q = Φ⁻¹(1 − α/M) (Bonferroni), x strings
    of frequency N/x are detected only if x < (2q − 1)√N/Q.
    """
    from statistics import NormalDist

    Q = NormalDist().inv_cdf(1 - alpha / m_candidates)
    return (2 * q - 1) * math.sqrt(n) / Q


def chain_support(p1: float, q1: float, p2: float, q2: float) -> tuple[float, float]:
    """(P1, P0) of a two-round chain; a one-shot oracle is the chain with p2 = 1, q2 = 0."""
    return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2


def chain_nonsupport(p1: float, q1: float, p2: float, q2: float) -> tuple[float, float]:
    """(1 − P1, 1 − P0) of a two-round chain, summed from the rounds' complements.

    1 − P1 = p1(1 − p2) + (1 − p1)(1 − q2): no cancellation when P1 is close to 1 (large ε),
    where ``1 - P1`` would lose the digits the ε of a report depends on.
    """
    return p1 * (1 - p2) + (1 - p1) * (1 - q2), q1 * (1 - p2) + (1 - q1) * (1 - q2)


def grr_report_epsilon(P1: float, P0: float) -> float:
    """ε of one report of a symmetric k-ary channel (Pr[v|v] = P1, Pr[u|v] = P0): ln(P1/P0)."""
    return math.log(P1 / P0)


def ue_report_epsilon(
    P1: float, P0: float, N1: float | None = None, N0: float | None = None
) -> float:
    """ε of one unary-encoded report with independent bits: ln[P1(1−P0)/(P0(1−P1))] ([002] eq. 6).

    Two inputs differ in two bit positions, so the worst output ratio is the product of the
    two per-bit ratios P1/P0 and (1−P0)/(1−P1). ``N1``, ``N0``: 1 − P1 and 1 − P0 when known
    more accurately than by subtraction (:func:`chain_nonsupport`).
    """
    N1 = 1 - P1 if N1 is None else N1
    N0 = 1 - P0 if N0 is None else N0
    return math.log(P1 * N0 / (P0 * N1))


def round_up(eps: float) -> float:
    """Round an ε outward by 1e-12 (relative) so float error can never understate privacy loss.

    As OpenDP does with outward-rounded arithmetic; 1e-12 is far above the ~1e-16 error of the
    closed forms and far below any budget that matters.
    """
    return eps + 1e-12 * max(1.0, abs(eps))


def channel_epsilon(channel: ArrayLike) -> float:
    """Exact ε of a finite channel: max over outputs and input pairs of ln(Pr[y|x]/Pr[y|x']).

    ``channel[x, y] = Pr[output y | input x]``. Outputs that no input can produce are ignored;
    an output with zero probability under some inputs but not others gives ε = ∞.
    """
    m = np.asarray(channel, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 2:
        raise ValueError(
            f"channel_epsilon: 'channel' must be a 2-D matrix with >= 2 rows; got {m.shape}."
        )
    hi, lo = m.max(axis=0), m.min(axis=0)
    live = hi > 0
    if np.any(lo[live] == 0):
        return math.inf
    return float(np.max(np.log(hi[live]) - np.log(lo[live])))


def _vstar_unit(P1: ArrayLike, P0: ArrayLike) -> NDArray:
    P1, P0 = np.asarray(P1), np.asarray(P0)
    return P0 * (1 - P0) / (P1 - P0) ** 2


def estimator_variance(n: int, f: ArrayLike, P1: float, P0: float) -> NDArray:
    """Exact variance of f̂ = (C/n − P0)/(P1 − P0) on a fixed dataset (docs/math.md §1.2).

    Var[f̂] = [f·P1(1−P1) + (1−f)·P0(1−P0)] / (n (P1 − P0)²): C is a sum of n independent
    Bernoullis, n·f of them with mean P1 and the rest with mean P0.
    """
    f = np.asarray(f, dtype=np.float64)
    return (f * P1 * (1 - P1) + (1 - f) * P0 * (1 - P0)) / (n * (P1 - P0) ** 2)


def round1_support(P1: float, P0: float, p2: float, q2: float) -> tuple[float, float]:
    """(R1, R0): probability that a user's *memo* supports v, if the user holds v and if not.

    Round 2 turns a memo that supports v into a supporting report with p2 and one that does not
    with q2, so P = q2 + (p2 − q2)·R and R = (P − q2)/(p2 − q2): (p1, q1) for the GRR and UE
    chains, (p1, 1/g) for LOLOHA (a non-holder's memo supports v when H(v) collides with it).
    """
    return (P1 - q2) / (p2 - q2), (P0 - q2) / (p2 - q2)


def first_round_variance(
    n: int, f: ArrayLike, P1: float, P0: float, p2: float, q2: float
) -> NDArray:
    """V1: the part of Var[f̂] fixed by the memos (ours, docs/math.md "Variance over time").

    Given the memos (and per-user hash functions), a user's reports are independent over time
    with mean q2 + (p2 − q2)·1[memo supports v]; so V1 = Var(E[f̂ | memos]) is the variance of
    the estimator fed the memos themselves: :func:`estimator_variance` with (R1, R0) of
    :func:`round1_support` (the factor (p2 − q2)² cancels as P1 − P0 = (p2 − q2)(R1 − R0)).
    """
    return estimator_variance(n, f, *round1_support(P1, P0, p2, q2))


def time_average_variance(v_total: ArrayLike, v_first: ArrayLike, tau: int) -> NDArray:
    """Var of the mean of τ estimates of an unchanging population: V1 + (Vtot − V1)/τ.

    By the law of total variance over the memos: the memo part V1 is shared by all τ reports,
    the rest, Vtot − V1, is independent across them (ours, docs/math.md "Variance over time").
    """
    tau = check.integer("time_average_variance", "tau", tau, minimum=1)
    v1 = np.asarray(v_first, dtype=np.float64)
    return v1 + (np.asarray(v_total, dtype=np.float64) - v1) / tau


def approx_variance(n: int, P1: float, P0: float) -> float:
    """V* = P0(1−P0)/(n(P1−P0)²): the variance at f = 0, the figure the papers compare."""
    return float(_vstar_unit(P1, P0)) / n


def pool_extra_variance(f: ArrayLike, g: int, pool_size: int) -> NDArray:
    """Extra variance of a hashing estimate when users share a pool of m hash functions.

    Users holding w who share a function share its collision with v, so their supports of v
    move together. Averaging over a uniform assignment of users to functions (ours, math §2.4):
    extra Var[f̂_v] = Σ_{w≠v} f_w (f_w − 1/n) / (m (g − 1)) ≈ Σ_{w≠v} f_w² / (m (g − 1)).
    Returned for every v at once; the 1/n term is dropped (it is below 1/(n·m)).
    """
    f = np.asarray(f, dtype=np.float64)
    return (np.sum(f**2) - f**2) / (pool_size * (g - 1))


# --------------------------------------------------------------------------------------------
# Budget accounting (docs/math.md §4)
# --------------------------------------------------------------------------------------------

#: The privacy parameters of the shared budget type: a one-shot oracle's ε; a chain's ε∞ with
#: ε1, or with α = ε1/ε∞ instead of ε1 (docs/math.md §4.1).
BUDGET_KEYS = ("eps", "eps_perm", "eps_1", "alpha")


@dataclass(frozen=True)
class Budget:
    """A privacy budget as a user gives it, and the one parser every entry point uses.

    ``eps`` for a one-shot oracle; ``eps_perm`` (ε∞) with ``eps_1`` (ε1) or ``alpha``
    (α = ε1/ε∞) for a two-round chain; ``eps_perm`` alone for a chain with one round
    (dBitFlipPM). A protocol with parameters of its own (RAPPOR's f, p, q) takes none of these.
    :meth:`parameters` turns the budget into the constructor parameters of a protocol class
    from its ``budget_params`` trait, or raises ``ValueError`` naming the parameter given and
    what the protocol allows: never a silent switch to another protocol (docs/math.md §4.1).
    """

    eps: float | None = None
    eps_perm: float | None = None
    eps_1: float | None = None
    alpha: float | None = None

    @classmethod
    def at_level(cls, level: float, eps_1: float | None, takes: tuple[str, ...]) -> Budget:
        """A study grid's point (ε∞ = ``level``, ε1) for a protocol taking ``takes``: one-shot
        oracles run at ε = ``level``, one-round chains at ε∞ alone (ε1 unused)."""
        if tuple(takes) == ("eps",):
            return cls(eps=level)
        if "eps_1" in takes:
            return cls(eps_perm=level, eps_1=eps_1)
        return cls(eps_perm=level)

    def given(self) -> dict[str, float]:
        """The parameters that were given (not None), by name."""
        return {k: getattr(self, k) for k in BUDGET_KEYS if getattr(self, k) is not None}

    def parameters(self, owner: str, takes: tuple[str, ...], note: str = "") -> dict[str, float]:
        """Constructor parameters of a protocol whose budget parameters are ``takes``.

        ``alpha`` becomes ε1 = α·ε∞ (0 < α < 1). Checks the form (which parameters) and the
        values: 0 < ε, ε∞ ≤ EPS_MAX and 0 < ε1 < ε∞. ``note`` is appended to a form error (e.g.
        which protocol takes the budget that was given).
        """
        given = self.given()
        takes = tuple(takes)
        native = [p for p in takes if p not in BUDGET_KEYS]
        tail = f" {note}" if note else ""
        if native:
            if given:
                raise ValueError(
                    f"{owner}: unknown parameter(s) {', '.join(given)}; its privacy is set by its "
                    f"own parameters {', '.join(native)}.{tail}"
                )
            return {}
        if takes == ("eps",):
            allowed, form = {"eps"}, "a one-shot oracle: its budget is 'eps'"
        elif takes == ("eps_perm", "eps_1"):
            allowed = {"eps_perm", "eps_1", "alpha"}
            form = "a two-round chain: its budget is 'eps_perm' with 'eps_1' or 'alpha'"
        elif takes == ("eps_perm",):
            allowed, form = {"eps_perm"}, "a chain with one round: its budget is 'eps_perm' alone"
        else:
            raise ValueError(f"{owner}: unknown budget form {takes!r}.")
        wrong = [k for k in given if k not in allowed]
        if wrong:
            raise ValueError(
                f"{owner}: unknown parameter(s) {', '.join(wrong)}; {owner} is {form}.{tail}"
            )
        if "eps_1" in given and "alpha" in given:
            raise ValueError(f"{owner}: give 'eps_1' or 'alpha', not both.")
        missing = [k for k in takes if k not in given and not (k == "eps_1" and "alpha" in given)]
        if missing:
            raise ValueError(
                f"{owner}: missing parameter(s) {', '.join(missing)}; {owner} is {form}.{tail}"
            )
        if takes == ("eps",):
            return {"eps": check.budget(owner, "eps", given["eps"])}
        eps_perm = check.budget(owner, "eps_perm", given["eps_perm"])
        if takes == ("eps_perm",):
            return {"eps_perm": eps_perm}
        if "alpha" in given:
            eps_1 = check.positive_float(owner, "alpha", given["alpha"], upper=1.0) * eps_perm
        else:
            eps_1 = check.chain_budgets(owner, eps_perm, given["eps_1"])[1]
        return {"eps_perm": eps_perm, "eps_1": eps_1}


@dataclass(frozen=True)
class SpentBudget:
    """What a client has spent: t reports from m distinct memos cost at most min(t·ε1, m·ε∞)."""

    reports: int
    memos: int
    epsilon: float


def spent_epsilon(reports: Any, memos: Any, eps_1: float, eps_perm: float | None) -> Any:
    """ε spent by t reports from m distinct memos (docs/math.md (4.1)), the one place of the
    rule: min(t·ε1, m·ε∞) for a memoizing protocol; t·ε1 for one that memoizes nothing
    (``eps_perm`` None: one-shot oracles, one-time RAPPOR). Scalars or arrays (broadcast)."""
    t = np.asarray(reports)
    out = t * eps_1 if eps_perm is None else np.minimum(t * eps_1, np.asarray(memos) * eps_perm)
    return float(out) if np.ndim(out) == 0 else out


def spent_budget(reports: int, memos: int, eps_1: float, eps_perm: float | None) -> SpentBudget:
    """:class:`SpentBudget` of :func:`spent_epsilon` (one-shot: ``eps_perm`` None, 0 memos).

    The per-report ε carry `round_up`'s relative margin of 1e-12; summing t of them would show
    t margins' worth (three reports at ε1 = 1: 3.000000000003, above a cap of 3). The total
    takes the margin off once and is rounded *up* to 12 significant digits, so it is never
    below the composed ε beyond float noise and shows 3.0 for three reports at 1.
    """
    held = 0 if eps_perm is None else int(memos)
    total = spent_epsilon(reports, held, eps_1, eps_perm)
    return SpentBudget(int(reports), held, spent_total(total))


def spent_total(total: float) -> float:
    """A spent total as every client shows, stores and compares it (docs/client-spec.md §6.1).

    The margin of `round_up` is taken off once and the total rounded *up* to 12 significant
    digits (a slack of 10⁻³ grid step absorbs the division's own float error), then read back
    through its decimal text, so that 3 is 3.0, not 3.0000000000000004. The one place of the
    rule: :func:`spent_budget` and the spending of a planned or history-dependent device.
    """
    if total > 0 and math.isfinite(total):
        exponent = math.floor(math.log10(total)) - 11  # a grid of 12 significant digits
        steps = math.ceil(total * (1 - 1e-12) / 10.0**exponent - 1e-3)
        return float(f"{steps}e{exponent}")
    return float(total)


# The accounting trait type of every mechanism (docs/math.md §4, docs/design.md §2.5): a value
# of this layer, so that what sits below the protocols can read a protocol's rule.
# The privacy ledger (docs/math.md §19.6): a callable module, ``ledger(protocol, trajectories)``.
from longldp.privacy import ledger as ledger  # noqa: E402
from longldp.privacy.accounting import Accounting as Accounting  # noqa: E402
