"""Formulas of the sketch oracles over open item spaces and of heavy-hitter discovery.

One formula, one place (docs/design.md §1): every probability a sampler of
``longldp.protocols.sketch`` draws with, every exact ε, every variance and every budget split of
the discovery protocols is computed here, by pure scalar functions (docs/math.md §21).

Notation (docs/math.md §21.1): items are 64-bit keys; a sketch has d public hash functions
(rows) h_1..h_d onto m columns; a user draws her row J uniformly and reports through a
randomizer over the m columns. A report *supports* a queried item x with a random variable S
whose mean is P1 when the user holds x (or collides with it in her row) and q when not; over the
draw of the hash functions a non-holder supports x with P0 = q + κ(P1 − q)/m (κ = 1, or 0 for
the signed count sketch, whose sign hash cancels collisions in mean). The one estimator is
math (1.1), f̂ = (C/n − P0)/(P1 − P0), and its variance is math (1.2) generalized to the
per-user variances v1, v0 plus the collision term of math §21.3.

References
----------
[APP17] Apple Differential Privacy Team, "Learning with privacy at scale", Apple Machine
        Learning Journal 1(8), 2017 (CMS, HCMS, SFP).
[WAN17] Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
        estimation", USENIX Security 2017 (SHE, THE: §4.3).
[BS15]  Bassily, Smith, "Local, private, efficient protocols for succinct histograms", STOC 2015
        (the randomizer of the private count sketch).
[CCF04] Charikar, Chen, Farach-Colton, "Finding frequent items in data streams", TCS 2004
        (count sketch).
[WLJ19] Wang, Li, Jha, "Locally differentially private heavy hitter identification", IEEE TDSC
        2019 (PEM).
[BNST17] Bassily, Nissim, Stemmer, Thakurta, "Practical locally private heavy hitters",
        NeurIPS 2017 (TreeHist).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy

#: The five sketch oracles (docs/math.md §21.2).
SKETCH_KINDS = ("cms", "hcms", "pcs", "she", "the")
#: Kinds with a memoized (two-round) form and the chain each one uses (docs/math.md §21.5).
MEMO_KINDS = ("cms", "hcms")
#: Largest number of columns m of a sketch (the hash maps 32 mixed bits by multiply-shift).
M_MAX = 1 << 24
#: Largest number of rows d.
D_MAX = 1 << 16

OWNER = "sketch"


# --------------------------------------------------------------------------------------------
# Randomizers' probabilities (docs/math.md §21.2)
# --------------------------------------------------------------------------------------------


def cms_flip_probability(eps: float) -> float:
    """CMS: each of the m ±1 coordinates is flipped with p = 1/(1 + e^{ε/2}) ([APP17] §3.1).

    Two inputs' one-hot vectors differ in two coordinates, so a report's ε is 2·ln((1 − p)/p).
    """
    eps = check.budget("CMS", "eps", eps)
    return privacy.drawn(1.0 / (1.0 + math.exp(eps / 2)))  # as the sampler draws it


def rr_keep_probability(eps: float, owner: str = "HCMS") -> float:
    """Binary randomized response: keep the bit with p = e^ε/(1 + e^ε) (HCMS, PCS)."""
    eps = check.budget(owner, "eps", eps)
    return privacy.drawn(1.0 / (1.0 + math.exp(-eps)))  # as the sampler draws it


def she_scale(eps: float) -> float:
    """SHE: Laplace noise of scale b = 2/ε on every coordinate ([WAN17] §4.3: sensitivity 2)."""
    eps = check.budget("SHE", "eps", eps)
    return 2.0 / eps


def the_probabilities(eps: float, theta: float) -> tuple[float, float, float]:
    """THE: (p, q, 1 − p) of the bit [x_i + Lap(2/ε) > θ] for x_i = 1 and x_i = 0 ([WAN17] §4.3).

    With b = 2/ε and L ~ Laplace(b): Pr[L > t] = ½e^{−t/b} for t ≥ 0 and 1 − ½e^{t/b} for
    t < 0. For θ ∈ (0, 1): p = Pr[L > θ − 1] = 1 − ½e^{−(1 − θ)ε/2}, q = ½e^{−θε/2}, each as the
    sampler draws it (:func:`longldp.privacy.drawn`), and 1 − p (exact in float64).
    """
    eps = check.budget("THE", "eps", eps)
    theta = check.positive_float("THE", "theta", theta, upper=1.0)
    # As the sampler draws them (privacy.drawn): p and q multiples of 2⁻⁵³, so 1 − p is exact.
    p = privacy.drawn(1.0 - 0.5 * math.exp(-(1.0 - theta) * eps / 2))
    return p, privacy.drawn(0.5 * math.exp(-theta * eps / 2)), 1.0 - p


def the_unit_variance(eps: float, theta: float) -> float:
    """n·V* of THE over an identity sketch: q(1 − q)/(p − q)² (math (1.3))."""
    p, q, _ = the_probabilities(eps, theta)
    return q * (1 - q) / (p - q) ** 2


def the_optimal_theta(eps: float) -> float:
    """θ ∈ [½, 1) minimising THE's V* ([WAN17] §4.3 gives the range; we minimise exactly).

    V*(θ) is unimodal on [½, 1); a golden-section search to 1e-12 (no SciPy in the core),
    rounded to 6 decimals so that every client derives the same θ.
    """
    eps = check.budget("THE", "eps", eps)
    lo, hi = 0.5, 1.0 - 1e-9
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = the_unit_variance(eps, a), the_unit_variance(eps, b)
    while hi - lo > 1e-12:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = the_unit_variance(eps, a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = the_unit_variance(eps, b)
    # Rounded to 6 decimals: V* is flat at its minimum, so the last bits of exp (which differ
    # between C libraries and JavaScript engines) move the search's end by ~1e-10; the rounded
    # θ is the same in every client (V* changes by O(1e-12)).
    return round((lo + hi) / 2, 6)


def ue_bits_epsilon(p: float, q: float, not_p: float | None = None) -> float:
    """ε of one report of independent bits where two inputs differ in two positions:
    ln[p(1 − q)/((1 − p)q)] (CMS with q = 1 − p, THE; math (2.2))."""
    return privacy.ue_report_epsilon(p, q, not_p, 1 - q)


# --------------------------------------------------------------------------------------------
# Supports, variance and collisions (docs/math.md §21.3)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SketchMoments:
    """Moments of one user's support S of a queried item x (docs/math.md §21.3).

    ``P1``: E[S] when the user holds x (or, hashed, collides with x in her row); ``q``: E[S]
    when she neither holds nor collides; ``P0``: E[S] for a non-holder over the hash draw;
    ``v1``, ``v0``: Var[S] for a holder and (over the hash draw) a non-holder; ``signed``: the
    count sketch's sign hash (a collision moves the mean by ±(P1 − q), zero in mean);
    ``m``, ``d``: columns and rows; ``hashed``: False for an identity sketch (m = the domain).
    """

    kind: str
    P1: float
    q: float
    P0: float
    v1: float
    v0: float
    m: int
    d: int
    hashed: bool
    signed: bool

    @property
    def gap(self) -> float:
        """P1 − P0, the estimator's denominator."""
        return self.P1 - self.P0

    def variance(self, n: int, f: ArrayLike, sum_f2: float | None = None) -> NDArray[np.float64]:
        """Exact Var[f̂_x] over the noise, the rows and the hash draw (docs/math.md (21.4)).

        ``f``: the queried items' frequencies; ``sum_f2``: Σ_y f_y² over *all* items (needed
        when hashed: collisions couple x with every other item; default: Σ over ``f``).
        """
        f = np.asarray(f, dtype=np.float64)
        base = (f * self.v1 + (1 - f) * self.v0) / (n * self.gap**2)
        if not self.hashed:
            return base
        total = float(np.sum(f**2)) if sum_f2 is None else float(sum_f2)
        return base + collision_variance(f, total, n, self.m, self.d, self.signed)

    def null_sd(self, n: int, sum_f2: float = 0.0) -> float:
        """Standard error of f̂ for an item nobody holds (the discovery tests' null)."""
        return float(np.sqrt(self.variance(n, 0.0, sum_f2)))

    @property
    def v_other(self) -> float:
        """Var of the support of a user whose column is not the queried one (no collision):
        q(1 − q) for the Bernoulli kinds, the Laplace noise 8/ε² for SHE."""
        return self.v1 if self.kind == "she" else self.q * (1 - self.q)


