"""Any budget a user can type: every protocol either works or refuses with a clear ValueError.

Budgets up to :data:`longldp.privacy.EPS_MAX` build quickly (the hash range g comes from its
closed form and a short descent, never a scan up to e^ε) with finite probability parameters and
a finite, positive variance; larger ones raise ``ValueError`` naming the maximum.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import longldp as ll
from longldp import privacy
from longldp.simulate import simulate
from registry_cases import cases, options, takes_k, with_budget

#: Every protocol whose budget is given as ε (one-shot) or ε∞, ε1 (chains); RAPPOR's own
#: parameters (f, p, q) are checked in tests/test_rappor_protocol.py.
NAMES = [
    cls.name
    for cls in ll.protocols.PROTOCOL_CLASSES
    if set(cls.budget_params) <= {"eps", "eps_perm", "eps_1"}
]
N = 1000


def build(name: str, k: int, eps: float, alpha: float) -> ll.FrequencyOracle:
    """``name`` at this budget: with ``k`` when its inputs are codes, else with the other
    parameters of its first test parameters (an open item space's m and d)."""
    cls = ll.get_protocol_class(name)
    budget = {"eps": eps, "eps_perm": eps, "eps_1": alpha * eps}
    extra = {} if takes_k(cls) else options(cls, cls.test_params[0])  # a sketch's m and d
    return with_budget(name, k, **extra, **{p: budget[p] for p in cls.budget_params})


def unreachable(name: str, eps: float, alpha: float) -> bool:
    """A chain whose round 2 cannot reach every α (L-OUE, L-SOUE: a documented ValueError)."""
    cls = ll.get_protocol_class(name)
    return "eps_1" in cls.budget_params and alpha >= cls.max_alpha(min(eps, privacy.EPS_MAX))


#: ε log-uniform over [1e-3, 1e3], so that small, moderate and refused budgets all occur.
BUDGETS = st.one_of(
    st.floats(-3.0, 3.0).map(lambda x: 10.0**x),
    st.sampled_from([1e-3, privacy.EPS_MAX, 1e3]),
)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    name=st.sampled_from(NAMES),
    k=st.sampled_from([2, 3, 74, 1000]),
    eps=BUDGETS,
    alpha=st.floats(0.01, 0.99),
)
def test_every_budget_builds_or_is_refused(name, k, eps, alpha):
    if eps > privacy.EPS_MAX:
        with pytest.raises(ValueError, match="EPS_MAX"):
            build(name, k, eps, alpha)
        return
    if unreachable(name, eps, alpha):
        with pytest.raises(ValueError, match="eps_1"):
            build(name, k, eps, alpha)
        return
    proto = build(name, k, eps, alpha)
    eps_claims = (proto.single_report_epsilon(), proto.first_round_epsilon())
    assert all(math.isfinite(e) and e > 0 for e in eps_claims)
    if proto.estimand == "mean":  # a numeric mean: its worst-case and at-the-data variances
        lo, hi = proto.lo, proto.hi
        for v in (proto.worst_variance(N), proto.variance(N, np.linspace(lo, hi, N))):
            assert math.isfinite(v) and v > 0
    if not proto.estimates_frequencies:
        return
    params = np.array([proto.p1, proto.q1, proto.p2, proto.q2])
    assert np.all(np.isfinite(params)) and np.all((params >= 0) & (params <= 1)), params
    assert proto.P1 > proto.P0
    eps_claims = (proto.single_report_epsilon(), proto.first_round_epsilon())
    assert all(math.isfinite(e) and e > 0 for e in eps_claims)
    f = np.array([0.0, 0.3, 1.0])
    if not proto.estimates_frequencies:  # queried items: the variance of (21.4) at Σf² = 1
        v = proto.variance(N, f, 1.0)
        assert np.all(np.isfinite(v)) and np.all(v > 0) and proto.approx_variance(N) > 0
        return
    for v in (proto.approx_variance(N), *proto.variance(N, f)):
        assert math.isfinite(v) and v > 0
    v1 = proto.first_round_variance(N, f)
    assert np.all(np.isfinite(v1)) and np.all(v1 >= 0)


@pytest.mark.parametrize("name", NAMES)
def test_every_protocol_accepts_eps_max_and_refuses_above(name):
    proto = build(name, 74, privacy.EPS_MAX, 0.1)
    if proto.estimates_frequencies:
        assert math.isfinite(proto.approx_variance(N)) and proto.approx_variance(N) > 0
    else:  # a numeric mechanism: finite claims at EPS_MAX
        assert math.isfinite(proto.single_report_epsilon()) and proto.single_report_epsilon() > 0
    for eps in (privacy.EPS_MAX * 1.001, 709.0, 710.0, 1e3, math.inf, math.nan):
        with pytest.raises(ValueError, match="EPS_MAX"):
            build(name, 74, eps, 0.1)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("L-OSUE", {"eps_perm": 710, "eps_1": 1}),
        ("L-GRR", {"eps_perm": 710, "eps_1": 1}),
        ("L-OUE", {"eps_perm": 710, "eps_1": 1}),
        ("GRR", {"eps": 710}),
        ("dBitFlipPM", {"eps_perm": 710}),
        ("L-SOUE", {"eps_perm": 100, "eps_1": 40}),
        ("L-OSUE", {"eps_perm": 709, "eps_1": 1}),
    ],
)
def test_reported_budgets_are_refused_with_a_value_error(name, params):
    # Were OverflowError, ZeroDivisionError, or a NaN variance.
    with pytest.raises(ValueError, match="EPS_MAX"):
        ll.protocol(name, k=10, **params)


