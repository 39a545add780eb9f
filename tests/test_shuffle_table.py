"""The guide's table of local and shuffled central privacy (docs/guide/shuffling.md) is the
output of its script."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_guide_shows_the_generated_shuffle_table():
    script = runpy.run_path(str(ROOT / "experiments" / "shuffle_table.py"))
    table = script["table"]()
    # One row per protocol, except those whose rounds the server plans or whose reports follow
    # the device's history (left out by those traits: no route is proven for them).
    rows = [
        i
        for i in script["ll"].list_protocols()
        if i.rounds != "planned" and script["ll"].get_protocol_class(i.name).history is None
    ]
    assert table.count("\n") == 1 + len(rows)
    assert table in (ROOT / "docs" / "guide" / "shuffling.md").read_text(), (
        "the shuffle table of docs/guide/shuffling.md is stale: rerun "
        "`python experiments/shuffle_table.py`"
    )
