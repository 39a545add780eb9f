"""The ``numeric`` and ``mixed`` study kinds: their tiny studies run end to end, and their rows
agree with independent expectations (docs/numeric.md, study design)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from longldp.experiments.runner import run_study

ROOT = Path(__file__).resolve().parents[1]


def run(name: str, out: Path):  # type: ignore[no-untyped-def]
    return run_study(ROOT / "experiments" / name, out, workers=1, progress=False)


def rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_numeric_tiny(tmp_path):
    report = run("numeric_tiny.toml", tmp_path)
    got = rows(report.path)
    assert report.rows == len(got) == 40
    one = [r for r in got if r["family"] == "one-shot"]
    # squared errors of unbiased means: their mean over the cells is of the order of the exact
    # variance (a loose check across heterogeneous cells: within a factor 4 on average)
    ratio = np.mean([r["sq_error"] for r in one]) / np.mean([r["expected_variance"] for r in one])
    assert 0.25 < ratio < 4.0
    sw = [r for r in one if r["mechanism"] == "SW"]
    assert all(r["w1"] is not None and r["w1"] >= 0 for r in sw)
    over = [r for r in got if r["family"] == "over-time"]
    skipped = [r for r in over if r["status_note"]]
    assert {(r["mechanism"], r["alpha"]) for r in skipped} == {("L-PM", 0.6)}
    for r in over:
        if r["status_note"]:
            continue
        bound = r["tau"] * r["eps_1"]  # never more than t·ε1
        assert r["max_spent_epsilon"] <= bound + 1e-9
        if r["mechanism"] != "HM" and r["regime"] == "static":
            assert r["max_spent_epsilon"] <= min(bound, 2 * r["eps_perm"]) + 1e-9
    again = run("numeric_tiny.toml", tmp_path)
    assert again.resumed == 40  # cells are pure functions: a rerun resumes them all


def test_mixed_tiny(tmp_path):
    report = run("mixed_tiny.toml", tmp_path)
    got = rows(report.path)
    assert len(got) == 12
    methods = {r["method"] for r in got}
    assert methods == {"sampling", "SPL", "SMP", "adaptive"}
    for r in got:
        assert r["error"] == pytest.approx(
            (
                r["numeric_error"] * r["d_numeric"]
                + r["categorical_error"] * (r["d"] - r["d_numeric"])
            )
            / r["d"]
        )
        if r["eps"] is not None:
            assert r["max_spent_epsilon"] == pytest.approx(r["eps"] * r["tau"])
        else:  # over time: one attribute per user (SMP, adaptive) spends at most 2·ε1
            if r["method"] in ("SMP", "adaptive"):
                assert r["max_spent_epsilon"] <= r["tau"] * r["eps_perm"] * r["alpha"] + 1e-9
