"""Where Dask starts to pay for `longldp aggregate`: the command end to end, local against
``--scheduler local --workers 2``, over archive sizes.

The same archives as ``bench_aggregate.py`` (L-OSUE, k = 74, 22-byte wire reports, row groups
of 10^6). Each size is timed as a user runs it: the whole ``longldp aggregate ARCHIVE`` command
in a fresh process (interpreter start, imports, and for Dask the LocalCluster's start and
shutdown), local and Dask alternately, ``--rounds`` times, with the page cache warm (one
untimed run of each first). A line t = c + s·N is fitted to each way's medians (least squares
over the sizes); the break-even size is where the lines cross, N* = (c_dask − c_local) /
(s_local − s_dask): below it the local command is faster. The load average is recorded before
every round; on a shared machine read it beside the numbers.

Usage::

    python benchmarks/bench_dask_breakeven.py --out benchmarks/results/dask_breakeven.json
    python benchmarks/bench_dask_breakeven.py --sizes 1000000,10000000 --rounds 2   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_aggregate import K, build, load_average

COMMAND = [sys.executable, "-m", "longldp", "aggregate"]
WAYS = {"local": [], "dask_local_2_workers": ["--scheduler", "local", "--workers", "2"]}


def run(path: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*COMMAND, str(path), "--top", "1", *extra], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def fit(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """(c, s) of t = c + s·N by least squares."""
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(seconds, float), 1)
    return float(intercept), float(slope)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000,100000000")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/longldp-bench-aggregate"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    args.workdir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for n in sizes:
        paths[n] = args.workdir / f"losue-k{K}-{n}.parquet"
        build(paths[n], n, simulate=False)
    times: dict[str, dict[int, list[float]]] = {w: {n: [] for n in sizes} for w in WAYS}
    loads: list[float] = []
    for n in sizes:  # warm the page cache and the imports
        for extra in WAYS.values():
            run(paths[n], extra)
    for r in range(args.rounds):
        loads.append(load_average())
        for n in sizes:
            for way, extra in WAYS.items():
                times[way][n].append(round(run(paths[n], extra), 3))
        print(f"round {r + 1}/{args.rounds} (load {loads[-1]}): "
              + "; ".join(f"{n:,}: " + ", ".join(f"{w} {times[w][n][-1]:.2f} s" for w in WAYS)
                          for n in sizes), flush=True)  # fmt: skip
    medians = {w: {n: float(np.median(v)) for n, v in by.items()} for w, by in times.items()}
    lines = {w: fit(sizes, [medians[w][n] for n in sizes]) for w in WAYS}
    (c_l, s_l), (c_d, s_d) = lines["local"], lines["dask_local_2_workers"]
    breakeven = (c_d - c_l) / (s_l - s_d) if s_l > s_d else None
    result = {
        "protocol": "L-OSUE k=74 (wire 22 bytes), row groups of 10^6",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "what": "the whole `longldp aggregate` command in a fresh process, page cache warm",
        "rounds": args.rounds,
        "seconds": {w: {str(n): v for n, v in by.items()} for w, by in times.items()},
        "median_seconds": {w: {str(n): round(v, 3) for n, v in by.items()}
                           for w, by in medians.items()},
        "fit_seconds": {w: {"fixed": round(c, 3), "per_10^8_reports": round(s * 1e8, 3)}
                        for w, (c, s) in lines.items()},
        "breakeven_reports": None if breakeven is None else round(breakeven, -5),
        "load_before_rounds": loads,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
