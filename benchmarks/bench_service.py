"""Collection server throughput on loopback, against the raw rate of the same database.

A real ``longldp serve`` process on 127.0.0.1 with a SQLite file (WAL, synchronous=FULL: a 200
answer means the reports are committed to disk). Measured in one run:

1. batched ingest: 1,000 reports per request, one client, binary upload records;
2. one report per request, one client (keep-alive);
3. the raw rate of inserting the same rows into the same database file from this process with
   no HTTP, no validation and no counting: the server's own INSERT statement through the
   driver's executemany, one transaction per 1,000 rows, resp. per row;
4. an estimate query for k = 1,000 (median HTTP round trip, unbiased and norm-sub).

Each ingest rate is reported with its ratio to the raw rate of the same transaction size.
Usage: ``python benchmarks/bench_service.py [--reports 100000] [--single 2000]``; results in
benchmarks/results/service.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

import longldp as ll
from longldp.server import db
from longldp.server.service import SQLITE_INSERT

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "bench-admin-" + secrets.token_hex(16)
SPEC = {"name": "L-OSUE", "params": {"k": 1000, "eps_perm": 2.0, "eps_1": 0.8}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(path: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "LONGLDP_ADMIN_TOKEN": ADMIN,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "longldp", "serve", "--db", str(path), "--port", str(port)],
        env=env,
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def make_records(proto, n: int, distinct: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """n upload records over ``distinct`` perturbed reports (ids all fresh), epoch 0."""
    values = np.minimum(rng.geometric(0.01, distinct) - 1, proto.k - 1)
    reps = proto.perturb(values, proto.new_memo(distinct), rng)
    blob = proto.encode_reports(reps)
    wires = [blob[i : i + proto.wire_size] for i in range(0, len(blob), proto.wire_size)]
    ids = [bytes(r) for r in rng.integers(0, 256, size=(n, 16), dtype=np.uint8)]
    chosen = [wires[i % distinct] for i in range(n)]
    return ids, chosen


def record_bytes(ids, wires, epoch: int = 0) -> bytes:  # type: ignore[no-untyped-def]
    e = epoch.to_bytes(4, "big")
    return b"".join(i + e + w for i, w in zip(ids, wires, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=100_000, help="batched-ingest reports")
    ap.add_argument("--single", type=int, default=2_000, help="one-per-request reports")
    ap.add_argument("--queries", type=int, default=50, help="estimate queries timed")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "service.json")
    args = ap.parse_args()
    proto = ll.protocol(SPEC["name"], **SPEC["params"])
    rng = np.random.default_rng(2026)
    n, n1 = args.reports, args.single
    ids, wires = make_records(proto, n + 2 * n1 + 2 * n, 20_000, rng)
    tmp = Path(tempfile.mkdtemp(prefix="longldp-bench-"))
    path = tmp / "bench.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(path, port)
    out: dict = {
        "protocol": SPEC,
        "reports": n,
        "single": n1,
        "sqlite": "WAL, synchronous=FULL",
        "load_average_at_start": os.getloadavg(),
    }
    try:
        with httpx.Client(timeout=120) as http:
            adm = {"Authorization": f"Bearer {ADMIN}"}
            col = http.post(
                f"{base}/v1/collections", json={"name": "bench", "protocol": SPEC}, headers=adm
            ).json()
            raw_col = http.post(
                f"{base}/v1/collections", json={"name": "raw", "protocol": SPEC}, headers=adm
            ).json()
            hdr = {
                "Authorization": f"Bearer {col['ingest_token']}",
                "Content-Type": "application/octet-stream",
            }
            bodies = [
                record_bytes(ids[s : s + 1000], wires[s : s + 1000]) for s in range(0, n, 1000)
            ]
            t0 = time.perf_counter()
            for body in bodies:
                r = http.post(f"{base}/v1/collections/bench/reports", content=body, headers=hdr)
                assert r.status_code == 200 and r.json()["new"] == 1000, r.text
            batched = n / (time.perf_counter() - t0)
            singles = [record_bytes([ids[n + i]], [wires[n + i]], 1) for i in range(n1)]
            t0 = time.perf_counter()
            for body in singles:
                r = http.post(f"{base}/v1/collections/bench/reports", content=body, headers=hdr)
                assert r.status_code == 200 and r.json()["new"] == 1
            single = n1 / (time.perf_counter() - t0)
            rd = {"Authorization": f"Bearer {col['read_token']}"}
            timings = {}
            for method in ("none", "norm-sub"):
                url = f"{base}/v1/collections/bench/epochs/0/estimate?postprocess={method}"
                assert len(http.get(url, headers=rd).json()["estimate"]) == 1000
                lat = []
                for _ in range(args.queries):
                    t0 = time.perf_counter()
                    r = http.get(url, headers=rd)
                    lat.append(time.perf_counter() - t0)
                    assert r.status_code == 200
                timings[method] = statistics.median(lat)
        # Raw: the same kind of rows into the same file, this process, no HTTP, no counting.
        engine = db.make_engine(str(path))
        with db.transaction(engine, write=False) as conn:
            import sqlalchemy as sa

            cid = conn.execute(
                sa.select(db.collections.c.id).where(db.collections.c.name == raw_col["name"])
            ).scalar_one()

        def rows(lo: int, hi: int, epoch: int) -> list[tuple]:
            return [(cid, ids[i], epoch, None, wires[i]) for i in range(lo, hi)]

        lo = n + 2 * n1
        t0 = time.perf_counter()
        for s in range(lo, lo + n, 1000):
            with db.transaction(engine, write=True) as conn:
                conn.exec_driver_sql(SQLITE_INSERT, rows(s, s + 1000, 0))
        raw_batched = n / (time.perf_counter() - t0)
        lo2 = lo + n
        t0 = time.perf_counter()
        for i in range(lo2, lo2 + n1):
            with db.transaction(engine, write=True) as conn:
                conn.exec_driver_sql(SQLITE_INSERT, rows(i, i + 1, 1))
        raw_single = n1 / (time.perf_counter() - t0)
        engine.dispose()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out.update(
        batched_reports_per_s=batched,
        raw_batched_rows_per_s=raw_batched,
        batched_ratio=batched / raw_batched,
        single_reports_per_s=single,
        raw_single_rows_per_s=raw_single,
        single_ratio=single / raw_single,
        estimate_ms_raw=timings["none"] * 1e3,
        estimate_ms_norm_sub=timings["norm-sub"] * 1e3,
        cpu_count=os.cpu_count(),
        load_average_at_end=os.getloadavg(),
    )
    print(
        f"batched ingest (1,000/request): {batched:,.0f} reports/s; raw inserts "
        f"{raw_batched:,.0f} rows/s; ratio {batched / raw_batched:.2f}"
    )
    print(
        f"one report per request:         {single:,.0f} reports/s; raw inserts "
        f"{raw_single:,.0f} rows/s; ratio {single / raw_single:.2f}"
    )
    print(
        f"estimate query, k = 1,000: {timings['none'] * 1e3:.1f} ms (unbiased), "
        f"{timings['norm-sub'] * 1e3:.1f} ms (norm-sub), median of {args.queries}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
