"""Collection server throughput on loopback, against the raw rate of the same database, and two
server processes against one on PostgreSQL.

Measured in one run (docs/server.md, "Performance"; benchmarks/README.md):

1. SQLite (WAL, synchronous=FULL: a 200 answer means the reports are committed to disk), a
   real ``longldp serve`` process on 127.0.0.1, one sequential client, binary upload records:
   batched ingest at 1,000 and at 10,000 reports per request, against the raw rate of inserting
   the same rows into the same schema (same file, the server's own INSERT statement, the
   driver's executemany) in ONE transaction; server and raw runs alternate, in rounds;
2. one report per request, and an estimate query for k = 1,000;
3. PostgreSQL (a cluster of its own, default durability): ``--workers 1`` and ``--workers 2``
   alternately, each serving 8 concurrent clients that post 1,000-report batches for a fixed
   time; the ratio of the medians;
4. a profile of the in-process ingest path (no HTTP), split into where the time goes;
5. the same path (in process) with random report ids, as clients send them, and with
   sequential ids, each against raw inserts of its own kind of ids in one transaction, in a
   table already holding twice ``--reports`` rows: what the ids' places in the primary-key
   index cost a request's commit;
6. a long collection in process (``--long-epochs`` epochs of ``--long-per-epoch`` reports
   stored, then batches of the next epoch): random 16-byte ids against the ids longldp's
   clients make (the epoch, then 12 random bytes);
7. devices (``--devices`` 64 of them, each with its own credential, its own keep-alive
   connection and its one report per request, all at once, for ``--device-seconds``; each
   sends one report per epoch, epoch after epoch, within the collection's quota of one
   report per device and epoch, as honest devices do): the server's rate of one-report
   requests with group commit, against the same stack answering ``POST …/reports/check``
   (authenticates, reads and parses the same request, stores nothing: the practical limit)
   and against the server of a baseline checkout (``--baseline-ref``, default main before
   the group commit, checked out in a temporary git worktree), alternately in rounds, on
   SQLite and PostgreSQL; the best of the rounds of each configuration, the medians, and the
   CPU seconds per request of the server, the devices and PostgreSQL;
8. with ``--profile-devices``: where the one-report request's time goes (py-spy's samples of
   the server process under the devices' load, by part of the stack), for this checkout, the
   server before the lean ingest path (``--profile-ref``) and the baseline.

The machine load (``os.getloadavg``) is recorded with every number: on a shared machine the
ratios, measured alternately in the same run, mean more than the absolute rates.
Usage: ``python benchmarks/bench_service.py [--reports 100000] [--rounds 3] [--pg-seconds 8]``
(``--only-devices [--profile-devices]``: parts 7 and 8 alone); results in
benchmarks/results/service.json.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import sqlalchemy as sa

import longldp as ll
from longldp.protocols import wire
from longldp.server import Limits, Service, db, make_engine, migrate
from longldp.server.service import SQLITE_INSERT, Collection

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
ADMIN = "bench-admin-" + secrets.token_hex(16)
#: The baseline of the devices part: main just before the collection server's group commit
#: (and the rest of its part two) was merged.
BASELINE_REF = "676124d80930ef86bc57e8ed4fe95c3e6c8c960d"
#: The server profiled as "before" the lean ingest path (the commit before it).
PROFILE_REF = "1bb937d2e778738833bd8860b015086c4caaf740"
SPEC = {"name": "L-OSUE", "params": {"k": 1000, "eps_perm": 2.0, "eps_1": 0.8}}
OCTET = "application/octet-stream"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    db_url: str, port: int, *extra: str, src: Path | None = None
) -> subprocess.Popen:
    """``longldp serve`` of this checkout (or of the ``src`` folder of another one)."""
    env = {
        **os.environ,
        "LONGLDP_ADMIN_TOKEN": ADMIN,
        "PYTHONPATH": str(src or ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    cmd = [sys.executable, "-m", "longldp", "serve", "--db", db_url, "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, env=env)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Reports:
    """Fresh upload records of the benchmark's protocol: ``take(n)`` never repeats an id."""

    def __init__(self, proto, distinct: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
        values = np.minimum(rng.geometric(0.01, distinct) - 1, proto.k - 1)
        reps = proto.perturb(values, proto.new_memo(distinct), rng)
        blob = proto.encode_reports(reps)
        size = proto.wire_size
        self.wires = [blob[i : i + size] for i in range(0, len(blob), size)]
        self.rng = rng
        self.used = 0

    def take(self, n: int) -> tuple[list[bytes], list[bytes]]:
        ids = [bytes(r) for r in self.rng.integers(0, 256, size=(n, 16), dtype=np.uint8)]
        wires = [self.wires[(self.used + i) % len(self.wires)] for i in range(n)]
        self.used += n
        return ids, wires


def body(ids: list[bytes], wires: list[bytes], epoch: int = 0) -> bytes:
    e = epoch.to_bytes(4, "big")
    return b"".join(i + e + w for i, w in zip(ids, wires, strict=True))


def create(http: httpx.Client, name: str) -> dict:
    r = http.post(
        "/v1/collections",
        json={"name": name, "protocol": SPEC, "auth": "shared"},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert r.status_code == 201, r.text
    return r.json()


# ---------------------------------------------------------------------- SQLite
def sqlite_part(args: argparse.Namespace, proto, source: Reports) -> dict:  # type: ignore[no-untyped-def]
    tmp = Path(tempfile.mkdtemp(prefix="longldp-bench-"))
    path = tmp / "bench.db"
    port = free_port()
    proc = start_server(str(path), port)
    out: dict = {"sqlite": "WAL, synchronous=FULL, file in " + str(tmp), "rounds": []}
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300)
        col = create(http, "bench")
        create(http, "raw")
        hdr = {"Authorization": f"Bearer {col['ingest_token']}", "Content-Type": OCTET}
        engine = db.make_engine(str(path))
        with db.transaction(engine, write=False) as conn:
            raw_id = conn.execute(
                sa.select(db.collections.c.id).where(db.collections.c.name == "raw")
            ).scalar_one()
        n = args.reports
        for rnd in range(args.rounds):
            row: dict = {"round": rnd}
            for per in (1000, 10_000):
                # The server: n reports in requests of `per`.
                ids, wires = source.take(n)
                bodies = [body(ids[s : s + per], wires[s : s + per]) for s in range(0, n, per)]
                row[f"load_before_server_{per}"] = load()
                t0 = time.perf_counter()
                for b in bodies:
                    r = http.post("/v1/collections/bench/reports", content=b, headers=hdr)
                    assert r.status_code == 200 and r.json()["new"] == per, r.text
                row[f"server_{per}_per_s"] = n / (time.perf_counter() - t0)
                # Raw: the same number of fresh rows, one transaction, the server's statement.
                ids, wires = source.take(n)
                rows = [(raw_id, 0, i, 0, None, w) for i, w in zip(ids, wires, strict=True)]
                row[f"load_before_raw_{per}"] = load()
                t0 = time.perf_counter()
                with db.transaction(engine, write=True) as conn:
                    conn.exec_driver_sql(SQLITE_INSERT, rows)
                row[f"raw_{per}_per_s"] = n / (time.perf_counter() - t0)
                row[f"ratio_{per}"] = row[f"server_{per}_per_s"] / row[f"raw_{per}_per_s"]
            out["rounds"].append(row)
            print(
                f"  round {rnd}: 1,000/request {row['ratio_1000']:.2f} "
                f"({row['server_1000_per_s']:,.0f} vs {row['raw_1000_per_s']:,.0f}/s), "
                f"10,000/request {row['ratio_10000']:.2f} "
                f"({row['server_10000_per_s']:,.0f} vs {row['raw_10000_per_s']:,.0f}/s), "
                f"load {row['load_before_server_1000']}",
                flush=True,
            )
        for per in (1000, 10_000):
            out[f"ratio_{per}_median"] = statistics.median(r[f"ratio_{per}"] for r in out["rounds"])
        # One report per request, keep-alive.
        ids, wires = source.take(args.single)
        singles = [body([i], [w], 1) for i, w in zip(ids, wires, strict=True)]
        out["load_before_single"] = load()
        t0 = time.perf_counter()
        for b in singles:
            r = http.post("/v1/collections/bench/reports", content=b, headers=hdr)
            assert r.status_code == 200
        out["single_per_s"] = args.single / (time.perf_counter() - t0)
        rd = {"Authorization": f"Bearer {col['read_token']}"}
        for method in ("none", "norm-sub"):
            url = f"/v1/collections/bench/epochs/0/estimate?postprocess={method}"
            assert len(http.get(url, headers=rd).json()["estimate"]) == 1000
            lat = []
            for _ in range(args.queries):
                t0 = time.perf_counter()
                assert http.get(url, headers=rd).status_code == 200
                lat.append(time.perf_counter() - t0)
            out[f"estimate_ms_{method}"] = statistics.median(lat) * 1e3
        http.close()
        engine.dispose()
    finally:
        stop(proc)
    return out


# ---------------------------------------------------------------------- profile
def in_process(tag: str, *names: str) -> tuple[sa.Engine, Service, list[Collection]]:
    """A fresh SQLite file with the server's schema, its Service, and shared-token collections
    of the benchmark's protocol named ``names`` (the in-process parts: no HTTP)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"longldp-bench-{tag}-"))
    engine = make_engine(str(tmp / f"{tag}.db"))
    migrate(engine)
    service = Service(engine, ADMIN, Limits())
    cols = []
    for name in names:
        service.create_collection({"name": name, "protocol": SPEC, "auth": "shared"})
        col = service.get_collection(name)
        assert col is not None
        cols.append(col)
    return engine, service, cols


def profile_part(proto, source: Reports) -> dict:  # type: ignore[no-untyped-def]
    """Where the time of the in-process ingest path goes, for 1,000-report batches."""
    engine, service, (col,) = in_process("prof", "p")
    batches = []
    for _ in range(20):
        ids, wires = source.take(1000)
        batches.append(body(ids, wires))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for b in batches:
        service.ingest(col, service.parse_binary(col, b))
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    # (file suffix, function, tottime or cumtime): builtins by their own time, Python
    # functions with what they call.
    parts = {
        "INSERT of the reports (executemany)": (
            "~",
            "<method 'executemany' of 'sqlite3.Cursor' objects>",
            2,
        ),
        "commit (the touched pages written to the WAL, fsync)": (
            "~",
            "<method 'commit' of 'sqlite3.Connection' objects>",
            2,
        ),
        "other SQL statements": ("~", "<method 'execute' of 'sqlite3.Cursor' objects>", 2),
        "support counts of the new reports": ("", "support_counts", 3),
        "splitting and checking the batch": ("service.py", "parse_binary", 3),
        "distinct ids": ("ingest.py", "distinct_items", 3),
        "ids and reports as bytes": ("ingest.py", "__init__", 3),
    }
    out: dict = {}
    for label, (suffix, func, col) in parts.items():
        sec = sum(
            v[col] for (file, _, name), v in stats.items() if name == func and file.endswith(suffix)
        )
        out[label] = round(sec / total, 3)
    out["rest (SQLAlchemy, HTTP-free Python glue)"] = round(1 - sum(out.values()), 3)
    out["total_s_for_20000_reports"] = round(total, 3)
    engine.dispose()
    return out


def index_part(source: Reports, prefill: int) -> dict:
    """The report ids' share of the gap (in process, no HTTP): 1,000-report batches stored by
    the service into a table that already holds ``prefill`` reports, against raw inserts in one
    transaction, with random ids (what clients send) and with sequential ids (a control that
    only changes where the rows land in the primary-key index)."""
    out: dict = {"prefill": prefill}
    for kind in ("random", "sequential"):
        engine, service, (col, raw) = in_process("ids", "p", "raw")
        counter = [0]

        def take(n: int, kind: str = kind, counter: list[int] = counter) -> tuple[list, list]:
            ids, wires = source.take(n)
            if kind == "sequential":
                ids = [(counter[0] + i).to_bytes(16, "big") for i in range(n)]
                counter[0] += n
            return ids, wires

        for _ in range(0, prefill, 10_000):  # fill the table (10,000-report batches: fast)
            service.ingest(col, service.parse_binary(col, body(*take(10_000))))
        rounds = []
        for _ in range(3):
            bodies = [body(*take(1000)) for _ in range(20)]
            t0 = time.perf_counter()
            for b in bodies:
                service.ingest(col, service.parse_binary(col, b))
            server = 20_000 / (time.perf_counter() - t0)
            ids, wires = take(20_000)
            rows = [(raw.id, 0, i, 0, None, w) for i, w in zip(ids, wires, strict=True)]
            t0 = time.perf_counter()
            with db.transaction(engine, write=True) as conn:
                conn.exec_driver_sql(SQLITE_INSERT, rows)
            rounds.append((server, 20_000 / (time.perf_counter() - t0)))
        server, raw_rate = (statistics.median(r[j] for r in rounds) for j in (0, 1))
        out[kind] = {
            "service_per_s": round(server),
            "raw_per_s": round(raw_rate),
            "ratio": round(server / raw_rate, 3),
            "load": load(),
        }
        engine.dispose()
    return out


def long_collection_part(source: Reports, epochs: int, per_epoch: int) -> dict:
    """A long collection (in process, no HTTP): ``epochs`` epochs of ``per_epoch`` reports
    stored, then 1,000-report batches of the next epoch, with ids of 16 random bytes against
    the ids longldp's clients make (``wire.new_report_id``: the epoch, then 12 random bytes)."""
    out: dict = {"epochs": epochs, "per_epoch": per_epoch}
    rng = np.random.default_rng(11)
    for kind in ("random", "epoch-prefixed"):
        engine, service, (col,) = in_process("long", "p")

        def batch(n: int, epoch: int, kind: str = kind) -> bytes:
            rows = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
            if kind == "random":
                ids = [bytes(r) for r in rows]
            else:
                ids = [wire.new_report_id(epoch, bytes(r[: wire.ID_ENTROPY])) for r in rows]
            return body(ids, source.take(n)[1], epoch)

        for e in range(epochs):
            for _ in range(0, per_epoch, 10_000):
                service.ingest(col, service.parse_binary(col, batch(10_000, e)))
        rates = []
        for _ in range(3):
            bodies = [batch(1000, epochs) for _ in range(10)]
            t0 = time.perf_counter()
            for b in bodies:
                service.ingest(col, service.parse_binary(col, b))
            rates.append(10_000 / (time.perf_counter() - t0))
        out[kind] = {"service_per_s": round(statistics.median(rates)), "load": load()}
        engine.dispose()
    out["ratio"] = round(out["epoch-prefixed"]["service_per_s"] / out["random"]["service_per_s"], 2)
    return out


# ---------------------------------------------------------------------- PostgreSQL
def pg_part(args: argparse.Namespace, proto, source: Reports) -> dict:  # type: ignore[no-untyped-def]
    from server_helpers import PgCluster, pg_bin

    if pg_bin() is None:
        return {"skipped": "PostgreSQL (initdb, pg_ctl) not found"}
    cluster = PgCluster(durable=True)
    out: dict = {"clients": args.pg_clients, "seconds": args.pg_seconds, "runs": []}
    try:
        for rnd in range(args.rounds):
            for workers in (1, 2):
                url = cluster.new_database()
                port = free_port()
                proc = start_server(url, port, "--workers", str(workers))
                try:
                    rate, load_at, cpu = pg_load(port, args, source, proc.pid, cluster.pid())
                finally:
                    stop(proc)
                out["runs"].append(
                    {
                        "round": rnd,
                        "workers": workers,
                        "reports_per_s": rate,
                        "load": load_at,
                        **cpu,
                    }
                )
                print(
                    f"  round {rnd}: {workers} process(es) {rate:,.0f} reports/s, load "
                    f"{load_at}; CPU s per 1,000 reports: server "
                    f"{cpu['server_cpu_s_per_1000']}, PostgreSQL "
                    f"{cpu['postgresql_cpu_s_per_1000']}, clients "
                    f"{cpu['clients_cpu_s_per_1000']}; cores used {cpu['cpu_cores_used']}",
                    flush=True,
                )
        one = statistics.median(r["reports_per_s"] for r in out["runs"] if r["workers"] == 1)
        two = statistics.median(r["reports_per_s"] for r in out["runs"] if r["workers"] == 2)
        out.update(one_process_median=one, two_processes_median=two, ratio=two / one)
    finally:
        cluster.destroy()
    return out


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parents.get(pid, [])
    return out


def cpu_seconds(root: int) -> float:
    """CPU time (user + system) used so far by ``root``'s process tree: of the processes
    alive, and of the children they have reaped (a PostgreSQL backend whose connection was
    closed, e.g. by a connection pool's overflow, counts in its postmaster's ``cutime``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def pg_load(
    port: int, args: argparse.Namespace, source: Reports, server_pid: int, pg_pid: int
) -> tuple[float, float, dict[str, float]]:
    """Reports per second that ``args.pg_clients`` clients get through in ``pg_seconds``, the
    load, and the CPU seconds per 1,000 reports of the server, PostgreSQL and the clients."""
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=300) as http:
        col = create(http, "pg")
    hdr = {"Authorization": f"Bearer {col['ingest_token']}", "Content-Type": OCTET}
    per_client = [
        [body(*source.take(1000)) for _ in range(args.pg_batches)] for _ in range(args.pg_clients)
    ]
    clients = [httpx.Client(base_url=base, timeout=300) for _ in range(args.pg_clients)]
    done = [0] * args.pg_clients
    stop_at = [0.0]
    barrier = threading.Barrier(args.pg_clients + 1)

    def run(c: int) -> None:
        barrier.wait()
        for b in per_client[c]:
            if time.perf_counter() >= stop_at[0]:
                return
            r = clients[c].post("/v1/collections/pg/reports", content=b, headers=hdr)
            assert r.status_code == 200, r.text
            done[c] += 1000

    threads = [threading.Thread(target=run, args=(c,)) for c in range(args.pg_clients)]
    for t in threads:
        t.start()
    load_at = load()
    cpu0 = (cpu_seconds(server_pid), cpu_seconds(pg_pid), sum(os.times()[:2]))
    t0 = time.perf_counter()
    stop_at[0] = t0 + args.pg_seconds
    barrier.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    cpu1 = (cpu_seconds(server_pid), cpu_seconds(pg_pid), sum(os.times()[:2]))
    for c in clients:
        c.close()
    per_k = 1000 / max(1, sum(done))
    cpu = {
        f"{who}_cpu_s_per_1000": round((b - a) * per_k, 4)
        for who, a, b in zip(("server", "postgresql", "clients"), cpu0, cpu1, strict=True)
    }
    cpu["cpu_cores_used"] = round(sum(b - a for a, b in zip(cpu0, cpu1, strict=True)) / elapsed, 2)
    return sum(done) / elapsed, load_at, cpu


# ---------------------------------------------------------------------- devices
def device_requests(
    path: str, credential: str, bodies: list[bytes]
) -> list[bytes]:
    """Raw HTTP/1.1 requests (keep-alive) of one device, one report each."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {credential}\r\n"
        f"Content-Type: {OCTET}\r\n"
    ).encode()
    return [head + b"Content-Length: %d\r\n\r\n" % len(b) + b for b in bodies]


