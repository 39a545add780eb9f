"""Synthetic data that changes: streams with a controlled change rate, and LDP-IDS-style streams.

Every generator returns ``values[τ, n]`` (design §3): row t holds the n users' codes at epoch t,
and row t differs from row t − 1 exactly for the users who changed (docs/math.md §19.7).

- :func:`changing_stream`: each user changes at epoch t with probability r_t and then takes a
  value drawn from the target law conditioned on differing from her current one. The rate
  pattern sets r_t (:func:`change_rates`): ``steady`` (r_t = r), ``periodic`` (r_t =
  r·(1 + sin 2πt/P), mean r), ``bursty`` (all the change at every P-th epoch, r_t = min(1, r·P)),
  ``drifting`` (steady rate, and the target law's ranks rotate by one value every P epochs, so
  the population's frequencies move).
- :func:`binary_stream`: a binary attribute whose share of ones follows a given curve p_t, with
  the fewest individual changes (exactly |round(n·p_t) − round(n·p_{t−1})| users flip), and the
  three curves of the LDP-IDS experiments' synthetic streams (:func:`ldp_ids_curve`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.data.synthetic import sample_codes, zipf_probabilities

PATTERNS = ("steady", "periodic", "bursty", "drifting")
LDP_IDS_CURVES = ("LNS", "Sin", "Log")


def change_rates(tau: int, rate: float, pattern: str = "steady", period: int = 20) -> NDArray:
    """Per-epoch probability r_t that a user changes (r_0 = 0: epoch 0 is the start)."""
    owner = "change_rates"
    tau = check.integer(owner, "tau", tau, minimum=1)
    rate = check.probability(owner, "rate", rate)
    pattern = check.choice(owner, "pattern", pattern, PATTERNS)
    period = check.integer(owner, "period", period, minimum=1)
    t = np.arange(tau, dtype=np.float64)
    if pattern in ("steady", "drifting"):
        r = np.full(tau, rate)
    elif pattern == "periodic":
        r = np.clip(rate * (1.0 + np.sin(2.0 * math.pi * t / period)), 0.0, 1.0)
    else:
        r = np.where(np.arange(tau) % period == 0, min(1.0, rate * period), 0.0)
    r[0] = 0.0
    return r


def _redraw(old: NDArray, p: NDArray, rng: np.random.Generator) -> NDArray:
    """A value ~ p conditioned on differing from ``old`` (elementwise), by rejection."""
    k = p.size
    new = sample_codes(old.size, p, rng)
    same = np.flatnonzero(new == old)
    for _ in range(64):
        if same.size == 0:
            return new
        new[same] = sample_codes(same.size, p, rng)
        same = same[new[same] == old[same]]
    # p concentrated on one value: the rest move to a uniform other value.
    new[same] = (old[same] + 1 + rng.integers(0, k - 1, size=same.size)) % k
    return new


def changing_stream(
    n: int,
    k: int,
    tau: int,
    rate: float,
    rng: np.random.Generator,
    pattern: str = "steady",
    period: int = 20,
    s: float = 1.0,
) -> NDArray[np.int64]:
    """``values[τ, n]`` whose users change at the rates of :func:`change_rates`.

    Epoch 0 is drawn from Zipf(s) over [0, k); a changing user moves to a value drawn from the
    target law (Zipf, rotated by one rank every ``period`` epochs under ``drifting``)
    conditioned on differing from her current value.
    """
    owner = "changing_stream"
    n = check.integer(owner, "n", n, minimum=1)
    k = check.integer(owner, "k", k, minimum=2)
    rates = change_rates(tau, rate, pattern, period)
    p = zipf_probabilities(k, s)
    out = np.empty((rates.size, n), dtype=np.int64)
    out[0] = sample_codes(n, p, rng)
    for t in range(1, rates.size):
        target = np.roll(p, t // period) if pattern == "drifting" else p
        movers = np.flatnonzero(rng.random(n) < rates[t])
        out[t] = out[t - 1]
        out[t, movers] = _redraw(out[t - 1, movers], target, rng)
    return out


def ldp_ids_curve(name: str, tau: int, rng: np.random.Generator | None = None) -> NDArray:
    """Share of ones p_t of the LDP-IDS synthetic streams (docs/math.md §19.7).

    ``Sin``: p_t = 0.05·sin(0.01·t) + 0.075 (between 0.025 and 0.125); ``Log``: the logistic
    p_t = 0.25/(1 + e^{−0.01·t}); ``LNS``: a linear process with noise, p_t = p_{t−1} + N(0,
    0.0025²) from p_0 = 0.05, kept in [0.01, 0.99] (needs ``rng``). These are the shapes of the
    paper's three synthetic streams with our constants; docs/math.md §19.7 says where they
    may differ from the paper's.
    """
    name = {c.lower(): c for c in LDP_IDS_CURVES}.get(str(name).lower(), name)
    if name not in LDP_IDS_CURVES:
        raise ValueError(
            f"ldp_ids_curve: 'name' must be one of {', '.join(LDP_IDS_CURVES)}; got {name!r}."
        )
    tau = check.integer("ldp_ids_curve", "tau", tau, minimum=1)
    t = np.arange(tau, dtype=np.float64)
    if name == "Sin":
        return 0.05 * np.sin(0.01 * t) + 0.075
    if name == "Log":
        return 0.25 / (1.0 + np.exp(-0.01 * t))
    if rng is None:
        raise ValueError("ldp_ids_curve: the LNS curve is random; pass 'rng'.")
    steps = rng.normal(0.0, 0.0025, size=tau)
    steps[0] = 0.0
    p = np.empty(tau)
    p[0] = 0.05
    for i in range(1, tau):
        p[i] = min(0.99, max(0.01, p[i - 1] + steps[i]))
    return p


def binary_stream(p: NDArray, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``values[τ, n]`` over {0, 1} with round(n·p_t) ones at epoch t and the fewest flips."""
    owner = "binary_stream"
    n = check.integer(owner, "n", n, minimum=1)
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size < 1 or np.any(~np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError(f"{owner}: 'p' must be a non-empty vector of shares in [0, 1].")
    ones = np.rint(n * p).astype(np.int64)
    out = np.zeros((p.size, n), dtype=np.int64)
    out[0, rng.permutation(n)[: ones[0]]] = 1
    for t in range(1, p.size):
        out[t] = out[t - 1]
        diff = int(ones[t] - ones[t - 1])
        pool = np.flatnonzero(out[t] == (0 if diff > 0 else 1))
        out[t, rng.choice(pool, size=abs(diff), replace=False)] = 1 if diff > 0 else 0
    return out
