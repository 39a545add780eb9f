"""LDP-IDS: w-event LDP over infinite streams (Ren et al., SIGMOD 2022; docs/math.md §19.2).

Seven methods, each a policy for which users report with which budget at every epoch, and
whether the server publishes a fresh estimate or repeats its last release:

========  =====================================================================================
method    per epoch t
========  =====================================================================================
LBU       every user reports at ε/w; always published
LSP       every user reports at ε when t ≡ 0 (mod w); otherwise nothing, the release repeats
LBD       every user reports at ε/(2w) (dissimilarity); publication at half the window's
          remaining ε/2 when the dissimilarity exceeds that publication's error
LBA       as LBD, but publication absorbs the units ε/(2w) of skipped epochs and nullifies
          as many epochs after it
LPU       the users are split once into w groups; group t mod w reports at ε
LPD       ⌊n/(2w)⌋ fresh users report at ε (dissimilarity); publication by half the window's
          remaining ⌊n/2⌋ users, when the dissimilarity exceeds that publication's error
LPA       as LPD, with absorption of ⌊n/(2w)⌋-user units
========  =====================================================================================

In population division a user reports at most once in any w consecutive epochs ("fresh" users
are those who did not report in the last w − 1 epochs), always at the whole ε: any window costs
her at most ε. In budget division every user reports at every epoch and the budgets of any
window sum to at most ε. Both are w-event ε-LDP ([REN22] Theorems of §4–§5, re-derived in
docs/math.md §19.2, and checked by ``tests/test_streams_ledger.py`` from the ledger).

Two engines, both vectorized over users with one Python step per epoch (the server's
decision at t depends on the estimates before t):

- ``collect_counts``: the count-level engine. From the value counts of each epoch it draws the
  reporters' counts (a multivariate hypergeometric sample when only some users report) and
  their support counts in O(k). Exact per epoch; for budget division it is exact jointly over
  epochs too (reports carry no state), for population division it ignores that the users of
  one window are disjoint (the same caveat as the count-level engine of design §4).
- ``collect_users``: every user is one row of ``values[τ, n]``; the users who report are chosen
  by identity and recorded, so the ledger reads each user's spending.

References: see :mod:`longldp.privacy.streams`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy import estimator_variance
from longldp.privacy.streams import (
    BUDGET_DIVISION,
    WEVENT_METHODS,
    absorption_units,
    check_window,
    dissimilarity,
    fo_kind,
    fo_mean_variance,
    fo_probabilities,
    lbd_publication_budget,
    lpd_publication_users,
    sampling_variance,
)
from longldp.protocols.streams import oracle


class Collector(Protocol):
    """One engine: collects one epoch's support counts from all users or from fresh users."""

    n: int
    k: int
    tau: int

    def everyone(self, t: int, kind: str, eps: float) -> NDArray[np.int64]:
        """Support counts of every user's report at epoch t."""
        ...

    def fresh(self, t: int, m: int, kind: str, eps: float) -> NDArray[np.int64]:
        """Support counts of m users who did not report in the last w − 1 epochs."""
        ...

    def group(self, t: int, g: int, w: int, kind: str, eps: float) -> tuple[NDArray, int]:
        """Support counts of LPU's group g (one of w fixed groups) and its size."""
        ...


