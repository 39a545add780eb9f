"""FELIP: the acceptance list of docs/math.md §8.13 and the pieces behind it.

Statistical tests use fixed seeds and Z = 5 standard errors from the analytic variance of each
grid's oracle (``variance(n_G, f)``) and the number of repetitions; no tuned numbers.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from longldp import postprocess as pp
from longldp.apps.felip.estimate import (
    EstimationOptions,
    consistency_step,
    fit_model,
    nonnegative,
    postprocess_grids,
    weighted_update,
)
from longldp.apps.felip.grids import (
    Attribute,
    FelipLayout,
    FelipSchema,
    balanced_groups,
    cell_widths,
    refine_widths,
)
from longldp.apps.felip.pipeline import plan_felip, run_felip, simulate_felip
from longldp.apps.felip.queries import generate_workload, make_query, true_answers
from longldp.apps.felip.sizing import choose_sizes, grr_threshold, oracle_spec
from longldp.data import to_longitudinal

Z = 5.0


def mixed_schema() -> FelipSchema:
    return FelipSchema(
        (
            Attribute("a", 13),
            Attribute("b", 20),
            Attribute("c", 9),
            Attribute("k", 4, "categorical"),
        )
    )


def correlated(n: int, schema: FelipSchema, seed: int) -> np.ndarray:
    """(n, d) codes: a latent factor makes the attributes correlated; some codes are rare."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    cols = []
    for j, dom in enumerate(schema.domains):
        x = 0.8 * z + rng.normal(size=n) * (0.5 + 0.2 * j)
        ranks = np.argsort(np.argsort(x)) / n
        cols.append(np.minimum((ranks**1.3 * dom).astype(np.int64), dom - 1))
    return np.stack(cols, axis=1)


def exact_counts(layout: FelipLayout, x: np.ndarray) -> np.ndarray:
    """Every grid's histogram over *all* users: what noise-free grids would hold."""
    cells = layout.cells(x).astype(np.int64) + layout.offsets[:-1]
    return np.bincount(cells.ravel(), minlength=layout.total_cells).astype(np.float64)


LAYOUT_SIZES = ((5, 9, 3, 0), (3, 4, 2, 4))  # g1, g2 of mixed_schema: unequal widths everywhere


# ---------------------------------------------------------------------------------- §13 items


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 3.0])
def test_grr_chosen_exactly_below_3e_eps_plus_2(eps):
    spec = oracle_spec("adaptive", eps)
    for k in range(2, 80):
        assert (spec.choose(k) == "GRR") == (k < grr_threshold(eps)), k
    plan = plan_felip(mixed_schema(), 20_000, "adaptive", eps, selectivity=0.5)
    for g, proto in zip(plan.grids, plan.protocols, strict=True):
        assert (proto.name == "GRR") == (g.k < 3 * math.exp(eps) + 2)


