"""Collection server, in process (FastAPI's test client), on SQLite and on a real PostgreSQL:
migrations, the token matrix, idempotent ingest, all-or-nothing batches, limits, estimates equal
to ``proto.estimate`` exactly, series and Parquet export."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

import longldp as ll
from longldp.archive import aggregate_archive
from longldp.server import Limits, build_app, db
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

PROTO_SPEC = {"name": "L-OSUE", "params": {"k": 12, "eps_perm": 2.0, "eps_1": 0.8}}


def make_client(url: str, **limits) -> TestClient:
    return TestClient(build_app(url, ADMIN, Limits(**limits) if limits else None))


def create(client: TestClient, name: str = "c1", spec: dict = PROTO_SPEC, **extra) -> dict:
    """A collection; shared-token ingest unless ``auth`` says otherwise (device identities
    have their own tests in tests/test_server_devices.py)."""
    body = {"name": name, "protocol": spec, "auth": "shared", **extra}
    r = client.post("/v1/collections", json=body, headers=bearer(ADMIN))
    assert r.status_code == 201, r.text
    return r.json()


def population(spec: dict, n: int, seed: int):
    proto = ll.protocol(spec["name"], **spec["params"])
    rng = np.random.default_rng(seed)
    memo = proto.new_memo(n)
    values = np.minimum(rng.geometric(0.3, n) - 1, proto.k - 1)
    return proto, proto.perturb(values, memo, rng), rng


def post(client, name, token, data, kind="application/octet-stream"):
    return client.post(
        f"/v1/collections/{name}/reports",
        content=data,
        headers={**bearer(token), "Content-Type": kind},
    )


def test_migrations_are_versioned(tmp_path):
    url = str(tmp_path / "m.db")
    engine = db.make_engine(url)
    assert db.migrate(engine, target=1) == 1
    with engine.connect() as conn:
        assert db.schema_version(conn) == 1
        assert not any(
            i["name"] == "ix_reports_epoch" for i in sa.inspect(conn).get_indexes("reports")
        )
    assert db.migrate(engine) == db.SCHEMA_VERSION == 4
    assert db.migrate(engine) == 4  # idempotent
    with engine.connect() as conn:
        assert any(i["name"] == "ix_reports_epoch" for i in sa.inspect(conn).get_indexes("reports"))
    with db.transaction(engine, write=True) as conn:
        conn.execute(db.schema_migrations.insert().values(version=99, applied_at=0.0))
    with pytest.raises(ValueError, match="schema version 99"):
        db.migrate(engine)


def test_token_matrix(backend):
    client = make_client(backend)
    a, b = create(client, "alpha"), create(client, "beta")
    proto, reps, rng = population(PROTO_SPEC, 20, 1)
    batch = records(new_ids(20, rng), [0] * 20, wire_reports(proto, reps))
    assert post(client, "alpha", a["ingest_token"], batch).status_code == 200
    ing = "/v1/collections/alpha/reports"
    reads = [
        "/v1/collections/alpha",
        "/v1/collections/alpha/epochs",
        "/v1/collections/alpha/epochs/0/estimate",
        "/v1/collections/alpha/series",
        "/v1/collections/alpha/epochs/0/reports.parquet",
        "/collections/alpha/dashboard",
    ]
    wrong = [
        "",
        "Bearer",
        "Bearer nope",
        "Basic " + base64.b64encode(b"x:y").decode(),
        f"Bearer {b['read_token']}",
        f"Bearer {b['ingest_token']}",
        f"Bearer {ADMIN}x",
    ]
    for auth in wrong:
        h = {"Authorization": auth} if auth else {}
        for path in reads:
            assert client.get(path, headers=h).status_code in (401, 403), (auth, path)
        r = client.post(
            ing, content=batch, headers={**h, "Content-Type": "application/octet-stream"}
        )
        assert r.status_code in (401, 403), auth
        assert client.get("/v1/collections", headers=h).status_code in (401, 403)
        r = client.post("/v1/collections", json={"name": "x", "protocol": PROTO_SPEC}, headers=h)
        assert r.status_code in (401, 403)
        assert client.post("/v1/collections/alpha/epochs/0/close", headers=h).status_code in (
            401,
            403,
        )
    # A read token cannot write; an ingest token cannot read estimates or administer.
    assert post(client, "alpha", a["read_token"], batch).status_code == 403
    for path in reads[1:5]:
        assert client.get(path, headers=bearer(a["ingest_token"])).status_code == 403
    for tok in (a["read_token"], a["ingest_token"]):
        assert client.get("/v1/collections", headers=bearer(tok)).status_code == 403
        assert (
            client.post("/v1/collections/alpha/epochs/0/close", headers=bearer(tok)).status_code
            == 403
        )
    # The right tokens work; the dashboard takes ?token=; an unknown collection is 401 unless admin.
    for path in reads:
        assert client.get(path, headers=bearer(a["read_token"])).status_code == 200, path
    assert client.get(f"/collections/alpha/dashboard?token={a['read_token']}").status_code == 200
    assert client.get("/v1/collections/zeta", headers=bearer(a["read_token"])).status_code == 401
    assert client.get("/v1/collections/zeta", headers=bearer(ADMIN)).status_code == 404
    # Tokens are stored hashed only.
    with db.transaction(client.app.state.service.engine, write=False) as conn:
        dump = repr(conn.execute(sa.select(db.collections)).all())
    assert a["read_token"] not in dump and a["ingest_token"] not in dump


@pytest.mark.slow
def test_ingest_is_idempotent_and_estimates_are_exact(backend, tmp_path):
    client = make_client(backend)
    col = create(client, postprocess="norm-sub")
    tok, rd = col["ingest_token"], col["read_token"]
    proto, reps, rng = population(PROTO_SPEC, 3000, 7)
    wires = wire_reports(proto, reps)
    ids = new_ids(3000, rng)
    epochs = np.repeat([0, 1, 2], 1000)
    # Epoch 0 in binary batches, epoch 1 as JSON (with cohorts), epoch 2 one report at a time.
    for s in range(0, 1000, 250):
        r = post(
            client, "c1", tok, records(ids[s : s + 250], epochs[s : s + 250], wires[s : s + 250])
        )
        assert r.json() == {"received": 250, "new": 250, "duplicates": 0}
    items = [
        {
            "id": ids[i].hex(),
            "epoch": 1,
            "report": base64.b64encode(wires[i]).decode(),
            "cohort": i % 4,
        }
        for i in range(1000, 2000)
    ]
    r = post(client, "c1", tok, json.dumps({"reports": items}), "application/json")
    assert r.status_code == 200 and r.json()["new"] == 1000
    for i in range(2000, 2100):
        assert post(client, "c1", tok, records([ids[i]], [2], [wires[i]])).json()["new"] == 1
    r = post(client, "c1", tok, records(ids[2100:], epochs[2100:], wires[2100:]))
    assert r.json()["new"] == 900
    # Retries, overlapping batches and in-batch repeats are acknowledged and counted once.
    again = records(
        ids[800:1000] + ids[2050:2100] + ids[800:850],
        list(epochs[800:1000]) + [2] * 50 + [0] * 50,
        wires[800:1000] + wires[2050:2100] + wires[800:850],
    )
    assert post(client, "c1", tok, again).json() == {"received": 300, "new": 0, "duplicates": 300}
    r = post(client, "c1", tok, json.dumps({"reports": items[:10]}), "application/json")
    assert r.json()["duplicates"] == 10
    # D9: a repeat is the same report only with the same cohort (an absent one included).
    recohort = [{**items[3], "cohort": (items[3]["cohort"] + 1) % 4}]
    r = post(client, "c1", tok, json.dumps({"reports": recohort}), "application/json")
    assert (r.status_code, r.json()["item"]) == (409, 0), r.text
    r = post(client, "c1", tok, records([ids[1003]], [1], [wires[1003]]))
    assert (r.status_code, r.json()["item"]) == (409, 0), r.text
    twice = [items[5], {**items[5], "cohort": (items[5]["cohort"] + 1) % 4}]
    r = post(client, "c1", tok, json.dumps({"reports": twice}), "application/json")
    assert (r.status_code, r.json()["item"]) == (409, 1), r.text
    service = client.app.state.service
    c = service.get_collection("c1")
    for e in range(3):
        sel = slice(1000 * e, 1000 * (e + 1))
        agg = proto.aggregator()
        agg.add(reps[sel])
        n, support = service.counts(c, e)
        assert (n, support.tolist()) == (1000, agg.support_counts.tolist())
        rn, rsupport = service.recount(c, e)
        assert (rn, rsupport.tolist()) == (n, support.tolist())
        raw = client.get(
            f"/v1/collections/c1/epochs/{e}/estimate?postprocess=none", headers=bearer(rd)
        ).json()
        assert (
            raw["estimate"]
            == agg.estimate().tolist()
            == proto.estimate(agg.support_counts, 1000).tolist()
        )
        assert raw["n"] == 1000 and raw["postprocess"] is None
        se = np.sqrt(proto.variance(1000, np.clip(agg.estimate(), 0, 1)))
        assert raw["se"] == se.tolist()
        assert np.allclose(raw["lower"], agg.estimate() - 1.959963984540054 * se)
        default = client.get(f"/v1/collections/c1/epochs/{e}/estimate", headers=bearer(rd)).json()
        assert default["postprocess"] == "norm-sub"
        assert default["estimate"] == agg.estimate("norm-sub").tolist()
        bp = client.get(
            f"/v1/collections/c1/epochs/{e}/estimate?postprocess=Base_Pos", headers=bearer(rd)
        ).json()
        assert bp["estimate"] == agg.estimate("base-pos").tolist()
        # IBU needs a GRR-type channel: refused with a 422 naming the reason, not a 500.
        r = client.get(
            f"/v1/collections/c1/epochs/{e}/estimate?postprocess=ibu", headers=bearer(rd)
        )
        assert r.status_code == 422 and "GRR-type" in r.json()["error"]
        # The Parquet export holds exactly the epoch's reports, header included.
        blob = client.get(
            f"/v1/collections/c1/epochs/{e}/reports.parquet", headers=bearer(rd)
        ).content
        table = pq.read_table(io.BytesIO(blob))
        assert table.column_names == ["epoch", "cohort", "report_id", "report"]
        assert sorted(table.column("report_id").to_pylist()) == sorted(ids[sel])
        assert set(table.column("epoch").to_pylist()) == {e}
        agg2 = proto.aggregator()
        agg2.add(proto.decode_reports(table.column("report").to_pylist()))
        assert agg2.support_counts.tolist() == agg.support_counts.tolist()
        meta = json.loads(table.schema.metadata[b"longldp.archive"])
        assert meta["protocol"] == col["protocol"] and meta["collection"] == "c1"
        exported = tmp_path / f"epoch-{e}.parquet"  # the export is an archive: aggregate it
        exported.write_bytes(blob)
        archived = aggregate_archive(exported).by_epoch[e]
        assert archived.n == 1000
        assert archived.support_counts.tolist() == agg.support_counts.tolist()
        cohorts = table.column("cohort").to_pylist()
        assert (cohorts.count(None) == 1000) == (e != 1)
    series = client.get("/v1/collections/c1/series?postprocess=none", headers=bearer(rd)).json()
    assert [s["epoch"] for s in series["epochs"]] == [0, 1, 2]
    assert series["epochs"][1]["estimate"] == proto.estimate(service.counts(c, 1)[1], 1000).tolist()
    part = client.get("/v1/collections/c1/series?start=1&stop=1", headers=bearer(rd)).json()
    assert [s["epoch"] for s in part["epochs"]] == [1]
    listing = client.get("/v1/collections/c1/epochs", headers=bearer(rd)).json()
    assert listing["epochs"] == [
        {"epoch": e, "n": 1000, "closed": False, "open": True} for e in range(3)
    ]
    assert listing["next_start"] is None
    assert client.get("/v1/collections/c1/epochs/7/estimate", headers=bearer(rd)).status_code == 404


def _state(service, name):
    c = service.get_collection(name)
    with db.transaction(service.engine, write=False) as conn:
        n_reports = conn.execute(sa.select(sa.func.count()).select_from(db.reports)).scalar()
    return n_reports, service.epochs(c)


def test_a_bad_item_rejects_its_whole_batch(backend):
    client = make_client(backend, max_batch=300, max_body_bytes=64 * 1024)
    col = create(client, first_epoch=1, last_epoch=5)
    other = create(
        client, "other", {"name": "L-OSUE", "params": {"k": 12, "eps_perm": 2.0, "eps_1": 0.9}}
    )
    tok = col["ingest_token"]
    proto, reps, rng = population(PROTO_SPEC, 60, 3)
    wires = wire_reports(proto, reps)
    ids = new_ids(60, rng)
    good = records(ids[:50], [1] * 50, wires[:50])
    assert post(client, "c1", tok, good).status_code == 200
    service = client.app.state.service
    before = _state(service, "c1")
    w = bytearray(wires[55])
    fresh = ids[50:60]

    def batch_with(bad: bytes, epoch: int = 2, rid: bytes | None = None) -> bytes:
        head = records(fresh[:5], [2] * 5, wires[50:55])
        return (
            head
            + (rid or fresh[5])
            + epoch.to_bytes(4, "big")
            + bad
            + records(fresh[6:8], [2] * 2, wires[56:58])
        )

    other_proto = ll.protocol("L-OSUE", k=12, eps_perm=2.0, eps_1=0.9)
    other_wire = wire_reports(other_proto, reps[:1])[0]
    cases = {
        "magic": b"XX" + bytes(w[2:]),
        "version": bytes(w[:2]) + b"\x09" + bytes(w[3:]),
        "protocol id": bytes(w[:3]) + bytes([(w[3] % 200) + 1]) + bytes(w[4:]),
        "fingerprint": other_wire,
    }
    for why, bad in cases.items():
        r = post(client, "c1", tok, batch_with(bad))
        assert r.status_code == 422, (why, r.text)
        assert r.json()["item"] == 5, (why, r.json())
    # Records have a fixed width, so a short one can only be seen at the end of the batch.
    short = (
        records(fresh[:5], [2] * 5, wires[50:55])
        + fresh[5]
        + (2).to_bytes(4, "big")
        + bytes(w[:-1])
    )
    r = post(client, "c1", tok, short)
    assert (r.status_code, r.json()["item"]) == (422, 5) and "truncated" in r.json()["error"]
    # Out-of-range epochs, a reused id with other content, a closed epoch.
    r = post(client, "c1", tok, batch_with(bytes(w), epoch=9))
    assert (r.status_code, r.json()["item"]) == (422, 5)
    r = post(client, "c1", tok, batch_with(bytes(w), rid=ids[0]))
    assert (r.status_code, r.json()["item"]) == (409, 5)
    assert (
        client.post("/v1/collections/c1/epochs/3/close", headers=bearer(ADMIN)).status_code == 200
    )
    r = post(client, "c1", tok, batch_with(bytes(w), epoch=3))
    assert (r.status_code, r.json()["item"]) == (409, 5)
    # JSON items: bad id, bad base64, wrong length, wrong types.
    item = {"id": fresh[0].hex(), "epoch": 2, "report": base64.b64encode(wires[50]).decode()}
    for bad_item in (
        {**item, "id": "zz"},
        {**item, "report": "%%%"},
        {**item, "report": "AAAA"},
        {**item, "epoch": -1},
        {**item, "epoch": True},
        {**item, "extra": 1},
        [1],
    ):
        body = json.dumps({"reports": [item, bad_item]})
        r = post(client, "c1", tok, body, "application/json")
        assert (r.status_code, r.json().get("item")) == (422, 1), bad_item
    for junk in (b"{", b"[]", b'{"reports": []}', b'{"reports": 5}', b"null", b"\xff"):
        assert post(client, "c1", tok, junk, "application/json").status_code == 422
    assert post(client, "c1", tok, b"", "application/octet-stream").status_code == 422
    assert post(client, "c1", tok, good, "text/plain").status_code == 415
    # Bounds: batch length and body size.
    many = records(new_ids(301, rng), [2] * 301, [wires[0]] * 301)
    assert post(client, "c1", tok, many).status_code == 413
    assert post(client, "c1", tok, b"\0" * (64 * 1024 + 1)).status_code == 413
    # Nothing of any rejected batch was stored; the other collection is untouched.
    assert _state(service, "c1")[0] == before[0]
    assert [e for e in _state(service, "c1")[1]["epochs"] if e["n"]] == [
        e for e in before[1]["epochs"] if e["n"]
    ]
    assert service.epochs(service.get_collection("other"))["epochs"] == []
    assert other["fingerprint"] != col["fingerprint"]


def test_collection_creation_is_validated(backend):
    client = make_client(backend)
    h = bearer(ADMIN)
    bad = [
        {"name": "bad name", "protocol": PROTO_SPEC},
        {"name": "x", "protocol": {"name": "nope", "params": {}}},
        {
            "name": "x",
            "protocol": {"name": "L-GRR", "params": {"k": 1, "eps_perm": 1, "eps_1": 0.5}},
        },
        {"name": "x", "protocol": {"name": "L-GRR", "params": {"k": 5, "eps_perm": 1, "eps_1": 2}}},
        {"name": "x", "protocol": PROTO_SPEC, "postprocess": "magic"},
        {"name": "x", "protocol": PROTO_SPEC, "first_epoch": 5, "last_epoch": 2},
        {"name": "x", "protocol": PROTO_SPEC, "start_time": 3.0},
        {"name": "x", "protocol": PROTO_SPEC, "surprise": 1},
        {"name": "x", "protocol": {"name": "OUE", "params": {"k": 10**9, "eps": 1.0}}},
    ]
    for body in bad:
        r = client.post("/v1/collections", json=body, headers=h)
        assert r.status_code == 422, body
        assert isinstance(r.json()["error"], str)
    create(client, "x")
    assert (
        client.post(
            "/v1/collections", json={"name": "x", "protocol": PROTO_SPEC}, headers=h
        ).status_code
        == 409
    )
    listed = client.get("/v1/collections", headers=h).json()
    assert [c["name"] for c in listed] == ["x"]
    assert "ingest_token" not in listed[0]
    assert "ε∞ = 2" in listed[0]["privacy"]["words"]


def test_wall_clock_epochs_refuse_the_future_beyond_the_skew(backend):
    """The current epoch and the one after it (a clock running ahead by up to one epoch, the
    default skew) are open; a later one is refused with 425 and the seconds until it opens; a
    past one beyond the window with 422 (for good)."""
    import time

    client = make_client(backend)
    col = create(
        client, epoch_seconds=3600.0, start_time=time.time() - 2.5 * 3600, epoch_window=2
    )
    assert col["current_epoch"] == 2 and col["open_epochs"] == [1, 3]
    proto, reps, rng = population(PROTO_SPEC, 6, 5)
    wires = wire_reports(proto, reps)
    ok = post(client, "c1", col["ingest_token"], records(new_ids(3, rng), [1, 2, 3], wires[:3]))
    assert ok.status_code == 200
    r = post(client, "c1", col["ingest_token"], records(new_ids(2, rng), [2, 4], wires[3:5]))
    assert (r.status_code, r.json()["item"]) == (425, 1)
    assert 1700 <= int(r.headers["retry-after"]) <= 1800  # epoch 4 opens in half an hour
    r = post(client, "c1", col["ingest_token"], records(new_ids(1, rng), [0], wires[5:]))
    assert (r.status_code, r.json()["item"]) == (422, 0)


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "L-GRR", "params": {"k": 9, "eps_perm": 1.5, "eps_1": 0.6}},
        {"name": "OLOLOHA", "params": {"k": 30, "eps_perm": 2.0, "eps_1": 1.0}},
        {"name": "dBitFlipPM", "params": {"k": 16, "eps_perm": 2.0, "b": 8, "d": 2}},
        {"name": "OUE", "params": {"k": 20, "eps": 1.0}},
    ],
    ids=lambda s: s["name"],
)
def test_estimates_equal_proto_estimate_for_each_family(spec, tmp_path):
    client = make_client(str(tmp_path / "f.db"))
    col = create(client, spec=spec)
    proto, reps, rng = population(spec, 400, 11)
    assert (
        post(
            client,
            "c1",
            col["ingest_token"],
            records(new_ids(400, rng), [4] * 400, wire_reports(proto, reps)),
        ).status_code
        == 200
    )
    agg = proto.aggregator()
    agg.add(reps)
    got = client.get(
        "/v1/collections/c1/epochs/4/estimate", headers=bearer(col["read_token"])
    ).json()
    assert got["estimate"] == agg.estimate().tolist()
    assert len(got["se"]) == len(got["estimate"]) == proto.estimate_size


def test_rappor_bloom_collection_estimates_series_and_dashboard(tmp_path):
    """Regression: a Bloom-filter RAPPOR collection accepted reports, then answered 500 for its
    estimate, series and dashboard (its (m, k) estimate was turned into floats). Create, ingest,
    estimate, series and dashboard all answer 200 with the protocol's own estimate-with-SE, the
    same numbers as the report archive's."""
    spec = {"name": "RAPPOR", "params": {"k": 16, "h": 2, "m": 8, "f": 0.5, "p": 0.5, "q": 0.75}}
    client = make_client(str(tmp_path / "r.db"))
    refused = client.post(
        "/v1/collections",
        json={"name": "pp", "protocol": spec, "postprocess": "norm-sub"},
        headers=bearer(ADMIN),
    )
    assert refused.status_code == 422 and "applies to frequency estimates" in refused.text
    col = create(client, "rap", spec=spec)
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(3)
    n = 12  # few reports over 8 cohorts: an empty cohort must answer null, not 500
    strings = [f"s{i}" for i in rng.integers(0, 5, n)]
    memo = proto.new_memo(n)
    reports = [proto.perturb(strings, memo, rng) for _ in range(2)]
    for epoch, reps in enumerate(reports):
        data = records(new_ids(n, rng), [epoch] * n, wire_reports(proto, reps))
        assert post(client, "rap", col["ingest_token"], data).status_code == 200
    rd = bearer(col["read_token"])
    got = client.get("/v1/collections/rap/epochs/1/estimate", headers=rd)
    assert got.status_code == 200, got.text
    agg = proto.aggregator()
    agg.add(reports[1])
    expected = agg.estimate_with_se().as_dict()
    body = got.json()
    for key in ("estimate", "raw", "se", "lower", "upper"):
        assert body[key] == expected[key], key
    assert np.shape(body["raw"]) == (8, 16)
    assert any(row[0] is None for row in body["se"]), "the test needs an empty cohort"
    series = client.get("/v1/collections/rap/series", headers=rd)
    assert series.status_code == 200, series.text
    assert [e["epoch"] for e in series.json()["epochs"]] == [0, 1]
    assert series.json()["epochs"][1]["se"] == expected["se"]
    page = client.get(f"/collections/rap/dashboard?token={col['read_token']}")
    assert page.status_code == 200 and "cohort " in page.text
    bad = client.get("/v1/collections/rap/epochs/1/estimate?postprocess=norm-sub", headers=rd)
    assert bad.status_code == 422
    # The archive of the same reports gives the same numbers, row by row.
    export = client.get("/v1/collections/rap/epochs/1/reports.parquet", headers=rd)
    (tmp_path / "e1.parquet").write_bytes(export.content)
    rows = aggregate_archive(tmp_path / "e1.parquet").estimates()
    for r in rows:
        j, i = r["cohort"], r["value"]
        for key in ("raw", "se", "lower", "upper"):
            want = expected[key][j][i]
            assert (r[key] == want) if want is not None else np.isnan(r[key]), (key, j, i)


def test_serve_defaults_are_the_servers_own():
    """`longldp serve`'s option defaults and `server.serve`'s keyword defaults are copies (the
    CLI must not import the server's extras to build its help): they must equal the values
    the server defines, `Limits` and the timeouts module's constants."""
    import dataclasses
    import inspect

    from longldp.cli.serve import serve_cmd
    from longldp.server import serve, timeouts

    cli = {n: p.default for n, p in inspect.signature(serve_cmd).parameters.items()}
    fn = {n: p.default for n, p in inspect.signature(serve).parameters.items()}
    for field in dataclasses.fields(Limits):
        assert cli[field.name] == getattr(Limits(), field.name), field.name
    own = {
        "header_timeout": timeouts.HEADER_TIMEOUT,
        "body_timeout": timeouts.BODY_TIMEOUT,
        "keep_alive_timeout": timeouts.KEEP_ALIVE_TIMEOUT,
        "write_timeout": timeouts.WRITE_TIMEOUT,
    }
    for name, value in own.items():
        assert cli[name] == value and fn[name] == value, name
    assert cli["max_connections"] == fn["max_connections"]
