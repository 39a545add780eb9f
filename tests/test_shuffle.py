"""Shuffle accounting (longldp.shuffle, docs/math.md §17): the clone bounds against their
definitions, a lower bound and the published example; composition; the memo-aware figure."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import longldp as ll
from longldp import shuffle as sh
from longldp.privacy.linkage import Linkage, Persistent

#: A stateless one-shot client, and a memoizing chain whose reports carry nothing per device.
NOTHING, MEMO = Linkage(), Linkage.of(Persistent.MEMO)

# ----------------------------------------------------------------------------- the example


def test_reproduces_the_published_example():
    """[FMT21]'s repository: n = 10⁵, ε0 = 4, δ = 10⁻⁶ gives ε in [0.1675, 0.1728] numerically
    and 0.5378 in closed form; ours must lie in that bracket (to 10⁻³) and match the closed
    form to 10⁻³."""
    eps = sh.clones_epsilon(4.0, 10**5, 1e-6)
    assert 0.1675 - 1e-3 <= eps <= 0.1728 + 1e-3
    assert 0.1675 <= eps <= 0.1728  # in fact strictly inside
    assert sh.clones_closed_form(4.0, 10**5, 1e-6) == pytest.approx(0.5378, abs=1e-3)


# ----------------------------------------------------------------------------- definitions


def _clone_delta_by_enumeration(eps: float, eps0: float, n: int) -> float:
    """δ(ε) of the clone pair from its definition, summed over every (c, a) ([FMT21] Thm 3.2).

    C ~ Bin(n − 1, e^{−ε0}); given C = c, P = A + Δ and Q = A + 1 − Δ for the first coordinate
    (the second is c + 1 minus it), A ~ Bin(c, 1/2), Δ ~ Bern(e^{ε0}/(e^{ε0} + 1)).
    """
    alpha = math.exp(eps0) / (math.exp(eps0) + 1)
    total_pq, total_qp = 0.0, 0.0
    for c in range(n):
        wc = stats.binom.pmf(c, n - 1, math.exp(-eps0))
        a = np.arange(c + 2)
        b = stats.binom.pmf(a, c, 0.5)
        b_prev = stats.binom.pmf(a - 1, c, 0.5)
        P = alpha * b_prev + (1 - alpha) * b  # A + Δ: shifted by one with probability α
        Q = (1 - alpha) * b_prev + alpha * b
        total_pq += wc * np.maximum(P - math.exp(eps) * Q, 0).sum()
        total_qp += wc * np.maximum(Q - math.exp(eps) * P, 0).sum()
    return max(total_pq, total_qp)


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 40), (3.0, 25), (0.4, 60), (2.0, 1)])
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.3, 0.9])
def test_clone_delta_equals_its_definition(eps0, n, eps):
    assert sh.clones_delta(eps, eps0, n) == pytest.approx(
        _clone_delta_by_enumeration(eps, eps0, n), abs=1e-13
    )


def test_cdf_recurrence_matches_scipy_at_a_million():
    """The anchored recurrence for F_c(κ − 1) along the window equals SciPy's binomial cdf."""
    for eps0, eps in [(1.0, 0.0), (1.0, 0.004), (0.5, 0.0016), (4.0, 0.05)]:
        c = sh._binomial_window(10**6 - 1, math.exp(-eps0), 1e-12).x
        R = (math.exp(eps) - math.exp(-eps0)) / (1 - math.exp(eps - eps0))
        kappa = np.floor((c + 1) / (1 + R))
        exact = stats.binom.cdf(kappa - 1, c, 0.5)
        np.testing.assert_allclose(sh._half_binomial_cdf_below(kappa, c), exact, rtol=0, atol=1e-12)


