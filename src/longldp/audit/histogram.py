"""A black-box *upper* confidence bound on ε for protocols with a small, known report space.

The lower bound of the game (:mod:`longldp.audit.game`) can refute a claim that is too small;
it cannot show that a claim is too *large* (a protocol that is more private than it says, which
costs utility). When every report belongs to a known finite set of S outputs, the whole channel
can be estimated: ``trials`` clients per input x ∈ [0, k) report once, the reports are counted
per distinct byte string, and simultaneous Clopper–Pearson intervals on all k·S cells (each
one-sided bound at level α/(2kS), Bonferroni) give, with probability ≥ 1 − α,

    ε ≤ max_y [ ln max_x U(x, y) − ln min_x L(x, y) ]            (docs/math.md §13.4)

It is ∞ as soon as one of the S outputs was never seen under some input. Valid only for the
declared report space (:func:`longldp.audit.channels.output_space_size`): a client that emits
a report outside it would be refused by the protocol's own decoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.audit import stats
from longldp.audit.channels import output_space_size
from longldp.audit.game import CLIENTS, describe
from longldp.protocols import FrequencyOracle, SecureRandom

#: Largest report space the histogram audit accepts.
MAX_SPACE = 4096


@dataclass(frozen=True)
class ChannelBounds:
    """Two-sided audit of one report from the estimated channel."""

    protocol: str
    claim: float
    upper: float
    estimate: float
    outputs_seen: int
    output_space: int
    trials: int
    alpha: float

    @property
    def loose(self) -> bool:
        """The upper bound is below the claim: the protocol does not reach its claimed ε."""
        return self.upper < self.claim


def channel_bounds(
    proto: FrequencyOracle,
    trials: int = 100_000,
    *,
    alpha: float = 0.01,
    claim: float | None = None,
    clients: str = "population",
    rng: Any = None,
) -> ChannelBounds:
    """Estimate the one-report channel from ``trials`` clients per input; bound ε from above."""
    trials = check.integer(proto.name, "trials", trials, minimum=10)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{proto.name}: 'alpha' must be in (0, 1); got {alpha!r}.")
    space = output_space_size(proto)
    if space is None or space > MAX_SPACE:
        size = "an unbounded one (per-user hash seeds)" if space is None else str(space)
        raise ValueError(
            f"{proto.name}: the histogram audit needs a report space of at most {MAX_SPACE} "
            f"outputs; this protocol has {size}."
        )
    if isinstance(rng, str) and rng == "secure":
        gen: Any = SecureRandom()
    else:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    inputs = proto.domain_size or 2  # over strings: the first two of proto.as_inputs
    rows = []
    for x in range(inputs):
        reporter = CLIENTS[clients](proto, trials, gen)
        values = proto.as_inputs(np.full(trials, x, dtype=np.int64))
        encoded = proto.encode_bodies(reporter.report(values))
        rows.append(np.ascontiguousarray(encoded).view(np.dtype((np.void, encoded.shape[1]))))
    _, inverse = np.unique(np.concatenate(rows).ravel(), return_inverse=True)
    seen = int(inverse.max()) + 1
    counts = np.zeros((inputs, seen), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(inputs), trials), inverse.ravel()), 1)
    level = alpha / (2 * inputs * space)
    upper_cells = stats.cp_upper(counts, trials, level)
    lower_cells = stats.cp_lower(counts, trials, level)
    if seen < space or np.any(lower_cells.min(axis=0) <= 0):
        upper = math.inf
    else:
        upper = float(np.max(np.log(upper_cells.max(axis=0)) - np.log(lower_cells.min(axis=0))))
    freq = counts / trials
    with np.errstate(divide="ignore"):
        est = float(np.max(np.log(freq.max(axis=0)) - np.log(freq.min(axis=0))))
    return ChannelBounds(
        protocol=describe(proto),
        claim=proto.single_report_epsilon() if claim is None else float(claim),
        upper=upper,
        estimate=est,
        outputs_seen=seen,
        output_space=space,
        trials=trials,
        alpha=alpha,
    )