def row_shares(mom: SketchMoments, stat: ArrayLike, n_rows: ArrayLike) -> NDArray[np.float64]:
    """F̂[j, c] = (S[j, c]/n_j − q)/(P1 − q): each cell's share of its row's n_j users, unbiased
    given the rows (PCS: the signed share Σ g/n_j); 0 in an empty row (docs/math.md (21.12))."""
    s = np.asarray(stat, dtype=np.float64)
    nj = np.asarray(n_rows, dtype=np.float64)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (s / nj - mom.q) / (mom.P1 - mom.q)
    return np.where(nj > 0, out, 0.0)


def cell_variance(mom: SketchMoments, share: ArrayLike, n_rows: ArrayLike) -> NDArray[np.float64]:
    """Var(S[j, c])/(P1 − P0)² given the rows: n_j·(F·v1 + (1 − F)·v_other)/(P1 − P0)², F the
    cell's share clipped to [0, 1] (|F| for PCS); what a cell of the debiased sketch E varies
    by, times n² (docs/math.md (21.12))."""
    f = np.clip(np.abs(np.asarray(share, dtype=np.float64)), 0.0, 1.0)
    nj = np.asarray(n_rows, dtype=np.float64)[..., None]
    return nj * (f * mom.v1 + (1 - f) * mom.v_other) / mom.gap**2


