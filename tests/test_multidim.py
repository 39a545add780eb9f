"""Multidimensional collection (SMP, SPL, ALLOMFREE) and [004] Tables 1–2.

Statistical tests use fixed seeds and Z = 5 standard errors; each SE comes from the analytic
variance of the protocol (``variance(n_j, f)``) and the number of repetitions, or, for a
sample variance, from the sample's fourth moment (as in test_statistics.py). No tuned numbers.
"""

from __future__ import annotations

import doctest
import math
import re

import numpy as np
import pytest

import longldp as ll
from longldp.apps.multidim import collection as multidim
from longldp.apps.multidim import tables as multidim_tables
from longldp.apps.multidim.collection import (
    MultidimCollection,
    allomfree_protocol,
    allomfree_vstar,
    mse_avg_multidim,
    simulate_multidim,
)
from longldp.apps.multidim.tables import allomfree_tables, paper_value_agrees

Z = 5.0
KS = (2, 5, 12)


def make_values(seed: int, n: int, ks=KS, tau: int = 2, static: bool = False) -> np.ndarray:
    """values[τ, n, d]: skewed (Zipf-like, one absent value) per attribute; each later
    timestamp a random permutation of the users (docs/math.md §6.1), or a copy when ``static``."""
    rng = np.random.default_rng(seed)
    cols = []
    for k in ks:
        w = 1.0 / np.arange(1, k + 1)
        w[-1] = 0.0  # an absent value exercises f = 0
        cols.append(rng.choice(k, size=n, p=w / w.sum()))
    x0 = np.stack(cols, axis=-1)
    rows = [x0] + [x0 if static else x0[rng.permutation(n)] for _ in range(tau - 1)]
    return np.stack(rows)


def run_reps(coll, values, reps, engine, seed, assignment=None):
    rng = np.random.default_rng(seed)
    results = [coll.collect(values, rng, engine=engine, assignment=assignment) for _ in range(reps)]
    est = [np.stack([r.estimates[j] for r in results]) for j in range(coll.d)]  # (R, τ, K_j)
    return results, est


def assert_unbiased(coll, results, est, reps):
    """Mean of R estimates within Z·sqrt(Var(n_j, f_j)/R) of the reporters' frequencies."""
    first = results[0]
    for j, proto in enumerate(coll.protocols):
        nj = int(first.reporters[j])
        for t in range(first.tau):
            f = first.reporter_truth[j][t]
            se = np.sqrt(proto.variance(nj, f) / reps)
            dev = np.abs(est[j][:, t].mean(axis=0) - f)
            assert np.all(dev <= Z * se), (coll.solution, proto.name, j, t, dev / se)


# ------------------------------------------------------------------------------ SMP structure


def test_smp_assignment_is_balanced_fixed_and_one_attribute_per_user():
    coll = MultidimCollection(KS, "SMP", 2.0, alpha=0.5, chain="L-OSUE")
    n, tau = 1001, 3
    res = coll.collect(make_values(1, n, tau=tau), np.random.default_rng(2))
    a = res.assignment
    assert a.shape == (n,)
    sizes = np.bincount(a, minlength=coll.d)
    assert sizes.tolist() == coll.group_sizes(n).tolist() == [334, 334, 333]
    assert res.reporters.tolist() == sizes.tolist()
    # every user sent τ reports, all of them for its one assigned attribute
    assert np.all((res.reports > 0).sum(axis=1) == 1)
    assert np.all(res.reports[np.arange(n), a] == tau)
    # assign(): balanced for any n >= d, reproducible from its seed
    for m in (3, 10, 1000):
        got = np.bincount(coll.assign(m, 5), minlength=3)
        assert got.max() - got.min() <= 1 and got.sum() == m
    assert np.array_equal(coll.assign(50, 7), coll.assign(50, 7))
    assert not np.array_equal(coll.assign(50, 7), coll.assign(50, 8))


