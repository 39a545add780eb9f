"""The lean ingest path answers exactly as the declared FastAPI routes (SQLite, PostgreSQL).

:class:`longldp.server.app.CollectionApp` serves ``POST …/reports`` and ``…/reports/check`` by
a plain ASGI handler (:class:`longldp.server.app.LeanIngest`) ahead of FastAPI's routing,
dependency and validation machinery (docs/server.md, "Performance", says what that saves);
the declared routes stay, for the OpenAPI schema and for ``app.lean = False``. Two servers
over two fresh databases, one lean and one not, get the same sequence of requests (every
token role, a missing or malformed ``Authorization``, an unknown collection, wrong and absent
content types, bodies too long by declaration, malformed binary and JSON batches, an epoch
outside the window, a quota exceeded, duplicates, a revoked device, the shared token's
batches, the check endpoint) and must give the same status, the same JSON and the same
``Content-Type`` and ``Retry-After``, with the same reports stored. Before this test nothing
compared the two paths: a check moved or dropped on one of them would have gone unseen.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

import longldp as ll
from longldp.server import Limits, build_app, db, tokens
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

SPEC = {"name": "L-OSUE", "params": {"k": 16, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol_from_spec(SPEC)
LIMITS = Limits(max_body_bytes=4096, max_batch=50)
OCTET = {"Content-Type": "application/octet-stream"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def two_urls(request, tmp_path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Two fresh databases of one backend."""
    if request.param == "sqlite":
        return str(tmp_path / "lean.db"), str(tmp_path / "routes.db")
    pg = request.getfixturevalue("pg_cluster")
    return pg.new_database(), pg.new_database()


class Server:
    """One app (lean or not) with a device-mode collection ``d`` (three enrolled devices, the
    third revoked) and a shared-token collection ``s``."""

    def __init__(self, url: str, lean: bool):
        self.app = build_app(url, ADMIN, LIMITS)
        self.app.lean = lean
        self.client = TestClient(self.app)
        made = self.post_json("/v1/collections", {"name": "d", "protocol": SPEC}, ADMIN)
        self.tokens = {"read": made["read_token"], "enroll": made["enroll_token"], "admin": ADMIN}
        self.devices = [
            self.post_json("/v1/collections/d/devices", None, made["enroll_token"])["credential"]
            for _ in range(3)
        ]
        revoked = tokens.device_of(self.devices[2])
        r = self.client.delete(f"/v1/collections/d/devices/{revoked}", headers=bearer(ADMIN))
        assert r.status_code == 200, r.text
        shared = {"name": "s", "protocol": SPEC, "auth": "shared"}
        self.tokens["ingest"] = self.post_json("/v1/collections", shared, ADMIN)["ingest_token"]

    def post_json(self, path: str, body: Any, token: str) -> dict:
        r = self.client.post(path, json=body, headers=bearer(token))
        assert r.status_code == 201, r.text
        return r.json()

    def send(self, path: str, token: str | None, headers: dict[str, str], body: bytes) -> tuple:
        """(status, JSON answer, Content-Type, Retry-After) of one request; ``token`` names a
        role ('device0', 'read', ...) resolved to this server's own token, or is literal."""
        hdrs = dict(headers)
        if token is not None:
            if token.startswith("device"):
                value = self.devices[int(token[-1])]
            else:
                value = self.tokens.get(token, token)
            hdrs.setdefault("Authorization", f"Bearer {value}")
        r = self.client.post(path, content=body, headers=hdrs)
        return (
            r.status_code,
            r.json(),
            r.headers.get("content-type"),
            r.headers.get("retry-after"),
        )

    def stored(self) -> list[tuple]:
        """Every stored report (collection name, epoch, report id, wire) in key order."""
        engine = self.app.state.service.engine
        c, r = db.collections, db.reports
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.c.name, r.c.epoch, r.c.report_id, r.c.wire)
                .join(c, c.c.id == r.c.collection_id)
                .order_by(c.c.name, r.c.epoch, r.c.report_id)
            ).all()
        return [tuple(bytes(x) if isinstance(x, memoryview) else x for x in row) for row in rows]