def sum_f2_estimate(mom: SketchMoments, stat: ArrayLike, n_rows: ArrayLike, n: int) -> float:
    """Σ_y f_y² over every item, estimated from one sketch (docs/math.md (21.13)).

    Per row j (n_j ≥ 2): Q_j = Σ_c F̂²_jc − (v1 + (m − 1)·v_other)/(n_j (P1 − q)²) is unbiased for
    Σ_c F²_jc; two distinct users of the row share a column with probability
    π_j = (Q_j − 1/n_j)/(1 − 1/n_j), which is π + (1 − π)/m for an unsigned sketch and π for
    the signed one (a collision of distinct items has a zero-mean sign product), π the share of
    pairs of users holding the same item. Rows are pooled by n_j, and
    Σf² = π(1 − 1/n) + 1/n, clipped to [1/n, 1].
    """
    n = check.integer(OWNER, "n", n, minimum=1)
    nj = np.asarray(n_rows, dtype=np.float64)
    share = row_shares(mom, stat, nj)
    live = nj >= 2
    if not np.any(live):
        return 1.0
    noise = (mom.v1 + (mom.m - 1) * mom.v_other) / (nj[live] * (mom.P1 - mom.q) ** 2)
    q = np.sum(share[live] ** 2, axis=-1) - noise
    pair = (q - 1 / nj[live]) / (1 - 1 / nj[live])
    if not mom.signed:
        pair = (pair - 1 / mom.m) / (1 - 1 / mom.m)
    pi = float(np.sum(nj[live] * pair) / np.sum(nj[live]))
    return float(min(1.0, max(1.0 / n, pi * (1 - 1 / n) + 1 / n)))


def collision_variance(
    f: ArrayLike, sum_f2: float, n: int, m: int, d: int, signed: bool
) -> NDArray[np.float64]:
    """Extra Var[f̂_x] from users who share a row's hash function (docs/math.md (21.3)).

    Two users holding the same y ≠ x in the same row collide with x together: their supports
    are correlated with covariance (P1 − q)²·Var(A)/d, A the collision indicator (or signed
    indicator). Summed over pairs and divided by (n(P1 − P0))²:
    Σ_{y≠x} f_y(f_y − 1/n) / (d(m − 1)) unsigned, / (d·m) signed.
    """
    f = np.asarray(f, dtype=np.float64)
    pairs = (sum_f2 - f**2) - (1.0 - f) / n
    return np.maximum(pairs, 0.0) / (d * (m if signed else m - 1))


