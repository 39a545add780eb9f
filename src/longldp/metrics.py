"""Accuracy metrics of frequency estimates (estimation layer; NumPy only)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def mse_per_timestamp(estimates: ArrayLike, truth: ArrayLike) -> NDArray[np.float64]:
    """(1/|D|) Σ_v (f̂(v)_t − f(v)_t)² for every timestamp t; inputs of shape (τ, |D|)."""
    est, true = np.atleast_2d(estimates), np.atleast_2d(truth)
    if est.shape != true.shape:
        raise ValueError(
            f"mse: 'estimates' and 'truth' must have the same shape; got {est.shape}, {true.shape}."
        )
    return np.mean((est - true) ** 2, axis=1)


def mse_avg(estimates: ArrayLike, truth: ArrayLike) -> float:
    """MSE_avg = (1/τ) Σ_t (1/|D|) Σ_v (f̂(v)_t − f(v)_t)²  ([002] eq. 1; [000] §3)."""
    return float(np.mean(mse_per_timestamp(estimates, truth)))
