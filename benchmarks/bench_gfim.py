"""SH aggregation and one GFIM run: longldp's FWHT against the O(m·d) inner-product estimator
of the GFIM thesis and against pure-ldp's Hadamard mechanism, ratios measured in one run.

Run with ``python benchmarks/bench_gfim.py [--repeats N] [--out PATH]`` (pure-ldp is in the
``bench`` extra; this script installs nothing). On the same 500,000 SH reports at d = 1000
(m = 1024 Hadamard rows, ε = 2), it times the server's whole aggregation, reports to the d
frequency estimates:

- longldp: one bincount of the signed reports per row (T), one fast Walsh–Hadamard transform
  (log₂ m butterfly passes, O(m log m)), then the estimator (`SH.support_counts` + `estimate`);
- the thesis's estimator (Zhang, GFIM, Alg. 2): the same T, then one inner product per item
  with its Hadamard column, ⟨H[:, v], T⟩, O(m·d): (a) item by item as printed, with the column
  computed on the fly, and (b) as one dense m × d matrix-vector product (its fastest form);
- pure-ldp 1.2.0 ``HadamardMechServer`` with t = 1, which is the same mechanism (a uniform
  row j, the sign of H[j, v] kept with probability e^ε/(e^ε + 1)): its ``aggregate`` per report
  then its own FWHT, fed the very same reports as (j, sign) pairs. (pure-ldp's
  ``HadamardResponse`` is a different mechanism, Acharya, Sun and Zhang's, whose reports are
  not SH's, so it cannot aggregate these reports.)

All three give the same estimates (checked). It then times one GFIM run (ε = 2, k = 30,
k_max = 60, count-level engine) on the thesis's Laplace population with n = 500,000 (data
generation not timed). Each timing is the median of ``--repeats`` runs (pure-ldp: fewer).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.apps.gfim import GFIM, GFIMParams, synthetic_sets
from longldp.apps.setvalued.oracle import OracleSpec
from longldp.protocols.hadamard import fwht, hadamard_parity

N, D, EPS, SEED = 500_000, 1000, 2.0, 20181123
ROOT = Path(__file__).resolve().parent


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def thesis_loop(proto, reports) -> np.ndarray:
    """T by bincount, then f̂(v) = c_ε·⟨H[:, v], T⟩/n item by item (the thesis's Alg. 2)."""
    t = proto.row_sums(reports).astype(np.float64)
    rows = np.arange(proto.m)
    out = np.empty(proto.k)
    for v in range(proto.k):  # one inner product per item, as printed
        column = 1 - 2 * hadamard_parity(rows, v)
        out[v] = column @ t
    return proto.c_eps * out / reports.size


def thesis_matrix(proto, reports) -> np.ndarray:
    """The same O(m·d) estimator as one dense matrix-vector product."""
    t = proto.row_sums(reports).astype(np.float64)
    h = 1 - 2 * hadamard_parity(np.arange(proto.m)[:, None], np.arange(proto.k)[None, :])
    return proto.c_eps * (h.T @ t) / reports.size


def longldp_fwht(proto, reports) -> np.ndarray:
    return proto.estimate(proto.support_counts(reports), reports.size)


def pure_ldp_hadamard(reports, m: int) -> np.ndarray:
    from pure_ldp.frequency_oracles.hadamard_mechanism import HadamardMechServer

    server = HadamardMechServer(EPS, m, 1, index_mapper=lambda x: x)  # 0-based items
    sign = 1 - 2 * reports["bucket"]
    for j, s in zip(reports["hash_id"].tolist(), sign.tolist(), strict=True):
        server.aggregate([(j, s)])
    est = np.array([server.estimate(v, suppress_warnings=True) for v in range(D)])
    return est / server.n  # pure-ldp estimates counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "gfim.json")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    proto = ll.protocol("SH", k=D, eps=EPS)
    values = np.clip(np.rint(rng.laplace(500, 30, N)), 0, D - 1).astype(np.int64)
    reports = proto.perturb(values, rng=rng)

    t_fwht, est_fwht = timed(lambda: longldp_fwht(proto, reports), args.repeats)
    t_matrix, est_matrix = timed(lambda: thesis_matrix(proto, reports), args.repeats)
    t_loop, est_loop = timed(lambda: thesis_loop(proto, reports), max(1, args.repeats // 2))
    t_pure, est_pure = timed(lambda: pure_ldp_hadamard(reports, proto.m), 1)
    for name, est in (("matrix", est_matrix), ("loop", est_loop), ("pure-ldp", est_pure)):
        assert np.allclose(est, est_fwht, atol=1e-9), f"{name} estimates differ from the FWHT"
    # The transform alone, from the row sums T to the d estimates (the bincount excluded).
    t_rows = proto.row_sums(reports).astype(np.float64)
    cols = np.arange(proto.m)
    t_tr_fwht, _ = timed(lambda: fwht(t_rows)[:D], args.repeats)
    t_tr_matrix, _ = timed(
        lambda: (1 - 2 * hadamard_parity(cols[:, None], np.arange(D)[None, :])).T @ t_rows,
        args.repeats,
    )
    t_tr_loop, _ = timed(
        lambda: [(1 - 2 * hadamard_parity(cols, v)) @ t_rows for v in range(D)], args.repeats
    )

    data = synthetic_sets(N, "laplace", rng=1)
    app = GFIM(30, OracleSpec("SH", eps=EPS), GFIMParams(k_max=60))
    app.run(data, rng=0)  # warm-up
    t_gfim, _ = timed(lambda: app.run(data, rng=2), args.repeats)

    result = {
        "n_reports": N,
        "d": D,
        "m": proto.m,
        "eps": EPS,
        "seconds": {
            "longldp_fwht": t_fwht,
            "thesis_inner_products_loop": t_loop,
            "thesis_inner_products_matrix": t_matrix,
            "pure_ldp_hadamard_mechanism": t_pure,
            "gfim_run_n500k_count_level": t_gfim,
            "transform_only_fwht": t_tr_fwht,
            "transform_only_thesis_loop": t_tr_loop,
            "transform_only_thesis_matrix": t_tr_matrix,
        },
        "ratios": {
            "thesis_loop_over_fwht": t_loop / t_fwht,
            "thesis_matrix_over_fwht": t_matrix / t_fwht,
            "pure_ldp_over_fwht": t_pure / t_fwht,
            "transform_only_thesis_loop_over_fwht": t_tr_loop / t_tr_fwht,
            "transform_only_thesis_matrix_over_fwht": t_tr_matrix / t_tr_fwht,
        },
        "gfim_run_under_one_second": t_gfim < 1.0,
        "estimates_agree": True,
        "repeats": args.repeats,
        "numpy": np.__version__,
        "pure_ldp": metadata.version("pure-ldp"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    s, r = result["seconds"], result["ratios"]
    print(f"SH aggregation of {N:,} reports, d = {D} (m = {proto.m}), median of runs:")
    print(f"  longldp FWHT                      {s['longldp_fwht'] * 1e3:9.2f} ms")
    print(
        f"  thesis inner products, per item   {s['thesis_inner_products_loop'] * 1e3:9.2f} ms"
        f"  ({r['thesis_loop_over_fwht']:.1f}x)"
    )
    print(
        f"  thesis inner products, one matrix {s['thesis_inner_products_matrix'] * 1e3:9.2f} ms"
        f"  ({r['thesis_matrix_over_fwht']:.1f}x)"
    )
    print(
        f"  pure-ldp Hadamard mechanism (t=1) {s['pure_ldp_hadamard_mechanism'] * 1e3:9.2f} ms"
        f"  ({r['pure_ldp_over_fwht']:.1f}x)"
    )
    print(
        f"  transform only (T -> estimates): FWHT {s['transform_only_fwht'] * 1e3:.3f} ms; "
        f"thesis per item {r['transform_only_thesis_loop_over_fwht']:.0f}x, "
        f"one matrix {r['transform_only_thesis_matrix_over_fwht']:.0f}x slower"
    )
    print(f"GFIM run, n = {N:,}, count-level: {s['gfim_run_n500k_count_level']:.3f} s")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
