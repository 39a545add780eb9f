"""Attacks on the applications (docs/attacks.md §10): RAPPOR's decoder, the set-valued miners,
FELIP range answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp.apps.felip.data import felip_table
from longldp.apps.felip.queries import generate_workload
from longldp.apps.gfim import GFIM, planted_sets
from longldp.apps.setvalued import SVIM, SVIMParams, make_spec
from longldp.attacks import apps
from longldp.data import seattle_pet_names


@pytest.fixture(scope="module")
def pets():
    names, counts = seattle_pet_names()
    rng = np.random.default_rng(0)
    return list(names), rng.multinomial(200_000, counts / counts.sum())


def test_promote_string_mga_beats_ria(pets):
    """A string no client holds is not detected; 5% MGA clients make it detected with a tiny
    p-value, and RIA clients (honest reports of the target) reach a larger one."""
    names, counts = pets
    proto = ll.protocols.RAPPOR(k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    cands = [*names[:200], "Zorglub"]
    mga = apps.promote_string(
        proto, names, counts, "Zorglub", 0.05, candidates=cands, rng=1, selection="lasso-sigma"
    )
    ria = apps.promote_string(
        proto,
        names,
        counts,
        "Zorglub",
        0.05,
        attack="RIA",
        candidates=cands,
        rng=1,
        selection="lasso-sigma",
    )
    assert not mga.detected_before and mga.p_value_before > 0.01
    assert mga.detected_after and mga.p_value_after < 1e-10
    assert ria.p_value_after > mga.p_value_after
    # MGA reads as (1 − p*)/(q* − p*) clients per fake client per Bloom bit: far above m.
    assert mga.estimate_after > 2 * mga.m


def test_promote_string_bad_input(pets):
    names, counts = pets
    proto = ll.protocols.RAPPOR(k=128, h=2, m=16)
    with pytest.raises(ValueError, match="'attack' must be one of"):
        apps.promote_string(proto, names, counts, "x", 0.1, attack="RPA")
    with pytest.raises(ValueError, match="candidates"):
        apps.promote_string(proto, names, counts, "x", 0.1, candidates=names[:5])
    with pytest.raises(ValueError, match="'beta' must be"):
        apps.promote_string(proto, names, counts, "x", 1.0)
    onehot = ll.protocol("RAPPOR-onehot", k=8)
    with pytest.raises(ValueError, match="Bloom-filter decoder: 'proto' must be RAPPOR"):
        apps.promote_string(onehot, names, counts, "x", 0.1)


def test_promote_items_into_topk():
    """Fake users holding two absent items push them into GFIM's and SVIM's top-4 (the two
    planted items and two near-zero ones: a few fake users already compete with noise)."""
    data = planted_sets(20_000, d=64, planted=(3, 9), rng=0)
    targets = [40, 41]
    gfim = GFIM(4, make_spec("SH", eps=4.0))
    svim = SVIM(4, make_spec("OUE", eps=4.0), SVIMParams(), "reestimate", "norm-sub")
    for miner in (gfim, svim):
        strong = apps.promote_items(data, miner, targets, 0.3, rng=2)
        assert not strong.in_topk_before.any()
        assert strong.in_topk_after.all() and strong.promoted_share == 1.0
    with pytest.raises(ValueError, match="'targets' must be"):
        apps.promote_items(data, gfim, [64], 0.1)


def test_shift_range_moves_the_answer():
    """10% fake rows in the middle of a query's box (race ≤ 2 and sex = 1 on Adult: small
    domains, so FELIP's grid cells fit the box) raise its estimated answer by at least half of
    β(1 − â), significantly (30 repetitions); the true answer moves by β(1 − a)."""
    table = felip_table("adult", rows=4000, seed=3)
    workload = generate_workload(table, lam=2, n_queries=5, seed=1)
    assert workload.queries[4].describe(workload.schema) == "0 <= race <= 2 and sex = 1"
    shifts, predicted = [], []
    for rep in range(30):
        r = apps.shift_range(table, workload, 4, 0.1, oracle="OUE", eps=4.0, rng=rep)
        shifts.append(r.shift)
        predicted.append(r.linear_prediction)
        assert r.truth_shift == pytest.approx(r.beta * (1 - r.truth_before.mean()))
    se = np.std(shifts, ddof=1) / math.sqrt(30)
    assert np.mean(shifts) > 3 * se
    assert np.mean(shifts) > 0.5 * np.mean(predicted)
