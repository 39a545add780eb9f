"""Sybil bounds of the collection server (issue 32, item 3), in process on SQLite and
PostgreSQL: the device cap, the enrollment rate (429 with Retry-After), device listing and
revocation (with the removal of a revoked device's reports), the attestation hook, and the
largest estimate shift the devices above the expected population could cause, on the page.

On main before this change one enrollment token minted devices without limit (no cap, no
429: every enrollment of test_enrollment_is_capped_and_rate_limited got 201), nothing listed
or revoked devices (405), and the page said nothing of what a crowd of them could do.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

import longldp as ll
from longldp.attacks import crafting, gains
from longldp.server import Limits, build_app
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports
from server_sim import sqlite_path

SPEC = {"name": "L-GRR", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol_from_spec(SPEC)
OCTET = "application/octet-stream"


def create(client: TestClient, name: str, spec: dict = SPEC, **extra) -> dict:
    r = client.post(
        "/v1/collections", json={"name": name, "protocol": spec, **extra}, headers=bearer(ADMIN)
    )
    assert r.status_code == 201, r.text
    return r.json()


def enroll(client: TestClient, name: str, token: str):
    return client.post(f"/v1/collections/{name}/devices", headers=bearer(token))


def upload(client: TestClient, name: str, token: str, body: bytes):
    return client.post(
        f"/v1/collections/{name}/reports",
        content=body,
        headers={**bearer(token), "Content-Type": OCTET},
    )


def page_data(client: TestClient, name: str, token: str) -> dict:
    page = client.get(f"/collections/{name}/dashboard", headers=bearer(token)).text
    blob = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    assert blob is not None
    return json.loads(blob.group(1))


def test_enrollment_is_capped_and_rate_limited(backend):
    """The server's defaults apply to a collection that sets none; a collection's own bounds
    override them; revoking a device frees its place under the cap, not under the rate."""
    client = TestClient(build_app(backend, ADMIN, Limits(max_devices=4, enroll_per_minute=6)))
    col = create(client, "capped")
    statuses = [enroll(client, "capped", col["enroll_token"]).status_code for _ in range(5)]
    assert statuses == [201] * 4 + [409]
    first = client.get("/v1/collections/capped/devices", headers=bearer(ADMIN)).json()
    assert first["devices"] == 4 and first["max_devices"] == 4
    device = first["devices_page"][0]["device"]
    r = client.delete(f"/v1/collections/capped/devices/{device}", headers=bearer(ADMIN))
    assert r.status_code == 200 and r.json()["revoked"] is True
    assert enroll(client, "capped", col["enroll_token"]).status_code == 201  # a place again
    r = enroll(client, "capped", col["enroll_token"])  # the cap again, before the rate
    assert r.status_code == 409 and "cap" in r.json()["error"]
    # The rate: 6 a minute by default here; this collection lowers it to 3 and lifts the cap.
    fast = create(client, "fast", enroll_per_minute=3, max_devices=100)
    statuses = [enroll(client, "fast", fast["enroll_token"]).status_code for _ in range(3)]
    r = enroll(client, "fast", fast["enroll_token"])
    assert statuses == [201] * 3 and r.status_code == 429, r.text
    assert 1 <= int(r.headers["retry-after"]) <= 60
    # The operator may change the bounds later.
    r = client.patch("/v1/collections/fast", json={"enroll_per_minute": 10}, headers=bearer(ADMIN))
    assert r.status_code == 200 and r.json()["enroll_per_minute"] == 10
    assert enroll(client, "fast", fast["enroll_token"]).status_code == 201


def test_one_token_cannot_mint_devices_without_limit(tmp_path):
    """With the server's defaults (600 enrollments a minute per collection), the 601st
    enrollment within a minute is refused with 429 (main: 201 every time). The database is
    in memory-backed /dev/shm when there is one: 601 fsyncs would test nothing here."""
    client = TestClient(build_app(sqlite_path(tmp_path), ADMIN))
    col = create(client, "mint")
    rate = 600  # Limits().enroll_per_minute, spelled out: main's Limits has no such field
    statuses = [enroll(client, "mint", col["enroll_token"]).status_code for _ in range(rate + 1)]
    assert statuses[:rate] == [201] * rate
    assert statuses[rate] == 429
    assert Limits().enroll_per_minute == rate


def test_devices_are_listed_and_revoked_with_their_reports(backend):
    client = TestClient(build_app(backend, ADMIN))
    col = create(client, "dev")
    creds = [enroll(client, "dev", col["enroll_token"]).json() for _ in range(3)]
    rng = np.random.default_rng(1)
    wires = wire_reports(PROTO, PROTO.perturb(rng.integers(0, 8, 6), PROTO.new_memo(6), rng))
    ids = new_ids(6, rng)
    for j, c in enumerate(creds):  # each device: one report in epoch 0 and one in epoch 1
        body = records(ids[2 * j : 2 * j + 2], [0, 1], wires[2 * j : 2 * j + 2])
        assert upload(client, "dev", c["credential"], body).status_code == 200
    assert (
        client.post("/v1/collections/dev/epochs/0/close", headers=bearer(ADMIN)).status_code == 200
    )
    assert (
        client.get("/v1/collections/dev/devices", headers=bearer(col["read_token"])).status_code
        == 403
    )
    listing = client.get("/v1/collections/dev/devices?limit=2", headers=bearer(ADMIN)).json()
    assert [d["device"] for d in listing["devices_page"]] == [c["device"] for c in creds[:2]]
    assert [d["reports"] for d in listing["devices_page"]] == [2, 2]
    assert listing["next_start"] == creds[2]["device"]
    # Revoke device 1 and purge: its report of the open epoch 1 goes, the closed epoch keeps it.
    victim = creds[1]
    r = client.delete(
        f"/v1/collections/dev/devices/{victim['device']}?purge=true", headers=bearer(ADMIN)
    )
    assert r.json() == {"device": victim["device"], "revoked": True, "reports_removed": 1}
    service = client.app.state.service
    c = service.get_collection("dev")
    assert [service.counts(c, e)[0] for e in (0, 1)] == [3, 2]
    for e in (0, 1):
        n, support = service.counts(c, e)
        rn, rsupport = service.recount(c, e)
        assert (n, support.tolist()) == (rn, rsupport.tolist())
    # Its credential no longer works; revoking again changes nothing; an unknown device: 404.
    body = records(new_ids(1, rng), [2], wires[:1])
    assert upload(client, "dev", victim["credential"], body).status_code == 401
    again = client.delete(f"/v1/collections/dev/devices/{victim['device']}", headers=bearer(ADMIN))
    assert again.json()["reports_removed"] == 0
    assert (
        client.delete("/v1/collections/dev/devices/999999", headers=bearer(ADMIN)).status_code
        == 404
    )
    listing = client.get("/v1/collections/dev/devices", headers=bearer(ADMIN)).json()
    assert listing["devices"] == 2
    assert [d["revoked_at"] is not None for d in listing["devices_page"]] == [False, True, False]


def attest(collection: str, evidence: str | None) -> bool:
    """An attestation hook for the test: the evidence must name the collection."""
    return evidence == f"attested for {collection}"


def test_the_attestation_hook_gates_enrollment(tmp_path):
    client = TestClient(build_app(str(tmp_path / "a.db"), ADMIN, attest="test_server_sybil:attest"))
    col = create(client, "app")
    assert enroll(client, "app", col["enroll_token"]).status_code == 403
    wrong = {**bearer(col["enroll_token"]), "X-Device-Attestation": "attested for other"}
    assert client.post("/v1/collections/app/devices", headers=wrong).status_code == 403
    good = {**bearer(col["enroll_token"]), "X-Device-Attestation": "attested for app"}
    assert client.post("/v1/collections/app/devices", headers=good).status_code == 201
    with pytest.raises(ValueError, match="cannot be loaded"):
        build_app(str(tmp_path / "b.db"), ADMIN, attest="test_server_sybil:nowhere")


@pytest.mark.parametrize(
    "spec",
    [
        SPEC,
        {"name": "OUE", "params": {"k": 8, "eps": 1.0}},
        {"name": "OLH", "params": {"k": 8, "eps": 1.0}},
    ],
    ids=lambda s: s["name"],
)
def test_the_page_shows_what_the_surplus_devices_could_do(spec, tmp_path):
    """The figure equals the attacks' closed form (the maximal gain attack on one target,
    docs/math.md (18.1), computed by longldp.attacks from its crafted reports' expected
    support), and a real crowd of that many devices sending MGA's reports moves the estimate
    by exactly (18.1) with the genuine reports' estimate: β(φ − f̂)."""
    proto = ll.protocol_from_spec(spec)
    expected, surplus, target = 60, 20, 3
    client = TestClient(build_app(str(tmp_path / "s.db"), ADMIN))
    col = create(client, "poll", spec, expected_devices=expected)
    honest = [enroll(client, "poll", col["enroll_token"]).json()["credential"] for _ in range(60)]
    rng = np.random.default_rng(7)
    reps = proto.perturb(rng.integers(0, 8, expected), proto.new_memo(expected), rng)
    for cred, wire, rid in zip(
        honest, wire_reports(proto, reps), new_ids(expected, rng), strict=True
    ):
        assert upload(client, "poll", cred, records([rid], [0], [wire])).status_code == 200
    url = "/v1/collections/poll/epochs/0/estimate?postprocess=none"
    before = client.get(url, headers=bearer(col["read_token"])).json()["raw"][target]
    assert page_data(client, "poll", col["read_token"])["sybil"]["surplus"] == 0
    fakes = [enroll(client, "poll", col["enroll_token"]).json()["credential"] for _ in range(20)]
    sybil = page_data(client, "poll", col["read_token"])["sybil"]
    beta = surplus / (expected + surplus)
    closed_form = gains.expected_gain(proto, "MGA", [target], beta, np.zeros(8))
    assert sybil["surplus"] == surplus and sybil["devices"] == expected + surplus
    assert sybil["largest_shift"] == pytest.approx(closed_form.total, rel=1e-12)
    assert sybil["largest_reading"] == pytest.approx(closed_form.reading[target], rel=1e-12)
    crafted = crafting.craft_reports(proto, "MGA", [target], surplus, np.random.default_rng(8))
    for cred, wire, rid in zip(
        fakes, wire_reports(proto, crafted), new_ids(surplus, rng), strict=True
    ):
        assert upload(client, "poll", cred, records([rid], [0], [wire])).status_code == 200
    after = client.get(url, headers=bearer(col["read_token"])).json()["raw"][target]
    assert after - before == pytest.approx(beta * (sybil["largest_reading"] - before), abs=1e-12)
    page = client.get("/collections/poll/dashboard", headers=bearer(ADMIN)).text
    assert f'data-shift="{sybil["largest_shift"]!r}"' in page
    # A shared-token collection counts no devices: the page says there is no bound.
    create(client, "open", spec, auth="shared")
    shared = page_data(client, "open", ADMIN)["sybil"]
    assert shared["largest_shift"] is None and "any amount" in shared["note"]


