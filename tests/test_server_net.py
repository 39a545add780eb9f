"""The collection server as real processes on real sockets: connections that stall (D5),
HTTPS, two server processes counting exactly once, PostgreSQL batches that conflict in opposite
order (D7), and `make serve-demo` stopped by SIGTERM (D10)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa

import longldp as ll
from longldp.server import db
from server_helpers import (
    ROOT,
    LiveServer,
    audit,
    bearer,
    create_shared,
    free_port,
    new_ids,
    records,
    wire_reports,
)

SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
OCTET = "application/octet-stream"
#: Every test here starts real server processes (seconds each).
pytestmark = pytest.mark.slow
#: Short deadlines for the stalled-connection tests (seconds).
FAST = ("--header-timeout", "1", "--body-timeout", "1.5", "--keep-alive-timeout", "1")
#: How long a test waits for the server to close a connection before failing: generous, since
#: the machine is shared; the property tested is that the server closes it at all.
PATIENCE = 30.0


def create(base: str, name: str = "net", **extra) -> dict:
    return create_shared(base, name, SPEC, **extra)


def reports(n: int, seed: int) -> tuple[list[bytes], list[bytes]]:
    rng = np.random.default_rng(seed)
    reps = PROTO.perturb(rng.integers(0, PROTO.k, n), PROTO.new_memo(n), rng)
    return new_ids(n, rng), wire_reports(PROTO, reps)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (PATIENCE at most)."""
    sock.settimeout(PATIENCE)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            pytest.fail(f"the server kept the connection open for {PATIENCE} s; got {data!r}")
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


# ---------------------------------------------------------------------- D5: timeouts
@pytest.fixture
def fast_server(tmp_path):
    srv = LiveServer(str(tmp_path / "slow.db"), tmp_path, args=FAST).start()
    yield srv
    srv.stop()


def test_a_connection_that_sends_nothing_is_closed(fast_server):
    with socket.create_connection(("127.0.0.1", fast_server.port)) as sock:
        got = read_until_closed(sock)
    assert got.startswith(b"HTTP/1.1 408 ") and b"headers not received" in got


