"""The registered sketch mechanisms (docs/math.md §21.12): queried items unbiased with the
stated variance, Σf² estimated from the sketch, the count-level law, the supports, bad input.

The common tests (tests/registry_cases.py) enroll CMS, HCMS, PCS, SHE, THE, L-CMS and L-HCMS
for privacy, codecs, clients, budgets, linkage and the server; this file checks what is theirs
alone: the estimator of queried items. Every collection uses a fresh public salt, so the
collision term (21.3) is part of the variance being checked.
"""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.protocols.sketch import oracles

#: A Zipf-like population: two frequent items and a long tail of singletons.
N = 4000
ITEMS = ["alpha"] * 800 + ["beta"] * 400 + [f"tail-{i}" for i in range(N - 1200)]
TRUE_F = np.array([0.2, 0.1, 0.0])
QUERY = ["alpha", "beta", "nobody-holds-this"]
SUM_F2 = 0.2**2 + 0.1**2 + (N - 1200) / N**2
REPS = 100
PARAMS = {
    "CMS": {"m": 64, "d": 8, "eps": 2.0},
    "HCMS": {"m": 64, "d": 8, "eps": 2.0},
    "PCS": {"m": 64, "d": 8, "eps": 2.0},
    "SHE": {"m": 64, "d": 8, "eps": 2.0},
    "THE": {"m": 64, "d": 8, "eps": 2.0},
    "L-CMS": {"m": 64, "d": 8, "eps_perm": 3.0, "eps_1": 2.0},
    "L-HCMS": {"m": 64, "d": 8, "eps_perm": 3.0, "eps_1": 2.0},
}


