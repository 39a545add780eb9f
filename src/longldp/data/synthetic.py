"""Synthetic single-valued data over ``[0, k)``: Zipf, uniform and rounded Gaussian.

Each generator draws ``n`` i.i.d. codes from a known distribution, whose exact probabilities are
also exposed (``*_probabilities``) so that experiments can compare estimates with the truth.
Codes are returned as int32 (`longldp.data.CODE_DTYPE`).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from longldp.data.containers import CODE_DTYPE

__all__ = [
    "gaussian",
    "gaussian_probabilities",
    "sample_codes",
    "uniform",
    "zipf",
    "zipf_probabilities",
]


def _check_nk(n: object, k: object) -> tuple[int, int]:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or int(n) < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or int(k) < 1:
        raise ValueError(f"k (domain size) must be an integer >= 1, got {k!r}")
    return int(n), int(k)


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def zipf_probabilities(k: int, s: float = 1.0) -> np.ndarray:
    """Truncated Zipf law on ``[0, k)``: ``p(v) = (v + 1)**(-s) / sum_j (j + 1)**(-s)``.

    Parameters
    ----------
    k : int
        Domain size (>= 1).
    s : float
        Exponent (>= 0; ``s = 0`` is uniform).
    """
    _, k = _check_nk(0, k)
    if not np.isfinite(s) or s < 0:
        raise ValueError(f"Zipf exponent s must be finite and >= 0, got {s!r}")
    w = np.arange(1, k + 1, dtype=np.float64) ** (-float(s))
    return w / w.sum()


def gaussian_probabilities(
    k: int, mean: float | None = None, std: float | None = None
) -> np.ndarray:
    """Rounded Gaussian conditioned on ``[0, k)``.

    ``p(v) ∝ Φ((v + 1/2 - mean) / std) - Φ((v - 1/2 - mean) / std)`` for ``v`` in ``[0, k)``:
    the law of ``round(X)``, ``X ~ N(mean, std**2)``, conditioned on landing in the domain.

    Parameters
    ----------
    k : int
        Domain size (>= 1).
    mean : float, optional
        Centre (default ``(k - 1) / 2``).
    std : float, optional
        Standard deviation (> 0; default ``k / 6``, so about 99.7% of the mass is in range).
    """
    _, k = _check_nk(0, k)
    mean = (k - 1) / 2 if mean is None else float(mean)
    std = k / 6 if std is None else float(std)
    if not np.isfinite(mean):
        raise ValueError(f"mean must be finite, got {mean!r}")
    if not np.isfinite(std) or std <= 0:
        raise ValueError(f"std must be finite and > 0, got {std!r}")
    edges = (np.arange(k + 1, dtype=np.float64) - 0.5 - mean) / std
    cdf = NormalDist().cdf  # Φ; k + 1 edges, not a loop over users
    p = np.diff(np.array([cdf(float(e)) for e in edges]))
    total = p.sum()
    if not total > 0:
        raise ValueError(f"N({mean}, {std}**2) puts no mass on [0, {k}); move the mean")
    return p / total


def sample_codes(n: int, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n`` i.i.d. codes from the probability vector ``p`` (inverse CDF, vectorised)."""
    rng = _check_rng(rng)
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or (p < 0).any() or not np.isfinite(p).all():
        raise ValueError("p must be a non-empty 1-D vector of non-negative probabilities")
    total = p.sum()
    if not total > 0:
        raise ValueError("p must have a positive sum")
    cdf = np.cumsum(p / total)
    codes = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    return np.minimum(codes, p.size - 1).astype(CODE_DTYPE)


def zipf(n: int, k: int, rng: np.random.Generator, s: float = 1.0) -> np.ndarray:
    """``n`` codes from the truncated Zipf law on ``[0, k)`` (`zipf_probabilities`)."""
    n, k = _check_nk(n, k)
    return sample_codes(n, zipf_probabilities(k, s), rng)


def uniform(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` codes uniform on ``[0, k)``."""
    n, k = _check_nk(n, k)
    return _check_rng(rng).integers(0, k, size=n, dtype=CODE_DTYPE)


def gaussian(
    n: int,
    k: int,
    rng: np.random.Generator,
    mean: float | None = None,
    std: float | None = None,
) -> np.ndarray:
    """``n`` codes from the rounded Gaussian on ``[0, k)`` (`gaussian_probabilities`)."""
    n, k = _check_nk(n, k)
    return sample_codes(n, gaussian_probabilities(k, mean, std), rng)
