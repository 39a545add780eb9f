"""The small CLI commands: protocols, datasets, allomfree-tables (run/plot: test_experiments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import longldp
from longldp.cli import app

runner = CliRunner()


@pytest.mark.slow
def test_protocols_command_lists_every_protocol():
    args = ["protocols", "--k", "20", "--eps-perm", "1", "--alpha", "0.5"]
    result = runner.invoke(app, args, env={"COLUMNS": "400"})  # no name wrapped in a cell
    assert result.exit_code == 0, result.output
    for name in longldp.protocols.NAMES:
        assert name in result.output


def test_protocols_command_reports_unreachable_alpha():
    result = runner.invoke(app, ["protocols", "--k", "20", "--eps-perm", "1", "--alpha", "0.9"])
    assert result.exit_code == 0, result.output
    assert "eps_1" in result.output  # L-OUE / L-SOUE cannot reach α = 0.9: said, not hidden


def test_datasets_command():
    result = runner.invoke(app, ["datasets"])
    assert result.exit_code == 0, result.output
    assert "adult" in result.output


def test_allomfree_tables_agree_with_the_paper():
    result = runner.invoke(app, ["allomfree-tables"])
    assert result.exit_code == 0, result.output
    assert "Agreement with the paper's printed cells: 188/188." in result.output
    bad = runner.invoke(app, ["allomfree-tables", "--calibration", "nope"])
    assert bad.exit_code == 2


def test_allomfree_gains_command(tmp_path):
    results = Path(__file__).parents[1] / "experiments/results/allomfree/results.parquet"
    out = tmp_path / "gains.md"
    result = runner.invoke(app, ["allomfree-gains", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "12.93" in out.read_text()  # the paper's number, printed beside ours
    bad = runner.invoke(app, ["allomfree-gains", str(tmp_path / "missing.parquet")])
    assert bad.exit_code != 0


# Bad input: every command answers a ValueError with one line on stderr and exit code 2
# (on the old main `protocols --n 0` and `demo --seed -1` printed tracebacks and
# `protocols --k 1` exited 0 with the error in every cell).
@pytest.mark.parametrize(
    "args",
    [
        ["protocols", "--n", "0"],
        ["protocols", "--k", "1"],
        ["protocols", "--alpha", "1.5"],
        ["demo", "--seed", "-1"],
        ["allomfree-tables", "--calibration", "nope"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


def test_every_command_and_sub_group_shares_the_error_rule():
    """The rule lives in the top-level group, so a sub-group added later gets it too."""
    from longldp.cli._common import ErrorsAsExit

    top = typer.Typer(cls=ErrorsAsExit)
    sub = typer.Typer()

    @sub.command("boom")
    def boom() -> None:
        raise ValueError("bad\nthing")

    @top.command("other")
    def other() -> None:  # pragma: no cover - present so that 'sub' stays a sub-group
        pass

    top.add_typer(sub, name="sub")
    result = runner.invoke(top, ["sub", "boom"])
    assert result.exit_code == 2
    assert result.stderr == "error: bad thing\n"


def test_version_and_python_dash_m():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"longldp {longldp.__version__}"
    src = Path(__file__).parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "longldp", "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"longldp {longldp.__version__}"
