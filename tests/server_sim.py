"""Randomized fault-injection simulation of the collection server (docs/server.md, "How it is
tested"), in the style of divviup/janus's integration_tests/simulation: a seeded random
sequence of operations runs against REAL server processes (``longldp serve``, two of them on
one database, SQLite or PostgreSQL), and after every step the database is checked against a
model of what it must hold.

Operations: upload fresh reports (some for epochs outside the window: 422 for a past one,
425 for one that opens later); replay an acknowledged batch; replay its bytes under fresh
ids; reuse a stored id with other bytes (the device's own, or another device's); drop the
response of a request (the client closes before reading it, then retries); kill -9 a server
while batches are in flight (then retry them); concurrent uploaders; a burst of one-report
requests, one per device (group commit); kill -9 between a group's commit and its answers (a
third process pauses there); the operator moving the window; enroll a device; close an
epoch; export an epoch; read an estimate; a second server process (every operation goes to
one of two processes, and a killed one is replaced).

Invariants after every step:

- the stored reports are exactly the model's: every acknowledged report stored once with its
  bytes, nothing else; a batch whose answer was lost is stored entirely or not at all;
- a conflicting id never changes the stored bytes (the model keeps the first ones);
- every epoch's (n, support counts) equal a recount of its stored reports;
- no device holds more reports in an epoch than the collection's quota;
- every answer is the one the model predicts (status and counts), and never a 5xx.

A failure names its seed and a one-line replay command:
``.venv/bin/python tests/server_sim.py --backend sqlite --seed 123 --verbose``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import longldp as ll
from longldp.server import db
from longldp.server._codec import support_dtype
from longldp.server.group import FAULT_PAUSE_ENV
from registry_cases import build, deployable, triples
from server_helpers import ADMIN, LiveServer, PgCluster, bearer, records

#: Every registered protocol's test parameters (tests/registry_cases.py) at k = 16: sequence
#: ``seed`` runs on ``PROTOCOLS[seed % len(PROTOCOLS)]``, so any run of len(PROTOCOLS)
#: consecutive seeds covers every registered protocol.
PROTOCOLS = [build(cls, params, 16).spec() for cls, params, _ in triples(deployable)]
OPS = {
    # operation: weight
    "upload": 30,
    "replay": 8,
    "replay_bytes": 8,
    "conflict": 8,
    "cross_device": 5,
    "drop_response": 6,
    "concurrent": 6,
    "enroll": 4,
    "close": 3,
    "export": 4,
    "estimate": 4,
    "kill9": 0.5,
    "burst": 6,
    "group_kill9": 0.5,
    "advance": 3,
}
MAX_EPOCHS_PER_REQUEST = 8
OCTET = "application/octet-stream"


class SimulationError(AssertionError):
    """An invariant or a predicted answer failed."""


def replay_command(backend: str, seed: int) -> str:
    return f".venv/bin/python tests/server_sim.py --backend {backend} --seed {seed} --verbose"


# ---------------------------------------------------------------------- servers
class ServerPool:
    """Two ``longldp serve`` processes on one database; a killed one is replaced."""

    def __init__(self, url: str, tmp: Path, size: int = 2):
        self.url, self.tmp = url, tmp
        self.servers: list[LiveServer] = []
        self.clients: dict[int, httpx.Client] = {}
        self._starting: list[tuple[LiveServer, threading.Thread]] = []
        self._paused: LiveServer | None = None
        for _ in range(size):
            self.servers.append(LiveServer(url, tmp).start())

    def client(self, srv: LiveServer) -> httpx.Client:
        if srv.port not in self.clients:
            # Idle connections are dropped well before the server's keep-alive timeout (5 s),
            # so a request never goes out on a connection the server is closing.
            self.clients[srv.port] = httpx.Client(
                base_url=srv.base, timeout=60, limits=httpx.Limits(keepalive_expiry=1.0)
            )
        return self.clients[srv.port]

    def ready(self) -> list[LiveServer]:
        """The live servers, replacements that have come up included."""
        for srv, thread in list(self._starting):
            if not thread.is_alive():
                self._starting.remove((srv, thread))
                if srv.proc is not None and srv.proc.poll() is None:
                    self.servers.append(srv)
        if not self.servers:  # both killed: wait for a replacement
            for _, thread in list(self._starting):
                thread.join()
            return self.ready()
        return self.servers

    def pick(self, rng: np.random.Generator) -> LiveServer:
        live = self.ready()
        return live[int(rng.integers(len(live)))]

    def kill9(self, srv: LiveServer) -> None:
        """kill -9 ``srv`` and start a replacement in the background."""
        srv.kill9()
        self.servers.remove(srv)
        client = self.clients.pop(srv.port, None)
        if client is not None:
            client.close()
        fresh = LiveServer(self.url, self.tmp)
        thread = threading.Thread(target=fresh.start, daemon=True)
        thread.start()
        self._starting.append((fresh, thread))

    def paused(self) -> LiveServer:
        """A third server on the database whose committer pauses between a group's commit and
        its answers (started on first use, again after each kill)."""
        if self._paused is None:
            self._paused = LiveServer(self.url, self.tmp, env={FAULT_PAUSE_ENV: "0.5"}).start()
        return self._paused

    def kill_paused(self) -> None:
        srv, self._paused = self._paused, None
        assert srv is not None
        srv.kill9()
        client = self.clients.pop(srv.port, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        if self._paused is not None:
            self._paused.stop()
        for srv, thread in self._starting:
            thread.join()
            self.servers.append(srv)
        for client in self.clients.values():
            client.close()
        for srv in self.servers:
            srv.stop()


# ---------------------------------------------------------------------- the model
@dataclass
class Sent:
    """A batch as sent: per item (device, id, epoch, wire)."""

    device: int
    token: str
    ids: list[bytes]
    epochs: list[int]
    wires: list[bytes]

    def body(self) -> bytes:
        return records(self.ids, self.epochs, self.wires)


@dataclass
class Model:
    """What the database must hold for one collection."""

    name: str
    proto: Any
    shared: bool
    quota: int | None
    window: int
    tokens: dict[str, str]
    devices: dict[int, str] = field(default_factory=dict)  # device id → credential
    stored: dict[tuple[int, bytes], tuple[int, bytes]] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)
    acked: list[Sent] = field(default_factory=list)
    open_from: int = 0  # the operator's: no report moves it

    def newest(self) -> int | None:
        return max((e for e, _ in self.stored.values()), default=None)

    def open_range(self) -> tuple[int, int]:
        return self.open_from, self.open_from + self.window - 1

    def open_epoch(self, rng: np.random.Generator) -> int | None:
        """An open epoch that is not closed (None if every open one is)."""
        low, high = self.open_range()
        choices = [e for e in range(low, high + 1) if e not in self.closed]
        return choices[int(rng.integers(len(choices)))] if choices else None

    def held(self, device: int, epoch: int) -> int:
        return sum(1 for (d, _), (e, _) in self.stored.items() if d == device and e == epoch)

    def predict(self, sent: Sent) -> tuple[int, int]:
        """(status, new) the server must answer, following its order of checks."""
        first: dict[bytes, int] = {}
        for i, rid in enumerate(sent.ids):
            j = first.setdefault(rid, i)
            if (sent.epochs[j], sent.wires[j]) != (sent.epochs[i], sent.wires[i]):
                return 409, 0
        if len(set(sent.epochs)) > MAX_EPOCHS_PER_REQUEST:
            return 413, 0
        fresh = []
        for i in sorted(first.values()):
            have = self.stored.get((sent.device, sent.ids[i]))
            if have is None:
                fresh.append(i)
            elif have != (sent.epochs[i], sent.wires[i]):
                return 409, 0
        if not fresh:  # all duplicates: acknowledged whatever happened since
            return 200, 0
        low, high = self.open_range()
        for i in sorted(fresh):  # the first new item outside the window decides
            if sent.epochs[i] > high:
                return 425, 0  # opens later: the device keeps it
            if sent.epochs[i] < low:
                return 422, 0
        if any(sent.epochs[i] in self.closed for i in fresh):
            return 409, 0
        if self.quota is not None:
            used: dict[int, int] = {}
            for i in fresh:
                e = sent.epochs[i]
                used[e] = used.get(e, self.held(sent.device, e)) + 1
                if used[e] > self.quota:
                    return 409, 0
        return 200, len(fresh)

    def accept(self, sent: Sent) -> None:
        for rid, e, w in zip(sent.ids, sent.epochs, sent.wires, strict=True):
            self.stored.setdefault((sent.device, rid), (e, w))
        self.acked.append(sent)


# ---------------------------------------------------------------------- one sequence
class Sequence:
    """One seeded sequence of operations on its own collection."""

    def __init__(self, pool: ServerPool, checker: Checker, seed: int, verbose: bool = False):
        self.pool, self.checker, self.seed, self.verbose = pool, checker, seed, verbose
        self.rng = np.random.default_rng([seed, 0x51_17])
        self.log: list[str] = []

    def say(self, text: str) -> None:
        self.log.append(text)
        if self.verbose:
            print(text, flush=True)

    # -- setup
    def setup(self) -> Model:
        rng = self.rng
        spec = PROTOCOLS[self.seed % len(PROTOCOLS)]
        shared = bool(rng.random() < 0.2)
        quota = None if shared else int(rng.integers(1, 3))
        window = int(rng.integers(2, 7))
        name = f"sim-{self.seed}"
        body: dict[str, Any] = {"name": name, "protocol": spec, "epoch_window": window}
        body["auth"] = "shared" if shared else "device"
        if quota is not None:
            body["reports_per_epoch"] = quota
        srv = self.pool.pick(rng)
        r = self.pool.client(srv).post("/v1/collections", json=body, headers=bearer(ADMIN))
        self.expect(r.status_code == 201, f"create: {r.status_code} {r.text}")
        info = r.json()
        model = Model(name, ll.protocol_from_spec(spec), shared, quota, window, info)
        self.say(f"collection {name}: {spec['name']}, shared={shared}, quota={quota}, W={window}")
        if shared:
            model.devices[db.SHARED_DEVICE] = info["ingest_token"]
        else:
            for _ in range(int(rng.integers(2, 5))):
                self.enroll(model)
        return model

    def enroll(self, model: Model) -> None:
        srv = self.pool.pick(self.rng)
        r = self.pool.client(srv).post(
            f"/v1/collections/{model.name}/devices", headers=bearer(model.tokens["enroll_token"])
        )
        self.expect(r.status_code == 201, f"enroll: {r.status_code} {r.text}")
        model.devices[r.json()["device"]] = r.json()["credential"]

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            raise SimulationError(what)

    # -- making batches
    def wires(self, model: Model, n: int) -> list[bytes]:
        proto = model.proto
        if n == 0:
            return []
        codes = self.rng.integers(0, proto.domain_size or 16, n)  # None: strings (Bloom)
        reps = proto.perturb(proto.as_inputs(codes), proto.new_memo(n), self.rng)
        blob = proto.encode_reports(reps)
        size = proto.wire_size
        return [blob[i : i + size] for i in range(0, len(blob), size)]

    def ids(self, n: int) -> list[bytes]:
        return [bytes(x) for x in self.rng.integers(0, 256, (n, 16), dtype=np.uint8)]

    def epochs(self, model: Model, n: int, *, stay_open: bool = True) -> list[int]:
        low, high = model.open_range()
        choices = list(range(low, high + 1))
        if not stay_open and self.rng.random() < 0.5:  # some reports outside the window
            outside = [
                e
                for e in (high + 1 + int(self.rng.integers(0, 3)), low - 1, 2**32 - 1)
                if 0 <= e <= 2**32 - 1 and not low <= e <= high
            ]
            choices = outside or choices
        return [choices[int(self.rng.integers(len(choices)))] for _ in range(n)]

    def device(self, model: Model) -> tuple[int, str]:
        keys = sorted(model.devices)
        d = keys[int(self.rng.integers(len(keys)))]
        return d, model.devices[d]

    def fresh_batch(self, model: Model, n: int | None = None, stay_open: bool = False) -> Sent:
        d, token = self.device(model)
        n = int(self.rng.integers(1, 6)) if n is None else n
        return Sent(
            d, token, self.ids(n), self.epochs(model, n, stay_open=stay_open), self.wires(model, n)
        )

    # -- sending
    def post(self, srv: LiveServer, sent: Sent) -> httpx.Response:
        return self.pool.client(srv).post(
            f"/v1/collections/sim-{self.seed}/reports",
            content=sent.body(),
            headers={**bearer(sent.token), "Content-Type": OCTET},
        )

    def send_and_check(self, model: Model, sent: Sent, *, maybe_stored: bool = False) -> None:
        """Send ``sent`` and check the answer against the model's prediction. With
        ``maybe_stored`` (an earlier copy's answer was lost), a 200 may also count every
        report as a duplicate: the lost copy may have committed before or after this one."""
        status, new = model.predict(sent)
        srv = self.pool.pick(self.rng)
        r = self.post(srv, sent)
        got = r.json()
        self.say(f"  -> {r.status_code} {got}")
        self.expect(
            r.status_code == status,
            f"expected {status}, got {r.status_code} {got} for device {sent.device}, "
            f"epochs {sent.epochs}",
        )
        if status == 200:
            allowed = {new, 0} if maybe_stored else {new}
            n = len(sent.ids)
            self.expect(
                got["received"] == n
                and got["new"] in allowed
                and got["duplicates"] == n - got["new"],
                f"expected new in {sorted(allowed)} of {n}, got {got}",
            )
            model.accept(sent)

    # -- operations
    def op_upload(self, model: Model) -> None:
        sent = self.fresh_batch(model)
        self.say(f"upload: device {sent.device}, epochs {sent.epochs}")
        self.send_and_check(model, sent)

    def op_replay(self, model: Model) -> None:
        if not model.acked:
            return self.op_upload(model)
        sent = model.acked[int(self.rng.integers(len(model.acked)))]
        self.say(f"replay: device {sent.device}, {len(sent.ids)} acknowledged reports")
        self.send_and_check(model, sent)

    def op_replay_bytes(self, model: Model) -> None:
        if not model.acked:
            return self.op_upload(model)
        old = model.acked[int(self.rng.integers(len(model.acked)))]
        sent = Sent(old.device, old.token, self.ids(len(old.ids)), old.epochs, old.wires)
        self.say(f"replay bytes under fresh ids: device {sent.device}, epochs {sent.epochs}")
        self.send_and_check(model, sent)

    def op_conflict(self, model: Model) -> None:
        mine = [k for k in model.stored]
        if not mine:
            return self.op_upload(model)
        d, rid = mine[int(self.rng.integers(len(mine)))]
        epoch, wire = model.stored[(d, rid)]
        other = next((w for w in self.wires(model, 30) if w != wire), None)
        if other is None:
            return None
        extra = self.fresh_batch(model, int(self.rng.integers(0, 3)), stay_open=True)
        extra.device, extra.token = d, model.devices[d]
        sent = Sent(
            d, model.devices[d], [rid, *extra.ids], [epoch, *extra.epochs], [other, *extra.wires]
        )
        self.say(f"conflict: device {d} reuses a stored id with other bytes")
        self.send_and_check(model, sent)
        return None

    def op_cross_device(self, model: Model) -> None:
        if model.shared or len(model.devices) < 2 or not model.stored:
            return self.op_upload(model)
        victim, rid = list(model.stored)[int(self.rng.integers(len(model.stored)))]
        attackers = [d for d in model.devices if d != victim]
        a = attackers[int(self.rng.integers(len(attackers)))]
        epoch, _ = model.stored[(victim, rid)]
        sent = Sent(a, model.devices[a], [rid], [epoch], self.wires(model, 1))
        self.say(f"cross device: device {a} posts device {victim}'s id")
        self.send_and_check(model, sent)
        return None

    def op_drop_response(self, model: Model) -> None:
        """Send a batch on a raw socket and close before reading the answer; then retry."""
        sent = self.fresh_batch(model, stay_open=True)
        status, _ = model.predict(sent)
        srv = self.pool.pick(self.rng)
        body = sent.body()
        head = (
            f"POST /v1/collections/{model.name}/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {sent.token}\r\nContent-Type: {OCTET}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
            sock.sendall(head + body)
            if self.rng.random() < 0.5:  # sometimes wait for the commit, then lose the answer
                sock.recv(1)
        self.say(f"drop response: device {sent.device}, epochs {sent.epochs} (predicted {status})")
        self.resolve(model, [sent], "dropped answer")

    def resolve(self, model: Model, batches: list[Sent], why: str) -> None:
        """Batches whose answer is unknown: each is stored entirely or not at all, and only if
        the model accepts it; a retry then gets the model's answer (all new, or all
        duplicates if the lost copy committed)."""
        stored = self.checker.stored(model)
        for sent in batches:
            status, _ = model.predict(sent)
            items = dict(zip(sent.ids, zip(sent.epochs, sent.wires, strict=True), strict=True))
            new_keys = {(sent.device, rid) for rid in sent.ids} - set(model.stored)
            landed = {k for k in new_keys if k in stored}
            self.expect(
                not landed or landed == new_keys,
                f"{why}: a batch was stored in part ({len(landed)} of {len(new_keys)})",
            )
            self.expect(not landed or status == 200, f"{why}: a refused batch was stored")
            for k in landed:
                self.expect(stored[k] == items[k[1]], f"{why}: stored bytes differ from sent")
            self.say(f"  {why}: {'stored' if landed else 'not stored (yet)'}; retrying")
            self.send_and_check(model, sent, maybe_stored=True)

    def op_concurrent(self, model: Model) -> None:
        """Several uploaders at once, each its own device (or the shared token), in an epoch
        whose window cannot move meanwhile; plus replays of acknowledged batches."""
        epoch = model.open_epoch(self.rng)
        if epoch is None:
            return self.op_upload(model)
        batches = []
        for d in sorted(model.devices):
            room = 3 if model.quota is None else model.quota - model.held(d, epoch)
            if room > 0:
                n = int(self.rng.integers(1, room + 1))
                batches.append(
                    Sent(d, model.devices[d], self.ids(n), [epoch] * n, self.wires(model, n))
                )
        if model.acked:
            again = [model.acked[int(i)] for i in self.rng.integers(len(model.acked), size=2)]
            batches += [b for b in again if model.predict(b)[0] == 200]
        if model.shared and batches:
            batches.append(batches[0])  # the same batch twice at once
        if not batches:
            return self.op_upload(model)
        self.say(f"concurrent: {len(batches)} uploaders in epoch {epoch}")
        answers: list[tuple[Sent, int, dict]] = []
        lock = threading.Lock()
        servers = [self.pool.pick(self.rng) for _ in batches]
        for srv in servers:
            self.pool.client(srv)  # made before the threads start
        barrier = threading.Barrier(len(batches))

        failures: list[BaseException] = []

        def run(sent: Sent, srv: LiveServer) -> None:
            http = self.pool.client(srv)  # thread-safe; making a client per thread is slow
            barrier.wait()
            try:
                r = http.post(
                    f"/v1/collections/{model.name}/reports",
                    content=sent.body(),
                    headers={**bearer(sent.token), "Content-Type": OCTET},
                )
            except BaseException as exc:  # reported below, not lost in the thread
                failures.append(exc)
                return
            with lock:
                answers.append((sent, r.status_code, r.json()))

        threads = [threading.Thread(target=run, args=x) for x in zip(batches, servers, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.expect(not failures, f"concurrent: a request failed: {failures!r}")
        for _, status, got in answers:
            self.expect(status == 200, f"concurrent: {status} {got}")
        distinct = {id(b): b for b in batches}.values()  # the same batch twice counts once
        expected = sum(model.predict(b)[1] for b in distinct)
        total_new = sum(got["new"] for _, _, got in answers)
        if total_new != expected:
            detail = "; ".join(
                f"device {b.device}: {len(b.ids)} sent, {got} (predicted new {model.predict(b)[1]})"
                for b, _, got in answers
            )
            stored_now = self.checker.stored(model)
            landed = sum(
                (b.device, rid) in stored_now and (b.device, rid) not in model.stored
                for b in distinct
                for rid in b.ids
            )
            raise SimulationError(
                f"concurrent: {total_new} new reports in all; expected {expected}; "
                f"{landed} new ones stored. {detail}"
            )
        for sent in batches:
            model.accept(sent)

    def op_kill9(self, model: Model) -> None:
        """kill -9 a server while batches are in flight to it; retry them."""
        if len(self.pool.ready()) < 2:
            return self.op_upload(model)
        victim = self.pool.pick(self.rng)
        epoch = model.open_epoch(self.rng)
        if epoch is None:
            return self.op_upload(model)
        if model.shared:  # large batches, all in one epoch: the window cannot move under them
            batches = []
            for _ in range(int(self.rng.integers(1, 3))):
                n = int(self.rng.integers(200, 2000))
                batches.append(
                    Sent(0, model.devices[0], self.ids(n), [epoch] * n, self.wires(model, n))
                )
        else:
            batches = []
            for d in sorted(model.devices):
                room = model.quota - model.held(d, epoch) if model.quota else 0
                if room > 0 and epoch not in model.closed:
                    batches.append(
                        Sent(
                            d,
                            model.devices[d],
                            self.ids(room),
                            [epoch] * room,
                            self.wires(model, room),
                        )
                    )
        self.say(f"kill -9 a server with {len(batches)} batches in flight")
        answers: dict[int, int] = {}

        http = self.pool.client(victim)

        def run(i: int, sent: Sent) -> None:
            with contextlib.suppress(httpx.HTTPError):
                r = http.post(
                    f"/v1/collections/{model.name}/reports",
                    content=sent.body(),
                    headers={**bearer(sent.token), "Content-Type": OCTET},
                )
                answers[i] = r.status_code

        threads = [threading.Thread(target=run, args=(i, b)) for i, b in enumerate(batches)]
        for t in threads:
            t.start()
        time.sleep(float(self.rng.uniform(0, 0.03)))
        self.pool.kill9(victim)
        for t in threads:
            t.join()
        for status in answers.values():
            self.expect(status < 500, f"kill -9: an answer was {status}")
        self.resolve(model, batches, "kill -9")
        return None

    def one_report_each(self, model: Model) -> list[Sent]:
        """One report from every device with room in one open epoch (what devices send in
        device mode: one request each, grouped by the server into shared transactions)."""
        epoch = model.open_epoch(self.rng)
        if epoch is None or model.shared:
            return []
        return [
            Sent(d, model.devices[d], self.ids(1), [epoch], self.wires(model, 1))
            for d in sorted(model.devices)
            if model.quota is None or model.held(d, epoch) < model.quota
        ]

    def op_burst(self, model: Model) -> None:
        """Every device sends its one report at once, each in its own request, spread over
        both processes: group commit; every answer is the model's."""
        batches = self.one_report_each(model)
        if not batches:
            return self.op_upload(model)
        self.say(f"burst: {len(batches)} one-report requests at once, epoch {batches[0].epochs}")
        servers = [self.pool.pick(self.rng) for _ in batches]
        answers = self.at_once(model, batches, servers)
        for sent, (status, got) in zip(batches, answers, strict=True):
            self.expect(
                (status, got.get("new")) == (200, 1),
                f"burst: {status} {got} (device {sent.device})",
            )
            model.accept(sent)
        return None

    def at_once(
        self, model: Model, batches: list[Sent], servers: list[LiveServer]
    ) -> list[tuple[int, dict]]:
        """(status, JSON) of each batch, all posted at the same moment ((0, {}) when the
        connection failed)."""
        for srv in servers:
            self.pool.client(srv)
        answers: list[tuple[int, dict]] = [(0, {})] * len(batches)
        barrier = threading.Barrier(len(batches))

        def run(i: int) -> None:
            http = self.pool.client(servers[i])
            barrier.wait()
            with contextlib.suppress(httpx.HTTPError):
                r = http.post(
                    f"/v1/collections/{model.name}/reports",
                    content=batches[i].body(),
                    headers={**bearer(batches[i].token), "Content-Type": OCTET},
                )
                answers[i] = (r.status_code, r.json())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return answers

    def op_group_kill9(self, model: Model) -> None:
        """kill -9 between a group's commit and its answers: every device sends one report
        to the server that pauses there (LONGLDP_FAULT_GROUP_PAUSE); once the reports are in
        the database, the process is killed before it answers. Nothing acknowledged is lost
        (nothing was), every batch is stored whole or not at all, and the retries are counted
        once (as duplicates of what the lost group stored)."""
        batches = self.one_report_each(model)
        if not batches:
            return self.op_upload(model)
        srv = self.pool.paused()
        self.say(f"kill -9 after a group's commit: {len(batches)} one-report requests")
        result: list[list[tuple[int, dict]]] = []
        thread = threading.Thread(
            target=lambda: result.append(self.at_once(model, batches, [srv] * len(batches)))
        )
        thread.start()
        wanted = {(b.device, b.ids[0]) for b in batches if model.predict(b)[0] == 200}
        deadline = time.monotonic() + 20
        while wanted and time.monotonic() < deadline:
            stored = self.checker.stored(model)
            if any(k in stored for k in wanted):
                break
            time.sleep(0.005)
        self.pool.kill_paused()
        thread.join()
        for status, got in result[0]:
            self.expect(status < 500, f"group kill -9: an answer was {status} {got}")
        self.resolve(model, batches, "kill -9 after the commit")
        return None

    def op_advance(self, model: Model) -> None:
        """The operator moves the window forward (no report can)."""
        start = model.open_from + int(self.rng.integers(1, 3))
        srv = self.pool.pick(self.rng)
        r = self.pool.client(srv).patch(
            f"/v1/collections/{model.name}", json={"open_from": start}, headers=bearer(ADMIN)
        )
        self.say(f"advance the window to {start} -> {r.status_code}")
        self.expect(r.status_code == 200, f"advance: {r.status_code} {r.text}")
        model.open_from = start
        self.expect(
            r.json()["open_epochs"] == list(model.open_range()),
            f"advance: open epochs {r.json()['open_epochs']} != {model.open_range()}",
        )
        return None

    def op_enroll(self, model: Model) -> None:
        if model.shared:
            return self.op_upload(model)
        self.say("enroll a device")
        self.enroll(model)
        return None

    def op_close(self, model: Model) -> None:
        newest = model.newest()
        if newest is None:
            return self.op_upload(model)
        epoch = max(0, newest - int(self.rng.integers(0, 3)))
        srv = self.pool.pick(self.rng)
        r = self.pool.client(srv).post(
            f"/v1/collections/{model.name}/epochs/{epoch}/close", headers=bearer(ADMIN)
        )
        self.say(f"close epoch {epoch} -> {r.status_code}")
        self.expect(r.status_code == 200, f"close: {r.status_code} {r.text}")
        model.closed.add(epoch)
        return None

    def stored_epoch(self, model: Model) -> int | None:
        """One of the epochs with stored reports, drawn from the sequence's generator (None
        before anything is stored: the caller uploads instead)."""
        epochs = sorted({e for e, _ in model.stored.values()})
        return epochs[int(self.rng.integers(len(epochs)))] if epochs else None

    def op_export(self, model: Model) -> None:
        epoch = self.stored_epoch(model)
        if epoch is None:
            return self.op_upload(model)
        srv = self.pool.pick(self.rng)
        r = self.pool.client(srv).get(
            f"/v1/collections/{model.name}/epochs/{epoch}/reports.parquet?devices=true",
            headers=bearer(ADMIN),
        )
        self.say(f"export epoch {epoch} -> {r.status_code}")
        self.expect(r.status_code == 200, f"export: {r.status_code}")
        table = pq.read_table(io.BytesIO(r.content))
        got = sorted(
            zip(
                table.column("device").to_pylist(),
                table.column("report_id").to_pylist(),
                table.column("report").to_pylist(),
                strict=True,
            )
        )
        want = sorted((d, rid, w) for (d, rid), (e, w) in model.stored.items() if e == epoch)
        self.expect(got == want, f"export of epoch {epoch} differs from the stored reports")
        return None

    def op_estimate(self, model: Model) -> None:
        epoch = self.stored_epoch(model)
        if epoch is None:
            return self.op_upload(model)
        srv = self.pool.pick(self.rng)
        r = self.pool.client(srv).get(
            f"/v1/collections/{model.name}/epochs/{epoch}/estimate?postprocess=none",
            headers=bearer(model.tokens["read_token"]),
        )
        wires = [w for e, w in model.stored.values() if e == epoch]
        agg = model.proto.aggregator()
        agg.add_bytes(wires)
        self.say(f"estimate epoch {epoch} -> {r.status_code}")
        self.expect(r.status_code == 200, f"estimate: {r.status_code} {r.text}")
        self.expect(r.json()["n"] == len(wires), "estimate: n differs from the stored reports")
        want = agg.estimate_with_se().as_dict()
        fields = ("estimate", "raw", "se", "lower", "upper")
        if support_dtype(model.proto).kind == "f":  # float sums added in another order
            same = all(_close(r.json()[f], want[f]) for f in fields)
        else:
            same = all(r.json()[f] == want[f] for f in fields)
        self.expect(
            same,
            "estimate differs from the protocol's estimate_with_se of the stored reports",
        )
        return None

    # -- the run
    def run(self, steps: int) -> None:
        model = self.setup()
        self.checker.check(model)
        names, weights = zip(*OPS.items(), strict=True)
        p = np.array(weights, dtype=float) / sum(weights)
        for step in range(steps):
            op = names[int(self.rng.choice(len(names), p=p))]
            try:
                getattr(self, f"op_{op}")(model)
                self.checker.check(model)
            except SimulationError as exc:
                raise SimulationError(f"step {step} ({op}): {exc}") from None


