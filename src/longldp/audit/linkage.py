"""Linkage attacks on the shuffled central figures (docs/math.md §17.7, docs/audit.md §8).

A central figure of :mod:`longldp.shuffle` is a claim that a shuffled collection is (ε, δ)-DP
toward whoever receives each epoch's multiset of reports. This module attacks such a claim with
the strongest analyst the reports allow, through the protocol's own client path
(:meth:`~longldp.protocols.FrequencyOracle.perturb` on a persistent population memo, so hash
seeds, rows, cohorts, sampled buckets and memos persist exactly as on a device).

Setting: n devices and τ epochs; the target device holds x1 (world 1) or x0 (world 0) at every
epoch, the n − 1 others hold x0 (x0 = 0 and x1 = the last input, so that the two differ in
every memo key). The analyst knows the protocol and sees one of two views:

- ``"tuples"``: the shuffled multiset of the devices' whole τ-tuples of reports. It is what an
  analyst behind a per-epoch shuffler obtains when the reports carry a per-device field that
  persists (a hash seed, a Hadamard row, a cohort, a bucket map: it groups each device's
  reports by that field), and what routes "tuple" and, for one memo per device, "memo" bound
  (both views are post-processings of what those routes shuffle, docs/math.md §17.4);
- ``"epochs"``: τ independent per-epoch multisets, what route "epochs" bounds, for clients
  where nothing persists.

With every other device holding x0, the likelihood ratio of a multiset of n tuples is
(1/n)·Σ_u Pr[T_u | x1]/Pr[T_u | x0] (the target is any of the n tuples, the rest are x0's), and
of independent epochs the product of the epochs' ratios; the per-device ratios come from
:func:`longldp.audit.likelihood.log_likelihoods` (the protocol's public parameters and per-
device fields, a memo per value for a chain). By Neyman–Pearson the event T = {ln LR > ε}
maximizes Pr[T | x1] − e^ε·Pr[T | x0] over all events, so it is the most powerful test of a
claimed (ε, δ) at its ε (and {ln LR < −ε} of the other direction). From ``trials`` worlds of
each kind, one-sided Clopper–Pearson bounds (docs/math.md §13.3) give, with probability at least
1 − α over the trials, the lower bound

    δ ≥ CP_lower(hits in world 1) − e^ε·CP_upper(hits in world 0)   (each at level α/4)

(the larger of the two directions), which a valid claim must not exceed; and the lower bound
ε_lb = ln((CP_lower − δ)/CP_upper) on ε at the claimed δ.

Sizes come from the claim: :func:`trials_for` gives the number of worlds per kind with which a
clear violation (an event with probability ½ in world 1 and 0 in world 0) would show
δ_lb ≥ ¼ − O(1/√trials) at the claimed ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from longldp import _validate as check
from longldp.audit import stats
from longldp.audit.likelihood import domain_size, log_likelihoods
from longldp.audit.randomizers import protocol_inputs
from longldp.protocols import FrequencyOracle

VIEWS = ("tuples", "epochs")
#: Devices perturbed per ``perturb`` call (bounds the memory of one epoch's reports).
CHUNK_DEVICES = 1 << 17


@dataclass(frozen=True)
class LinkageAttack:
    """One attack on a claimed central (ε, δ): its worlds, its hits and its lower bounds.

    ``hits`` = (world-1 trials with ln LR > ε, world-0 trials with ln LR > ε, world-0 trials
    with ln LR < −ε, world-1 trials with ln LR < −ε); ``delta_lower`` is the measured lower
    bound on δ at the claimed ε and ``epsilon_lower`` on ε at the claimed δ, both at
    confidence 1 − ``alpha``.
    """

    protocol: str
    view: str
    n: int
    epochs: int
    trials: int
    claim_epsilon: float
    claim_delta: float
    alpha: float
    hits: tuple[int, int, int, int]
    delta_lower: float
    epsilon_lower: float

    @property
    def within_claim(self) -> bool:
        """The measured lower bounds do not exceed the claim."""
        return self.delta_lower <= self.claim_delta and self.epsilon_lower <= self.claim_epsilon


def trials_for(claim_epsilon: float, alpha: float = 0.01) -> int:
    """Worlds of each kind that let a clear violation of (ε, ·) show: ⌈4·e^ε·ln(4/α)⌉.

    With an event of probability ½ in world 1 and 0 in world 0, CP_upper(0 of N) at level α/4
    is ln(4/α)/N to first order, so δ_lb ≈ ½ − e^ε·ln(4/α)/N − O(1/√N) = ¼ − O(1/√N).
    """
    eps = check.positive_float("trials_for", "claim_epsilon", claim_epsilon, upper=700.0)
    alpha = check.positive_float("trials_for", "alpha", alpha, upper=1.0)
    return math.ceil(4.0 * math.exp(eps) * math.log(4.0 / alpha))


def world_scores(
    proto: FrequencyOracle, view: str, n: int, epochs: int, trials: int, target: int, rng: Any
) -> NDArray[np.float64]:
    """ln LR (x1 against x0) of ``trials`` independent worlds in which the target device holds
    ``target`` (x0 = 0 or x1) at every epoch and the n − 1 others hold 0.

    The worlds are blocks of n devices of one population, so each epoch is one ``perturb``
    call per :data:`CHUNK_DEVICES` devices.
    """
    owner = "linkage_attack"
    view = check.choice(owner, "view", view, VIEWS)
    x1 = domain_size(proto) - 1
    codes = np.zeros(trials * n, dtype=np.int64)
    codes[::n] = target
    scores = np.zeros(trials)
    per_chunk = max(1, CHUNK_DEVICES // n)  # whole worlds per chunk
    for start in range(0, trials, per_chunk):
        count = min(per_chunk, trials - start)
        block = codes[: count * n]
        inputs = protocol_inputs(proto, block)
        memo = proto.new_memo(block.size)
        reports = [proto.perturb(inputs, memo, rng) for _ in range(epochs)]
        if view == "tuples":
            ll = log_likelihoods(proto, reports, memoized=proto.longitudinal)
            scores[start : start + count] = _multiset_log_lr(ll, x1, count, n)
        else:
            for rep in reports:
                ll = log_likelihoods(proto, [rep], memoized=False)
                scores[start : start + count] += _multiset_log_lr(ll, x1, count, n)
    return scores


def _multiset_log_lr(ll: NDArray, x1: int, worlds: int, n: int) -> NDArray[np.float64]:
    """ln[(1/n)·Σ_u Pr[T_u | x1]/Pr[T_u | x0]] per world (x0 = 0)."""
    llr = (ll[:, x1] - ll[:, 0]).reshape(worlds, n)
    return logsumexp(llr, axis=1) - math.log(n)


def linkage_attack(
    proto: FrequencyOracle,
    n: int,
    epochs: int,
    claim_epsilon: float,
    claim_delta: float,
    view: str = "tuples",
    trials: int | None = None,
    alpha: float = 0.01,
    rng: Any = None,
) -> LinkageAttack:
    """Attack the claim that ``epochs`` shuffled epochs of ``n`` devices are
    (``claim_epsilon``, ``claim_delta``)-DP, by the likelihood-ratio test on ``view``.

    ``trials`` worlds of each kind (default :func:`trials_for` of the claim). See the module
    docstring for the worlds, the views and the bounds.
    """
    owner = "linkage_attack"
    n = check.integer(owner, "n", n, minimum=1)
    epochs = check.integer(owner, "epochs", epochs, minimum=1)
    eps = check.positive_float(owner, "claim_epsilon", claim_epsilon, upper=700.0)
    delta = check.positive_float(owner, "claim_delta", claim_delta, upper=1.0)
    alpha = check.positive_float(owner, "alpha", alpha, upper=1.0)
    trials = trials_for(eps, alpha) if trials is None else trials
    trials = check.integer(owner, "trials", trials, minimum=1)
    rng = np.random.default_rng(rng)
    world1 = world_scores(proto, view, n, epochs, trials, domain_size(proto) - 1, rng)
    world0 = world_scores(proto, view, n, epochs, trials, 0, rng)
    hits = (
        int(np.sum(world1 > eps)),
        int(np.sum(world0 > eps)),
        int(np.sum(world0 < -eps)),
        int(np.sum(world1 < -eps)),
    )
    level = alpha / 4  # two directions, two Clopper–Pearson bounds each
    lows = stats.cp_lower(np.array([hits[0], hits[2]]), trials, level)
    highs = stats.cp_upper(np.array([hits[1], hits[3]]), trials, level)
    delta_lower = float(max(0.0, np.max(lows - math.exp(eps) * highs)))
    with np.errstate(divide="ignore", invalid="ignore"):
        eps_lb = np.where(lows > delta, np.log((lows - delta) / highs), 0.0)
    return LinkageAttack(
        protocol=proto.name,
        view=view,
        n=n,
        epochs=epochs,
        trials=trials,
        claim_epsilon=eps,
        claim_delta=delta,
        alpha=alpha,
        hits=hits,
        delta_lower=delta_lower,
        epsilon_lower=float(max(0.0, np.max(eps_lb))),
    )