def test_size_check_values_of_the_note():
    """n = 10⁶, d = 6 (m = 21), ε = 1, r = 0.5 (math §8.4)."""
    schema = FelipSchema(tuple(Attribute(f"x{i}", 50) for i in range(6)))
    sel = [0.5] * 6
    grr = choose_sizes(schema, 10**6, oracle_spec("GRR", 1.0), sel)
    oue = choose_sizes(schema, 10**6, oracle_spec("OUE", 1.0), sel)
    assert grr.m == oue.m == 21
    assert oue.one_d[0].sizes == (29,) and grr.one_d[0].sizes == (19,)
    assert oue.one_d[0].error < grr.one_d[0].error
    assert oue.pairs[(0, 1)].sizes == (4, 4) and grr.pairs[(0, 1)].sizes == (3, 3)
    # continuous OUE optimum x* = [n α1² (e^ε−1)² / (2 m r e^ε)]^{1/3} = 29.37
    e = math.e
    assert (10**6 * 0.49 * (e - 1) ** 2 / (2 * 21 * 0.5 * e)) ** (1 / 3) == pytest.approx(
        29.37, abs=0.01
    )
    by_error = choose_sizes(schema, 10**6, oracle_spec("adaptive", 1.0), sel, size_rule="error")
    by_var = choose_sizes(schema, 10**6, oracle_spec("adaptive", 1.0), sel, size_rule="variance")
    assert by_error.pairs[(0, 1)].oracle == "OUE" and by_error.pairs[(0, 1)].sizes == (4, 4)
    assert by_var.pairs[(0, 1)].oracle == "GRR" and by_var.pairs[(0, 1)].sizes == (3, 3)
    assert by_error.pairs[(0, 1)].error == pytest.approx(5.34e-4, rel=1e-3)
    assert grr.pairs[(0, 1)].error == pytest.approx(5.56e-4, rel=1e-3)
    # unify "code": max(2, ⌊mean⌋ − 1) = 3; "mean": 4; 1-D raised to at least g2
    assert by_error.g2 == (3,) * 6 and by_error.g1 == (29,) * 6
    mean = choose_sizes(schema, 10**6, oracle_spec("OUE", 1.0), sel, unify="mean")
    assert mean.g2 == (4,) * 6


def test_sizes_brute_force_matches_full_search_for_k_dependent_oracles():
    """The pruned search for GRR-type V(k) finds the same optimum as an unpruned one."""
    spec = oracle_spec("L-GRR", 2.0, alpha=0.5)
    for name in ("GRR", "L-GRR"):
        s = oracle_spec(name, 2.0) if name == "GRR" else spec
        u = s.variance_curve(name, np.arange(2, 400))
        assert np.all(np.diff(u) >= 0)  # the pruning assumes V non-decreasing in k
    for n in (2_000, 10**6):
        got = choose_sizes(mixed_schema(), n, spec, [0.4, 0.6, 0.5, 1]).pairs[(0, 1)]
        X, Y = np.meshgrid(np.arange(2, 14), np.arange(2, 21), indexing="ij")
        m = 10
        V = m * spec.variance_curve("L-GRR", X * Y) / n
        E = (2 * 0.03 * (X * 0.4 + Y * 0.6) / (X * Y)) ** 2 + X * 0.4 * Y * 0.6 * V
        i = np.unravel_index(np.argmin(E), E.shape)
        assert got.sizes == (X[i], Y[i])


def test_partition_example_and_nesting():
    w = cell_widths(50, 15)
    assert w.tolist() == [3] * 10 + [4] * 5
    fine, parent = refine_widths(w, 32)
    assert fine.sum() == 50 and fine.size == 32 and np.all(fine >= 1)
    for j in range(15):  # each 2-D interval is an exact union of consecutive 1-D cells
        assert fine[parent == j].sum() == w[j]
    assert np.all(np.diff(parent) >= 0)
    layout = FelipLayout(mixed_schema(), *LAYOUT_SIZES)
    for a in range(3):
        fe, ce = layout.fine[a].edges, layout.coarse[a].edges
        assert set(ce.tolist()) <= set(fe.tolist())


@pytest.mark.parametrize("seed", range(6))
def test_refine_widths_random(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 120))
    g2 = int(rng.integers(1, d + 1))
    g1 = int(rng.integers(g2, d + 1))
    coarse = cell_widths(d, g2)
    fine, parent = refine_widths(coarse, g1)
    assert fine.size == g1 and np.all(fine >= 1)
    assert np.array_equal(np.bincount(parent, weights=fine, minlength=g2), coarse)


def test_balanced_partition():
    g = balanced_groups(1003, 10, 7)
    sizes = np.bincount(g, minlength=10)
    assert sizes.sum() == 1003 and sizes.max() - sizes.min() <= 1