def _shuffled_rr_delta_by_enumeration(eps: float, eps0: float, n: int) -> float:
    """Shuffled binary RR, others holding 0, from all 2^n report vectors (their count is what a
    shuffle reveals)."""
    keep = math.exp(eps0) / (math.exp(eps0) + 1)
    dists = []
    for target in (0, 1):
        counts = np.zeros(n + 1)
        for reports in itertools.product((0, 1), repeat=n):
            values = (target,) + (0,) * (n - 1)
            pr = np.prod(
                [keep if r == v else 1 - keep for r, v in zip(reports, values, strict=True)]
            )
            counts[sum(reports)] += pr
        dists.append(counts)
    p0, p1 = dists
    g = math.exp(eps)
    return max(np.maximum(p0 - g * p1, 0).sum(), np.maximum(p1 - g * p0, 0).sum())


@pytest.mark.parametrize("eps", [0.0, 0.2, 0.7])
def test_shuffled_rr_delta_equals_its_definition(eps):
    assert sh.shuffled_rr_delta(eps, 1.5, 9) == pytest.approx(
        _shuffled_rr_delta_by_enumeration(eps, 1.5, 9), abs=1e-14
    )


def test_searches_return_the_root_from_the_right_side():
    for eps0, n, delta in [(4.0, 10**5, 1e-6), (1.0, 10**4, 1e-8), (0.5, 3000, 1e-5)]:
        up = sh.clones_epsilon(eps0, n, delta)
        assert sh.clones_delta(up, eps0, n) <= delta
        assert sh.clones_delta(up * (1 - 1e-6), eps0, n) > delta
        low = sh.shuffled_rr_epsilon(eps0, n, delta)
        assert sh.shuffled_rr_delta(low, eps0, n) > delta
        assert sh.shuffled_rr_delta(low * (1 + 1e-6), eps0, n) <= delta


# ----------------------------------------------------------------------------- ordering


GRID = [
    (eps0, n, delta)
    for eps0 in (0.25, 1.0, 2.0, 4.0, 8.0)
    for n in (100, 2_000, 50_000, 1_000_000)
    for delta in (1e-4, 1e-8)
]


@pytest.mark.parametrize(("eps0", "n", "delta"), GRID)
def test_numerical_between_lower_bound_and_closed_form(eps0, n, delta):
    num = sh.clones_epsilon(eps0, n, delta)
    assert sh.shuffled_rr_epsilon(eps0, n, delta) <= num <= eps0
    if sh.clones_closed_form_valid(eps0, n, delta):
        assert num <= sh.clones_closed_form(eps0, n, delta)


def test_clone_delta_dominates_shuffled_rr_pointwise():
    """The clone pair dominates every shuffled ε0-LDP protocol: δ_clone(ε) ≥ δ_RR(ε)."""
    for eps0, n in [(1.0, 500), (4.0, 5000), (0.3, 20000)]:
        for eps in np.linspace(0, eps0, 12):
            assert sh.clones_delta(float(eps), eps0, n) >= sh.shuffled_rr_delta(float(eps), eps0, n)


def test_monotone_in_n_and_eps0():
    ns = [10, 100, 1_000, 10_000, 100_000, 1_000_000]
    for eps0 in (0.5, 2.0, 6.0):
        values = [sh.clones_epsilon(eps0, n, 1e-6) for n in ns]
        assert all(a > b for a, b in itertools.pairwise(values)), values
    for n in (1_000, 1_000_000):
        values = [sh.clones_epsilon(e, n, 1e-6) for e in (0.1, 0.5, 1, 2, 4, 8, 16)]
        assert all(a < b for a, b in itertools.pairwise(values)), values


