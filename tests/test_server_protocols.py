"""The collection server with every registered protocol (tests/registry_cases.py), and the central
(shuffled) privacy on a collection's page.

For each registered protocol: the memory footprint that :mod:`longldp.server.sizing` computes
from its sizes and report kind is within the default budget and bounds what an ingest at the
server's limits and an estimate answer actually allocate (measured with ``tracemalloc``); a
collection of it takes enrolled devices' reports and answers its estimate (the protocol's own
``estimate_with_se`` of the stored reports), series, export, privacy figures and dashboard.

The central privacy of a collection (``GET …/privacy`` and the dashboard) equals
``longldp.shuffle.central_summary`` at n = the smallest epoch's report count and τ = the epochs
with reports, and degrades with a reason when there are no reports, when n is too small and
when SciPy is missing.
"""

from __future__ import annotations

import io
import json
import re
import sys
import tracemalloc

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import longldp as ll
from longldp.client import DeviceClient
from longldp.server import Limits, build_app, central
from longldp.shuffle import central_summary, clones_epsilon
from registry_cases import cases, comparison_only, deployable
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

OCTET = "application/octet-stream"
FIELDS = ("estimate", "raw", "se", "lower", "upper")


def make(tmp_path, limits: Limits | None = None) -> TestClient:
    return TestClient(build_app(str(tmp_path / "c.db"), ADMIN, limits))


def create(client: TestClient, name: str, spec: dict, **extra) -> dict:
    r = client.post(
        "/v1/collections", json={"name": name, "protocol": spec, **extra}, headers=bearer(ADMIN)
    )
    assert r.status_code == 201, r.text
    return r.json()