def test_exact_counts_give_exact_answers_and_stay_unchanged():
    schema = mixed_schema()
    layout = FelipLayout(schema, *LAYOUT_SIZES)
    x = correlated(3000, schema, 1)
    n = x.shape[0]
    c = exact_counts(layout, x)
    var = np.linspace(1.0, 3.0, layout.m)  # unequal weights must not matter for consistent input
    assert np.allclose(consistency_step(layout, c, n, var), c, atol=1e-9 * n)
    model = fit_model(layout, c, n, var, EstimationOptions(response_tol=1e-6))
    assert np.allclose(model.counts, c, atol=1e-9 * n)

    def aligned(a):  # ranges along a's 2-D cell boundaries (a categorical attribute: points)
        e = layout.coarse[a].edges
        if schema.kinds[a] == "categorical":
            return [(0, 0), (2, 2), (e[-1] - 1, e[-1] - 1)]
        return [(e[0], e[1] - 1), (e[1], e[-1] - 1), (e[0], e[-1] - 1)]

    queries = [
        make_query(schema, {a: ra, b: rb})
        for a, b in itertools.combinations(range(4), 2)
        for ra in aligned(a)
        for rb in aligned(b)
    ]
    for a in range(4):  # aligned 1-D queries (categorical: a point, from the 2-D marginals)
        e = layout.fine[a].edges
        queries.append(make_query(schema, {a: (e[1], e[1]) if a == 3 else (e[1], e[-2] - 1)}))
    assert np.allclose(model.answer(queries), true_answers(x, queries), atol=1e-6 * n)
    rng = np.random.default_rng(0)
    for a, b in ((0, 1), (0, 2), (1, 2)):  # any range: the sum of R over it (math §8.9)
        R = model.response_matrix(a, b)
        for _ in range(5):
            la, lb = (
                sorted(rng.integers(0, schema.domains[a], 2)),
                sorted(rng.integers(0, schema.domains[b], 2)),
            )
            q = make_query(schema, {a: tuple(la), b: tuple(lb)})
            want = R[la[0] : la[1] + 1, lb[0] : lb[1] + 1].sum()
            assert model.answer([q])[0] == pytest.approx(want, abs=1e-6 * n)
    for a, b in ((0, 1), (2, 0), (1, 3)):  # the response matrix reproduces every cell
        R = model.response_matrix(a, b)
        lo, hi = sorted((a, b))
        full = R if a < b else R.T
        ca, cb = layout.coarse[lo], layout.coarse[hi]
        blocks = np.add.reduceat(np.add.reduceat(full, ca.edges[:-1], 0), cb.edges[:-1], 1)
        assert np.allclose(blocks, model.grid_counts(layout.pair_grid[(lo, hi)]), atol=1e-6 * n)
        if layout.one_d[lo] >= 0:
            rows = np.add.reduceat(full.sum(1), layout.fine[lo].edges[:-1])
            assert np.allclose(rows, model.grid_counts(layout.one_d[lo]), atol=1e-4 * n)


def _slab_sums(layout, counts):
    """{attribute: [S_G(v) for every grid G containing it]} computed from cell intervals."""
    out = {}
    for a in range(layout.schema.d):
        coarse = layout.coarse[a]
        rows = []
        for g in layout.grids:
            if a not in g.attributes:
                continue
            cells = layout.split(counts)[g.index].reshape(g.shape)
            if len(g.attributes) == 1:
                slab = coarse.cell_of(layout.fine[a].edges[:-1])
                rows.append(np.bincount(slab, weights=cells, minlength=coarse.size))
            else:
                rows.append(cells.sum(axis=1 if g.attributes[0] == a else 0))
        out[a] = np.array(rows)
    return out


