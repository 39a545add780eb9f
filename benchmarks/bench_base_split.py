"""The refactor of the protocol base (mechanism, estimator, codec) costs no speed: longldp's own
paths of ``bench_oracles.py`` timed for two source trees in one run.

    python benchmarks/bench_base_split.py --old PATH/TO/OLD/src [--repeats 7] [--rounds 3]

For every protocol of ``bench_oracles.build_specs()``, the per-user collection (``new_memo`` +
``perturb`` + ``aggregator().add`` + ``estimate``), the count-level draw (``sample_support`` +
``estimate``) and, for hashing protocols, ``support_counts`` are timed by
``bench_oracles.bench_longldp`` in one long-lived child process per tree. The two children take
turns, protocol by protocol, in an order that alternates every round (old then new, then new
then old), so both see the same load on a shared machine; the median over ``--rounds`` rounds is
kept. The ratio
new/old of each path (1 = same speed) is what moves ``bench_oracles``'s ratios to the peers,
whose own code is unchanged: speedup_new = speedup_committed · old/new. Writes
``benchmarks/results/base_split.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "base_split.json"

CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
import bench_oracles as b
values, _ = b.load_values(b.N_USERS, b.SEED)
specs = b.build_specs()
print(len(specs), flush=True)
for line in sys.stdin:
    spec = specs[int(line)]
    rows = [r for r in b.bench_longldp(spec, values, {repeats}, b.SEED) if r is not None]
    print(json.dumps({{f"{{spec.label}} | {{r.path}}": r.seconds for r in rows}}), flush=True)
"""


class Tree:
    """A child process with longldp imported from ``src``, timing one protocol per request."""

    def __init__(self, src: Path, repeats: int):
        env = {**os.environ, "PYTHONPATH": str(src)}
        code = CHILD.format(bench=str(ROOT), repeats=repeats)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.specs = int(self.proc.stdout.readline())

    def time(self, index: int) -> dict[str, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the old tree's src folder")
    ap.add_argument("--new", type=Path, default=ROOT.parent / "src")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    trees = {"old": Tree(args.old, args.repeats), "new": Tree(args.new, args.repeats)}
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        seconds: dict[str, dict[str, float]] = {"old": {}, "new": {}}
        for index in range(trees["new"].specs):
            for tree in order:
                seconds[tree].update(trees[tree].time(index))
        for tree in order:
            runs[tree].append(seconds[tree])
    for tree in trees.values():
        tree.close()
    paths = list(runs["new"][0])
    table = {}
    for path in paths:
        old = statistics.median(r[path] for r in runs["old"])
        new = statistics.median(r[path] for r in runs["new"])
        table[path] = {"old_seconds": old, "new_seconds": new, "new_over_old": new / old}
    committed = json.loads((ROOT / "results" / "oracles.json").read_text())
    implied = []
    for ratio in committed["ratios"]:
        label, rest = ratio["comparison"].split(": ", 1)
        path = f"{label} | {rest.split(' vs ')[0]}"
        if path in table and ratio.get("speedup"):
            implied.append(
                {
                    "comparison": ratio["comparison"],
                    "committed_speedup": ratio["speedup"],
                    "implied_speedup": ratio["speedup"] / table[path]["new_over_old"],
                }
            )
    load = os.getloadavg()
    result = {
        "rounds": args.rounds,
        "repeats": args.repeats,
        "load_average": load,
        "cpus": os.cpu_count(),
        "paths": table,
        "implied_ratios": implied,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for path, row in table.items():
        print(
            f"{path:40s} old {row['old_seconds']:.4g} s  new {row['new_seconds']:.4g} s  "
            f"new/old {row['new_over_old']:.3f}"
        )
    print(f"load average {load[0]:.2f} on {os.cpu_count()} CPUs; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
