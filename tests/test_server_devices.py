"""Collection server against adversarial clients, in process, on SQLite and on a real
PostgreSQL: device enrollment, credentials and quotas (D6), report ids scoped to their device,
the epoch window and the per-request epoch cap (D1), sizes refused at creation (D2), names
matched whole (D3), unknown collections and wrong tokens answered alike (D4), cohorts of
repeats and the precedence of the Authorization header over ?token= (D9), paged answers, the
export with device ids, and the migration of a version-2 database."""

from __future__ import annotations

import io
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

import longldp as ll
from longldp.server import Limits, build_app, db
from longldp.server.service import Service
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
OCTET = "application/octet-stream"


def client_for(url: str, **limits) -> TestClient:
    return TestClient(build_app(url, ADMIN, Limits(**limits) if limits else None))


def create(client: TestClient, name: str = "dev", spec: dict = SPEC, **extra) -> dict:
    r = client.post(
        "/v1/collections", json={"name": name, "protocol": spec, **extra}, headers=bearer(ADMIN)
    )
    assert r.status_code == 201, r.text
    return r.json()


def enroll(client: TestClient, name: str, token: str) -> dict:
    r = client.post(f"/v1/collections/{name}/devices", headers=bearer(token))
    assert r.status_code == 201, r.text
    return r.json()


def upload(client: TestClient, name: str, token: str, body: bytes):
    return client.post(
        f"/v1/collections/{name}/reports",
        content=body,
        headers={**bearer(token), "Content-Type": OCTET},
    )


def some_reports(n: int, seed: int):
    rng = np.random.default_rng(seed)
    reps = PROTO.perturb(rng.integers(0, PROTO.k, n), PROTO.new_memo(n), rng)
    return new_ids(n, rng), wire_reports(PROTO, reps)


def stored(client: TestClient, name: str) -> list[tuple]:
    service = client.app.state.service
    col = service.get_collection(name)
    r = db.reports
    with db.transaction(service.engine, write=False) as conn:
        return [
            tuple(row)
            for row in conn.execute(
                sa.select(r.c.device_id, r.c.report_id, r.c.epoch, r.c.wire)
                .where(r.c.collection_id == col.id)
                .order_by(r.c.device_id, r.c.report_id)
            )
        ]


def assert_counts_match_recount(client: TestClient, name: str) -> None:
    service = client.app.state.service
    col = service.get_collection(name)
    for row in service.epochs(col)["epochs"]:
        n, support = service.counts(col, row["epoch"])
        rn, rsupport = service.recount(col, row["epoch"])
        assert (n, support.tolist()) == (rn, rsupport.tolist())


def test_devices_enroll_and_every_report_is_bound_to_its_device(backend):
    client = client_for(backend)
    col = create(client)
    assert col["auth"] == "device" and col["reports_per_epoch"] == 1
    assert "ingest_token" not in col and col["enroll_token"].startswith("ll_enroll_")
    a, b = (enroll(client, "dev", col["enroll_token"]) for _ in range(2))
    assert a["device"] != b["device"] and a["credential"].startswith("ll_device_")
    assert enroll(client, "dev", ADMIN)["device"]  # the admin may enroll devices too
    # Who may enroll: the enrollment token and the admin, no one else.
    for token in (col["read_token"], a["credential"]):
        r = client.post("/v1/collections/dev/devices", headers=bearer(token))
        assert r.status_code == 403, r.text
    assert client.post("/v1/collections/dev/devices", headers=bearer("x" * 40)).status_code == 401
    # The enrollment token cannot upload; neither can the admin; a device can.
    ids, wires = some_reports(4, 1)
    one = records(ids[:1], [0], wires[:1])
    assert upload(client, "dev", col["enroll_token"], one).status_code == 403
    assert upload(client, "dev", ADMIN, one).status_code == 403
    assert upload(client, "dev", a["credential"], one).json()["new"] == 1
    # A credential is a device's own: another id or a changed secret is refused.
    forged = a["credential"].replace(f"_{a['device']}.", f"_{b['device']}.")
    assert upload(client, "dev", forged, one).status_code == 401
    assert upload(client, "dev", a["credential"][:-2] + "xx", one).status_code == 401
    # Credentials are stored hashed.
    service = client.app.state.service
    with db.transaction(service.engine, write=False) as conn:
        dump = repr(conn.execute(sa.select(db.devices)).all())
    assert a["credential"] not in dump and a["credential"].split(".")[1] not in dump
    # The device id is recorded with the report, and the shared-token collection refuses enrollment.
    assert [row[0] for row in stored(client, "dev")] == [a["device"]]
    shared = create(client, "shared", auth="shared")
    r = client.post("/v1/collections/shared/devices", headers=bearer(ADMIN))
    assert r.status_code == 409 and "shared" in r.json()["error"]
    assert upload(client, "shared", shared["ingest_token"], one).json()["new"] == 1
    assert [row[0] for row in stored(client, "shared")] == [db.SHARED_DEVICE]


