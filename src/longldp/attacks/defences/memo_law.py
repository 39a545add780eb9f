"""The exact law of an honest memoized device's τ reports, for the memo-consistency defence.

An honest device of a two-round chain that holds one value keeps one round-1 state (memo,
hash function, Hadamard row) and re-randomizes it at every report (docs/math.md §3). Given the
memo the τ reports are independent (docs/math.md §1.4), so their statistics have a known law
(docs/attacks.md §7.1):

- **one-symbol reports** (L-GRR over K = k symbols; LOLOHA and L-SH over their K = g buckets):
  the histogram (N_1..N_K) of the τ reports is Multinomial(τ; p2 at the memo, q2 = (1 − p2)/(K − 1)
  elsewhere), whatever the memo is. The defence reads its largest count M and its runner-up R2.
- **unary reports** (UE chains): bit i of the τ reports sums to X_i ~ Bin(τ, p2) if memo bit i
  is 1, Bin(τ, q2) if 0, independently over i; the memo bit of the device's value is 1 with p1,
  every other with q1. The defence reads the C largest X_i (order statistics).

Multinomial events are computed exactly by Poissonization: with independent N_i ~ Poisson(τπ_i),
Pr_multinomial[E] = Pr[E, Σ N_i = τ] / Pr[Σ N_i = τ]; an event that is a product over cells (or a
sum of such products) is a convolution of truncated Poisson pmfs of length τ + 1 (the K − 1
alike cells by repeated squaring).

The *kept law* (who survives the test and how their reports read) is what makes the defended
estimate unbiased (docs/math.md §18.4): the keep probability κ does not depend on the device's
value (every value has one memo cell or one value bit), and a kept device's report supports v
with P1' (holder) or P0' (non-holder), computed here from the same generating functions
(docs/attacks.md §7.2).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binom, poisson

#: Tail probabilities below this are treated as 0 when choosing thresholds (float noise).
_TINY = 1e-15


def _conv(a: NDArray[np.float64], b: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    return np.convolve(a, b)[:size]


def _power(a: NDArray[np.float64], e: int, size: int) -> NDArray[np.float64]:
    out = np.zeros(size)
    out[0] = 1.0
    sq = a.copy()
    while e:
        if e & 1:
            out = _conv(out, sq, size)
        e >>= 1
        if e:
            sq = _conv(sq, sq, size)
    return out


@dataclass(frozen=True)
class SymbolLaw:
    """Multinomial(τ; p2 at the memo, q2 at each of the K − 1 other symbols) and its tests.

    ``tests="one-value"`` flags a history when M ≥ x_hi (too concentrated: a replayed report),
    R2 ≥ y (a second symbol far above a non-memo symbol's share) or M ≤ x_lo (too spread:
    reports cycling over targets), each tail ≤ α/3; ``tests="replay"`` only M ≥ x_hi, tail ≤ α.
    The false-positive rate is ≤ α by the union bound and :attr:`fpr` is its exact value for a
    device that holds one value. A device whose value changes holds several memos and spreads
    its reports like a cycling attacker, which only the "replay" test tolerates
    (docs/attacks.md §7.1).
    """

    tau: int
    K: int
    p2: float
    alpha: float
    x_lo: int
    x_hi: int
    y: int
    fpr: float
    keep_memo_share: float  # a = E[N_memo | kept]/τ

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def build(tau: int, K: int, p2: float, alpha: float, tests: str = "one-value") -> SymbolLaw:
        q2 = (1.0 - p2) / (K - 1)
        size = tau + 1
        j = np.arange(size)
        memo_pmf = poisson.pmf(j, tau * p2)
        other_pmf = poisson.pmf(j, tau * q2)
        norm = poisson.pmf(tau, tau)

        def window(pmf: NDArray[np.float64], lo: int, hi: int) -> NDArray[np.float64]:
            """pmf restricted to lo <= j < hi."""
            out = pmf.copy()
            out[(j < lo) | (j >= hi)] = 0.0
            return out

        def prob(memo: NDArray[np.float64], others: NDArray[np.float64]) -> float:
            return float(_conv(memo, _power(others, K - 1, size), size)[tau] / norm)

        def all_below(x: int, mark: bool = False) -> float:
            memo = window(memo_pmf, 0, x) * (j if mark else 1)
            return prob(memo, window(other_pmf, 0, x))

        def at_most_one_at_least(y: int, x: int, mark: bool = False) -> float:
            """Pr[all cells < x and at most one cell >= y] (y <= x)."""
            w = j if mark else 1
            y = min(y, x)
            a0, b0 = window(memo_pmf, 0, y) * w, window(memo_pmf, y, x) * w
            aq, bq = window(other_pmf, 0, y), window(other_pmf, y, x)
            rest = _power(aq, K - 2, size)
            total = _conv(a0 + b0, _conv(aq, rest, size), size)[tau]
            total += (K - 1) * _conv(_conv(a0, bq, size), rest, size)[tau]
            return float(total / norm)

        full = tests == "one-value"
        cut = alpha / 3.0 if full else alpha
        # M >= x_hi: the smallest x with Pr[M >= x] <= cut (τ + 1: never flag).
        x_hi = _first(1, tau + 1, lambda x: 1.0 - all_below(x) <= cut + _TINY)
        # M <= x_lo: the largest x with Pr[M <= x] <= cut (−1: never flag).
        x_lo = _first(0, tau + 1, lambda x: all_below(x + 1) > cut) - 1 if full else -1
        # R2 >= y: the smallest y with Pr[R2 >= y] <= cut, above x_lo (τ + 1: never flag).
        y = tau + 1
        if full:
            y = _first(1, tau + 1, lambda v: 1.0 - at_most_one_at_least(v, tau + 1) <= cut + _TINY)
            y = max(y, x_lo + 1)
        kept = at_most_one_at_least(y, x_hi) - (all_below(x_lo + 1) if x_lo >= 0 else 0.0)
        kept_marked = at_most_one_at_least(y, x_hi, mark=True) - (
            all_below(x_lo + 1, mark=True) if x_lo >= 0 else 0.0
        )
        share = kept_marked / (tau * kept) if kept > 0 else p2
        return SymbolLaw(tau, K, p2, alpha, x_lo, x_hi, y, max(0.0, 1.0 - kept), share)

    @property
    def keep(self) -> float:
        """κ: the probability that an honest device passes."""
        return 1.0 - self.fpr


#: Order statistics of the bit counts tested by :class:`UnaryLaw`.
UNARY_ORDERS = 3


@dataclass(frozen=True)
class UnaryLaw:
    """Bit counts X_i of τ unary reports; flags the c-th largest X ≥ x_c for c = 1..C.

    With S_x = #{i : X_i ≥ x} = Bern(t_v(x)) + Bin(k − 1, t_o(x)) (the value's bit and the
    others, independent), x_c is the smallest x with Pr[S_x ≥ c] ≤ α/C, so the FPR is ≤ α by
    the union bound; :attr:`fpr` is its exact value. A fake device whose r target bits are on
    at every epoch has S_τ ≥ r, which an honest memo reaches only when r of its memo bits are
    set and each survives τ rounds of p2.
    """

    tau: int
    k: int
    thresholds: tuple[int, ...]  # x_1 >= x_2 >= ... >= x_C
    fpr: float
    value_bit_share: float  # E[X_v | kept]/τ for the value's bit: P1'
    other_bit_share: float  # E[X_w | kept]/τ for another bit: P0'

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def build(
        tau: int, k: int, p1: float, q1: float, p2: float, q2: float, alpha: float
    ) -> UnaryLaw:
        j = np.arange(tau + 1)
        on, off = binom.pmf(j, tau, p2), binom.pmf(j, tau, q2)
        value_pmf = p1 * on + (1 - p1) * off
        other_pmf = q1 * on + (1 - q1) * off
        v_tail = np.cumsum(value_pmf[::-1])[::-1]  # Pr[X >= x], x = 0..τ
        o_tail = np.cumsum(other_pmf[::-1])[::-1]
        orders = min(UNARY_ORDERS, k)

        def tail(x: int, c: int) -> float:  # Pr[S_x >= c]
            if x > tau:
                return 0.0
            tv, to = float(v_tail[x]), float(o_tail[x])
            return tv * float(binom.sf(c - 2, k - 1, to)) + (1 - tv) * float(
                binom.sf(c - 1, k - 1, to)
            )

        cut = alpha / orders
        xs = tuple(
            _first(1, tau + 1, lambda x, c=c: tail(x, c) <= cut + _TINY)
            for c in range(1, orders + 1)
        )
        kept, marked_v, marked_o = _unary_kept(xs, value_pmf, other_pmf, k)
        vs = marked_v / (tau * kept) if kept > 0 else p1 * p2
        os_ = marked_o / (tau * kept) if kept > 0 else q1 * p2
        return UnaryLaw(tau, k, xs, max(0.0, 1.0 - kept), vs, os_)

    @property
    def keep(self) -> float:
        """κ: the probability that an honest device passes."""
        return 1.0 - self.fpr


def _unary_kept(
    xs: tuple[int, ...], value_pmf: NDArray, other_pmf: NDArray, k: int
) -> tuple[float, float, float]:
    """Pr[kept], E[X_value·1(kept)], E[X_other·1(kept)] for the order-statistic test.

    A bit's band is b(X) = #{c : X ≥ x_c} in 0..C; the device is kept when, for every c,
    fewer than c bits reach x_c, i.e. #{bits with b ≥ C − c + 1} ≤ c − 1. Bits are independent,
    so a dynamic program over the bits, whose state is the number of bits in each band 1..C
    (few states: at most C − 1 bits above band 0), gives the exact probabilities.
    """
    C = len(xs)
    j = np.arange(value_pmf.size)
    band = np.zeros(j.size, dtype=np.int64)
    for x in xs:
        band += j >= x

    def weights(pmf: NDArray, mark: bool) -> NDArray:
        w = pmf * (j if mark else 1)
        return np.bincount(band, weights=w, minlength=C + 1)

    def ok(state: tuple[int, ...]) -> bool:  # state[b - 1] = bits in band b
        above = 0
        for b in range(C, 0, -1):
            above += state[b - 1]
            if above > C - b:
                return False
        return True

    def add(dist: dict, w: NDArray) -> dict:
        out: dict = {}
        for state, prob in dist.items():
            for b in range(C + 1):
                if w[b] == 0:
                    continue
                new = state if b == 0 else tuple(s + (i == b - 1) for i, s in enumerate(state))
                if ok(new):
                    out[new] = out.get(new, 0.0) + prob * w[b]
        return out

    empty = {tuple([0] * C): 1.0}
    others = empty
    for _ in range(k - 2):
        others = add(others, weights(other_pmf, False))
    wv, wv_m = weights(value_pmf, False), weights(value_pmf, True)
    wo, wo_m = weights(other_pmf, False), weights(other_pmf, True)
    kept = sum(add(add(others, wo), wv).values())
    marked_v = sum(add(add(others, wo), wv_m).values())
    marked_o = sum(add(add(others, wv), wo_m).values())
    return float(kept), float(marked_v), float(marked_o)


def _first(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest x in [lo, hi) with ok(x), for ok monotone (False then True); hi if none."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def kept_support(
    kind: str, law: SymbolLaw | UnaryLaw, p1: float, q1: float, K: int, P0: float
) -> tuple[float, float]:
    """(P1', P0'): support probabilities of a kept honest device's report (docs/attacks.md §7.2).

    One-symbol reports: a = E[N_memo | kept]/τ; the memo is the value's symbol with p1, so
    P1' = p1·a + (1 − p1)(1 − a)/(K − 1), and P0' likewise with q1 (L-GRR), or 1/g for hashing
    (a non-holder's hash is independent of its memo). Unary: P1' and P0' are the kept shares of
    the value bit and of another bit.
    """
    if isinstance(law, UnaryLaw):
        return law.value_bit_share, law.other_bit_share
    a = law.keep_memo_share
    rest = (1.0 - a) / (K - 1)
    p1_kept = p1 * a + (1.0 - p1) * rest
    if kind == "symbol":
        return p1_kept, q1 * a + (1.0 - q1) * rest
    return p1_kept, P0
