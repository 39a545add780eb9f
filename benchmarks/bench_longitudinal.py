"""Longitudinal collection at the LOLOHA paper's Adult setting: whole grid, both engines.

All 45,222 Adult users, hours-per-week (k = 96), τ = 260 timestamps by interpolation,
ε∞ ∈ {0.5, 1, …, 5}, α = 0.4, 5 seeds; protocols L-GRR, L-SUE, L-OSUE, BiLOLOHA, OLOLOHA,
1BitFlipPM and bBitFlipPM (b = d = 96), as in Arcolezi et al. (EDBT 2023, §6). The grid runs on
local processes; the per-user engine is timed whole, the count-level engine whole, and the peer
library multi-freq-ldpy on a slice (a few users × a few timestamps), extrapolated linearly to
the same work and labelled as such.

Run: ``.venv/bin/python benchmarks/bench_longitudinal.py [--workers 2] [--quick]``
(the peer slice needs the ``bench`` extra: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.data import load, to_longitudinal
from longldp.simulate import simulate

TAU = 260
ALPHA = 0.4
EPS_GRID = tuple(np.round(np.arange(0.5, 5.01, 0.5), 2))
SEEDS = 5
PROTOCOLS: dict[str, tuple[str, dict]] = {
    "L-GRR": ("L-GRR", {"calibration": "paper"}),
    "L-SUE": ("L-SUE", {}),
    "L-OSUE": ("L-OSUE", {}),
    "BiLOLOHA": ("BiLOLOHA", {"calibration": "paper"}),
    "OLOLOHA": ("OLOLOHA", {"calibration": "paper"}),
    "1BitFlipPM": ("dBitFlipPM", {"d": 1}),
    "bBitFlipPM": ("dBitFlipPM", {"d": 96}),
}
OUT = Path(__file__).parent / "results"


def make(label: str, k: int, eps_perm: float) -> ll.FrequencyOracle:
    name, extra = PROTOCOLS[label]
    if name == "dBitFlipPM":
        return ll.protocol(name, k=k, eps_perm=eps_perm, b=k, **extra)
    return ll.protocol(name, k=k, eps_perm=eps_perm, eps_1=ALPHA * eps_perm, **extra)


@functools.lru_cache(maxsize=1)
def hours_per_week() -> np.ndarray:
    return np.asarray(load("adult")["hours-per-week"], dtype=np.int64)


@functools.lru_cache(maxsize=SEEDS)
def longitudinal_values(seed: int, tau: int) -> np.ndarray:
    """The interpolated data of one seed, built once per worker (not part of the timing)."""
    data_seed = np.random.SeedSequence(seed).spawn(2)[0]
    return to_longitudinal(hours_per_week(), tau, np.random.default_rng(data_seed))


def run_cell(args: tuple[str, float, int, str, int]) -> dict:
    """One (protocol, ε∞, seed) collection over all τ timestamps; returns time and MSE_avg."""
    label, eps_perm, seed, engine, tau = args
    values = longitudinal_values(seed, tau)
    proto_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    proto = make(label, 96, eps_perm)
    start = time.perf_counter()
    sim = simulate(proto, values, proto_rng, engine=engine)
    return {
        "protocol": label,
        "eps_perm": eps_perm,
        "seed": seed,
        "engine": engine,
        "seconds": time.perf_counter() - start,
        "mse_avg": sim.mse_avg,
        "analytic": float(np.mean(proto.variance(values.shape[1], sim.truth))),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_grid(engine: str, workers: int, eps_grid, seeds: int, tau: int) -> tuple[float, list]:
    # Seed-major order, so a worker rebuilds the interpolated data only when the seed changes.
    cells = [(p, e, s, engine, tau) for s in range(seeds) for p in PROTOCOLS for e in eps_grid]
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        rows = list(pool.map(run_cell, cells))
    return time.perf_counter() - start, rows


def peer_slice(users: int, timestamps: int) -> dict[str, float | str]:
    """Seconds per (user × timestamp) of multi-freq-ldpy's longitudinal clients + aggregator.

    Its clients do not memoize, so one call per user and timestamp is what a user of that
    library runs; every protocol of the grid has a counterpart there (L_LH is its LOLOHA).
    """
    try:
        from multi_freq_ldpy.long_freq_est import (  # type: ignore[import-untyped]
            L_GRR,
            L_LH,
            L_OSUE,
            L_SUE,
            dBitFlipPM,
        )
    except ImportError as err:  # pragma: no cover - optional
        return {"error": f"multi-freq-ldpy not importable: {err}"}
    rng = np.random.default_rng(0)
    values = rng.integers(0, 96, users)
    k, e, e1 = 96, 2.0, 0.8
    candidates = {
        "L-GRR": (
            lambda v: L_GRR.L_GRR_Client(v, k, e, e1),
            lambda r: L_GRR.L_GRR_Aggregator_MI(r, k, e, e1),
        ),
        "L-SUE": (
            lambda v: L_SUE.L_SUE_Client(v, k, e, e1),
            lambda r: L_SUE.L_SUE_Aggregator_MI(r, e, e1),
        ),
        "L-OSUE": (
            lambda v: L_OSUE.L_OSUE_Client(v, k, e, e1),
            lambda r: L_OSUE.L_OSUE_Aggregator_MI(r, e, e1),
        ),
        "BiLOLOHA": (
            lambda v: L_LH.L_LH_Client(v, k, e, e1, optimal=False),
            lambda r: L_LH.L_LH_Aggregator_MI(r, k, e, e1, optimal=False),
        ),
        "OLOLOHA": (
            lambda v: L_LH.L_LH_Client(v, k, e, e1, optimal=True),
            lambda r: L_LH.L_LH_Aggregator_MI(r, k, e, e1, optimal=True),
        ),
        "1BitFlipPM": (
            lambda v: dBitFlipPM.dBitFlipPM_Client(v, k, k, 1, e),
            lambda r: dBitFlipPM.dBitFlipPM_Aggregator_MI(r, k, 1, e),
        ),
        "bBitFlipPM": (
            lambda v: dBitFlipPM.dBitFlipPM_Client(v, k, k, k, e),
            lambda r: dBitFlipPM.dBitFlipPM_Aggregator_MI(r, k, k, e),
        ),
    }
    out: dict[str, float | str] = {}
    for label, (client, aggregator) in candidates.items():
        try:
            start = time.perf_counter()
            for _ in range(timestamps):
                aggregator([client(int(v)) for v in values])
            out[label] = (time.perf_counter() - start) / (users * timestamps)
        except Exception as err:  # a peer failure is reported, not fatal
            out[label] = float("nan")
            out[f"{label} error"] = repr(err)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true", help="1 seed, 3 budgets, τ = 26")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument(
        "--engines", default="count-level,per-user", help="comma-separated engines to time"
    )
    args = parser.parse_args()
    eps_grid = (0.5, 2.0, 5.0) if args.quick else EPS_GRID
    seeds, tau = (1, 26) if args.quick else (SEEDS, TAU)
    n = hours_per_week().size
    report: dict = {
        "setting": f"Adult hours-per-week, n={n}, k=96, tau={tau}, eps={list(eps_grid)}, "
        f"alpha={ALPHA}, seeds={seeds}, protocols={list(PROTOCOLS)}",
        "workers": args.workers,
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "longldp": ll.__version__,
        "python": platform.python_version(),
    }
    for engine in args.engines.split(","):
        seconds, rows = run_grid(engine, args.workers, eps_grid, seeds, tau)
        report[engine] = {
            "seconds": seconds,
            "note": "wall time of the grid on the process pool; data interpolation is done "
            "once per (worker, seed) and is included, process start-up too",
            "cells": len(rows),
            "peak_rss_mb_per_worker": max(r["peak_rss_mb"] for r in rows),
            "mse_over_analytic": float(np.mean([r["mse_avg"] / r["analytic"] for r in rows])),
            "per_protocol_seconds": {
                p: float(sum(r["seconds"] for r in rows if r["protocol"] == p)) for p in PROTOCOLS
            },
        }
        print(f"{engine}: {seconds:.1f} s for {len(rows)} collections", flush=True)
    if not args.skip_peer:
        per_cell = peer_slice(users=2000, timestamps=2)
        cells = len(eps_grid) * seeds
        report["peer_multi_freq_ldpy_extrapolated_seconds"] = {
            p: per_cell[p] * n * tau * cells
            for p in PROTOCOLS
            if isinstance(per_cell.get(p), float)
        }
        report["peer_slice"] = per_cell
        report["peer_note"] = (
            "multi-freq-ldpy timed on 2,000 users x 2 timestamps per protocol and extrapolated "
            "linearly to n x tau x (budgets x seeds); one process."
        )
    OUT.mkdir(exist_ok=True)
    name = "longitudinal_quick" if args.quick else "longitudinal"
    if args.engines != "count-level,per-user":
        name += "_" + args.engines.replace(",", "_")
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