def test_quota_per_device_and_epoch_and_replays_count_once(backend):
    client = client_for(backend)
    col = create(client)
    dev = enroll(client, "dev", col["enroll_token"])["credential"]
    ids, wires = some_reports(40, 2)
    assert upload(client, "dev", dev, records(ids[:1], [0], wires[:1])).json()["new"] == 1
    # The same bytes replayed under fresh ids, alone or in a batch: refused, nothing stored.
    for s in range(1, 30, 10):
        body = records(ids[s : s + 10], [0] * 10, [wires[0]] * 10)
        r = upload(client, "dev", dev, body)
        assert (r.status_code, r.json()["item"]) == (409, 0), r.text
        assert "quota" in r.json()["error"]
    # A batch over the quota is refused whole, naming the first report past it.
    r = upload(client, "dev", dev, records(ids[30:33], [1, 2, 1], wires[30:33]))
    assert (r.status_code, r.json()["item"]) == (409, 2)
    assert upload(client, "dev", dev, records(ids[30:32], [1, 2], wires[30:32])).json()["new"] == 2
    # A retry of stored reports is acknowledged and counted once; it spends no quota.
    r = upload(client, "dev", dev, records(ids[30:32], [1, 2], wires[30:32]))
    assert r.json() == {"received": 2, "new": 0, "duplicates": 2}
    rd = bearer(col["read_token"])
    listing = client.get("/v1/collections/dev/epochs", headers=rd).json()["epochs"]
    assert [(e["epoch"], e["n"]) for e in listing] == [(0, 1), (1, 1), (2, 1)]
    # 300 replays of one report among honest devices move nothing: each device counts once.
    other = create(client, "poll", reports_per_epoch=2)
    cred = enroll(client, "poll", other["enroll_token"])["credential"]
    ids2, wires2 = some_reports(3, 3)
    r = upload(client, "poll", cred, records(ids2, [5] * 3, [wires2[0]] * 3))
    assert (r.status_code, r.json()["item"]) == (409, 2)
    assert (
        upload(client, "poll", cred, records(ids2[:2], [5, 5], [wires2[0]] * 2)).status_code == 200
    )
    assert_counts_match_recount(client, "dev")
    assert_counts_match_recount(client, "poll")


def test_report_ids_are_scoped_to_their_device(backend):
    """D6: an attacker who posts a device's queued report id first, with other bytes, does not
    make that device's own upload fail: ids of different devices never collide."""
    client = client_for(backend)
    col = create(client)
    victim, attacker = (enroll(client, "dev", col["enroll_token"])["credential"] for _ in range(2))
    ids, wires = some_reports(20, 4)
    other = next(w for w in wires if w != wires[0])
    r = upload(client, "dev", attacker, records(ids[:1], [0], [other]))
    assert r.json()["new"] == 1
    r = upload(client, "dev", victim, records(ids[:1], [0], wires[:1]))
    assert r.json() == {"received": 1, "new": 1, "duplicates": 0}
    # Within one device, the same id with other bytes is still a conflict that changes nothing.
    before = stored(client, "dev")
    r = upload(client, "dev", victim, records(ids[:1], [0], [other]))
    assert r.status_code == 409
    assert stored(client, "dev") == before