def test_extremes():
    # One report: no clone can hide it; (ε, δ) of binary RR at ε0: δ(ε) = α − e^ε(1 − α).
    alpha = math.exp(2.0) / (math.exp(2.0) + 1)
    assert sh.clones_epsilon(2.0, 1, 1e-3) == pytest.approx(
        math.log((alpha - 1e-3) / (1 - alpha)), rel=1e-8
    )
    # A huge local ε (a device's whole tuple): no amplification left, and no overflow.
    assert sh.clones_epsilon(80.0, 10**6, 1e-6) == pytest.approx(80.0, abs=1e-6)
    # Past EPS0_MAX a route keeps its local ε (e^{ε0} would overflow; nothing to amplify).
    long_one_shot = sh.collection_bound(0.8, None, 10**6, 1000, 1e-6, linkage=NOTHING)
    assert {r.name: r.epsilon for r in long_one_shot.routes}["tuple"] == pytest.approx(800.0)
    # δ larger than the total variation: ε = 0.
    assert sh.clones_epsilon(0.01, 10**6, 0.5) == 0.0
    with pytest.raises(ValueError, match="eps0"):
        sh.clones_closed_form(6.0, 1000, 1e-6)  # outside the validity condition


# ----------------------------------------------------------------------------- composition


def test_optimal_composition_matches_its_definition():
    """k pure ε-RR pairs: the hockey-stick of the product distribution over 2^k outputs."""
    eps, k = 0.4, 5
    p = math.exp(eps) / (1 + math.exp(eps))
    P = np.array([np.prod(o) for o in itertools.product((p, 1 - p), repeat=k)])
    Q = np.array([np.prod(o) for o in itertools.product((1 - p, p), repeat=k)])
    for eps_total in (0.0, 0.5, 1.3, 2.0):
        direct = np.maximum(P - math.exp(eps_total) * Q, 0).sum()
        assert sh.optimal_composition_delta(eps, 0.0, k, eps_total) == pytest.approx(direct)


@pytest.mark.parametrize(
    ("eps", "delta0", "count", "delta"),
    [(0.1, 1e-9, 10, 1e-6), (0.01, 1e-9, 100, 1e-6), (0.5, 1e-8, 20, 1e-5), (1.0, 0.0, 5, 1e-6)],
)
def test_optimal_composition_agrees_with_dp_accounting(eps, delta0, count, delta):
    # dp_accounting comes with the accounting extra ([all], which `make test` installs): a
    # missing package fails here (ModuleNotFoundError), it never skips.
    ours = sh.compose_optimal(eps, delta0, count, delta)
    theirs = sh.compose_pld_dp_accounting(eps, delta0, count, delta)
    assert ours == pytest.approx(theirs, rel=1e-6)
    assert ours <= sh.compose_advanced(eps, count, delta - count * delta0) <= count * eps


def test_compose_refuses_an_impossible_delta():
    with pytest.raises(ValueError, match="infinite privacy loss"):
        sh.compose_optimal(0.1, 1e-3, 10, 1e-3)


# ----------------------------------------------------------------------------- a collection


EPS_1, EPS_PERM, N, DELTA = 0.8, 2.0, 100_000, 1e-6


def test_collection_never_above_the_local_budget_and_never_below_a_lower_bound():
    """Shuffling never hurts: figure ≤ min(τ·ε1, d·ε∞). And it is a valid upper bound of a
    collection whose first epoch alone is shuffled binary RR at ε1 (L-GRR over k = 2), so it is
    at least that epoch's exact ε (docs/math.md §17.5)."""
    floor = sh.shuffled_rr_epsilon(EPS_1, N, DELTA)
    for epochs in (1, 2, 3, 5, 100):
        for memos in sorted({1, min(2, epochs), min(4, epochs)}):
            got = sh.collection_bound(EPS_1, EPS_PERM, N, epochs, DELTA, memos, linkage=MEMO)
            assert got.epsilon <= min(epochs * EPS_1, memos * EPS_PERM)
            assert got.epsilon >= floor


