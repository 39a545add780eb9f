"""Numeric mechanisms: perturb-and-aggregate throughput and SW's EMS (docs/math.md §20).

Measured in one run, on one core (BLAS and OpenMP threads pinned to one before NumPy loads):

1. **Perturb and aggregate 10⁷ reports** for every one-shot mechanism (Laplace, Duchi, PM, HM,
   SW, 1BitMean) and one timestamp of the memoized forms (L-1BitMean, L-PM, L-HM, memos
   already drawn): the sampler of ``longldp.protocols.numeric`` on the users' unit values, then
   the sums (n, Σû, Σû²) the server keeps, in chunks of 2²⁰ users. Target: ≥ 20 million
   reports per second. **Practical limit**: NumPy generating the same number of uniforms
   (``Generator.random``, chunked alike), timed alternately with the mechanisms in every round;
   the ratio mechanism time / uniform time says how many uniform draws' worth of work a report
   costs (every sampler needs one or two uniforms per report; HM 2 + 2β, 2.79 at ε = 1).
   Wall-clock seconds decide the target; the process's CPU seconds are recorded beside them
   (``time.process_time``): on a shared machine the wall clock also counts the time other
   processes hold the core, the CPU seconds are the "per core" cost itself.
2. **SW + EMS on 10⁶ reports, 1,024 × 1,024 buckets**: bucket counts + EMS with the O(d)
   operator (math (20.15)), against the same EMS with the dense 1,024 × 1,024 matrix (the way
   [LI20]'s reference code computes it) on the same counts. Target: < 2 s.

Sanity (a broken path must not be timed as if it worked): every mean estimate lies within 5
standard errors of the truth, the two EMS runs agree, and EMS's W1 to the true distribution is
reported. Data: Adult's ages (declared range [17, 90]) tiled to the number of reports.

Usage::

    python benchmarks/bench_numeric.py [--reports 10000000] [--rounds 3]
        [--out benchmarks/results/numeric.json]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core: set before NumPy starts its thread pools

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from longldp.data.numeric import numeric_values  # noqa: E402
from longldp.privacy import numeric as nm  # noqa: E402
from longldp.protocols import numeric as num  # noqa: E402
from longldp.protocols.numeric import chains, sw  # noqa: E402

CHUNK = 1 << 20
EPS = 1.0
EPS_PERM, EPS_1 = 2.0, 0.8
TARGET_PER_SECOND = 20e6
EMS_TARGET_SECONDS = 2.0
ROOT = Path(__file__).resolve().parent


def unit_ages(n: int) -> np.ndarray:
    ages = numeric_values("adult", "age")
    return num.NumericRange(17, 90).to_unit(np.resize(ages, n)).t


def run_uniforms(t: np.ndarray, rng: np.random.Generator) -> float:
    acc = 0.0
    for first in range(0, t.size, CHUNK):
        acc += float(rng.random(min(CHUNK, t.size - first)).sum())
    return acc


def run_one_shot(name: str, t: np.ndarray, rng: np.random.Generator) -> tuple[int, float, float]:
    k = num.kernel(name)
    n, s1, s2 = 0, 0.0, 0.0
    for first in range(0, t.size, CHUNK):
        tc = t[first : first + CHUNK]
        x = tc if k.coordinate == "t" else 2.0 * tc - 1.0
        cn, c1, c2 = num.mean_moments(name, k.sample(x, EPS, rng), EPS)
        n, s1, s2 = n + cn, s1 + c1, s2 + c2
    return n, s1, s2


def run_chain(
    mech: str, t: np.ndarray, states: list[chains.ChainMemo], rng: np.random.Generator
) -> tuple[int, float, float]:
    n, ones = 0, 0
    for i, first in enumerate(range(0, t.size, CHUNK)):
        bits = chains.perturb(mech, t[first : first + CHUNK], states[i], EPS_PERM, EPS_1, rng)
        n, ones = n + bits.size, ones + int(np.count_nonzero(bits))
    kappa = nm.round2_slope(EPS_1)
    return n, (2 * ones - n) / kappa, n / kappa**2


def check_mean(label: str, sums: tuple[int, float, float], truth_u: float, var: nm.UnitVariance,
               m2: float) -> dict:  # fmt: skip
    n, s1, _ = sums
    se = math.sqrt(float(var.of_mean(n, truth_u, m2)))
    z = (s1 / n - truth_u) / se
    return {"mean_u": s1 / n, "truth_u": truth_u, "z": z, "sane": abs(z) <= 5, "label": label}


def bench_throughput(reports: int, rounds: int) -> dict:
    t = unit_ages(reports)
    u = 2 * t - 1
    truth, m2 = float(u.mean()), float(np.mean(u * u))
    rng = np.random.default_rng(2030)
    chain_states = {}
    for mech in ("Duchi", "PM", "HM"):  # memos drawn before timing: a steady-state timestamp
        states = [chains.new_memo(min(CHUNK, t.size - f), 4, rng) for f in range(0, t.size, CHUNK)]
        run_chain(mech, t, states, rng)
        chain_states[mech] = states
    ways: dict[str, object] = {"uniforms (NumPy)": None}
    ways.update({name: None for name in num.KERNELS})
    ways.update({f"L-{'1BitMean' if m == 'Duchi' else m}": m for m in ("Duchi", "PM", "HM")})
    times: dict[str, list[float]] = {w: [] for w in ways}
    cpu: dict[str, list[float]] = {w: [] for w in ways}
    sanity: dict[str, dict] = {}
    loads = []
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        for way, mech in ways.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            if way == "uniforms (NumPy)":
                run_uniforms(t, rng)
                times[way].append(time.perf_counter() - start)
                cpu[way].append(time.process_time() - start_cpu)
                continue
            if mech is None:
                sums = run_one_shot(way, t, rng)
                var = num.kernel(way).variance(EPS)
            else:
                sums = run_chain(str(mech), t, chain_states[str(mech)], rng)
                kappa = nm.round2_slope(EPS_1)
                var = nm.UnitVariance(1 / kappa**2, 0.0, -1.0)  # the report's channel, (20.20)
            times[way].append(time.perf_counter() - start)
            cpu[way].append(time.process_time() - start_cpu)
            sanity[way] = check_mean(way, sums, truth, var, m2)
    base = statistics.median(times["uniforms (NumPy)"])
    base_cpu = statistics.median(cpu["uniforms (NumPy)"])
    rows = []
    for way, ts in times.items():
        med, med_cpu = statistics.median(ts), statistics.median(cpu[way])
        rows.append({
            "way": way,
            "seconds": ts,
            "median_seconds": med,
            "reports_per_second": reports / med,
            "meets_target": reports / med >= TARGET_PER_SECOND if way in sanity else None,
            "ratio_to_uniforms": med / base,
            "cpu_seconds": cpu[way],
            "reports_per_cpu_second": reports / med_cpu,
            "cpu_ratio_to_uniforms": med_cpu / base_cpu,
            "sanity": sanity.get(way),
        })  # fmt: skip
    return {"reports": reports, "rounds": rounds, "load_average": loads, "rows": rows}


def bench_ems(rounds: int) -> dict:
    n, d = 1_000_000, 1024
    rng = np.random.default_rng(7)
    t = unit_ages(n)
    reports = num.KERNELS["SW"].sample(t, EPS, rng)
    fast, dense = [], []
    res_fast = res_dense = None
    matrix = sw.transition_matrix(EPS, d, d)
    for _ in range(rounds):
        start = time.perf_counter()
        counts = sw.report_counts(reports, EPS, d)
        res_fast = sw.ems(counts, sw.SWOperator(EPS, d, d))
        fast.append(time.perf_counter() - start)
        start = time.perf_counter()
        res_dense = sw.ems(counts, matrix)
        dense.append(time.perf_counter() - start)
    assert res_fast is not None and res_dense is not None
    truth = sw.histogram(t, d)
    return {
        "reports": n,
        "buckets": [d, d],
        "eps": EPS,
        "seconds": fast,
        "median_seconds": statistics.median(fast),
        "meets_target": statistics.median(fast) < EMS_TARGET_SECONDS,
        "dense_matrix_seconds": dense,
        "dense_over_operator": statistics.median(dense) / statistics.median(fast),
        "iterations": res_fast.iterations,
        "max_abs_difference_of_theta": float(np.abs(res_fast.theta - res_dense.theta).max()),
        "w1_years": sw.wasserstein(res_fast.theta, truth) * (90 - 17),
        "ems_mean_age": 17 + 73 * sw.distribution_mean(res_fast.theta),
        "true_mean_age": 17 + 73 * float(t.mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "numeric.json")
    args = ap.parse_args()
    started = time.perf_counter()
    out = {
        "meta": {
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "threads": "1 (OPENBLAS/OMP/MKL_NUM_THREADS=1)",
            "eps": EPS,
            "chains": {"eps_perm": EPS_PERM, "eps_1": EPS_1, "s": 4},
            "data": "Adult age, range [17, 90], tiled",
            "chunk": CHUNK,
        },
        "throughput": bench_throughput(args.reports, args.rounds),
        "ems": bench_ems(args.rounds),
    }
    out["meta"]["benchmark_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    thr = out["throughput"]
    print(f"{thr['reports']:,} reports, {thr['rounds']} rounds, load {thr['load_average']}")
    print(
        f"{'way':18s} {'median s':>9s} {'M reports/s':>12s} {'× uniforms':>11s}  target  "
        f"{'M/CPU s':>8s} {'× (CPU)':>8s}  |z|"
    )
    for r in thr["rows"]:
        z = "" if r["sanity"] is None else f"{abs(r['sanity']['z']):.2f}"
        ok = "" if r["meets_target"] is None else ("yes" if r["meets_target"] else "NO")
        print(
            f"{r['way']:18s} {r['median_seconds']:9.3f} {r['reports_per_second'] / 1e6:12.1f} "
            f"{r['ratio_to_uniforms']:11.2f}  {ok:6s}  {r['reports_per_cpu_second'] / 1e6:8.1f} "
            f"{r['cpu_ratio_to_uniforms']:8.2f}  {z}"
        )
    e = out["ems"]
    print(
        f"SW+EMS, 10^6 reports, 1024x1024: {e['median_seconds']:.3f} s "
        f"({e['iterations']} steps; dense matrix {e['dense_over_operator']:.1f}x slower; "
        f"W1 {e['w1_years']:.3f} years; target < 2 s: {'yes' if e['meets_target'] else 'NO'})"
    )
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
