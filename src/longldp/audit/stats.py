"""Clopper–Pearson bounds and the ε lower bound of a distinguishing test (docs/math.md §13.3).

A test is a set T of outputs. If the mechanism is ε-LDP, Pr[T | x0] ≤ e^ε·Pr[T | x1] for
every T, so ε ≥ ln(Pr[T | x0]/Pr[T | x1]). From n0 trials in world x0 with TP of them in T, and
n1 trials in world x1 with FP in T, the one-sided Clopper–Pearson bounds at level α/2 each give,
with probability at least 1 − α,

    ε ≥ ln( CP_lower(TP, n0; α/2) / CP_upper(FP, n1; α/2) ),

valid for any T fixed before the evaluation trials are drawn. The threshold that defines T is
chosen on separate calibration trials (:func:`choose_threshold`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betaincinv


def cp_lower(successes: ArrayLike, trials: ArrayLike, level: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson lower bound: Pr[p ≥ bound] ≥ 1 − level (0 when x = 0)."""
    x, n = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        # Beta⁻¹(level; x, n − x + 1); betaincinv is beta.ppf without its argument checks.
        out = betaincinv(np.maximum(x, 1e-300), n - x + 1, level)
    return np.where(x <= 0, 0.0, out)


def cp_upper(successes: ArrayLike, trials: ArrayLike, level: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson upper bound: Pr[p ≤ bound] ≥ 1 − level (1 when x = n)."""
    x, n = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = betaincinv(x + 1, np.maximum(n - x, 1e-300), 1 - level)
    return np.where(x >= n, 1.0, out)


def epsilon_lower_bound(tp: ArrayLike, n0: int, fp: ArrayLike, n1: int, alpha: float) -> NDArray:
    """ln(CP_lower(TP)/CP_upper(FP)) at level α/2 each: a (1 − α) lower bound on ε (≥ 0)."""
    lo, hi = cp_lower(tp, n0, alpha / 2), cp_upper(fp, n1, alpha / 2)
    with np.errstate(divide="ignore"):
        return np.maximum(0.0, np.log(lo) - np.log(hi))


def point_epsilon(tp: int, n0: int, fp: int, n1: int) -> float:
    """The plug-in ln((TP/n0)/(FP/n1)): an estimate, not a bound (∞ when FP = 0 < TP)."""
    if tp == 0:
        return 0.0
    if fp == 0:
        return math.inf
    return max(0.0, math.log((tp / n0) / (fp / n1)))


def counts_at_or_above(sorted_scores: NDArray, thresholds: NDArray) -> NDArray[np.int64]:
    """#{s ≥ t} for every threshold t, given the scores sorted ascending."""
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="left")


def choose_threshold(
    s0: NDArray, s1: NDArray, alpha: float, max_candidates: int = 512
) -> tuple[float, float]:
    """The threshold t of T = {s ≥ t} with the largest lower bound on the calibration trials.

    ``s0`` are calibration scores from world x0, ``s1`` from world x1. Each candidate t is
    ranked by the Clopper–Pearson bound its own calibration counts give at the stricter level
    α/100, which penalizes sets seen only a few times (ranking by the plug-in ratio, or at α
    itself, picks thin sets that won by chance among near-equal candidates). Candidates: the
    distinct calibration scores, thinned to ``max_candidates`` quantiles. Returns (t, its
    calibration bound). The choice only affects power, never validity: the evaluation trials
    are fresh.
    """
    s0, s1 = np.sort(np.asarray(s0, dtype=np.float64)), np.sort(np.asarray(s1, dtype=np.float64))
    cand = np.unique(np.concatenate([s0, s1]))
    if cand.size > max_candidates:
        cand = np.unique(np.quantile(cand, np.linspace(0, 1, max_candidates)))
    tp = counts_at_or_above(s0, cand)
    fp = counts_at_or_above(s1, cand)
    bound = epsilon_lower_bound(tp, s0.size, fp, s1.size, alpha / 100)
    best = int(np.argmax(bound))
    return float(cand[best]), float(bound[best])