def test_epoch_window_and_epochs_per_request_bound_the_fan_out(backend):
    """D1: one request cannot open thousands of epochs, and no report lands outside the
    window that the operator (or the wall clock) sets; a report cannot move it."""
    client = client_for(backend, max_epochs_per_request=4)
    col = create(client, auth="shared", epoch_window=3, open_from=10)
    tok = col["ingest_token"]
    ids, wires = some_reports(60, 5)
    # Many epochs in one request: 413, nothing stored (a client halves its batch on 413).
    r = upload(client, "dev", tok, records(ids[:40], list(range(40)), wires[:40]))
    assert r.status_code == 413 and "distinct epochs" in r.json()["error"]
    assert stored(client, "dev") == []
    assert col["open_epochs"] == [10, 12]
    assert upload(client, "dev", tok, records(ids[:2], [10, 11], wires[:2])).status_code == 200
    # Open: [10, 12]; earlier epochs never again (422), later ones when the operator opens
    # them (425), and the newest report moves nothing.
    for epoch, status in ((9, 422), (13, 425), (12, 200), (2**32 - 1, 425), (10, 200)):
        i = 2 + epoch % 40
        r = upload(client, "dev", tok, records(ids[i : i + 1], [epoch], wires[i : i + 1]))
        assert r.status_code == status, (epoch, r.text)
    info = client.get("/v1/collections/dev/epochs", headers=bearer(ADMIN)).json()
    assert info["open_epochs"] == [10, 12]
    # The operator moves the window.
    r = client.patch("/v1/collections/dev", json={"open_from": 12}, headers=bearer(ADMIN))
    assert r.status_code == 200 and r.json()["open_epochs"] == [12, 14], r.text
    info = client.get("/v1/collections/dev/epochs", headers=bearer(ADMIN)).json()
    assert [(e["epoch"], e["open"]) for e in info["epochs"]] == [
        (10, False),
        (11, False),
        (12, True),
    ]
    # With a wall clock the window trails the current epoch, plus one epoch of clock skew.
    clock = create(
        client,
        "clock",
        auth="shared",
        epoch_seconds=60.0,
        epoch_window=2,
        start_time=time.time() - 10 * 60 - 1,
    )
    cur = clock["current_epoch"]
    assert cur == 10
    cases = ((cur - 2, 422), (cur - 1, 200), (cur, 200), (cur + 1, 200), (cur + 2, 425))
    for epoch, status in cases:
        i = 50 + epoch % 10
        r = upload(
            client,
            "clock",
            clock["ingest_token"],
            records(ids[i : i + 1], [epoch], wires[i : i + 1]),
        )
        assert r.status_code == status, (epoch, r.text)
    # The window and the skew cannot exceed the open-epoch cap.
    r = client.post(
        "/v1/collections",
        json={"name": "wide", "protocol": SPEC, "epoch_window": 64},
        headers=bearer(ADMIN),
    )
    assert r.status_code == 422 and "epoch_window" in r.json()["error"]


