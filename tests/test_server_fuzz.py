"""Fuzzing every endpoint of the collection server (in process, SQLite): schema-based cases from
its OpenAPI document (schemathesis) and byte-level mutations of valid batches (hypothesis).
Thousands of cases in all; no answer may be a 5xx, and the stored counts must always equal a
recount of the stored reports."""

from __future__ import annotations

import numpy as np
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import longldp as ll
from longldp.server import Limits, build_app
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

SPEC = {"name": "OLOLOHA", "params": {"k": 16, "eps_perm": 2.0, "eps_1": 1.0}}
PROTO = ll.protocol("OLOLOHA", k=16, eps_perm=2.0, eps_1=1.0)
TOKENS: dict[str, str] = {}
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = build_app(
        str(tmp_path_factory.mktemp("fuzz") / "fuzz.db"),
        ADMIN,
        Limits(max_body_bytes=256 * 1024, max_batch=500),
    )
    client = TestClient(app)
    col = client.post(
        "/v1/collections",
        json={"name": "fz", "protocol": SPEC, "auth": "shared"},
        headers=bearer(ADMIN),
    ).json()
    TOKENS.update(ingest=col["ingest_token"], read=col["read_token"])
    rng = np.random.default_rng(0)
    reps = PROTO.perturb(rng.integers(0, 16, 300), PROTO.new_memo(300), rng)
    body = records(new_ids(300, rng), [0] * 150 + [1] * 150, wire_reports(PROTO, reps))
    r = client.post(
        "/v1/collections/fz/reports",
        content=body,
        headers={**bearer(col["ingest_token"]), "Content-Type": "application/octet-stream"},
    )
    assert r.status_code == 200
    # A device-mode collection too: enrollment, and ingest with a device's credential.
    dev = client.post(
        "/v1/collections", json={"name": "dv", "protocol": SPEC}, headers=bearer(ADMIN)
    ).json()
    TOKENS.update(enroll=dev["enroll_token"], dev_read=dev["read_token"])
    enrolled = client.post("/v1/collections/dv/devices", headers=bearer(dev["enroll_token"]))
    TOKENS["device"] = enrolled.json()["credential"]
    return app


def _token_for(method: str, path: str, salt: int, name: str | None) -> str | None:
    """A token that gets past authentication most of the time, so the bodies are exercised."""
    if salt % 7 == 0:
        return None
    device_mode = name == "dv"
    if path.endswith("/reports") and method == "POST":
        return TOKENS["device" if device_mode else "ingest"]
    if path.endswith("/devices"):
        return TOKENS["enroll"] if salt % 2 else ADMIN
    if path in ("/v1/collections",) or path.endswith("/close"):
        return ADMIN
    if salt % 2:
        return TOKENS["dev_read" if device_mode else "read"]
    return ADMIN


@pytest.mark.slow
def test_no_endpoint_answers_5xx(app):
    """Every operation of the OpenAPI document, 150 generated cases each."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    client = TestClient(app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    total = {"cases": 0}
    for op in operations:

        @SETTINGS
        @given(case=op.as_strategy(), salt=st.integers(0, 2**16))
        def run(case, salt):
            if case.path_parameters and "name" in case.path_parameters and salt % 3:
                case.path_parameters["name"] = "dv" if salt % 5 == 0 else "fz"
            name = (case.path_parameters or {}).get("name")
            token = _token_for(case.method.upper(), case.path, salt, name)
            kwargs = case.as_transport_kwargs(
                base_url="http://testserver", headers=bearer(token) if token else {}
            )
            # The client holds cookies and takes raw bytes as content= (per-request cookies
            # and bytes as data= are deprecated in the HTTP client).
            client.cookies = kwargs.pop("cookies", None) or {}
            if isinstance(kwargs.get("data"), (bytes, str)):
                kwargs["content"] = kwargs.pop("data")
            response = client.request(**kwargs)
            total["cases"] += 1
            assert response.status_code < 500, (case.method, case.path, response.text)

        run()
    assert total["cases"] >= 1300


def _valid_batch(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    reps = PROTO.perturb(rng.integers(0, 16, 20), PROTO.new_memo(20), rng)
    return records(new_ids(20, rng), [2] * 20, wire_reports(PROTO, reps))


@st.composite
def mutated(draw):
    data = bytearray(_valid_batch(draw(st.integers(0, 3))))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "set"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[pos : pos + draw(st.integers(1, 40))]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=40))
        elif data:
            data[pos] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.mark.slow
def test_mutated_batches_never_5xx_and_counts_stay_exact(app):
    client = TestClient(app)
    service = app.state.service
    # A collection of its own: the schema fuzzing may close epochs of "fz".
    made = client.post(
        "/v1/collections",
        json={"name": "mut", "protocol": SPEC, "auth": "shared"},
        headers=bearer(ADMIN),
    ).json()
    col = service.get_collection("mut")
    seen = {"ok": 0, "refused": 0}

    @settings(SETTINGS, max_examples=700)
    @given(body=st.one_of(mutated(), st.binary(max_size=400)), json_=st.booleans())
    def run(body, json_):
        r = client.post(
            "/v1/collections/mut/reports",
            content=body,
            headers={
                **bearer(made["ingest_token"]),
                "Content-Type": "application/json" if json_ else "application/octet-stream",
            },
        )
        assert r.status_code < 500, r.text
        if r.status_code == 200:
            seen["ok"] += 1
        else:
            seen["refused"] += 1
            assert isinstance(r.json()["error"], str)

    run()
    assert seen["ok"] > 0 and seen["refused"] > 0
    for row in service.epochs(col)["epochs"]:
        n, support = service.counts(col, row["epoch"])
        rn, rsupport = service.recount(col, row["epoch"])
        assert (n, support.tolist()) == (rn, rsupport.tolist())