def cases() -> list[tuple[str, str, str | None, dict[str, str], bytes]]:
    """(what, path, token role or literal, headers, body) in the order both servers get them."""
    rng = np.random.default_rng(32)
    reps = PROTO.perturb(rng.integers(0, PROTO.k, 12), PROTO.new_memo(12), rng)
    wires = wire_reports(PROTO, reps)
    ids = new_ids(12, rng)
    one = records(ids[:1], [0], wires[:1])
    json_one = json.dumps(
        {"reports": [{"id": ids[1].hex(), "epoch": 1, "report": _b64(wires[1])}]}
    ).encode()

    def rec(first: int, epochs: list[int]) -> bytes:  # records first, first + 1, ...
        n = len(epochs)
        return records(ids[first : first + n], epochs, wires[first : first + n])

    rep, chk = "/v1/collections/d/reports", "/v1/collections/d/reports/check"
    shared = "/v1/collections/s/reports"
    return [
        ("one report", rep, "device0", OCTET, one),
        ("its duplicate", rep, "device0", OCTET, one),
        ("another id, same epoch: over the quota", rep, "device0", OCTET, rec(2, [0])),
        ("no Authorization", rep, None, OCTET, one),
        ("not a bearer token", rep, None, {**OCTET, "Authorization": "Basic eDp5"}, one),
        ("an empty bearer token", rep, None, {**OCTET, "Authorization": "Bearer  "}, one),
        ("a wrong token", rep, "not-a-token", OCTET, one),
        ("a lower-case scheme", rep, None, {**OCTET, "Authorization": "bearer nothing"}, one),
        (
            "a device's credential on an unknown collection",
            "/v1/collections/zz/reports",
            "device1",
            OCTET,
            one,
        ),
        ("the admin on an unknown collection", "/v1/collections/zz/reports", "admin", OCTET, one),
        ("the admin", rep, "admin", OCTET, one),
        ("the read token", rep, "read", OCTET, one),
        ("the enrollment token", rep, "enroll", OCTET, one),
        ("a revoked device", rep, "device2", OCTET, rec(3, [0])),
        ("a device's credential on the shared collection", shared, "device1", OCTET, one),
        ("text/plain", rep, "device1", {"Content-Type": "text/plain"}, one),
        ("no Content-Type", rep, "device1", {}, one),
        ("declared too long", rep, "device1", OCTET, b"\0" * 5000),
        ("a binary body of the wrong length", rep, "device1", OCTET, one[:-1]),
        ("an empty binary body", rep, "device1", OCTET, b""),
        ("an epoch outside the window", rep, "device1", OCTET, rec(4, [10_000])),
        (
            "a report that is not a report",
            rep,
            "device1",
            OCTET,
            records(ids[5:6], [0], [b"\xff" * len(wires[5])]),
        ),
        (
            "JSON, with a charset",
            rep,
            "device1",
            {"Content-Type": "application/json; charset=utf-8"},
            json_one,
        ),
        ("JSON, its duplicate", rep, "device1", JSON, json_one),
        ("JSON that does not parse", rep, "device1", JSON, b'{"reports": ['),
        (
            "JSON with a bad id",
            rep,
            "device1",
            JSON,
            json_one.replace(ids[1].hex().encode(), b"zz" * 16),
        ),
        (
            "JSON with an extra field",
            rep,
            "device1",
            JSON,
            json_one.replace(b'"epoch"', b'"x": 1, "epoch"'),
        ),
        ("JSON without reports", rep, "device1", JSON, b"{}"),
        ("JSON, declared too long", rep, "device1", JSON, b" " * 5000),
        ("the check endpoint", chk, "device1", OCTET, rec(6, [0])),
        ("the check endpoint, bad", chk, "device1", OCTET, b"\1\2\3"),
        ("the check endpoint, no token", chk, None, OCTET, one),
        ("the shared token's batch", shared, "ingest", OCTET, rec(7, [0, 0, 1])),
        ("the shared token's batch again", shared, "ingest", OCTET, rec(7, [0, 0, 1])),
        (
            "the shared token with a repeated id",
            shared,
            "ingest",
            OCTET,
            records([ids[10], ids[10]], [0, 0], wires[10:12]),
        ),
        ("the shared token on the device collection", rep, "ingest", OCTET, one),
        ("device 1's report, after all that", rep, "device1", OCTET, rec(11, [0])),
    ]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_lean_ingest_answers_as_the_declared_routes(two_urls):
    lean, routes = Server(two_urls[0], True), Server(two_urls[1], False)
    assert lean.app.lean and not routes.app.lean
    statuses = set()
    for what, path, token, headers, body in cases():
        got = lean.send(path, token, headers, body)
        want = routes.send(path, token, headers, body)
        assert got == want, f"{what}: lean {got}, FastAPI routes {want}"
        statuses.add(got[0])
    # The cases reach every kind of answer the ingest routes give (else they test less).
    assert {200, 401, 403, 404, 409, 413, 415, 422, 425} <= statuses, statuses
    stored = lean.stored()
    assert stored == routes.stored()
    assert len(stored) == 1 + 1 + 3 + 1  # device 0's, the JSON one, the shared 3, device 1's
