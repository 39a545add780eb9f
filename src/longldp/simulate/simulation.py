"""``simulate``: one protocol, a dataset ``values[τ, n]``, estimates of every timestamp.

The engines are those of :mod:`longldp.simulate.engines` (docs/design.md §4); the users are a
:class:`~longldp.simulate.population.Population` of one group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import metrics
from longldp.postprocess import PostProcessor
from longldp.protocols import FrequencyOracle
from longldp.simulate.engines import PER_USER, check_engine
from longldp.simulate.population import Population

OWNER = "simulate"


@dataclass(frozen=True)
class Simulation:
    """Estimates and truth of every timestamp, and the users' spent budget.

    Attributes
    ----------
    estimates, truth : numpy.ndarray, shape (τ, d)
        Frequency estimates (post-processed if asked) and true frequencies.
    spent_epsilon : numpy.ndarray of float64, shape (n,), or None
        Each user's ε bound (docs/math.md §4, :meth:`Population.budget`); None for a memoizing
        chain under the count-level engine, which draws no memo.
    """

    estimates: NDArray[np.float64]
    truth: NDArray[np.float64]
    spent_epsilon: NDArray[np.float64] | None

    @property
    def mse_per_timestamp(self) -> NDArray[np.float64]:
        """MSE_t = (1/d) Σ_v (f̂_t(v) − f_t(v))² of every timestamp, shape (τ,)."""
        return metrics.mse_per_timestamp(self.estimates, self.truth)

    @property
    def mse_avg(self) -> float:
        """MSE_avg: the mean of MSE_t over the τ timestamps ([002] eq. 1)."""
        return metrics.mse_avg(self.estimates, self.truth)


def simulate(
    proto: FrequencyOracle,
    values: ArrayLike,
    rng: Any,
    engine: str = PER_USER,
    postprocess: str | PostProcessor | None = None,
) -> Simulation:
    """Collect ``values[τ, n]`` through ``proto`` with the chosen engine and estimate each t.

    Parameters
    ----------
    proto : FrequencyOracle
    values : array_like of int, shape (τ, n)
        τ >= 1 timestamps of n >= 1 users, codes in [0, k). ``proto`` must estimate value
        frequencies (not RAPPOR's per-cohort shares: see :class:`Population` for those).
    rng : numpy.random.Generator or seed
    engine : {"per-user", "reports", "count-level"}, default="per-user"
        See :mod:`longldp.simulate.engines` for what each reproduces.
    postprocess : str, callable or None, default=None
        Applied to every timestamp's estimate (:mod:`longldp.postprocess`).

    Returns
    -------
    Simulation
    """
    data = np.asarray(values)
    if data.ndim != 2 or data.shape[0] == 0 or data.shape[1] == 0:
        raise ValueError(
            f"{OWNER}: 'values' must have shape (tau, n) with tau >= 1 timestamps and n >= 1 "
            f"users; got {data.shape}."
        )
    engine = check_engine(OWNER, engine)
    if not proto.estimates_frequencies:
        raise ValueError(
            f"{OWNER}: 'proto' must estimate value frequencies; {proto.name} estimates "
            f"{proto.estimand} (per-cohort shares, or a change-based mechanism's parts): run it "
            "through longldp.simulate.Population (or its kernel, proto.run) and combine them."
        )
    gen = np.random.default_rng(rng)
    tau, n = data.shape
    k = proto.domain_size
    check.domain_values(OWNER, data, k)
    offsets = np.arange(tau)[:, None] * k
    counts = np.bincount((data + offsets).ravel(), minlength=tau * k).reshape(tau, k)
    truth = proto.frequencies_from_counts(counts, n)
    population = Population.of(proto, n, engine, OWNER)
    (support,) = population.run(([row] for row in data), gen)
    estimates = np.empty_like(truth)
    for t in range(tau):  # post-processing is per timestamp
        estimates[t] = proto.estimate(support[t], n, postprocess)
    return Simulation(estimates, truth, population.budget()["epsilon"])
