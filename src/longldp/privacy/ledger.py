"""Privacy ledger: what each user has spent, from her trajectory, under each accounting (§19.6).

Vectorized over users; every function takes an (n, τ) array of trajectories (one row per user,
one column per epoch; the transpose of the simulation layout ``values[τ, n]``, design §3) and
returns one number per user. The rows are processed in blocks of ``CHUNK`` users, so memory
stays bounded whatever n (the ledger of 10⁶ users × 100 epochs is one of the benchmarks).

Four accountings (docs/math.md §19.6):

- **memo chains** (L-GRR, the UE chains, LOLOHA, dBitFlipPM): min(t·ε1, d·ε∞) with t reports
  and d distinct memo keys (:func:`memo_spent`, the rule of :func:`longldp.privacy.spent_epsilon`);
- **one-shot**: t·ε (:func:`memo_spent` with ``eps_perm=None``);
- **w-event** (LDP-IDS): the most spent in any w consecutive epochs (:func:`window_spent`), and
  over the whole horizon (:func:`total_spent`);
- **change-based** (THRESH, CHANGES-TREE, DDRM): the ε of every report whose distribution
  differs from the protocol's data-independent default (:func:`thresh_spent`,
  :func:`changes_tree_spent`, :func:`ddrm_spent`). Between two trajectories x, x' the privacy
  loss is at most spent(x) + spent(x') (docs/math.md (19.10)).

The front: ``longldp.privacy.ledger(protocol, trajectories)`` reads ``protocol.accounting``
(docs/design.md §2.5) and applies the one function of its rule; it returns a :class:`Ledger`.
This module is itself callable (``ledger(...)`` is :func:`ledger`), so the same name is the
front and the home of the per-rule functions (``ledger.window_spent``, …).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.privacy import spent_epsilon
from longldp.privacy.streams import check_window, trailing_level, tree_levels

#: Users per block: an int64 block of 2¹⁵ users × 100 epochs is 26 MB.
CHUNK = 1 << 15


def check_trajectories(owner: str, trajectories: ArrayLike, k: int | None = None) -> NDArray:
    """An (n, τ) integer array with τ >= 1 (and values in [0, k) when k is given), unconverted.

    The dtype is kept (no int64 copy of a large array); bools and floats are refused.
    """
    arr = np.asarray(trajectories)
    if arr.ndim != 2:
        raise ValueError(
            f"{owner}: 'trajectories' must be a 2-D (n, tau) array of codes; got "
            f"{arr.ndim} dimension(s)."
        )
    if arr.shape[1] < 1:
        raise ValueError(f"{owner}: 'trajectories' must have tau >= 1 epochs; got tau = 0.")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{owner}: 'trajectories' must be integer codes (an integer dtype); got dtype "
            f"{arr.dtype}."
        )
    if k is not None and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= k:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{owner}: 'trajectories' must hold integers in [0, {k}); got {bad} (outside)."
            )
    return arr


def _blocks(n: int) -> list[slice]:
    return [slice(i, min(i + CHUNK, n)) for i in range(0, n, CHUNK)] or [slice(0, 0)]


def distinct_counts(trajectories: ArrayLike) -> NDArray[np.int64]:
    """Number of distinct values in each row (each user's distinct memo keys)."""
    x = check_trajectories("distinct_counts", trajectories)
    out = np.empty(x.shape[0], dtype=np.int64)
    for b in _blocks(x.shape[0]):
        s = np.sort(x[b], axis=1)
        out[b] = 1 + np.count_nonzero(s[:, 1:] != s[:, :-1], axis=1)
    return out


def change_counts(trajectories: ArrayLike) -> NDArray[np.int64]:
    """Number of epochs t >= 1 at which each user's value differs from the epoch before."""
    x = check_trajectories("change_counts", trajectories)
    out = np.empty(x.shape[0], dtype=np.int64)
    for b in _blocks(x.shape[0]):
        blk = x[b]
        out[b] = np.count_nonzero(blk[:, 1:] != blk[:, :-1], axis=1)
    return out


def memo_spent(
    trajectories: ArrayLike, k: int, eps_1: float, eps_perm: float | None
) -> NDArray[np.float64]:
    """ε spent by a memoizing chain: min(τ·ε1, d·ε∞) per user, d her distinct memo keys.

    ``trajectories`` holds each report's memo key (the value for L-GRR and the UE chains; the
    bucket for dBitFlipPM; H_u(v) for LOLOHA), one report per epoch (docs/math.md (4.1), the
    rule of :func:`longldp.privacy.spent_epsilon`). ``eps_perm=None``: a one-shot oracle, τ·ε1.
    """
    x = check_trajectories("memo_spent", trajectories, k)
    tau = x.shape[1]
    if eps_perm is None:
        return np.full(x.shape[0], float(spent_epsilon(tau, 0, eps_1, None)))
    return np.asarray(spent_epsilon(tau, distinct_counts(x), eps_1, eps_perm), dtype=np.float64)


def window_spent(spend: ArrayLike, w: int) -> NDArray[np.float64] | float:
    """Most ε spent in any w consecutive epochs: per row of an (n, τ) array, or of a (τ,) vector.

    Windows that start before epoch 0 are the prefixes (epochs before 0 spent nothing), so a
    horizon shorter than w gives the total. The w-event guarantee of LDP-IDS is that this never
    exceeds ε (docs/math.md §19.2).
    """
    w = check_window("window_spent", w)
    arr = np.asarray(spend)
    if arr.ndim not in (1, 2) or arr.shape[-1] < 1:
        raise ValueError(
            f"window_spent: 'spend' must be a (tau,) or (n, tau) array with tau >= 1; got shape "
            f"{arr.shape}."
        )
    if arr.ndim == 1:
        return float(window_spent(arr[None, :], w)[0])
    out = np.empty(arr.shape[0])
    for b in _blocks(arr.shape[0]):  # converted block by block: a bool (n, τ) stays small
        c = np.cumsum(arr[b], axis=1, dtype=np.float64)
        sums = c.copy()
        if c.shape[1] > w:
            sums[:, w:] -= c[:, :-w]
        out[b] = sums.max(axis=1)
    return out


def total_spent(spend: ArrayLike) -> NDArray[np.float64] | float:
    """ε spent over the whole horizon (sequential composition of every epoch's spending)."""
    arr = np.asarray(spend, dtype=np.float64)
    return float(arr.sum()) if arr.ndim == 1 else arr.sum(axis=1)


def tree_nonzero_nodes(trajectories: ArrayLike) -> NDArray[np.int64]:
    """(n, L) counts of each user's dyadic nodes with a non-zero difference, per level.

    Epoch 0 is the initial report; the tree covers epochs 1..τ−1. The node of level h ending
    at s covers (s − 2^h, s] and its difference is non-zero iff x_s ≠ x_{s−2^h}
    (docs/math.md §19.4). A value that changes c times makes at most c nodes of each level
    non-zero (each change lies in one node per level; several may cancel).
    """
    x = check_trajectories("tree_nonzero_nodes", trajectories)
    n, tau = x.shape
    levels = tree_levels(tau - 1) if tau > 1 else 0
    out = np.zeros((n, levels), dtype=np.int64)
    for b in _blocks(n):
        blk = x[b]
        for h in range(levels):
            step = 1 << h
            ends = blk[:, step::step]
            starts = blk[:, 0 : ends.shape[1] * step : step]
            out[b, h] = np.count_nonzero(ends != starts, axis=1)
    return out


def changes_tree_spent(
    trajectories: ArrayLike,
    eps_node: float,
    eps_0: float,
    levels: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """CHANGES-TREE's spending: ε_0 + ε_n·(non-zero nodes at the user's level) (§19.4).

    ``levels``: each user's sampled level (public, drawn independently of her data); None
    gives the worst level, the bound that holds before the level is drawn. A level whose first
    node ends beyond these trajectories' epochs (drawn for a longer horizon) has no node yet.
    """
    counts = tree_nonzero_nodes(trajectories)
    if counts.shape[1] == 0:
        used = np.zeros(counts.shape[0], dtype=np.int64)
    elif levels is None:
        used = counts.max(axis=1)
    else:
        lv = np.asarray(levels)
        if lv.shape != (counts.shape[0],) or not np.issubdtype(lv.dtype, np.integer):
            raise ValueError(
                f"changes_tree_spent: 'levels' must be an integer vector of length "
                f"{counts.shape[0]}; got shape {lv.shape}, dtype {lv.dtype}."
            )
        if lv.size and (lv.min() < 0 or lv.max() >= 64):
            raise ValueError(
                "changes_tree_spent: 'levels' must lie in [0, 64); got "
                f"{int(lv.min() if lv.min() < 0 else lv.max())}."
            )
        inside = lv < counts.shape[1]
        used = np.where(
            inside, counts[np.arange(counts.shape[0]), np.minimum(lv, counts.shape[1] - 1)], 0
        )
    return eps_0 + eps_node * used


def ddrm_changed_epochs(trajectories: ArrayLike, items: ArrayLike) -> NDArray[np.int64]:
    """Epochs at which a DDRM user's candidate nodes are not both zero (§19.5).

    User u tracks b_s = 1[x_{s−1} = item_u] for s = 1..τ, with b_0 = 0. At s she reports the
    leaf (s − 1, s] or the largest node ending at s (level ν(s), the trailing zeros of s); an
    epoch costs ε when either candidate's difference b_s − b_{s−2^h} is non-zero.
    """
    x = check_trajectories("ddrm_changed_epochs", trajectories)
    n, tau = x.shape
    it = np.asarray(items)
    if it.shape != (n,) or not np.issubdtype(it.dtype, np.integer):
        raise ValueError(
            f"ddrm_changed_epochs: 'items' must be an integer vector of length {n}; got shape "
            f"{it.shape}, dtype {it.dtype}."
        )
    out = np.empty(n, dtype=np.int64)
    s_all = np.arange(1, tau + 1)
    top = np.array([trailing_level(int(s)) for s in s_all])
    for b in _blocks(n):
        bits = np.zeros((b.stop - b.start, tau + 1), dtype=bool)
        bits[:, 1:] = x[b] == it[b, None]
        nz = bits[:, 1:] != bits[:, :-1]
        for h in range(1, int(top.max(initial=0)) + 1):
            s = s_all[top == h]
            nz[:, s - 1] |= bits[:, s] != bits[:, s - (1 << h)]
        out[b] = np.count_nonzero(nz, axis=1)
    return out


def ddrm_spent(trajectories: ArrayLike, items: ArrayLike, eps: float) -> NDArray[np.float64]:
    """DDRM's spending: ε per epoch whose candidate nodes are not both zero (§19.5)."""
    return eps * ddrm_changed_epochs(trajectories, items)


def thresh_references(updates: ArrayLike) -> NDArray[np.int64]:
    """For each epoch t, the last update epoch before t (−1 when none) (§19.3)."""
    up = np.asarray(updates, dtype=bool)
    idx = np.where(up, np.arange(up.size), -1)
    last = np.maximum.accumulate(idx)
    ref = np.empty(up.size, dtype=np.int64)
    ref[0] = -1
    ref[1:] = last[:-1]
    return ref


def thresh_spent(
    trajectories: ArrayLike,
    updates: ArrayLike,
    eps_vote: float,
    eps_est: float,
    max_votes: int,
    max_updates: int,
) -> NDArray[np.float64]:
    """THRESH's spending: ε_vote per real vote and ε_est per real estimate, each capped (§19.3).

    A user votes for real at epoch t when her value differs from hers at the last update
    before t (no vote before the first update); every update collects a real estimate from
    every user whose counter allows it. ``updates``: the server's public (τ,) update flags.
    """
    x = check_trajectories("thresh_spent", trajectories)
    up = np.asarray(updates, dtype=bool)
    if up.shape != (x.shape[1],):
        raise ValueError(
            f"thresh_spent: 'updates' must be a boolean vector of length {x.shape[1]}; got "
            f"shape {up.shape}."
        )
    ref = thresh_references(up)
    cols = np.flatnonzero(ref >= 0)
    votes = np.empty(x.shape[0], dtype=np.int64)
    for b in _blocks(x.shape[0]):
        blk = x[b]
        votes[b] = np.count_nonzero(blk[:, cols] != blk[:, ref[cols]], axis=1)
    real_estimates = min(int(up.sum()), max_updates)
    return eps_vote * np.minimum(votes, max_votes) + eps_est * real_estimates


# --------------------------------------------------------------------------------------------
# The front: one protocol, its declared accounting, the users' trajectories
# --------------------------------------------------------------------------------------------

#: What each rule's figure compares (docs/math.md §19.6), shown beside every summary.
COMPARISONS = {
    "per-report": "any two trajectories (t reports at ε each)",
    "per-memo": "trajectories of one change pattern (math §4: min(t·ε1, d·ε∞))",
    "per-window": "trajectories that differ inside one window of w epochs (w-event)",
    "per-change": "the protocol's data-independent default; any two trajectories: the sum",
}


@dataclass(frozen=True)
class Ledger:
    """What each user spent under a protocol's own accounting (docs/math.md §19.6).

    Attributes
    ----------
    protocol : str
        The protocol's name.
    rule : str
        Its accounting rule (``per-report``, ``per-memo``, ``per-window``, ``per-change``).
    spent : ndarray, shape (n,)
        The rule's figure per user: t·ε; min(t·ε1, d·ε∞); the worst window of w epochs; what
        the change-based protocol charged.
    lifetime : ndarray, shape (n,)
        What the user spent over the whole horizon (sequential composition): equal to
        ``spent`` except for w-event protocols, where it sums every epoch.
    comparison : str
        Between which trajectories ``spent`` holds.
    """

    protocol: str
    rule: str
    spent: NDArray[np.float64]
    lifetime: NDArray[np.float64]
    comparison: str

    def summary(self) -> dict[str, float]:
        """Median, 99th percentile and maximum of ``spent`` and of ``lifetime``."""
        out = {}
        for key, arr in (("spent", self.spent), ("lifetime", self.lifetime)):
            out[f"{key}_median"] = float(np.median(arr))
            out[f"{key}_p99"] = float(np.quantile(arr, 0.99))
            out[f"{key}_max"] = float(np.max(arr))
        return out


def ledger(protocol: Any, trajectories: ArrayLike, run: Any = None, state: Any = None) -> Ledger:
    """Each user's spent ε under ``protocol.accounting`` (docs/math.md §19.6).

    ``trajectories``: (n, τ) codes of the protocol's domain (numbers in the declared range for
    the numeric mechanisms, math §20), one row per user and one report per epoch. ``run``: what
    the server decided in a simulation (a w-event run's per-user spending; a change-based run's
    levels, items or update epochs); without it a w-event protocol is charged its guarantee (ε
    in every window) and a change-based one its worst case over the public draws. ``state``:
    per-user state of a memo chain whose memo key depends on it (LOLOHA's hash ids, a numeric
    chain's rounding offsets; without it the values stand for the keys, an upper bound), or of a
    change-based mechanism instead of a run (CHANGES-TREE's levels, DDRM's items, as a
    population's ``memo.state`` holds them).
    """
    acc = protocol.accounting
    size = protocol.domain_size
    owner = f"ledger ({protocol.name})"
    if size is None:  # numbers (an interval's, math §20.8) or refused by the domain
        x = protocol.domain.trajectories(owner, trajectories)
    else:
        x = check_trajectories(owner, trajectories, size)
    tau = x.shape[1]
    if acc.rule == "per-report":  # τ·ε whatever the values (codes or numbers)
        spent = np.full(x.shape[0], float(spent_epsilon(tau, 0, acc.eps_report, None)))
        lifetime = spent
    elif acc.rule == "per-memo":
        keys = protocol.ledger_keys(x, state)
        spent = np.asarray(
            spent_epsilon(tau, distinct_counts(keys), acc.eps_report, acc.eps_memo),
            dtype=np.float64,
        )
        lifetime = spent
    elif acc.rule == "per-window":
        if run is None:
            spent = np.full(x.shape[0], float(acc.eps_window))
            lifetime = np.full(x.shape[0], acc.worst_case(tau))
        else:
            spend = run.user_spend()
            if spend is None or spend.shape != x.shape:
                raise ValueError(
                    f"ledger: the run of {protocol.name} must record each of the {x.shape[0]} "
                    f"users' spending over {tau} epochs (a per-user run)."
                )
            spent = np.asarray(window_spent(spend, acc.window))
            lifetime = np.asarray(total_spent(spend))
    else:
        spent = np.asarray(protocol.change_spent(x, run, state), dtype=np.float64)
        lifetime = spent
    return Ledger(protocol.name, acc.rule, spent, lifetime, COMPARISONS[acc.rule])


class _CallableModule(types.ModuleType):
    """``longldp.privacy.ledger(protocol, trajectories)`` calls :func:`ledger`."""

    def __call__(self, protocol: Any, trajectories: ArrayLike, run: Any = None, state: Any = None):
        return ledger(protocol, trajectories, run, state)


sys.modules[__name__].__class__ = _CallableModule