class CountCollector:
    """Count-level engine over ``counts[τ, k]`` (the value counts of n users at each epoch)."""

    def __init__(self, counts: NDArray, rng: np.random.Generator) -> None:
        counts = np.asarray(counts)
        if counts.ndim != 2 or counts.shape[0] < 1 or counts.shape[1] < 2:
            raise ValueError(
                f"LDP-IDS: 'counts' must be a (tau, k) array with tau >= 1, k >= 2; got shape "
                f"{counts.shape}."
            )
        if not np.issubdtype(counts.dtype, np.integer) or counts.min() < 0:
            raise ValueError("LDP-IDS: 'counts' must be non-negative integer counts.")
        totals = counts.sum(axis=1)
        if np.any(totals != totals[0]) or totals[0] < 1:
            raise ValueError(
                "LDP-IDS: every epoch's 'counts' must sum to the same n >= 1 (the users); got "
                f"sums from {int(totals.min())} to {int(totals.max())}."
            )
        self.counts = counts.astype(np.int64)
        self.tau, self.k = counts.shape
        self.n = int(totals[0])
        self.rng = rng
        self._taken: NDArray[np.int64] | None = None
        self._taken_t = -1
        self._groups: NDArray[np.int64] | None = None

    def everyone(self, t: int, kind: str, eps: float) -> NDArray[np.int64]:
        """Support counts of all n users at epoch t, drawn from the epoch's counts."""
        return oracle.sample_support(self.counts[t], kind, self.k, eps, self.rng)

    def fresh(self, t: int, m: int, kind: str, eps: float) -> NDArray[np.int64]:
        """Support counts of m users drawn (hypergeometric) from those left at epoch t."""
        # Users drawn in one epoch are disjoint: draw from what this epoch has left.
        if self._taken_t != t:
            self._taken, self._taken_t = np.zeros(self.k, dtype=np.int64), t
        left = self.counts[t] - self._taken
        drawn = self.rng.multivariate_hypergeometric(left, m)
        self._taken = self._taken + drawn
        return oracle.sample_support(drawn, kind, self.k, eps, self.rng)

    def group(self, t: int, g: int, w: int, kind: str, eps: float) -> tuple[NDArray, int]:
        """Support counts of group g (n/w users, a fresh draw at count level) and its size."""
        size = self.n // w + (1 if g < self.n % w else 0)
        return self.fresh(t, size, kind, eps), size


class UserCollector:
    """Per-user engine over ``values[τ, n]``; records who reported when (``participation``)."""

    def __init__(self, values: NDArray, k: int, w: int, rng: np.random.Generator) -> None:
        self.values, k = oracle.check_values("LDP-IDS", values, k)
        self.tau, self.n = self.values.shape
        self.k, self.w, self.rng = k, w, rng
        self.last = np.full(self.n, -(10**9), dtype=np.int64)
        self.participation = np.zeros((self.n, self.tau), dtype=bool)
        self._groups = rng.permutation(self.n) % w

    def everyone(self, t: int, kind: str, eps: float) -> NDArray[np.int64]:
        """Every user reports her value at epoch t."""
        self.participation[:, t] = True
        reports = oracle.perturb(self.values[t], kind, self.k, eps, self.rng)
        return oracle.support(reports, kind, self.k)

    def _report(self, t: int, users: NDArray, kind: str, eps: float) -> NDArray[np.int64]:
        self.last[users] = t
        self.participation[users, t] = True
        reports = oracle.perturb(self.values[t, users], kind, self.k, eps, self.rng)
        return oracle.support(reports, kind, self.k)

    def fresh(self, t: int, m: int, kind: str, eps: float) -> NDArray[np.int64]:
        """m users drawn among those who did not report in the last w − 1 epochs report."""
        available = np.flatnonzero(self.last <= t - self.w)
        if available.size < m:  # the budget arithmetic of §19.2 rules this out
            raise AssertionError(f"LDP-IDS: {m} fresh users asked at epoch {t}, {available.size}")
        return self._report(t, self.rng.choice(available, size=m, replace=False), kind, eps)

    def group(self, t: int, g: int, w: int, kind: str, eps: float) -> tuple[NDArray, int]:
        """The users of LPU's group g report; returns the support counts and the group size."""
        users = np.flatnonzero(self._groups == g)
        return self._report(t, users, kind, eps), int(users.size)


