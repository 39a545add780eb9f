"""``longldp audit``: the table, the exit codes, JSON and the positive controls."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.audit import claimed_epsilon, exec_randomizer
from longldp.cli import app

runner = CliRunner()
SMALL = ["--trials", "4000", "--lifetime-trials", "2000", "--seed", "1"]


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
    assert "'--eps-1' must be" in result.output  # the option typed, not the library's name
    result = runner.invoke(app, ["audit", "GRR", "--eps", "1", "--param", "oops"])
    assert result.exit_code == 2 and "NAME=VALUE" in result.output


# ---------------------------------------------------------------------- --exec: any client


NODE_CLIENT = Path(__file__).parent / "clients" / "lgrr_client.js"


def _node() -> str:
    """The node binary. The tests that call this carry the ``node`` marker: without node they
    fail under CI=true and skip elsewhere (tests/conftest.py)."""
    node = shutil.which("node")
    assert node is not None, "a test that runs node must carry @pytest.mark.node"
    return node


def _node_command(proto, *extra: str) -> str:
    p2 = f" --p2 {proto.p2!r}" if proto.longitudinal else ""
    return (
        f"{_node()} {NODE_CLIENT} --k {proto.k} --p1 {proto.p1!r}{p2} "
        f"--header {proto.wire_header.hex()} " + " ".join(extra)
    )


@pytest.mark.node
def test_exec_audits_a_node_client_that_writes_wire_format():
    proto = ll.protocol("GRR", k=4, eps=1.0)
    cmd = _node_command(proto)
    # The Node client's reports are genuine wire-format reports of this protocol.
    rows = exec_randomizer(cmd, 4)(np.array([0, 1, 2, 3, 3]), None)
    assert proto.decode_reports(rows.tobytes()).shape == (5,)
    args = ["audit", "--exec", cmd, "--k", "4", "--claim", "1", "--trials", "6000"]
    result = runner.invoke(app, [*args, "--seed", "1", "--no-classifier"])
    assert result.exit_code == 0, result.output
    assert "No claim refuted" in result.output


@pytest.mark.node
def test_exec_refutes_a_node_client_with_a_leak():
    cmd = _node_command(ll.protocol("GRR", k=4, eps=1.0), "--leak", "2")
    args = ["audit", "--exec", cmd, "--k", "4", "--claim", "1", "--trials", "6000", "--json"]
    result = runner.invoke(app, [*args, "--seed", "1", "--no-classifier"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert data["audits"][0]["violates"] and 2 in data["audits"][0]["pair"]


@pytest.mark.node
def test_exec_lifetime_of_a_node_client_with_memos():
    proto = ll.protocol("L-GRR", k=4, eps_perm=1.0, eps_1=0.5)
    claim = claimed_epsilon(proto, 20)
    args = ["audit", "--exec", _node_command(proto), "--k", "4", "--claim", str(claim)]
    args += ["--tau", "20", "--trials", "2000", "--seed", "2", "--no-classifier"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "lifetime" in result.output and "No claim refuted" in result.output


SCRIPT = [sys.executable, "-c"]


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("import sys; sys.stderr.write('boom\\n'); sys.exit(3)", "exited with status 3: boom"),
        ("print('zz')", "wrote 1 report lines for"),
        (
            "import sys\nfor i, _ in enumerate(sys.stdin): print('ab' if i else 'abcd')",
            "varying width",
        ),
        ("import sys\nfor _ in sys.stdin: print('zz')", "not a report in hexadecimal"),
    ],
)
def test_exec_bad_commands_are_one_line_and_exit_2(program, message):
    cmd = shlex.join([*SCRIPT, program])
    args = ["audit", "--exec", cmd, "--k", "3", "--claim", "1", "--trials", "100"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.output.count("error:") == 1


def test_exec_needs_a_claim_and_a_command():
    result = runner.invoke(app, ["audit", "--exec", "true", "--k", "3"])
    assert result.exit_code == 2 and "--claim" in result.output
    result = runner.invoke(
        app, ["audit", "--exec", "no-such-client-xyz", "--k", "3", "--claim", "1"]
    )
    assert result.exit_code == 2 and "not found" in result.output
    result = runner.invoke(app, ["audit", "--k", "3"])
    assert result.exit_code == 2 and "PROTOCOL" in result.output


def test_blackbox_audits_a_registered_protocol():
    args = ["audit", "L-OSUE", "--k", "4", "--eps-perm", "2", "--eps-1", "1", "--blackbox"]
    result = runner.invoke(app, [*args, "--trials", "4000", "--taus", "6", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "one report" in result.output and "lifetime" in result.output


def test_blackbox_audits_a_protocol_without_k():
    """RAPPOR-boolean has one bit and no k: --blackbox builds it as the game does (it failed
    with "unknown parameter(s) k" through a stale branch for an 'encoder' option)."""
    args = ["audit", "RAPPOR-boolean", "--blackbox", "--trials", "2000", "--taus", "4"]
    result = runner.invoke(app, [*args, "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "RAPPOR-boolean" in result.output and "one report" in result.output


def test_exec_without_k_is_refused_in_one_line():
    """--exec needs the client's domain size: no silent k = 8."""
    result = runner.invoke(app, ["audit", "--exec", "true", "--claim", "1"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "'--k'" in lines[0]