def _hashed_p0(P1: float, q: float, m: int, hashed: bool, signed: bool) -> float:
    return q if (not hashed or signed) else q + (P1 - q) / m


def _bernoulli(kind: str, P1: float, q: float, m: int, d: int, hashed: bool) -> SketchMoments:
    signed = kind == "pcs"
    P0 = _hashed_p0(P1, q, m, hashed, signed)
    return SketchMoments(kind, P1, q, P0, P1 * (1 - P1), P0 * (1 - P0), m, d, hashed, signed)


def check_shape(owner: str, m: int, d: int, hashed: bool) -> tuple[int, int]:
    """Columns m ≥ 2 (a power of two for HCMS is checked by its owner) and rows d ≥ 1."""
    m = check.integer(owner, "m", m, minimum=2, maximum=M_MAX)
    d = check.integer(owner, "d", d, minimum=1, maximum=D_MAX)
    if not hashed and d != 1:
        raise ValueError(f"{owner}: an identity sketch (hashed=False) has 'd' = 1; got {d}.")
    return m, d


def sketch_moments(
    kind: str,
    eps: float,
    m: int,
    d: int = 1,
    *,
    hashed: bool = True,
    theta: float | None = None,
) -> SketchMoments:
    """One-shot moments of a sketch oracle (docs/math.md §21.2–§21.3).

    - CMS: S = the report's bit at column h_J(x); P1 = 1 − p, q = p (p the flip probability).
    - HCMS: S = [report bit = parity of (l, h_J(x))]; P1 = e^ε/(1 + e^ε), q = ½.
    - PCS: S = [g_J(x)·w[h_J(x)] = +1]; P1 = e^ε/(1 + e^ε), q = ½, signed (P0 = ½).
    - SHE: S = x̃[h_J(x)] = 1[collide] + Laplace(2/ε); P1 = 1, q = 0, v = 8/ε² + Var(A).
    - THE: S = [x̃[h_J(x)] > θ]; P1 = p_θ, q = q_θ of :func:`the_probabilities`.
    """
    kind = check.choice(OWNER, "kind", kind, SKETCH_KINDS)
    m, d = check_shape(kind.upper(), m, d, hashed)
    if kind == "cms":
        p = cms_flip_probability(eps)
        return _bernoulli(kind, 1.0 - p, p, m, d, hashed)
    if kind in ("hcms", "pcs"):
        return _bernoulli(kind, rr_keep_probability(eps, kind.upper()), 0.5, m, d, hashed)
    if kind == "the":
        th = the_optimal_theta(eps) if theta is None else theta
        p, q, _ = the_probabilities(eps, th)
        return _bernoulli(kind, p, q, m, d, hashed)
    noise = 2 * she_scale(eps) ** 2  # Var of Laplace(b) is 2b²
    spread = (1 / m) * (1 - 1 / m) if hashed else 0.0
    P0 = 1 / m if hashed else 0.0
    return SketchMoments(kind, 1.0, 0.0, P0, noise, noise + spread, m, d, hashed, False)


def sketch_epsilon(kind: str, eps: float, theta: float | None = None) -> float:
    """Exact ε of one report, from the probabilities the sampler uses (docs/math.md §21.4).

    CMS 2·ln((1 − p)/p); HCMS and PCS ln(p/(1 − p)); SHE 2/b (two coordinates move by 1 under
    Laplace(b)); THE ln[p(1 − q)/((1 − p)q)], which is *below* the nominal ε (thresholding on
    the device is post-processing of SHE). Rounded outward (:func:`privacy.round_up`).
    """
    kind = check.choice(OWNER, "kind", kind, SKETCH_KINDS)
    if kind == "cms":
        p = cms_flip_probability(eps)
        keep = 1.0 - p  # the sampler's P1; 1 − keep is exact in floating point
        return privacy.round_up(ue_bits_epsilon(keep, p, 1.0 - keep))
    if kind in ("hcms", "pcs"):
        p = rr_keep_probability(eps, kind.upper())
        return privacy.round_up(math.log(p / (1 - p)))
    if kind == "she":
        return privacy.round_up(2 / she_scale(eps))
    th = the_optimal_theta(eps) if theta is None else theta
    p, q, not_p = the_probabilities(eps, th)
    return privacy.round_up(ue_bits_epsilon(p, q, not_p))


