"""Longitudinal numeric mechanisms: α-point rounding, a memo per rounded value, a one-bit second
round (docs/math.md §20.8–§20.9). Pure vectorized functions over a population.

One user, at every report: round the value t ∈ [0, 1] to the grid j/s with the user's offset a
(drawn once, :func:`new_offsets`); the first time key j is used, draw the memo y1 of the rounded
value with the memo mechanism at ε∞ and keep it for ever (round 1); report one bit with
Pr[1 | y1] = (1 + κ·y1)/2, κ = tanh(ε1/2) (round 2). The bit debiased, (2b − 1)/κ, is an
unbiased estimate of u = 2t − 1.

- ``"Duchi"``: the memo is Duchi's ±C∞ (a bit) and round 2 flips it with probability
  γ = (1 − κC∞)/2: this is 1BitMean with α-point rounding, memoization and output perturbation
  of Ding, Kulkarni and Yekhanin 2017, **L-1BitMean**, calibrated so that one report costs
  exactly ε1.
- ``"PM"``, ``"HM"``: the memo is a PM (HM) output at ε∞ (our design, math §20.9), **L-PM**
  and **L-HM**: every report is still Duchi's channel at ε1, but the memo part of the variance
  is PM's (HM's) at ε∞, which is what a long average keeps.

For the distribution, **L-SW** (our design, math §20.11, :func:`sw_perturb`): the memo is the
output bucket of SW at ε∞ on the rounded value, round 2 is GRR over the buckets calibrated so
that one report costs exactly ε1, and EMS over the grid points estimates the distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import numeric as nm
from longldp.protocols.numeric import sw
from longldp.protocols.numeric.oneshot import hm_sample, pm_sample, sw_sample


def new_offsets(n: int, rng: object) -> NDArray[np.float64]:
    """Each user's rounding offset a ~ U[0, 1), drawn once and kept (math §20.8)."""
    n = check.integer("new_offsets", "n", n, minimum=0)
    return rng.random(n)  # type: ignore[attr-defined,no-any-return]


@dataclass
class ChainMemo:
    """Round-1 state of a population: offsets a (n,), memos y1 (n, s + 1), drawn flags.

    A dense table: s + 1 slots per user (s is small, math §20.9 on its choice). Mutable: the
    memos are drawn lazily, the first time a user's rounded value takes a key.
    """

    offsets: NDArray[np.float64]
    memo: NDArray[np.float64]
    drawn: NDArray[np.bool_]

    def __post_init__(self) -> None:
        # C order, so that the flat views perturb writes through are views, never copies
        self.memo = np.ascontiguousarray(self.memo, dtype=np.float64)
        self.drawn = np.ascontiguousarray(self.drawn, dtype=bool)

    @property
    def s(self) -> int:
        """Grid resolution: keys 0..s."""
        return self.memo.shape[1] - 1

    def distinct(self) -> NDArray[np.int64]:
        """Memos each user holds (what (4.1) multiplies ε∞ by)."""
        return np.count_nonzero(self.drawn, axis=1)


def new_memo(n: int, s: int, rng: object) -> ChainMemo:
    """An empty population memo with fresh offsets."""
    s = check.integer("new_memo", "s", s, minimum=1)
    off = new_offsets(n, rng)
    return ChainMemo(off, np.zeros((off.size, s + 1)), np.zeros((off.size, s + 1), dtype=bool))


def round1(
    mechanism: str, u_grid: NDArray[np.float64], eps_perm: float, rng: object
) -> NDArray[np.float64]:
    """Memos y1 of rounded values u_j = 2j/s − 1 under the memo mechanism at ε∞."""
    key = check.choice("round1", "mechanism", mechanism, ("duchi", "1bitmean", "pm", "hm"))
    if key in ("duchi", "1bitmean") or (key == "hm" and nm.hm_beta(eps_perm) == 0.0):
        c = nm.duchi_bound(eps_perm)
        bit = rng.random(u_grid.shape) < nm.duchi_threshold(eps_perm, u_grid)  # type: ignore[attr-defined]
        return np.where(bit, c, -c)
    return (pm_sample if key == "pm" else hm_sample)(u_grid, eps_perm, rng)