_LENGTH = re.compile(rb"content-length: *(\d+)", re.I)


async def _device(port: int, requests: list[bytes], stop_at: float, done: list[int]) -> None:
    """One device's connection: its requests one after the other until ``stop_at``; counts
    the 200 answers, fails on any other."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for req in requests:
            if time.perf_counter() >= stop_at:
                return
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            match = _LENGTH.search(head)
            body = await reader.readexactly(int(match.group(1)) if match else 0)
            if not head.startswith(b"HTTP/1.1 200 "):
                raise RuntimeError(f"{head[:60]!r} {body[:200]!r}")
            done[0] += 1
    finally:
        writer.close()


async def _devices_run(
    port: int, per_device: list[list[bytes]], seconds: float
) -> tuple[int, float]:
    done = [0]
    t0 = time.perf_counter()
    await asyncio.gather(*(_device(port, reqs, t0 + seconds, done) for reqs in per_device))
    return done[0], time.perf_counter() - t0


def devices_rate(
    db_url: str,
    args: argparse.Namespace,
    source: Reports,
    endpoint: str,
    src: Path | None,
    spy: Callable[[int], subprocess.Popen] | None = None,
    db_pid: int | None = None,
) -> tuple[float, float, float, float, float | None]:
    """(one-report requests per second, load, the server's, the devices' and the database's
    (PostgreSQL's, ``db_pid``'s process tree; None on SQLite) CPU seconds per 1,000 requests) of
    ``args.devices`` devices at once against a fresh server (of ``src``), posting to
    ``…/reports`` or ``…/reports/check``. The CPU time per request depends little on what
    else the shared machine runs; the rate does. ``spy(pid)``, if given, starts a profiler
    of the server process as the devices start (waited for after the run)."""
    port = free_port()
    per = args.device_requests
    # Epoch j of every device is open for the whole run: a window of `per` epochs.
    proc = start_server(db_url, port, "--max-open-epochs", str(per + 1), src=src)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
            r = http.post(
                "/v1/collections",
                json={"name": "dev", "protocol": SPEC, "epoch_window": per},
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
            assert r.status_code == 201, r.text
            enroll = r.json()["enroll_token"]
            creds = []
            for _ in range(args.devices):
                r = http.post("/v1/collections/dev/devices", headers=bearer_of(enroll))
                assert r.status_code == 201, r.text
                creds.append(r.json()["credential"])
        per_device = []
        for cred in creds:
            # An honest device: one report per epoch (the collection's quota), epoch after
            # epoch, as the devices of a real collection send theirs.
            ids, wires = source.take(per)
            bodies = [body([i], [w], e) for e, (i, w) in enumerate(zip(ids, wires, strict=True))]
            per_device.append(device_requests(f"/v1/collections/dev/{endpoint}", cred, bodies))
        at = load()
        profiler = spy(proc.pid) if spy is not None else None
        cpu0, mine0 = cpu_seconds(proc.pid), sum(os.times()[:2])
        db0 = cpu_seconds(db_pid) if db_pid is not None else 0.0
        done, elapsed = asyncio.run(_devices_run(port, per_device, args.device_seconds))
        if profiler is not None:
            _, err = profiler.communicate(timeout=120)
            if profiler.returncode != 0:
                raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-500:]}")
        per_k = 1000 / max(1, done)
        cpu = (cpu_seconds(proc.pid) - cpu0) * per_k
        client = (sum(os.times()[:2]) - mine0) * per_k
        dbcpu = (cpu_seconds(db_pid) - db0) * per_k if db_pid is not None else None
        return done / elapsed, at, cpu, client, dbcpu
    finally:
        stop(proc)


#: Where a sampled stack of the server goes: the innermost frame matching one of these places
#: (a part of the file's path, and the function's names or None for any), checked in this
#: order for each frame. The names are those of this checkout and of the servers before it
#: (FastAPI routes, the thread pool) that the profile is run against.
AUTH = "authentication (the credential's row, digest compare)"
STORE = "storing (the group's transaction and commit, or one per request)"
PARSE = "reading, bounding and parsing the request (validation)"
HANDOFF = "hand-offs between threads (queues, wake-ups, thread pool)"
FASTAPI = "FastAPI and Starlette (routing, request object, dependencies, validation)"
UVICORN = "uvicorn's protocol (request cycle, deadlines, write coalescing)"
PROFILE_PARTS: list[tuple[str, str, tuple[str, ...] | None]] = [
    (AUTH, "longldp/server/service.py", ("authenticate", "_who", "role_of")),
    (AUTH, "longldp/server/tokens.py", None),
    (STORE, "longldp/server/ingest.py", None),
    (STORE, "longldp/server/service.py", ("ingest", "store_job")),
    (STORE, "longldp/server/group.py", ("_process",)),
    (PARSE, "longldp/server/service.py", ("job", "parse_binary", "parse_json", "ingest_bytes")),
    (PARSE, "longldp/server/_codec.py", None),
    (PARSE, "longldp/protocols/", None),
    (PARSE, "longldp/server/app.py", ("ingest_job", "read_body", "header", "bearer_token")),
    ("answer (JSON encoding)", "longldp/server/admission.py", ("send_json",)),
    ("answer (JSON encoding)", "json/", None),
    (
        "socket system calls (recv, send)",
        "asyncio/selector_events.py",
        ("write", "_read_ready__data_received", "_read_ready__get_buffer", "sock_recv"),
    ),
    ("HTTP/1.1 parsing and framing (h11)", "h11/", None),
    ("HTTP/1.1 parsing and framing (h11)", "httptools/", None),
    (HANDOFF, "longldp/server/group.py", None),
    (HANDOFF, "anyio/", None),
    (HANDOFF, "concurrent/futures/", None),
    (HANDOFF, "threading.py", None),
    (HANDOFF, "queue.py", None),
    (FASTAPI, "fastapi/", None),
    (FASTAPI, "starlette/", None),
    (FASTAPI, "pydantic", None),
    (UVICORN, "longldp/server/timeouts.py", None),
    ("the ASGI handler and middleware (lean ingest, admission)", "longldp/server/", None),
    (UVICORN, "uvicorn/", None),
    ("the event loop (scheduling, epoll)", "asyncio/", None),
    ("the event loop (scheduling, epoll)", "selectors.py", None),
]


def _frame(text: str) -> tuple[str, str]:
    """(function, file) of a py-spy raw frame ``Class.function (path/file.py:line)``."""
    func, _, rest = text.rpartition(" (")
    return func.rpartition(".")[2], rest.rsplit(":", 1)[0]


def profile_part_of(frames: list[str]) -> str:
    """The part of :data:`PROFILE_PARTS` a sampled stack (outermost frame first) is in."""
    for text in reversed(frames):
        func, file = _frame(text)
        for part, where, names in PROFILE_PARTS:
            if where in file and (names is None or func in names):
                return part
    return "other"


def profile_devices(
    db_url: str, args: argparse.Namespace, source: Reports, src: Path | None, rate: int = 250
) -> dict:
    """A sampled profile (py-spy, samples of the thread holding the GIL) of the server of
    ``src`` under :func:`devices_rate`'s load on ``…/reports``: per part of
    :data:`PROFILE_PARTS`, the share of the samples and the microseconds per request; beside
    it the measured CPU seconds per request (the whole process, every thread) and the rate.
    The samples are of wall-clock time with the GIL held (a process descheduled by other jobs
    while holding it is sampled too), so the shares are what to read; each part's share of the
    measured CPU time is the estimate of its CPU time per request."""
    raw = Path(tempfile.mkdtemp(prefix="longldp-spy-")) / "raw.txt"
    spy_bin = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    seconds = max(1, int(args.device_seconds) - 1)

    def spy(pid: int) -> subprocess.Popen:
        cmd = f"{spy_bin} record --pid {pid} --gil --rate {rate} --duration {seconds}"
        cmd += f" --format raw --output {raw}"
        return subprocess.Popen(cmd.split(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    rate_s, at, cpu, _, _ = devices_rate(db_url, args, source, "reports", src, spy)
    parts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        part = profile_part_of(stack.split(";")[1:])  # the first is the process
        parts[part] = parts.get(part, 0) + n
        total += n
    shutil.rmtree(raw.parent, ignore_errors=True)
    requests = rate_s * seconds  # requests served while sampled (the rate is steady)
    return {
        "per_s": round(rate_s, 1),
        "load": at,
        "server_cpu_ms_per_request": round(cpu, 3),
        "gil_samples": total,
        "gil_ms_per_request": round(total / rate / requests * 1e3, 3),
        # A part's share of the samples, its time with the GIL held per request, and that
        # share of the measured CPU time per request.
        "parts": {
            part: {
                "share": round(n / total, 3),
                "gil_us_per_request": round(n / rate / requests * 1e6),
                "cpu_us_per_request": round(n / total * cpu * 1e3),
            }
            for part, n in sorted(parts.items(), key=lambda kv: -kv[1])
        },
    }


def profile_devices_part(args: argparse.Namespace, source: Reports) -> dict:
    """The one-report ingest request profiled (SQLite) on this checkout, on ``--profile-ref``
    (the server before the lean ingest path) and on ``--baseline-ref``."""
    out: dict = {"devices": args.devices, "seconds": args.device_seconds, "servers": {}}
    refs = [("this checkout", None), ("before", args.profile_ref), ("baseline", args.baseline_ref)]
    for label, ref in refs:
        folder, commit = baseline_checkout(ref) if ref else (None, None)
        try:
            url = str(Path(tempfile.mkdtemp(prefix="longldp-bench-prof-")) / "d.db")
            src = folder / "src" if folder is not None else None
            result = profile_devices(url, args, source, src)
        finally:
            if folder is not None:
                remove_checkout(folder)
        result["ref"], result["commit"] = ref or "HEAD", commit or head_commit()
        out["servers"][label] = result
        print(
            f"  {label} ({result['commit'][:10]}): {result['per_s']:,.0f}/s, load "
            f"{result['load']}, CPU {result['server_cpu_ms_per_request']} ms per request, "
            f"GIL held {result['gil_ms_per_request']} ms per request",
            flush=True,
        )
        for part, v in result["parts"].items():
            print(f"    {v['cpu_us_per_request']:>6} µs  {v['share']:.3f}  {part}", flush=True)
    return out


def head_commit() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def remove_checkout(folder: Path) -> None:
    """Remove a temporary worktree made by :func:`baseline_checkout`."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)],
        capture_output=True,
    )
    shutil.rmtree(folder.parent, ignore_errors=True)


