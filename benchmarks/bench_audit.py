"""Benchmark: the one-report audits: the game (vectorized vs one client call per trial) and the
black-box audit with tests found from data, in the same run.

For each protocol (k = 8, ε∞ = 2, ε1 = 0.8; one-shot oracles at ε = 1) the script times

- the vectorized audit: ``audit_game(proto, 10**6)``: 10⁶ trials per world, i.e. 2·10⁶ clients
  through ``perturb`` on fresh memos, scored by the likelihood ratio, the threshold chosen on
  20% of them and the Clopper–Pearson bound computed on the rest;
- the per-trial loop: ``audit_game(proto, n_loop, clients="loop")``: the same audit, but every
  trial builds one device client (``proto.client(rng)``) and calls ``client.report(v)`` once.

Both in the same run, with the same generator kind; the ratio is of the time *per trial*
(the loop runs fewer trials, ``--loop-trials``, as it is slow). Target: 10⁶ trials in under
10 s on two cores.

The black-box part (``--part blackbox``) times ``audit_randomizer`` on each protocol's client
wrapped as a plain function returning wire-format reports (``protocol_randomizer``), 10⁶
trials per world for the inputs 0 and k − 1 (the game's two worlds), the whole search
included (histograms, columns, bits, bit pairs, naive Bayes and the classifier), beside
``audit_game`` on the same protocol in the same run; the ratio is black box / game. It also
times the randomizer alone (2·10⁶ reports), so that the audit's own share is visible. OUE at
k = 128 has a 16-byte body, the widest report of the target (reports of ≤ 16 bytes). Each row
records the load average when it started and the process's CPU time beside the wall time.

The script prints Markdown tables and writes them (and JSON) under ``benchmarks/results/``; it
never fails on a miss (timings on a shared machine vary).

    python benchmarks/bench_audit.py [--part game|blackbox|all] [--trials 1000000]
        [--loop-trials 20000] [--repeats 3]
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
from longldp.audit import audit_game, audit_randomizer, protocol_randomizer
from longldp.audit.randomizers import audit_domain

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
#: The black-box cases: the game's, and a report of 16 varying bytes.
BLACKBOX_CASES: tuple[tuple[str, dict], ...] = (*CASES, ("OUE", {"k": 128, "eps": 1.0}))


def _time(fn, repeats: int) -> tuple[float, float, object]:
    """(median, minimum, last result) of ``repeats`` runs."""
    wall, _, out = _time_cpu(fn, repeats)
    return statistics.median(wall), min(wall), out


def _time_cpu(fn, repeats: int) -> tuple[list[float], list[float], object]:
    """(wall seconds, CPU seconds of this process, last result) of ``repeats`` runs. The CPU
    time (user + system, all threads) is what the run would take on an idle core, which the
    wall time on a shared machine is not."""
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu, out


def game_part(args: argparse.Namespace) -> list[dict]:
    """The game, vectorized and looped (the original benchmark)."""
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
    return rows


def blackbox_part(args: argparse.Namespace) -> list[dict]:
    """audit_randomizer on the wrapped client vs audit_game, same protocol, same run."""
    rows = []
    for name, params in BLACKBOX_CASES:
        proto = ll.protocol(name, **params)
        k = audit_domain(proto)
        fn = protocol_randomizer(proto)
        claim = proto.single_report_epsilon()
        values = np.repeat(np.array([0, k - 1]), args.trials)
        load = os.getloadavg()[0]
        (rand_t,), (rand_cpu,), _ = _time_cpu(
            lambda f=fn, v=values: f(v, np.random.default_rng(2)), 1
        )
        bb_wall, bb_cpu, bb = _time_cpu(
            lambda f=fn, c=claim, kk=k: audit_randomizer(
                f,
                k=kk,
                claim=c,
                trials=args.trials,
                inputs=(0, kk - 1),
                rng=np.random.default_rng(1),
            ),
            args.repeats,
        )
        bb_t, bb_min = statistics.median(bb_wall), min(bb_wall)
        game_wall, game_cpu, game = _time_cpu(
            lambda p=proto: audit_game(p, args.trials, rng=np.random.default_rng(1)), args.repeats
        )
        game_t = statistics.median(game_wall)
        rows.append(
            {
                "protocol": game.protocol,  # type: ignore[attr-defined]
                "load_1min": load,
                "claim": claim,
                "report_bytes": bb.report_bytes,  # type: ignore[attr-defined]
                "lower_blackbox": bb.lower,  # type: ignore[attr-defined]
                "test": f"{bb.family}: {bb.test}",  # type: ignore[attr-defined]
                "lower_game": game.lower,  # type: ignore[attr-defined]
                "trials": args.trials,
                "randomize_s": rand_t,
                "randomize_cpu_s": rand_cpu,
                "blackbox_s": bb_t,
                "blackbox_min_s": bb_min,
                "blackbox_cpu_s": statistics.median(bb_cpu),
                "game_s": game_t,
                "game_cpu_s": statistics.median(game_cpu),
                "ratio": bb_t / game_t,
                "meets_target": bb_t < TARGET_SECONDS,
            }
        )
        print(
            f"{name} k={k} (load {load:.1f}): black box {bb_t:.2f} s, CPU "
            f"{statistics.median(bb_cpu):.2f} s (randomize {rand_t:.2f} s), game "
            f"{game_t:.2f} s; bounds {bb.lower:.4f} / {game.lower:.4f}"  # type: ignore[attr-defined]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("game", "blackbox", "all"), default="all")
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--loop-trials", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/audit.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    game_rows = game_part(args) if args.part in ("game", "all") else []
    bb_rows = blackbox_part(args) if args.part in ("blackbox", "all") else []
    cpus = os.cpu_count()
    load_after = os.getloadavg()[0]
    lines = [
        f"# Audit benchmark ({cpus} CPUs visible, median of {args.repeats} runs)",
        "",
        f"Machine load (1-minute average) {load_before:.1f} before, {load_after:.1f} after: "
        "times above the target on a loaded machine say more about the load than the code.",
        "",
    ]
    if game_rows:
        lines += [
            "## The one-report game",
            "",
            f"| protocol | claim | lower bound (vectorized) | {args.trials:,} trials: median "
            f"(min), s | < {TARGET_SECONDS:g} s | loop: {args.loop_trials:,} trials (s) | "
            "per-trial speed-up |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in game_rows:
            lines.append(
                f"| {r['protocol']} | {r['claim']:.4g} | {r['lower_vectorized']:.4g} | "
                f"{r['vectorized_s']:.2f} ({r['vectorized_min_s']:.2f}) | "
                f"{'yes' if r['meets_target'] else 'no'} | "
                f"{r['loop_s']:.2f} | ×{r['speedup_per_trial']:,.0f} |"
            )
        lines.append("")
    if bb_rows:
        lines += [
            "## The black-box audit (tests found from data) beside the game",
            "",
            f"{args.trials:,} trials per world (inputs 0 and k − 1), search and held-out "
            "evaluation included; the randomizer alone draws the same 2·10⁶ wire-format "
            "reports. Wall seconds, and CPU seconds of the process (user + system; on a "
            "shared machine the wall time also holds other processes' turns); load = the "
            "1-minute load average when the row started.",
            "",
            "| protocol | report bytes | claim | black-box bound (test) | game bound | load | "
            "randomizer alone: wall (CPU), s | black box: median (min), s | black box CPU, s | "
            f"< {TARGET_SECONDS:g} s | game: wall (CPU), s | black box / game |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in bb_rows:
            lines.append(
                f"| {r['protocol']} | {r['report_bytes']} | {r['claim']:.4g} | "
                f"{r['lower_blackbox']:.4g} ({r['test']}) | {r['lower_game']:.4g} | "
                f"{r['load_1min']:.1f} | {r['randomize_s']:.2f} ({r['randomize_cpu_s']:.2f}) | "
                f"{r['blackbox_s']:.2f} ({r['blackbox_min_s']:.2f}) | "
                f"{r['blackbox_cpu_s']:.2f} | {'yes' if r['meets_target'] else 'no'} | "
                f"{r['game_s']:.2f} ({r['game_cpu_s']:.2f}) | ×{r['ratio']:.1f} |"
            )
        lines.append("")
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(
        json.dumps({"game": game_rows, "blackbox": bb_rows}, indent=2)
    )


if __name__ == "__main__":
    main()
