"""Poisoning attacks: one study cell at n = 10⁶, τ = 100 (count level), and the memo-consistency
defence's throughput, each against a straightforward per-user loop timed in the same run.

Run with ``python benchmarks/bench_attacks.py [--repeats 3] [--out PATH]``. See
benchmarks/README.md ("bench_attacks.py") for what is measured.

1. **Attack cell.** n = 10⁶ genuine users, k = 74 (a Zipf law), τ = 100 epochs, β = 0.05 fake
   users running per-epoch MGA against three targets: ``run_attack(engine="count-level")``,
   then the estimate-level defences (normalization, Norm-Sub, recovery) on both sides. The
   loop baseline is what the cell would cost with one client per user: every genuine user's
   ``Client.report`` and the server's ``Aggregator.add``, one report at a time, timed on a
   slice of users for one epoch and scaled to n·τ reports.
2. **Memo consistency.** 10⁶ devices × τ = 10 reports each (k = 16; L-GRR, L-OSUE, OLOLOHA),
   stored epoch by epoch (as ``collect_reports`` and an export sorted by epoch and device lay
   them out) and shuffled: ``memo_consistency`` histories per second. The loop baseline scores
   one device at a time (its reports' histogram or bit counts, then the same thresholds) on a
   slice of devices, scaled to 10⁶.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import longldp as ll
from longldp import attacks as atk
from longldp.attacks.defences import law_for, memo_consistency
from longldp.attacks.defences.apply import defend
from longldp.attacks.defences.memo_law import UnaryLaw
from longldp.data import zipf_probabilities

ROOT = Path(__file__).resolve().parent
SEED = 20_261_125


def _median_time(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


# ---------------------------------------------------------------------- 1. the attack cell
def attack_cell(name: str, n: int, tau: int, k: int, repeats: int, slice_users: int) -> dict:
    proto = ll.protocol(name, k=k, eps_perm=2.0, eps_1=1.0)
    f = zipf_probabilities(k, 1.0)
    counts = np.floor(f * n).astype(np.int64)
    counts[: n - counts.sum()] += 1
    threat = atk.ThreatModel(targets=[k - 4, k - 3, k - 2], beta=0.05)

    def cell() -> dict:
        run = atk.run_attack(proto, threat, "MGA", counts=np.tile(counts, (tau, 1)), rng=SEED)
        return {d: defend(run, d).time_average_gain for d in ("none", "normalize", "norm-sub",
                                                                "recover")}

    seconds, gains = _median_time(cell, repeats)
    # The loop: one client per user, one report at a time, into the server's aggregator.
    values = np.repeat(np.arange(k), np.floor(f * slice_users).astype(int))
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()
    agg = proto.aggregator()
    for v in values:
        client = proto.client(rng)
        agg.add([client.report(int(v))])
    agg.estimate()
    per_report = (time.perf_counter() - start) / values.size
    loop_seconds = per_report * n * tau
    return {
        "protocol": name,
        "n": n,
        "tau": tau,
        "k": k,
        "cell_seconds": seconds,
        "loop_seconds_extrapolated": loop_seconds,
        "loop_us_per_report": per_report * 1e6,
        "loop_slice_reports": int(values.size),
        "ratio": loop_seconds / seconds,
        "gains": gains,
    }


# ---------------------------------------------------------------------- 2. memo consistency
def _loop_scores(proto: Any, device: np.ndarray, records: np.ndarray, n_dev: int) -> np.ndarray:
    """The per-device loop: each device's reports found, counted and tested one by one."""
    order = np.argsort(device, kind="stable")
    bounds = np.searchsorted(device[order], np.arange(n_dev + 1))
    kind = atk.attack_kind(proto)
    flagged = np.zeros(n_dev, dtype=bool)
    for u in range(n_dev):
        mine = records[order[bounds[u] : bounds[u + 1]]]
        law = law_for(proto, len(mine), 0.01)
        if kind == "unary":
            x = np.unpackbits(mine, axis=1, count=proto.k).sum(axis=0)
            assert isinstance(law, UnaryLaw)
            flagged[u] = any(
                int((x >= th).sum()) >= c + 1 for c, th in enumerate(law.thresholds)
            )
        else:
            sym = mine if kind == "symbol" else mine["bucket"]
            c = np.sort(np.bincount(sym))[::-1]
            second = c[1] if c.size > 1 else 0
            flagged[u] = c[0] >= law.x_hi or c[0] <= law.x_lo or second >= law.y
            if kind != "symbol":
                flagged[u] |= np.unique(mine["hash_id"]).size > 1
    return flagged


