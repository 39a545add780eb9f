"""Aggregating a report archive: local throughput, the unpacking baseline, and Dask scaling.

Measured in one run on the same archive (L-OSUE, k = 74, wire format v1):

1. **local**: ``aggregate_archive`` (read each row group, check every wire header, count the
   bits without unpacking) in this process, on one core: reports per second.
2. **unpackbits baseline**: the same slices read the same way, counted with
   ``np.unpackbits(bodies, axis=1).sum(axis=0)``; the ratio local / baseline is reported both
   end to end (reading included) and for the counting kernel alone.
3. **Dask**: the same call on a ``LocalCluster`` of one worker and on one of two workers (one
   thread each), both started before timing and kept for the whole run. The three ways
   (local, Dask 1 worker, Dask 2 workers) are timed *alternately*, ``--rounds`` times, so that a
   change in the machine's load hits all three alike; the load average is recorded before
   every round. Reported: every time, the median of each way, and the ratios of medians
   (Dask 2 / Dask 1, Dask 2 / local). On a shared machine, read the load beside the numbers.

The archive is written once by ``simulate_reports`` (bounded memory) under ``--workdir`` and
reused by later runs with the same size. Usage::

    python benchmarks/bench_aggregate.py                 # 10^8 reports (about 4.3 GB)
    python benchmarks/bench_aggregate.py --reports 10000000 --out benchmarks/results/aggregate.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.archive import (
    ArchiveWriter,
    aggregate_archive,
    local_cluster,
    read_info,
    row_groups,
    simulate_reports,
)
from longldp.protocols._bitcount import packed_column_sums

K = 74


def build(path: Path, reports: int, simulate: bool) -> None:
    """The benchmark archive: 10 epochs of reports in row groups of 10^6.

    By default the bodies are drawn uniformly from the 2^74 bit patterns, every one of which
    an L-OSUE client can send (aggregation cost does not depend on the values); ``--simulate``
    runs the real population simulation instead (slower to build, same aggregation work).
    """
    proto = ll.protocol("L-OSUE", k=K, eps_perm=2.0, eps_1=0.8)
    if path.exists() and read_info(path).num_rows == reports:
        return
    start = time.perf_counter()
    epochs = 10 if reports >= 10 else 1
    if simulate:
        simulate_reports(
            proto, path, n=reports // epochs, epochs=epochs, chunk_users=1_000_000, rng=2024
        )
    else:
        rng = np.random.default_rng(2024)
        header = np.frombuffer(proto.wire_header, np.uint8)
        group = 1_000_000
        with ArchiveWriter(path, proto, "bench") as writer:
            for first in range(0, reports, group):
                size = min(group, reports - first)
                rows = np.empty((size, proto.wire_size), dtype=np.uint8)
                rows[:, : header.size] = header
                rows[:, header.size :] = rng.integers(0, 256, (size, proto.report_nbytes), np.uint8)
                rows[:, -1] &= 0xC0  # k = 74: the low 6 bits of the last byte are padding
                ids = rng.integers(0, 256, (size, 16), np.uint8)
                writer.write(first * epochs // reports, ids, rows)
    print(f"archive: {reports:,} reports written in {time.perf_counter() - start:.0f} s")


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def unpack_baseline(path: Path) -> tuple[np.ndarray, float, float]:
    """Same slices, counted by unpacking every bit to a byte; returns counts, total s, kernel s.

    End to end it reads the same row groups and skips the header check that the local path
    does; the kernel time counts only the unpacking and the column sum of contiguous bodies.
    """
    proto = read_info(path).protocol
    header = proto.wire_size - proto.report_nbytes
    total = np.zeros(K, dtype=np.int64)
    kernel = 0.0
    start = time.perf_counter()
    for piece in row_groups(path):
        body = np.ascontiguousarray(piece.reports[:, header:])  # as the wire decoder gives it
        t0 = time.perf_counter()
        total += np.unpackbits(body, axis=1)[:, :K].sum(axis=0, dtype=np.int64)
        kernel += time.perf_counter() - t0
    return total, time.perf_counter() - start, kernel


def packed_kernel_time(path: Path) -> float:
    proto = read_info(path).protocol
    header = proto.wire_size - proto.report_nbytes
    kernel = 0.0
    for piece in row_groups(path):
        body = np.ascontiguousarray(piece.reports[:, header:])
        t0 = time.perf_counter()
        packed_column_sums(body, K)
        kernel += time.perf_counter() - t0
    return kernel


def load_average() -> float:
    """The one-minute load average (what `uptime` shows first)."""
    return round(os.getloadavg()[0], 2)


def alternate(path: Path, rounds: int) -> dict:
    """Time local, Dask 1 worker and Dask 2 workers alternately, ``rounds`` times each."""
    times: dict[str, list[float]] = {"local": [], "dask_1_worker": [], "dask_2_workers": []}
    loads: list[float] = []
    with local_cluster(1) as one, local_cluster(2) as two:
        ways = {
            "local": lambda: aggregate_archive(path),
            "dask_1_worker": lambda: aggregate_archive(path, scheduler=one),
            "dask_2_workers": lambda: aggregate_archive(path, scheduler=two),
        }
        for way in ways.values():  # warm-up: imports on the workers, the page cache
            way()
        for r in range(rounds):
            loads.append(load_average())
            for name, way in ways.items():
                _, seconds = timed(way)
                times[name].append(round(seconds, 3))
            print(
                f"round {r + 1}/{rounds} (load {loads[-1]}): "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                flush=True,
            )
    return {"times": times, "load_before_rounds": loads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/longldp-bench-aggregate"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=5, help="alternated timing rounds")
    parser.add_argument("--simulate", action="store_true", help="build by simulation")
    parser.add_argument(
        "--dask-only", action="store_true", help="skip the unpackbits baseline and kernels"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"losue-k{K}-{args.reports}.parquet"
    build(path, args.reports, args.simulate)
    n = read_info(path).num_rows

    result: dict = {
        "reports": n,
        "protocol": "L-OSUE k=74 (wire 22 bytes)",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_at_start": load_average(),
    }
    if not args.dask_only:
        aggregate_archive(path)  # warm the page cache
        counts, local_s = timed(lambda: aggregate_archive(path))
        base_counts, base_s, base_kernel_s = unpack_baseline(path)
        zero = np.zeros(K, np.int64)
        ours = sum((agg.support_counts for agg in counts.by_epoch.values()), zero)
        assert np.array_equal(ours, base_counts), "the two counts differ"
        kernel_s = packed_kernel_time(path)
        result |= {
            "local_seconds": round(local_s, 3),
            "local_reports_per_second_per_core": round(n / local_s),
            "unpackbits_seconds_end_to_end": round(base_s, 3),
            "ratio_end_to_end_vs_unpackbits": round(base_s / local_s, 2),
            "kernel_seconds_packed": round(kernel_s, 3),
            "kernel_seconds_unpackbits": round(base_kernel_s, 3),
            "ratio_kernel_vs_unpackbits": round(base_kernel_s / kernel_s, 2),
        }
    runs = alternate(path, args.rounds)
    med = {k: float(np.median(v)) for k, v in runs["times"].items()}
    result |= {
        "alternated_rounds": args.rounds,
        "seconds_per_round": runs["times"],
        "load_before_rounds": runs["load_before_rounds"],
        "median_seconds": {k: round(v, 3) for k, v in med.items()},
        "ratio_dask_2_vs_dask_1": round(med["dask_1_worker"] / med["dask_2_workers"], 2),
        "ratio_dask_2_vs_local": round(med["local"] / med["dask_2_workers"], 2),
        "ratio_dask_1_vs_local": round(med["local"] / med["dask_1_worker"], 2),
        "load_at_end": load_average(),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
