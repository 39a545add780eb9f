"""The ``attacks`` study kind: a tiny poisoning study through the runner, its rows and plots."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from longldp.cli import app
from longldp.experiments import parse_study
from longldp.experiments.kinds import attacks as ak
from study_helpers import run_study_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "attacks_tiny.toml"
STUDIES = ("attacks_count", "attacks_reports", "attacks_detect")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[pa.Table, Path]:
    out = tmp_path_factory.mktemp("attacks")
    return run_study_cli(TINY, out, "attacks"), out


def test_tiny_rows(tiny) -> None:
    table, _ = tiny
    expected = {f.name for f in ak.COLUMNS} | {"study", "kind", "status", "spawn_key"}
    assert expected <= set(table.column_names)
    rows = table.to_pylist()
    # 1 rep × 3 protocols × 2 β × 2 attacks × 3 variants × 7 defences
    assert len(rows) == 3 * 2 * 2 * 3 * 7
    ok = [r for r in rows if r["status"] == "ok"]
    skipped = {r["skip_reason"] for r in rows if r["status"] == "skipped"}
    assert any("memo mimicry crafts a memo with MGA only" in s for s in skipped)
    assert any("one-shot" in s for s in skipped)  # memo consistency on GRR
    assert any("supports one item" in s for s in skipped)  # detection on GRR, L-GRR
    # Every protocol runs at ε1 per report: one-shot oracles at ε = α·ε∞ (same budget).
    assert all(abs(r["eps_report"] - r["eps_1"]) < 1e-6 for r in ok)
    # Undefended MGA gains are near their closed form, and positive.
    for r in ok:
        if r["defence"] == "none" and r["attack"] == "MGA":
            assert r["gain"] > 0 and r["expected_gain"] > 0
            assert abs(r["gain"] - r["expected_gain"]) < 0.5 * r["expected_gain"] + 0.05
    # The memo defence removes replayed MGA on the chains (τ = 12, β = 0.1).
    memo = [
        r
        for r in ok
        if r["defence"] == "memo"
        and r["variant"] == "persistent"
        and r["attack"] == "MGA"
        and r["protocol"] == "L-GRR"
    ]
    assert memo and all(abs(r["gain"]) < 0.1 for r in memo)


def test_tiny_plot(tiny, tmp_path) -> None:
    _, out = tiny
    result = CliRunner().invoke(app, ["plot", str(out / "results.parquet"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())


@pytest.mark.parametrize("name", STUDIES)
def test_committed_studies_parse(name: str) -> None:
    path = ROOT / "experiments" / f"{name}.toml"
    study = parse_study(tomllib.loads(path.read_text()), str(path))
    assert len(ak.cells(study)) > 0


def test_bad_study_keys() -> None:
    base = tomllib.loads(TINY.read_text())
    with pytest.raises(ValueError, match="'beta'"):
        parse_study(dict(base, beta=[0.0, 0.1]), "bad.toml")
    with pytest.raises(ValueError, match="'defences'"):
        parse_study(dict(base, defences=["magic"]), "bad.toml")
    with pytest.raises(ValueError, match="'targets'"):
        parse_study(dict(base, targets=16), "bad.toml")
    with pytest.raises(ValueError, match="'variants'"):
        parse_study(dict(base, variants=["sometimes"]), "bad.toml")
    for bad in ([2, 16], [2, 2], [], 0, [1.5]):
        with pytest.raises(ValueError, match="'targets'"):
            parse_study(dict(base, targets=bad), "bad.toml")
    with pytest.raises(ValueError, match="'hash_trials'"):
        parse_study(dict(base, hash_trials=[100, 0]), "bad.toml")
    for bad in (0, 1.0, -0.1):
        with pytest.raises(ValueError, match="'detect_fpr'"):
            parse_study(dict(base, detect_fpr=bad), "bad.toml")


def test_targets_and_hash_trials_lists_are_axes() -> None:
    """A list is an axis after the variant (its index ends the spawn key); one integer is a
    fixed parameter, so a study written with one value keeps its cells and streams."""
    base = tomllib.loads(TINY.read_text())
    plain = ak.cells(parse_study(base, "tiny.toml"))
    both = ak.cells(parse_study(dict(base, targets=[2, 3], hash_trials=[20, 50]), "x.toml"))
    assert len(both) == 4 * len(plain)
    assert [c.spawn_key for c in both[::4]] == [(*c.spawn_key, 0, 0) for c in plain]
    got = {(c.params["targets"], c.params["hash_trials"]) for c in both}
    assert got == {(2, 20), (2, 50), (3, 20), (3, 50)}
    assert all(c.params["detect_fpr"] == 0.01 for c in plain)