@dataclass(frozen=True)
class WEventRun:
    """What one LDP-IDS run released and spent.

    Attributes
    ----------
    method : str
        LBU, LSP, LBD, LBA, LPU, LPD or LPA.
    estimates : ndarray, shape (τ, k)
        The release at every epoch (a fresh publication, or the last one repeated).
    published : ndarray of bool, shape (τ,)
        True where the release is fresh.
    eps_dissimilarity, eps_publication : ndarray, shape (τ,)
        Budget of each reporter of the dissimilarity (M_{t,1}) and of the publication
        (M_{t,2}); population division reports at the whole ε.
    users_dissimilarity, users_publication : ndarray of int, shape (τ,)
        Number of users who reported for each.
    kinds : tuple of str
        The oracle of each fresh publication ("grr"/"oue"; "" where none).
    participation : ndarray of bool, shape (n, τ), or None
        Per-user engine: who reported at which epoch.
    """

    method: str
    w: int
    eps: float
    n: int
    estimates: NDArray[np.float64]
    published: NDArray[np.bool_]
    eps_dissimilarity: NDArray[np.float64]
    eps_publication: NDArray[np.float64]
    users_dissimilarity: NDArray[np.int64]
    users_publication: NDArray[np.int64]
    kinds: tuple[str, ...]
    participation: NDArray[np.bool_] | None = None

    @property
    def spend_per_epoch(self) -> NDArray[np.float64]:
        """Budget division: each user's ε at every epoch (every user reports at both)."""
        return self.eps_dissimilarity + self.eps_publication

    def user_spend(self) -> NDArray[np.float64] | None:
        """(n, τ) ε each user spent at each epoch (per-user engine), else None."""
        if self.participation is None:
            return None
        if self.method in BUDGET_DIVISION:
            return np.broadcast_to(self.spend_per_epoch, self.participation.shape).copy()
        return self.participation * self.eps

    def publication_variance(self, t: int, f: NDArray) -> NDArray[np.float64]:
        """Variance of the fresh publication at epoch t given the true frequencies f (§19.2).

        Budget division: (1.2) for n reporters at ε_{t,2}; population division: (1.2) for m
        reporters at ε plus the sampling variance of m users among n (19.2).
        """
        if not self.published[t]:
            raise ValueError(f"LDP-IDS: epoch {t} repeats an earlier release.")
        k = self.estimates.shape[1]
        kind = self.kinds[t]
        if self.method in BUDGET_DIVISION:
            eps = self.eps_publication[t]
            return estimator_variance(self.n, f, *fo_probabilities(kind, k, eps))
        m = int(self.users_publication[t])
        v = estimator_variance(m, f, *fo_probabilities(kind, k, self.eps))
        return v + sampling_variance(f, m, self.n)


def check_method(method: object) -> str:
    """One of the LDP-IDS names, case-insensitive, returned in its canonical spelling."""
    names = {m.lower(): m for m in WEVENT_METHODS}
    if not isinstance(method, str) or method.lower() not in names:
        raise ValueError(
            f"LDP-IDS: 'method' must be one of {', '.join(WEVENT_METHODS)}; got {method!r}."
        )
    return names[method.lower()]


