"""An existing collection and an unknown one take the same time to refuse a wrong token
(issue 32, item 6): measured through the whole application (ASGI, in process: what a client
sees minus the network), over interleaved pairs of requests.

On main before this change the known collection answered later in most pairs: the service
built its Collection object (and parsed its protocol spec) only for a name that exists, and
the database found no row for an unknown one; this test's sign statistic was z ≈ 9 there
(SQLite). Now both read one row by the same index (the decoy collection stands in for an
unknown name) and do the same work after it."""

from __future__ import annotations

import asyncio
import math
import time

from fastapi.testclient import TestClient

from longldp.server import build_app
from server_helpers import ADMIN, asgi_request, bearer

SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
PAIRS = 2000
#: |z| of the sign test above which the two kinds of answer are told apart. The order within
#: a pair alternates, so timing noise alone gives a standard normal z: 4 is crossed by chance
#: once in 16,000 runs.
Z_LIMIT = 4.0


def sign_z(differences: list[int]) -> float:
    """The sign test's z: how far the share of pairs where the first took longer is from ½."""
    nonzero = [d for d in differences if d != 0]
    above = sum(d > 0 for d in nonzero)
    return (above - len(nonzero) / 2) / (math.sqrt(len(nonzero)) / 2)


async def _timed(app, path: str, token: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(status, ns) of one GET through the ASGI application."""
    t0 = time.perf_counter_ns()
    status, _ = await asgi_request(app, "GET", path, token)
    return status, time.perf_counter_ns() - t0


async def _pairs(app, paths: dict[str, str], token: str) -> list[int]:  # type: ignore[no-untyped-def]
    for _ in range(200):  # warm up caches and pools
        for path in paths.values():
            await _timed(app, path, token)
    differences = []
    for i in range(PAIRS):
        took = {}
        for name in ("here01", "gone01") if i % 2 else ("gone01", "here01"):
            status, took[name] = await _timed(app, paths[name], token)
            assert status == 401
        differences.append(took["here01"] - took["gone01"])
    return differences


def test_unknown_and_existing_collections_take_the_same_time(tmp_path):
    """SQLite. PostgreSQL runs the same query; measured with this test's pairs there, z was
    2.2, where main gave 9.6 and 11.1 in two runs; at five times this test's cost, it is not
    repeated here."""
    app = build_app(str(tmp_path / "timing.db"), ADMIN)
    # Names of the same length, so that hashing and comparing them costs the same.
    r = TestClient(app).post(
        "/v1/collections", json={"name": "here01", "protocol": SPEC}, headers=bearer(ADMIN)
    )
    assert r.status_code == 201, r.text
    paths = {name: f"/v1/collections/{name}/epochs" for name in ("here01", "gone01")}
    z = sign_z(asyncio.run(_pairs(app, paths, "ll_read_" + "A" * 43)))
    assert abs(z) < Z_LIMIT, f"known and unknown collections are told apart: sign z = {z:.1f}"