def inputs(proto: ll.FrequencyOracle, n: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """n inputs of the protocol (strings for Bloom-filter RAPPOR)."""
    return proto.as_inputs(rng.integers(0, proto.domain_size or 16, n))


def upload(client: TestClient, name: str, token: str, body: bytes):  # type: ignore[no-untyped-def]
    return client.post(
        f"/v1/collections/{name}/reports",
        content=body,
        headers={**bearer(token), "Content-Type": OCTET},
    )


@pytest.mark.slow
@pytest.mark.parametrize("proto", cases(deployable, k=1024))
def test_footprint_is_within_the_budget_and_bounds_what_is_allocated(proto, tmp_path):
    """The sizing of every registered protocol (its report kind decides how support counting is
    sized) is an upper bound of the memory a full ingest and an estimate answer allocate."""
    limits = Limits(max_body_bytes=512 * 1024)
    assert Limits().footprint(proto).peak_bytes <= Limits().max_collection_bytes
    client = make(tmp_path, limits)
    create(client, "m", proto.spec(), auth="shared")
    service = client.app.state.service
    col = service.get_collection("m")
    need = limits.footprint(proto)
    record = 20 + proto.wire_size
    n = min(limits.max_batch, limits.max_body_bytes // record)
    rng = np.random.default_rng(11)
    reps = proto.perturb(inputs(proto, n, rng), proto.new_memo(n), rng)
    body = records(
        new_ids(n, rng),
        [i % limits.max_epochs_per_request for i in range(n)],
        wire_reports(proto, reps),
    )
    assert len(body) <= limits.max_body_bytes
    tracemalloc.start()
    try:
        got = service.ingest(col, service.parse_binary(col, body))
        ingest_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        json.dumps(service.estimate(col, 1, None))
        estimate_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got["new"] == n
    assert ingest_peak <= need.ingest_bytes, (ingest_peak, need.ingest_bytes)
    assert estimate_peak <= need.estimate_bytes, (estimate_peak, need.estimate_bytes)


@pytest.mark.parametrize("proto", cases(comparison_only, k=16))
def test_comparison_only_mechanisms_are_refused(proto, tmp_path):
    """A mechanism given for comparison only (its trait says why) gets no collection (422 with
    the reason) and no device client (one-line ValueError)."""
    client = make(tmp_path)
    res = client.post("/v1/collections", json={"name": "c", "protocol": proto.spec()},
                      headers=bearer(ADMIN))  # fmt: skip
    assert res.status_code == 422, res.text
    assert "comparison only" in res.json()["error"] and proto.comparison_only in res.text
    with pytest.raises(ValueError, match="comparison only") as err:
        DeviceClient(tmp_path / "state.json", proto=proto)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("proto", cases(deployable, k=16))
def test_every_registered_protocol_is_collected_and_served(proto, tmp_path):
    """Enrolled devices upload one report per epoch; every answer is the protocol's own."""
    client = make(tmp_path)
    info = create(client, "p", proto.spec())
    assert info["auth"] == "device" and info["reports_per_epoch"] == 1
    rng = np.random.default_rng(5)
    devices = 6
    memo = proto.new_memo(devices)
    values = inputs(proto, devices, rng)
    sent: dict[int, list] = {0: [], 1: []}
    by_device: list[dict[int, bytes]] = [{} for _ in range(devices)]
    for epoch in (0, 1):
        before = memo.reports.copy()
        reps = proto.perturb(values, memo, rng)
        sent[epoch] = wire_reports(proto, reps)
        # A history-dependent device may send nothing at an epoch (a CHANGES-TREE level).
        for d, report in zip(np.flatnonzero(memo.reports > before), sent[epoch], strict=True):
            by_device[d][epoch] = report
    for d in range(devices):
        cred = client.post("/v1/collections/p/devices", headers=bearer(info["enroll_token"]))
        assert cred.status_code == 201, cred.text
        mine = by_device[d]
        body = records(new_ids(len(mine), rng), list(mine), list(mine.values()))
        r = upload(client, "p", cred.json()["credential"], body)
        assert r.status_code == 200 and r.json()["new"] == len(mine), r.text
    rd = bearer(info["read_token"])
    agg = proto.aggregator()
    agg.add_bytes(sent[1])
    want = agg.estimate_with_se().as_dict()
    got = client.get("/v1/collections/p/epochs/1/estimate?postprocess=none", headers=rd).json()
    assert got["n"] == len(sent[1])
    for f in FIELDS:
        assert got[f] == want[f], f
    series = client.get("/v1/collections/p/series?postprocess=none", headers=rd).json()
    assert [e["epoch"] for e in series["epochs"]] == [0, 1]
    assert series["epochs"][1]["se"] == want["se"]
    export = client.get("/v1/collections/p/epochs/0/reports.parquet", headers=rd)
    table = pq.read_table(io.BytesIO(export.content))
    assert sorted(table.column("report").to_pylist()) == sorted(sent[0])
    privacy = client.get("/v1/collections/p/privacy", headers=rd).json()
    if proto.history is not None:  # no shuffle route is proven for it: said, not computed
        assert privacy["status"] == "not-offered" and privacy["summary"] is None
        assert "past values" in privacy["note"]
    else:
        n = min(len(sent[0]), len(sent[1]))
        expected = central_summary(proto, n=n, epochs=2, delta=central.DELTA).as_dict()
        assert privacy["summary"] == expected
    page = client.get("/collections/p/dashboard", headers=rd)
    assert page.status_code == 200 and "Central privacy under shuffling" in page.text


def central_of(page: str) -> dict[str, float]:
    """{figure: ε} of the dashboard's central privacy table."""
    return {
        key: float(eps)
        for key, eps in re.findall(r'<tr data-figure="([a-z-]+)">.*?data-eps="([^"]+)"', page)
    }


def inline_data(page: str) -> dict:
    return json.loads(
        re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1)
    )


def test_collection_page_shows_the_central_privacy(tmp_path):
    """Epochs of 300, 120 and 200 reports: the figures are central_summary's at n = 120, τ = 3, on
    the page, in its inline data and in GET …/privacy; the page words the memo budget for
    devices whose values change at the same epochs."""
    proto = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
    client = make(tmp_path)
    info = create(client, "c", proto.spec(), auth="shared")
    rng = np.random.default_rng(2)
    for epoch, n in ((0, 300), (1, 120), (2, 200)):
        reps = proto.perturb(inputs(proto, n, rng), proto.new_memo(n), rng)
        body = records(new_ids(n, rng), [epoch] * n, wire_reports(proto, reps))
        assert upload(client, "c", info["ingest_token"], body).status_code == 200
    rd = bearer(info["read_token"])
    want = central_summary(proto, n=120, epochs=3, delta=1e-6)
    got = client.get("/v1/collections/c/privacy", headers=rd).json()
    assert got["status"] == "ok" and (got["n"], got["epochs"]) == (120, 3)
    assert got["summary"] == want.as_dict()
    assert got["total_reports"] == 620
    page = client.get("/collections/c/dashboard", headers=rd).text
    assert central_of(page) == {
        "per-report": want.per_report,
        "per-memo": want.per_memo,
        "device-local": want.collection_local,
        "per-epoch": want.per_epoch,
        "per-memo-shuffled": want.per_memo_shuffled,
        "collection": want.collection,
    }
    assert want.collection < want.collection_local  # the page shows a real amplification
    assert inline_data(page)["central"]["summary"] == want.as_dict()
    text = " ".join(page.split())
    assert "change at the same epochs" in text and "§17.6" in text
    assert "min(t·ε1, d·ε∞)" in text
    assert "shared token" in text  # who may rely on the shuffled figures


def test_a_linkable_collection_says_its_epochs_are_linked(tmp_path):
    """OLH reports carry the device's hash seed: the page and GET …/privacy say so, and the
    whole-collection figure is the shuffled device tuple's (2 reports at ε = 2: ε_L = 4),
    never the composition of the two epochs' shuffles, which a GRR collection gets."""
    client = make(tmp_path)
    figures = {}
    for name in ("OLH", "GRR"):
        proto = ll.protocol(name, k=8, eps=2.0)
        info = create(client, name.lower(), proto.spec(), auth="shared")
        rng = np.random.default_rng(3)
        memo = proto.new_memo(400)
        values = inputs(proto, 400, rng)
        for epoch in (0, 1):
            reps = proto.perturb(values, memo, rng)
            body = records(new_ids(400, rng), [epoch] * 400, wire_reports(proto, reps))
            assert upload(client, name.lower(), info["ingest_token"], body).status_code == 200
        rd = bearer(info["read_token"])
        got = client.get(f"/v1/collections/{name.lower()}/privacy", headers=rd).json()
        assert got["summary"] == central_summary(proto, n=400, epochs=2, delta=1e-6).as_dict()
        page = client.get(f"/collections/{name.lower()}/dashboard", headers=rd).text
        page = " ".join(page.split())
        figures[name] = (got, page)
    olh, olh_page = figures["OLH"]
    grr, grr_page = figures["GRR"]
    assert olh["summary"]["route"] == "tuple" and grr["summary"]["route"] == "epochs"
    assert olh["summary"]["collection"] == pytest.approx(clones_epsilon(4.0, 400, 1e-6), rel=1e-9)
    assert olh["summary"]["collection"] > grr["summary"]["collection"]
    assert "hash seed" in olh["note"] and "hash seed" in olh_page
    assert "links each device's reports" in olh_page
    assert "hash seed" not in grr["note"] and "links each device" not in grr_page


def test_device_collections_say_the_server_sees_identities(tmp_path):
    proto = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
    client = make(tmp_path)
    info = create(client, "d", proto.spec())
    got = client.get("/v1/collections/d/privacy", headers=bearer(info["read_token"])).json()
    assert "sees which device sent each report" in got["identity_note"]
    assert "one report per device and epoch, as the figures assume" in got["identity_note"]


def test_central_privacy_degrades_with_a_reason(tmp_path, monkeypatch):
    """No reports: no figures, and why. One report per epoch: figures, flagged as hiding
    little. SciPy missing: no figures, the install line, and still 200."""
    proto = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
    client = make(tmp_path)
    info = create(client, "s", proto.spec(), auth="shared")
    rd = bearer(info["read_token"])
    empty = client.get("/v1/collections/s/privacy", headers=rd).json()
    assert empty["status"] == "no-reports" and empty["summary"] is None
    page = client.get("/collections/s/dashboard", headers=rd).text
    assert 'data-status="no-reports"' in page and "No reports yet" in page
    rng = np.random.default_rng(4)
    reps = proto.perturb(inputs(proto, 1, rng), proto.new_memo(1), rng)
    body = records(new_ids(1, rng), [0], wire_reports(proto, reps))
    assert upload(client, "s", info["ingest_token"], body).status_code == 200
    small = client.get("/v1/collections/s/privacy", headers=rd).json()
    assert small["status"] == "small-n"
    assert small["summary"] == central_summary(proto, n=1, epochs=1, delta=1e-6).as_dict()
    assert "hides little" in small["note"]
    page = client.get("/collections/s/dashboard", headers=rd).text
    assert 'data-status="small-n"' in page and "hides little" in page

    central._summary.cache_clear()
    monkeypatch.setitem(sys.modules, "longldp.shuffle", None)  # as if SciPy were missing
    try:
        missing = client.get("/v1/collections/s/privacy", headers=rd)
        assert missing.status_code == 200
        assert missing.json()["status"] == "unavailable" and missing.json()["summary"] is None
        assert "longldp[shuffle]" in missing.json()["note"]
        page = client.get("/collections/s/dashboard", headers=rd)
        assert page.status_code == 200 and 'data-status="unavailable"' in page.text
    finally:
        central._summary.cache_clear()


def test_privacy_needs_a_read_token(tmp_path):
    proto = ll.protocol("GRR", k=4, eps=1.0)
    client = make(tmp_path)
    info = create(client, "t", proto.spec(), auth="shared")
    for token in (info["ingest_token"], "wrong"):
        r = client.get("/v1/collections/t/privacy", headers=bearer(token))
        assert r.status_code in (401, 403, 404), r.text
    assert client.get("/v1/collections/t/privacy", headers=bearer(ADMIN)).status_code == 200


def test_rappor_answers_are_windowed_over_bits_with_every_cohort(tmp_path):
    """RAPPOR's (m, k) Bloom shares: ``offset``/``count`` pick bits (the last axis) for all m
    cohorts, and the answer cap counts m numbers per bit."""
    spec = {"name": "RAPPOR", "params": {"k": 16, "h": 2, "m": 64, "f": 0.5, "p": 0.5, "q": 0.75}}
    proto = ll.protocol_from_spec(spec)
    client = make(tmp_path, Limits(max_answer_values=192))
    info = create(client, "r", spec, auth="shared")
    rng = np.random.default_rng(9)
    n = 3000  # every cohort gets reports: no NaN to compare
    reps = proto.perturb(inputs(proto, n, rng), proto.new_memo(n), rng)
    wires = wire_reports(proto, reps)
    body = records(new_ids(n, rng), [0] * n, wires)
    assert upload(client, "r", info["ingest_token"], body).status_code == 200
    agg = proto.aggregator()
    agg.add_bytes(wires)
    full = agg.estimate_with_se()
    assert np.all(np.isfinite(full.se))
    rd = bearer(info["read_token"])
    got = client.get("/v1/collections/r/epochs/0/estimate?offset=2&count=2", headers=rd).json()
    assert np.shape(got["raw"]) == (64, 2)
    assert got["raw"] == full.raw[:, 2:4].tolist() and got["se"] == full.se[:, 2:4].tolist()
    assert got["values"] == {"offset": 2, "count": 2, "total": 16, "truncated": True}
    capped = client.get("/v1/collections/r/epochs/0/estimate", headers=rd).json()
    assert capped["values"]["count"] == 192 // 64  # 3 bits × 64 cohorts = 192 numbers
    assert capped["estimate"] == full.estimate[:, :3].tolist()
    series = client.get("/v1/collections/r/series", headers=rd).json()
    assert series["values"]["count"] == 3 and np.shape(series["epochs"][0]["raw"]) == (64, 3)