def test_smp_memo_persists_so_static_users_spend_eps_perm_once():
    """Static values over τ timestamps: one memo per user, ε bound min(τ·ε1, ε∞) = ε∞."""
    coll = MultidimCollection(KS, "SMP", 2.0, eps_1=0.8, chain="L-GRR")
    tau = 4
    res = coll.collect(make_values(3, 600, tau=tau, static=True), 4)
    expect = [min(tau * p.single_report_epsilon(), p.first_round_epsilon()) for p in res.protocols]
    assert np.allclose(res.spent_epsilon, np.array(expect)[res.assignment])
    assert np.all(res.spent_epsilon <= 2.0 + 1e-9)


def test_count_level_has_no_clients():
    """No memo is drawn, so no ε bound; the reports are still counted (τ = 2 per user, in the
    one attribute she reports)."""
    coll = MultidimCollection(KS, "ALLOMFREE", 2.0, alpha=0.5)
    res = coll.collect(make_values(5, 300), 6, engine="count-level")
    assert res.spent_epsilon is None
    assert np.all(res.reports[np.arange(300), res.assignment] == 2)
    assert np.all(res.reports.sum(axis=1) == 2)
    assert res.reporters.tolist() == [100, 100, 100]


# ------------------------------------------------------------------------------ unbiasedness

CASES = [
    ("SMP", "L-OSUE", 2.0),
    ("SMP", "L-GRR", 2.0),
    ("SPL", "L-SUE", 3.0),
    ("SPL", "OLOLOHA", 3.0),
    ("ALLOMFREE", None, 2.0),
]


@pytest.mark.slow
@pytest.mark.parametrize(("solution", "chain", "eps_perm"), CASES)
def test_unbiased_count_level(solution, chain, eps_perm):
    coll = MultidimCollection(KS, solution, eps_perm, alpha=0.5, chain=chain)
    n, reps = 3000, 1500
    values = make_values(11, n)
    a = coll.assign(n, 12) if coll.sampling else None
    results, est = run_reps(coll, values, reps, "count-level", 13, a)
    assert_unbiased(coll, results, est, reps)


@pytest.mark.parametrize(
    ("solution", "chain", "engine"),
    [
        ("SMP", "L-OSUE", "per-user"),
        ("SMP", "L-OSUE", "reports"),
        ("SPL", "L-GRR", "per-user"),
        ("ALLOMFREE", None, "per-user"),
    ],
)
def test_unbiased_per_user(solution, chain, engine):
    coll = MultidimCollection(KS, solution, 2.0, alpha=0.5, chain=chain)
    n, reps = 1200, 150
    values = make_values(21, n)
    a = coll.assign(n, 22) if coll.sampling else None
    results, est = run_reps(coll, values, reps, engine, 23, a)
    assert_unbiased(coll, results, est, reps)
    if coll.sampling:  # every repetition used the one fixed assignment
        assert all(np.array_equal(r.assignment, a) for r in results)
    else:  # SPL: every user reports every attribute, nobody is assigned
        assert all(r.assignment is None for r in results)


@pytest.mark.slow
def test_smp_population_variance_includes_sampling_error():
    """Assignment redrawn every repetition: the estimate of the *population* frequency is
    unbiased with variance Var_j(n_j, f) + f(1−f)(n−n_j)/(n_j(n−1)) (balanced partition)."""
    coll = MultidimCollection((2, 3, 8), "ALLOMFREE", 4.0, alpha=0.6)
    n, reps = 900, 3000
    values = make_values(31, n, ks=(2, 3, 8), tau=1)
    results, est = run_reps(coll, values, reps, "count-level", 32)
    truth = results[0].truth
    variances = coll.variance(n, [t[0] for t in truth])
    sampling_share = []
    for j in range(coll.d):
        x = est[j][:, 0]
        f, var = truth[j][0], variances[j]
        assert np.all(np.abs(x.mean(axis=0) - f) <= Z * np.sqrt(var / reps)), j
        dev = x - x.mean(axis=0)
        s2 = (dev**2).sum(axis=0) / (reps - 1)
        m4 = (dev**4).mean(axis=0)
        se = np.sqrt(np.maximum(m4 - s2**2 * (reps - 3) / (reps - 1), 0.0) / reps)
        assert np.all(np.abs(s2 - var) <= Z * se), (j, s2, var)
        nj = int(coll.group_sizes(n)[j])
        sampling_share.append(np.max(var - coll.protocols[j].variance(nj, f)) / np.max(var))
    assert max(sampling_share) > 0.2  # the test would notice a missing sampling term


