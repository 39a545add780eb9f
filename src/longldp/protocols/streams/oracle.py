"""The one-epoch frequency oracle of the stream mechanisms: GRR or OUE, per user or per count.

Pure functions, arrays in and arrays out, randomness from an explicit ``numpy.random.Generator``
(docs/math.md §19.1). The per-user samplers produce the reports a server would receive; the
count-level sampler draws the same support counts from the reporters' value counts in O(k):

- GRR keeps the value with λ = p − q and otherwise reports a uniform symbol of [0, k)
  (then Pr[y = x] = λ + (1 − λ)/k = p, Pr[y = w] = (1 − λ)/k = q), so the support is
  Binomial(c_v, λ) + Multinomial(m − Σ kept, uniform);
- OUE's bits are independent: C_v = Binomial(c_v, 1/2) + Binomial(m − c_v, q).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy.streams import fo_probabilities


def check_values(owner: str, values: object, k: object) -> tuple[NDArray[np.int64], int]:
    """(values[τ, n] as int64 codes in [0, k), k): a 2-D stream with τ >= 1 and k >= 2."""
    k = check.integer(owner, "k", k, minimum=2)
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError(
            f"{owner}: 'values' must be a (tau, n) array with tau >= 1; got shape {arr.shape}."
        )
    return check.domain_values(owner, arr, k), k


def perturb(values: NDArray, kind: str, k: int, eps: float, rng: np.random.Generator) -> NDArray:
    """Reports of m users: GRR symbols (m,) or OUE bit vectors (m, k) (bool)."""
    p, q = fo_probabilities(kind, k, eps)
    values = np.asarray(values, dtype=np.int64)
    m = values.size
    if kind == "grr":
        keep = rng.random(m) < p
        other = (values + 1 + rng.integers(0, k - 1, size=m)) % k
        return np.where(keep, values, other)
    bits = rng.random((m, k)) < q
    bits[np.arange(m), values] = rng.random(m) < p
    return bits


def support(reports: NDArray, kind: str, k: int) -> NDArray[np.int64]:
    """Support counts of a batch of reports (what the server aggregates)."""
    if kind == "grr":
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=k).astype(np.int64)
    return np.asarray(reports, dtype=bool).sum(axis=0, dtype=np.int64)


def sample_support(
    counts: NDArray, kind: str, k: int, eps: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Support counts drawn from the reporters' value counts (exact law of `support`)."""
    p, q = fo_probabilities(kind, k, eps)
    counts = np.asarray(counts, dtype=np.int64)
    m = int(counts.sum())
    if kind == "grr":
        kept = rng.binomial(counts, p - q)
        return kept + rng.multinomial(m - int(kept.sum()), np.full(k, 1.0 / k))
    return rng.binomial(counts, p) + rng.binomial(m - counts, q)


def estimate(supports: NDArray, m: int, kind: str, k: int, eps: float) -> NDArray[np.float64]:
    """f̂ = (C/m − P0)/(P1 − P0) (docs/math.md (1.1)); NaN when nobody reported."""
    p1, p0 = fo_probabilities(kind, k, eps)
    if m <= 0:
        return np.full(k, np.nan)
    return (np.asarray(supports, dtype=np.float64) / m - p0) / (p1 - p0)