@pytest.mark.parametrize(
    "spec",
    [
        {
            "name": "OLOLOHA",
            "params": {"k": 30, "eps_perm": 2.0, "eps_1": 1.0, "hash_pool": 1_000_000_000},
        },
        {
            "name": "OLOLOHA",
            "params": {"k": 2**20, "eps_perm": 2.0, "eps_1": 1.0, "hash_pool": 256},
        },
        {"name": "L-OSUE", "params": {"k": 2**21, "eps_perm": 2.0, "eps_1": 1.0}},
        {
            "name": "RAPPOR",
            "params": {"k": 256, "h": 2, "m": 65536, "f": 0.5, "p": 0.25, "q": 0.75},
        },
    ],
    ids=["pool-1e9", "pool-256-k2^20", "k-2^21", "rappor-65536-cohorts"],
)
def test_sizes_beyond_the_budget_are_refused_at_creation(spec, tmp_path):
    """D2: 4xx at creation, never a collection whose every ingest fails."""
    client = client_for(str(tmp_path / "size.db"))
    r = client.post(
        "/v1/collections", json={"name": "big", "protocol": spec}, headers=bearer(ADMIN)
    )
    assert r.status_code == 422, r.text
    assert "MiB" in r.json()["error"] or "at most" in r.json()["error"]
    assert client.get("/v1/collections", headers=bearer(ADMIN)).json() == []


def test_sizes_within_the_budget_ingest(tmp_path):
    """The other side of D2: what the budget admits works, including a pooled k = 2^16."""
    client = client_for(str(tmp_path / "ok.db"))
    spec = {
        "name": "OLOLOHA",
        "params": {"k": 2**16, "eps_perm": 2.0, "eps_1": 1.0, "hash_pool": 64},
    }
    col = create(client, "pool", spec, auth="shared")
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(6)
    reps = proto.perturb(rng.integers(0, proto.k, 50), proto.new_memo(50), rng)
    body = records(new_ids(50, rng), [0] * 50, wire_reports(proto, reps))
    assert upload(client, "pool", col["ingest_token"], body).json()["new"] == 50
    need = client.app.state.service.limits.footprint(proto)
    assert need.peak_bytes <= client.app.state.service.limits.max_collection_bytes
    assert_counts_match_recount(client, "pool")


def test_names_are_matched_whole(backend):
    """D3: a trailing newline is not part of a valid name, at creation or in a path."""
    client = client_for(backend)
    create(client, "plain")
    for bad in ("plain\n", "plain\r\n", "\nplain", "pla\nin", "plain ", "plain/x"):
        r = client.post(
            "/v1/collections", json={"name": bad, "protocol": SPEC}, headers=bearer(ADMIN)
        )
        assert r.status_code == 422, bad
    assert client.get("/v1/collections/plain%0A", headers=bearer(ADMIN)).status_code == 404
    names = [c["name"] for c in client.get("/v1/collections", headers=bearer(ADMIN)).json()]
    assert names == ["plain"]


def test_unknown_collections_and_wrong_tokens_get_the_same_answer(backend):
    """D4: the answers are identical byte for byte (the work is the same: one query, every
    comparison before any branch; see Service.authenticate)."""
    client = client_for(backend)
    col = create(client, "known")
    dev = enroll(client, "known", col["enroll_token"])["credential"]
    wrong = [
        "ll_read_" + "A" * 43,
        col["read_token"][:-1] + "B",
        dev.replace(".", ".x", 1),
        "ll_device_99999.xyz",
    ]
    paths = [
        "/v1/collections/{}",
        "/v1/collections/{}/epochs",
        "/v1/collections/{}/series",
        "/v1/collections/{}/epochs/0/estimate",
        "/collections/{}/dashboard",
    ]
    for path in paths:
        for token in wrong:
            known = client.get(path.format("known"), headers=bearer(token))
            missing = client.get(path.format("unknown-name"), headers=bearer(token))
            assert known.status_code == missing.status_code == 401
            assert known.content == missing.content
            assert dict(known.headers) == dict(missing.headers)
        # A valid token of another collection is just a wrong token here.
        a = client.get(path.format("unknown-name"), headers=bearer(col["read_token"]))
        assert a.status_code == 401 and a.content == known.content
    ids, wires = some_reports(1, 7)
    body = records(ids, [0], wires)
    assert (
        upload(client, "known", "ll_device_1.nope", body).content
        == upload(client, "nope", "ll_device_1.nope", body).content
    )


