"""Every protocol's claimed ε checked against its exact channel, enumerated for small domains.

The channels are built by ``longldp.audit.channels`` from the per-round mechanisms (matrix
products of the round channels, enumeration of all outputs), not from the library's P1/P0
formulas, so a wrong closed form in ``longldp.privacy`` cannot hide behind itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp.audit import channels as audit_channels
from longldp.privacy import channel_epsilon
from registry_cases import (
    build,
    cases,
    one_shot_eps,
    options,
    takes_k,
    triples,
    two_round_chain,
    with_budget,
)

KS = (2, 3, 5, 8)
EPS_PERM = (0.5, 1.0, 2.0, 4.0)
ALPHAS = (0.1, 0.4, 0.6)
TOL = 1e-9


def exact_epsilons(proto, rng) -> tuple[float, float]:
    """(single-report ε, first-round ε) from the enumerated channel."""
    exact = audit_channels.exact_epsilons(proto, rng)
    return exact.single, exact.first_round


def chain_cases():
    """Every registered two-round chain at each of its test options (calibration, …) over a
    grid of k, ε∞ and α; an α the chain cannot reach (L-OUE, L-SOUE: math §3.3) is left out."""
    for cls, params, cid in triples(two_round_chain):
        for k, eps_perm, alpha in itertools.product(KS, EPS_PERM, ALPHAS):
            if alpha >= cls.max_alpha(eps_perm) or (not takes_k(cls) and k != KS[0]):
                continue  # a class without k (numeric) once per budget
            yield pytest.param(cls.name, k, eps_perm, alpha, options(cls, params), id=cid)


@pytest.mark.parametrize(("name", "k", "eps_perm", "alpha", "extra"), list(chain_cases()))
def test_chain_channel_never_exceeds_claim(name, k, eps_perm, alpha, extra):
    proto = with_budget(name, k, eps_perm=eps_perm, eps_1=alpha * eps_perm, **extra)
    rng = np.random.default_rng(7)
    single, first = exact_epsilons(proto, rng)
    eps_1 = alpha * eps_perm
    # Round 1 alone (the memo reported forever) is exactly ε∞ for every chain.
    assert first <= eps_perm + TOL
    assert first == pytest.approx(eps_perm, abs=TOL)
    assert single <= eps_1 + TOL
    # The library's own figure is the exact one plus the float samplers' declared slack
    # (docs/math.md §20.12; 0 but for real memos), rounded outward.
    assert proto.single_report_epsilon() >= single
    assert proto.single_report_epsilon() == pytest.approx(single + proto.report_slack(), abs=TOL)
    assert proto.first_round_epsilon() == pytest.approx(first + proto.memo_slack(), abs=TOL)
    exact = extra.get("calibration", "exact") == "exact" or getattr(proto, "g", k) == 2
    if exact:
        assert single == pytest.approx(eps_1, abs=TOL)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps_perm", EPS_PERM)
def test_paper_calibration_of_lgrr_is_over_private_beyond_two_values(k, eps_perm):
    proto = ll.protocol("L-GRR", k=k, eps_perm=eps_perm, eps_1=0.5 * eps_perm, calibration="paper")
    single, _ = exact_epsilons(proto, np.random.default_rng(0))
    if k == 2:
        assert single == pytest.approx(0.5 * eps_perm, abs=TOL)
    else:
        assert single < 0.5 * eps_perm - 1e-3
        exact = ll.protocol("L-GRR", k=k, eps_perm=eps_perm, eps_1=0.5 * eps_perm)
        assert exact.approx_variance(1000) < proto.approx_variance(1000)


def test_paper_calibration_design_example():
    # docs/math.md §3.2: k = 32, ε∞ = 1, ε1 = 0.5 gives a true single-report ε of about 0.10.
    proto = ll.protocol("L-GRR", k=32, eps_perm=1.0, eps_1=0.5, calibration="paper")
    single, _ = exact_epsilons(proto, np.random.default_rng(0))
    assert single == pytest.approx(0.1023, abs=5e-4)


def one_shot_exact(cls: type) -> bool:
    """A one-shot oracle at ε with an exact channel (Laplace's unbounded density is not one:
    its claim is checked in tests/test_numeric_privacy.py)."""
    return one_shot_eps(cls) and cls.report_kind.exact


@pytest.mark.parametrize(("cls", "params"), cases(where=one_shot_exact))
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_one_shot_channel_equals_eps(cls, params, k, eps):
    if not takes_k(cls) and k != KS[0]:
        return  # a class without k (numeric): once per ε
    proto = build(cls, {**params, "eps": eps}, k)
    single, _ = exact_epsilons(proto, np.random.default_rng(3))
    if cls.nominal_budget:  # THE: the threshold after the noise spends less than eps
        assert single < eps - 1e-3
        eps = single
    assert single == pytest.approx(eps, abs=TOL)
    assert proto.single_report_epsilon() == pytest.approx(single + proto.report_slack(), abs=TOL)
    assert proto.single_report_epsilon() >= single


@pytest.mark.parametrize(("k", "d"), [(k, d) for k in KS for d in (1, 2, 3) if d <= k])
@pytest.mark.parametrize("eps_perm", EPS_PERM)
def test_dbitflip_channel(k, eps_perm, d):  # d <= k: a report holds at most one bit per bucket
    proto = ll.protocol("dBitFlipPM", k=k, eps_perm=eps_perm, d=d)
    eps = channel_epsilon(audit_channels.dbitflip_channel(proto))
    claimed = eps_perm if d >= 2 else eps_perm / 2
    assert eps == pytest.approx(claimed, abs=TOL)
    assert proto.single_report_epsilon() == pytest.approx(eps, abs=TOL)
    assert proto.single_report_epsilon() >= eps


def exact_channel(cls: type) -> bool:
    """Its report kind gives the exact channel (every one but Laplace's unbounded density,
    whose claim is checked in tests/test_numeric_privacy.py)."""
    return cls.report_kind.exact


@pytest.mark.parametrize(("cls", "params"), cases(where=exact_channel))
@pytest.mark.parametrize("k", (3, 6))
def test_claims_equal_the_exact_channel(cls, params, k):
    """Every registered protocol at its test parameters: the claimed ε of one report and of
    round 1 are the exact channel's plus the float samplers' declared slack (0 but for real
    reports and memos, docs/math.md §20.12, and then at most 10⁻⁵), from both sides: never
    below it (the claim is safe) and equal to it up to the outward rounding (tight)."""
    proto = build(cls, params, k)
    single, first = exact_epsilons(proto, np.random.default_rng(5))
    slack, memo_slack = proto.report_slack(), proto.memo_slack()
    assert 0.0 <= slack <= 1e-5 and 0.0 <= memo_slack <= 1e-5
    assert proto.single_report_epsilon() >= single + slack
    assert proto.single_report_epsilon() == pytest.approx(single + slack, rel=1e-9, abs=TOL)
    assert proto.first_round_epsilon() >= first + memo_slack
    assert proto.first_round_epsilon() == pytest.approx(first + memo_slack, rel=1e-9, abs=TOL)
    assert first >= single - TOL  # a memo reveals at least what one report does


def test_channel_epsilon_two_sided():
    # A ratio of exactly e^1 is ε = 1; a channel one ulp looser must not pass as ε = 1.
    e = math.e
    assert channel_epsilon([[e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]]) == (
        pytest.approx(1.0, abs=1e-12)
    )
    assert channel_epsilon([[0.9, 0.1], [0.1, 0.9]]) > 1.0
    assert channel_epsilon([[1.0, 0.0], [0.5, 0.5]]) == math.inf
