"""Data that changes: the count-level LDP-IDS engine and the privacy ledger at scale.

Two targets of issue 29 (docs/streams.md), each measured with its practical limit in the same
run, so the figures are ratios that do not depend on the machine:

1. **Count-level simulation, 10⁶ users × 1,000 epochs** of every LDP-IDS method
   (``longldp.protocols.streams.wevent.run_counts``), k = 16, ε = 1, w = 20, on a steady stream
   of change rate 0.05 drawn at count level. Target: < 30 s per method. Limit: one oracle draw
   per epoch (``oracle.sample_support`` of the epoch's counts at ε, 1,000 draws): a method
   cannot do less than collect one epoch once.
2. **The ledger of 10⁶ trajectories × 100 epochs** (``longldp.privacy.ledger``), k = 16,
   int32 codes: memo chains (distinct keys), changes, w-event windows of a (10⁶, 100)
   participation matrix, CHANGES-TREE nodes, DDRM candidate nodes, THRESH votes. Target:
   < 10 s each. Limit: one pass over the array that compares neighbouring epochs
   (``count_nonzero(x[:, 1:] != x[:, :-1])``), the least any per-user accounting reads.

Run: ``.venv/bin/python benchmarks/bench_streams.py [--quick]`` (``--quick``: 10⁵ users);
results in ``benchmarks/results/streams.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from longldp.privacy import ledger
from longldp.privacy.streams import WEVENT_METHODS
from longldp.protocols.streams import oracle, wevent

OUT = Path(__file__).parent / "results"


def count_stream(n: int, k: int, tau: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """counts[τ, k] of a steady stream: each epoch a Binomial(n, rate) share of users redraws
    its value uniformly (a Markov chain at count level; no per-user array)."""
    counts = np.empty((tau, k), dtype=np.int64)
    counts[0] = rng.multinomial(n, np.full(k, 1.0 / k))
    for t in range(1, tau):
        movers = rng.binomial(counts[t - 1], rate)
        counts[t] = counts[t - 1] - movers + rng.multinomial(int(movers.sum()), np.full(k, 1 / k))
    return counts


def timed(fn, *args, **kw):
    start = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - start, out


def bench_count_level(n: int, tau: int, rng: np.random.Generator) -> dict:
    k, eps, w = 16, 1.0, 20
    counts = count_stream(n, k, tau, 0.05, rng)
    limit, _ = timed(lambda: [oracle.sample_support(c, "grr", k, eps, rng) for c in counts])
    rows = {}
    for method in WEVENT_METHODS:
        seconds, run = timed(wevent.run_counts, method, counts, eps, w, rng)
        truth = counts / n
        rows[method] = {
            "seconds": round(seconds, 3),
            "ratio_to_limit": round(seconds / limit, 2),
            "publications": int(run.published.sum()),
            "mse": float(np.mean((run.estimates - truth) ** 2)),
        }
    return {
        "n": n,
        "tau": tau,
        "k": k,
        "eps": eps,
        "w": w,
        "limit_seconds": round(limit, 3),
        "methods": rows,
    }


def bench_ledger(n: int, tau: int, rng: np.random.Generator) -> dict:
    k = 16
    traj = np.empty((n, tau), dtype=np.int32)
    traj[:, 0] = rng.integers(0, k, n)
    for t in range(1, tau):
        moved = rng.random(n) < 0.05
        traj[:, t] = np.where(moved, rng.integers(0, k, n), traj[:, t - 1])
    participation = rng.random((n, tau)) < 0.05
    updates = rng.random(tau) < 0.1
    items = rng.integers(0, k, n)
    limit, _ = timed(lambda: np.count_nonzero(traj[:, 1:] != traj[:, :-1], axis=1))
    cases = {
        "memo chains (min(t·ε1, d·ε∞))": lambda: ledger.memo_spent(traj, k, 0.4, 1.0),
        "changes": lambda: ledger.change_counts(traj),
        "w-event window (w = 20)": lambda: ledger.window_spent(participation, 20),
        "CHANGES-TREE": lambda: ledger.changes_tree_spent(traj, 0.5, 1.0),
        "DDRM": lambda: ledger.ddrm_spent(traj, items, 1.0),
        "THRESH": lambda: ledger.thresh_spent(traj, updates, 0.05, 0.1, 10, 5),
    }
    rows = {}
    for name, fn in cases.items():
        seconds, _ = timed(fn)
        rows[name] = {"seconds": round(seconds, 3), "ratio_to_limit": round(seconds / limit, 2)}
    return {"n": n, "tau": tau, "k": k, "limit_seconds": round(limit, 3), "accountings": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 users instead of 10^6")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    rng = np.random.default_rng(args.seed)
    result = {
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "count_level": bench_count_level(n, 1000, rng),
        "ledger": bench_ledger(n, 100, rng),
    }
    OUT.mkdir(exist_ok=True)
    name = "streams_quick.json" if args.quick else "streams.json"
    (OUT / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