def _sequential_consistency(layout, counts, n, var):
    """Note §7.2 written out attribute by attribute (with the Σ T = n constraint)."""
    c = counts.copy()
    for a in range(layout.schema.d):
        coarse = layout.coarse[a]
        members = []
        for g in layout.grids:
            if a not in g.attributes:
                continue
            idx = np.arange(layout.offsets[g.index], layout.offsets[g.index + 1])
            if len(g.attributes) == 1:
                slab = coarse.cell_of(layout.fine[a].edges[:-1])
            else:
                ii, jj = np.divmod(np.arange(g.k), g.shape[1])
                slab = ii if g.attributes[0] == a else jj
            members.append((idx, slab, np.bincount(slab, minlength=coarse.size), var[g.index]))
        S = [np.bincount(s, weights=c[i], minlength=coarse.size) for i, s, _, _ in members]
        w = [1.0 / (cnt * v) for _, _, cnt, v in members]
        W = np.sum(w, axis=0)
        T = np.sum([wi * si for wi, si in zip(w, S, strict=True)], axis=0) / W
        T += (n - T.sum()) / np.sum(1.0 / W) / W
        for (i, s, cnt, _), Sg in zip(members, S, strict=True):
            c[i] += ((T - Sg) / cnt)[s]
    return c


@pytest.mark.parametrize("method", ["algorithm-1", "norm-sub"])
def test_postprocessing_and_consistency_on_noisy_grids(method):
    schema = mixed_schema()
    layout = FelipLayout(schema, *LAYOUT_SIZES)
    x = correlated(2000, schema, 2)
    n = x.shape[0]
    rng = np.random.default_rng(3)
    raw = exact_counts(layout, x) + rng.normal(0, 150, layout.total_cells)
    var = rng.uniform(1, 4, layout.m)
    f = nonnegative(layout, raw, n, method)
    ref = pp.algorithm_1 if method == "algorithm-1" else pp.norm_sub
    for got, r in zip(layout.split(f), layout.split(raw), strict=True):
        assert np.allclose(got, ref(r, n), atol=1e-9 * n)
    g = consistency_step(layout, f, n, var)
    assert np.allclose(g, _sequential_consistency(layout, f, n, var), atol=1e-9 * n)
    for sums in _slab_sums(layout, g).values():  # straight after a pass: slabs agree
        assert np.ptp(sums, axis=0).max() <= 1e-6 * n
    opts = EstimationOptions(postprocess=method)
    out, rounds = postprocess_grids(layout, raw, n, var, opts)
    # early stopping: round r moved no count by more than tol·n, round r − 1 did
    (r,) = rounds
    assert 2 <= r < opts.iterations
    prev, _ = postprocess_grids(layout, raw, n, var, EstimationOptions(method, iterations=r - 1))
    before, _ = postprocess_grids(layout, raw, n, var, EstimationOptions(method, iterations=r - 2))
    assert np.max(np.abs(out - prev)) <= opts.tol * n < np.max(np.abs(prev - before))
    for grid in layout.split(out):
        assert grid.min() >= 0 and abs(grid.sum() - n) <= 1


def _small_plan(oracle, eps, n, **kw):
    schema = FelipSchema((Attribute("a", 12), Attribute("b", 7), Attribute("c", 30)))
    return plan_felip(schema, n, oracle, eps, selectivity=0.5, **kw), schema


@pytest.mark.parametrize(
    ("oracle", "kw"), [("adaptive", {}), ("L-OSUE", {"alpha": 0.5}), ("OLOLOHA", {"alpha": 0.5})]
)
def test_cell_estimates_unbiased_before_postprocessing(oracle, kw):
    plan, schema = _small_plan(oracle, 2.0, 3000, **kw)
    x = correlated(plan.n, schema, 4)
    groups = plan.assign(5)
    sizes = np.bincount(groups, minlength=plan.m)
    cells = plan.layout.cells(x)
    reps, rng = 500, np.random.default_rng(6)
    supports, truth, se = [], [], []
    for g, proto in enumerate(plan.protocols):
        hist = np.bincount(cells[groups == g, g], minlength=proto.k)
        supports.append(proto.sample_support(np.tile(hist, (reps, 1)), int(sizes[g]), rng))
        f = hist / sizes[g]
        truth.append(plan.n * f)
        se.append(plan.n * np.sqrt(proto.variance(int(sizes[g]), f) / reps))
    raw = plan.raw_counts(supports, sizes)
    assert raw.shape == (reps, plan.layout.total_cells)
    assert np.all(np.abs(raw.mean(axis=0) - np.concatenate(truth)) <= Z * np.concatenate(se))


