"""The heavy_hitters study kind (experiments/kinds/heavy_hitters.py): the tiny study runs, its
grid and rows, and bad study keys are refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from longldp.experiments import parse_study, run_study
from longldp.experiments.config import load_study

ROOT = Path(__file__).resolve().parents[1]


def test_the_tiny_study_runs_and_scores_every_cell(tmp_path):
    study = load_study(ROOT / "experiments" / "heavy_hitters_tiny.toml")
    cells = study.study_kind.cells(study)
    spec = study.spec
    assert len(cells) == len(spec.datasets) * study.repetitions * len(spec.n) * len(
        spec.methods
    ) * len(spec.eps)
    run_study(study, out=tmp_path / "run", workers=1)
    rows = pq.read_table(tmp_path / "run" / "results.parquet").to_pylist()
    assert len(rows) == len(cells) and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert 0 <= r["recall"] <= 1 and 0 <= r["precision"] <= 1 and 0 <= r["ncr"] <= 1
        assert r["returned"] <= r["k"] and r["false_items"] <= r["returned"]
        assert r["epsilon_per_user"] == pytest.approx(r["eps"])
        assert r["sure_found"] <= r["sure_items"]  # threshold selection: stated items counted
    pem = {r["dataset"]: r for r in rows if r["method"] == "pem"}
    assert pem["zipf24"]["recall"] >= 0.6  # the top of a Zipf(1.2) law at ε = 4, n = 3000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"datasets": [{"name": "nope"}]}, "'name' must be one of"),
        ({"datasets": [{"name": "english-words", "length": 13}]}, "at most 12 letters"),
        ({"fdr_alpha": 1.5}, "'fdr_alpha' must be a number in \\(0, 1\\)"),
        ({"n": [0]}, "'n' must be a non-empty list of distinct integers >= 1"),
        ({"methods": ["pem", "x"]}, "'methods' must be a non-empty list"),
    ],
)
def test_bad_keys_are_refused_naming_the_key(change, message):
    doc = {
        "name": "t", "kind": "heavy_hitters", "seed": 1, "repetitions": 1, "eps": [1.0],
        "n": [100], "datasets": [{"name": "zipf", "bits": 16, "support": 50}],
    }  # fmt: skip
    with pytest.raises(ValueError, match=message):
        parse_study({**doc, **change})


def test_the_docs_show_what_the_committed_results_say():
    """docs/heavy_hitters.md's generated blocks (the study's findings, the benchmarks' table and
    targets, the pure-ldp comparison) are what experiments/report_heavy_hitters.py derives from
    the committed results (never typed in); a page without the markers is refused."""
    import runpy

    script = runpy.run_path(str(ROOT / "experiments" / "report_heavy_hitters.py"))
    text = script["DOC"].read_text()
    assert script["page"](text) == text, "docs/heavy_hitters.md: run report_heavy_hitters.py"
    means, axes = script["_means"](script["RESULTS"])
    assert "| pem |" in script["findings"](means, axes)
    with pytest.raises(ValueError, match="markers"):
        script["with_block"]("no markers here", script["STUDY"], "x")


def test_the_docs_examples_run():
    """The Python examples of docs/heavy_hitters.md run as written (HCMS queried for items,
    PEM found the four words)."""
    import re

    text = (ROOT / "docs" / "heavy_hitters.md").read_text(encoding="utf-8")
    scope: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        exec(compile(block, "docs/heavy_hitters.md", "exec"), scope)
    assert abs(scope["est"].raw[0] - 0.4) <= 5 * scope["est"].se[0]
    assert sorted(scope["found"].items) == ["apple", "fig", "kiwi", "pear"]
