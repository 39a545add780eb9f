"""Process-wide resource bounds of the collection server, on real processes and sockets
(issue 32, items 4, 5 and 6): slow readers cut off and held within the memory budget, bodies
refused by their declared length before a byte is read, a process-wide budget of bytes in
flight answering 503 with Retry-After, and ``--workers`` children that exit with their
supervisor.

How each failed on main before this change (its options for the budget and the write
timeout left out): the 20 slow readers were all served (no 503) and each got its whole answer,
however long it left it unread, the server's memory growing by 203 MB meanwhile (22 MB now, 2
served, 18 refused); a JSON body declared at 8 MiB for a collection whose largest batch is a
few MB was waited for (the test's 30 s passed with no answer); twelve concurrent maximal ingests
were all admitted (none refused) whatever memory they needed; after kill -9 of the supervisor
both workers kept serving (the test's 30 s passed).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import longldp as ll
from server_helpers import (
    LGRR_SPEC,
    LiveServer,
    audit,
    bearer,
    create_shared,
    free_port,
    new_ids,
    records,
    wire_reports,
)

pytestmark = pytest.mark.slow
PROTO = ll.protocol_from_spec(LGRR_SPEC)
OCTET = "application/octet-stream"
#: How long a test waits for what the server must do at once, on a shared machine.
PATIENCE = 30.0


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (``VmRSS`` of /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def status_line(sock: socket.socket) -> bytes:
    """The first line the server sends (PATIENCE at most)."""
    sock.settimeout(PATIENCE)
    data = b""
    while b"\r\n" not in data:
        try:
            chunk = sock.recv(1)
        except TimeoutError:
            pytest.fail(f"no answer within {PATIENCE} s; got {data!r}")
        if not chunk:
            break
        data += chunk
    return data


def head(path: str, token: str, kind: str, length: int, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {kind}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def test_a_body_too_long_for_its_collection_is_refused_before_it_is_read(tmp_path):
    """A JSON body longer than its collection's largest batch can be (max_batch items of at
    most 2 × the longest compact item) is refused by its Content-Length, at once."""
    srv = LiveServer(str(tmp_path / "len.db"), tmp_path).start()
    try:
        col = create_shared(srv.base, "len")
        path = "/v1/collections/len/reports"
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            sock.sendall(head(path, col["ingest_token"], "application/json", 8 << 20))
            line = status_line(sock)
        assert line.startswith(b"HTTP/1.1 413 "), line
        # Above --max-body-bytes, any path, before authentication: 413 as well.
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            sock.sendall(head(path, "nobody", OCTET, 17 << 20))
            assert status_line(sock).startswith(b"HTTP/1.1 413 ")
    finally:
        srv.stop()


def test_bytes_in_flight_are_bounded_process_wide(tmp_path):
    """Twelve ingests of 10,000 reports at once, each declaring its body and then stalling:
    the server admits what its 16 MiB budget holds (each needs about 3 MiB) and answers the
    others 503 with Retry-After before reading their bodies; the admitted ones complete, and
    the refused ones succeed when retried. Nothing is lost or counted twice."""
    args = (
        "--max-body-bytes", str(1 << 20),
        "--max-collection-bytes", str(8 << 20),
        "--max-inflight-bytes", str(16 << 20),
    )  # fmt: skip
    srv = LiveServer(str(tmp_path / "budget.db"), tmp_path, args=args).start()
    try:
        col = create_shared(srv.base, "budget")
        rng = np.random.default_rng(5)
        bodies = []
        for _ in range(12):
            reps = PROTO.perturb(rng.integers(0, 8, 10_000), PROTO.new_memo(10_000), rng)
            bodies.append(records(new_ids(10_000, rng), [0] * 10_000, wire_reports(PROTO, reps)))
        path = "/v1/collections/budget/reports"
        socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in bodies]
        try:
            for sock, body in zip(socks, bodies, strict=True):
                sock.sendall(head(path, col["ingest_token"], OCTET, len(body)))
            # The refused answer at once; the admitted wait for their bodies (3 s in all).
            refused: list[int] = []
            deadline = time.monotonic() + 3.0
            while (left := deadline - time.monotonic()) > 0:
                waiting = [s for i, s in enumerate(socks) if i not in refused]
                ready, _, _ = select.select(waiting, [], [], left)
                for sock in ready:
                    first = sock.recv(65536)
                    assert first.startswith(b"HTTP/1.1 503 "), first
                    assert b"retry-after: 2" in first.lower()
                    refused.append(socks.index(sock))
            assert 6 <= len(refused) <= 11, refused
            for i, sock in enumerate(socks):
                if i not in refused:
                    sock.sendall(bodies[i])
                    assert status_line(sock).startswith(b"HTTP/1.1 200 ")
        finally:
            for sock in socks:
                sock.close()
        with httpx.Client(base_url=srv.base, timeout=120) as http:
            for i in refused:
                r = http.post(
                    path,
                    content=bodies[i],
                    headers={**bearer(col["ingest_token"]), "Content-Type": OCTET},
                )
                assert r.status_code == 200 and r.json()["new"] == 10_000, r.text
        assert audit(srv.db, "budget") == {0: 120_000}
    finally:
        srv.stop()


def test_slow_readers_are_cut_off_and_held_within_the_budget(tmp_path):
    """Twenty clients ask for a 5 MB estimate and do not read it. The server computes at most
    what its budget admits at once (the others get 503 at once), drops the connections it
    cannot write to within --write-timeout, and its memory stays within the budget."""
    budget = 128 << 20
    args = (
        "--write-timeout", "2",
        "--max-inflight-bytes", str(budget),
        "--max-collection-bytes", str(budget),
    )  # fmt: skip
    srv = LiveServer(str(tmp_path / "slow.db"), tmp_path, args=args).start()
    try:
        spec = {"name": "L-GRR", "params": {"k": 50_000, "eps_perm": 2.0, "eps_1": 1.0}}
        col = create_shared(srv.base, "wide", spec)
        proto = ll.protocol_from_spec(spec)
        rng = np.random.default_rng(6)
        reps = proto.perturb(rng.integers(0, proto.k, 2000), proto.new_memo(2000), rng)
        body = records(new_ids(2000, rng), [0] * 2000, wire_reports(proto, reps))
        r = httpx.post(
            f"{srv.base}/v1/collections/wide/reports",
            content=body,
            headers={**bearer(col["ingest_token"]), "Content-Type": OCTET},
            timeout=60,
        )
        assert r.status_code == 200
        url = "/v1/collections/wide/epochs/0/estimate?postprocess=none"
        full = httpx.get(srv.base + url, headers=bearer(col["read_token"]), timeout=60)
        size = len(full.content)
        assert size > 4_000_000
        assert srv.proc is not None
        before = rss_bytes(srv.proc.pid)
        request = (
            f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {col['read_token']}\r\n\r\n"
        ).encode()
        socks = []
        for _ in range(20):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", srv.port))
            sock.sendall(request)
            socks.append(sock)
        peak = before
        served, refused = [], 0
        try:
            for sock in socks:
                line = status_line(sock)
                peak = max(peak, rss_bytes(srv.proc.pid))
                if line.startswith(b"HTTP/1.1 503 "):
                    refused += 1
                else:
                    assert line.startswith(b"HTTP/1.1 200 "), line
                    served.append(sock)
            time.sleep(6)  # three write timeouts: every stalled answer is dropped
            peak = max(peak, rss_bytes(srv.proc.pid))
            for sock in served:
                got = b""
                sock.settimeout(PATIENCE)
                while True:
                    try:
                        chunk = sock.recv(1 << 20)
                    except (ConnectionResetError, TimeoutError):
                        break
                    if not chunk:
                        break
                    got += chunk
                assert len(got) < size, "an answer nobody read was kept and sent in full"
        finally:
            for sock in socks:
                sock.close()
        assert refused >= 10 and served, (refused, len(served))
        assert peak - before < budget + (64 << 20), (before, peak)
        # And it still answers.
        assert (
            httpx.get(srv.base + url, headers=bearer(col["read_token"]), timeout=60).status_code
            == 200
        )
    finally:
        srv.stop()


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_exit_when_their_supervisor_dies_and_a_restart_works(tmp_path):
    port = free_port()
    srv = LiveServer(str(tmp_path / "w.db"), tmp_path, port=port, args=("--workers", "2"))
    srv.start()
    assert srv.proc is not None
    deadline = time.monotonic() + PATIENCE
    while len(workers := [p for p in _children(srv.proc.pid) if _alive(p)]) < 2:
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.2)
    os.kill(srv.proc.pid, signal.SIGKILL)
    srv.proc.wait(timeout=30)
    deadline = time.monotonic() + PATIENCE
    while any(_alive(p) for p in workers):
        assert time.monotonic() < deadline, "workers kept serving after their supervisor died"
        time.sleep(0.2)
    again = LiveServer(str(tmp_path / "w.db"), tmp_path, port=port).start()
    try:
        assert httpx.get(again.base + "/healthz", timeout=30).status_code == 200
    finally:
        again.stop()
