"""Run a population of clients over τ timestamps (docs/design.md §4).

Engines over a longitudinal dataset ``values[τ, n]``:

- ``"per-user"``: every user is a client with its own memo state across all timestamps. Round 1
  is drawn per user and memoized; round 2 is drawn at count level from the memos
  (``perturb_support``), which given the memos is the exact law of the server's aggregates,
  jointly over time, at O(n + k) per timestamp. For per-user-hash LOLOHA the users who do not
  hold v support it with probability 1/g independently at every timestamp (the reuse of
  H_u(v) across time is not reproduced, docs/design.md §4).
- ``"reports"``: the per-user engine with every report materialized (``perturb`` then the
  server's ``support_counts``): the real client path, O(n·k) per timestamp.
- ``"count-level"``: one timestamp's support counts drawn directly from its true counts
  (``sample_support``). Exact per timestamp, O(k) per timestamp; it does not reproduce the
  correlation a memo creates across timestamps.
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
    """Collect ``values[τ, n]`` through ``proto`` with the chosen engine and estimate each t."""
    data = np.asarray(values)
    if data.ndim != 2 or data.shape[1] == 0:
        raise ValueError(
            f"simulate: 'values' must have shape (tau, n) with n >= 1; got {data.shape}."
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