# ---------------------------------------------------------------------- invariants
def _same_support(have: np.ndarray, want: np.ndarray, n: int) -> bool:
    """Counts equal exactly. A numeric mean's float sums [Σû, Σû²] (math (20.3)) equal up to
    the rounding that adding ``n`` terms in another order makes (group commit and shards add
    the same reports in an order of their own): n·2^-52 times the sum of magnitudes, which is
    Σû² for the second cell and at most √(n·Σû²) for the first (Cauchy–Schwarz)."""
    if have.dtype.kind != "f":
        return bool(np.array_equal(have, want))
    squares = float(np.max(np.abs(want)))
    magnitude = squares + np.sqrt(max(n, 1) * squares)
    bound = 2 * max(n, 1) * np.finfo(np.float64).eps * magnitude
    return bool(np.all(np.abs(have - want) <= bound))


def _close(have: object, want: object) -> bool:
    """Estimates from float sums (a numeric mean's) equal up to the rounding of another
    summation order (:func:`_same_support`), carried through the estimator: 1e-9 relative."""
    a = np.asarray(have, dtype=np.float64)
    b = np.asarray(want, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))


class Checker:
    """Reads the database directly and checks it against a model."""

    def __init__(self, url: str):
        self.engine = db.make_engine(url)

    def collection_id(self, model: Model) -> int:
        with db.transaction(self.engine, write=False) as conn:
            return int(
                conn.execute(
                    sa.select(db.collections.c.id).where(db.collections.c.name == model.name)
                ).scalar_one()
            )

    def stored(self, model: Model) -> dict[tuple[int, bytes], tuple[int, bytes]]:
        r = db.reports
        cid = self.collection_id(model)
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(
                sa.select(r.c.device_id, r.c.report_id, r.c.epoch, r.c.wire).where(
                    r.c.collection_id == cid
                )
            ).all()
        return {(int(d), bytes(rid)): (int(e), bytes(w)) for d, rid, e, w in rows}

    def check(self, model: Model) -> None:
        stored = self.stored(model)
        if stored != model.stored:
            missing = set(model.stored) - set(stored)
            extra = set(stored) - set(model.stored)
            changed = [k for k in set(stored) & set(model.stored) if stored[k] != model.stored[k]]
            raise SimulationError(
                f"stored reports differ from the model: {len(missing)} acknowledged missing, "
                f"{len(extra)} never acknowledged, {len(changed)} with other bytes"
            )
        ec = db.epoch_counts
        cid = self.collection_id(model)
        with db.transaction(self.engine, write=False) as conn:
            counts = conn.execute(
                sa.select(ec.c.epoch, ec.c.n, ec.c.support, ec.c.closed).where(
                    ec.c.collection_id == cid
                )
            ).all()
        proto = model.proto
        by_epoch: dict[int, list[bytes]] = {}
        for e, w in stored.values():
            by_epoch.setdefault(e, []).append(w)
        # An epoch's counts are the sums over its count rows (shards); every row of a closed
        # epoch is flagged.
        summed: dict[int, tuple[int, np.ndarray, set[bool]]] = {}
        kind = support_dtype(proto)  # int64 counts, or float64 sums of a numeric mean
        for e, n, support, closed in counts:
            have = np.frombuffer(support, kind).reshape(proto.support_shape)
            n0, s0, c0 = summed.get(int(e), (0, np.zeros(proto.support_shape, kind), set()))
            summed[int(e)] = (n0 + int(n), s0 + have, c0 | {bool(closed)})
        for e, (n, have, closed) in summed.items():
            wires = by_epoch.get(e, [])
            if n != len(wires):
                raise SimulationError(f"epoch {e}: n = {n} but {len(wires)} reports are stored")
            agg = proto.aggregator()
            if wires:
                agg.add_bytes(wires)
                want = np.asarray(agg.support_counts)
            else:
                want = np.zeros(proto.support_shape, dtype=kind)
            if not _same_support(have, want, len(wires)):
                raise SimulationError(f"epoch {e}: support counts differ from a recount")
            if closed != {e in model.closed}:
                raise SimulationError(f"epoch {e}: closed flags {closed} differ from the model")
        missing_rows = set(by_epoch) - set(summed)
        if missing_rows:
            raise SimulationError(f"epochs {sorted(missing_rows)} have reports but no counts")
        self.check_quota(model, stored)

    @staticmethod
    def check_quota(model: Model, stored: dict[tuple[int, bytes], tuple[int, bytes]]) -> None:
        """No device holds more than the quota of reports in any epoch."""
        if model.quota is None:
            return
        per: dict[tuple[int, int], int] = {}
        for (d, _), (e, _) in stored.items():
            per[(d, e)] = per.get((d, e), 0) + 1
        over = {k: v for k, v in per.items() if v > model.quota}
        if over:
            raise SimulationError(f"quota of {model.quota} exceeded: {over}")

    def close(self) -> None:
        self.engine.dispose()