def memo_throughput(name: str, n: int, tau: int, k: int, repeats: int, slice_devices: int) -> dict:
    proto = ll.protocol(name, k=k, eps_perm=2.0, eps_1=1.0)
    rng = np.random.default_rng(SEED)
    values = np.tile(rng.integers(0, k, n), (tau, 1))
    log = atk.collect_reports(proto, values, rng=rng)
    memo_consistency(proto, log.device, log.records)  # warm the law cache
    tiled, verdict = _median_time(
        lambda: memo_consistency(proto, log.device, log.records), repeats
    )
    perm = rng.permutation(log.device.size)
    dev_s, rec_s = log.device[perm], log.records[perm]
    shuffled, verdict_s = _median_time(lambda: memo_consistency(proto, dev_s, rec_s), repeats)
    assert np.array_equal(verdict.flagged, verdict_s.flagged)
    small = log.device < slice_devices
    start = time.perf_counter()
    loop_flags = _loop_scores(proto, log.device[small], log.records[small], slice_devices)
    loop_per_device = (time.perf_counter() - start) / slice_devices
    assert np.array_equal(loop_flags, verdict.flagged[:slice_devices])
    return {
        "protocol": name,
        "devices": n,
        "tau": tau,
        "k": k,
        "epoch_major_seconds": tiled,
        "epoch_major_histories_per_s": n / tiled,
        "shuffled_seconds": shuffled,
        "shuffled_histories_per_s": n / shuffled,
        "loop_histories_per_s": 1.0 / loop_per_device,
        "loop_slice_devices": slice_devices,
        "ratio_epoch_major": loop_per_device * n / tiled,
        "ratio_shuffled": loop_per_device * n / shuffled,
        "flagged_share": float(verdict.flagged.mean()),
        "stated_fpr": float(verdict.stated_fpr()),
    }


def report(cells: list[dict], memos: list[dict], meta: dict) -> str:
    lines = [
        "# Poisoning attacks: benchmark",
        "",
        f"Machine: {meta['cpus']} CPUs, load average {meta['load']}, Python {meta['python']}, "
        f"NumPy {meta['numpy']}. Medians of {meta['repeats']} runs.",
        "",
        f"## One attack study cell (count level, n = {cells[0]['n']:,}, τ = 100, k = 74, "
        "β = 0.05, MGA)",
        "",
        "| protocol | cell (s) | per-user loop (s, extrap.) | loop µs/report | ratio | gain | "
        "gain after normalize / Norm-Sub / recover |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        g = c["gains"]
        lines.append(
            f"| {c['protocol']} | {c['cell_seconds']:.2f} | {c['loop_seconds_extrapolated']:,.0f}"
            f" | {c['loop_us_per_report']:.1f} | {c['ratio']:,.0f}× | {g['none']:.3f} | "
            f"{g['normalize']:.3f} / {g['norm-sub']:.3f} / {g['recover']:.3f} |"
        )
    lines += [
        "",
        f"## Memo-consistency defence ({memos[0]['devices']:,} device histories of τ = 10 "
        "reports, k = 16)",
        "",
        "| protocol | epoch-major (histories/s) | shuffled (histories/s) | per-device loop "
        "(histories/s) | ratio (epoch-major / shuffled) | flagged | stated FPR |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in memos:
        lines.append(
            f"| {m['protocol']} | {m['epoch_major_histories_per_s']:,.0f} | "
            f"{m['shuffled_histories_per_s']:,.0f} | {m['loop_histories_per_s']:,.0f} | "
            f"{m['ratio_epoch_major']:,.0f}× / {m['ratio_shuffled']:,.0f}× | "
            f"{m['flagged_share']:.4f} | {m['stated_fpr']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "attacks.md")
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--slice", type=int, default=20_000, help="users/devices of the loops")
    args = parser.parse_args()
    cells = [
        attack_cell(name, args.n, 100, 74, args.repeats, args.slice)
        for name in ("L-GRR", "L-OSUE", "OLOLOHA")
    ]
    memos = [
        memo_throughput(name, args.n, 10, 16, args.repeats, args.slice)
        for name in ("L-GRR", "L-OSUE", "OLOLOHA")
    ]
    meta = {
        "cpus": os.cpu_count(),
        "load": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "repeats": args.repeats,
    }
    text = report(cells, memos, meta)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(
        json.dumps({"meta": meta, "cells": cells, "memo": memos}, indent=1)
    )


if __name__ == "__main__":
    main()