@pytest.mark.slow
def test_expected_mse_avg_matches_empirical():
    """Raw estimates: E[MSE_avg] = mean of the analytic variances; the empirical mean of
    MSE_avg over repetitions lies within Z SE (SE from the per-repetition spread)."""
    coll = MultidimCollection(KS, "SMP", 4.0, alpha=0.6, chain="L-OSUE")
    n, reps = 1500, 1500
    values = make_values(41, n)
    results, _ = run_reps(coll, values, reps, "count-level", 42)
    mse = np.array([r.mse_avg for r in results])
    expect = coll.expected_mse_avg(n, results[0].truth)
    assert abs(mse.mean() - expect) <= Z * mse.std(ddof=1) / math.sqrt(reps)


# ------------------------------------------------------------------------------ SPL budget


def test_spl_splits_the_budget_and_composes():
    d, eps_perm, eps_1 = 3, 3.0, 1.5
    coll = MultidimCollection(KS, "SPL", eps_perm, eps_1=eps_1, chain="L-OSUE")
    assert coll.attribute_budgets == pytest.approx((eps_perm / d, eps_1 / d))
    for p in coll.protocols:
        assert p.eps_perm == pytest.approx(eps_perm / d)
        assert p.eps_1 == pytest.approx(eps_1 / d)
        assert p.single_report_epsilon() == pytest.approx(eps_1 / d, rel=1e-9)
    n = 400
    # one report per attribute: Σ_j ε1/d = ε1 (sequential composition over attributes)
    one = coll.collect(make_values(51, n, tau=1), 52)
    assert np.all(one.reports == 1) and one.reporters.tolist() == [n] * d
    assert np.allclose(one.spent_epsilon, eps_1, rtol=1e-9)
    # static values over many reports: one memo per attribute, Σ_j ε∞/d = ε∞, never more
    many = coll.collect(make_values(53, n, tau=5, static=True), 54)
    assert np.allclose(many.spent_by_attribute, eps_perm / d, rtol=1e-9)
    assert np.all(many.spent_epsilon <= eps_perm * (1 + 1e-9))
    # changing values: per attribute min(t·ε1/d, m_j·ε∞/d) with m_j <= t, so <= t·ε1 in total
    moving = coll.collect(make_values(55, n, tau=2), 56)
    assert np.all(moving.spent_epsilon <= 2 * eps_1 * (1 + 1e-9))
    assert np.all(moving.spent_by_attribute <= 2 * eps_perm / d * (1 + 1e-9))


def test_spl_total_budget_may_exceed_eps_max_when_each_share_does_not():
    """The collection's (ε∞, ε1) is a user's whole tuple: SPL gives each attribute 1/d of it, so
    only the shares meet longldp.privacy.EPS_MAX (checked by the one budget parser)."""
    eps_max = ll.privacy.EPS_MAX
    coll = MultidimCollection(KS, "SPL", 2 * eps_max, eps_1=eps_max, chain="L-GRR")
    assert coll.attribute_budgets == pytest.approx((2 * eps_max / 3, eps_max / 3))
    with pytest.raises(ValueError, match=r"'eps_perm' must be a finite number > 0 and <= 30"):
        MultidimCollection(KS, "SMP", 2 * eps_max, eps_1=eps_max, chain="L-GRR")


# ------------------------------------------------------------------------------ ALLOMFREE choice


def vstar_lgrr_paper(k: int, a: float, b: float) -> float:
    """Unit V* of L-GRR with [004] eq. 13 (p2 as in the authors' notebook), independent code."""
    ea, eb = math.exp(a), math.exp(b)
    p1 = ea / (ea + k - 1)
    q1 = (1 - p1) / (k - 1)
    p2 = (ea * eb - 1) / (-k * eb + (k - 1) * ea + eb + ea * eb - 1)
    q2 = (1 - p2) / (k - 1)
    s = q1 * p2 + (1 - q1) * q2
    return s * (1 - s) / ((p1 - q1) ** 2 * (p2 - q2) ** 2)


def vstar_grr(k: int, eps: float) -> float:
    """Unit V* of GRR ([004] eq. 3): (e^ε + k − 2)/(e^ε − 1)²."""
    return (math.exp(eps) + k - 2) / (math.exp(eps) - 1) ** 2


