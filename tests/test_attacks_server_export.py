"""The memo-consistency defence where a deployment runs it: reports uploaded by enrolled
devices to the collection server, exported per epoch with device ids (`?devices=true`), and
defended by `longldp aggregate --defence memo` (docs/attacks.md §9, docs/server.md)."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import longldp as ll
from longldp import attacks as atk
from longldp.attacks.archive import defended_rows, write_device_archive
from longldp.cli import app
from longldp.server import build_app
from server_helpers import ADMIN, bearer, new_ids, records, wire_reports

K, EPOCHS = 8, 8  # 8 epochs: the most one request may name (docs/server.md, Bounds)
F = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
OCTET = "application/octet-stream"
SPEC = {"name": "L-GRR", "params": {"k": K, "eps_perm": 2.0, "eps_1": 1.0}}


@pytest.mark.slow
def test_server_export_feeds_the_memo_defence(tmp_path):
    proto = ll.protocol_from_spec(SPEC)
    values = np.tile(np.repeat(np.arange(K), (F * 500).astype(int)), (EPOCHS, 1))
    threat = atk.ThreatModel(targets=[6, 7], beta=0.05)
    run = atk.run_attack(
        proto, threat, "MGA", values=values, engine="reports", variant="persistent", rng=4
    )
    log = run.log
    client = TestClient(build_app(f"sqlite:///{tmp_path / 'c.db'}", ADMIN))
    col = client.post(
        "/v1/collections",
        json={"name": "att", "protocol": SPEC, "first_epoch": 0},
        headers=bearer(ADMIN),
    ).json()
    wires = wire_reports(proto, log.records)
    rng = np.random.default_rng(11)
    for device in np.unique(log.device):  # each device enrolls, then uploads its history
        cred = client.post("/v1/collections/att/devices", headers=bearer(col["enroll_token"]))
        assert cred.status_code == 201, cred.text
        rows = np.flatnonzero(log.device == device)
        body = records(new_ids(len(rows), rng), log.epoch[rows], [wires[i] for i in rows])
        answer = client.post(
            "/v1/collections/att/reports",
            content=body,
            headers={**bearer(cred.json()["credential"]), "Content-Type": OCTET},
        )
        assert answer.status_code == 200, answer.text
    folder = tmp_path / "export"
    folder.mkdir()
    for epoch in range(EPOCHS):
        url = f"/v1/collections/att/epochs/{epoch}/reports.parquet?devices=true"
        got = client.get(url, headers=bearer(ADMIN))
        assert got.status_code == 200, got.text
        table = pq.read_table(io.BytesIO(got.content))
        assert "device" in table.column_names
        (folder / f"epoch-{epoch}.parquet").write_bytes(got.content)

    out = tmp_path / "defended.json"
    result = CliRunner().invoke(
        app, ["aggregate", str(folder), "--defence", "memo", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    est = np.array([r["estimate"] for r in json.loads(out.read_text())]).reshape(EPOCHS, K)
    # The same defence on the simulator's own archive of the same reports: the server path
    # (enrollment, device-scoped storage, export) changes nothing but the device labels.
    direct = write_device_archive(tmp_path / "direct.parquet", proto, log, rng=5)
    _, rows, summary = defended_rows(direct, "memo")
    expected = np.array([r["estimate"] for r in rows]).reshape(EPOCHS, K)
    assert np.allclose(est, expected, rtol=0, atol=1e-12)
    assert summary["flagged_devices"] >= run.m  # every replaying device, plus honest FPs
    # Undefended, the persistent MGA lifts the targets far above the truth; defended, most of
    # the lift is gone.
    lift = run.after.mean(axis=0)[[6, 7]].sum() - F[[6, 7]].sum()
    assert lift > 0.15
    assert est.mean(axis=0)[[6, 7]].sum() - F[[6, 7]].sum() < lift / 3
