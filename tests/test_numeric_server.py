"""A numeric collection on the server's dashboard (docs/numeric.md, docs/server.md): the mean
with its interval under the mean's words and label, a distribution's buckets under theirs, the
numbers those of the estimate endpoint, and the page's inline data strict JSON."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

import longldp as ll
from longldp.server import build_app
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

OCTET = "application/octet-stream"


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _collect(tmp_path, spec: dict, values: np.ndarray) -> tuple[TestClient, dict]:
    client = TestClient(build_app(str(tmp_path / "n.db"), ADMIN))
    r = client.post("/v1/collections", json={"name": "n", "protocol": spec, "auth": "shared"},
                    headers=bearer(ADMIN))  # fmt: skip
    assert r.status_code == 201, r.text
    info = r.json()
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(4)
    reps = proto.perturb(values, proto.new_memo(values.size), rng)
    body = records(new_ids(values.size, rng), [0] * values.size, wire_reports(proto, reps))
    r = client.post("/v1/collections/n/reports", content=body,
                    headers={**bearer(info["ingest_token"]), "Content-Type": OCTET})  # fmt: skip
    assert r.status_code == 200, r.text
    return client, info


@pytest.mark.parametrize("name", ["PM", "L-HM"])
def test_a_mean_is_shown_as_a_mean_with_its_interval(tmp_path, name):
    budget = {"eps": 2.0} if name == "PM" else {"eps_perm": 3.0, "eps_1": 1.0}
    spec = {"name": name, "params": {"lo": 0.0, "hi": 10.0, **budget}}
    values = np.random.default_rng(1).uniform(0.0, 10.0, 400)
    client, info = _collect(tmp_path, spec, values)
    rd = bearer(info["read_token"])
    est = client.get("/v1/collections/n/epochs/0/estimate?postprocess=none", headers=rd).json()
    page = client.get("/collections/n/dashboard", headers=rd).text
    assert "Estimated mean over epochs" in page and "Estimated frequency" not in page
    assert "Epoch 0: the estimated mean" in page
    row = re.search(r'<tr data-value="0"><td>(.*?)</td><td class="num" data-estimate="([^"]+)"',
                    page)  # fmt: skip
    assert row is not None and row.group(1) == "mean of [0, 10]"
    assert float(row.group(2)) == est["estimate"][0]
    assert f"[{est['lower'][0]:.4f}, {est['upper'][0]:.4f}]" in page
    data = _strict(re.search(r'<script id="data" type="application/json">(.*?)</script>', page,
                             re.S).group(1))  # fmt: skip
    assert data["series"][0]["label"] == "mean of [0, 10]"


@pytest.mark.parametrize("name", ["SW", "L-SW"])
def test_a_distribution_is_shown_by_buckets(tmp_path, name):
    budget = ({"eps": 2.0, "d": 8, "d_out": 16} if name == "SW"
              else {"eps_perm": 3.0, "eps_1": 1.0, "s": 4, "d_out": 16})  # fmt: skip
    spec = {"name": name, "params": {"lo": 0.0, "hi": 8.0, **budget}}
    proto = ll.protocol_from_spec(spec)
    values = np.random.default_rng(2).uniform(0.0, 8.0, 300)
    client, info = _collect(tmp_path, spec, values)
    page = client.get("/collections/n/dashboard", headers=bearer(info["read_token"])).text
    assert "Estimated distribution over epochs" in page
    data = _strict(re.search(r'<script id="data" type="application/json">(.*?)</script>', page,
                             re.S).group(1))  # fmt: skip
    labels = proto.estimate_labels()
    assert labels[0] == ("[0, 1)" if name == "SW" else "0")
    assert len(labels) == proto.estimate_shape[0]
    assert {s["label"] for s in data["series"]} <= set(labels)
    # EMS's standard error (math §20.14): a band around every drawn share
    for series in data["series"]:
        for lo, est, hi in zip(series["lower"], series["estimate"], series["upper"], strict=True):
            assert lo is not None and hi is not None and lo < est < hi


@pytest.mark.browser
def test_a_distribution_dashboard_draws_in_headless_chromium(tmp_path):
    """The page of an SW collection draws its lines and their interval bands (EMS's standard
    error, math §20.14) in chromium (the page is self-contained: loaded from a file)."""
    import subprocess

    from real_parts import CHROMIUM

    spec = {"name": "SW", "params": {"lo": 0.0, "hi": 8.0, "eps": 2.0, "d": 8, "d_out": 16}}
    values = np.random.default_rng(3).uniform(0.0, 8.0, 300)
    client, info = _collect(tmp_path, spec, values)
    page = tmp_path / "page.html"
    page.write_text(client.get("/collections/n/dashboard", headers=bearer(info["read_token"])).text)
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=3000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    drawn = re.search(r'<svg id="chart"[^>]*data-rendered="(\d+)"', dom)
    assert drawn is not None and int(drawn.group(1)) >= 1, "the script did not draw the chart"
    assert 'class="interval"' in dom and 'class="point"' in dom
