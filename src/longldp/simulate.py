"""Run a population of clients over τ timestamps (docs/design.md §4).

Engines over a longitudinal dataset ``values[τ, n]``:

- ``"per-user"``: every user is a client with its own memos and per-user state (hash function,
  sampled buckets) kept across all timestamps, as the real client keeps them. Round 1 is drawn
  per user and memoized; round 2 and the aggregation are drawn from the memos without building
  report records (``perturb_support``). Given the memos and the per-user state this is the
  exact law of the server's support counts, so the engine is exact jointly over values and
  over time for every protocol: LOLOHA's hash values H_u(v) of the whole domain are computed
  once per user and reused at every report. Cost per timestamp: O(n + k) for the GRR chains and
  dBitFlipPM, O(n·k/8) for the UE chains and LOLOHA.
- ``"reports"``: the same clients with every report materialized (``perturb`` then the
  server's ``support_counts``): the real client path, O(n·k) per timestamp. Same law as
  ``"per-user"``.
- ``"count-level"``: each timestamp's support counts drawn directly from its true counts
  (``sample_support``), O(k) per timestamp. Exact *per timestamp only*: timestamps are drawn
  independently, so the memos' correlation across time is lost and the variance of any
  average over time is understated. For users whose values never change the time average of
  τ estimates has variance V1 + (Vtot − V1)/τ under the exact engines but Vtot/τ here, a
  factor 1 + (τ − 1)·V1/Vtot too small (:meth:`FrequencyOracle.time_average_variance`;
  docs/math.md §1.4 and §16.3). Measured at n = 20,000, k = 74, τ = 50, ε∞ = 2, ε1 = 0.8
  (``benchmarks/time_average_variance.py``): 3× (L-GRR) to 8× (UE chains), 10–13× (LOLOHA)
  and 50× (dBitFlipPM), only 1.03× for L-GRR with the "paper" calibration. Use it for
  per-timestamp accuracy (MSE per timestamp), not for statistics over time.
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

ENGINES = ("per-user", "reports", "count-level")


@dataclass(frozen=True)
class Simulation:
    """Estimates and truth of every timestamp, and the users' spent budget (per-user engine)."""

    estimates: NDArray[np.float64]  # (τ, d)
    truth: NDArray[np.float64]  # (τ, d)
    spent_epsilon: NDArray[np.float64] | None  # (n,) per user; None for count-level

    @property
    def mse_per_timestamp(self) -> NDArray[np.float64]:
        return metrics.mse_per_timestamp(self.estimates, self.truth)

    @property
    def mse_avg(self) -> float:
        return metrics.mse_avg(self.estimates, self.truth)


def simulate(
    proto: FrequencyOracle,
    values: ArrayLike,
    rng: Any,
    engine: str = "per-user",
    postprocess: str | PostProcessor | None = None,
) -> Simulation:
    """Collect ``values[τ, n]`` through ``proto`` with the chosen engine and estimate each t.

    ``values`` must have τ ≥ 1 timestamps of n ≥ 1 users; see the module docstring for what
    each engine reproduces.
    """
    data = np.asarray(values)
    if data.ndim != 2 or data.shape[0] == 0 or data.shape[1] == 0:
        raise ValueError(
            "simulate: 'values' must have shape (tau, n) with tau >= 1 timestamps and n >= 1 "
            f"users; got {data.shape}."
        )
    if engine not in ENGINES:
        raise ValueError(f"simulate: 'engine' must be one of {ENGINES}; got {engine!r}.")
    gen = np.random.default_rng(rng)
    tau, n = data.shape
    check.domain_values("simulate", data, proto.k)
    offsets = np.arange(tau)[:, None] * proto.k
    counts = np.bincount((data + offsets).ravel(), minlength=tau * proto.k).reshape(tau, proto.k)
    truth = proto.frequencies_from_counts(counts, n)
    if engine == "count-level":  # timestamps are independent: draw them all at once
        support = proto.sample_support(counts, n, gen)
        return Simulation(proto.estimate(support, n, postprocess), truth, None)
    estimates = np.empty_like(truth)
    memo = proto.new_memo(n)
    for t in range(tau):
        if engine == "per-user":
            support = proto.perturb_support(data[t], memo, gen)
        else:
            support = proto.support_counts(proto.perturb(data[t], memo, gen))
        estimates[t] = proto.estimate(support, n, postprocess)
    return Simulation(estimates, truth, proto.spent_budget(memo)["epsilon"])