def test_round_one_amplified_once_is_a_floor_only_when_tau_eps1_reaches_eps_perm():
    """The issue asks for "never below round 1's amplified once". That holds exactly when
    τ·ε1 ≥ ε∞: for τ = 1 the collection is one ε1 report per device, whose shuffle is below
    the shuffled ε∞ (docs/math.md §17.5)."""
    memo_once = sh.clones_epsilon(EPS_PERM, N, DELTA)
    one = sh.collection_bound(EPS_1, EPS_PERM, N, 1, DELTA, linkage=MEMO)
    assert one.route == "tuple"
    assert one.epsilon == pytest.approx(sh.clones_epsilon(EPS_1, N, DELTA))
    assert one.epsilon < memo_once
    for epochs in (3, 10, 100, 1000):  # τ·ε1 ≥ ε∞ = 2.5·ε1
        for memos in (1, 2, 3):
            got = sh.collection_bound(EPS_1, EPS_PERM, N, epochs, DELTA, memos, linkage=MEMO)
            assert got.epsilon >= memo_once
    assert sh.collection_bound(EPS_1, EPS_PERM, N, 100, DELTA, linkage=MEMO).epsilon == memo_once


def test_collection_monotone_in_epochs_and_memos():
    by_tau = [
        sh.collection_bound(EPS_1, EPS_PERM, N, t, DELTA, linkage=MEMO).epsilon
        for t in (1, 2, 3, 50)
    ]
    assert all(a <= b for a, b in itertools.pairwise(by_tau))
    by_memos = [
        sh.collection_bound(EPS_1, EPS_PERM, N, 20, DELTA, d, linkage=MEMO).epsilon
        for d in (1, 2, 5)
    ]
    assert all(a < b for a, b in itertools.pairwise(by_memos))


def test_stateless_clients_compose_per_epoch():
    got = sh.collection_bound(EPS_1, None, N, 100, DELTA, linkage=NOTHING)
    assert got.route == "epochs"
    per_epoch = sh.clones_epsilon(EPS_1, N, DELTA)
    assert per_epoch < got.epsilon < 100 * per_epoch
    assert {r.name for r in got.routes} == {"epochs", "tuple"}


def test_central_summary_of_protocols():
    chain = sh.central_summary(ll.protocol("L-GRR", k=74, eps_perm=2, eps_1=0.8), N, 100, DELTA)
    assert chain.per_report == pytest.approx(0.8, abs=1e-9)
    assert chain.per_memo == pytest.approx(2.0, abs=1e-9)
    assert chain.collection_local == pytest.approx(2.0, abs=1e-9)
    assert chain.per_memo_shuffled == pytest.approx(sh.clones_epsilon(2.0, N, DELTA), rel=1e-9)
    assert chain.collection == pytest.approx(chain.per_memo_shuffled)
    assert chain.as_dict()["routes"][0]["name"] == "memo"
    assert f"({chain.collection:.3g}, 1e-06)-DP" in chain.as_dict()["words"]
    one_shot = sh.central_summary(ll.protocol("OUE", k=74, eps=0.8), N, 10, DELTA)
    assert one_shot.per_memo is None and one_shot.route == "epochs"
    rappor_once = ll.protocol("RAPPOR-one-time", k=8, h=1, m=8, f=0.0, p=0.25, q=0.75)
    assert sh.central_summary(rappor_once, N, 5, DELTA).per_memo is None  # stateless client


