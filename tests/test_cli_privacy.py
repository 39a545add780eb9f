"""``longldp privacy`` and the shuffled columns of ``longldp protocols`` (docs/math.md §17)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp import shuffle as sh
from longldp.cli import app

runner = CliRunner()


def test_privacy_prints_every_scope():
    args = ["privacy", "L-GRR", "k=74", "eps_perm=2", "eps_1=0.8", "--n", "100000"]
    result = runner.invoke(app, [*args, "--epochs", "100", "--delta", "1e-6"])
    assert result.exit_code == 0, result.output
    for scope in ("per report (LDP)", "per memo (LDP)", "per epoch, shuffled", "whole collection"):
        assert scope in result.output
    shuffled_memo = sh.clones_epsilon(2.0, 100_000, 1e-6)
    assert f"{shuffled_memo:.4g}" in result.output  # the collection costs the shuffled ε∞ once
    assert "route: memo" in result.output and "trusted shuffler" in result.output


def test_privacy_json_matches_central_summary():
    args = ["privacy", "OUE", "k=16", "eps=1.0", "--n", "5000", "--epochs", "10", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    want = sh.central_summary(ll.protocol("OUE", k=16, eps=1.0), 5000, 10, 1e-6)
    assert got["collection"] == want.collection and got["per_memo"] is None
    assert {r["name"] for r in got["routes"]} == {"epochs", "tuple"}


@pytest.mark.parametrize(
    "args",
    [
        ["privacy", "L-GRR", "k=8", "eps_perm=2", "eps_1=0.8", "--n", "0"],
        ["privacy", "L-GRR", "k=8", "eps_perm=2", "eps_1=0.8", "--delta", "0"],
        ["privacy", "L-GRR", "k=8", "eps_perm=2", "eps_1=0.8", "--delta", "1"],
        ["privacy", "L-GRR", "k=8", "eps_perm=2", "eps_1=0.8", "--memos", "200"],
        ["privacy", "GRR", "k=8", "eps=0"],
        ["privacy", "GRR", "k=8", "eps=-1"],
        ["privacy", "GRR", "k=8"],
        ["privacy", "GRR", "k=8", "eps"],
        ["privacy", "NOPE", "k=8", "eps=1"],
        ["protocols", "--delta", "2"],
        ["protocols", "--epochs", "0"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


def test_protocols_shows_the_shuffled_figures_at_its_n():
    result = runner.invoke(
        app,
        ["protocols", "--k", "20", "--n", "20000", "--epochs", "3", "--delta", "1e-5"],
        env={"COLUMNS": "220"},  # every header on one line
    )
    assert result.exit_code == 0, result.output
    assert "ε epoch shuffled" in result.output and "τ = 3" in result.output
    chain = sh.central_summary(ll.protocol("L-OSUE", k=20, eps_perm=2, eps_1=0.8), 20000, 3, 1e-5)
    assert f"{chain.per_epoch:.4g}" in result.output
    assert f"{chain.collection:.4g}" in result.output


def test_protocols_shows_what_persists_and_the_linked_collection_figure():
    result = runner.invoke(
        app,
        ["protocols", "--k", "20", "--n", "20000", "--epochs", "3", "--delta", "1e-5"],
        env={"COLUMNS": "220"},
    )
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if "│" in line}
    assert "seed" in rows["OLH"] and "row+memo" in rows["L-SH"] and "cohort" in rows["RAPPOR"]
    # OLH's seed links its epochs: its collection figure is the shuffled tuple of 3 reports,
    # ε_L = 3·ε, never the composition of per-epoch shuffles that GRR (nothing persists) gets.
    olh = sh.central_summary(ll.protocol("OLH", k=20, eps=2.0), 20000, 3, 1e-5)
    grr = sh.central_summary(ll.protocol("GRR", k=20, eps=2.0), 20000, 3, 1e-5)
    assert olh.route == "tuple" and grr.route == "epochs"
    assert olh.collection == pytest.approx(sh.clones_epsilon(3 * 2.0, 20000, 1e-5), rel=1e-9)
    assert olh.collection > grr.collection
    assert f"{olh.collection:.4g}" in rows["OLH"] and f"{grr.collection:.4g}" in rows["GRR"]


def test_privacy_of_a_linkable_protocol_names_the_link_and_drops_the_epochs_route():
    args = ["privacy", "OLH", "k=74", "eps=0.8", "--n", "1000000", "--epochs", "100"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["linked_by"] == ["hash seed"] and got["route"] == "tuple"
    assert {r["name"] for r in got["routes"]} == {"tuple"}
    assert {e["route"] for e in got["excluded"]} == {"memo", "epochs"}
    # No amplification is left for 100 linked reports at ε = 0.8 (e^80 ≫ n): ε_L itself.
    assert got["collection"] == pytest.approx(80.0, abs=1e-5)
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "route epochs: not valid here" in table.output and "hash seed" in table.output