def vstar_oue(eps: float) -> float:
    """Unit V* of OUE ([004] eq. 6), which L-OSUE equals at ε1: 4e^ε/(e^ε − 1)²."""
    return 4 * math.exp(eps) / (math.exp(eps) - 1) ** 2


@pytest.mark.parametrize(
    ("k", "eps_perm", "eps_1", "calibration", "expected"),
    [
        (2, 1.0, 0.6, "paper", "L-GRR"),  # Table 1: 0.000270 < 0.001078
        (32, 1.0, 0.6, "paper", "L-OSUE"),  # Table 1: 0.125036 > 0.001078
        (1024, 4.0, 2.4, "paper", "L-OSUE"),  # Table 1: 0.25903 > 0.000044
        (20, 4.0, 2.4, "paper", "L-GRR"),  # the crossover at ε∞ = 4, α = 0.6 ...
        (21, 4.0, 2.4, "paper", "L-OSUE"),
        (35, 4.0, 2.4, "exact", "L-GRR"),  # ... moves to k < 3e^{ε1} + 2 = 35.07 with "exact"
        (36, 4.0, 2.4, "exact", "L-OSUE"),
    ],
)
def test_allomfree_choice_hand_cases(k, eps_perm, eps_1, calibration, expected):
    assert allomfree_protocol(k, eps_perm, eps_1, calibration).name == expected


def test_allomfree_choice_matches_independent_vstar_comparison():
    for eps_perm in (0.5, 1.0, 2.0, 4.0):
        for alpha in (0.1, 0.3, 0.6):
            eps_1 = round(alpha * eps_perm, 4)
            for k in range(2, 65):
                grr = vstar_lgrr_paper(k, eps_perm, eps_1) <= vstar_oue(eps_1)
                got = allomfree_protocol(k, eps_perm, eps_1).name
                assert got == ("L-GRR" if grr else "L-OSUE"), (k, eps_perm, eps_1)
                exact = vstar_grr(k, eps_1) <= vstar_oue(eps_1)
                got = allomfree_protocol(k, eps_perm, eps_1, "exact").name
                assert got == ("L-GRR" if exact else "L-OSUE"), (k, eps_perm, eps_1)


def test_allomfree_choice_does_not_depend_on_n():
    """V* ∝ 1/n for both candidates: comparing at n/d (SMP) or at n = 1 is the same."""
    for n in (1, 3333, 10_000):
        v = allomfree_vstar(6, 2.0, 1.2, n=n)
        assert v["L-GRR"] / v["L-OSUE"] == pytest.approx(
            vstar_lgrr_paper(6, 2.0, 1.2) / vstar_oue(1.2), rel=1e-9
        )


def test_allomfree_collection_protocols():
    coll = MultidimCollection((2, 32, 1024), "ALLOMFREE", 1.0, eps_1=0.6)
    assert [p.name for p in coll.protocols] == ["L-GRR", "L-OSUE", "L-OSUE"]
    assert coll.protocols[0].calibration == "paper"
    assert all(p.eps_perm == 1.0 and p.eps_1 == 0.6 for p in coll.protocols)
    exact = MultidimCollection((2, 6, 8), "ALLOMFREE", 1.0, eps_1=0.6, calibration="exact")
    assert [p.name for p in exact.protocols] == ["L-GRR", "L-GRR", "L-OSUE"]


# ------------------------------------------------------------------------------ metric


def test_mse_avg_multidim_averages_per_attribute_then_over_attributes():
    truth = [np.array([[0.5, 0.5]]), np.array([[0.25, 0.25, 0.25, 0.25]])]
    est = [np.array([[0.6, 0.4]]), truth[1].copy()]
    # attribute 0: (0.01 + 0.01)/2 = 0.01; attribute 1: 0 → (0.01 + 0)/2, not 0.02/6 pooled
    assert mse_avg_multidim(est, truth) == pytest.approx(0.005)
    # over τ timestamps: the mean of the per-timestamp values
    est2 = [np.vstack([e, t]) for e, t in zip(est, truth, strict=True)]
    tru2 = [np.vstack([t, t]) for t in truth]
    assert mse_avg_multidim(est2, tru2) == pytest.approx(0.0025)


