"""Re-identification across attributes and collections on the bundled Adult data.

A population of 3,000 Adult profiles (six attributes) is the attacker's background knowledge;
targets drawn from it report through SMP, SPL or ALLOMFREE collections. Seeds are fixed; the
comparisons use the rates' standard errors (5 SE).
"""

from __future__ import annotations

import numpy as np
import pytest

from longldp import data
from longldp.apps.multidim import MultidimCollection
from longldp.audit.reidentify import reidentify

COLUMNS = ("age", "workclass", "education", "marital-status", "occupation", "sex")


@pytest.fixture(scope="module")
def adult():
    table = data.load("adult")
    idx = [table.attributes.index(c) for c in COLUMNS]
    profiles = table.to_matrix()[:3000, idx]
    return profiles, [table.domain_sizes[i] for i in idx]


def _gap(a, b, r):
    return abs(a.rate(r) - b.rate(r)) / np.hypot(
        a.standard_errors[a.top.index(r)], b.standard_errors[b.top.index(r)]
    )


def test_nearly_truthful_reports_reach_the_ceiling(adult):
    profiles, ks = adult
    loud = MultidimCollection(ks, "SPL", eps_perm=60.0, eps_1=50.0, chain="L-GRR")
    res = reidentify(profiles, loud, 1, targets=400, rng=1)
    assert res.rate(1) == pytest.approx(res.ceiling[0], abs=0.02)
    assert res.ceiling[0] < 1  # duplicate profiles in Adult cap the top-1 rate
    assert res.chance == (1 / 3000, 10 / 3000)


@pytest.mark.parametrize("solution", ["SMP", "ALLOMFREE", "SPL"])
def test_rates_grow_with_collections(adult, solution):
    profiles, ks = adult
    chain = None if solution == "ALLOMFREE" else "L-GRR"
    scale = 3.0 if solution == "SPL" else 1.0  # SPL splits the budget over the six attributes
    col = MultidimCollection(ks, solution, eps_perm=4.0 * scale, eps_1=3.0 * scale, chain=chain)
    few = reidentify(profiles, col, 1, targets=400, memo="fresh", rng=2)
    many = reidentify(profiles, col, 8, targets=400, memo="fresh", rng=2)
    assert many.rate(10) > few.rate(10) and _gap(many, few, 10) > 5
    assert few.rate(10) >= few.chance[1]


def test_kept_memos_stop_the_accumulation(adult):
    # SPL reports every attribute in every collection: fresh clients leak more each time, a
    # client that keeps its memos repeats them (each attribute's memo at ε∞/d = 2). Over a few
    # collections a memo can leak *more* on average than fresh reports at ε1/d (an ASR is not
    # an ε); over 40 the accumulation wins clearly.
    profiles, ks = adult
    col = MultidimCollection(
        ks, "SPL", eps_perm=12.0, eps_1=6.0, chain="L-GRR", calibration="exact"
    )
    kept = reidentify(profiles, col, 40, targets=600, memo="kept", rng=3)
    fresh = reidentify(profiles, col, 40, targets=600, memo="fresh", rng=3)
    assert fresh.rate(1) > kept.rate(1) and _gap(fresh, kept, 1) > 5


def test_bad_input_is_refused(adult):
    profiles, ks = adult
    col = MultidimCollection(ks, "SMP", eps_perm=2.0, eps_1=1.0, chain="L-OSUE")
    with pytest.raises(ValueError, match="one column per attribute"):
        reidentify(profiles[:, :3], col, 1)
    with pytest.raises(ValueError, match="memo"):
        reidentify(profiles, col, 1, memo="sometimes")
    with pytest.raises(ValueError, match="targets"):
        reidentify(profiles, col, 1, targets=10**6)
