"""What fake reports can do to an estimate: the gain of docs/math.md §18.1, in one place.

m fake reports beside n genuine ones make up the share β = m/(n + m) of the N = n + m reports
an estimate is computed from. Every estimator of the registry is affine in the support counts,
so one fake report of expected support s̄ *reads* φ = f̂(s̄, N = 1) (the estimator applied to it
as to a population of one), and the expected frequency gain of a value v, the estimate with
the fake reports minus the estimate of the genuine ones alone, is

    E[Δf̂_v] = β(φ_v − f_v)                                                          (18.1)

(Cao, Jia and Gong, "Data Poisoning Attacks to Local Differential Privacy Protocols", USENIX
Security 2021, §3.1 and Table 1; docs/attacks.md §3). :mod:`longldp.attacks` forecasts its
attacks' gains with it and the collection server bounds what a crowd of surplus devices could
do with it (docs/server.md, "Sybil bounds"); neither restates it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check

OWNER = "privacy.poisoning"


def fake_share(genuine: int, fake: int) -> float:
    """β = m/(n + m): the share of fake reports among the N = n + m an estimate counts."""
    n = check.integer(OWNER, "genuine", genuine, minimum=0)
    m = check.integer(OWNER, "fake", fake, minimum=0)
    if n + m == 0:
        raise ValueError(f"{OWNER}: 'genuine' + 'fake' must be at least 1; got 0 and 0.")
    return m / (n + m)


def expected_gain(beta: float, reading: ArrayLike, truth: ArrayLike) -> NDArray[np.float64]:
    """(18.1): E[Δf̂_v] = β(φ_v − f_v), elementwise (β the fake share, φ the reading of one
    fake report, f the genuine frequencies)."""
    beta = check.probability(OWNER, "beta", beta)
    phi = np.asarray(reading, dtype=np.float64)
    f = np.asarray(truth, dtype=np.float64)
    return beta * (phi - f)


def largest_shift(genuine: int, fake: int, largest_reading: float) -> float:
    """The largest expected rise of one value's estimate that ``fake`` reports can cause
    among ``genuine`` ones: (18.1) at f_v = 0 with every fake report reading the largest
    ``largest_reading`` φ_max any one report can (the maximal gain attack against a single
    target, [CJG21] §3.4: for GRR φ_max = 1 + (k − 1)/(e^ε − 1), Table 1 at r = 1)."""
    phi = float(largest_reading)
    if not math.isfinite(phi):
        raise ValueError(f"{OWNER}: 'largest_reading' must be a finite number; got {phi!r}.")
    return float(expected_gain(fake_share(genuine, fake), phi, 0.0))


__all__ = ["expected_gain", "fake_share", "largest_shift"]