def test_result_mse_uses_population_truth_and_norm_mul_gives_distributions():
    res = simulate_multidim(
        make_values(61, 900),
        KS,
        "SMP",
        2.0,
        alpha=0.5,
        chain="L-OSUE",
        rng=62,
        postprocess="norm-mul",
    )
    for e in res.estimates:
        assert np.all(e >= 0) and np.allclose(e.sum(axis=1), 1.0)
    assert res.mse_avg == pytest.approx(mse_avg_multidim(res.estimates, res.truth))
    assert res.mse_per_attribute.shape == (3,)
    assert res.mse_avg == pytest.approx(res.mse_per_attribute.mean())


def test_per_attribute_input_equals_array_input():
    x = make_values(71, 300)
    coll = MultidimCollection(KS, "SPL", 3.0, alpha=0.5, chain="L-OSUE")
    a = coll.collect(x, 72)
    b = coll.collect([x[:, :, j] for j in range(3)], 72)
    for ea, eb in zip(a.estimates, b.estimates, strict=True):
        assert np.array_equal(ea, eb)


def test_docstring_example():
    assert doctest.testmod(multidim).failed == 0


# ------------------------------------------------------------------------------ Tables 1–2


def test_tables_layout_is_the_papers():
    t = allomfree_tables()
    keys = [(r.alpha, r.eps_perm, r.eps) for r in t.table1]
    assert len(keys) == 24 and keys[:5] == [
        (0.6, 0.5, 0.3),
        (0.6, 1.0, 0.6),
        (0.6, 2.0, 1.2),
        (0.6, 4.0, 2.4),
        (0.5, 0.5, 0.25),
    ]
    assert t.table1[0].columns == (
        "L-GRR(k=2)",
        "L-GRR(k=32)",
        "L-GRR(k=1024)",
        "L-OSUE",
        "L-SUE",
        "L-SOUE",
        "L-OUE",
    )
    assert [r.eps for r in t.table2] == [0.5, 1.0, 2.0, 4.0]
    assert t.table2[0].columns == ("GRR(k=2)", "GRR(k=32)", "GRR(k=1024)", "OUE", "SUE")


def test_tables_match_independent_closed_forms():
    n = 10_000
    t = allomfree_tables(n)
    for row in t.table1:
        a, b = row.eps_perm, row.eps
        for k, v in zip((2, 32, 1024), row.values[:3], strict=True):
            assert v == pytest.approx(vstar_lgrr_paper(k, a, b) / n, rel=1e-9)
        assert row.values[3] == pytest.approx(vstar_oue(b) / n, rel=1e-9)  # L-OSUE = OUE(ε1)
    for row in t.table2:
        e = row.eps
        for k, v in zip((2, 32, 1024), row.values[:3], strict=True):
            assert v == pytest.approx(vstar_grr(k, e) / n, rel=1e-9)
        assert row.values[3] == pytest.approx(vstar_oue(e) / n, rel=1e-9)
        sue = math.exp(e / 2) / (math.exp(e / 2) - 1) ** 2  # [004] eq. 5
        assert row.values[4] == pytest.approx(sue / n, rel=1e-9)
    # docs/math.md §3.6 test vectors (α = 0.6, ε∞ = 1)
    row = t.table1[1]
    assert row.values[4] == pytest.approx(1.10282e-3, rel=1e-5)  # L-SUE
    assert row.values[5] == pytest.approx(1.23436e-3, rel=1e-5)  # L-SOUE
    assert row.values[6] == pytest.approx(1.34700e-3, rel=1e-5)  # L-OUE


def test_tables_agree_with_every_printed_cell_of_the_paper():
    t = allomfree_tables()
    assert t.agreement() == (188, 188)
    assert "188/188" in t.format()
    # the "exact" calibration does not reproduce the paper's L-GRR columns at k > 2
    exact = allomfree_tables(calibration="exact")
    bad = {c for r in exact.table1 for c, ok in zip(r.columns, r.agrees, strict=True) if not ok}
    assert bad == {"L-GRR(k=32)", "L-GRR(k=1024)"}
    # other n: no printed cells to compare
    assert allomfree_tables(5000).agreement() == (0, 0)


