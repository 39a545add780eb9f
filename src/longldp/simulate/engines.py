"""The names of the simulation engines, defined once (docs/design.md §4).

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
  factor 1 + (τ − 1)·V1/Vtot too small
  (:meth:`~longldp.protocols.estimator.SupportEstimator.time_average_variance`;
  docs/math.md §1.4 and §16.3). Measured at n = 20,000, k = 74, τ = 50, ε∞ = 2, ε1 = 0.8
  (``benchmarks/time_average_variance.py``): 3× (L-GRR) to 8× (UE chains), 10–13× (LOLOHA)
  and 50× (dBitFlipPM), only 1.03× for L-GRR with the "paper" calibration. Use it for
  per-timestamp accuracy (MSE per timestamp), not for statistics over time. No memo is drawn,
  so the spent budget of a memoizing chain is unknown (:meth:`Population.budget`).

Which engines apply is derived from the protocol class's traits (:func:`engines_for`,
docs/design.md §2.2): the per-user and reports engines run every registered protocol whose
rounds the server does not plan, on its own inputs (integer codes, the strings of
Bloom-filter RAPPOR, reals, items). The count-level engine draws support counts from *value
counts* (``sample_support``), which exist only for a protocol whose inputs are codes
(``input_domain.codes``) and whose estimate is a vector of value frequencies (``estimand``);
RAPPOR's Bloom and boolean encoders estimate per-cohort shares of set bits and have no such
sampler (Bloom RAPPOR draws its count-level matrix from strings and counts:
``RAPPOR.sample_counts``).
"""

from __future__ import annotations

from typing import Any

from longldp import _validate as check

PER_USER = "per-user"
REPORTS = "reports"
COUNT_LEVEL = "count-level"
#: Every engine, in the order error messages list them.
ENGINES = (PER_USER, REPORTS, COUNT_LEVEL)


def check_engine(owner: str, engine: Any) -> str:
    """``engine`` lower-cased when it names an engine; else ``ValueError`` naming ``owner``."""
    return check.choice(owner, "engine", engine, ENGINES)


def engines_for(proto: Any) -> tuple[str, ...]:
    """The engines that run a protocol (class or instance), from its traits (see above): none
    for a mechanism whose rounds the server plans (no engine plans them yet); the per-user and
    reports engines for every other; the count-level engine too when its inputs are codes and
    its estimate a vector of value frequencies."""
    if proto.rounds.planned:
        return ()
    if proto.estimand.frequency_vector and proto.input_domain.codes:
        return ENGINES
    return (PER_USER, REPORTS)


def check_applies(owner: str, engine: str, proto: Any) -> None:
    """``ValueError`` naming ``owner`` when ``engine`` cannot run ``proto`` (`engines_for`)."""
    allowed = engines_for(proto)
    if not allowed:
        raise ValueError(
            f"{owner}: {proto.name}'s rounds are planned by the server (rounds 'planned'); no "
            "simulation engine plans them."
        )
    if engine not in allowed:
        raise ValueError(
            f"{owner}: the {engine!r} engine draws support counts from value counts, which "
            f"{proto.name} does not estimate (per-cohort shares); 'engine' must be one of "
            f"{', '.join(repr(e) for e in allowed)} for it."
        )
