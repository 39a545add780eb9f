"""The ``gfim`` study kind: GFIM and LDPMiner-SH studies through the runner, and their plots."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from longldp.cli import app
from longldp.experiments import parse_study
from longldp.experiments.kinds import gfim as gk
from study_helpers import run_study_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "gfim_tiny.toml"
STUDIES = ("gfim_synthetic", "gfim_census_k", "gfim_census_eps", "gfim_longitudinal")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[pa.Table, Path]:
    out = tmp_path_factory.mktemp("gfim")
    return run_study_cli(TINY, out, "GFIM"), out


@pytest.mark.slow
def test_tiny_rows_options_and_budget(tiny) -> None:
    table, _ = tiny
    expected = {f.name for f in gk.COLUMNS} | {"study", "kind", "status", "spawn_key"}
    assert expected <= set(table.column_names)
    # 3 datasets × 1 rep × 1 k × 4 methods × 2 ε (α only for the chain: one value)
    assert table.num_rows == 3 * 4 * 2
    rows = table.to_pylist()
    assert all(r["status"] == "ok" for r in rows)
    for r in rows:
        params = json.loads(r["params"])
        assert params["k"] == 3 and r["k_max"] == 6
        if r["app"] == "gfim":  # every option recorded with the result
            assert {"combine", "output", "phase2_codes"} <= set(params["gfim"])
            assert r["L2"] == (min(6, r["ell"]) if "min" in r["method"] else 6)
        # per timestamp: precision = |R∩T|/k over k = 3 reported items; averages over time
        hits = np.array(r["precision_t"]) * params["k"]
        assert np.allclose(hits, np.round(hits), rtol=0, atol=1e-9), r["precision_t"]
        assert r["precision"] == pytest.approx(np.mean(r["precision_t"]), rel=1e-12)
        assert r["re"] == pytest.approx(np.mean(r["re_t"]), rel=1e-12)
    chain = [r for r in rows if r["protocol"] == "L-SH"]
    for r in chain:  # per-user engine: memos and the spent budget are tracked
        assert r["memos_max"] <= 2
        # each user spends min(τ·ε1, memos·ε∞), increasing in memos: the max is at memos_max
        want = min(r["tau"] * r["eps_1"], r["memos_max"] * r["eps_perm"])
        assert r["eps_spent_max"] == pytest.approx(want, rel=1e-9)
    assert {r["tau"] for r in chain} == {1, 3}


@pytest.mark.slow
def test_tiny_plot(tiny, tmp_path) -> None:
    """The kind's defaults (one line per method, linear y) with the y column overridden."""
    _, out = tiny
    result = CliRunner().invoke(
        app, ["plot", str(out / "results.parquet"), "--out", str(tmp_path), "--y", "re"]
    )
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["re_alpha-0.5.png"]


@pytest.mark.parametrize("name", STUDIES)
def test_committed_studies_parse(name: str) -> None:
    path = ROOT / "experiments" / f"{name}.toml"
    study = parse_study(tomllib.loads(path.read_text()), str(path))
    assert study.repetitions >= 20
    assert len(gk.cells(study)) > 0


def test_bad_study_keys() -> None:
    base = tomllib.loads(TINY.read_text())
    bad = dict(base, methods=[{"app": "gfim", "combine": "average"}])
    with pytest.raises(ValueError, match="combine"):
        parse_study(bad, "bad.toml")
    bad = dict(base, methods=[{"app": "ldpminer-sh", "combine": "ivw"}])
    with pytest.raises(ValueError, match="takes no option"):
        parse_study(bad, "bad.toml")
    bad = dict(base, datasets=[{"source": "laplace"}])
    with pytest.raises(ValueError, match="'n'"):
        parse_study(bad, "bad.toml")