def test_paper_value_agrees_rules():
    assert paper_value_agrees("26706", 26706.64)  # integers are truncated in the paper
    assert not paper_value_agrees("26707", 26706.64)
    assert paper_value_agrees("0.001103", 0.00110282)
    assert not paper_value_agrees("0.001103", 0.0011040)
    assert paper_value_agrees("2.12772", 2.127725123)  # '%.5f' % round(v, 6), double rounding
    assert not paper_value_agrees("0.5", None)
    assert multidim_tables.PAPER_PRINTED[(1, (0.6, 1.0), "L-GRR(k=32)")] == "0.125036"


# ------------------------------------------------------------------------------ bad input


def _coll(**kw):
    base = {"ks": KS, "solution": "SMP", "eps_perm": 2.0, "eps_1": 1.0, "chain": "L-OSUE"}
    base.update(kw)
    return MultidimCollection(**base)


GOOD = make_values(81, 30, tau=1)

BAD = [
    ("ks-empty", lambda: _coll(ks=()), "'ks'"),
    ("ks-not-seq", lambda: _coll(ks=5), "'ks'"),
    ("ks-small", lambda: _coll(ks=(2, 1)), "'ks[1]'"),
    ("solution", lambda: _coll(solution="SMPX"), "'solution'"),
    ("chain-unknown", lambda: _coll(chain="L-FOO"), "'chain'"),
    ("chain-one-shot", lambda: _coll(chain="OUE"), "'chain'"),
    ("chain-missing", lambda: _coll(chain=None), "'chain'"),
    ("allomfree-chain-str", lambda: _coll(solution="ALLOMFREE", chain="L-GRR"), "'chain'"),
    ("eps_perm", lambda: _coll(eps_perm=-1.0), "'eps_perm'"),
    ("eps_1-too-big", lambda: _coll(eps_1=2.0), "'eps_1'"),
    ("eps_1-missing", lambda: _coll(eps_1=None), "'eps_1'"),
    ("alpha", lambda: _coll(eps_1=None, alpha=1.2), "'alpha'"),
    ("alpha-and-eps_1", lambda: _coll(eps_1=0.3, alpha=0.5), "'alpha'"),
    ("eps_1-one-round", lambda: _coll(chain="dBitFlipPM"), "'eps_1'"),
    ("calibration", lambda: _coll(calibration="bogus"), "'calibration'"),
    ("values-d", lambda: _coll().collect(GOOD[..., :2], 0), "'values'"),
    ("values-list-d", lambda: _coll().collect([GOOD[0, :, 0]], 0), "'values'"),
    ("values-domain", lambda: _coll().collect(GOOD + np.array([0, 5, 0]), 0), "'values"),
    ("values-float", lambda: _coll().collect(GOOD.astype(float), 0), "'values"),
    ("values-n<d", lambda: _coll().collect(GOOD[:, :2], 0), "'values'"),
    ("engine", lambda: _coll().collect(GOOD, 0, engine="fast"), "'engine'"),
    ("postprocess", lambda: _coll().collect(GOOD, 0, postprocess="nope"), "'postprocess'"),
    (
        "assignment-empty",
        lambda: _coll().collect(GOOD, 0, assignment=np.zeros(30, dtype=int)),
        "'assignment'",
    ),
    (
        "assignment-spl",
        lambda: _coll(solution="SPL").collect(GOOD, 0, assignment=np.zeros(30, dtype=int)),
        "'assignment'",
    ),
    ("mse-attributes", lambda: mse_avg_multidim([np.zeros(2)], []), "'estimates'"),
    ("tables-calibration", lambda: allomfree_tables(calibration="x"), "'calibration'"),
]


@pytest.mark.parametrize(("case", "call", "param"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_parameter(case, call, param):
    with pytest.raises(ValueError, match=re.escape(param)):
        call()


def test_registry_names_are_case_insensitive_and_canonical():
    coll = MultidimCollection(KS, "smp", 2.0, alpha=0.5, chain="l-osue")
    assert coll.solution == "SMP" and coll.chain == "L-OSUE"
    assert all(isinstance(p, ll.protocols.LOSUE) for p in coll.protocols)
