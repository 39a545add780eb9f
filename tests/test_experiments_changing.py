"""The ``changing`` study kind (docs/streams.md): every family side by side on the same streams,
utility against the ledger's figures."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from longldp.experiments import load_study, parse_study, run_study
from longldp.experiments.kinds.changing import tracking_delay

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "changing_tiny.toml"


@pytest.fixture(scope="module")
def table():
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        report = run_study(load_study(TINY), Path(out), workers=1, progress=False)
        yield pq.read_table(report.path).to_pydict()


def test_tiny_study_rows(table):
    doc = tomllib.loads(TINY.read_text())
    assert len(table["protocol"]) == len(doc["streams"]) * len(doc["protocols"])
    assert set(table["status"]) == {"ok"}
    for i, rule in enumerate(table["rule"]):
        name = table["protocol_name"][i]
        if rule == "per-window":  # w-event: never above the window budget (ledger, math §19.2)
            assert table["spent_max"][i] <= 2.0 * (1 + 1e-12)
            assert table["lifetime_max"][i] >= table["spent_max"][i]
        if name == "THRESH":  # both counters full spend ε/2 at most (19.5)
            assert table["lifetime_max"][i] <= 4.0 / 2 + 1e-12
        assert table["spent_median"][i] <= table["spent_p99"][i] <= table["spent_max"][i]
        assert 0 <= table["mse_avg"][i] < 1
    # The wage panel's observed change rate is DATA.md's (industry: 28-35% a year).
    wage = [
        r for s, r in zip(table["stream"], table["observed_rate"], strict=True) if s == "industry"
    ]
    assert 0.28 <= wage[0] <= 0.35


def test_tracking_delay_on_known_inputs():
    truth = np.zeros((10, 2))
    truth[:, 0] = 1.0
    assert np.isnan(tracking_delay(truth, truth))
    truth[5:] = [0.0, 1.0]
    est = truth.copy()
    est[5:8] = [1.0, 0.0]  # the estimate follows 3 epochs late
    assert tracking_delay(est, truth) == 3.0
    never = np.tile([1.0, 0.0], (10, 1))
    assert tracking_delay(never, truth) == 5.0  # τ − t when it never comes back


def test_bad_entries_are_refused():
    doc = tomllib.loads(TINY.read_text())
    bad = copy.deepcopy(doc)
    bad["streams"][0]["rate"] = 1.5
    with pytest.raises(ValueError, match="'rate' must be a share in"):
        parse_study(bad)
    bad = copy.deepcopy(doc)
    bad["protocols"][0]["w"] = 0
    with pytest.raises(ValueError, match="'w' must be an integer >= 1"):
        parse_study(bad)
    bad = copy.deepcopy(doc)
    bad["streams"][0]["pattern"] = "weekly"
    with pytest.raises(ValueError, match="pattern"):
        parse_study(bad)


def test_the_pages_show_the_recommendation_table_of_the_committed_results():
    """README.md and docs/streams.md show, between their markers, exactly the table that
    experiments/report_changing.py derives from the committed results (never typed in)."""
    import runpy

    script = runpy.run_path(str(ROOT / "experiments" / "report_changing.py"))
    summary = script["changing_summary"](ROOT / "experiments/results/changing/results.parquet")
    table = script["recommendation_table"](summary)
    assert "| stream |" in table
    for page in script["DOCS"]:
        text = page.read_text()
        assert script["with_table"](text, table) == text, f"{page}: run report_changing.py"
    with pytest.raises(ValueError, match="markers"):
        script["with_table"]("no markers here", table)
