"""Sketch oracles and discovery (docs/math.md §21): throughput as ratios measured in one run.

Run with ``python benchmarks/bench_sketch.py [--quick] [--out PATH]`` (pure-ldp comes with the
``bench`` extra). Measured, each the median of ``--repeats`` runs on one core's worth of work:

- **CMS aggregation** of packed m-bit reports into the (d, m) sketch (all rows in one pass of
  carry-save column sums, reports gathered row by row into cache-sized groups), in reports/s,
  both as an unsorted batch (the server's ingest) and stored by row, against the practical limit of
  one read of the same bytes (``ndarray.sum`` over them) and against pure-ldp 1.2.0's
  ``CMSServer.aggregate`` fed the very same reports (as its ±1 vectors), which loops in Python.
- **HCMS aggregation** of (row, l, bit) reports (one bincount), against pure-ldp's HCMS server
  on the same reports.
- **Discovery**: PEM (OLH rounds) over n devices holding 48-bit values drawn from a Zipf law,
  reports simulated and the server's rounds run, wall time.

Report generation is not timed for aggregation. pure-ldp's servers built with d = None call
``np.zeros(None)``, which NumPy 2 refuses: this script gives that one module a ``zeros`` that
maps None to () before building them (the only change; docs/math.md §21.11).
"""

from __future__ import annotations

import argparse
import json
import time
import types
import warnings
from pathlib import Path

import numpy as np

from longldp.protocols.sketch import discovery as dsc
from longldp.protocols.sketch import oracles as so

OUT = Path(__file__).parent / "results" / "sketch.json"


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _patch_pure_ldp() -> None:
    import pure_ldp.core._freq_oracle_server as srv

    real = np.zeros
    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    shim.zeros = lambda shape, *a, **k: real(() if shape is None else shape, *a, **k)
    srv.np = shim


def cms_case(n: int, m: int, d: int, repeats: int, pure_n: int) -> dict:
    rng = np.random.default_rng(1)
    cfg = so.SketchConfig("cms", m, d, eps=4.0, salt=1)
    keys = rng.zipf(1.3, n).astype(np.uint64)
    rows = so.draw_rows(n, d, rng)
    (bits,) = so.perturb(cfg, keys, rows, rng)
    t_ours = timed(lambda: so.aggregate_bits(cfg, bits, rows), repeats)
    t_read = timed(lambda: bits.sum(), repeats)
    # The same reports stored by row (as a server ingests them): one column sum per row.
    order = np.argsort(rows, kind="stable")
    by_row = [bits[order][rows[order] == j] for j in range(d)]
    t_rows = timed(
        lambda: [so.count_bits(b, np.zeros(len(b), np.int64), 1, m) for b in by_row], repeats
    )
    out = {
        "n": n,
        "m": m,
        "d": d,
        "stored_by_row_reports_per_s": n / t_rows,
        "stored_by_row_ratio_to_read_limit": t_read / t_rows,
        "ours_reports_per_s": n / t_ours,
        "read_limit_reports_per_s": n / t_read,
        "ratio_to_read_limit": t_read / t_ours,
    }
    from pure_ldp.frequency_oracles.apple_cms import CMSServer

    server = CMSServer(4.0, d, m)
    pm = 2 * np.unpackbits(bits[:pure_n], axis=1, count=m).astype(np.int64) - 1
    data = [(pm[i], int(rows[i])) for i in range(pure_n)]

    def pure() -> None:
        server.reset()
        for rep in data:
            server.aggregate(rep)

    t_pure = timed(pure, 1) / pure_n * n
    out["pure_ldp_reports_per_s"] = n / t_pure
    out["ratio_to_pure_ldp"] = t_pure / t_ours
    return out


def hcms_case(n: int, m: int, d: int, repeats: int, pure_n: int) -> dict:
    rng = np.random.default_rng(2)
    cfg = so.SketchConfig("hcms", m, d, eps=4.0, salt=2)
    keys = rng.zipf(1.3, n).astype(np.uint64)
    rows = so.draw_rows(n, d, rng)
    l_rows, bit = so.perturb(cfg, keys, rows, rng)
    t_ours = timed(lambda: so.aggregate_hcms(cfg, l_rows, bit, rows), repeats)
    t_read = timed(lambda: (rows.sum(), l_rows.sum(), bit.sum()), repeats)
    out = {
        "n": n,
        "m": m,
        "d": d,
        "ours_reports_per_s": n / t_ours,
        "read_limit_reports_per_s": n / t_read,
        "ratio_to_read_limit": t_read / t_ours,
    }
    from pure_ldp.frequency_oracles.apple_cms import CMSServer

    server = CMSServer(4.0, d, m, is_hadamard=True)
    data = [(1 - 2 * int(bit[i]), int(rows[i]), int(l_rows[i])) for i in range(pure_n)]

    def pure() -> None:
        server.reset()
        for rep in data:
            server.aggregate(rep)

    t_pure = timed(pure, 1) / pure_n * n
    out["pure_ldp_reports_per_s"] = n / t_pure
    out["ratio_to_pure_ldp"] = t_pure / t_ours
    return out


def discovery_case(n: int, repeats: int) -> dict:
    rng = np.random.default_rng(3)
    pool = rng.integers(0, 1 << 48, 1000, dtype=np.uint64)
    p = 1.0 / np.arange(1, 1001) ** 1.1
    codes = pool[rng.choice(pool.size, n, p=p / p.sum())]
    plan = dsc.pem_plan(48, 4.0, start=4, step=4, select=dsc.Selection(cap=32))
    found: list[int] = []

    def run() -> None:
        res = dsc.discover(plan, codes, rng)
        found.append(int(res.items.size))

    t = timed(run, repeats)
    top = set(pool[:10].tolist())
    res = dsc.discover(plan, codes, rng)
    return {
        "n": n,
        "width": 48,
        "rounds": len(plan.lengths),
        "seconds": t,
        "found": found[-1],
        "top10_found": len(top & set(res.items.tolist())),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    _patch_pure_ldp()
    n = 200_000 if args.quick else 2_000_000
    pure_n = 2_000 if args.quick else 20_000
    result = {
        "cms": [cms_case(n, m, 64, args.repeats, pure_n) for m in (64, 256, 1024)],
        "hcms": [hcms_case(n, m, 64, args.repeats, pure_n) for m in (256, 1024)],
        "discovery": discovery_case(100_000 if args.quick else 1_000_000, 1),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if not args.quick:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
