"""Collection server as a real process (``longldp serve`` on uvicorn, 127.0.0.1), on SQLite and
on a real PostgreSQL: kill -9 during load loses no acknowledged report; concurrent and repeated
batches are counted once; PostgreSQL stopped gives 503 with Retry-After and no loss; the
dashboard rendered by headless chromium shows the served numbers."""

from __future__ import annotations

import base64
import contextlib
import re
import subprocess
import threading
import time
from html.parser import HTMLParser

import httpx
import numpy as np
import pytest

import longldp as ll
from chromium_cdp import one_shot
from longldp.client import DeviceClient
from longldp.client.upload import Uploader, fetch_protocol
from longldp.server import db
from longldp.server.app import RETRY_AFTER_S
from real_parts import CHROMIUM
from server_helpers import (
    LiveServer,
    audit,
    bearer,
    create_shared,
    new_ids,
    records,
    wire_reports,
)

SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
OCTET = "application/octet-stream"


@pytest.fixture
def server(backend, tmp_path):
    srv = LiveServer(backend, tmp_path).start()
    yield srv
    srv.stop()


def create(base: str, name: str = "live", **extra) -> dict:
    return create_shared(base, name, SPEC, **extra)


def reports(n: int, seed: int):
    rng = np.random.default_rng(seed)
    values = np.minimum(rng.geometric(0.35, n) - 1, PROTO.k - 1)
    reps = PROTO.perturb(values, PROTO.new_memo(n), rng)
    return new_ids(n, rng), wire_reports(PROTO, reps), rng


def stored_ids(url: str, name: str) -> set[bytes]:
    import sqlalchemy as sa

    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return {bytes(r) for r in conn.execute(sa.select(db.reports.c.report_id)).scalars()}
    finally:
        engine.dispose()