def test_per_user_cell_estimates_unbiased():
    plan, schema = _small_plan("L-OSUE", 2.0, 1200, alpha=0.5)
    x = correlated(plan.n, schema, 7)
    groups = plan.assign(8)
    sizes = np.bincount(groups, minlength=plan.m)
    cells = plan.layout.cells(x)
    rng, reps = np.random.default_rng(9), 200
    raws = []
    for _ in range(reps):
        sup = [
            p.perturb_support(
                cells[groups == g, g].astype(np.int64), p.new_memo(int(sizes[g])), rng
            )
            for g, p in enumerate(plan.protocols)
        ]
        raws.append(plan.raw_counts(sup, sizes))
    truth, se = [], []
    for g, proto in enumerate(plan.protocols):
        f = np.bincount(cells[groups == g, g], minlength=proto.k) / sizes[g]
        truth.append(plan.n * f)
        se.append(plan.n * np.sqrt(proto.variance(int(sizes[g]), f) / reps))
    assert np.all(np.abs(np.mean(raws, 0) - np.concatenate(truth)) <= Z * np.concatenate(se))


@pytest.mark.parametrize(
    ("oracle", "engine"), [("L-OSUE", "per-user"), ("OLOLOHA", "per-user"), ("L-OSUE", "reports")]
)
def test_memos_bounded_and_groups_fixed_over_time(oracle, engine):
    plan, schema = _small_plan(oracle, 4.0, 900, alpha=0.5)
    x = correlated(plan.n, schema, 10)
    tau = 8
    data = to_longitudinal(schema_table(schema, x), tau, np.random.default_rng(11))
    wl = [make_query(schema, {"a": (2, 8), "c": (5, 20)})]
    res = simulate_felip(plan, data, wl, 12, engine=engine)
    spent = res.spent
    assert spent is not None and np.all(spent["reports"] == tau)
    # the distinct cells each user held in its own grid over the τ timestamps, from the data
    users = np.arange(plan.n)
    held = np.stack(
        [plan.layout.cells(data.at(t).to_matrix())[users, res.groups] for t in range(tau)]
    )
    distinct = np.array([np.unique(col).size for col in held.T])
    assert distinct.max() > 1  # values move: a bound at 1 memo would not be tested
    if oracle == "OLOLOHA":  # one memo per hashed cell: at most g, at most the cells held
        g_of_user = np.array([p.g for p in plan.protocols])[res.groups]
        assert np.all((spent["memos"] >= 1) & (spent["memos"] <= np.minimum(distinct, g_of_user)))
    else:  # one memo per distinct cell
        np.testing.assert_array_equal(spent["memos"], distinct)
    e1 = np.array([p.single_report_epsilon() for p in plan.protocols])[res.groups]
    einf = np.array([p.first_round_epsilon() for p in plan.protocols])[res.groups]
    np.testing.assert_allclose(spent["epsilon"], np.minimum(tau * e1, spent["memos"] * einf))
    assert np.all(e1 <= 2.0 * (1 + 1e-9)) and res.answers.shape == (tau, 1)


def test_losue_sizes_like_oue_at_eps1():
    """τ = 1: L-OSUE(ε∞, ε1) has OUE(ε1)'s V*, hence the same sizes (math §8.13)."""
    chain, one = oracle_spec("L-OSUE", 2.0, eps_1=0.8), oracle_spec("OUE", 0.8)
    for k in (2, 9, 50):
        assert chain.unit_variance("L-OSUE", k) == pytest.approx(one.unit_variance("OUE", k))
    a = choose_sizes(mixed_schema(), 50_000, chain, [0.5, 0.4, 0.7, 1])
    b = choose_sizes(mixed_schema(), 50_000, one, [0.5, 0.4, 0.7, 1])
    assert (a.g1, a.g2) == (b.g1, b.g2)