def test_headers_that_trickle_in_are_cut_off(fast_server):
    """A slowloris sends one header byte at a time, each well within any idle timeout."""
    with socket.create_connection(("127.0.0.1", fast_server.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        deadline = time.monotonic() + PATIENCE
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sock.settimeout(0.2)
            try:
                closed = sock.recv(65536).startswith(b"HTTP/1.1 408")
            except TimeoutError:
                pass
            except ConnectionResetError:
                closed = True
        assert closed, "headers trickling in kept the connection open"


def test_a_body_shorter_than_its_length_is_cut_off(fast_server):
    col = create(fast_server.base)
    head = (
        "POST /v1/collections/net/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {col['ingest_token']}\r\n"
        "Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", fast_server.port)) as sock:
        sock.sendall(head + b"\0" * 10)
        got = read_until_closed(sock)
    assert got.startswith(b"HTTP/1.1 408 ") and b"body not received" in got
    # The server is fine afterwards and stored nothing.
    assert httpx.get(fast_server.base + "/healthz", timeout=30).status_code == 200
    assert audit(fast_server.db, "net") == {}


def test_an_idle_keep_alive_connection_is_closed(fast_server):
    with socket.create_connection(("127.0.0.1", fast_server.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = read_until_closed(sock)
    assert got.startswith(b"HTTP/1.1 200 ") and got.count(b"HTTP/1.1") == 1


def test_many_stalled_connections_are_all_closed_and_others_are_served(fast_server):
    socks = [socket.create_connection(("127.0.0.1", fast_server.port)) for _ in range(100)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(b"POST /v1/collections HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"G")
        # Served meanwhile (a fresh connection, a complete request).
        assert httpx.get(fast_server.base + "/healthz", timeout=30).status_code == 200
        for sock in socks:
            assert read_until_closed(sock).startswith(b"HTTP/1.1 408")
    finally:
        for sock in socks:
            sock.close()


def test_https_with_tls_cert_and_key(tmp_path):
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is needed to make a test certificate"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    srv = LiveServer(
        str(tmp_path / "tls.db"), tmp_path, args=("--tls-cert", str(cert), "--tls-key", str(key))
    ).start()
    try:
        assert srv.base.startswith("https://")
        trust = ssl.create_default_context(cafile=str(cert))
        r = httpx.get(srv.base + "/healthz", verify=trust, timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "ok"
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
            httpx.get(f"http://127.0.0.1:{srv.port}/healthz", timeout=5)
    finally:
        srv.stop()


# ---------------------------------------------------------------------- two processes
def worker_pids(url: str) -> set[str]:
    """application_name of the server connections to this test's database (one per server
    process; other tests' engines may hold connections to other databases of the cluster)."""
    engine = sa.create_engine(db.normalize_url(url))
    try:
        with engine.connect() as conn:
            return {
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT application_name FROM pg_stat_activity WHERE datname = "
                    "current_database() AND application_name LIKE 'longldp-server-%%'"
                )
            }
    finally:
        engine.dispose()


def worker_processes(supervisor: int) -> list[int]:
    """The server processes of ``longldp serve --workers N`` (the supervisor's children that
    multiprocessing spawned)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == supervisor and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def serving_process(conn: http.client.HTTPConnection, port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the server's end of the loopback connection ``conn`` (from the
    kernel's socket table: the socket whose local port is the server's and whose peer port is
    ``conn``'s, and the process with a descriptor on it)."""
    assert conn.sock is not None
    mine = conn.sock.getsockname()[1]
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, peer = (int(fields[i].rsplit(":", 1)[1], 16) for i in (1, 2))
                if local == port and peer == mine:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    return None


def pin_connections(port: int, pids: list[int], per_process: int) -> dict[int, list]:
    """``per_process`` keep-alive connections held by each of the server processes ``pids``.

    Which process accepts a connection is the kernel's choice (on a loaded machine it may give
    them all to one, or the other may still be starting), so the processes that hold enough
    are stopped (SIGSTOP) while the next connection is opened and answered: only the others
    can accept it. A stop lasts a few seconds at most, well within the supervisor's health
    check, and a process is always continued before the next try."""
    held: dict[int, list] = {pid: [] for pid in pids}
    deadline = time.monotonic() + 180
    while any(len(c) < per_process for c in held.values()):
        assert time.monotonic() < deadline, f"could not pin connections: {held}"
        full = [pid for pid, c in held.items() if len(c) >= per_process]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
        for pid in full:
            os.kill(pid, signal.SIGSTOP)
        try:
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200
            owner = serving_process(conn, port, pids)
        except (TimeoutError, OSError):  # nobody free accepted it in time: try again
            owner = None
        finally:
            for pid in full:
                os.kill(pid, signal.SIGCONT)
        if owner is None or len(held[owner]) >= per_process:
            conn.close()
        else:
            conn.timeout = 120
            conn.sock.settimeout(120)
            held[owner].append(conn)
    return held


def test_two_server_processes_count_exactly_once(backend, tmp_path):
    # Long keep-alive and header deadlines: the pinned connections wait while the others are
    # pinned.
    args = ("--workers", "2", "--keep-alive-timeout", "300", "--header-timeout", "300")
    srv = LiveServer(backend, tmp_path, args=args).start()
    held: dict[int, list] = {}
    try:
        col = create(srv.base)
        hdr = {**bearer(col["ingest_token"]), "Content-Type": OCTET}
        ids, wires = reports(3000, 13)
        epochs = np.arange(3000) % 3
        assert srv.proc is not None
        pids = worker_processes(srv.proc.pid)
        assert len(pids) == 2, pids
        # Six connections held by each process (whatever the kernel would do on its own);
        # then 12 threads, each on its own connection, alternately one of each process, post
        # overlapping slices of the same 3000 reports at once, in two rounds: neighbouring
        # slices overlap and go to different processes, and every report must count once.
        held = pin_connections(srv.port, pids, 6)
        conns = [held[pids[p % 2]][p // 2] for p in range(12)]
        ports = [c.sock.getsockname()[1] for c in conns]
        news: list[int] = []
        lock = threading.Lock()

        def post(part: int, rnd: int) -> None:
            lo = (part * 250 + rnd * 125) % 3000
            sel = [(lo + j) % 3000 for j in range(500)]
            body = records([ids[j] for j in sel], epochs[sel], [wires[j] for j in sel])
            conns[part].request("POST", "/v1/collections/net/reports", body=body, headers=hdr)
            answer = conns[part].getresponse()
            text = answer.read()
            assert answer.status == 200, text
            with lock:
                news.append(json.loads(text)["new"])

        for rnd in range(2):
            threads = [threading.Thread(target=post, args=(p, rnd)) for p in range(12)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert len(news) == 24, "a post failed (its thread says why)"
        # Every post went over its pinned connection (http.client would have opened a new
        # one, to either process, had the server closed it), so both processes stored.
        assert [c.sock.getsockname()[1] for c in conns] == ports
        assert [serving_process(c, srv.port, pids) for c in conns] == [
            pids[p % 2] for p in range(12)
        ]
        assert sum(news) == 3000
        assert audit(backend, "net") == {0: 1000, 1: 1000, 2: 1000}
        if backend.startswith("postgresql"):
            assert len(worker_pids(backend)) == 2, "both processes hold connections"
    finally:
        for conn in (c for cs in held.values() for c in cs):
            conn.close()
        srv.stop()


# ---------------------------------------------------------------------- D7
@pytest.mark.postgres
def test_postgres_conflicting_batches_in_opposite_order_get_409_not_503(request, tmp_path):
    pg = request.getfixturevalue("pg_cluster")
    url = pg.new_database()
    srv = LiveServer(url, tmp_path).start()
    try:
        col = create(srv.base)
        hdr = {**bearer(col["ingest_token"]), "Content-Type": OCTET}
        statuses: list[tuple[int, int]] = []
        for rnd in range(25):
            ids, wires_a = reports(60, 100 + rnd)
            _, wires_b = reports(60, 500 + rnd)
            # Same ids, other bytes, other epochs (so the epoch locks do not serialize them),
            # one batch in the reverse order of the other.
            a = records(ids, [0] * 60, wires_a)
            b = records(ids[::-1], [1] * 60, wires_b[::-1])
            barrier = threading.Barrier(2)
            got: dict[str, int] = {}

            def post(key: str, body: bytes, got=got, barrier=barrier) -> None:
                with httpx.Client(timeout=60) as http:
                    barrier.wait()
                    got[key] = http.post(
                        f"{srv.base}/v1/collections/net/reports", content=body, headers=hdr
                    ).status_code

            threads = [threading.Thread(target=post, args=x) for x in (("a", a), ("b", b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            statuses.append((got["a"], got["b"]))
        assert all(sorted(s) == [200, 409] for s in statuses), statuses
        assert sum(audit(url, "net").values()) == 25 * 60
    finally:
        srv.stop()


# ---------------------------------------------------------------------- D10
def _demo_folders(line: str) -> list[Path]:
    return [Path(p) for p in line.split(":", 1)[1].split()]


def _wait_for(proc: subprocess.Popen, pattern: str, lines: list[str]) -> str:
    deadline = time.monotonic() + 300
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"the demo ended before {pattern!r}: {''.join(lines)}")
        lines.append(line)
        if re.search(pattern, line):
            return line
    pytest.fail(f"no {pattern!r} in the demo's output: {''.join(lines)}")


def _eventually(check) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie child of a dead parent counts as gone
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("when", ["serving", "uploading", "make-killed"])
def test_serve_demo_cleans_up_on_sigterm(when, tmp_path):
    """D10: SIGTERM to the demo (while it serves, or while its devices upload) or to the
    `make` that started it stops the server and removes its temporary folders."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp_path)}
    port = str(free_port())
    size = (
        ["--devices", "4000", "--epochs", "6"]
        if when == "uploading"
        else ["--devices", "40", "--epochs", "2"]
    )
    if when == "make-killed":
        make = shutil.which("make")
        assert make is not None, "make is needed"
        assert (ROOT / ".venv" / "bin" / "python").exists(), "the project's .venv is needed"
        cmd = [
            make,
            "-s",
            "-C",
            str(ROOT),
            "serve-demo",
            f"DEMO_ARGS={' '.join(size)} --port {port}",
        ]
    else:
        cmd = [sys.executable, "-u", str(ROOT / "scripts" / "serve_demo.py"), *size, "--port", port]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    try:
        folders = _demo_folders(_wait_for(proc, r"^temporary folders:", lines))
        server_pid = int(_wait_for(proc, r"^server process: \d+", lines).split(":")[1])
        _wait_for(proc, "epoch 0: reported" if when == "uploading" else "server running", lines)
        assert all(f.is_dir() for f in folders)
        # Keep reading the output, so that no process of the demo blocks on a full pipe while
        # it shuts down, and keep it for the failure message.
        assert proc.stdout is not None
        drain = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        drain.start()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            tree = subprocess.run(
                ["ps", "-o", "pid,ppid,stat,etime,args", "--ppid", str(proc.pid)],
                capture_output=True,
                text=True,
            ).stdout
            pytest.fail(
                f"{when}: the demo did not exit within 120 s of SIGTERM; its children:\n{tree}"
                f"\nits output:\n{''.join(lines[-40:])}"
            )
        assert _gone(server_pid), "the server outlived the demo"
        assert _eventually(lambda: not any(f.exists() for f in folders)), folders
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
