"""``longldp audit``: the table, the exit codes, JSON and the positive controls."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from longldp.cli import app

runner = CliRunner()
SMALL = ["--trials", "4000", "--lifetime-trials", "2000", "--seed", "1"]


@pytest.mark.slow
def test_audit_passes_an_honest_protocol():
    args = ["audit", "L-OSUE", "--k", "4", "--eps-perm", "2", "--eps-1", "0.8", "--taus", "1,8"]
    result = runner.invoke(app, [*args, "--pattern", "both", *SMALL])
    assert result.exit_code == 0, result.output
    assert "No claim refuted" in result.output and "alternating" in result.output


def test_audit_refutes_the_misencoded_client_with_exit_1():
    args = ["audit", "OUE", "--k", "4", "--eps", "1", "--control", "misencoded", "--taus", "1"]
    result = runner.invoke(app, [*args, *SMALL, "--trials", "20000"])
    assert result.exit_code == 1, result.output
    assert "refuted" in result.output


def test_audit_json_and_loose_paper_calibration():
    args = ["audit", "L-GRR", "--k", "8", "--eps-perm", "2", "--eps-1", "0.8"]
    args += ["--param", "calibration=paper", "--claim-eps-1", "0.8", "--taus", "4", "--json"]
    result = runner.invoke(app, [*args, *SMALL])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["loose"] is True and data["violations"] == []
    assert data["exact_single"] < 0.8 and data["lifetime"][0]["tau"] == 4


def test_audit_bad_input_is_one_line_and_exit_2():
    result = runner.invoke(app, ["audit", "L-GRR", "--eps-perm", "2", "--eps-1", "3"])
    assert result.exit_code == 2
    assert "eps_1" in result.output
    result = runner.invoke(app, ["audit", "GRR", "--eps", "1", "--param", "oops"])
    assert result.exit_code == 2 and "NAME=VALUE" in result.output