# ---------------------------------------------------------------------- running many
def sqlite_path(tmp: Path) -> str:
    """The simulation's SQLite file: in memory-backed /dev/shm when there is one (the servers
    are killed, never the machine, so syncing to a disk tests nothing here), else in ``tmp``."""
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="longldp-sim-", dir=shm)) if shm.is_dir() else tmp
    return str(folder / "sim.db")


@dataclass
class Simulation:
    """Servers, checker and database of one backend, for many sequences."""

    backend: str
    url: str
    tmp: Path
    pool: ServerPool = field(init=False)
    checker: Checker = field(init=False)

    def __post_init__(self) -> None:
        self.pool = ServerPool(self.url, self.tmp)
        self.checker = Checker(self.url)

    def run(self, seed: int, steps: int | None = None, verbose: bool = False) -> None:
        seq = Sequence(self.pool, self.checker, seed, verbose)
        steps = int(np.random.default_rng([seed, 7]).integers(4, 13)) if steps is None else steps
        try:
            seq.run(steps)
        except Exception as exc:  # any failure names its seed and how to replay it
            raise SimulationError(
                f"simulation failed: backend={self.backend} seed={seed}: "
                f"{type(exc).__name__}: {exc}\nreplay: {replay_command(self.backend, seed)}"
                + ("" if verbose else "\n" + "\n".join(seq.log[-12:]))
            ) from None

    def close(self) -> None:
        self.pool.close()
        self.checker.close()


def main() -> None:
    ap = argparse.ArgumentParser(description="Replay simulation sequences of the server.")
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=1, help="sequences from --seed on")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="longldp-sim-"))
    cluster = PgCluster() if args.backend == "postgresql" else None
    url = cluster.new_database() if cluster else sqlite_path(tmp)
    sim = Simulation(args.backend, url, tmp)
    try:
        for seed in range(args.seed, args.seed + args.count):
            sim.run(seed, verbose=args.verbose)
        print(f"{args.count} sequence(s) passed on {args.backend}")
    finally:
        sim.close()
        if cluster is not None:
            cluster.destroy()


if __name__ == "__main__":
    main()
