"""Linkage attacks on the shuffled central figures (docs/math.md §17.7, docs/audit.md §8).

A central figure of :mod:`longldp.shuffle` is a claim that a shuffled collection is (ε, δ)-DP
toward whoever receives each epoch's multiset of reports. This module attacks such a claim with
the strongest analyst the reports allow, through the protocol's own client path
(:meth:`~longldp.protocols.FrequencyOracle.perturb` on a persistent population memo, so hash
seeds, rows, cohorts, sampled buckets and memos persist exactly as on a device).

Setting: n devices and τ epochs; the target device follows trajectory x1 (world 1) or x0
(world 0), the n − 1 others follow x0. By default x0 = 0 and x1 = the last input at every
epoch (the two differ in every memo key); a trajectory of distinct values gives every device a
memo per epoch (the multi-memo route, docs/math.md §17.4). The analyst knows the protocol and
sees one of three views:

- ``"tuples"``: the shuffled multiset of the devices' whole τ-tuples of reports, as if an
  oracle handed over each device's tuple. It is what routes "tuple" and, for one memo per
  device, "memo" bound (both views are post-processings of what those routes shuffle,
  docs/math.md §17.4), the strongest analyst for them;
- ``"linked"``: what the real analyst behind a per-epoch shuffler gets: each epoch's records
  in a uniformly random order, regrouped by the persistent fields they carry
  (``proto.linkage.record_fields``: a hash seed, a Hadamard row, a cohort, a bucket map). A
  field unique to the device gives back its tuple; a shared one (a cohort, one of few rows)
  only groups the devices that share it; no field leaves the independent epochs;
- ``"epochs"``: τ independent per-epoch multisets, what route "epochs" bounds, for clients
  where nothing persists.

With every other device following x0, the likelihood ratio of a multiset of n tuples is
(1/n)·Σ_u Pr[T_u | x1]/Pr[T_u | x0] (the target is any of the n tuples, the rest are x0's), of
independent epochs the product of the epochs' ratios, and of the linked view the mixture of
the two over the groups (:func:`_linked_log_lr`); the per-device ratios come from
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

VIEWS = ("tuples", "linked", "epochs")
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


@dataclass(frozen=True)
class WorldScores:
    """ln LR (x1 against x0) of ``trials`` worlds of each kind, for one protocol, view and size.

    The scores do not depend on the claim, so one set of worlds tests several claims
    (:meth:`attack`). ``exact``: the score is the exact ln LR of the view, so the worlds where
    the target holds x1 alone predict the attack's power (:func:`attack_power`); it
    is not for a memoizing chain in the ``"linked"`` view when several devices share a field
    (their reports are then scored as if their epochs were independent, a valid but not
    optimal statistic). ``alone``: in the ``"linked"`` view, the share of worlds in which no
    other device shares the target's field (its reports regroup into exactly its tuple); 1
    in the ``"tuples"`` view, 0 in ``"epochs"``.
    """

    protocol: str
    view: str
    n: int
    epochs: int
    world1: NDArray[np.float64]
    world0: NDArray[np.float64]
    exact: bool
    alone: float

    @property
    def trials(self) -> int:
        """Worlds of each kind."""
        return int(self.world1.size)

    def attack(
        self, claim_epsilon: float, claim_delta: float, alpha: float = 0.01
    ) -> LinkageAttack:
        """The likelihood-ratio test of the claim (ε, δ) on these worlds (module docstring)."""
        owner = "WorldScores.attack"
        eps = check.positive_float(owner, "claim_epsilon", claim_epsilon, upper=700.0)
        delta = check.positive_float(owner, "claim_delta", claim_delta, upper=1.0)
        alpha = check.positive_float(owner, "alpha", alpha, upper=1.0)
        w1, w0, trials = self.world1, self.world0, self.trials
        hits = (
            int(np.sum(w1 > eps)),
            int(np.sum(w0 > eps)),
            int(np.sum(w0 < -eps)),
            int(np.sum(w1 < -eps)),
        )
        level = alpha / 4  # two directions, two Clopper–Pearson bounds each
        lows = stats.cp_lower(np.array([hits[0], hits[2]]), trials, level)
        highs = stats.cp_upper(np.array([hits[1], hits[3]]), trials, level)
        delta_lower = float(max(0.0, np.max(lows - math.exp(eps) * highs)))
        with np.errstate(divide="ignore", invalid="ignore"):
            eps_lb = np.where(lows > delta, np.log((lows - delta) / highs), 0.0)
        return LinkageAttack(
            protocol=self.protocol,
            view=self.view,
            n=self.n,
            epochs=self.epochs,
            trials=trials,
            claim_epsilon=eps,
            claim_delta=delta,
            alpha=alpha,
            hits=hits,
            delta_lower=delta_lower,
            epsilon_lower=float(max(0.0, np.max(eps_lb))),
        )


def trials_for(claim_epsilon: float, alpha: float = 0.01) -> int:
    """Worlds of each kind that let a clear violation of (ε, ·) show: ⌈4·e^ε·ln(4/α)⌉.

    With an event of probability ½ in world 1 and 0 in world 0, CP_upper(0 of N) at level α/4
    is ln(4/α)/N to first order, so δ_lb ≈ ½ − e^ε·ln(4/α)/N − O(1/√N) = ¼ − O(1/√N).
    """
    eps = check.positive_float("trials_for", "claim_epsilon", claim_epsilon, upper=700.0)
    alpha = check.positive_float("trials_for", "alpha", alpha, upper=1.0)
    return math.ceil(4.0 * math.exp(eps) * math.log(4.0 / alpha))


@dataclass(frozen=True)
class AttackPower:
    """The power of the attack on one claim, predicted from world-1 scores alone: the δ lower
    bound it is expected to measure (``expected``) and that bound's standard deviation over the
    worlds (``sd``), for ``trials`` worlds of each kind (:func:`attack_power`)."""

    claim_epsilon: float
    claim_delta: float
    trials: int
    expected: float
    sd: float

    @property
    def should_refute(self) -> bool:
        """The expected bound exceeds the claimed δ by more than 5 standard deviations."""
        return self.expected - 5.0 * self.sd > self.claim_delta


def attack_power(
    world1: NDArray[np.float64],
    claim_epsilon: float,
    claim_delta: float,
    trials: int,
    alpha: float = 0.01,
) -> AttackPower:
    """The power of the likelihood-ratio test of (ε, δ) with ``trials`` worlds of each kind,
    predicted from scores of worlds where the target holds x1 (docs/math.md §17.7).

    When the score is the view's exact ln LR, Pr0[A] = E1[1_A·e^{−score}] for every event A,
    so world-1 scores estimate both worlds' hit rates in both directions:
    p1 = Pr1[score > ε], p0 = E1[e^{−score}; score > ε] (and Pr0[score < −ε] =
    E1[e^{−score}; score < −ε] against Pr1[score < −ε]); the expected bound is (17.7) at the
    expected hit counts trials·p, of the direction that gives more, and its standard deviation
    that of p̂1 − e^ε·p̂0 over ``trials`` worlds, √(p1(1 − p1) + e^{2ε}·p0(1 − p0))/√trials.
    Each weight e^{−score} on the first event is below e^{−ε}, so a few hundred worlds
    estimate p0 well. Scores that are not the exact ln LR (:attr:`WorldScores.exact`) give no
    prediction.
    """
    owner = "attack_power"
    eps = check.positive_float(owner, "claim_epsilon", claim_epsilon, upper=700.0)
    delta = check.positive_float(owner, "claim_delta", claim_delta, upper=1.0)
    trials = check.integer(owner, "trials", trials, minimum=1)
    s = np.asarray(world1, dtype=np.float64)
    up, down = s > eps, s < -eps
    weight = np.exp(-s)
    # World 1 above and world 0 below; world 0 above and world 1 below (rates, capped at 1).
    p_high = np.minimum(np.array([np.mean(up), np.mean(weight * down)]), 1.0)
    p_low = np.minimum(np.array([np.mean(weight * up), np.mean(down)]), 1.0)
    level = alpha / 4
    lows = stats.cp_lower(trials * p_high, trials, level)
    highs = stats.cp_upper(trials * p_low, trials, level)
    bounds = lows - math.exp(eps) * highs
    best = int(np.argmax(bounds))
    var = p_high[best] * (1 - p_high[best]) + math.exp(2 * eps) * p_low[best] * (1 - p_low[best])
    return AttackPower(
        claim_epsilon=eps,
        claim_delta=delta,
        trials=trials,
        expected=float(max(0.0, bounds[best])),
        sd=math.sqrt(var / trials),
    )


def view_delta(world1: NDArray[np.float64], epsilon: float) -> tuple[float, float]:
    """(δ(ε), its standard error): the view's own δ at ``epsilon``, estimated from world-1
    scores that are its exact ln LR s, as max(E1[(1 − e^{ε − s})⁺], E1[(e^{−s} − e^{ε})⁺]) (the
    hockey-stick divergences of the two worlds in either order, each written as a world-1
    expectation, docs/math.md §17.7). What the attack measures with enough worlds."""
    eps = float(epsilon) if isinstance(epsilon, (int, float, np.floating)) else math.nan
    if not (math.isfinite(eps) and 0.0 <= eps <= 700.0):
        raise check._fail("view_delta", "epsilon", "a finite number in [0, 700]", epsilon)
    s = np.asarray(world1, dtype=np.float64)
    terms = (
        np.clip(1.0 - np.exp(eps - s), 0.0, None),
        np.clip(np.exp(-s) - math.exp(eps), 0.0, None),
    )
    best = max(terms, key=lambda t: float(np.mean(t)))
    return float(np.mean(best)), float(np.std(best) / math.sqrt(best.size))


def view_epsilon(world1: NDArray[np.float64], delta: float) -> float:
    """The view's own ε at ``delta`` (:func:`view_delta`, world-1 scores that are its exact
    ln LR): the smallest ε with δ(ε) ≤ ``delta``, by bisection to 10⁻⁶. A valid claim is at
    least this; a claim far above it can be refuted only by a violation larger than their gap."""
    delta = check.positive_float("view_epsilon", "delta", delta, upper=1.0)
    s = np.asarray(world1, dtype=np.float64)
    if view_delta(s, 0.0)[0] <= delta:
        return 0.0
    lo, hi = 0.0, float(np.max(np.abs(s))) + 1.0
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if view_delta(s, mid)[0] > delta else (lo, mid)
    return hi


def trajectories(
    proto: FrequencyOracle, epochs: int, x0: Any = None, x1: Any = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The two trajectories of the worlds as τ codes each: x0 (the others', and the target's in
    world 0; default 0 at every epoch) and x1 (the target's in world 1; default the last
    value, :func:`~longldp.audit.likelihood.domain_size` − 1). A scalar holds at every
    epoch."""
    owner = "linkage_attack"
    size = domain_size(proto)
    out = []
    for name, given, default in (("x0", x0, 0), ("x1", x1, size - 1)):
        codes = np.broadcast_to(np.asarray(default if given is None else given), (epochs,))
        if not np.issubdtype(codes.dtype, np.integer) or np.any((codes < 0) | (codes >= size)):
            raise ValueError(
                f"{owner}: '{name}' must be a value code in [0, {size}) or {epochs} of them; "
                f"got {given!r}."
            )
        out.append(codes.astype(np.int64))
    return out[0], out[1]