# ---------------------------------------------------------------------------------- the rest


def schema_table(schema, x):
    from longldp.data import Domain, Table

    return Table(
        {a.name: x[:, j] for j, a in enumerate(schema.attributes)},
        {a.name: Domain(a.domain) for a in schema.attributes},
    )


def test_weighted_update_matches_tensor_reference():
    rng = np.random.default_rng(13)
    for lam in (3, 4):
        A = rng.uniform(50, 400, (7, lam * (lam - 1) // 2))
        T = np.full((7,) + (2,) * lam, 1000 / 2**lam)
        for _ in range(200):
            old = T.copy()
            for p, (i, j) in enumerate(itertools.combinations(range(lam), 2)):
                idx = [slice(None)] * (lam + 1)
                idx[i + 1] = idx[j + 1] = 0
                sub = T[tuple(idx)]
                sub *= (A[:, p] / sub.reshape(7, -1).sum(1)).reshape((7,) + (1,) * (lam - 2))
                T *= (1000 / T.reshape(7, -1).sum(1)).reshape((7,) + (1,) * lam)
            if np.abs(T - old).reshape(7, -1).sum(1).max() < 1e-3:
                break
        got = weighted_update(A, lam, 1000.0, tol=1e-3)
        assert np.allclose(got, T[(slice(None),) + (0,) * lam], rtol=1e-6)


def test_engines_and_study_cell_end_to_end():
    schema = FelipSchema(tuple(Attribute(f"x{i}", 10 + 3 * i) for i in range(4)))
    x = correlated(2500, schema, 14)
    table = schema_table(schema, x)
    wl = generate_workload(table, lam=3, n_queries=12, seed=1)
    r1 = run_felip(table, wl, "OLOLOHA", 2.0, alpha=0.1, tau=3, rng=15)
    r2 = run_felip(table, wl, "OLOLOHA", 2.0, alpha=0.1, tau=3, rng=15)
    assert np.array_equal(r1.answers, r2.answers) and r1.mse_per_timestamp.shape == (3,)
    assert np.allclose(r1.truth, wl.fractions) and r1.spent["epsilon"] is None
    assert np.all(r1.spent["reports"] == 3)  # counted by every engine; no memo at count level
    assert [row["t"] for row in r1.rows()] == [0, 1, 2]
    r3 = run_felip(table, wl, "adaptive", 1.0, tau=2, rng=16, engine="per-user")
    assert np.isfinite(r3.mse_avg) and r3.spent["epsilon"] is not None
    json.dumps(r3.plan.describe())
    plan = r1.plan  # a (τ, n, d) array gives the same answers as the table at τ = 1
    a = simulate_felip(plan, x, wl, 17).answers
    b = simulate_felip(plan, table, wl, 17).answers
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="users"):
        simulate_felip(plan, x[:100], wl, 1)


def test_a_batch_of_timestamps_is_fitted_as_each_alone():
    schema = mixed_schema()
    layout = FelipLayout(schema, *LAYOUT_SIZES)
    x = correlated(2000, schema, 18)
    n = x.shape[0]
    rng = np.random.default_rng(19)
    raw = exact_counts(layout, x) + rng.normal(0, 80, (5, layout.total_cells))
    raw[2] = exact_counts(layout, x)  # converges at once: frozen while the others go on
    var = rng.uniform(1, 2, layout.m)
    queries = [
        make_query(schema, {"a": (2, 9), "b": (3, 15), "c": (1, 6)}),
        make_query(schema, {"a": (0, 5), "b": (4, 19), "c": (2, 8), "k": 1}),
        make_query(schema, {"b": (5, 11), "k": 2}),
        make_query(schema, {"c": (3, 7)}),
    ]
    for method in ("algorithm-1", "norm-sub"):
        opts = EstimationOptions(postprocess=method)
        both = fit_model(layout, raw, n, var, opts)
        answers = both.answer(queries)
        assert answers.shape == (5, 4) and both.counts.shape == (5, layout.total_cells)
        for t in range(5):
            one = fit_model(layout, raw[t], n, var, opts)
            assert one.rounds[0] == both.rounds[t]
            assert np.allclose(one.counts, both.counts[t], rtol=0, atol=1e-9 * n)
            assert np.allclose(one.answer(queries), answers[t], rtol=0, atol=1e-9 * n)
            assert np.allclose(both.at(t).response_matrix("b", "a"), one.response_matrix(1, 0))


def test_deployment_path_clients_and_aggregators():
    """Each user's client maps its values to a cell of its grid and reports it; each grid's
    aggregator collects; the plan turns the aggregates into a model (math §8.6)."""
    plan, schema = _small_plan("L-OSUE", 2.0, 3000, alpha=0.5)
    x = correlated(plan.n, schema, 20)
    groups = plan.assign(21)
    rng = np.random.default_rng(22)
    aggregators = [p.aggregator() for p in plan.protocols]
    for u in range(plan.n):
        g = plan.grids[groups[u]]
        cell = int(g.cell_of([[x[u, a]] for a in g.attributes])[0])
        client = plan.protocols[g.index].client(rng)
        aggregators[g.index].add([client.report(cell)])
    # each grid saw its own group; each cell's support is a sum of independent Bernoullis:
    # P1 for the users holding it, P0 for the others (one report per user). At 500 users a
    # grid the check bites: with every user's cell taken as cell 0 each grid is 5.3-7.3 sd off.
    cells = plan.layout.cells(x)
    for g, (proto, agg) in enumerate(zip(plan.protocols, aggregators, strict=True)):
        mine = groups == g
        assert agg.n == mine.sum()
        held = np.bincount(cells[mine, g], minlength=plan.grids[g].k)
        mean = held * proto.P1 + (agg.n - held) * proto.P0
        sd = np.sqrt(held * proto.P1 * (1 - proto.P1) + (agg.n - held) * proto.P0 * (1 - proto.P0))
        assert np.all(np.abs(agg.support_counts - mean) <= 5 * sd), g
    model = plan.estimate([a.support_counts for a in aggregators], [a.n for a in aggregators])
    ans = model.answer([make_query(schema, {"a": (1, 8), "c": (4, 25)})])
    assert ans.shape == (1,)
    assert all(abs(model.grid_counts(i).sum() - plan.n) <= 1 for i in range(plan.m))


@pytest.mark.parametrize(
    ("oracle", "kw", "message"),
    [
        ("OUE", {"alpha": 0.5}, r"unknown parameter\(s\) alpha; .* one-shot oracle"),
        ("L-OSUE", {}, r"missing parameter\(s\) eps_1"),
        ("L-OSUE", {"eps_1": 0.5, "alpha": 0.5}, "give 'eps_1' or 'alpha', not both"),
        ("L-OSUE", {"alpha": 1.5}, "'alpha' must be"),
        ("L-OSUE", {"eps_1": 3.0}, r"'eps_1' must be a finite number in \(0, 2\)"),
        (("GRR", "L-OSUE"), {"alpha": 0.5}, "all one-shot or all chains"),
    ],
)
def test_oracle_budget_is_parsed_by_the_one_budget_type(oracle, kw, message):
    """FELIP's budget goes through longldp.privacy.Budget: the same refusals as every entry."""
    with pytest.raises(ValueError, match=message):
        oracle_spec(oracle, 2.0, **kw)
    assert oracle_spec("L-OSUE", 2.0, alpha=0.25).eps_1 == pytest.approx(0.5)
