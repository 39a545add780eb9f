"""Attacker success rate: exact against closed forms and brute force, simulated around exact.

Every registered protocol is built from the registry (no list of names here). Simulations use
fixed seeds and a 99.9% interval; an exact value outside it would be a bug in one of the two.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp.audit.asr import (
    attacker_success,
    chain_max_sum,
    memo_asr,
    registered_protocols,
)

SETTING = {"eps": 1.0, "eps_perm": 2.0, "eps_1": 0.8, "d": 2, "h": 2, "m": 4}
SETTING |= {"f": 0.5, "p": 0.5, "q": 0.75, "lo": 0.0, "hi": 1.0}
SETTING |= {"eps_window": 2.0, "w": 4}
SETTING |= {"eps_total": 2.0, "max_votes": 2, "max_updates": 2, "eps_0": 1.0, "eps_node": 1.0}
SETTING |= {"tau": 8}
PRIOR = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
#: The ASR's client holds one value and draws every report from the same law; a
#: history-dependent mechanism's reports follow its past values (refused below; its lifetime is
#: audited black-box in tests/test_streams_audit.py).
PROTOCOLS = [
    p for p in registered_protocols(5, SETTING) if p.history is None and p.input_domain.listed
]
#: Open item spaces (their domain is not ``listed``): no values to guess among.
OPEN = [p for p in registered_protocols(5, SETTING) if not p.input_domain.listed]
HISTORY = [p for p in registered_protocols(5, SETTING) if p.history is not None]
IDS = [p.name for p in PROTOCOLS]


@pytest.mark.parametrize(("k", "eps"), [(2, 0.5), (8, 1.0), (74, 2.0), (5, 4.0)])
def test_grr_one_report_equals_the_closed_form(k, eps):
    res = attacker_success(ll.protocol("GRR", k=k, eps=eps))
    assert res.method == "exact"
    assert abs(res.asr - math.exp(eps) / (math.exp(eps) + k - 1)) < 1e-12
    assert res.baseline == pytest.approx(1 / k)


def _brute_chain(m, j, tau, a1, b1, a2, b2):
    total = 0.0
    for seq in itertools.product(range(m), repeat=tau):
        best = 0.0
        for b in range(j):
            prob = 0.0
            for memo in range(m):
                pm = a1 if memo == b else b1
                prob += pm * np.prod([a2 if y == memo else b2 for y in seq])
            best = max(best, prob)
        total += best
    return total


@pytest.mark.parametrize(("m", "j", "tau"), [(3, 3, 1), (3, 3, 4), (4, 2, 3), (2, 2, 5), (3, 1, 3)])
def test_chain_sum_equals_enumeration(m, j, tau):
    # A memoized chain (memo keep 0.6, report keep 0.7) and i.i.d. reports (memo exact).
    for a1, a2 in ((0.6, 0.7), (1.0, 0.5)):
        chain = (a1, (1 - a1) / (m - 1), a2, (1 - a2) / (m - 1))
        want = _brute_chain(m, j, tau, *chain)
        assert chain_max_sum(m, j, tau, *chain) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("proto", PROTOCOLS, ids=IDS)
@pytest.mark.parametrize("tau", [1, 4])
def test_exact_asr_inside_the_simulated_interval(proto, tau):
    for prior in (None, PRIOR):
        k = proto.domain.audit_size or proto.k  # boolean RAPPOR, an interval: 2 inputs
        pri = None if prior is None else prior[:k] / prior[:k].sum()
        exact = attacker_success(proto, tau, pri)
        sim = attacker_success(proto, tau, pri, method="simulated", trials=20_000, rng=tau)
        assert sim.method == "simulated" and sim.low < sim.asr < sim.high
        assert sim.asr >= sim.baseline - 0.02  # the attacker never does worse than guessing
        if exact.method == "exact":
            assert sim.low <= exact.asr <= sim.high, (exact, sim)
            assert exact.asr >= exact.baseline - 1e-12


def test_hash_pool_is_exact_and_agrees_with_simulation():
    proto = ll.protocol("OLOLOHA", k=6, eps_perm=2.0, eps_1=1.0, hash_pool=16)
    for tau in (1, 5):
        exact = attacker_success(proto, tau)
        sim = attacker_success(proto, tau, method="simulated", trials=30_000, rng=5)
        assert exact.method == "exact" and sim.low <= exact.asr <= sim.high


def test_stateless_clients_agree_exact_and_simulated():
    for name in ("L-GRR", "L-OSUE"):
        proto = ll.protocol(name, k=5, eps_perm=2.0, eps_1=0.8)
        exact = attacker_success(proto, 6, stateless=True)
        sim = attacker_success(proto, 6, stateless=True, method="simulated", rng=6)
        assert exact.client == "stateless" and sim.low <= exact.asr <= sim.high


@pytest.mark.parametrize("proto", [p for p in PROTOCOLS if p.longitudinal], ids=lambda p: p.name)
def test_memo_saturates_and_a_stateless_client_climbs_toward_one(proto):
    curve = [attacker_success(proto, tau, rng=7, trials=4000) for tau in (1, 10, 100)]
    if all(c.method == "exact" for c in curve):
        values = [c.asr for c in curve]
        assert values[0] <= values[1] + 1e-12 <= values[2] + 2e-12
        # τ = 100 reports nearly reveal the memo; a weak IRR (boolean RAPPOR: q − p = 0.25)
        # leaves a few 1e-3 below its ASR, never above.
        assert values[2] <= memo_asr(proto) + 1e-12
        assert values[2] == pytest.approx(memo_asr(proto), abs=5e-3)
    else:
        assert curve[2].high >= curve[0].low  # simulated: no decrease beyond noise
        assert curve[2].asr < 0.9
    stateless = attacker_success(proto, 300, stateless=True, trials=2000, rng=8)
    assert stateless.asr > 0.9 > curve[2].asr


def test_exact_is_refused_where_the_family_cannot_be_enumerated():
    with pytest.raises(ValueError, match="simulated only"):
        attacker_success(ll.protocol("OLH", k=8, eps=1.0), method="exact")
    with pytest.raises(ValueError, match="prior"):
        attacker_success(ll.protocol("GRR", k=3, eps=1.0), prior=[0.5, 0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        attacker_success(ll.protocol("GRR", k=2, eps=1.0), prior=[0.5, 0.6])
    with pytest.raises(ValueError, match="method"):
        attacker_success(ll.protocol("GRR", k=2, eps=1.0), method="guess")


@pytest.mark.parametrize("proto", OPEN, ids=lambda p: p.name)
def test_an_open_item_space_is_refused_with_the_reason(proto):
    with pytest.raises(ValueError, match="open item space") as err:
        attacker_success(proto, 1)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("proto", HISTORY, ids=lambda p: p.name)
def test_a_history_dependent_mechanism_is_refused_with_the_reason(proto):
    with pytest.raises(ValueError, match=r"past values.*audit_lifetime"):
        attacker_success(proto, 2)


def test_registry_iteration_refuses_a_missing_parameter():
    with pytest.raises(ValueError, match="needs"):
        registered_protocols(4, {"eps": 1.0})
