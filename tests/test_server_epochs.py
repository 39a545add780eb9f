"""Epoch windows no device can move (issue 32, items 1 and 2), in process on SQLite and
PostgreSQL.

On main before this change, in a collection without a wall clock the open epochs were those
within W of the newest epoch with reports: one enrolled device's report for epoch 2³²−1
moved the window for good (every honest report after it got 422), and a device that sent
W new epochs per request marched the window forward, creating a count row of k × 8 bytes per
epoch without limit (test_marching: 8 epochs a request, 30 requests, 240 count rows and
reports stored where now there are W). Now the operator opens epochs (``open_from``) or the
wall clock does; a report for a later epoch is refused with 425 and kept by its device.
"""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa
from fastapi.testclient import TestClient

import longldp as ll
from longldp.server import Limits, build_app, db
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

SPEC = {"name": "L-OSUE", "params": {"k": 4096, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol_from_spec(SPEC)
OCTET = "application/octet-stream"


def setup(url: str, **extra) -> tuple[TestClient, dict, list[str]]:
    client = TestClient(build_app(url, ADMIN, Limits(max_epochs_per_request=8)))
    r = client.post(
        "/v1/collections",
        json={"name": "w", "protocol": SPEC, "reports_per_epoch": 8, **extra},
        headers=bearer(ADMIN),
    )
    assert r.status_code == 201, r.text
    col = r.json()
    devices = []
    for _ in range(2):
        r = client.post("/v1/collections/w/devices", headers=bearer(col["enroll_token"]))
        assert r.status_code == 201, r.text
        devices.append(r.json()["credential"])
    return client, col, devices


def batch(epochs: list[int], seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    n = len(epochs)
    reps = PROTO.perturb(rng.integers(0, PROTO.k, n), PROTO.new_memo(n), rng)
    return records(new_ids(n, rng), epochs, wire_reports(PROTO, reps))


def upload(client: TestClient, token: str, body: bytes):
    return client.post(
        "/v1/collections/w/reports",
        content=body,
        headers={**bearer(token), "Content-Type": OCTET},
    )


def count_rows(client: TestClient) -> tuple[int, int, int]:
    """(count rows, their support bytes, stored reports) of collection "w"."""
    service = client.app.state.service
    cid = service.get_collection("w").id
    ec, r = db.epoch_counts, db.reports
    with db.transaction(service.engine, write=False) as conn:
        rows, size = conn.execute(
            sa.select(
                sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.length(ec.c.support)), 0)
            ).where(ec.c.collection_id == cid)
        ).one()
        reports = conn.execute(
            sa.select(sa.func.count()).where(r.c.collection_id == cid)
        ).scalar_one()
    return int(rows), int(size), int(reports)


def test_one_device_cannot_lock_the_window_out(backend):
    """Item 1: a report for epoch 2³²−1 is refused (425: not open yet; nothing stored), and
    the honest devices' next reports are accepted as before (main: 200, then 422 for every
    honest report)."""
    client, _, (attacker, honest) = setup(backend)
    attack = upload(client, attacker, batch([2**32 - 1], 1))
    for epoch in range(3):
        r = upload(client, honest, batch([epoch], 2 + epoch))
        assert r.status_code == 200 and r.json()["new"] == 1, r.text
    assert attack.status_code == 425 and attack.json()["item"] == 0, attack.text
    assert int(attack.headers["retry-after"]) > 0
    info = client.get("/v1/collections/w/epochs", headers=bearer(ADMIN)).json()
    assert info["open_epochs"] == [0, 7]
    assert [e["epoch"] for e in info["epochs"]] == [0, 1, 2]


def test_marching_the_window_cannot_grow_storage(backend):
    """Item 2: one device sends 8 new epochs a request, 30 requests, marching upward (main:
    all 30 accepted, 240 count rows). Only the W open epochs ever get count rows: storage
    stays within W × (support + quota × report) whatever the device sends; the operator's move
    opens the next W."""
    window = 8
    client, _, (marcher, _) = setup(backend)
    statuses = []
    for step in range(30):
        epochs = list(range(8 * step, 8 * step + 8))
        statuses.append(upload(client, marcher, batch(epochs, 100 + step)).status_code)
    rows, size, reports = count_rows(client)
    support = 8 * int(np.prod(PROTO.support_shape))
    shards = client.app.state.service.get_collection("w").count_shards
    assert rows <= window and size <= window * support, (rows, size)
    assert reports == window  # the first request, epochs 0-7, one report each
    # Beyond the window every request is refused whole (425: later), nothing stored.
    assert statuses == [200] + [425] * 29
    # Within the window, what the quota allows is stored, and nothing more.
    for epoch in range(window):
        assert upload(client, marcher, batch([epoch] * 7, 200 + epoch)).status_code == 200
    assert upload(client, marcher, batch([0], 300)).status_code == 409  # quota spent
    rows, size, reports = count_rows(client)
    assert rows <= window * shards and size <= window * shards * support
    assert reports == window * 8
    # The operator moves the window: the next W epochs open, the old ones close to new reports.
    r = client.patch("/v1/collections/w", json={"open_from": window}, headers=bearer(ADMIN))
    assert r.json()["open_epochs"] == [window, 2 * window - 1]
    assert upload(client, marcher, batch([window], 400)).status_code == 200
    assert upload(client, marcher, batch([0], 401)).status_code == 422


def test_only_the_operator_moves_the_window(backend):
    client, col, (device, _) = setup(backend)
    for token in (col["read_token"], col["enroll_token"], device):
        r = client.patch("/v1/collections/w", json={"open_from": 5}, headers=bearer(token))
        assert r.status_code == 403, r.text
    for body in ({"open_from": -1}, {"epoch_window": 3}, {}, {"open_from": "5"}):
        r = client.patch("/v1/collections/w", json=body, headers=bearer(ADMIN))
        assert r.status_code == 422, (body, r.text)
    clock = client.post(
        "/v1/collections",
        json={"name": "clock", "protocol": SPEC, "epoch_seconds": 60.0},
        headers=bearer(ADMIN),
    )
    assert clock.status_code == 201
    r = client.patch("/v1/collections/clock", json={"open_from": 5}, headers=bearer(ADMIN))
    assert r.status_code == 422 and "wall clock" in r.json()["error"]