def world_scores(
    proto: FrequencyOracle,
    view: str,
    n: int,
    epochs: int,
    trials: int,
    world: int,
    rng: Any,
    x0: Any = None,
    x1: Any = None,
) -> NDArray[np.float64]:
    """ln LR (x1 against x0) of ``trials`` independent worlds in which the target device
    follows trajectory x1 (``world`` = 1) or x0 (``world`` = 0) and the n − 1 others follow x0
    (:func:`trajectories`).

    The worlds are blocks of n devices of one population, so each epoch is one ``perturb``
    call per :data:`CHUNK_DEVICES` devices.
    """
    path = trajectories(proto, epochs, x0, x1)
    return _world_scores(proto, view, n, epochs, trials, world, rng, path)[0]


def _world_scores(
    proto: FrequencyOracle,
    view: str,
    n: int,
    epochs: int,
    trials: int,
    world: int,
    rng: Any,
    path: tuple[NDArray[np.int64], NDArray[np.int64]],
) -> tuple[NDArray[np.float64], bool, int]:
    """(scores, exact, worlds in which the target's field is its own): see :func:`world_scores`
    and :class:`WorldScores`. A chain whose trajectories change value is scored report by
    report (exact when each memo is reported once: distinct values, no shared memo key)."""
    owner = "linkage_attack"
    view = check.choice(owner, "view", view, VIEWS)
    if world not in (0, 1) or isinstance(world, bool):
        raise ValueError(f"{owner}: 'world' must be 0 or 1; got {world!r}.")
    x0, x1 = path
    steady = bool(np.all(x0 == x0[0]) and np.all(x1 == x1[0]))
    memoized = proto.longitudinal and steady
    scores = np.zeros(trials)
    exact, alone = not proto.longitudinal or steady, 0
    per_chunk = max(1, CHUNK_DEVICES // n)  # whole worlds per chunk
    for start in range(0, trials, per_chunk):
        count = min(per_chunk, trials - start)
        memo = proto.new_memo(count * n)
        reports = []
        for t in range(epochs):
            codes = np.full(count * n, x0[t], dtype=np.int64)
            codes[::n] = (x1 if world == 1 else x0)[t]
            reports.append(proto.perturb(protocol_inputs(proto, codes), memo, rng))
        if view == "tuples":
            if memoized:
                llr = log_ratios(proto, reports, (x0[0], x1[0]), memoized=True)
            else:
                llr = _per_report(proto, reports, path).sum(axis=0)
            scores[start : start + count] = _multiset_log_lr(llr, count, n)
            alone += count
        elif view == "linked":
            got, chunk_exact, chunk_alone = _linked_log_lr(
                proto, reports, path, count, n, rng, memoized
            )
            scores[start : start + count] = got
            exact, alone = exact and chunk_exact, alone + chunk_alone
        else:
            for llr in _per_report(proto, reports, path):
                scores[start : start + count] += _multiset_log_lr(llr, count, n)
            exact = exact and not (proto.longitudinal and epochs > 1)
    return scores, exact, alone


def log_ratios(
    proto: FrequencyOracle, reports: list[NDArray], pair: tuple[int, int], memoized: bool
) -> NDArray[np.float64]:
    """ln Pr[T_u | x1] − ln Pr[T_u | x0] of each client's reports for one pair of values
    (x0, x1) (:func:`~longldp.audit.likelihood.log_likelihoods` of the two only)."""
    ll = log_likelihoods(proto, reports, memoized=memoized, codes=(int(pair[0]), int(pair[1])))
    return ll[:, 1] - ll[:, 0]


def _per_report(
    proto: FrequencyOracle,
    reports: list[NDArray],
    path: tuple[NDArray[np.int64], NDArray[np.int64]],
) -> NDArray[np.float64]:
    """(τ, n): the log ratio of every report alone, at its epoch's pair of values (one
    likelihood call for the epochs that share a pair)."""
    x0, x1 = path
    n = reports[0].shape[0]
    out = np.empty((len(reports), n))
    pairs = np.stack([x0, x1], axis=1)
    for pair in np.unique(pairs, axis=0):
        at = np.flatnonzero(np.all(pairs == pair, axis=1))
        joined = np.concatenate([reports[t] for t in at])
        out[at] = log_ratios(proto, [joined], (pair[0], pair[1]), memoized=False).reshape(-1, n)
    return out


def _multiset_log_lr(llr: NDArray, worlds: int, n: int) -> NDArray[np.float64]:
    """ln[(1/n)·Σ_u Pr[T_u | x1]/Pr[T_u | x0]] per world (x0 = 0), from the clients' log
    ratios in world order."""
    return logsumexp(np.asarray(llr).reshape(worlds, n), axis=1) - math.log(n)


def _field_columns(records: NDArray, fields: tuple[str, ...]) -> list[NDArray]:
    """The persistent fields of the records as int64 columns (a bucket map: one per bucket)."""
    cols: list[NDArray] = []
    for name in fields:
        col = np.asarray(records[name]).astype(np.int64)
        cols.extend([col] if col.ndim == 1 else list(col.reshape(col.shape[0], -1).T))
    return cols


def _linked_log_lr(
    proto: FrequencyOracle,
    reports: list[NDArray],
    path: tuple[NDArray[np.int64], NDArray[np.int64]],
    worlds: int,
    n: int,
    rng: Any,
    memoized: bool,
) -> tuple[NDArray[np.float64], bool, int]:
    """The real analyst behind a per-epoch shuffler (docs/math.md §17.7): each world's epoch
    is shuffled, the records are regrouped by the persistent fields they carry
    (``proto.linkage.record_fields``), and the multiset is scored by its likelihood ratio.

    Group g holds the c_g devices sharing a field value (the same c_g in every epoch: the
    field persists); given the fields the target is in g with probability c_g/n, so
    LR = Σ_g (c_g/n)·LR_g with LR_g the ratio of g's reports, the other groups' factors
    cancelling. One-shot clients draw every epoch afresh given the field, so LR_g =
    Π_t (1/c_g)·Σ_{y ∈ O_t^g} r(y) (exact; a group of one is the device's tuple, one group of
    n, when nothing is carried, the independent epochs); a chain's group of one is scored by
    its memoized tuple likelihood (``memoized``: one value per trajectory), a chain's larger
    group as if its epochs were independent. Returns (ln LR per world, whether every score is
    exact, worlds whose target is alone).
    """
    fields = proto.linkage.record_fields
    size = worlds * n
    world = np.repeat(np.arange(worlds, dtype=np.int64), n)
    offset = (np.arange(worlds, dtype=np.int64) * n)[:, None]
    aligned, positions = [], []
    for rep in reports:
        # The shuffler: a uniform order within each world (the worlds stay in their blocks).
        shuffled = rng.permuted(np.broadcast_to(np.arange(n), (worlds, n)), axis=1) + offset
        # The analyst: a stable sort of each world's shuffled records by their fields.
        cols = _field_columns(rep[shuffled.ravel()], fields)
        if cols:
            key = (
                cols[0]
                if len(cols) == 1
                else np.unique(np.stack(cols, 1), axis=0, return_inverse=True)[1]
            )
            within = np.argsort(key.reshape(worlds, n), axis=1, kind="stable")
            shuffled = np.take_along_axis(shuffled, within, axis=1)
        order = shuffled.ravel()
        aligned.append(rep[order])
        positions.append(order)
    keys = np.stack([world, *_field_columns(aligned[0], fields)])
    for rep in aligned[1:]:
        again = _field_columns(rep, fields)
        if any(not np.array_equal(a, b) for a, b in zip(keys[1:], again, strict=True)):
            raise ValueError(f"{proto.name}: a field its linkage declares changed between reports.")
    change = np.ones(size, dtype=bool)
    change[1:] = np.any(keys[:, 1:] != keys[:, :-1], axis=0)
    starts = np.flatnonzero(change)
    sizes = np.diff(np.append(starts, size))
    log_size = np.log(sizes)
    ln_group = np.zeros(starts.size)
    for llr in _per_report(proto, aligned, path):
        ln_group += np.logaddexp.reduceat(llr, starts) - log_size
    exact = True
    if memoized and len(reports) > 1:
        single = sizes == 1
        pair = (path[0][0], path[1][0])
        ln_group[single] = log_ratios(proto, aligned, pair, memoized=True)[starts[single]]
        exact = bool(np.all(single))
    group_world = keys[0, starts]
    world_starts = np.flatnonzero(np.append(True, group_world[1:] != group_world[:-1]))
    scores = np.logaddexp.reduceat(log_size - math.log(n) + ln_group, world_starts)
    # Where the target (device 0 of each world) landed, and how many share its field.
    group_of = np.repeat(np.arange(starts.size), sizes)
    at = np.empty(size, dtype=np.int64)
    at[positions[0]] = np.arange(size)
    target_group = group_of[at[::n]]
    return scores, exact, int(np.sum(sizes[target_group] == 1))


def linkage_scores(
    proto: FrequencyOracle,
    n: int,
    epochs: int,
    trials: int,
    view: str = "tuples",
    rng: Any = None,
    x0: Any = None,
    x1: Any = None,
) -> WorldScores:
    """``trials`` worlds of each kind (the target following x1, then x0; :func:`trajectories`)
    scored on ``view``; see the module docstring."""
    owner = "linkage_attack"
    n = check.integer(owner, "n", n, minimum=1)
    epochs = check.integer(owner, "epochs", epochs, minimum=1)
    trials = check.integer(owner, "trials", trials, minimum=1)
    path = trajectories(proto, epochs, x0, x1)
    rng = np.random.default_rng(rng)
    world1, exact1, alone = _world_scores(proto, view, n, epochs, trials, 1, rng, path)
    world0, exact0, _ = _world_scores(proto, view, n, epochs, trials, 0, rng, path)
    return WorldScores(
        protocol=proto.name,
        view=view,
        n=n,
        epochs=epochs,
        world1=world1,
        world0=world0,
        exact=exact1 and exact0,
        alone=alone / trials,
    )


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
    eps = check.positive_float(owner, "claim_epsilon", claim_epsilon, upper=700.0)
    alpha = check.positive_float(owner, "alpha", alpha, upper=1.0)
    trials = trials_for(eps, alpha) if trials is None else trials
    scores = linkage_scores(proto, n, epochs, trials, view, rng)
    return scores.attack(eps, claim_delta, alpha)