def test_bearer_header_wins_over_query_token(backend):
    """D9: ?token= is read only when there is no Authorization header."""
    client = client_for(backend)
    col = create(client, "dash")
    rd = col["read_token"]
    url = "/collections/dash/dashboard"
    assert client.get(url, headers=bearer(rd)).status_code == 200
    assert client.get(f"{url}?token={rd}").status_code == 200
    # A wrong ?token= does not override a valid header; a valid one does not rescue a bad one.
    assert client.get(f"{url}?token=wrong-token-value", headers=bearer(rd)).status_code == 200
    assert client.get(f"{url}?token={rd}", headers=bearer("wrong-token-value")).status_code == 401
    assert (
        client.get(f"{url}?token={rd}", headers={"Authorization": "Basic eDp5"}).status_code == 401
    )


def test_answers_are_paged_and_say_so(tmp_path):
    """Series, estimates, epochs and the dashboard are bounded and state what they hold."""
    client = client_for(str(tmp_path / "page.db"), max_answer_values=100)
    spec = {"name": "L-GRR", "params": {"k": 40, "eps_perm": 2.0, "eps_1": 1.0}}
    col = create(client, "big", spec, auth="shared", epoch_window=10)
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(8)
    for e in range(6):
        reps = proto.perturb(rng.integers(0, 40, 30), proto.new_memo(30), rng)
        body = records(new_ids(30, rng), [e] * 30, wire_reports(proto, reps))
        assert upload(client, "big", col["ingest_token"], body).status_code == 200
    rd = bearer(col["read_token"])
    est = client.get("/v1/collections/big/epochs/2/estimate", headers=rd).json()
    assert est["values"] == {"offset": 0, "count": 40, "total": 40, "truncated": False}
    part = client.get("/v1/collections/big/epochs/2/estimate?offset=30&count=50", headers=rd).json()
    assert part["values"] == {"offset": 30, "count": 10, "total": 40, "truncated": True}
    assert part["estimate"] == est["estimate"][30:] and part["se"] == est["se"][30:]
    r = client.get("/v1/collections/big/epochs/2/estimate?offset=40", headers=rd)
    assert r.status_code == 422
    # 100 values per answer, 40 per epoch: two epochs a page; next_start walks the rest.
    seen, start = [], 0
    while start is not None:
        page = client.get(f"/v1/collections/big/series?start={start}", headers=rd).json()
        assert len(page["epochs"]) <= 2 and page["limit"] == 2
        seen += [e["epoch"] for e in page["epochs"]]
        start = page["next_start"]
    assert seen == list(range(6))
    narrow = client.get("/v1/collections/big/series?count=10&limit=3", headers=rd).json()
    assert [e["epoch"] for e in narrow["epochs"]] == [0, 1, 2] and narrow["next_start"] == 3
    assert narrow["epochs"][2]["estimate"] == est["estimate"][:10]
    listing = client.get("/v1/collections/big/epochs?limit=4", headers=rd).json()
    assert [e["epoch"] for e in listing["epochs"]] == [0, 1, 2, 3] and listing["next_start"] == 4
    # The dashboard computes at most 20 × 100 / 40 = 50 epochs: all 6 here.
    page = client.get("/collections/big/dashboard", headers=rd).text
    assert 'data-shown="6"' in page and "The page shows the latest" not in page


def test_dashboard_caps_the_epochs_it_shows(tmp_path):
    client = client_for(str(tmp_path / "cap.db"), max_answer_values=100)
    spec = {"name": "L-GRR", "params": {"k": 1000, "eps_perm": 2.0, "eps_1": 1.0}}
    col = create(client, "wide", spec, auth="shared", epoch_window=10)
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(9)
    for e in range(4):
        reps = proto.perturb(rng.integers(0, 1000, 5), proto.new_memo(5), rng)
        body = records(new_ids(5, rng), [e] * 5, wire_reports(proto, reps))
        assert upload(client, "wide", col["ingest_token"], body).status_code == 200
    page = client.get("/collections/wide/dashboard", headers=bearer(col["read_token"])).text
    # 20 × 100 / 1000 = 2 epochs computed: the latest two, and the page says so.
    assert 'data-shown="2"' in page and "The page shows the latest 2 of them" in page
    assert '<span id="n-epochs">4</span>' in page