@pytest.mark.slow
def test_kill_9_during_load_loses_no_acknowledged_report(server, backend, tmp_path):
    col = create(server.base)
    tok = col["ingest_token"]
    n, per = 6000, 100
    ids, wires, _ = reports(n, 21)
    epochs = np.arange(n) % 3
    acked: list[bytes] = []
    lock = threading.Lock()

    def load(part: int) -> None:
        with httpx.Client(timeout=30) as http:
            for s in range(part * per, n, 2 * per):
                body = records(ids[s : s + per], epochs[s : s + per], wires[s : s + per])
                try:
                    r = http.post(
                        f"{server.base}/v1/collections/live/reports",
                        content=body,
                        headers={**bearer(tok), "Content-Type": OCTET},
                    )
                except httpx.HTTPError:
                    return
                if r.status_code == 200:
                    with lock:
                        acked.extend(ids[s : s + per])

    threads = [threading.Thread(target=load, args=(p,)) for p in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 1500 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill9()
    for t in threads:
        t.join(timeout=60)
    assert len(acked) >= 1500
    # Every acknowledged report is stored, and the counts equal a recount of what is stored.
    assert set(acked) <= stored_ids(backend, "live")
    assert sum(audit(backend, "live").values()) == len(stored_ids(backend, "live"))
    # Restart; replaying everything (clients retry what was not acknowledged) counts each once.
    srv2 = LiveServer(backend, tmp_path).start()
    try:
        for s in range(0, n, 1000):
            r = httpx.post(
                f"{srv2.base}/v1/collections/live/reports",
                content=records(ids[s : s + 1000], epochs[s : s + 1000], wires[s : s + 1000]),
                headers={**bearer(tok), "Content-Type": OCTET},
                timeout=60,
            )
            assert r.status_code == 200, r.text
        assert audit(backend, "live") == {0: 2000, 1: 2000, 2: 2000}
    finally:
        srv2.stop()


@pytest.mark.slow
def test_concurrent_and_retried_batches_count_once(server, backend):
    col = create(server.base)
    tok = col["ingest_token"]
    ids, wires, _ = reports(800, 5)
    body = records(ids[:500], [1] * 500, wires[:500])
    barrier = threading.Barrier(8)
    answers: list[dict] = []

    def post() -> None:
        with httpx.Client(timeout=60) as http:
            barrier.wait()
            r = http.post(
                f"{server.base}/v1/collections/live/reports",
                content=body,
                headers={**bearer(tok), "Content-Type": OCTET},
            )
            answers.append({"status": r.status_code, **r.json()})

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a["status"] for a in answers] == [200] * 8
    assert sum(a["new"] for a in answers) == 500
    # A request that times out on the client may still commit; its retry is counted once.
    later = records(ids[500:], [1] * 300, wires[500:])
    with contextlib.suppress(httpx.TimeoutException):
        httpx.post(
            f"{server.base}/v1/collections/live/reports",
            content=later,
            headers={**bearer(tok), "Content-Type": OCTET},
            timeout=0.001,
        )
    for _ in range(2):
        r = httpx.post(
            f"{server.base}/v1/collections/live/reports",
            content=later,
            headers={**bearer(tok), "Content-Type": OCTET},
            timeout=60,
        )
        assert r.status_code == 200
    # Overlapping JSON batch of the same reports.
    items = [
        {"id": ids[i].hex(), "epoch": 1, "report": base64.b64encode(wires[i]).decode()}
        for i in range(450, 550)
    ]
    r = httpx.post(
        f"{server.base}/v1/collections/live/reports",
        json={"reports": items},
        headers=bearer(tok),
        timeout=60,
    )
    assert r.json() == {"received": 100, "new": 0, "duplicates": 100}
    assert audit(backend, "live") == {1: 800}
    est = httpx.get(
        f"{server.base}/v1/collections/live/epochs/1/estimate",
        headers=bearer(col["read_token"]),
        timeout=30,
    ).json()
    agg = PROTO.aggregator()
    agg.add(PROTO.decode_reports(wires))
    assert est["estimate"] == agg.estimate().tolist()


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_stopped_gives_503_then_recovers_without_loss(request, tmp_path):
    pg = request.getfixturevalue("pg_cluster")
    url = pg.new_database()
    srv = LiveServer(url, tmp_path).start()
    try:
        col = create(srv.base)
        hdr = {**bearer(col["ingest_token"]), "Content-Type": OCTET}
        ids, wires, _ = reports(400, 9)
        first = records(ids[:200], [0] * 200, wires[:200])
        second = records(ids[200:], [0] * 200, wires[200:])
        assert (
            httpx.post(
                f"{srv.base}/v1/collections/live/reports", content=first, headers=hdr, timeout=30
            ).status_code
            == 200
        )
        pg.stop()
        try:
            r = httpx.post(
                f"{srv.base}/v1/collections/live/reports", content=second, headers=hdr, timeout=30
            )
            assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, r.text
            assert "unavailable" in r.json()["error"]
            r = httpx.get(
                f"{srv.base}/v1/collections/live/epochs/0/estimate",
                headers=bearer(col["read_token"]),
                timeout=30,
            )
            assert r.status_code == 503
            assert httpx.get(f"{srv.base}/healthz", timeout=30).status_code == 503
        finally:
            restart = threading.Timer(1.5, pg.start)
            restart.start()
        # The device client backs off (honouring Retry-After; its sleeps are capped for the
        # test) and gets everything through once PostgreSQL is back; nothing is lost.
        slept: list[float] = []

        def sleep(s: float) -> None:
            slept.append(s)
            time.sleep(min(s, 0.3))

        devices = [
            DeviceClient(tmp_path / f"dev{i}.json", PROTO, "live", secret=bytes([i]) * 32)
            for i in range(20)
        ]
        for i, dev in enumerate(devices):
            dev.report(i % PROTO.k, 0)
        up = Uploader(srv.base, "live", col["ingest_token"], max_attempts=60, sleep=sleep)
        results = [up.flush(dev) for dev in devices]
        restart.join()
        assert sum(r.acknowledged for r in results) == 20 and all(not d.queue for d in devices)
        assert max(slept) >= RETRY_AFTER_S  # the server's Retry-After was honoured
        assert httpx.post(
            f"{srv.base}/v1/collections/live/reports", content=second, headers=hdr, timeout=30
        ).json() == {"received": 200, "new": 200, "duplicates": 0}
        assert audit(url, "live") == {0: 420}
    finally:
        srv.stop()


@pytest.mark.slow
def test_end_to_end_with_the_device_client(server, backend, tmp_path):
    """Devices with the real client: fetch the protocol, report over two epochs, upload; a
    lost acknowledgement is retried and counted once; estimates equal the reports'."""
    col = create(server.base)
    proto = fetch_protocol(server.base, "live", col["read_token"])
    assert proto.spec() == PROTO.spec()
    rng = np.random.default_rng(4)
    devices = [DeviceClient(tmp_path / f"d{i}.json", proto, "live") for i in range(25)]
    sent = {0: [], 1: []}
    for epoch in (0, 1):
        for dev in devices:
            dev.report(int(min(rng.geometric(0.4) - 1, proto.k - 1)), epoch)
            sent[epoch].append(dev.queue[-1].report)
    up = Uploader(server.base, "live", col["ingest_token"], batch_size=1)
    # Device 0's first upload commits but its acknowledgement is lost: it sends again.
    _, data = devices[0].batch(10)
    r = httpx.post(
        f"{server.base}/v1/collections/live/reports",
        content=data,
        headers={**bearer(col["ingest_token"]), "Content-Type": OCTET},
        timeout=30,
    )
    assert r.json()["new"] == 2
    results = [up.flush(dev) for dev in devices]
    assert sum(r.acknowledged for r in results) == 50 and all(not d.queue for d in devices)
    # A restarted device keeps its budget; the server counted every report once.
    again = DeviceClient(tmp_path / "d0.json", proto, "live")
    assert again.spent_budget == devices[0].spent_budget and again.spent_budget.reports == 2
    assert audit(backend, "live") == {0: 25, 1: 25}
    for epoch in (0, 1):
        agg = proto.aggregator()
        agg.add_bytes(sent[epoch])
        got = httpx.get(
            f"{server.base}/v1/collections/live/epochs/{epoch}/estimate",
            headers=bearer(col["read_token"]),
            timeout=30,
        ).json()
        assert got["estimate"] == agg.estimate().tolist()


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append((tag, dict(attrs)))


