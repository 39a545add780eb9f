"""Defences where a deployment runs them: `longldp aggregate --defence` over a report archive
with a device column (docs/attacks.md §9)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp import attacks as atk
from longldp.archive import simulate_reports
from longldp.attacks.archive import defended_rows, read_device_reports, write_device_archive
from longldp.attacks.defences import defended_estimates, memo_consistency
from longldp.cli import app

K = 8
F = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])


def _attacked_archive(tmp_path, name="L-GRR"):
    proto = ll.protocol(name, k=K, eps_perm=2.0, eps_1=1.0)
    values = np.tile(np.repeat(np.arange(K), (F * 4000).astype(int)), (20, 1))
    threat = atk.ThreatModel(targets=[6, 7], beta=0.05)
    run = atk.run_attack(
        proto, threat, "MGA", values=values, engine="reports", variant="persistent", rng=4
    )
    path = write_device_archive(tmp_path / "attacked.parquet", proto, run.log, rng=5)
    return proto, run, path


def test_archive_round_trip_and_memo_defence(tmp_path):
    proto, run, path = _attacked_archive(tmp_path)
    got_proto, dev, ep, rec = read_device_reports(path)
    assert got_proto.spec() == proto.spec()
    assert np.array_equal(dev, run.log.device) and np.array_equal(ep, run.log.epoch)
    assert np.array_equal(rec, run.log.records)
    _, rows, summary = defended_rows(path, "memo")
    verdict = memo_consistency(proto, run.log.device, run.log.records)
    direct = defended_estimates(proto, verdict, run.log.epoch, run.log.records)
    est = np.array([r["estimate"] for r in rows]).reshape(20, K)
    assert np.allclose(est, direct)
    assert summary["flagged_devices"] >= run.m  # every replaying device, plus honest FPs
    # The replayed MGA is gone: the targets' time-averaged estimate is back near the truth.
    assert abs(est.mean(axis=0)[[6, 7]].sum() - F[[6, 7]].sum()) < 0.03
    assert run.after.mean(axis=0)[[6, 7]].sum() > F[[6, 7]].sum() + 0.15


def test_cli_aggregate_with_defence(tmp_path):
    _, _, path = _attacked_archive(tmp_path)
    out = tmp_path / "defended.json"
    result = CliRunner().invoke(
        app, ["aggregate", str(path), "--defence", "memo", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "defence 'memo'" in result.output
    rows = json.loads(out.read_text())
    assert len(rows) == 20 * K and {"estimate", "se", "lower", "upper"} <= set(rows[0])
    normal = CliRunner().invoke(app, ["aggregate", str(path), "--defence", "normalize"])
    assert normal.exit_code == 0, normal.output


def test_cli_refuses_without_device_column_or_applicable_defence(tmp_path):
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    plain = tmp_path / "plain.parquet"
    simulate_reports(proto, plain, n=500, epochs=2, rng=1)
    result = CliRunner().invoke(app, ["aggregate", str(plain), "--defence", "memo"])
    assert result.exit_code == 2 and "no 'device' column" in result.output
    bad = CliRunner().invoke(app, ["aggregate", str(plain), "--defence", "magic"])
    assert bad.exit_code == 2 and "'--defence' must be one of" in bad.output
    oue = ll.protocol("OUE", k=K, eps=1.0)
    log = atk.collect_reports(oue, np.zeros((2, 50), dtype=np.int64), rng=0)
    one_shot = write_device_archive(tmp_path / "oue.parquet", oue, log)
    with pytest.raises(ValueError, match="one-shot"):
        defended_rows(one_shot, "memo")
