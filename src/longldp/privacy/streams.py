"""Formulas of the families for data that changes (docs/math.md §19): one formula, one place.

Pure scalar functions (plus a few tiny integer helpers) used by the stream mechanisms of
``longldp.protocols.streams`` and by the accounting of :mod:`longldp.privacy.ledger`:

- the frequency oracle every LDP-IDS method runs each epoch (GRR or OUE, picked by the rule
  of Wang et al. 2017), its probabilities and its variance averaged over the domain (§19.1);
- the LDP-IDS decisions: dissimilarity, budget distribution (LBD), budget and population
  absorption (LBA, LPA), population distribution (LPD) (§19.2);
- THRESH's vote and estimate budgets and its update threshold (§19.3);
- the dyadic tree of CHANGES-TREE and DDRM, the node randomizers and their exact ε (§19.4–19.5).

Notation: domain [0, k), n users, τ epochs, window w, ε the budget of a window (w-event) or of
one report (change-based).

References
----------
[REN22] X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu, "LDP-IDS: Local differential privacy
        for infinite data streams", ACM SIGMOD 2022 (arXiv:2204.00526).
[KEL14] G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias, "Differentially private event
        sequences over infinite streams", PVLDB 7(12), 2014 (BD, BA: the central templates).
[JOS18] M. Joseph, A. Roth, J. Ullman, B. Waggoner, "Local differential privacy for evolving
        data", NeurIPS 2018 (arXiv:1802.07128), THRESH.
[ERL19] Ú. Erlingsson, V. Feldman, I. Mironov, A. Raghunathan, K. Talwar, A. Thakurta,
        "Amplification by shuffling: from local to central differential privacy via
        anonymity", ACM-SIAM SODA 2019, the local protocol for data that changes a bounded
        number of times.
[XUE22] Q. Xue, Q. Ye, H. Hu, Y. Zhu, J. Wang, "DDRM: A continual frequency estimation
        mechanism with local differential privacy", IEEE TKDE 35(7), 2023 (online 2022).
[WAN17] T. Wang, J. Blocki, N. Li, S. Jha, USENIX Security 2017 (GRR, OUE, the GRR/OUE rule).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import drawn, grr_probabilities, oue_probabilities

#: The two frequency oracles a stream mechanism runs, and the choices a user may give.
FO_KINDS = ("grr", "oue")
ORACLES = ("adaptive", "grr", "oue")

#: The LDP-IDS methods ([REN22] §4–§6): budget division (every user reports every epoch with a
#: share of ε) and population division (a share of the users reports with the whole ε).
BUDGET_DIVISION = ("LBU", "LSP", "LBD", "LBA")
POPULATION_DIVISION = ("LPU", "LPD", "LPA")
WEVENT_METHODS = BUDGET_DIVISION + POPULATION_DIVISION


# --------------------------------------------------------------------------------------------
# §19.1 The frequency oracle of one epoch
# --------------------------------------------------------------------------------------------


def fo_kind(oracle: str, k: int, eps: float) -> str:
    """The oracle an epoch runs: GRR when k < 3e^ε + 2, else OUE (docs/math.md §19.1).

    "adaptive" applies the rule of [WAN17] §4.5 (GRR's variance is below OUE's exactly when
    k − 2 < 3e^ε), which [REN22] uses at every epoch's budget; "grr" and "oue" force one.
    """
    oracle = check.choice("streams", "oracle", oracle, ORACLES)
    if oracle != "adaptive":
        return oracle
    return "grr" if k < 3.0 * math.exp(eps) + 2.0 else "oue"


def fo_probabilities(kind: str, k: int, eps: float) -> tuple[float, float]:
    """(P1, P0) of one report of the oracle ``kind`` at ε (docs/math.md §2.1, §2.2)."""
    kind = check.choice("streams", "kind", kind, FO_KINDS)
    return grr_probabilities(eps, k) if kind == "grr" else oue_probabilities(eps)


def fo_mean_variance(kind: str, k: int, eps: float, m: int) -> float:
    """Variance of f̂_v averaged over the k values, for m reporters (docs/math.md (19.1)).

    (1/k)·Σ_v Var[f̂_v] = [P1(1 − P1) + (k − 1)·P0(1 − P0)] / (k·m·(P1 − P0)²): the mean of
    (1.2) over v needs only Σ_v f_v = 1, so it does not depend on the data. It is the ``err``
    with which [REN22] (§4.2, eq. of the publication error) compares the dissimilarity.
    """
    m = check.integer("streams", "m", m, minimum=1)
    p1, p0 = fo_probabilities(kind, k, eps)
    return (p1 * (1 - p1) + (k - 1) * p0 * (1 - p0)) / (k * m * (p1 - p0) ** 2)


def sampling_variance(f: ArrayLike, m: int, n: int) -> NDArray:
    """Variance of the share of v among m users drawn without replacement from n (§19.1).

    f(1 − f)·(n − m)/(m·(n − 1)): the hypergeometric variance of a population-division sample;
    it adds to the oracle's variance (1.2) evaluated at the population's f, because (1.2) is
    linear in f (law of total variance).
    """
    f = np.asarray(f, dtype=np.float64)
    if n <= 1:
        return np.zeros_like(f)
    return f * (1 - f) * (n - m) / (m * (n - 1))


def dissimilarity(estimate: ArrayLike, release: ArrayLike, mean_variance: float) -> float:
    """Unbiased squared distance between this epoch's frequencies and the last release (§19.2).

    dis = (1/k)·Σ_v (f̂_v − r_v)² − (1/k)·Σ_v Var[f̂_v] ([REN22] §4.2, after [KEL14] §4): since
    E[(f̂_v − r_v)²] = (f_v − r_v)² + Var[f̂_v], dis is unbiased for (1/k)·Σ_v (f_v − r_v)².
    """
    diff = np.asarray(estimate, dtype=np.float64) - np.asarray(release, dtype=np.float64)
    return float(np.mean(diff * diff) - mean_variance)


# --------------------------------------------------------------------------------------------
# §19.2 LDP-IDS decisions
# --------------------------------------------------------------------------------------------


def check_window(owner: str, w: object) -> int:
    """A window length w: an integer >= 1."""
    return check.integer(owner, "w", w, minimum=1)


def lbd_publication_budget(eps: float, w: int, used: float) -> float:
    """LBD's potential publication budget: half of what the window has left (§19.2).

    ε_{t,2} = (ε/2 − Σ_{i=t−w+1}^{t−1} ε_{i,2})/2 ([REN22] §4.2, Algorithm "LBD", after BD of
    [KEL14] §4.2): the publications of any w consecutive epochs then sum to less than ε/2.
    """
    return max(0.0, (eps / 2.0 - used) / 2.0)


def lpd_publication_users(n: int, w: int, used: int) -> int:
    """LPD's potential publication users: half of what the window has left (§19.2).

    m_{t,2} = ⌊(⌊n/2⌋ − Σ_{i=t−w+1}^{t−1} m_{i,2})/2⌋ ([REN22] §5.2, Algorithm "LPD"): the
    publishers of any w consecutive epochs are fewer than n/2 users.
    """
    return max(0, (n // 2 - used) // 2)


def absorption_units(t: int, last: int, last_units: int, w: int) -> int:
    """Units a BA/PA epoch may spend on publishing: 0 if nullified, else those absorbed (§19.2).

    One unit is ε/(2w) (LBA) or ⌊n/(2w)⌋ users (LPA). The last publication, at epoch l with
    u_l units, absorbed u_l − 1 skipped epochs before it and nullifies the u_l − 1 epochs after
    it ([KEL14] §4.3, Algorithm BA; [REN22] §4.3 and §5.3). At t: if t − l ≤ u_l − 1 the epoch
    is nullified (0); otherwise it absorbs the t − (l + u_l − 1) epochs since, at most w:
    u_t = min(t − l − u_l + 1, w). Before any publication, l = −1 and u_l = 1.
    """
    nullified = last_units - 1
    if t - last <= nullified:
        return 0
    return min(t - (last + nullified), w)


# --------------------------------------------------------------------------------------------
# §19.3 THRESH
# --------------------------------------------------------------------------------------------


def rr_probabilities(eps: float) -> tuple[float, float]:
    """Binary randomized response at ε: keep the bit with p = e^ε/(e^ε + 1), flip with 1 − p.

    p is stored as a draw u < p realizes it (:func:`longldp.privacy.drawn`), so 1 − p is exact
    and the claims read the very probabilities the samplers use (docs/math.md §16.1).
    """
    eps = check.budget("streams", "eps", eps)
    p = drawn(1.0 / (1.0 + math.exp(-eps)))
    return p, 1.0 - p


def thresh_budgets(eps: float, max_votes: int, max_updates: int) -> tuple[float, float]:
    """THRESH's (ε_vote, ε_est): a quarter of ε over each counter's capacity (§19.3).

    Each user holds two counters ([JOS18] §3, Algorithm THRESH): real votes cost ε_vote and
    stop at ε/4, real estimates cost ε_est and stop at ε/4. So ε_vote = ε/(4·max_votes) and
    ε_est = ε/(4·max_updates); any two trajectories are then ε-indistinguishable (§19.3).
    """
    eps = check.budget("THRESH", "eps", eps)
    max_votes = check.integer("THRESH", "max_votes", max_votes, minimum=1)
    max_updates = check.integer("THRESH", "max_updates", max_updates, minimum=1)
    return eps / (4 * max_votes), eps / (4 * max_updates)


def thresh_vote_threshold(n: int, eps_vote: float, z: float) -> float:
    """Share of changed users above which THRESH updates: z standard errors of no change (§19.3).

    The server estimates the share of users voting "changed", ĉ = (ȳ − q)/(p − q) with (p, q)
    the vote's randomized response; with nobody changed ĉ has mean 0 and standard error
    sqrt(q(1 − q)/n)/(p − q), so an update when ĉ > z·SE has a false-alarm rate near
    1 − Φ(z). (Ours: [JOS18] derives its thresholds from Hoeffding bounds at a failure
    probability δ; a z-score is the same test at a stated level.)
    """
    n = check.integer("THRESH", "n", n, minimum=1)
    p, q = rr_probabilities(eps_vote)
    return z * math.sqrt(q * (1 - q) / n) / (p - q)


# --------------------------------------------------------------------------------------------
# §19.4–19.5 The dyadic tree (CHANGES-TREE, DDRM)
# --------------------------------------------------------------------------------------------


def tree_levels(tau: int) -> int:
    """Number of levels L of the dyadic tree over epochs 1..τ: node sizes 1, 2, …, 2^{L−1}."""
    tau = check.integer("streams", "tau", tau, minimum=1)
    return tau.bit_length()


def dyadic_decomposition(t: int) -> list[tuple[int, int]]:
    """The dyadic nodes (level h, end s) whose intervals (s − 2^h, s] tile (0, t] (§19.4).

    One node per set bit of t, largest first: t = 6 gives (2, 4), (1, 6). A prefix sum over
    epochs 1..t is the sum of these ≤ ⌊log2 t⌋ + 1 node sums.
    """
    t = check.integer("streams", "t", t, minimum=0)
    nodes, end = [], 0
    for h in range(t.bit_length() - 1, -1, -1):
        if t >> h & 1:
            end += 1 << h
            nodes.append((h, end))
    return nodes


def trailing_level(s: int) -> int:
    """Level of the largest dyadic node that ends at epoch s ≥ 1: the number of trailing zeros."""
    return (s & -s).bit_length() - 1


def tree_node_probabilities(eps_node: float) -> tuple[float, float]:
    """CHANGES-TREE's per-bit probabilities (p, q) = (1/2, 1/(e^{ε_n/2} + 1)) (§19.4).

    A node's difference (nothing, or "left a, entered b") is encoded on 2k bits (minus part
    e_a, plus part e_b) and each bit is randomized as in OUE: a 1 stays 1 with p = 1/2, a 0
    becomes 1 with q. Two inputs differ on at most four bits, two each way, so the node's ε is
    2·ln(p(1 − q)/(q(1 − p))) = ε_n (:func:`tree_node_epsilon`). q is stored as its draw
    realizes it (:func:`longldp.privacy.drawn`).
    """
    eps_node = check.budget("CHANGES-TREE", "eps_node", eps_node)
    return 0.5, drawn(1.0 / (math.exp(eps_node / 2.0) + 1.0))


def tree_node_epsilon(p: float, q: float) -> float:
    """Exact ε of one CHANGES-TREE node report: 2·ln(p(1 − q)/(q(1 − p))) (§19.4).

    The worst pair is (a → b) against (c → d) with a, b, c, d distinct, or (for k = 2 and k = 3)
    the pairs whose minus and plus parts swap: four bits differ, two each way. Against "no
    change" only two bits differ, which costs 2·max(ln(p/q), ln((1 − q)/(1 − p))) ≤ this.
    """
    return 2.0 * math.log(p * (1 - q) / (q * (1 - p)))


def ddrm_plus_probabilities(eps: float) -> tuple[float, float, float]:
    """DDRM's Pr[report = +1 | Δ] for Δ = −1, 0, +1 (§19.5).

    Pr[+1 | Δ] = 1/2 + Δ·(e^ε − 1)/(2(e^ε + 1)): Δ = ±1 is binary randomized response at ε
    and Δ = 0 a fair coin, independent of the data ([XUE22] §4; a ternary-input randomized
    response). (e^ε + 1)/(e^ε − 1)·y is then unbiased for Δ.
    """
    eps = check.budget("DDRM", "eps", eps)
    p, q = rr_probabilities(eps)
    return q, 0.5, p


def ddrm_scale(eps: float) -> float:
    """c = (e^ε + 1)/(e^ε − 1): a ±1 report times c is unbiased for the node's Δ (§19.5)."""
    eps = check.budget("DDRM", "eps", eps)
    return 1.0 / math.tanh(eps / 2.0)


def ddrm_node_variance(eps: float, delta_sq_mean: float, m: int) -> float:
    """Variance of the mean of m calibrated DDRM reports: (c² − mean Δ²)/m (§19.5).

    Each calibrated report c·y has E = Δ and E[(c·y)²] = c², so its variance is c² − Δ².
    """
    m = check.integer("DDRM", "m", m, minimum=1)
    return (ddrm_scale(eps) ** 2 - delta_sq_mean) / m