class _NoFiniteEpsilon:
    name = "broken"
    longitudinal = False
    linkage = NOTHING

    def single_report_epsilon(self) -> float:
        return math.inf


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sh.clones_epsilon(1.0, 0, 1e-6), "'n' must be an integer >= 1"),
        (lambda: sh.clones_epsilon(1.0, 100, 0.0), r"'delta' must be a finite number in \(0, 1\)"),
        (lambda: sh.clones_epsilon(1.0, 100, 1.0), r"'delta' must be a finite number in \(0, 1\)"),
        (lambda: sh.clones_epsilon(0.0, 100, 1e-6), r"'eps0' must be a finite number in \(0,"),
        (lambda: sh.clones_epsilon(-1.0, 100, 1e-6), r"'eps0' must be a finite number in \(0,"),
        (lambda: sh.clones_epsilon(math.nan, 100, 1e-6), "'eps0'"),
        (lambda: sh.clones_epsilon(700.0, 100, 1e-6), "'eps0'"),
        (lambda: sh.clones_epsilon(1.0, 2.5, 1e-6), "'n' must be an integer"),
        (lambda: sh.central_summary(_NoFiniteEpsilon(), 100, 1), "no finite ε0"),
        (lambda: sh.central_summary(object(), 100, 1), "known ε0"),
        (lambda: sh.collection_bound(0.5, 1.0, 100, 3, 1e-6, memos=4, linkage=MEMO), "'memos'"),
        (lambda: sh.collection_bound(0.5, 1.0, 100, 3, 1e-6, linkage=NOTHING), "'eps_perm'"),
        (lambda: sh.collection_bound(0.5, None, 100, 3, 1e-6, linkage="none"), "'linkage'"),
    ],
)
def test_bad_input_is_one_line(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- change patterns


def _lgrr_trajectory_law(proto, trajectory):
    """Exact law of the reports of one L-GRR client over a trajectory of values (one memo per
    distinct value, round 2 afresh per report)."""
    k = proto.k
    R1 = np.full((k, k), proto.q1)
    np.fill_diagonal(R1, proto.p1)
    R2 = np.full((k, k), proto.q2)
    np.fill_diagonal(R2, proto.p2)
    values = sorted(set(trajectory))
    group = [values.index(v) for v in trajectory]
    law = np.zeros((k,) * len(trajectory))
    for memos in itertools.product(range(k), repeat=len(values)):
        weight = np.prod([R1[v, m] for v, m in zip(values, memos, strict=True)])
        for ys in itertools.product(range(k), repeat=len(trajectory)):
            law[ys] += weight * np.prod([R2[memos[g], y] for g, y in zip(group, ys, strict=True)])
    return law


def test_memo_budget_holds_within_a_change_pattern_only():
    """Why the collection routes assume devices change values at the same epochs: between two
    trajectories with different change patterns the exact ε of two L-GRR reports exceeds
    min(2·ε1, memos·ε∞) (docs/math.md §17.6)."""
    proto = ll.protocol("L-GRR", k=3, eps_perm=2.0, eps_1=0.8)
    trajectories = list(itertools.product(range(3), repeat=2))
    law = {t: _lgrr_trajectory_law(proto, t) for t in trajectories}

    def pattern(t):
        return t[0] == t[1]

    def eps(a, b):
        return float(np.max(np.log(law[a] / law[b])))

    same = max(eps(a, b) for a in trajectories for b in trajectories if pattern(a) == pattern(b))
    across = max(eps(a, b) for a in trajectories for b in trajectories)
    assert same <= 2 * 0.8 + 1e-9
    assert across > min(2 * 0.8, 2 * 2.0) + 0.1


@pytest.mark.parametrize("eps_1", [0.8, 1.9])
def test_any_two_trajectories_within_the_sequential_bound(eps_1):
    """(4.2): between any two trajectories, t reports of a chain cost at most ε1 + (t − 1)·ε2,
    ε2 = ln(p2/q2) the ε of L-GRR's round 2 (docs/math.md §4); exact over every pair for t = 2
    and t = 3 (k = 3), with the across-pattern loss above (4.1) so the bound is the binding one."""
    proto = ll.protocol("L-GRR", k=3, eps_perm=2.0, eps_1=eps_1)
    eps_2 = float(np.log(proto.p2 / proto.q2))
    for tau in (2, 3):
        trajectories = list(itertools.product(range(3), repeat=tau))
        law = {t: _lgrr_trajectory_law(proto, t) for t in trajectories}
        pairs = itertools.product(trajectories, repeat=2)
        worst = max(float(np.max(np.log(law[a] / law[b]))) for a, b in pairs)
        assert worst > min(tau * eps_1, 2.0 * min(tau, 3))  # (4.1) would understate it
        assert worst <= eps_1 + (tau - 1) * eps_2 + 1e-9