def local_argmin(f, g: int) -> bool:
    return f(g) <= f(g + 1) and (g == 2 or f(g) <= f(g - 1))


def test_ololoha_at_large_budgets_builds_with_the_argmin_g():
    # Was a scan of g up to e^30 (> 10 minutes).
    proto = ll.protocol("OLOLOHA", k=74, eps_perm=30, eps_1=12)
    assert abs(proto.g - (math.exp(12) + 1)) < 2
    for cal in ("exact", "paper"):
        g = privacy.loloha_optimal_g(30, 12, cal)
        assert local_argmin(lambda c, cal=cal: privacy.loloha_unit_variance(c, 30, 12, cal), g)


def test_olh_at_large_budgets_builds_with_the_largest_hash_range():
    # Was MemoryError (a 77.8 TiB candidate array). e^30 + 1 exceeds the hash's range 2^32,
    # where V* still decreases: g = G_MAX.
    proto = ll.protocol("OLH", k=74, eps=30)
    assert proto.g == privacy.G_MAX
    assert privacy.olh_optimal_g(20) == round(math.exp(20) + 1) or local_argmin(
        lambda c: privacy.olh_unit_variance(c, 20), privacy.olh_optimal_g(20)
    )
    values = np.arange(200) % 74
    sim = simulate(proto, np.stack([values, values]), np.random.default_rng(0), engine="per-user")
    assert np.all(np.isfinite(sim.estimates))


@pytest.mark.parametrize("calibration", ["exact", "paper"])
@pytest.mark.parametrize("eps_perm", [0.01, 0.5, 3.0, 8.0])
@pytest.mark.parametrize("alpha", [0.05, 0.5, 0.95])
def test_descent_finds_the_scanned_argmin(calibration, eps_perm, alpha):
    eps_1 = alpha * eps_perm
    grid = np.arange(2, int(math.exp(eps_perm)) + 8)
    vs = [privacy.loloha_unit_variance(int(c), eps_perm, eps_1, calibration) for c in grid]
    assert privacy.loloha_optimal_g(eps_perm, eps_1, calibration) == grid[int(np.argmin(vs))]
    olh = [privacy.olh_unit_variance(int(c), eps_perm) for c in grid]
    assert privacy.olh_optimal_g(eps_perm) == grid[int(np.argmin(olh))]


@pytest.mark.parametrize("engine", ["per-user", "reports", "count-level"])
def test_simulate_refuses_zero_timestamps(engine):
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="tau >= 1"):
        simulate(proto, np.zeros((0, 5), dtype=np.int64), 0, engine=engine)


@pytest.mark.parametrize("proto", cases(k=5))
@pytest.mark.parametrize("method", ["perturb", "perturb_support"])
def test_a_memo_for_fewer_users_is_refused(proto, method):
    values = proto.as_inputs(np.arange(5) % (proto.domain_size or 5))
    with pytest.raises(ValueError, match="5 values for a memo of 3 users"):
        getattr(proto, method)(values, proto.new_memo(3), np.random.default_rng(0))


def enumerable(name: str, eps: float, alpha: float) -> bool:
    """Whether the exact channel can be enumerated: not for a hashing protocol whose range g
    exceeds 64 buckets at this budget (a refused budget builds nothing and is enumerable)."""
    return unreachable(name, eps, alpha) or getattr(build(name, 3, eps, alpha), "g", 2) <= 64


#: (name, ε, α) at large budgets, without the channels too large to enumerate (no test skips;
#: OLH's g ≈ e^ε + 1 exceeds 64 from ε ≈ 4.2 on, so ε = 4 is its largest case).
#: Only report kinds with an exact channel (Laplace's density is checked in
#: tests/test_numeric_privacy.py: its ratio's supremum is not attained on a finite channel).
LARGE_BUDGETS = [
    pytest.param(name, eps, alpha, id=f"{name}-{eps}-{alpha}")
    for name in NAMES
    if ll.get_protocol_class(name).report_kind.exact
    for eps in (4.0, 10.0, 20.0, privacy.EPS_MAX)
    for alpha in (0.05, 0.9)
    if enumerable(name, eps, alpha)
]


