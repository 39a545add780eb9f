"""Parameter solvers: ε round-trips, math §3.6 test vectors, V* identities, the g choices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import longldp as ll
from longldp import privacy
from registry_cases import build, cases, one_shot_eps, options, two_round_chain, with_budget

N = 10_000
eps_values = st.floats(min_value=0.05, max_value=8.0)
alphas = st.floats(min_value=0.02, max_value=0.95)


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(eps=eps_values, k=st.integers(2, 500))
def test_one_shot_eps_round_trips(eps, k):
    p, q = privacy.grr_probabilities(eps, k)
    assert math.log(p / q) == pytest.approx(eps, abs=1e-9)
    for p, q in (privacy.sue_probabilities(eps), privacy.oue_probabilities(eps)):
        assert privacy.ue_report_epsilon(p, q) == pytest.approx(eps, abs=1e-9)


@pytest.mark.parametrize(("cls", "params"), cases(where=two_round_chain))
@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(eps_perm=eps_values, alpha=alphas, k=st.integers(2, 300))
def test_chain_eps_round_trips(cls, params, eps_perm, alpha, k):
    """Every registered two-round chain (its default, exact calibration) reaches the budget it
    is given: one report is ε1, one memo ε∞ (an α it cannot reach, L-OUE and L-SOUE above
    their maximum, math §3.3, is refused)."""
    eps_1 = alpha * eps_perm
    extra = {k: v for k, v in options(cls, params).items() if k != "calibration"}
    if alpha >= cls.max_alpha(eps_perm, **extra) - 1e-6:
        with pytest.raises(ValueError, match="'eps_1' must be"):
            build(cls, {**extra, "eps_perm": eps_perm, "eps_1": eps_1}, k)
        return
    proto = build(cls, {**extra, "eps_perm": eps_perm, "eps_1": eps_1}, k)
    # plus what the float samplers may add to real reports and memos (docs/math.md §20.12)
    single, memo = eps_1 + proto.report_slack(), eps_perm + proto.memo_slack()
    assert proto.single_report_epsilon() == pytest.approx(single, abs=1e-9)
    if proto.estimand == "distribution":
        # a bucketed memo (L-SW, math §20.11) costs at most ε∞: exactly its channel's ε
        assert proto.first_round_epsilon() <= memo + 1e-9
    else:
        assert proto.first_round_epsilon() == pytest.approx(memo, abs=1e-9)


@pytest.mark.parametrize(("cls", "params"), cases(where=one_shot_eps))
@settings(max_examples=50, deadline=None, database=None, derandomize=True)
@given(eps=eps_values, k=st.integers(2, 300))
def test_one_shot_protocol_eps_round_trips(cls, params, eps, k):
    proto = build(cls, {**params, "eps": eps}, k)
    if cls.nominal_budget:  # THE: the exact ε is below the nominal budget (math §21.4)
        assert 0 < proto.single_report_epsilon() < eps
        return
    assert proto.single_report_epsilon() == pytest.approx(eps + proto.report_slack(), abs=1e-9)
    assert 0.0 <= proto.report_slack() <= 1e-5


@pytest.mark.parametrize(
    ("name", "k", "extra", "expected"),
    [
        ("L-GRR", 2, {"calibration": "paper"}, 2.69592e-4),
        ("L-GRR", 32, {"calibration": "paper"}, 0.125036),
        ("L-OSUE", 32, {}, 1.07837e-3),
        ("L-SUE", 32, {}, 1.10282e-3),
        ("L-SOUE", 32, {}, 1.23436e-3),
        ("L-OUE", 32, {}, 1.34700e-3),
    ],
)
def test_design_test_vectors(name, k, extra, expected):
    # docs/math.md §3.6: n = 10⁴, α = 0.6, ε∞ = 1, ε1 = 0.6.
    proto = ll.protocol(name, k=k, eps_perm=1.0, eps_1=0.6, **extra)
    assert proto.approx_variance(N) == pytest.approx(expected, rel=5e-6)


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(eps_perm=eps_values, alpha=alphas)
def test_losue_behaves_like_oue_at_eps1(eps_perm, alpha):
    eps_1 = alpha * eps_perm
    chain = ll.protocol("L-OSUE", k=10, eps_perm=eps_perm, eps_1=eps_1)
    oue = ll.protocol("OUE", k=10, eps=eps_1)
    assert chain.approx_variance(N) == pytest.approx(oue.approx_variance(N), rel=1e-9)
    b = math.exp(eps_1)
    assert chain.approx_variance(N) == pytest.approx(4 * b / (N * (b - 1) ** 2), rel=1e-9)


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(eps_perm=eps_values, alpha=alphas, k=st.integers(2, 200))
def test_exact_lgrr_is_grr_at_eps1(eps_perm, alpha, k):
    chain = ll.protocol("L-GRR", k=k, eps_perm=eps_perm, eps_1=alpha * eps_perm)
    grr = ll.protocol("GRR", k=k, eps=alpha * eps_perm)
    assert chain.P1 == pytest.approx(grr.p, abs=1e-12)
    assert chain.P0 == pytest.approx(grr.q, abs=1e-12)


def test_exact_loloha_variance_is_olh_at_eps1():
    proto = ll.protocol("OLOLOHA", k=100, eps_perm=4.0, eps_1=2.0)
    g = proto.g
    b = math.exp(2.0)
    olh_g = (g - 1 + b) ** 2 / ((b - 1) ** 2 * (g - 1))  # n·V* of LH over g at ε1 [WAN17] eq. 12
    assert proto.approx_variance(N) * N == pytest.approx(olh_g, rel=1e-9)
    assert g == privacy.olh_optimal_g(2.0)


def test_loloha_paper_vector():
    # docs/math.md §3.4: "paper" calibration, ε∞ = 4, ε1 = 1.6 → g = 5, V* = 2.996e-5 at n = 45,222.
    proto = ll.protocol("OLOLOHA", k=96, eps_perm=4.0, eps_1=1.6, calibration="paper")
    assert proto.g == 5
    assert proto.approx_variance(45_222) == pytest.approx(2.996e-5, rel=2e-4)


@pytest.mark.parametrize("calibration", ["exact", "paper"])
@pytest.mark.parametrize("eps_perm", [0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
@pytest.mark.parametrize("alpha", [0.1, 0.4, 0.6])
def test_ololoha_g_is_integer_argmin(calibration, eps_perm, alpha):
    g = privacy.loloha_optimal_g(eps_perm, alpha * eps_perm, calibration)
    grid = np.arange(2, 400)
    eps_1 = alpha * eps_perm
    vs = [privacy.loloha_unit_variance(int(c), eps_perm, eps_1, calibration) for c in grid]
    assert g == grid[int(np.argmin(vs))]


def test_seed_closed_form_for_g_disagrees_by_rounding():
    # docs/math.md §3.4: at α = 0.6, ε∞ = 1 the printed form gives 2 (floor) and 3 (ceil).
    assert privacy.loloha_g_closed_form(1.0, 0.6, "floor") == 2
    assert privacy.loloha_g_closed_form(1.0, 0.6, "ceil") == 3
    # [002]'s grid (α = 0.1, ε∞ ≤ 2): g = 2 whatever the rule, so OLOLOHA is BiLOLOHA there.
    for eps in (0.1, 0.5, 1.0, 1.5, 2.0):
        for rule in ("floor", "ceil", "rint"):
            assert privacy.loloha_g_closed_form(eps, 0.1 * eps, rule) == 2
        assert privacy.loloha_optimal_g(eps, 0.1 * eps, "paper") == 2


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0, 6.0])
def test_olh_g_is_integer_argmin(eps):
    grid = np.arange(2, 1000)
    p = math.exp(eps) / (math.exp(eps) + grid - 1)
    vstar = (1 / grid) * (1 - 1 / grid) / (p - 1 / grid) ** 2
    assert privacy.olh_optimal_g(eps) == grid[int(np.argmin(vstar))]
    assert abs(privacy.olh_optimal_g(eps) - (math.exp(eps) + 1)) <= 1


@pytest.mark.parametrize(
    ("cls", "params"), cases(where=lambda cls: two_round_chain(cls) and cls.max_alpha(1.0) < 0.99)
)
def test_max_alpha_is_the_boundary(cls, params):
    name = cls.name
    for eps_perm in (0.5, 1.0, 2.0, 5.0):
        a = cls.max_alpha(eps_perm)
        with_budget(name, 4, eps_perm=eps_perm, eps_1=(a - 1e-4) * eps_perm)
        if a + 1e-4 >= 1:  # no boundary below ε∞ at this ε∞ (L-HM below ε*: a Duchi memo)
            continue
        with pytest.raises(ValueError, match="eps_1"):
            with_budget(name, 4, eps_perm=eps_perm, eps_1=(a + 1e-4) * eps_perm)
    if cls.estimates_frequencies:  # L-OUE, L-SOUE (math §3.3)
        assert 0.58 < cls.max_alpha(1.0) < 0.95
    else:  # a PM or HM memo above ε* (math (20.18)): ε1 < ε∞/2, less its float margin
        assert cls.max_alpha(1.0) == pytest.approx(0.5, rel=2e-9)
        assert cls.max_alpha(1.0) < 0.5


def test_max_alpha_values():
    assert 0.72 < privacy.max_alpha("L-OUE", 5.0) < 0.95
    assert 0.6 < privacy.max_alpha("L-SOUE", 1.0) < 0.68


def test_dbitflip_variance_has_the_square():
    proto = ll.protocol("dBitFlipPM", k=96, eps_perm=2.0, b=96, d=4)
    e = math.exp(1.0)
    assert proto.approx_variance(N) == pytest.approx((96 / (4 * N)) * e / (e - 1) ** 2)
    assert proto.variance(N, 0.0) == pytest.approx(proto.approx_variance(N))


def test_budget_accounting():
    spent = privacy.spent_budget(reports=10, memos=3, eps_1=0.4, eps_perm=1.0)
    assert (spent.reports, spent.memos, spent.epsilon) == (10, 3, pytest.approx(3.0))
    assert privacy.spent_budget(2, 2, 0.4, 1.0).epsilon == pytest.approx(0.8)


@pytest.mark.parametrize("proto", cases(where=lambda cls: cls.estimates_frequencies, k=12))
def test_vstar_is_variance_at_zero(proto):
    """V* is a frequency oracle's figure (math (1.3)); a numeric mean's worst case is checked
    in tests/test_numeric_estimators.py."""
    at_zero = proto.variance(5000, np.zeros(proto.estimate_shape))
    np.testing.assert_allclose(at_zero, proto.approx_variance(5000), rtol=1e-12)
