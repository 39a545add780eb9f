"""The small CLI commands: protocols, datasets, allomfree-tables (run/plot: test_experiments)."""

from __future__ import annotations

from typer.testing import CliRunner

from longldp.cli import app

runner = CliRunner()


def test_protocols_command_lists_every_protocol():
    result = runner.invoke(app, ["protocols", "--k", "20", "--eps-perm", "1", "--alpha", "0.5"])
    assert result.exit_code == 0, result.output
    for name in ("GRR", "L-OSUE", "OLOLOHA", "dBitFlipPM"):
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
    from pathlib import Path

    results = Path(__file__).parents[1] / "experiments/results/allomfree/results.parquet"
    out = tmp_path / "gains.md"
    result = runner.invoke(app, ["allomfree-gains", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "12.93" in out.read_text()  # the paper's number, printed beside ours
    bad = runner.invoke(app, ["allomfree-gains", str(tmp_path / "missing.parquet")])
    assert bad.exit_code != 0