@pytest.mark.parametrize(("name", "eps", "alpha"), LARGE_BUDGETS)
def test_claims_cover_the_exact_channel_at_large_budgets(name, eps, alpha):
    # Near ε = EPS_MAX, P1 is within e^-ε of 1: a claim computed from 1 − P1 by subtraction
    # understated the exact channel's ε (BiLOLOHA at ε∞ = 20, L-GRR's first round at ε∞ = 10).
    from test_privacy_channels import exact_epsilons

    if unreachable(name, eps, alpha):  # α beyond the chain's maximum (math §3.3): refused
        with pytest.raises(ValueError, match="eps_1"):
            build(name, 3, eps, alpha)
        return
    proto = build(name, 3, eps, alpha)
    single, first = exact_epsilons(proto, np.random.default_rng(1))
    assert proto.single_report_epsilon() >= single + proto.report_slack()
    assert proto.first_round_epsilon() >= first + proto.memo_slack()
    # tight: the exact channel plus the float samplers' slack (docs/math.md §20.12)
    assert proto.single_report_epsilon() == pytest.approx(single + proto.report_slack(), rel=1e-9)


# ---------------------------------------------------------------------- the one budget parser

#: A budget of every form the parser knows, as a user could type it.
FORMS = {
    "eps": {"eps": 1.0},
    "chain": {"eps_perm": 2.0, "eps_1": 0.8},
    "alpha": {"eps_perm": 2.0, "alpha": 0.4},
    "eps_perm": {"eps_perm": 2.0},
}


def accepts(takes: tuple[str, ...], form: str) -> bool:
    """Which forms a protocol's budget parameters accept (docs/math.md §4.1)."""
    if takes == ("eps",):
        return form == "eps"
    if takes == ("eps_perm", "eps_1"):
        return form in ("chain", "alpha")
    if takes == ("eps_perm",):
        return form == "eps_perm"
    return False  # parameters of its own (RAPPOR's f, p, q)


@pytest.mark.parametrize("cls", ll.protocols.PROTOCOL_CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("form", list(FORMS))
def test_budget_of_the_wrong_form_is_refused_never_another_protocol(cls, form):
    params = {k: v for k, v in cls.test_params[0].items() if k not in privacy.BUDGET_KEYS}
    params = {**{p: v for p, v in params.items() if p not in cls.budget_params}, **FORMS[form]}
    if takes_k(cls):
        params.setdefault("k", 6)
    if accepts(cls.budget_params, form):
        proto = ll.protocol(cls.name, **params)
        assert type(proto) is cls
        if form == "alpha":
            assert proto.eps_1 == pytest.approx(0.8)
        return
    with pytest.raises(ValueError, match=rf"^{re.escape(cls.name)}: (unknown|missing) parameter"):
        ll.protocol(cls.name, **params)


def test_budget_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"RAPPOR: unknown parameter\(s\) eps_perm.*\"L-SUE\""):
        ll.protocol("RAPPOR", k=8, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="dBitFlipPM is a chain with one round"):
        ll.protocol("dBitFlipPM", k=8, eps_perm=2.0, alpha=0.5)
    with pytest.raises(ValueError, match="give 'eps_1' or 'alpha', not both"):
        ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0, alpha=0.5)
    with pytest.raises(ValueError, match="'alpha' must be a finite number in"):
        ll.protocol("L-GRR", k=8, eps_perm=2.0, alpha=1.5)
    with pytest.raises(ValueError, match="'eps_1' must be a finite number in"):
        privacy.Budget(eps_perm=1.0, eps_1=2.0).parameters("x", ("eps_perm", "eps_1"))


def test_entry_points_share_the_parser():
    """ll.protocol, the spec parser, the set-valued OracleSpec, the runner's protocol entries and
    multidim all go through privacy.Budget: the same refusal for the same mistake."""
    from longldp.apps.multidim.collection import build_protocol
    from longldp.apps.setvalued.oracle import OracleSpec
    from longldp.experiments.kinds.base import ProtocolEntry

    message = "dBitFlipPM: unknown parameter(s) eps_1"
    for call in (
        lambda: ll.protocol("dBitFlipPM", k=8, eps_perm=1.0, eps_1=0.5),
        lambda: ll.protocol_from_spec(
            {"name": "dBitFlipPM", "params": {"k": 8, "eps_perm": 1.0, "eps_1": 0.5}}
        ),
        lambda: OracleSpec("dBitFlipPM", eps_perm=1.0, eps_1=0.5),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    assert OracleSpec("dBitFlipPM", eps_perm=1.0).chain(8) == ll.protocol(
        "dBitFlipPM", k=8, eps_perm=1.0
    )
    entry = ProtocolEntry("x", "dBitFlipPM", {}, True, False)
    assert entry.budget(1.0, 0.5) == {"eps_perm": 1.0}
    assert ProtocolEntry("x", "OLH", {}, False, False).budget(1.0, None) == {"eps": 1.0}
    assert build_protocol("dBitFlipPM", 8, 1.0, None) == ll.protocol(
        "dBitFlipPM", k=8, eps_perm=1.0
    )
    assert build_protocol("L-OSUE", 8, 2.0, 0.8) == ll.protocol(
        "L-OSUE", k=8, eps_perm=2.0, alpha=0.4
    )
