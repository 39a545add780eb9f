"""Closed-form expected gains, derived from longldp's own estimator (docs/attacks.md §3–§5).

The server estimates from all N = n + m reports with (docs/math.md §1.1)

    f̂_v = (C_v/N − P0)/(P1 − P0),

and the frequency gain of a target is Δf̂_t = f̂_t(after) − f̂_t(before), the estimate with the
fake reports minus the estimate of the n genuine reports alone ([CJG21] §3.1). f̂ is affine in
the support, so with s̄ the expected support of one fake report and φ = f̂(s̄, N = 1) its
*reading* (:func:`longldp.attacks.crafting.reading`),

    E[Δf̂_t] = β (φ_t − f_t),   β = m/(n + m),                                    (G.1)

(computed by :func:`longldp.privacy.poisoning.expected_gain`, docs/math.md (18.1))

for every protocol of the registry (dBitFlipPM's estimator is affine in its (ones, samplers)
pair, so (G.1) holds per bucket). The overall gain is G = Σ_{t∈T} E[Δf̂_t] = β(Σ_T φ_t − f_T).
For GRR, OUE and OLH this reproduces [CJG21] Table 1 (:func:`cao_table1`); the docs derive
each entry.

Over τ epochs with M_t ~ Bin(m, ρ) fake reports at each epoch t ≥ join (ρ the report rate),
E[Δf̂_t | M_t] = M_t/(n + M_t)·(φ_t − f_t) exactly, so the time-averaged estimate's expected
gain is (1/τ) Σ_{t ≥ join} E[M_t/(n + M_t)]·(φ − f_t)   (G.2). Summary: docs/math.md §18.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.attacks import crafting, kinds
from longldp.attacks.threat import ThreatModel, check_targets
from longldp.privacy import poisoning
from longldp.protocols import FrequencyOracle

OWNER = "attacks.gains"
VARIANTS = ("persistent", "per-epoch", "memo-mimic")


@dataclass(frozen=True)
class GainForecast:
    """Expected gains: per target, their sum G, and the reading φ of one fake report."""

    targets: NDArray[np.int64]
    per_target: NDArray[np.float64]
    reading: NDArray[np.float64]
    beta: float

    @property
    def total(self) -> float:
        """The overall gain G = Σ_t E[Δf̂_t]."""
        return float(self.per_target.sum())


def fake_reading(
    proto: FrequencyOracle,
    attack: str,
    targets: ArrayLike,
    *,
    variant: str = "per-epoch",
    hash_trials: int = crafting.HASH_TRIALS,
) -> NDArray[np.float64]:
    """φ: what one fake report adds to each estimate, f̂ of its expected support at N = 1.

    ``variant="memo-mimic"`` (MGA only) uses the expected support of a crafted memo run
    through an honest round 2; the other variants send crafted reports.
    """
    variant = check.choice(OWNER, "variant", variant, VARIANTS)
    attack = crafting.check_attack(attack, OWNER)
    if variant == "memo-mimic":
        if attack != "MGA":
            raise ValueError(
                f"{OWNER}: the 'memo-mimic' variant crafts a memo with MGA; got attack {attack!r}."
            )
        support = crafting.expected_memo_support(proto, targets, hash_trials=hash_trials)
    else:
        support = crafting.expected_support(proto, attack, targets, hash_trials=hash_trials)
    return crafting.reading(proto, support)


def expected_gain(
    proto: FrequencyOracle,
    attack: str,
    targets: ArrayLike,
    beta: float,
    true_frequencies: ArrayLike,
    *,
    variant: str = "per-epoch",
    hash_trials: int = crafting.HASH_TRIALS,
) -> GainForecast:
    """(G.1): E[Δf̂_t] = β(φ_t − f_t) for every target t, with β = m/(n + m).

    ``true_frequencies`` is the genuine users' frequency vector (length of the estimate).
    """
    beta = check.positive_float(OWNER, "beta", beta, upper=1.0)
    T = check_targets(targets, proto.estimate_size, OWNER)
    f = _frequencies(proto, true_frequencies)
    phi = fake_reading(proto, attack, T, variant=variant, hash_trials=hash_trials)
    return GainForecast(T, poisoning.expected_gain(beta, phi[T], f[T]), phi, beta)


def expected_share(n: int, m: int, rate: float) -> float:
    """E[M/(n + M)] for M ~ Bin(m, ρ): the fake share of one epoch's reports (exact sum)."""
    n = check.integer(OWNER, "n", n, minimum=1)
    m = check.integer(OWNER, "m", m, minimum=0)
    if rate >= 1.0 or m == 0:
        return poisoning.fake_share(n, m)
    from scipy.stats import binom

    x = np.arange(m + 1)
    return float(np.sum(binom.pmf(x, m, rate) * x / (n + x)))