def bearer_of(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def baseline_checkout(ref: str) -> tuple[Path, str]:
    """A temporary git worktree of ``ref`` (its src folder and commit)."""
    folder = Path(tempfile.mkdtemp(prefix="longldp-baseline-")) / "src-tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), ref],
        check=True,
        capture_output=True,
    )
    commit = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return folder, commit


def devices_part(args: argparse.Namespace, source: Reports) -> dict:
    """Group commit against the no-op endpoint and the baseline, alternately in rounds."""
    from server_helpers import PgCluster, pg_bin

    out: dict = {
        "devices": args.devices,
        "seconds": args.device_seconds,
        "baseline_ref": args.baseline_ref,
    }
    folder, commit = baseline_checkout(args.baseline_ref) if args.baseline_ref else (None, None)
    out["baseline_commit"] = commit
    cluster = None
    try:
        backends = ["sqlite"] + (
            [] if args.skip_pg or pg_bin() is None else ["postgresql"]
        )
        for backend in backends:
            if backend == "postgresql":
                cluster = PgCluster(durable=True)
            runs = []
            for rnd in range(args.rounds):
                row: dict = {"round": rnd}
                kinds = [("group", "reports", None), ("noop", "reports/check", None)]
                if folder is not None:
                    kinds.append(("baseline", "reports", folder / "src"))
                for kind, endpoint, src in kinds:
                    if backend == "sqlite":
                        url = str(Path(tempfile.mkdtemp(prefix="longldp-bench-dev-")) / "d.db")
                    else:
                        assert cluster is not None
                        url = cluster.new_database()
                    pid = cluster.pid() if cluster is not None else None
                    rate, at, cpu, client, dbcpu = devices_rate(
                        url, args, source, endpoint, src, db_pid=pid
                    )
                    row[f"{kind}_per_s"], row[f"{kind}_load"] = round(rate, 1), at
                    row[f"{kind}_server_cpu_s_per_1000"] = round(cpu, 3)
                    row[f"{kind}_devices_cpu_s_per_1000"] = round(client, 3)
                    if dbcpu is not None:
                        row[f"{kind}_postgresql_cpu_s_per_1000"] = round(dbcpu, 3)
                row["group_over_noop"] = row["group_per_s"] / row["noop_per_s"]
                if folder is not None:
                    row["group_over_baseline"] = row["group_per_s"] / row["baseline_per_s"]
                runs.append(row)
                shown = [k for k, _, _ in kinds]
                print(
                    f"  {backend} round {rnd}: "
                    + ", ".join(
                        f"{k} {row[f'{k}_per_s']:,.0f}/s (load {row[f'{k}_load']}; CPU s per "
                        f"1,000: server {row[f'{k}_server_cpu_s_per_1000']}, devices "
                        f"{row[f'{k}_devices_cpu_s_per_1000']}"
                        + (
                            f", PostgreSQL {row[f'{k}_postgresql_cpu_s_per_1000']})"
                            if cluster is not None
                            else ")"
                        )
                        for k in shown
                    ),
                    flush=True,
                )
            summary = {
                "runs": runs,
                "group_over_noop_median": statistics.median(r["group_over_noop"] for r in runs),
                **{
                    f"{k}_{who}_cpu_s_per_1000_median": statistics.median(
                        r[f"{k}_{who}_cpu_s_per_1000"] for r in runs
                    )
                    for k in ("group", "noop", *(("baseline",) if folder is not None else ()))
                    for who in ("server", "devices", "postgresql")
                    if f"{k}_{who}_cpu_s_per_1000" in runs[0]
                },
            }
            if folder is not None:
                summary["group_over_baseline_median"] = statistics.median(
                    r["group_over_baseline"] for r in runs
                )
            # The best of the rounds of each configuration (the machine is shared: a round
            # that others' jobs slowed down says less about the server than the best one).
            for k in shown:
                summary[f"{k}_per_s_best"] = max(r[f"{k}_per_s"] for r in runs)
                summary[f"{k}_server_cpu_s_per_1000_min"] = min(
                    r[f"{k}_server_cpu_s_per_1000"] for r in runs
                )
            best = {k: summary[f"{k}_per_s_best"] for k in shown}
            summary["group_over_noop_best"] = best["group"] / best["noop"]
            if folder is not None:
                summary["group_over_baseline_best"] = best["group"] / best["baseline"]
            print(
                f"  {backend}, best of {len(runs)} rounds: "
                + ", ".join(f"{k} {summary[f'{k}_per_s_best']:,.0f}/s" for k in shown)
                + f"; group / no-op {summary['group_over_noop_best']:.2f}"
                + (
                    f", group / baseline {summary['group_over_baseline_best']:.2f}"
                    if folder is not None
                    else ""
                ),
                flush=True,
            )
            out[backend] = summary
            if cluster is not None:
                cluster.destroy()
                cluster = None
    finally:
        if cluster is not None:
            cluster.destroy()
        if folder is not None:
            remove_checkout(folder)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=100_000, help="reports per batched run")
    ap.add_argument("--single", type=int, default=2_000, help="one-per-request reports")
    ap.add_argument("--queries", type=int, default=50, help="estimate queries timed")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--pg-seconds", type=float, default=8.0)
    ap.add_argument("--pg-clients", type=int, default=8)
    ap.add_argument("--pg-batches", type=int, default=60, help="batches prepared per client")
    ap.add_argument("--long-epochs", type=int, default=10, help="epochs of the long collection")
    ap.add_argument("--long-per-epoch", type=int, default=50_000, help="its reports per epoch")
    ap.add_argument("--devices", type=int, default=64, help="devices sending at once")
    ap.add_argument("--device-seconds", type=float, default=10.0, help="seconds per device run")
    ap.add_argument("--device-requests", type=int, default=400, help="requests per device")
    ap.add_argument(
        "--baseline-ref",
        default=BASELINE_REF,
        help="git ref of the baseline ('' none; default: main before the group commit)",
    )
    ap.add_argument("--only-devices", action="store_true", help="only the devices part(s)")
    ap.add_argument(
        "--profile-devices",
        action="store_true",
        help="also profile the one-report request (py-spy) here, at --profile-ref and baseline",
    )
    ap.add_argument(
        "--profile-ref", default=PROFILE_REF, help="git ref profiled as 'before' (lean ingest)"
    )
    ap.add_argument("--skip-devices", action="store_true", help="no devices rates")
    ap.add_argument("--skip-pg", action="store_true")
    ap.add_argument("--skip-sqlite", action="store_true", help="only the PostgreSQL part")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "service.json")
    args = ap.parse_args()
    proto = ll.protocol(SPEC["name"], **SPEC["params"])
    source = Reports(proto, 20_000, np.random.default_rng(2026))
    out: dict = {"protocol": SPEC, "reports": args.reports, "cpu_count": os.cpu_count()}
    out["load_at_start"] = load()
    if not args.skip_devices:
        print(f"{args.devices} devices, one report per request: group commit, no-op, baseline")
        out["devices"] = devices_part(args, source)
    if args.profile_devices:
        print("the one-report request profiled (py-spy, SQLite): this checkout, before, baseline")
        out["profile_devices"] = profile_devices_part(args, source)
    if args.only_devices:
        args.skip_sqlite = args.skip_pg = True
    if not args.skip_sqlite:
        print("SQLite: batched ingest against raw inserts in one transaction")
        out["sqlite"] = sqlite_part(args, proto, source)
        print("profile of the in-process ingest path (1,000 reports a batch)")
        out["profile"] = profile_part(proto, source)
        for label, share in out["profile"].items():
            print(f"  {label}: {share}")
        print(f"random against sequential report ids (in process, after {2 * args.reports:,})")
        out["ids"] = index_part(source, 2 * args.reports)
        for kind in ("random", "sequential"):
            r = out["ids"][kind]
            print(
                f"  {kind} ids: {r['service_per_s']:,} vs raw {r['raw_per_s']:,} reports/s, "
                f"ratio {r['ratio']:.2f}"
            )
        e, n = args.long_epochs, args.long_per_epoch
        print(
            f"a long collection ({e} epochs of {n:,} reports, in process): random ids "
            "against epoch-prefixed ones"
        )
        out["long_collection"] = lc = long_collection_part(source, e, n)
        print(
            f"  random ids {lc['random']['service_per_s']:,} reports/s, epoch-prefixed "
            f"{lc['epoch-prefixed']['service_per_s']:,} ({lc['ratio']:.2f}x)"
        )
    if not args.skip_pg:
        print("PostgreSQL: two server processes against one, alternately")
        out["postgresql"] = pg_part(args, proto, source)
    out["load_at_end"] = load()
    if "sqlite" in out:
        s = out["sqlite"]
        print(
            f"batched ingest / raw inserts in one transaction: {s['ratio_1000_median']:.2f} at "
            f"1,000 reports a request, {s['ratio_10000_median']:.2f} at 10,000 (medians of "
            f"{args.rounds} rounds)"
        )
        print(f"one report per request: {s['single_per_s']:,.0f} reports/s")
        print(
            f"estimate query, k = 1,000: {s['estimate_ms_none']:.1f} ms (unbiased), "
            f"{s['estimate_ms_norm-sub']:.1f} ms (norm-sub), median of {args.queries}"
        )
    if "ratio" in out.get("postgresql", {}):
        p = out["postgresql"]
        print(
            f"PostgreSQL, {p['clients']} clients: 2 processes / 1 = {p['ratio']:.2f} "
            f"({p['two_processes_median']:,.0f} vs {p['one_process_median']:,.0f} reports/s)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.only_devices and args.out.exists():  # keep the other parts' last results
        kept = json.loads(args.out.read_text())
        out = {**kept, **{k: out[k] for k in ("devices", "profile_devices") if k in out}}
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