def collections(name: str, engine: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f̂, stated se, estimated Σf²) of REPS independent collections, each with its own salt."""
    rng = np.random.default_rng(sum(map(ord, name)) + len(engine))
    est, se, s2 = [], [], []
    for r in range(REPS):
        proto = ll.protocol(name, salt=1000 + r, **PARAMS[name])
        if engine == "count-level":
            support = proto.sample_item_support(ITEMS, rng)
        else:
            support = proto.perturb_support(ITEMS, proto.new_memo(N), rng)
        got = proto.query(support, N, QUERY)
        est.append(got.raw)
        se.append(got.se)
        s2.append(proto.sum_f2(support, N))
    return np.array(est), np.array(se), np.array(s2)


ENGINES = [
    pytest.param(name, engine, id=f"{name}-{engine}")
    for name in PARAMS
    for engine in ("reports", "count-level")
    # SHE's reports are m floats each: its count-level law stands in for them (checked against
    # real reports below).
    if (engine == "reports" and name != "SHE")
    or (engine == "count-level" and name in ("CMS", "PCS", "SHE", "THE"))
]


@pytest.mark.parametrize(("name", "engine"), ENGINES)
def test_queried_items_are_unbiased_with_the_stated_variance(name, engine):
    """Over collections with fresh salts: the mean of f̂ is within 5 SE of the truth, the
    empirical variance equals (21.4) at the true Σf² within 5 SE of a variance estimate, the
    stated standard error (Σf² estimated from each sketch, (21.13)) matches (21.4) on average,
    and the estimate of Σf² is unbiased within 5 SE (up to its clipping at 1/n)."""
    est, se, s2 = collections(name, engine)
    proto = ll.protocol(name, **PARAMS[name])
    var = proto.variance(N, TRUE_F, SUM_F2)
    assert np.all(np.abs(est.mean(axis=0) - TRUE_F) <= 5 * np.sqrt(var / REPS))
    ratio = est.var(axis=0, ddof=1) / var
    assert np.all(np.abs(ratio - 1) <= 5 * np.sqrt(2 / (REPS - 1))), ratio
    stated = (se**2).mean(axis=0) / var
    assert np.all(np.abs(stated - 1) <= 0.1), stated
    assert abs(s2.mean() - SUM_F2) <= 5 * s2.std(ddof=1) / np.sqrt(REPS) + 1e-12


def test_dropping_the_collision_term_fails_the_variance_check():
    """The check above can fail: CMS with few columns, where collisions dominate, has an
    empirical variance far above the variance without (21.3)."""
    rng = np.random.default_rng(3)
    params = {"m": 8, "d": 2, "eps": 4.0}
    est = [
        ll.protocol("CMS", salt=r, **params)
        .query(ll.protocol("CMS", salt=r, **params).sample_item_support(ITEMS, rng), N, QUERY)
        .raw
        for r in range(REPS)
    ]
    proto = ll.protocol("CMS", **params)
    without = proto.variance(N, 0.0, 0.0)  # an unheld item without the term: Σf² ≤ 1/n
    with_term = proto.variance(N, TRUE_F, SUM_F2)[2]
    emp = np.var(np.array(est)[:, 2], ddof=1)
    assert emp / without > 1 + 5 * np.sqrt(2 / (REPS - 1))
    assert abs(emp / with_term - 1) <= 5 * np.sqrt(2 / (REPS - 1))


@pytest.mark.parametrize("name", ["CMS", "PCS", "SHE", "THE"])
def test_count_level_support_has_the_law_of_the_reports(name):
    """sample_item_support against the server's counts of real reports, cell by cell: equal
    means within 5 SE (one salt: the law given the hash functions)."""
    proto = ll.protocol(name, m=16, d=4, eps=1.5)
    rng = np.random.default_rng(9)
    items = ITEMS[:1000]
    a = np.array([proto.sample_item_support(items, rng) for _ in range(200)], dtype=float)
    b = np.array([proto.support_counts(proto.perturb(items, None, rng)) for _ in range(200)])
    sd = np.sqrt((a.var(axis=0) + b.var(axis=0)) / 200) + 1e-9
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= 5 * sd)


def test_debiased_sketch_sums_to_the_query_and_its_cell_variance():
    """A queried item's f̂ is the sum of its cells of the estimate E (PCS: signed), and the
    stated cell variance (21.12) matches the empirical one given the rows."""
    for name in ("CMS", "HCMS", "PCS"):
        proto = ll.protocol(name, m=16, d=4, eps=2.0)
        rng = np.random.default_rng(1)
        support = proto.support_counts(proto.perturb(ITEMS, None, rng))
        table = proto.estimate(support, N)
        cols = proto.item_columns(QUERY)
        signs = oracles.query_signs(proto.cfg, proto.item_keys(QUERY)) if name == "PCS" else 1
        by_cells = (signs * table[np.arange(4)[None, :], cols]).sum(axis=1)
        np.testing.assert_allclose(by_cells, proto.query(support, N, QUERY).raw, atol=1e-12)
    proto = ll.protocol("CMS", m=16, d=2, eps=1.0)
    rng = np.random.default_rng(2)
    keys = proto.item_keys(ITEMS)
    rows = oracles.draw_rows(N, 2, rng)
    cells = []
    for _ in range(300):
        (bits,) = oracles.perturb(proto.cfg, keys, rows, rng)
        rep = np.empty(N, dtype=proto.report_dtype)
        rep["hash_id"], rep["bits"] = rows, bits
        cells.append(proto.support_counts(rep))
    cells = np.array(cells)
    est = np.array([proto.estimate(c, N) for c in cells])
    stated = proto.estimate_with_se(cells[0], N).se ** 2
    ratio = est.var(axis=0, ddof=1) / np.mean(
        [proto.estimate_with_se(c, N).se ** 2 for c in cells[:20]], axis=0
    )
    assert np.all(np.abs(ratio - 1) <= 5 * np.sqrt(2 / 299)), ratio
    assert stated.shape == (2, 16)


def test_hcms_support_is_integer_and_recovers_the_hadamard_sums():
    proto = ll.protocol("HCMS", m=32, d=4, eps=1.0)
    rng = np.random.default_rng(4)
    rep = proto.perturb(ITEMS[:500], None, rng)
    support = proto.support_counts(rep)
    assert support.dtype == np.int64 and np.all(support[:, 1:] >= 0)
    assert np.all(support[:, 1:] <= support[:, :1])
    kernel = oracles.aggregate_hcms(proto.cfg, rep["l"], rep["bit"], rep["hash_id"])
    np.testing.assert_array_equal(proto.sketch_state(support).table, kernel.table)


def test_integer_items_and_queries():
    proto = ll.protocol("HCMS", m=64, d=8, eps=3.0, bits=48)
    rng = np.random.default_rng(6)
    values = np.concatenate([np.full(600, 2**47 + 5), rng.integers(0, 2**48, 1400)])
    agg = proto.aggregator()
    agg.add(proto.perturb(values, None, rng))
    got = agg.query(np.array([2**47 + 5, 7], dtype=np.uint64))
    assert abs(got.raw[0] - 0.3) <= 5 * got.se[0] and abs(got.raw[1]) <= 5 * got.se[1]
    with pytest.raises(ValueError, match=r"integers in \[0, 2\^48\)"):
        proto.perturb(np.array([2**48]), None, rng)
    with pytest.raises(ValueError, match="'value' must be an int"):
        proto.client(rng).report("text")


def test_bad_queries_are_refused_in_one_line():
    proto = ll.protocol("CMS", m=16, d=2, eps=1.0, max_length=8)
    agg = proto.aggregator()
    with pytest.raises(ValueError, match="no reports"):
        agg.query(["a"])
    agg.add(proto.perturb(["a", "b"], None, np.random.default_rng(0)))
    for bad, msg in (
        ([], "at least one item"),
        (["a" * 9], "at most 8 characters"),
        ([b"\xc3\x28"], "not UTF-8"),
        ([3], "must be str"),
    ):
        with pytest.raises(ValueError, match=msg) as err:
            agg.query(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="'support' must have shape"):
        proto.query(np.zeros((3, 3)), 10, ["a"])
    with pytest.raises(ValueError, match="no value counts"):
        proto.sample_support(np.ones(4, dtype=int))
    with pytest.raises(ValueError, match="no count-level law"):
        ll.protocol("HCMS", m=16, d=2, eps=1.0).sample_item_support(["a"])


def test_the_nominal_budget_of_the_is_above_its_exact_epsilon():
    proto = ll.protocol("THE", m=16, d=2, eps=2.0)
    assert proto.nominal_budget and 1.6 < proto.single_report_epsilon() < 1.64
    assert proto.accounting.eps_report == proto.single_report_epsilon()
