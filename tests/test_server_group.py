"""Group commit (issue 32, item 7), in process on SQLite and PostgreSQL: 64 devices each send
one report in a request of its own, all at once, through the whole application; the server
stores them in a few shared transactions, and answers each request only once its report is
committed (a fresh connection sees it when the answer starts).

On main before this change every request paid its own durable commit: 64 requests, 64
commits (this test counted them), and the rate of one-report requests was the disk's rate of
fsyncs (benchmarks/bench_service.py).
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import sqlalchemy as sa
from fastapi.testclient import TestClient

import longldp as ll
from longldp.server import build_app, db
from server_helpers import ADMIN, asgi_request, bearer, new_ids, records, wire_reports

SPEC = {"name": "L-OSUE", "params": {"k": 64, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol_from_spec(SPEC)
DEVICES = 64


def test_concurrent_one_report_requests_share_durable_transactions(backend):
    app = build_app(backend, ADMIN)
    client = TestClient(app)
    r = client.post("/v1/collections", json={"name": "g", "protocol": SPEC}, headers=bearer(ADMIN))
    assert r.status_code == 201, r.text
    enroll = r.json()["enroll_token"]
    creds = []
    for _ in range(DEVICES):
        r = client.post("/v1/collections/g/devices", headers=bearer(enroll))
        creds.append(r.json()["credential"])
    rng = np.random.default_rng(4)
    reps = PROTO.perturb(rng.integers(0, PROTO.k, DEVICES), PROTO.new_memo(DEVICES), rng)
    ids = new_ids(DEVICES, rng)
    bodies = [records([i], [0], [w]) for i, w in zip(ids, wire_reports(PROTO, reps), strict=True)]
    service = app.state.service
    commits = [0]

    def count(conn) -> None:  # type: ignore[no-untyped-def]
        commits[0] += bool(conn.info.get("write"))  # write transactions only

    sa.event.listen(service.engine, "commit", count)
    watcher = db.make_engine(backend)  # another connection: it sees committed rows only
    r_ = db.reports

    def committed(rid: bytes) -> bool:
        with watcher.connect() as conn:
            found = conn.execute(sa.select(r_.c.epoch).where(r_.c.report_id == rid)).first()
        return found is not None

    seen_before_answer: list[bool] = []

    async def all_at_once() -> list[tuple[int, dict]]:
        def check(rid: bytes):  # type: ignore[no-untyped-def]
            return lambda: seen_before_answer.append(committed(rid))

        return await asyncio.gather(
            *(
                asgi_request(app, "POST", "/v1/collections/g/reports", c, b, check(rid))
                for c, b, rid in zip(creds, bodies, ids, strict=True)
            )
        )

    answers = asyncio.run(all_at_once())
    watcher.dispose()
    want = (200, {"received": 1, "new": 1, "duplicates": 0})
    assert all((a[0], json.loads(a[1])) == want for a in answers), answers
    assert seen_before_answer == [True] * DEVICES  # each answered after its commit
    assert commits[0] < DEVICES // 4, f"{commits[0]} commits for {DEVICES} requests"
    col = service.get_collection("g")
    n, support = service.counts(col, 0)
    rn, rsupport = service.recount(col, 0)
    assert n == rn == DEVICES and support.tolist() == rsupport.tolist()