def expected_time_average_gain(
    proto: FrequencyOracle,
    attack: str,
    threat: ThreatModel,
    n: int,
    truth: ArrayLike,
    *,
    variant: str = "per-epoch",
    hash_trials: int = crafting.HASH_TRIALS,
) -> GainForecast:
    """(G.2): expected gain of the time-averaged estimate (1/τ) Σ_t f̂_t, per target.

    ``truth`` is the genuine frequencies per epoch, shape (τ, d). Fake users report from
    ``threat.join_epoch`` on, each epoch with probability ``threat.report_rate``.
    """
    f = np.asarray(truth, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] != proto.estimate_size or f.shape[0] < 1:
        raise ValueError(
            f"{OWNER}: 'truth' must have shape (tau, {proto.estimate_size}) with tau >= 1; "
            f"got {f.shape}."
        )
    T = threat.target_array(proto.estimate_size, OWNER)
    phi = fake_reading(proto, attack, T, variant=variant, hash_trials=hash_trials)
    m = threat.fakes(n)
    share = expected_share(n, m, threat.report_rate)
    active = np.arange(f.shape[0]) >= threat.join_epoch
    per_epoch = poisoning.expected_gain(share, phi[T][None, :], f[:, T]) * active[:, None]
    return GainForecast(T, per_epoch.mean(axis=0), phi, threat.share(n))


def cao_table1(
    protocol: str, attack: str, beta: float, r: int, f_T: float, eps: float, d: int
) -> float:
    """The overall gain printed in [CJG21] Table 1 (kRR = GRR, OUE, OLH with g = e^ε + 1,
    MGA-OLH assuming one hash function gathers all r targets), for cross-checking (G.1)."""
    e = math.exp(eps)
    key = (protocol.upper(), attack.upper())
    table = {
        ("GRR", "RPA"): beta * (r / d - f_T),
        ("GRR", "RIA"): beta * (1 - f_T),
        ("GRR", "MGA"): beta * (1 - f_T) + beta * (d - r) / (e - 1),
        ("OUE", "RPA"): beta * (r - f_T),
        ("OUE", "RIA"): beta * (1 - f_T),
        ("OUE", "MGA"): beta * (2 * r - f_T) + 2 * beta * r / (e - 1),
        ("OLH", "RPA"): -beta * f_T,
        ("OLH", "RIA"): beta * (1 - f_T),
        ("OLH", "MGA"): beta * (2 * r - f_T) + 2 * beta * r / (e - 1),
    }
    if key not in table:
        raise ValueError(
            f"{OWNER}: [CJG21] Table 1 covers GRR, OUE, OLH and RPA, RIA, MGA; got {key}."
        )
    return table[key]


def _frequencies(proto: FrequencyOracle, f: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(f, dtype=np.float64)
    if arr.shape != (proto.estimate_size,) or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"{OWNER}: 'true_frequencies' must be {proto.estimate_size} finite numbers; "
            f"got shape {arr.shape}."
        )
    return arr


def describe(proto: FrequencyOracle) -> dict[str, Any]:
    """The protocol's name, report kind and support probabilities (for study rows)."""
    return {
        "protocol": proto.name,
        "kind": kinds.attack_kind(proto),
        "P1": proto.P1,
        "P0": proto.P0,
    }