def run(
    method: str,
    collector: Collector,
    eps: float,
    w: int,
    oracle_name: str = "adaptive",
) -> WEventRun:
    """Run one LDP-IDS method over the collector's τ epochs (docs/math.md §19.2)."""
    method = check_method(method)
    eps = check.budget("LDP-IDS", "eps", eps)
    w = check_window("LDP-IDS", w)
    n, k, tau = collector.n, collector.k, collector.tau
    if method in ("LPD", "LPA") and n < 2 * w:
        raise ValueError(f"LDP-IDS: {method} needs n >= 2w users; got n = {n}, w = {w}.")
    if method == "LPU" and n < w:
        raise ValueError(f"LDP-IDS: LPU needs n >= w users; got n = {n}, w = {w}.")

    est = np.empty((tau, k))
    published = np.zeros(tau, dtype=bool)
    eps1, eps2 = np.zeros(tau), np.zeros(tau)
    m1, m2 = np.zeros(tau, dtype=np.int64), np.zeros(tau, dtype=np.int64)
    kinds = [""] * tau
    release: NDArray | None = None
    last, last_units = -1, 1
    unit_users = n // (2 * w)

    def publish(t: int, supports: NDArray, m: int, kind: str, e: float) -> None:
        nonlocal release
        release = oracle.estimate(supports, m, kind, k, e)
        published[t] = True
        kinds[t] = kind

    for t in range(tau):
        if method == "LBU":
            e = eps / w
            kind = fo_kind(oracle_name, k, e)
            eps2[t], m2[t] = e, n
            publish(t, collector.everyone(t, kind, e), n, kind, e)
        elif method == "LSP":
            if t % w == 0:
                kind = fo_kind(oracle_name, k, eps)
                eps2[t], m2[t] = eps, n
                publish(t, collector.everyone(t, kind, eps), n, kind, eps)
        elif method == "LPU":
            kind = fo_kind(oracle_name, k, eps)
            supports, size = collector.group(t, t % w, w, kind, eps)
            m2[t] = size
            publish(t, supports, size, kind, eps)
        else:  # LBD, LBA (budget: all users, ε shares) and LPD, LPA (population: ε, users)
            budget = method in ("LBD", "LBA")
            e1, r1 = (eps / (2 * w), n) if budget else (eps, unit_users)
            k1 = fo_kind(oracle_name, k, e1)
            eps1[t], m1[t] = (e1 if budget else 0.0), r1
            raw = collector.everyone(t, k1, e1) if budget else collector.fresh(t, r1, k1, e1)
            first = oracle.estimate(raw, r1, k1, k, e1)
            lo = max(0, t - w + 1)
            if method in ("LBA", "LPA"):
                units = absorption_units(t, last, last_units, w)
                e2, r2 = (units * e1, n) if budget else (eps, units * unit_users)
            else:
                units = 0
                if budget:
                    e2, r2 = lbd_publication_budget(eps, w, float(eps2[lo:t].sum())), n
                else:
                    e2, r2 = eps, lpd_publication_users(n, w, int(m2[lo:t].sum()))
            if e2 > 0 and r2 > 0:
                k2 = fo_kind(oracle_name, k, e2)
                noise = fo_mean_variance(k1, k, e1, r1)
                dis = np.inf if release is None else dissimilarity(first, release, noise)
                if dis > fo_mean_variance(k2, k, e2, r2):
                    eps2[t], m2[t] = (e2 if budget else 0.0), r2
                    raw = (
                        collector.everyone(t, k2, e2) if budget else collector.fresh(t, r2, k2, e2)
                    )
                    publish(t, raw, r2, k2, e2)
                    last, last_units = t, units
        if release is None:  # LSP before its first epoch cannot happen: t = 0 publishes
            raise AssertionError("LDP-IDS: no release at epoch 0")
        est[t] = release

    participation = getattr(collector, "participation", None)
    pop = method not in BUDGET_DIVISION
    return WEventRun(
        method=method,
        w=w,
        eps=eps,
        n=n,
        estimates=est,
        published=published,
        eps_dissimilarity=np.where(m1 > 0, eps, 0.0) if pop else eps1,
        eps_publication=np.where(m2 > 0, eps, 0.0) if pop else eps2,
        users_dissimilarity=m1,
        users_publication=m2,
        kinds=tuple(kinds),
        participation=participation,
    )


def run_counts(
    method: str,
    counts: NDArray,
    eps: float,
    w: int,
    rng: np.random.Generator,
    oracle_name: str = "adaptive",
) -> WEventRun:
    """Count-level run from ``counts[τ, k]`` (value counts of the same n users at each epoch)."""
    return run(method, CountCollector(counts, rng), eps, w, oracle_name)


def run_users(
    method: str,
    values: NDArray,
    k: int,
    eps: float,
    w: int,
    rng: np.random.Generator,
    oracle_name: str = "adaptive",
) -> WEventRun:
    """Per-user run from ``values[τ, n]``; the result records each user's participation."""
    w = check_window("LDP-IDS", w)
    k = check.integer("LDP-IDS", "k", k, minimum=2)
    return run(method, UserCollector(values, k, w, rng), eps, w, oracle_name)