# --------------------------------------------------------------------------------------------
# Memoized forms (docs/math.md §21.5)
# --------------------------------------------------------------------------------------------


def sketch_chain(kind: str, eps_perm: float, eps_1: float) -> tuple[float, float, float, float]:
    """(p1, q1, p2, q2) of the memoized CMS and HCMS (docs/math.md §21.5).

    CMS: the L-SUE chain per column (RAPPOR's PRR/IRR with one hash): p1 = e^{ε∞/2}/(1 +
    e^{ε∞/2}), q1 = 1 − p1, round 2 symmetric with :func:`privacy.lsue_p2`. HCMS: binary
    L-GRR per Hadamard bit (L-SH's chain): p1 = GRR(ε∞, 2), p2 = :func:`privacy.lgrr_p2`.
    """
    kind = check.choice(OWNER, "kind", kind, MEMO_KINDS)
    if kind == "cms":
        p1, q1 = privacy.sue_probabilities(eps_perm)
        p2 = privacy.lsue_p2(eps_perm, eps_1)
    else:
        p1, q1 = privacy.grr_probabilities(eps_perm, 2)
        p2 = privacy.lgrr_p2(2, eps_perm, eps_1)
    return p1, q1, p2, 1 - p2


def chain_moments(
    kind: str, eps_perm: float, eps_1: float, m: int, d: int = 1, *, hashed: bool = True
) -> SketchMoments:
    """Moments of a memoized sketch's reports: P1 of the composed chain (math (3.1)); q is the
    chain's P0 for CMS and ½ for HCMS (the Hadamard parity of another column is a fair coin)."""
    kind = check.choice(OWNER, "kind", kind, MEMO_KINDS)
    m, d = check_shape(kind.upper(), m, d, hashed)
    P1, q = privacy.chain_support(*sketch_chain(kind, eps_perm, eps_1))
    if kind == "hcms":  # a non-colliding user's bit is independent of x's parity: q = ½
        q = 0.5
    return _bernoulli(kind, P1, q, m, d, hashed)


def chain_epsilons(kind: str, eps_perm: float, eps_1: float) -> tuple[float, float]:
    """Exact (ε of round 1, ε of one report) of a memoized sketch (docs/math.md §21.5).

    CMS: two columns differ, ε∞ = 2 ln(p1/q1), ε1 = 2 ln(P1/P0); HCMS: one bit, ln(p1/q1) and
    ln(P1/(1 − P1)).
    """
    p1, q1, p2, q2 = sketch_chain(kind, eps_perm, eps_1)
    P1, P0 = privacy.chain_support(p1, q1, p2, q2)
    N1, N0 = privacy.chain_nonsupport(p1, q1, p2, q2)
    if kind.lower() == "cms":
        return privacy.round_up(2 * math.log(p1 / q1)), privacy.round_up(
            privacy.ue_report_epsilon(P1, P0, N1, N0)
        )
    return privacy.round_up(math.log(p1 / q1)), privacy.round_up(math.log(P1 / N1))


# --------------------------------------------------------------------------------------------
# Heavy-hitter discovery (docs/math.md §21.6–§21.8)
# --------------------------------------------------------------------------------------------

DISCOVERY_METHODS = ("pem", "treehist", "sfp")


def prefix_lengths(width: int, start: int, step: int, owner: str = "PEM") -> tuple[int, ...]:
    """Prefix lengths of the rounds: start + step, start + 2·step, …, width (the last step may
    be shorter) ([WLJ19] §4; TreeHist is start = 0, step = 1 ([BNST17] §3))."""
    width = check.integer(owner, "width", width, minimum=1, maximum=64)
    start = check.integer(owner, "start", start, minimum=0, maximum=width - 1)
    step = check.integer(owner, "step", step, minimum=1, maximum=width)
    out = list(range(start + step, width, step))
    return (*out, width)