@pytest.mark.slow
@pytest.mark.browser
def test_dashboard_renders_in_headless_chromium(tmp_path):
    srv = LiveServer(str(tmp_path / "dash.db"), tmp_path).start()
    try:
        col = create(srv.base, "dash", open_from=10)
        rng = np.random.default_rng(3)
        memo = PROTO.new_memo(600)
        for e in range(5):
            values = np.minimum(rng.geometric(0.25 + 0.05 * e, 600) - 1, PROTO.k - 1)
            reps = PROTO.perturb(values, memo, rng)
            r = httpx.post(
                f"{srv.base}/v1/collections/dash/reports",
                content=records(new_ids(600, rng), [10 + e] * 600, wire_reports(PROTO, reps)),
                headers={**bearer(col["ingest_token"]), "Content-Type": OCTET},
                timeout=30,
            )
            assert r.status_code == 200
        series = httpx.get(
            f"{srv.base}/v1/collections/dash/series", headers=bearer(col["read_token"]), timeout=30
        ).json()["epochs"]
        url = f"{srv.base}/collections/dash/dashboard?token={col['read_token']}"
        dom = one_shot(CHROMIUM, tmp_path / "chromium", url, "--dump-dom")
        shot = tmp_path / "dash.png"
        one_shot(
            CHROMIUM, tmp_path / "chromium", url, "--window-size=1000,900", f"--screenshot={shot}"
        )
    finally:
        srv.stop()
    parser = _Dom()
    parser.feed(dom)
    svg = [a for t, a in parser.tags if t == "svg" and a.get("id") == "chart"]
    assert svg and svg[0].get("data-rendered") == "6", "the script did not draw the chart"
    points = [a for t, a in parser.tags if t == "circle" and a.get("class") == "point"]
    assert len(points) == 6 * 5
    by_epoch = {s["epoch"]: s for s in series}
    for p in points:
        s = by_epoch[int(p["data-epoch"])]
        v = int(p["data-value"])
        assert float(p["data-estimate"]) == s["estimate"][v]
        assert float(p["data-lower"]) == s["lower"][v] and float(p["data-upper"]) == s["upper"][v]
    assert len([a for t, a in parser.tags if t == "polygon" and a.get("class") == "interval"]) == 6
    counts = [int(a["data-n"]) for t, a in parser.tags if t == "td" and "data-n" in a]
    assert counts == [600] * 5
    text = re.sub(r"<[^>]+>", " ", dom)
    assert "3,000" in text and "ε∞ = 2" in text and "L-GRR" in text
    assert "Central privacy under shuffling" in text and 'data-figure="collection"' in dom
    latest = [
        float(a["data-estimate"]) for t, a in parser.tags if t == "td" and "data-estimate" in a
    ]
    assert latest == sorted(series[-1]["estimate"], reverse=True)
    # The screenshot shows the chart: pixels of the first series' colour (#1f77b4) are drawn.
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    blue = np.abs(img - np.array([0x1F, 0x77, 0xB4])).sum(axis=2) < 30
    assert blue.sum() > 50


@pytest.mark.slow
def test_serve_demo_script_runs(tmp_path):
    """`make serve-demo`'s script, shrunk: server, collection, devices, dashboard URL."""
    import os
    import sys

    from server_helpers import ROOT, free_port

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "serve_demo.py"),
            "--devices",
            "60",
            "--epochs",
            "2",
            "--exit",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    ).stdout
    assert "60 devices × 2 epochs" in out and "0 reports left in queues" in out
    assert re.search(
        r"dashboard: http://127\.0\.0\.1:\d+/collections/app-usage/dashboard\?token=ll_read_", out
    )
