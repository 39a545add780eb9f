"""The device side of device identities: enrollment on first use with the credential kept in
the device's state (against a stub and against a real server), the attacker-first scenario of
D6 through the real Uploader, quotas seen from the client, and no temporary files piling up
when the device's process is killed mid-save (D8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest

import longldp as ll
from longldp.client import DeviceClient
from longldp.client.upload import Uploader, fetch_protocol
from longldp.protocols import wire
from server_helpers import ADMIN, ROOT, LiveServer, bearer, db_url

PROTO = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}


class Stub:
    """A server script: POST /devices answers from ``enroll`` (status, body), reports 200."""

    def __init__(self, enroll: list[tuple[int, dict]]):
        self.enroll = list(enroll)
        self.requests: list[tuple[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                size = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(size)
                stub.requests.append((self.path, self.headers["Authorization"]))
                if self.path.endswith("/devices"):
                    status, body = stub.enroll.pop(0) if stub.enroll else (500, {})
                else:
                    n = len(data) // wire.record_size(PROTO)
                    status, body = 200, {"received": n, "new": n, "duplicates": 0}
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    made: list[Stub] = []

    def start(*enroll):
        s = Stub(list(enroll))
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


def test_the_device_enrolls_on_first_use_and_keeps_its_credential(tmp_path, stub):
    cred = "ll_device_7.secret-part"
    s = stub((503, {"error": "busy"}), (201, {"device": 7, "credential": cred}))
    client = DeviceClient(tmp_path / "s", PROTO, "demo")
    client.report(1, 0)
    waits: list[float] = []
    up = Uploader(s.url, "demo", enroll_token="ll_enroll_x", sleep=waits.append, rand=lambda: 0.5)
    res = up.flush(client)
    assert (res.acknowledged, res.remaining) == (1, 0) and len(waits) == 1
    assert s.requests == [
        ("/v1/collections/demo/devices", "Bearer ll_enroll_x"),
        ("/v1/collections/demo/devices", "Bearer ll_enroll_x"),
        ("/v1/collections/demo/reports", f"Bearer {cred}"),
    ]
    # The credential is in the state file: a restarted device does not enroll again.
    again = DeviceClient(tmp_path / "s")
    assert again.credential(s.url + "/") == (7, cred)
    again.report(2, 1)
    assert up.flush(again).acknowledged == 1
    assert s.requests[-1] == ("/v1/collections/demo/reports", f"Bearer {cred}")
    assert sum(path.endswith("/devices") for path, _ in s.requests) == 2


def test_a_refused_enrollment_keeps_the_queue(tmp_path, stub, caplog):
    s = stub((409, {"error": "collection 'demo' takes a shared ingest token"}))
    client = DeviceClient(tmp_path / "s", PROTO, "demo")
    client.report(1, 0)
    res = Uploader(s.url, "demo", enroll_token="ll_enroll_x").flush(client)
    assert (res.refused, res.remaining, client.credential(s.url)) == (409, 1, None)
    assert "enrolling" in caplog.text and "shared ingest token" in caplog.text
    with pytest.raises(ValueError, match="exactly one"):
        Uploader(s.url, "demo")
    with pytest.raises(ValueError, match="exactly one"):
        Uploader(s.url, "demo", "tok", enroll_token="ll_enroll_x")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def server(request, tmp_path):
    pg = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    srv = LiveServer(db_url(request.param, pg, tmp_path), tmp_path).start()
    yield srv
    srv.stop()


@pytest.mark.slow
def test_devices_against_a_real_server(server, tmp_path):
    """Enrollment on first use, one credential per device, quotas, lost answers, and D6: an
    attacker who posts a device's queued report id first, with other bytes, changes nothing
    for that device."""
    r = httpx.post(
        f"{server.base}/v1/collections",
        json={"name": "dev", "protocol": SPEC},
        headers=bearer(ADMIN),
        timeout=30,
    )
    assert r.status_code == 201, r.text
    col = r.json()
    proto = fetch_protocol(server.base, "dev", col["read_token"])
    devices = [DeviceClient(tmp_path / f"d{i}", proto, "dev") for i in range(12)]
    rng = np.random.default_rng(5)
    for epoch in (0, 1):
        for dev in devices:
            dev.report(int(rng.integers(0, proto.k)), epoch)
    up = Uploader(server.base, "dev", enroll_token=col["enroll_token"], batch_size=1)
    # The attacker enrolls too, and posts device 0's first queued id with other bytes.
    attacker = httpx.post(
        f"{server.base}/v1/collections/dev/devices",
        headers=bearer(col["enroll_token"]),
        timeout=30,
    ).json()
    victim_item = devices[0].queue[0]
    other = next(
        w
        for w in (
            proto.encode_reports(proto.perturb(np.array([v]), proto.new_memo(1), rng))
            for v in range(8)
            for _ in range(4)
        )
        if w != victim_item.report
    )
    body = wire.encode_records(proto, [victim_item.id], np.array([victim_item.epoch]), other)
    hit = httpx.post(
        f"{server.base}/v1/collections/dev/reports",
        content=body,
        headers={**bearer(attacker["credential"]), "Content-Type": "application/octet-stream"},
        timeout=30,
    )
    assert hit.status_code == 200
    # Device 1's upload commits but, say, its answer is lost: the same records sent again
    # with its credential are duplicates, counted once.
    _, lost = devices[1].batch(10)
    assert up.flush(devices[1]).acknowledged == 2
    device_1, cred_1 = devices[1].credential(server.base)
    again = httpx.post(
        f"{server.base}/v1/collections/dev/reports",
        content=lost,
        headers={**bearer(cred_1), "Content-Type": "application/octet-stream"},
        timeout=30,
    )
    assert again.json() == {"received": 2, "new": 0, "duplicates": 2}
    results = [up.flush(dev) for dev in devices]
    assert all(res.dropped == 0 and res.remaining == 0 for res in results)
    held = {dev.credential(server.base) for dev in devices}
    assert len({d for d, _ in held}) == 12 and attacker["device"] not in {d for d, _ in held}
    # A device's quota: a second report in a spent epoch is refused for good and dropped.
    devices[2].report(3, 1)
    res = up.flush(devices[2])
    assert (res.acknowledged, res.dropped) == (0, 1)
    rd = bearer(col["read_token"])
    counts = httpx.get(f"{server.base}/v1/collections/dev/epochs", headers=rd, timeout=30).json()
    assert [(e["epoch"], e["n"]) for e in counts["epochs"]] == [(0, 13), (1, 12)]
    assert cred_1.startswith(f"ll_device_{device_1}.")


WRITER = textwrap.dedent(
    """
    import sys
    import longldp as ll
    from longldp.client import DeviceClient
    proto = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
    client = DeviceClient(sys.argv[1], proto, "demo", queue_limit=5)
    print("ready", flush=True)
    epoch = 0
    while True:
        client.report(epoch % 8, epoch)
        epoch += 1
    """
)


@pytest.mark.slow
def test_no_temporary_files_pile_up_when_the_device_is_killed(tmp_path):
    """D8: kill -9 the device's process while it saves its state, many times: at most one
    temporary file is ever left, the next open removes it, and the state always loads."""
    state = tmp_path / "state.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    rng = np.random.default_rng(8)
    for _ in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(state)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.0, 0.05)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(leftovers) <= 1, leftovers
        DeviceClient(state)  # loads (never a corrupt file), and removes the leftovers
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.secret"]