def group_sizes(n: int, groups: int) -> tuple[int, ...]:
    """Sizes of a balanced partition of n users into ``groups`` (the first n mod g get one more)."""
    n = check.integer("discovery", "n", n, minimum=1)
    groups = check.integer("discovery", "groups", groups, minimum=1)
    if groups > n:
        raise ValueError(f"discovery: 'groups' must be <= n = {n}; got {groups}.")
    base, extra = divmod(n, groups)
    return tuple(base + (1 if r < extra else 0) for r in range(groups))


def split_budget(owner: str, eps: float, share: float) -> tuple[float, float]:
    """(share·ε, (1 − share)·ε): one user's two reports, composed sequentially (math §4)."""
    eps = check.budget(owner, "eps", eps)
    share = check.positive_float(owner, "share", share, upper=1.0)
    return eps * share, eps * (1.0 - share)


def z_quantile(p: float) -> float:
    """Φ⁻¹(p) of the standard normal."""
    return NormalDist().inv_cdf(p)


def detection_threshold(null_sd: float, tests: int, alpha: float) -> float:
    """T = z_{1 − α/M}·σ₀: a candidate is kept when f̂ > T (docs/math.md (21.6)).

    Bonferroni over the M candidates of a round: the expected number of candidates nobody holds
    that pass is at most α (normal approximation of the null f̂, whose sd is σ₀).
    """
    tests = check.integer("discovery", "tests", tests, minimum=1)
    alpha = check.positive_float("discovery", "alpha", alpha, upper=1.0)
    return z_quantile(1.0 - alpha / tests) * null_sd


def miss_probability(f: ArrayLike, threshold: float, sd: ArrayLike) -> NDArray[np.float64]:
    """Pr[f̂ ≤ T] for an estimate of mean f and sd ``sd`` (normal approximation): Φ((T − f)/sd)."""
    nd = NormalDist()
    f = np.asarray(f, dtype=np.float64)
    s = np.broadcast_to(np.asarray(sd, dtype=np.float64), f.shape)
    return np.array(
        [nd.cdf((threshold - a) / b) for a, b in zip(f.ravel(), s.ravel(), strict=True)]
    ).reshape(f.shape)


def group_sampling_variance(f: ArrayLike, n: int, n_group: int) -> NDArray[np.float64]:
    """Var of an item's share in a uniformly random group of n_g of the n users
    (hypergeometric): f(1 − f)/n_g · (n − n_g)/(n − 1). Added to a round's noise when a
    population frequency is compared with a threshold (docs/math.md §21.6)."""
    f = np.asarray(f, dtype=np.float64)
    if n <= 1:
        return np.zeros_like(f)
    return f * (1 - f) / n_group * (n - n_group) / (n - 1)


def olh_moments(eps: float) -> tuple[int, float, float]:
    """(g, P1, P0) of OLH, the frequency oracle PEM runs in every round ([WLJ19] §4, [WAN17])."""
    g = privacy.olh_optimal_g(eps)
    return g, privacy.grr_probabilities(eps, g)[0], 1.0 / g


def olh_chain(eps_perm: float, eps_1: float) -> tuple[int, float, float, float, float]:
    """(g, p1, q1, p2, q2) of the memoized local hashing a longitudinal discovery round runs
    (OLOLOHA, [ARC23]; math §3.4): GRR over g buckets at ε∞, memoized per bucket, then L-GRR's
    round 2 calibrated so that one report costs ε1."""
    g = privacy.loloha_optimal_g(eps_perm, eps_1)
    p1 = privacy.grr_probabilities(eps_perm, g)[0]
    p2 = privacy.lgrr_p2(g, eps_perm, eps_1)
    return g, p1, (1 - p1) / (g - 1), p2, (1 - p2) / (g - 1)
