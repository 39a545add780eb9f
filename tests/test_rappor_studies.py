"""RAPPOR studies and the bundled real strings (small runs; the full runs are in experiments/)."""

from __future__ import annotations

import numpy as np
import pytest

from longldp.apps.rappor import studies
from longldp.data import seattle_pet_names


def test_bundled_pet_names():
    names, counts = seattle_pet_names()
    assert len(names) == 13_929 and int(counts.sum()) == 52_036
    assert names[:3] == ["Lucy", "Charlie", "Luna"]
    assert np.all(np.diff(counts) <= 0) and len(set(names)) == len(names)


def test_basic_one_time_is_ln3_and_sharpens_with_n():
    rows = studies.basic_one_time([10_000, 1_000_000], seed=1)
    assert rows[0]["eps"] == pytest.approx(np.log(3))
    assert rows[1]["tv"] < rows[0]["tv"]
    # null sd per bin √N/(2q−1) = 2√N at q = 0.75 (the paper's appendix)
    assert rows[1]["null_sd"] == pytest.approx(2000, rel=1e-9)


def test_paper_52_small_run():
    res = studies.paper_52(reps=2, seed=3)
    s = res["summary"]
    assert s["expected_se"] == pytest.approx(2806.24, abs=0.01)
    assert (
        s["bonferroni"]["detected_mean"] <= s["bh"]["detected_mean"] <= s["none"]["detected_mean"]
    )
    assert 25 <= s["bh"]["detected_mean"] <= 60


def test_real_strings_and_longitudinal_small():
    names, counts = seattle_pet_names()
    rows = studies.real_strings(names[:600], counts[:600], [(32, 2, 8)], n=200_000, reps=1)
    assert rows[0]["candidates"] == 600 and 0 <= rows[0]["recall_top"] <= 1
    lon = studies.longitudinal(n=5_000, tau=3, change=0.2, seed=2)
    assert lon["bound_holds"] and len(lon["per_collection"]) == 3
    assert lon["spent_max"] <= min(3 * lon["eps_1"], 3 * lon["eps_inf"]) + 1e-9
