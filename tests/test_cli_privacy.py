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
        app, ["protocols", "--k", "20", "--n", "20000", "--epochs", "3", "--delta", "1e-5"]
    )
    assert result.exit_code == 0, result.output
    assert "ε epoch shuffled" in result.output and "τ = 3" in result.output
    chain = sh.central_summary(ll.protocol("L-OSUE", k=20, eps_perm=2, eps_1=0.8), 20000, 3, 1e-5)
    assert f"{chain.per_epoch:.4g}" in result.output
    assert f"{chain.collection:.4g}" in result.output
