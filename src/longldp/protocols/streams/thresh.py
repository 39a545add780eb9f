"""THRESH: votes to update stale statistics (Joseph, Roth, Ullman, Waggoner, NeurIPS 2018).

docs/math.md §19.3. Each epoch every user sends one randomized-response bit, her *vote*: a real
vote (randomized response of 1 at ε_vote) when her value differs from hers at the last update
and her vote counter has room, otherwise the data-independent default (randomized response of 0).
The server estimates the share of users who changed; above a threshold it runs an *update*:
every user sends a frequency-oracle report of her current value at ε_est (a real report while
her estimate counter has room, otherwise the oracle applied to a fresh uniform value, which does
not depend on her data), and the server publishes the new estimate. Between updates the last
estimate is repeated.

Privacy: a report is either the default or within e^{ε_vote} (vote) or e^{ε_est} (estimate)
of it, and the counters cap each user's real votes at ``max_votes`` and real estimates at
``max_updates``, with ε_vote = ε/(4·max_votes), ε_est = ε/(4·max_updates); any two
trajectories are ε-indistinguishable (docs/math.md (19.6)). What a user spends grows with her
changes (votes) and with the population's changes (updates), never with the epochs alone.

Adaptation to one categorical value per epoch (ours): the paper's users hold bits drawn afresh
each round and compare local means over epochs of ℓ rounds at ⌊log T⌋ urgency levels; with one
value per epoch a user's local statistic either equals its value at the last update or not, so
the levels collapse to one (every changed user votes at every epoch) and the epoch length is 1.
The update rule is a z-score on the vote estimate
(:func:`longldp.privacy.streams.thresh_vote_threshold`). Per-user engine only: the votes need
each user's own change history.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy.streams import (
    fo_kind,
    rr_probabilities,
    thresh_budgets,
    thresh_vote_threshold,
)
from longldp.protocols._rng import RandomSource
from longldp.protocols.streams import oracle


def vote_bits(real: NDArray[np.bool_], p: float, q: float, rng: RandomSource) -> NDArray:
    """Votes of m users: randomized response of 1 (a real vote) or of 0 (the default), one
    uniform each: 1 when u < p (real) or u < q = 1 − p (default) (docs/math.md §19.3)."""
    real = np.asarray(real, dtype=bool)
    return rng.random(real.size) < np.where(real, p, q)


def update_reports(
    held: NDArray[np.int64], kind: str, k: int, eps: float, rng: RandomSource
) -> NDArray:
    """Update reports of m users: the oracle ``kind`` at ε_est applied to each one's value, or,
    for an input of k (her estimate counter is spent: the default), to a fresh uniform value of
    [0, k), which does not depend on her data (docs/math.md §19.3). Draws: one integer of
    [0, k) per default input, in order, then the oracle's draws
    (:func:`longldp.protocols.streams.oracle.perturb`)."""
    held = np.array(held, dtype=np.int64)
    default = held == k
    held[default] = rng.integers(0, k, size=int(default.sum()))
    return oracle.perturb(held, kind, k, eps, rng)


@dataclass(frozen=True)
class ThreshRun:
    """What one THRESH run released and spent.

    ``estimates[τ, k]``: the release at every epoch; ``updates[τ]``: epochs with a fresh
    estimate; ``vote_shares[τ]``: the estimated share of changed users (NaN at epoch 0, which
    always updates); ``real_votes[n]``: each user's real votes; ``real_estimates``: the updates
    that carried real estimates (the same for every user); ``kind``: the oracle of the updates.
    """

    estimates: NDArray[np.float64]
    updates: NDArray[np.bool_]
    vote_shares: NDArray[np.float64]
    real_votes: NDArray[np.int64]
    real_estimates: int
    eps_vote: float
    eps_est: float
    kind: str

    def user_spent(self) -> NDArray[np.float64]:
        """ε each user spent: ε_vote·real votes + ε_est·real estimates (docs/math.md (19.5))."""
        return self.eps_vote * self.real_votes + self.eps_est * self.real_estimates


def run(
    values: NDArray,
    k: int,
    eps: float,
    max_votes: int,
    max_updates: int,
    rng: np.random.Generator,
    z: float = 3.0,
    oracle_name: str = "adaptive",
) -> ThreshRun:
    """Run THRESH over ``values[τ, n]`` (per-user engine; docs/math.md §19.3)."""
    values, k = oracle.check_values("THRESH", values, k)
    z = check.positive_float("THRESH", "z", z)
    eps_vote, eps_est = thresh_budgets(eps, max_votes, max_updates)
    tau, n = values.shape
    p, q = rr_probabilities(eps_vote)
    threshold = thresh_vote_threshold(n, eps_vote, z)
    kind = fo_kind(oracle_name, k, eps_est)

    estimates = np.empty((tau, k))
    updates = np.zeros(tau, dtype=bool)
    shares = np.full(tau, np.nan)
    votes = np.zeros(n, dtype=np.int64)
    reference = values[0]
    release = np.full(k, np.nan)
    done = 0
    for t in range(tau):
        if t == 0:
            update = True
        else:
            real = (values[t] != reference) & (votes < max_votes)
            votes += real
            bits = vote_bits(real, p, q, rng)
            shares[t] = (bits.mean() - q) / (p - q)
            update = bool(shares[t] > threshold)
        if update:
            held = values[t] if done < max_updates else np.full(n, k)
            reports = update_reports(held, kind, k, eps_est, rng)
            release = oracle.estimate(oracle.support(reports, kind, k), n, kind, k, eps_est)
            reference = values[t]
            updates[t] = True
            done += 1
        estimates[t] = release
    return ThreshRun(
        estimates=estimates,
        updates=updates,
        vote_shares=shares,
        real_votes=votes,
        real_estimates=min(done, max_updates),
        eps_vote=eps_vote,
        eps_est=eps_est,
        kind=kind,
    )
