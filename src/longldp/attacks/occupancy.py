"""How many targets one hash function can gather: the law behind MGA against local hashing.

A fake user of a hashing oracle (OLH, BLH, LOLOHA) supports every target whose hash equals
its reported bucket. Cao, Jia and Gong (USENIX Security 2021, §3.5) let the fake user sample
hash functions and keep the one that puts the most targets into one bucket; their closed form
assumes it finds one that puts all r targets together. We compute the exact law of what a
search of S functions achieves instead (docs/attacks.md §3.3).

With r targets hashed independently and uniformly into g buckets, the largest bucket holds M
targets, and

    Pr[M ≤ x] = r!/g^r · [z^r] (Σ_{j ≤ x} z^j/j!)^g,                            (A.1)

the coefficient of a truncated exponential power (each bucket holds at most x of the r
labelled targets). The best of S independent functions holds M_S = max of S copies, so
Pr[M_S ≤ x] = Pr[M ≤ x]^S and E[M_S] = Σ_{x=0}^{r−1} (1 − Pr[M ≤ x]^S) (docs/math.md §18.2).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check

OWNER = "attacks.occupancy"


@functools.lru_cache(maxsize=1024)
def max_occupancy_cdf(r: int, g: int) -> tuple[float, ...]:
    """Pr[M ≤ x] for x = 0..r: the largest of g buckets after hashing r items uniformly (A.1)."""
    r = check.integer(OWNER, "r", r, minimum=1)
    g = check.integer(OWNER, "g", g, minimum=1)
    # log of r!/g^r; the polynomial's coefficients are z^j/j!, raised to the g-th power by
    # repeated squaring, truncated at degree r (higher terms cannot reach z^r).
    out = []
    for x in range(r + 1):
        base = np.array([1.0 / math.factorial(j) if j <= x else 0.0 for j in range(r + 1)])
        power = _poly_power(base, g, r)
        out.append(min(1.0, power[r] * math.factorial(r) / float(g) ** r))
    return tuple(out)


def _poly_power(base: NDArray[np.float64], exponent: int, degree: int) -> NDArray[np.float64]:
    result = np.zeros(degree + 1)
    result[0] = 1.0
    square = base.copy()
    e = exponent
    while e:
        if e & 1:
            result = np.convolve(result, square)[: degree + 1]
        e >>= 1
        if e:
            square = np.convolve(square, square)[: degree + 1]
    return result


def best_of_pmf(r: int, g: int, trials: int) -> NDArray[np.float64]:
    """Pr[M_S = x], x = 0..r: the largest bucket of the best of S = ``trials`` functions."""
    trials = check.integer(OWNER, "trials", trials, minimum=1)
    cdf = np.asarray(max_occupancy_cdf(r, g)) ** trials
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    pmf = np.clip(pmf, 0.0, None)
    return pmf / pmf.sum()


def expected_best(r: int, g: int, trials: int) -> float:
    """E[M_S] = Σ_x x·Pr[M_S = x]: targets one fake user's best function puts together."""
    pmf = best_of_pmf(r, g, trials)
    return float(np.dot(np.arange(pmf.size), pmf))
