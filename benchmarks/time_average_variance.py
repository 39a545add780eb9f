"""How much the count-level engine understates the variance of a time average.

Setting: n = 20,000 users whose values never change (a Zipf law p(v) ∝ 1/(v + 1) over
k = 74, counts rounded by largest remainder), τ = 50 timestamps, ε∞ = 2, ε1 = 0.8 (α = 0.4),
every longitudinal protocol. For each engine, R populations report τ times; the variance over
populations of the time-averaged estimate (mean over the k values) is compared with the exact
law V1 + (Vtot − V1)/τ (``time_average_variance``) and with the count-level law Vtot/τ.

Run: ``nice -n 10 python benchmarks/time_average_variance.py [--reps 200] [--reports-reps 40]``
Writes ``benchmarks/results/time_average_variance.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.simulate import simulate

N, K, TAU = 20_000, 74, 50
EPS_PERM, EPS_1 = 2.0, 0.8
PROTOCOLS: dict[str, tuple[str, dict]] = {
    "L-GRR": ("L-GRR", {"eps_1": EPS_1}),
    "L-GRR (paper)": ("L-GRR", {"eps_1": EPS_1, "calibration": "paper"}),
    "L-SUE": ("L-SUE", {"eps_1": EPS_1}),
    "L-OUE": ("L-OUE", {"eps_1": EPS_1}),
    "L-OSUE": ("L-OSUE", {"eps_1": EPS_1}),
    "L-SOUE": ("L-SOUE", {"eps_1": EPS_1}),
    "BiLOLOHA": ("BiLOLOHA", {"eps_1": EPS_1}),
    "OLOLOHA": ("OLOLOHA", {"eps_1": EPS_1}),
    "1BitFlipPM": ("dBitFlipPM", {"d": 1}),
    "bBitFlipPM": ("dBitFlipPM", {"d": K}),
}
OUT = Path(__file__).parent / "results" / "time_average_variance.json"


def zipf_values() -> np.ndarray:
    """(τ, N) constant values with a Zipf histogram (largest-remainder rounding)."""
    p = 1.0 / np.arange(1, K + 1)
    p /= p.sum()
    raw = p * N
    counts = np.floor(raw).astype(np.int64)
    counts[np.argsort(raw - counts)[::-1][: N - counts.sum()]] += 1
    return np.broadcast_to(np.repeat(np.arange(K), counts), (TAU, N))


def measure(label: str, engine: str, reps: int, values: np.ndarray) -> dict:
    name, extra = PROTOCOLS[label]
    proto = ll.protocol(name, k=K, eps_perm=EPS_PERM, **extra)
    f = proto.true_frequencies(values[0])
    seeds = np.random.SeedSequence([7, len(label), reps]).spawn(reps)
    start = time.perf_counter()
    means = np.array(
        [
            simulate(proto, values, np.random.default_rng(s), engine=engine).estimates.mean(0)
            for s in seeds
        ]
    )
    seconds = time.perf_counter() - start
    empirical = float(np.mean(means.var(axis=0, ddof=1)))
    exact = float(np.mean(proto.time_average_variance(N, f, TAU)))
    count_level = float(np.mean(proto.variance(N, f))) / TAU
    return {
        "protocol": label,
        "engine": engine,
        "reps": reps,
        "seconds": seconds,
        "empirical_over_exact": empirical / exact,
        "empirical_over_count_level_law": empirical / count_level,
        "exact_over_count_level_law": exact / count_level,
        "v1_share": float(np.mean(proto.first_round_variance(N, f) / proto.variance(N, f))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--reports-reps", type=int, default=40)
    args = parser.parse_args()
    values = zipf_values()
    rows = []
    for label in PROTOCOLS:
        for engine, reps in (
            ("count-level", args.reps),
            ("per-user", args.reps),
            ("reports", args.reports_reps),
        ):
            row = measure(label, engine, reps, values)
            rows.append(row)
            print(
                f"{label:14s} {engine:11s} reps={reps:4d} empirical/exact="
                f"{row['empirical_over_exact']:.3f} exact/(Vtot/τ)="
                f"{row['exact_over_count_level_law']:.2f} ({row['seconds']:.1f} s)",
                flush=True,
            )
    OUT.parent.mkdir(exist_ok=True)
    setting = f"n={N}, k={K}, tau={TAU}, eps_perm={EPS_PERM}, eps_1={EPS_1}, Zipf constant"
    OUT.write_text(json.dumps({"setting": setting, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