def _memos(
    owner: str, t: ArrayLike, state: ChainMemo, draw: Callable[[NDArray[np.int64]], NDArray]
) -> NDArray:
    """Every user's memo at her rounding key of t; the memos of new (user, key) pairs are
    drawn in one call, ``draw(grid indices j)``, and kept in ``state``."""
    t = np.asarray(t, dtype=np.float64)
    if t.shape != state.offsets.shape:
        raise check._fail(
            owner, "t", f"one value per user, shape {state.offsets.shape}",
            check.Described(f"shape {t.shape}"),
        )  # fmt: skip
    keys = nm.rounding_keys(t, state.s, state.offsets)
    keys += np.arange(0, t.size * (state.s + 1), state.s + 1)  # flat index of (user, key)
    drawn, memo = state.drawn.reshape(-1), state.memo.reshape(-1)
    fresh = keys[~drawn[keys]]
    if fresh.size:
        memo[fresh] = draw(fresh % (state.s + 1))
        drawn[fresh] = True
    return memo[keys]


def perturb(
    mechanism: str,
    t: ArrayLike,
    state: ChainMemo,
    eps_perm: float,
    eps_1: float,
    rng: object,
) -> NDArray[np.uint8]:
    """One timestamp: every user's report bit for her value t ∈ [0, 1] (memos drawn lazily).

    Vectorized over users: the keys, the users whose memo at their key is new (drawn in one
    call), then round 2 on the memos.
    """
    eps_perm, eps_1 = nm.chain_budgets(mechanism, eps_perm, eps_1)

    def draw(j: NDArray[np.int64]) -> NDArray[np.float64]:
        return round1(mechanism, 2.0 * j / state.s - 1.0, eps_perm, rng)

    y1 = _memos("chain perturb", t, state, draw)
    return (rng.random(y1.shape) < nm.round2_threshold(eps_1, y1)).astype(np.uint8)  # type: ignore[attr-defined]


def debias(bits: ArrayLike, eps_1: float) -> NDArray[np.float64]:
    """û = (2b − 1)/κ, κ = tanh(ε1/2): unbiased for u (math (20.17))."""
    return (2.0 * np.asarray(bits, dtype=np.float64) - 1.0) / nm.round2_slope(eps_1)


def estimate_mean_u(bits: ArrayLike, eps_1: float) -> float:
    """Mean of the debiased bits of one timestamp, in u units."""
    b = np.asarray(bits)
    return float((2.0 * np.count_nonzero(b) / b.size - 1.0) / nm.round2_slope(eps_1))


# --------------------------------------------------------------------------------------------
# L-SW: the memoized distribution form (math §20.11)
# --------------------------------------------------------------------------------------------


def sw_perturb(
    t: ArrayLike,
    state: ChainMemo,
    eps_perm: float,
    eps_1: float,
    d_out: int,
    rng: object,
) -> NDArray[np.int64]:
    """One timestamp of L-SW: every user's report, an output bucket in [0, d_out).

    Round 1 (memo, per key): the bucket of SW(t_j) at ε∞. Round 2: keep the memo's bucket with
    p2, else a uniformly chosen other bucket (GRR), (p2, q2) of ``privacy.numeric.lsw_round2``.
    """
    p2, _ = nm.lsw_round2(eps_perm, eps_1, state.s, d_out)

    def draw(j: NDArray[np.int64]) -> NDArray[np.int64]:
        return sw.bucket_index(sw_sample(j / state.s, eps_perm, rng), eps_perm, d_out)

    kept = _memos("L-SW", t, state, draw).astype(np.int64)
    other = np.floor(rng.random(kept.shape) * (d_out - 1)).astype(np.int64)  # type: ignore[attr-defined]
    other += other >= kept
    keep = rng.random(kept.shape) < p2  # type: ignore[attr-defined]
    return np.where(keep, kept, other)


def sw_estimate(
    reports: ArrayLike, eps_perm: float, eps_1: float, s: int, d_out: int, **ems_options: object
) -> sw.EMSResult:
    """The distribution over the s + 1 grid points from L-SW reports (of one or many epochs),
    in two stages (math (20.27)).

    1. Round 2 undone on the counts: ĥ_m = (c_m/N − q2)/(p2 − q2) is unbiased for the share of
       reports whose memo is bucket m;
    2. EMS through the memo channel W1 (bucketed SW at ε∞) on N·max(ĥ, 0).

    EMS straight through the report channel W = q2 + (p2 − q2)·W1 over-smooths: its EM steps
    are (p2 − q2) times slower while the smoothing per step is the same (math §20.11).
    """
    p2, q2 = nm.lsw_round2(eps_perm, eps_1, s, d_out)
    buckets = check.domain_values("L-SW", reports, d_out, name="reports")
    counts = np.bincount(buckets.ravel(), minlength=d_out).astype(float)
    total = counts.sum()
    memo_share = np.clip((counts / total - q2) / (p2 - q2), 0.0, None)
    if memo_share.sum() == 0:
        memo_share[:] = 1.0
    w1 = nm.sw_grid_channel(eps_perm, s, d_out)
    return sw.ems(memo_share * total, w1.T, **ems_options)  # type: ignore[arg-type]