def test_export_with_device_ids_is_for_the_admin(backend):
    client = client_for(backend)
    col = create(client)
    creds = [enroll(client, "dev", col["enroll_token"]) for _ in range(3)]
    ids, wires = some_reports(3, 10)
    for c, rid, w in zip(creds, ids, wires, strict=True):
        assert upload(client, "dev", c["credential"], records([rid], [0], [w])).status_code == 200
    url = "/v1/collections/dev/epochs/0/reports.parquet"
    plain = pq.read_table(io.BytesIO(client.get(url, headers=bearer(col["read_token"])).content))
    assert "device" not in plain.column_names and plain.num_rows == 3
    assert client.get(url + "?devices=true", headers=bearer(col["read_token"])).status_code == 403
    table = pq.read_table(
        io.BytesIO(client.get(url + "?devices=true", headers=bearer(ADMIN)).content)
    )
    by_device = dict(
        zip(table.column("device").to_pylist(), table.column("report_id").to_pylist(), strict=True)
    )
    assert by_device == {c["device"]: rid for c, rid in zip(creds, ids, strict=True)}
    service: Service = client.app.state.service
    history = service.device_history(service.get_collection("dev"), creds[1]["device"])
    assert [(h["epoch"], h["id"], h["report"]) for h in history] == [(0, ids[1], wires[1])]


def test_a_version_2_database_keeps_working(backend):
    """Migration 3 keeps every report (as the shared token's), and the old tokens work."""
    engine = db.make_engine(backend)
    assert db.migrate(engine, target=2) == 2
    ids, wires = some_reports(5, 11)
    from longldp.server import tokens

    ingest, read = tokens.new_token("ingest"), tokens.new_token("read")
    zeros = np.zeros(PROTO.support_shape, "<i8")
    support = np.asarray(PROTO.support_counts(PROTO.decode_reports(wires)), "<i8")
    with db.transaction(engine, write=True) as conn:
        conn.execute(
            sa.text(
                "INSERT INTO collections (name, protocol_spec, protocol_id, fingerprint, "
                "first_epoch, description, ingest_token_hash, read_token_hash, created_at) "
                "VALUES ('old', :spec, :pid, :fp, 0, '', :ih, :rh, 0)"
            ),
            {
                "spec": __import__("json").dumps(PROTO.spec(), sort_keys=True),
                "pid": PROTO.wire_id,
                "fp": PROTO.fingerprint(),
                "ih": tokens.digest(ingest),
                "rh": tokens.digest(read),
            },
        )
        for rid, w in zip(ids, wires, strict=True):
            conn.execute(
                sa.text(
                    "INSERT INTO reports (collection_id, report_id, epoch, cohort, wire) "
                    "VALUES (1, :rid, 3, NULL, :w)"
                ),
                {"rid": rid, "w": w},
            )
        conn.execute(
            sa.text(
                "INSERT INTO epoch_counts (collection_id, epoch, n, support, closed) "
                "VALUES (1, 3, 5, :s, :c)"
            ),
            {"s": support.tobytes(), "c": False},
        )
    del zeros
    engine.dispose()
    client = client_for(backend)
    info = client.get("/v1/collections/old", headers=bearer(read)).json()
    assert info["auth"] == "shared" and info["epoch_window"] == db.LEGACY_EPOCH_WINDOW
    assert [row[0] for row in stored(client, "old")] == [db.SHARED_DEVICE] * 5
    # The old ingest token still uploads; old ids are still recognized as duplicates.
    more_ids, more = some_reports(2, 12)
    r = upload(client, "old", ingest, records(ids[:1] + more_ids, [3, 3, 4], wires[:1] + more))
    assert r.json() == {"received": 3, "new": 2, "duplicates": 1}
    assert_counts_match_recount(client, "old")
