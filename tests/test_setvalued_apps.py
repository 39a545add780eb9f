"""SVIM, SVSM and LDPMiner end to end: groups, memos and budgets, engines, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from longldp.apps.setvalued.ldpminer import LDPMiner
from longldp.apps.setvalued.metrics import evaluate, setvalued_truth
from longldp.apps.setvalued.mining import mine
from longldp.apps.setvalued.oracle import OracleSpec, make_spec
from longldp.apps.setvalued.svim import SVIM, SVIMParams
from longldp.apps.setvalued.svsm import SVSM
from longldp.data import SetData, to_longitudinal

Z = 5.0
TAU = 4


def _sets(n: int, d: int, seed: int, empty: float = 0.1) -> SetData:
    rng = np.random.default_rng(seed)
    w = 1 / np.arange(1, d + 1) ** 0.7
    sizes = np.where(rng.random(n) < empty, 0, rng.integers(1, 6, n))
    lists = [sorted(rng.choice(d, size=min(s, d), replace=False, p=w / w.sum())) for s in sizes]
    return SetData.from_lists(lists, d)


@pytest.fixture(scope="module")
def small():
    return _sets(900, 10, 1)


def test_groups_are_fixed_disjoint_and_everyone_reports_every_timestamp(small):
    data = [small] * TAU  # the same sets at every t: memo reuse is maximal
    spec = make_spec("L-OSUE", eps_perm=2.0, alpha=0.5)
    res = SVIM(3, spec).run(data, rng=5, engine="per-user")
    groups = res.groups
    users = np.concatenate(list(groups.values()))
    assert np.array_equal(np.sort(users), np.arange(small.n))
    sizes = {k: v.size for k, v in groups.items()}
    assert sizes == {"G1": 360, "G2": 90, "G3": 450}
    assert res.params["svim"]["shares"] == [0.4, 0.1, 0.5]
    assert np.all(res.budget["reports"] == TAU)
    # the same run again with the same seed: identical groups and outputs
    again = SVIM(3, spec).run(data, rng=5, engine="per-user")
    assert all(np.array_equal(groups[k], again.groups[k]) for k in groups)
    assert [t.keys for t in res.topk] == [t.keys for t in again.topk]


def test_longitudinal_memos_are_per_user_instance_and_value(small):
    data = [small] * TAU
    spec = make_spec("L-OSUE", eps_perm=2.0, alpha=0.5)
    res = SVIM(3, spec).run(data, rng=6, engine="per-user")
    memos, eps = res.budget["memos"], res.budget["epsilon"]
    chain = spec.chain(11)
    n_c = res.params["n_candidates"]
    g1, g2, g3 = (res.groups[g] for g in ("G1", "G2", "G3"))
    lengths = small.lengths
    # G1: PS_1 of a fixed set, memo per item or ⊥: at most min(τ, |v|) (1 for an empty set)
    assert np.all(memos[g1] <= np.minimum(TAU, np.maximum(lengths[g1], 1)))
    assert np.all(memos[g1][lengths[g1] == 0] == 1)  # the shared ⊥ is memoized
    # G2: lengths in {0..|C|}
    assert np.all(memos[g2] <= min(TAU, n_c + 1))
    # G3: values of v ∩ C plus the shared ⊥; an empty set keeps one memo (⊥) for all τ reports
    assert np.all(memos[g3] <= np.minimum(TAU, lengths[g3] + 1))
    assert np.all(memos[g3][lengths[g3] == 0] == 1)
    bound = np.minimum(TAU * chain.single_report_epsilon(), memos * chain.first_round_epsilon())
    assert np.allclose(eps, bound)
    assert eps.max() <= TAU * chain.single_report_epsilon() + 1e-9


def test_loloha_memos_are_bounded_by_g(small):
    spec = make_spec("BiLOLOHA", eps_perm=2.0, alpha=0.5)
    data = to_longitudinal(small, 6, np.random.default_rng(0))
    res = SVSM(4, spec).run(data, rng=1, engine="per-user")
    assert res.budget["memos"].max() <= 2
    assert np.all(res.budget["reports"] == 6)


def test_freeze_policy_reports_candidates_and_lengths_once(small):
    spec = make_spec("L-SUE", eps_perm=2.0, alpha=0.5)
    data = to_longitudinal(small, TAU, np.random.default_rng(3))
    res = SVSM(4, spec, policy="freeze").run(data, rng=2, engine="per-user")
    reports = res.budget["reports"]
    for g, want in (("G1", 1), ("G2", 1), ("G3", TAU), ("G4", 1), ("G5", TAU)):
        assert np.all(reports[res.groups[g]] == want), g
    first = res.diagnostics[0]
    assert all(d["candidates"] == first["candidates"] for d in res.diagnostics)
    assert all(d["ell"] == first["ell"] for d in res.diagnostics)
    items = res.items.diagnostics
    assert all(d["candidates"] == items[0]["candidates"] for d in items)


def test_ldpminer_every_user_in_both_phases_at_half_budget(small):
    spec = make_spec("L-GRR", eps_perm=2.0, alpha=0.5)
    res = LDPMiner(3, spec).run([small] * 3, rng=4, engine="per-user")
    assert np.all(res.budget["reports"] == 6)
    half = spec.scaled(0.5)
    assert res.params["per_phase_oracle"]["eps_perm"] == 1.0
    assert res.params["per_phase_oracle"]["eps_1"] == 0.5
    one = half.chain(11).single_report_epsilon()
    assert res.budget["epsilon"].max() <= 2 * 3 * one + 1e-9
    oneshot = LDPMiner(3, make_spec(eps=2.0)).run(small, rng=4)
    assert np.allclose(oneshot.budget["epsilon"], 2.0)  # two reports at ε/2 each
    assert oneshot.params["fo_phase1"] == "BLH" and oneshot.params["fo_phase2"] == "SUE"


def test_oneshot_budget_is_eps_even_with_amplified_grr(small):
    res = SVIM(2, make_spec(eps=1.0)).run(small, rng=0)
    assert res.diagnostics[0]["phase3"]["fo"] == "GRR"
    assert res.diagnostics[0]["phase3"]["amplified"]
    assert np.allclose(res.budget["epsilon"], 1.0)


def _collect(engine: str, reps: int, data, spec) -> tuple[np.ndarray, np.ndarray]:
    est = np.empty((reps, TAU, 10))
    ell = np.empty((reps, TAU))
    for rep in range(reps):
        res = SVIM(5, spec).run(data, rng=np.random.default_rng([rep, len(engine)]), engine=engine)
        for t, diag in enumerate(res.diagnostics):
            est[rep, t, diag["candidates"]] = diag["estimates"]
            ell[rep, t] = diag["ell"]
    return est, ell


@pytest.mark.slow
@pytest.mark.parametrize("chain", ["L-OSUE", "BiLOLOHA"])
def test_engines_agree_in_distribution(chain):
    """Per-user (memos across t) and count-level engines: same law of every estimate per t.

    k = 5 over 10 items, so the candidates are all items and each item has an estimate at
    every t; means and variances are compared with Z = 5 standard errors (of the difference
    of two sample means; of two sample variances, from the fourth moments).
    """
    data = to_longitudinal(_sets(1500, 10, 9), TAU, np.random.default_rng(4))
    spec = make_spec(chain, eps_perm=3.0, alpha=0.6)
    reps = 300
    a, la = _collect("per-user", reps, data, spec)
    b, lb = _collect("count-level", reps, data, spec)
    se = np.sqrt(a.var(axis=0, ddof=1) / reps + b.var(axis=0, ddof=1) / reps)
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= Z * se)
    va, vb = a.var(axis=0, ddof=1), b.var(axis=0, ddof=1)
    m4a = np.mean((a - a.mean(axis=0)) ** 4, axis=0)
    m4b = np.mean((b - b.mean(axis=0)) ** 4, axis=0)
    se_var = np.sqrt((m4a - va**2) / reps + (m4b - vb**2) / reps)
    assert np.all(np.abs(va - vb) <= Z * se_var)
    se_ell = math.sqrt(la.var(ddof=1) / la.size + lb.var(ddof=1) / lb.size)
    assert abs(la.mean() - lb.mean()) <= Z * se_ell


@pytest.mark.parametrize("app", ["SVIM", "SVSM", "LDPMiner"])
@pytest.mark.parametrize(
    "spec",
    [
        {"protocol": "adaptive", "eps": 2.0},
        {"protocol": "OLH", "eps": 2.0},
        {"protocol": "OLOLOHA", "eps_perm": 2.0, "alpha": 0.5},
        {"protocol": "L-OUE", "eps_perm": 2.0, "alpha": 0.5},
        {"protocol": "dBitFlipPM", "eps_perm": 2.0},
    ],
    ids=["adaptive", "OLH", "OLOLOHA", "L-OUE", "dBitFlipPM"],
)
def test_every_app_runs_on_every_engine(app, spec):
    data = to_longitudinal(_sets(300, 8, 2), 2, np.random.default_rng(0))
    truth = setvalued_truth(data)
    for engine in ("count-level", "per-user", "reports"):
        run = mine(data, app, k=3, rng=1, engine=engine, truth=truth, **spec)
        rows = run.rows()
        assert len(rows) == 2 * (2 if app == "SVSM" else 1)
        results = {run.result.target: run.result}
        if run.result.items is not None:
            results["items"] = run.result.items
        for row in rows:
            want = _brute_force_metrics(data, results[row["target"]], row["target"], row["t"], 3)
            assert {m: row[m] for m in want} == pytest.approx(want, rel=1e-12, abs=1e-15), row
        assert run.result.params["engine"] == engine


def _brute_force_metrics(data, result, target: str, t: int, k: int) -> dict[str, float]:
    """Precision, recall, NCR and the literal top-k MSE of one timestamp, from the raw sets:
    supports by counting every subset of every transaction, ties by (−support, size, key)
    (math §9.6), independently of longldp.apps.setvalued.metrics."""
    sets = data.at(t).to_lists()
    support: dict[tuple[int, ...], int] = {}
    for row in sets:
        sizes = (1,) if target == "items" else range(1, len(row) + 1)
        for size in sizes:
            for key in itertools.combinations(row, size):
                support[key] = support.get(key, 0) + 1
    true = [key for _, _, key in sorted((-c, len(key), key) for key, c in support.items())][:k]
    top = result.topk[t]
    reported, est = list(top.keys), top.as_dict()
    hits = set(reported) & set(true)
    freq = {key: support.get(key, 0) / len(sets) for key in set(true) | set(reported)}
    err = sum(freq[x] ** 2 for x in set(true) ^ set(reported))
    err += sum((freq[x] - est[x]) ** 2 for x in hits)
    return {
        "precision": len(hits) / len(reported),
        "recall": len(hits) / k,
        "ncr": sum(k - true.index(x) for x in hits) / (k * (k + 1) / 2),
        "mse": err / len(set(true) | set(reported)),
    }


def test_mine_records_every_setting_and_metric_readings(small):
    data = to_longitudinal(small, 3, np.random.default_rng(0))
    run = mine(
        data, "SVSM", k=4, protocol="L-OSUE", eps_perm=1.0, alpha=0.1, rng=0,
        postprocess="norm-sub", mse_reading="estimated",
    )  # fmt: skip
    params = run.result.params
    assert params["svsm"]["svim_share"] == 0.5 and params["svsm"]["length_share"] == 0.2
    assert params["svsm"]["svim"]["percentile"] == 0.9
    assert params["oracle"]["eps_1"] == pytest.approx(0.1)
    assert params["postprocess"] == "norm-sub" and params["policy"] == "reestimate"
    summary = run.summary()
    assert set(summary) == {"items", "itemsets"}
    assert summary["itemsets"]["reading"] == "estimated"
    table = evaluate(run.result, setvalued_truth(data))
    assert table.reading == "literal" and table.tau == 3


def test_slots_domain_runs_and_keeps_memos_small(small):
    spec = make_spec("L-OSUE", eps_perm=2.0, alpha=0.5)
    res = SVIM(3, spec, SVIMParams(domain="slots")).run([small] * 3, rng=1, engine="per-user")
    assert res.diagnostics[0]["phase3"]["fo_domain"] == 7  # 2k slots + ⊥
    assert np.all(res.budget["reports"] == 3)


# ---------------------------------------------------------------------------- bad input


def test_bad_input_raises_clear_errors(small):
    spec = make_spec(eps=1.0)
    empty = SetData.from_lists([], 5)
    with pytest.raises(ValueError, match="empty"):
        SVIM(2, spec).run(empty)
    with pytest.raises(ValueError, match="'k'"):
        SVIM(0, spec)
    with pytest.raises(ValueError, match="'k'"):
        LDPMiner(-1, spec)
    with pytest.raises(ValueError, match="'k' must be at most the item domain size 10"):
        SVIM(11, spec).run(small)
    with pytest.raises(ValueError, match="'k' must be at most the item domain size 10"):
        LDPMiner(11, spec).run(small)
    with pytest.raises(ValueError, match="itemsets"):
        SVSM(1024, spec).run(small)
    with pytest.raises(ValueError, match=">= 2"):
        SVSM(1, spec)
    with pytest.raises(ValueError, match="outside the item domain"):
        SVIM(2, spec).run(small, n_items=5)
    with pytest.raises(ValueError, match="outside the domain"):
        SetData.from_lists([[0, 7]], 5)
    with pytest.raises(ValueError, match="same number of users"):
        SVIM(2, spec).run([small, _sets(10, 10, 0)])
    with pytest.raises(ValueError, match="too few"):
        SVIM(1, spec).run(_sets(2, 10, 0))
    with pytest.raises(ValueError, match="engine"):
        SVIM(2, spec).run(small, engine="fast")
    with pytest.raises(ValueError, match="policy"):
        SVIM(2, spec, policy="sometimes")
    with pytest.raises(ValueError, match="sum to 1"):
        SVIMParams(shares=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="eps_perm"):
        OracleSpec("L-OSUE", eps=1.0)
    with pytest.raises(ValueError, match="one-shot"):
        make_spec("OUE", eps_perm=1.0, eps_1=0.5)
    with pytest.raises(ValueError, match="must be one of"):
        make_spec("NOPE", eps=1.0)
    with pytest.raises(ValueError, match="eps_1"):
        make_spec("L-OSUE", eps_perm=1.0, eps_1=2.0)
    # alpha goes through the one budget parser, privacy.Budget
    assert make_spec("L-OSUE", eps_perm=2.0, alpha=0.25).eps_1 == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) alpha"):
        make_spec("dBitFlipPM", eps_perm=1.0, alpha=0.5)
    with pytest.raises(ValueError, match="not both"):
        make_spec("L-OSUE", eps_perm=1.0, eps_1=0.5, alpha=0.5)
    with pytest.raises(ValueError, match="app"):
        mine(small, "FP-growth", k=2, eps=1.0)
    with pytest.raises(ValueError, match="SetData"):
        SVIM(2, spec).run([[0, 1], [2]])


def test_registry_protocols_are_accepted_by_name():
    # "RAPPOR" given budgets is refused, naming L-SUE (RAPPOR tuned by ε∞ and ε1).
    with pytest.raises(ValueError, match=r'RAPPOR: unknown parameter.*use protocol "L-SUE"'):
        make_spec("rappor", eps_perm=2.0, alpha=0.5)
