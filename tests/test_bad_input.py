"""Bad input gets a ValueError naming the parameter and what is allowed; nothing is clipped."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll

ONE_SHOT = ["GRR", "SUE", "OUE", "BLH", "OLH"]
CHAINS = ["L-GRR", "L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "BiLOLOHA", "OLOLOHA"]


@pytest.mark.parametrize("name", ONE_SHOT)
@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ({"k": 1, "eps": 1.0}, r"'k' must be an integer >= 2"),
        ({"k": 5, "eps": 0.0}, r"'eps' must be a finite number > 0"),
        ({"k": 5, "eps": -1.0}, r"'eps' must be a finite number > 0"),
        ({"k": 5, "eps": math.nan}, r"'eps' must be a finite number > 0"),
        ({"k": 5, "eps": math.inf}, r"'eps' must be a finite number > 0"),
        ({"k": 5, "eps": True}, r"'eps' must be"),
        ({"k": 5.0, "eps": 1.0}, r"'k' must be an integer"),
        ({"k": 5, "eps": "1"}, r"'eps' must be"),
    ],
)
def test_one_shot_parameters(name, params, pattern):
    with pytest.raises(ValueError, match=pattern):
        ll.protocol(name, **params)


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ({"k": 1, "eps_perm": 1.0, "eps_1": 0.5}, r"'k' must be an integer >= 2"),
        ({"k": 5, "eps_perm": 0.0, "eps_1": 0.5}, r"'eps_perm' must be a finite number > 0"),
        ({"k": 5, "eps_perm": math.nan, "eps_1": 0.5}, r"'eps_perm' must be"),
        ({"k": 5, "eps_perm": 1.0, "eps_1": 1.0}, r"'eps_1' must be a finite number in \(0, 1\)"),
        ({"k": 5, "eps_perm": 1.0, "eps_1": 2.0}, r"'eps_1' must be a finite number in \(0, 1\)"),
        ({"k": 5, "eps_perm": 1.0, "eps_1": 0.0}, r"'eps_1' must be"),
        ({"k": 5, "eps_perm": 1.0, "eps_1": math.nan}, r"'eps_1' must be"),
    ],
)
def test_chain_parameters(name, params, pattern):
    with pytest.raises(ValueError, match=pattern):
        ll.protocol(name, **params)


@pytest.mark.parametrize("name", ["L-OUE", "L-SOUE"])
def test_unreachable_alpha(name):
    with pytest.raises(ValueError, match=r"'eps_1' must be < .*alpha = eps_1/eps_perm <"):
        ll.protocol(name, k=5, eps_perm=1.0, eps_1=0.95)


def test_other_parameters():
    with pytest.raises(ValueError, match="'calibration' must be one of 'exact', 'paper'"):
        ll.protocol("L-GRR", k=5, eps_perm=1.0, eps_1=0.5, calibration="nope")
    with pytest.raises(ValueError, match=r"'d' must be an integer in \[1, 5\]"):
        ll.protocol("dBitFlipPM", k=5, eps_perm=1.0, d=6)
    with pytest.raises(ValueError, match=r"'b' must be an integer in \[2, 5\]"):
        ll.protocol("dBitFlipPM", k=5, eps_perm=1.0, b=9)
    with pytest.raises(ValueError, match="'hash_pool' must be an integer >= 1"):
        ll.protocol("OLH", k=5, eps=1.0, hash_pool=0)


ALL = {
    **{n: {"eps": 1.0} for n in ONE_SHOT},
    **{n: {"eps_perm": 2.0, "eps_1": 0.8} for n in CHAINS},
    "dBitFlipPM": {"eps_perm": 2.0},
}


@pytest.mark.parametrize("name", list(ALL))
def test_values_outside_the_domain(name):
    proto = ll.protocol(name, k=6, **ALL[name])
    memo = proto.new_memo(3)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"'values' must be integers in \[0, 6\); got 6"):
        proto.perturb(np.array([0, 6, 1]), memo, rng)
    with pytest.raises(ValueError, match=r"'values' must be integers in \[0, 6\); got -1"):
        proto.perturb(np.array([0, -1, 1]), memo, rng)
    with pytest.raises(ValueError, match=r"'values' must be integers .*dtype float64"):
        proto.perturb(np.array([0.0, 1.0, 2.0]), memo, rng)
    with pytest.raises(ValueError, match=r"'values' must be integers .*dtype float64"):
        proto.perturb(np.array([0.0, np.nan, 2.0]), memo, rng)
    with pytest.raises(ValueError, match=r"'values' must be integers .*dtype bool"):
        proto.perturb(np.array([True, False, True]), memo, rng)
    assert memo.reports.sum() == 0  # nothing was half-done
    client = proto.client(rng)
    with pytest.raises(ValueError, match=r"'value' must be an int in \[0, 6\)"):
        client.report(6)
    with pytest.raises(ValueError, match="'value'"):
        client.report(2.0)
    with pytest.raises(ValueError, match=r"'true_counts' must be a length-6 integer vector"):
        proto.sample_support(np.ones(5, dtype=int), rng=rng)
    with pytest.raises(ValueError, match="'true_counts' must be non-negative"):
        proto.sample_support(np.array([1, 2, -1, 0, 0, 0]), rng=rng)
    with pytest.raises(ValueError, match="'n' must equal sum"):
        proto.sample_support(np.ones(6, dtype=int), n=7, rng=rng)
    with pytest.raises(ValueError, match="'n' must be an integer >= 1"):
        proto.estimate(np.zeros(proto.aggregator().support_counts.shape), 0)
    with pytest.raises(ValueError, match="'f' must be frequencies"):
        proto.variance(100, 1.5)


def test_estimate_rejects_bad_support():
    proto = ll.protocol("L-OSUE", k=4, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'support' must be finite with trailing shape \\(4,\\)"):
        proto.estimate(np.array([1.0, np.nan, 2.0, 3.0]), 10)
    with pytest.raises(ValueError, match="'support' must be finite with trailing shape \\(4,\\)"):
        proto.estimate(np.ones(5), 10)
    with pytest.raises(ValueError, match="must be one of"):
        proto.estimate(np.ones(4), 10, postprocess="nope")


def test_aggregator_rejects_foreign_reports():
    ue = ll.protocol("L-OSUE", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match=r"'reports' must be packed bit vectors"):
        ue.aggregator().add(np.zeros((3, 5), dtype=np.uint8))
    with pytest.raises(ValueError, match="bits set beyond position k = 12"):
        ue.aggregator().add(np.full((3, 2), 255, dtype=np.uint8))
    grr = ll.protocol("L-GRR", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match=r"'reports' must be integers in \[0, 12\)"):
        grr.aggregator().add(np.array([3, 12]))
    lh = ll.protocol("BiLOLOHA", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'reports' must be a 1-D array of dtype"):
        lh.aggregator().add(np.array([3, 4]))
    with pytest.raises(ValueError, match="report 0 is truncated: 10 bytes where a report has 21"):
        lh.aggregator().add_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match="no reports have been added"):
        lh.aggregator().estimate()


def test_memo_required_and_users_checked():
    proto = ll.protocol("L-GRR", k=5, eps_perm=2.0, eps_1=1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="'memo' is required"):
        proto.perturb(np.array([1, 2]), None, rng)
    memo = proto.new_memo(3)
    with pytest.raises(ValueError, match="must not repeat a user"):
        proto.perturb(np.array([1, 2]), memo, rng, users=np.array([0, 0]))
    with pytest.raises(ValueError, match=r"'users' must be integers in \[0, 3\)"):
        proto.perturb(np.array([1, 2]), memo, rng, users=np.array([0, 3]))
    with pytest.raises(ValueError, match="4 values for a memo of 3 users"):
        proto.perturb(np.array([1, 2, 3, 4]), memo, rng)