@pytest.mark.slow
def test_the_devices_command_lists_revokes_and_bounds(tmp_path):
    """``longldp devices list | revoke | bounds`` against a real server (main: no such
    command)."""
    from typer.testing import CliRunner

    from longldp.cli import app
    from server_helpers import LiveServer

    srv = LiveServer(str(tmp_path / "cli.db"), tmp_path).start()
    try:
        import httpx

        r = httpx.post(
            f"{srv.base}/v1/collections",
            json={"name": "c", "protocol": SPEC, "expected_devices": 1},
            headers=bearer(ADMIN),
            timeout=30,
        )
        token = r.json()["enroll_token"]
        ids = [
            httpx.post(f"{srv.base}/v1/collections/c/devices", headers=bearer(token)).json()[
                "device"
            ]
            for _ in range(3)
        ]
        runner = CliRunner()
        where = ["--server", srv.base, "--collection", "c", "--admin-token", ADMIN]
        out = runner.invoke(app, ["devices", "list", *where], prog_name="longldp")
        assert out.exit_code == 0, out.output
        assert all(str(d) in out.stdout for d in ids)
        assert "active devices 3" in out.stdout and "2 may be fakes" in out.stdout
        out = runner.invoke(app, ["devices", "revoke", str(ids[0]), "--purge", *where])
        assert out.exit_code == 0 and f"device {ids[0]}: revoked" in out.stdout, out.output
        out = runner.invoke(app, ["devices", "bounds", "--max-devices", "5", *where])
        assert out.exit_code == 0 and "cap 5" in out.stdout and "2 active" in out.stdout
        bad = ["--server", srv.base, "--collection", "c", "--admin-token", "wrong-token-0123456789"]
        out = runner.invoke(app, ["devices", "list", *bad], prog_name="longldp")
        assert out.exit_code == 2 and out.stdout == ""
        assert out.stderr.strip().startswith("error: the server answered 401")
    finally:
        srv.stop()
