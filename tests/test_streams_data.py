"""Data that changes (docs/math.md §19.7): the bundled wage panel and the synthetic streams."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from longldp.data import (
    binary_stream,
    change_rates,
    changing_stream,
    ldp_ids_curve,
    load_panel,
)
from longldp.data.panels import PANELS
from longldp.privacy import ledger

ROOT = Path(__file__).resolve().parents[1]


def test_wage_panel_checksum_matches_data_md_and_the_file():
    file, digest = PANELS["wage-panel"]
    data = resources.files("longldp.data").joinpath("bundled", file).read_bytes()
    assert hashlib.sha256(data).hexdigest() == digest
    text = (ROOT / "DATA.md").read_text(encoding="utf-8")
    section = text[text.index("`wage-panel`") :]
    assert digest in section and f"{len(data):,} bytes" in section


def test_wage_panel_shape_labels_and_changes():
    panel = load_panel("wage-panel")
    assert (panel.n, panel.tau) == (545, 8)
    assert panel.epochs == tuple(range(1980, 1988))
    assert panel.domains["industry"].size == 12 and panel.domains["occupation"].size == 9
    labels = panel.domains["industry"].labels
    assert list(labels) == sorted(labels) and "Manufacturing" in labels
    ind = panel.values("industry")
    assert ind.shape == (8, 545) and ind.min() == 0 and ind.max() == 11
    # The figures DATA.md quotes, recomputed from the trajectories.
    for attr, mean, lo, hi in (("industry", 2.25, 0.28, 0.35), ("occupation", 2.96, 0.39, 0.48)):
        traj = panel.trajectories(attr)
        assert ledger.change_counts(traj).mean() == pytest.approx(mean, abs=0.005)
        share = (traj[:, 1:] != traj[:, :-1]).mean(axis=0)
        assert lo - 0.005 <= share.min() and share.max() <= hi + 0.005
    # Manufacturing is the most common industry (1,231 of 4,360 rows in the source).
    counts = np.bincount(ind.ravel(), minlength=12)
    assert counts[labels.index("Manufacturing")] == 1231 and counts.sum() == 4360


@pytest.mark.parametrize("pattern", ["steady", "periodic", "bursty", "drifting"])
def test_changing_stream_changes_at_its_rate(pattern):
    n, k, tau, rate, period = 4000, 6, 60, 0.05, 10
    rng = np.random.default_rng(21)
    vals = changing_stream(n, k, tau, rate, rng, pattern=pattern, period=period)
    assert vals.shape == (tau, n) and vals.min() >= 0 and vals.max() < k
    r = change_rates(tau, rate, pattern, period)
    moved = (vals[1:] != vals[:-1]).sum()
    expect = n * r[1:].sum()
    assert abs(moved - expect) < 5 * np.sqrt(n * (r[1:] * (1 - r[1:])).sum())
    if pattern == "bursty":
        quiet = np.arange(1, tau) % period != 0
        assert np.all(vals[1:][quiet] == vals[:-1][quiet])
    if pattern != "bursty":
        assert r[1:].mean() == pytest.approx(rate, rel=0.05)


def test_drifting_moves_the_law():
    rng = np.random.default_rng(22)
    vals = changing_stream(6000, 5, 41, 0.3, rng, pattern="drifting", period=20)
    start, end = (np.bincount(v, minlength=5) for v in (vals[0], vals[-1]))
    assert np.argmax(start) == 0 and np.argmax(end) != 0


def test_binary_stream_realizes_the_curve_with_fewest_flips():
    rng = np.random.default_rng(23)
    for name in ("Sin", "Log", "LNS"):
        p = ldp_ids_curve(name, 200, rng)
        assert 0 < p.min() and p.max() < 1
        vals = binary_stream(p, 3000, rng)
        assert np.array_equal(vals.sum(axis=1), np.rint(3000 * p))
        flips = (vals[1:] != vals[:-1]).sum(axis=1)
        assert np.array_equal(flips, np.abs(np.diff(np.rint(3000 * p))))
    assert ldp_ids_curve("sin", 3)[0] == pytest.approx(0.075)
    assert ldp_ids_curve("Log", 1)[0] == pytest.approx(0.125)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: changing_stream(10, 3, 5, 1.5, np.random.default_rng(0)), "'rate'"),
        (lambda: changing_stream(10, 3, 0, 0.1, np.random.default_rng(0)), "'tau'"),
        (lambda: change_rates(5, 0.1, "weekly"), "'pattern'"),
        (lambda: ldp_ids_curve("Cos", 5), "'name'"),
        (lambda: ldp_ids_curve("LNS", 5), "'rng'"),
        (lambda: binary_stream(np.array([0.5, 1.2]), 10, np.random.default_rng(0)), "'p'"),
        (lambda: load_panel("wages"), "'name'"),
        (lambda: load_panel().values("age"), "'attribute'"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)
    assert re.search(r"must|pass", str(info.value))
