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


def test_real_strings_recall_against_a_population_with_known_answers():
    """20 real names present, 20 absent: every present name is found, an absent one rarely.

    The SE of one string's count scales as √(N/h) whatever m (m cohorts of N/m clients, h bits
    each): §5.2's 2806 at N = 10⁶ gives 2806·√0.2 = 1,255 at N = 200,000. Shares among the 20
    present names run from 439/4886 = 9.0% to 173/4886 = 3.5%: the weakest holds ≈ 7,000
    reports (5.6 SE), the top 10 (≥ 227/4886, 9,300 reports) ≥ 7.4 SE, far past BH's cut
    (z ≈ 3). Under the null an absent name is rejected w.p. ≤ 0.05·R/m ≈ 0.05·21/40 = 0.026
    (BH's step-up cut at R rejections): false discoveries ~ Bin(20, 0.026), mean 0.53, sd 0.71,
    so at most 4 (5 sd)."""
    names, counts = seattle_pet_names()
    weights = np.concatenate([counts[:20], np.zeros(20)])
    for row in studies.real_strings(
        names[:40], weights, [(128, 2, 8)], n=200_000, reps=2, top=10, seed=4
    ):
        assert row["candidates"] == 40
        assert row["recall_top"] == 1.0
        assert row["detected"] - row["false_discoveries"] == 20  # every present name found
        assert row["false_discoveries"] <= 4
        assert row["fdp"] == row["false_discoveries"] / row["detected"]
    # with top = 30 the truth holds 10 absent names (ranks 21-30): recall counts them only
    # when falsely detected, so it is (20 + those) / 30, never 1
    (row,) = studies.real_strings(
        names[:40], weights, [(128, 2, 8)], n=200_000, reps=1, top=30, seed=4
    )
    assert 20 / 30 <= row["recall_top"] <= (20 + row["false_discoveries"]) / 30


def _distinct_values_law(w: np.ndarray, change: float) -> np.ndarray:
    """P(d = 1, 2, 3): distinct values a client holds over 3 collections, when each later
    collection redraws its value from w w.p. ``change`` (exact sum over the first two values)."""
    stay = (1 - change) + change * w  # keeps its value v (no redraw, or redraws v)
    one = np.sum(w * stay**2)
    # v0, then v1 != v0 (w.p. change·w1), then a third value outside {v0, v1}
    pair = np.outer(w, change * w)
    np.fill_diagonal(pair, 0.0)
    three = np.sum(pair * change * (1 - w[:, None] - w[None, :]))
    return np.array([one, 1 - one - three, three])


def test_longitudinal_budget_and_memos_against_closed_forms():
    n, tau, change = 5_000, 3, 0.2
    lon = studies.longitudinal(n=n, tau=tau, change=change, seed=2)
    assert len(lon["per_collection"]) == tau
    # §5.2's parameters: f = 0.5, p = 0.5, q = 0.75, h = 2 (Erlingsson et al. 2014, §3)
    f, p, q, h = 0.5, 0.5, 0.75, 2
    q_star = (1 - f / 2) * q + f / 2 * p
    p_star = f / 2 * q + (1 - f / 2) * p
    eps_1 = h * np.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    eps_inf = 2 * h * np.log((1 - f / 2) / (f / 2))
    assert lon["eps_1"] == pytest.approx(eps_1, rel=1e-9)
    assert lon["eps_inf"] == pytest.approx(eps_inf, rel=1e-9)
    # τ·ε1 = 3.22 < ε∞ = 4.39 ≤ d·ε∞: every client has spent exactly τ·ε1
    assert tau * eps_1 < eps_inf
    assert lon["spent_max"] == pytest.approx(tau * eps_1, rel=1e-9)
    assert lon["spent_mean"] == pytest.approx(tau * eps_1, rel=1e-9)
    assert lon["share_capped_by_prr"] == 0.0
    # one PRR per distinct value: the histogram of d follows the exact law of the value changes
    _, w = studies.paper_population(n)
    law = _distinct_values_law(w, change)
    hist = np.array(lon["distinct_prrs_histogram"])
    assert hist[0] == 0 and hist.sum() == n and hist.size == tau + 1
    assert np.all(np.abs(hist[1:] - n * law) <= 5 * np.sqrt(n * law * (1 - law))), (hist, n * law)
    for row in lon["per_collection"]:  # v1's count: unbiased, within 5 of its reported SEs
        assert abs(row["v1_estimate"] - row["v1_true"]) <= 5 * row["v1_se"], row
