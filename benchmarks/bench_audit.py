"""Benchmark: the one-report distinguishing game, vectorized vs one client call per trial.

For each protocol (k = 8, ε∞ = 2, ε1 = 0.8; one-shot oracles at ε = 1) the script times

- the vectorized audit: ``audit_game(proto, 10**6)``: 10⁶ trials per world, i.e. 2·10⁶ clients
  through ``perturb`` on fresh memos, scored by the likelihood ratio, the threshold chosen on
  20% of them and the Clopper–Pearson bound computed on the rest;
- the per-trial loop: ``audit_game(proto, n_loop, clients="loop")``: the same audit, but every
  trial builds one device client (``proto.client(rng)``) and calls ``client.report(v)`` once.

Both in the same run, with the same generator kind; the ratio is of the time *per trial*
(the loop runs fewer trials, ``--loop-trials``, as it is slow). Target: 10⁶ trials in under
10 s on two cores. The script prints a Markdown table and writes it (and JSON) under
``benchmarks/results/``; it never fails on a miss (timings on a shared machine vary).

    python benchmarks/bench_audit.py [--trials 1000000] [--loop-trials 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.audit import audit_game

CASES: tuple[tuple[str, dict], ...] = (
    ("GRR", {"k": 8, "eps": 1.0}),
    ("OUE", {"k": 8, "eps": 1.0}),
    ("L-GRR", {"k": 8, "eps_perm": 2.0, "eps_1": 0.8}),
    ("L-OSUE", {"k": 8, "eps_perm": 2.0, "eps_1": 0.8}),
    ("OLOLOHA", {"k": 8, "eps_perm": 2.0, "eps_1": 0.8}),
    ("dBitFlipPM", {"k": 8, "eps_perm": 2.0, "d": 2}),
    ("RAPPOR", {"k": 8, "h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75}),
)
TARGET_SECONDS = 10.0


def _time(fn, repeats: int) -> tuple[float, float, object]:
    """(median, minimum, last result) of ``repeats`` runs."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--loop-trials", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/audit.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    for name, params in CASES:
        proto = ll.protocol(name, **params)
        vec_t, vec_min, vec = _time(
            lambda p=proto: audit_game(p, args.trials, rng=np.random.default_rng(1)), args.repeats
        )
        loop_t, _, loop = _time(
            lambda p=proto: audit_game(
                p, args.loop_trials, clients="loop", rng=np.random.default_rng(1)
            ),
            1,
        )
        per_vec, per_loop = vec_t / args.trials, loop_t / args.loop_trials
        rows.append(
            {
                "protocol": vec.protocol,  # type: ignore[attr-defined]
                "claim": vec.claim,  # type: ignore[attr-defined]
                "lower_vectorized": vec.lower,  # type: ignore[attr-defined]
                "lower_loop": loop.lower,  # type: ignore[attr-defined]
                "trials": args.trials,
                "vectorized_s": vec_t,
                "vectorized_min_s": vec_min,
                "loop_trials": args.loop_trials,
                "loop_s": loop_t,
                "speedup_per_trial": per_loop / per_vec,
                "meets_target": vec_t < TARGET_SECONDS,
            }
        )
        print(f"{name}: {vec_t:.2f} s for {args.trials:,}; loop ×{per_loop / per_vec:,.0f}")
    cpus = os.cpu_count()
    load_after = os.getloadavg()[0]
    lines = [
        f"# Audit benchmark: the one-report game ({cpus} CPUs visible, median of "
        f"{args.repeats} vectorized runs)",
        "",
        f"Machine load (1-minute average) {load_before:.1f} before, {load_after:.1f} after: "
        "times above the target on a loaded machine say more about the load than the code.",
        "",
        f"| protocol | claim | lower bound (vectorized) | {args.trials:,} trials: median (min), s "
        f"| < {TARGET_SECONDS:g} s | loop: {args.loop_trials:,} trials (s) | per-trial speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['protocol']} | {r['claim']:.4g} | {r['lower_vectorized']:.4g} | "
            f"{r['vectorized_s']:.2f} ({r['vectorized_min_s']:.2f}) | "
            f"{'yes' if r['meets_target'] else 'no'} | "
            f"{r['loop_s']:.2f} | ×{r['speedup_per_trial']:,.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
