"""README's table of local and shuffled central privacy is the output of its script."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_readme_shows_the_generated_shuffle_table():
    script = runpy.run_path(str(ROOT / "experiments" / "shuffle_table.py"))
    table = script["table"]()
    # One row per protocol, except those whose rounds the server plans (left out by that trait).
    rows = [i for i in script["ll"].list_protocols() if i.rounds != "planned"]
    assert table.count("\n") == 1 + len(rows)
    assert table in (ROOT / "README.md").read_text(), (
        "README's shuffle table is stale: rerun `python experiments/shuffle_table.py`"
    )
