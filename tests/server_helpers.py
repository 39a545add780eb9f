"""Shared parts of the server tests: a throwaway PostgreSQL cluster, a live server process,
and building upload records.

Tests that need PostgreSQL or chromium carry the ``postgres`` / ``browser`` marker; the conftest
fails them under CI=true when the part is missing (tests/real_parts.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from longldp.server import db
from longldp.server.service import Service
from real_parts import pg_bin

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "test-admin-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """A PostgreSQL cluster of its own: initdb in a temporary folder, a free port on 127.0.0.1,
    trust authentication; run as the 'postgres' user when the tests run as root."""

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        bindir = pg_bin()
        assert bindir is not None
        self.bin = bindir
        self.base = Path(tempfile.mkdtemp(prefix="longldp-pg-"))
        os.chmod(self.base, 0o755)
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as_user, str(self.bin / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )

    def start(self) -> None:
        # No fsync unless durable: the tests kill server processes, never the machine, so
        # PostgreSQL's durability against power loss is not what they test, and syncing is
        # slow here. The benchmark runs the default, durable configuration.
        opts = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def pid(self) -> int:
        """The postmaster's process id (its backends are its children)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{time.monotonic_ns()}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def db_url(backend: str, pg: PgCluster | None, tmp_path: Path) -> str:
    if backend == "sqlite":
        return str(tmp_path / "collect.db")
    assert pg is not None
    return pg.new_database()


class LiveServer:
    """``longldp serve`` in a subprocess on 127.0.0.1 (a real uvicorn)."""

    def __init__(
        self,
        db: str,
        tmp_path: Path,
        port: int | None = None,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.db = db
        self.args = tuple(args)
        self.env = dict(env or {})
        self.port = port or free_port()
        scheme = "https" if "--tls-cert" in self.args else "http"
        self.base = f"{scheme}://127.0.0.1:{self.port}"
        self.log = tmp_path / f"server-{self.port}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> LiveServer:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "LONGLDP_ADMIN_TOKEN": ADMIN,
            **self.env,
        }
        cmd = [
            sys.executable,
            "-m",
            "longldp",
            "serve",
            "--db",
            self.db,
            "--port",
            str(self.port),
            *self.args,
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 180  # a loaded machine: workers import slowly
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get(self.base + "/healthz", timeout=2, verify=False)
                if answer.status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"server did not start: {self.log.read_text()}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def records(ids: list[bytes], epochs: list[int] | np.ndarray, wires: list[bytes]) -> bytes:
    """A binary batch: 16-byte id, 4-byte big-endian epoch, wire report, per record."""
    return b"".join(
        rid + int(e).to_bytes(4, "big") + w for rid, e, w in zip(ids, epochs, wires, strict=True)
    )


def new_ids(n: int, rng: np.random.Generator) -> list[bytes]:
    return [bytes(r) for r in rng.integers(0, 256, size=(n, 16), dtype=np.uint8)]


def wire_reports(proto, reports) -> list[bytes]:  # type: ignore[no-untyped-def]
    """Wire-format bytes (header + body) of each report."""
    blob = proto.encode_reports(reports)
    size = proto.wire_size
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def audit(url: str, name: str) -> dict[int, int]:
    """Per epoch: n, after checking that the counts equal a recount of the stored reports."""
    engine = db.make_engine(url)
    try:
        service = Service(engine, ADMIN)
        col = service.get_collection(name)
        out = {}
        for row in service.epochs(col)["epochs"]:
            n, support = service.counts(col, row["epoch"])
            rn, rsupport = service.recount(col, row["epoch"])
            assert (n, support.tolist()) == (rn, rsupport.tolist()), row
            out[row["epoch"]] = n
        return out
    finally:
        engine.dispose()


async def asgi_request(  # type: ignore[no-untyped-def]
    app, method: str, path: str, token: str, body: bytes = b"", on_start=None
) -> tuple[int, bytes]:
    """(status, body) of one request sent straight into the ASGI application (no client, no
    socket: what timing and concurrency tests need); ``on_start`` runs when the answer
    starts. A body is sent as ``application/octet-stream``."""
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())]
    if body:
        headers += [
            (b"content-type", b"application/octet-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    sent = [False]
    status, chunks = [0], []

    async def receive():  # type: ignore[no-untyped-def]
        if sent[0]:  # the body was delivered: the client stays until the answer
            await asyncio.sleep(3600)
        sent[0] = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):  # type: ignore[no-untyped-def]
        if message["type"] == "http.response.start":
            status[0] = message["status"]
            if on_start is not None:
                on_start()
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status[0], b"".join(chunks)


#: The protocol most server tests collect with.
LGRR_SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}


def create_shared(base: str, name: str, spec: dict | None = None, **extra) -> dict:  # type: ignore[type-arg]
    """Create a shared-token collection on a live server (L-GRR, k = 8 unless ``spec``);
    its description with its tokens."""
    r = httpx.post(
        f"{base}/v1/collections",
        json={"name": name, "protocol": spec or LGRR_SPEC, "auth": "shared", **extra},
        headers=bearer(ADMIN),
        timeout=60,
        verify=False,
    )
    assert r.status_code == 201, r.text
    return r.json()
