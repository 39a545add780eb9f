"""longldp.audit: exact lifetime channels, the black-box game, its bound and the controls.

Trial counts are small (seconds in all); every seed is fixed. The lower bounds hold at
confidence 1 − α, so "no bound above its claim" is a statement that fails with probability at
most α per check for a protocol whose claim is tight, and never for a correct one at these seeds.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp import privacy
from longldp.audit import (
    audit_game,
    audit_protocol,
    channel_bounds,
    claimed_epsilon,
    cp_lower,
    cp_upper,
    exact_epsilons,
    exact_lifetime_epsilon,
    misencoded_unary,
)
from longldp.audit.channels import MAX_OUTPUTS, grr_matrix
from protocol_table import IDS, PROTOCOLS, representatives, table_ids

K = 4


def small(key: str, k: int = K):
    name, params = PROTOCOLS[key]
    return ll.protocol(name, k=k, **params)


# ---------------------------------------------------------------------- exact lifetime


def _brute_lifetime(per_report: np.ndarray, memo: np.ndarray, tau: int) -> float:
    """ε of τ reports enumerated sequence by sequence: Pr[y1..yτ | v] = Σ_m memo[v, m] Π r[m, y]."""
    worst = 0.0
    n_out = per_report.shape[1]
    for seq in itertools.product(range(n_out), repeat=tau):
        given_memo = np.prod(per_report[:, list(seq)], axis=1)  # (memos,)
        prob = memo @ given_memo  # (values,)
        worst = max(worst, float(np.log(prob.max() / prob.min())))
    return worst


@pytest.mark.parametrize("key", table_ids(lambda c: c.report_kind == "symbol" and c.longitudinal))
@pytest.mark.parametrize("tau", [1, 2, 3, 4])
def test_lifetime_of_grr_chain_equals_enumeration(key, tau):
    proto = small(key, k=3)
    brute = _brute_lifetime(grr_matrix(proto.p2, 3), grr_matrix(proto.p1, 3), tau)
    assert exact_lifetime_epsilon(proto, tau) == pytest.approx(brute, abs=1e-9)


@pytest.mark.parametrize("key", table_ids(lambda c: c.report_kind == "bits" and c.longitudinal))
@pytest.mark.parametrize("tau", [1, 2, 3])
def test_lifetime_of_unary_chain_equals_enumeration(key, tau):
    proto = small(key, k=2)
    # A k = 2 unary report has 4 outputs; the memo is one of 4 bit pairs.
    pairs = list(itertools.product((0, 1), repeat=2))

    def bit(p, x, y):
        return p if y else 1 - p

    memo = (
        np.array(
            [
                [bit(proto.p1 if v == i else proto.q1, 0, m[i]) for i in range(2)]
                for v in range(2)
                for m in pairs
            ]
        )
        .reshape(2, 4, 2)
        .prod(axis=2)
    )
    per_report = np.array(
        [
            [
                np.prod([bit(proto.p2 if m[i] else proto.q2, 0, y[i]) for i in range(2)])
                for y in pairs
            ]
            for m in pairs
        ]
    )
    brute = _brute_lifetime(per_report, memo, tau)
    assert exact_lifetime_epsilon(proto, tau) == pytest.approx(brute, abs=1e-9)


@pytest.mark.parametrize("key", IDS)
def test_exact_lifetime_within_claims_and_saturates(key):
    proto = small(key)
    e1, einf = exact_epsilons(proto).single, proto.first_round_epsilon()
    assert exact_lifetime_epsilon(proto, 1) == pytest.approx(e1, abs=1e-9)
    curve = [exact_lifetime_epsilon(proto, t) for t in (1, 2, 5, 20, 200)]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(curve))
    for tau, eps in zip((1, 2, 5, 20, 200), curve, strict=True):
        assert eps <= claimed_epsilon(proto, tau) + 1e-9
        alt = exact_lifetime_epsilon(proto, tau, alternating=True)
        assert alt <= claimed_epsilon(proto, tau, "alternating") + 1e-9
    if proto.longitudinal:
        assert curve[-1] == pytest.approx(einf, rel=1e-3)  # a memo reported forever: ε∞


def test_exact_refuses_huge_channels():
    with pytest.raises(ValueError, match="more than"):
        exact_epsilons(ll.protocol("OUE", k=17, eps=1.0))
    assert 2**16 == MAX_OUTPUTS


# ---------------------------------------------------------------------- Clopper–Pearson


def test_clopper_pearson_covers():
    rng = np.random.default_rng(11)
    n, p, level, reps = 200, 0.07, 0.05, 4000
    x = rng.binomial(n, p, reps)
    miss_lo = np.mean(cp_lower(x, n, level) > p)
    miss_hi = np.mean(cp_upper(x, n, level) < p)
    # Exact intervals are conservative: each side misses at most `level` (5 s.e. of slack).
    se = math.sqrt(level * (1 - level) / reps)
    assert miss_lo <= level + 5 * se and miss_hi <= level + 5 * se
    assert cp_lower(0, n, level) == 0 and cp_upper(n, n, level) == 1


def test_lower_bound_covers_a_channel_with_known_epsilon():
    # GRR over k = 2 at ε = 1: the set {y = x0} attains the ratio e^ε exactly, the hardest case.
    proto = ll.protocol("GRR", k=2, eps=1.0)
    alpha, reps = 0.2, 300
    rng = np.random.default_rng(5)
    results = [audit_game(proto, 400, alpha=alpha, rng=rng) for _ in range(reps)]
    above = sum(r.lower > 1.0 for r in results)
    # At most α of the runs may exceed the true ε (plus 5 s.e.); CP makes it far fewer.
    assert above <= alpha * reps + 5 * math.sqrt(alpha * (1 - alpha) * reps)
    # The check has teeth: the plug-in estimate exceeds ε in a large share of the same runs,
    # and the bound has power (it is far from 0 on average).
    assert sum(r.estimate > 1.0 for r in results) > 0.3 * reps
    assert np.mean([r.lower for r in results]) > 0.4


# ---------------------------------------------------------------------- no bound above a claim


@pytest.mark.parametrize("key", IDS)
def test_one_report_bound_never_exceeds_claim(key):
    proto = small(key)
    res = audit_game(proto, 20_000, rng=1)
    assert res.claim == proto.single_report_epsilon()
    assert not res.violates, res
    assert res.lower > 0.5 * exact_epsilons(proto).single  # the audit has power


@pytest.mark.parametrize("key", IDS)
@pytest.mark.parametrize("pattern", ["one-value", "alternating"])
def test_lifetime_bound_never_exceeds_claim(key, pattern):
    proto = small(key)
    for tau, attack in ((4, "lr"), (12, "majority")):
        res = audit_game(proto, 3000, tau=tau, pattern=pattern, attack=attack, rng=2)
        assert res.claim == claimed_epsilon(proto, tau, pattern)
        assert not res.violates, res
        assert res.lower <= exact_lifetime_epsilon(proto, tau, pattern == "alternating") + 0.05


def test_lifetime_approaches_eps_perm():
    proto = ll.protocol("L-GRR", k=4, eps_perm=1.0, eps_1=0.3)
    res = audit_game(proto, 20_000, tau=100, rng=3)
    assert 0.8 < res.lower <= 1.0 + 1e-9


def test_secure_randomness_and_loop_clients():
    proto = ll.protocol("L-OSUE", k=4, eps_perm=2.0, eps_1=1.0)
    for kwargs in ({"rng": "secure"}, {"clients": "loop", "rng": 4}):
        res = audit_game(proto, 2000, tau=3, **kwargs)
        assert not res.violates and res.lower > 0.2


# ---------------------------------------------------------------------- positive controls


@pytest.mark.parametrize("key", table_ids(lambda c: c.report_kind == "bits" and not c.longitudinal))
def test_misencoded_unary_is_caught(key):
    bad = misencoded_unary(small(key))
    res = audit_game(bad, 20_000, rng=6)
    assert res.claim == pytest.approx(1.0, abs=1e-9)
    assert res.violates, res


@pytest.mark.parametrize("key", representatives(lambda cls: cls.longitudinal))
def test_stateless_client_is_caught(key):
    proto = small(key)
    res = audit_game(proto, 3000, tau=30, clients="stateless", rng=7)
    assert res.violates, res
    honest = audit_game(proto, 3000, tau=30, rng=7)
    assert not honest.violates


def test_lgrr_paper_calibration_is_caught_as_loose():
    proto = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=0.8, calibration="paper")
    # The one-report channel in closed form, from the four probabilities: the report equals
    # the input after keep-keep or move-then-move-back, another value's after the reverse.
    p1, q1, p2, q2 = proto.p1, proto.q1, proto.p2, proto.q2
    eps_exact = math.log((p1 * p2 + (1 - p1) * q2) / (q1 * p2 + (1 - q1) * q2))
    assert eps_exact < 0.8 - 0.2  # the paper's calibration falls well short of the ε1 asked for
    report = audit_protocol(proto, trials=5000, taus=(1,), lifetime_trials=500, eps_1=0.8, rng=8)
    assert report.exact_single == pytest.approx(eps_exact, rel=1e-9)
    assert report.loose and not report.violations
    bounds = channel_bounds(proto, 50_000, claim=0.8, rng=8)
    # Black box: the 99% upper bound covers the true ε and still lies below the claim.
    assert eps_exact <= bounds.upper < 0.8, bounds
    exact = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=0.8)
    assert not channel_bounds(exact, 50_000, claim=0.8, rng=8).loose
    assert not audit_protocol(exact, trials=5000, taus=(1,), lifetime_trials=500, rng=8).loose


def test_channel_bounds_cover_and_refuse():
    proto = ll.protocol("OUE", k=3, eps=1.0)
    res = channel_bounds(proto, 20_000, rng=9)
    assert res.upper >= 1.0 and res.outputs_seen == res.output_space == 8
    with pytest.raises(ValueError, match="report space"):
        channel_bounds(ll.protocol("OLH", k=4, eps=1.0), 100)


def test_bad_input_is_refused():
    proto = small("GRR")
    with pytest.raises(ValueError, match="different"):
        audit_game(proto, 100, inputs=(1, 1))
    with pytest.raises(ValueError, match="pattern"):
        audit_game(proto, 100, pattern="zigzag")
    with pytest.raises(ValueError, match="alpha"):
        audit_game(proto, 100, alpha=1.5)
    with pytest.raises(ValueError, match="same bucket"):
        audit_game(ll.protocol("dBitFlipPM", k=8, eps_perm=1.0, b=2), 100, inputs=(0, 1))
    with pytest.raises(ValueError, match="must be a unary-encoding protocol"):
        misencoded_unary(proto)


def test_unknown_report_kind_is_refused_not_treated_as_grr():
    """A protocol whose report kind the audit has no channel for is an error, never a GRR
    channel by default (the exact channel, the lifetime and the game all refuse it)."""
    odd_cls = type("OddGRR", (ll.protocols.GRR,), {"report_kind": "odd", "__doc__": "odd"})
    odd = odd_cls(k=3, eps=1.0)
    with pytest.raises(ValueError, match="no channel for report kind 'odd'"):
        exact_epsilons(odd)
    with pytest.raises(ValueError, match="no channel for report kind 'odd'"):
        exact_lifetime_epsilon(odd, 3)
    with pytest.raises(ValueError, match="no channel for report kind 'odd'"):
        audit_game(odd, 100)


# ---------------------------------------------------------------------- RAPPOR's Bloom filter

BLOOM = {"k": 8, "h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75}


def test_rappor_bloom_filter_audited():
    proto = ll.protocol("RAPPOR", **BLOOM)
    exact = exact_epsilons(proto)
    assert exact.single == pytest.approx(proto.single_report_epsilon(), abs=1e-9)
    assert exact.first_round == pytest.approx(proto.first_round_epsilon(), abs=1e-9)
    assert exact_lifetime_epsilon(proto, 500) == pytest.approx(proto.first_round_epsilon())
    for tau, trials in ((1, 4000), (6, 2000)):
        res = audit_game(proto, trials, tau=tau, rng=10)
        assert not res.violates and res.lower > 0.3, res
    assert audit_game(proto, 4000, tau=60, clients="stateless", rng=10).violates


def test_boolean_rappor_claims_its_exact_channel():
    # One bit differs between the two values of the boolean encoder, not 2h: the exact ε is
    # half the Bloom-filter formula, and the protocol now claims exactly that (it claimed the
    # Bloom formula, a loose, safe claim, until the audit found it: docs/audit.md).
    proto = ll.protocol("RAPPOR-boolean", m=2, f=0.5, p=0.25, q=0.75)
    exact = exact_epsilons(proto)
    assert proto.single_report_epsilon() == pytest.approx(exact.single, abs=1e-9)
    assert proto.first_round_epsilon() == pytest.approx(exact.first_round, abs=1e-9)
    bloom_formula = privacy.rappor_eps_1(proto.p, proto.q, proto.f, 1)
    assert proto.single_report_epsilon() == pytest.approx(bloom_formula / 2)
    assert not audit_game(proto, 4000, tau=3, rng=12).violates


def test_one_time_rappor_composes_per_report():
    # One-time RAPPOR keeps no memo: τ reports cost τ·ε1 and the claim says so.
    proto = ll.protocol("RAPPOR-one-time", k=4, h=1, m=1, f=0.0, p=0.5, q=0.75)
    assert claimed_epsilon(proto, 5) == pytest.approx(5 * proto.single_report_epsilon())
    assert exact_lifetime_epsilon(proto, 5) == pytest.approx(5 * exact_epsilons(proto).single)
    res = audit_game(proto, 3000, tau=5, rng=13)
    assert not res.violates and res.lower > proto.single_report_epsilon()
