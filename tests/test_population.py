"""The population object that runs the three engines (docs/design.md §4): groups, support over
one timestamp and over time, spent budgets, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.simulate import ENGINES, Population, engines_for
from registry_cases import build, cases

CHAIN = {"k": 5, "eps_perm": 2.0, "eps_1": 0.8}


def _values(rng: np.random.Generator, tau: int, n: int, k: int = 5) -> np.ndarray:
    return rng.integers(0, k, size=(tau, n))


@pytest.mark.parametrize("engine", ENGINES)
def test_run_is_support_timestamp_after_timestamp_except_count_level(engine):
    """Per-user engines: run() draws exactly what support() draws timestamp by timestamp, group
    by group. Count-level: each group's τ timestamps in one sample_support call, in group order."""
    protos = [ll.protocol("L-OSUE", **CHAIN), ll.protocol("L-GRR", **CHAIN)]
    users = [np.arange(0, 30), np.arange(30, 70)]
    values = _values(np.random.default_rng(0), 4, 70)
    per_group = [[row[u] for u in users] for row in values]

    def population() -> Population:
        pop = Population(70, engine)
        for p, u in zip(protos, users, strict=True):
            pop.group(p, u)
        return pop

    got = population().run(iter(per_group), np.random.default_rng(1))
    rng = np.random.default_rng(1)
    if engine == "count-level":
        want = [
            p.sample_support(
                np.stack([np.bincount(v[j], minlength=5) for v in per_group]), u.size, rng
            )
            for j, (p, u) in enumerate(zip(protos, users, strict=True))
        ]
    else:
        pop = population()
        steps = [pop.support(v, rng) for v in per_group]
        want = [np.stack([s[j] for s in steps]) for j in range(2)]
    for g, w in zip(got, want, strict=True):
        assert g.shape[0] == 4 and np.array_equal(g, w)


@pytest.mark.parametrize(("cls", "params"), cases())
def test_every_registered_protocol_runs_through_its_engines(cls, params):
    """Every registered protocol (tests/registry_cases.py) runs through the population under
    each engine that applies to it, on its own inputs (codes, or RAPPOR's strings); the others
    are refused. Support and estimate have the protocol's shapes; every user sent τ reports;
    under the memo-keeping engines a chain holds one memo for a user whose value never changes
    and at most one per distinct value (counted here from the data), and her ε is the
    protocol's bound for (τ, memos); at count level a chain's budget is unknown and a one-shot
    protocol's is τ·ε; a history-dependent mechanism's users spent what the ledger charges
    their trajectories (docs/math.md §19.6), reports by report."""
    proto = build(cls, params, 5)
    if not engines_for(cls):  # planned rounds: each epoch needs the server's plan (design §2.5)
        for engine in ENGINES:
            with pytest.raises(ValueError, match="planned by the server"):
                Population.of(proto, 40, engine)
        return
    tau, n = 4, 40
    rng = np.random.default_rng(7)
    codes = rng.integers(0, proto.domain_size or 3, size=(tau, n))
    codes[:, : n // 2] = codes[0, : n // 2]  # half the users never change value
    distinct = np.array([np.unique(codes[:, i]).size for i in range(n)])
    for engine in ENGINES:
        if engine not in engines_for(cls):
            with pytest.raises(ValueError, match=f"{engine!r} engine draws support counts"):
                Population.of(proto, n, engine)
            continue
        pop = Population.of(proto, n, engine)
        (support,) = pop.run(([proto.as_inputs(row)] for row in codes), rng)
        assert support.shape == (tau, *proto.support_shape)
        assert proto.estimate(support[-1], n).shape == proto.estimate_shape
        spent = pop.budget()
        assert np.all(spent["reports"] == tau)
        if engine == "count-level" and proto.longitudinal:
            assert spent["memos"] is None and spent["epsilon"] is None
            continue
        memos = spent["memos"]
        if cls.history is not None:  # history-dependent: what the ledger charges, by route
            state = pop.groups[0].memo.state  # the levels or items the population drew
            expected = ll.privacy.ledger(proto, codes.T, state=state).spent
            assert np.all(memos == 0) and np.allclose(spent["epsilon"], expected, rtol=1e-12)
            assert np.any(spent["epsilon"] > 0)
            continue
        if proto.longitudinal:  # a memo per distinct memo key: a value, or its hash or bucket
            assert np.all(memos[: n // 2] == 1)
            assert np.all((memos >= 1) & (memos <= distinct))
        else:
            assert np.all(memos == 0)
        bound = [proto.budget_spent(tau, m).epsilon for m in memos]
        assert np.allclose(spent["epsilon"], bound, rtol=1e-9)


def test_budget_sums_over_groups_and_keeps_them_apart_by_group():
    """A user in two groups spends the sum (sequential composition, math §4); by group, 0 where
    she is not a member."""
    proto = ll.protocol("L-SUE", **CHAIN)
    pop = Population(6, "per-user")
    both, some = pop.group(proto), pop.group(proto, [1, 3, 5])
    rng = np.random.default_rng(2)
    for t in range(3):
        pop.support([np.full(6, t % 2), np.array([0, 1, 2])], rng)
    one = proto.spent_budget(both.memo)["epsilon"]
    two = proto.spent_budget(some.memo)["epsilon"]
    total = pop.budget()
    assert total["reports"].tolist() == [3, 6, 3, 6, 3, 6]
    assert np.allclose(total["epsilon"][[0, 2, 4]], one[[0, 2, 4]])
    assert np.allclose(total["epsilon"][[1, 3, 5]], one[[1, 3, 5]] + two)
    # two values in the first group, one more in the second
    assert np.all(total["memos"] == np.array([2, 3, 2, 3, 2, 3]))
    by_group = pop.budget_by_group()
    assert by_group["epsilon"].shape == (6, 2)
    assert np.all(by_group["epsilon"][[0, 2, 4], 1] == 0) and np.all(by_group["reports"][:, 0] == 3)


def test_count_level_counts_reports_but_has_no_memo():
    """No memo is drawn at count level: a chain's memos and ε bound are unknown (None); a
    one-shot protocol's are 0 and t·ε of its exact channel."""
    rng = np.random.default_rng(3)
    chain = Population.of(ll.protocol("L-OUE", **CHAIN), 8, "count-level")
    oneshot = Population.of(ll.protocol("OUE", k=5, eps=1.5), 8, "count-level")
    for pop in (chain, oneshot):
        pop.run(([row] for row in _values(rng, 3, 8)), rng)
    assert chain.budget()["memos"] is None and chain.budget()["epsilon"] is None
    assert np.all(chain.budget()["reports"] == 3)
    spent = oneshot.budget()
    eps = ll.protocol("OUE", k=5, eps=1.5).single_report_epsilon()
    assert np.all(spent["memos"] == 0) and np.allclose(spent["epsilon"], 3 * eps)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_group_without_protocol_takes_a_one_shot_oracle_per_call(engine):
    """The oracle may change between calls; each call spends the ε it declares (default the
    oracle's own)."""
    pop = Population(10, engine)
    group = pop.group(None, np.arange(10))
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 4, size=10)
    first = group.support(codes, rng, ll.protocol("GRR", k=4, eps=1.0))
    second = group.support(codes, rng, ll.protocol("OLH", k=6, eps=2.0), eps=0.5)
    assert first.shape == (4,) and second.shape == (6,)
    spent = pop.budget()
    assert np.allclose(spent["epsilon"], 1.5) and np.all(spent["reports"] == 2)
    with pytest.raises(ValueError, match="one-shot oracle"):
        group.support(codes, rng, ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0))
    with pytest.raises(ValueError, match="one-shot oracle"):
        group.support(codes, rng)


def test_a_fixed_protocol_keeps_its_per_user_state_across_timestamps():
    """A one-shot OLH group with a fixed protocol keeps each user's hash (the real client does);
    given a new oracle at every call, the users draw fresh hashes."""
    olh = ll.protocol("OLH", k=8, eps=1.0)
    fixed = Population.of(olh, 50, "per-user").groups[0]
    rng = np.random.default_rng(5)
    values = np.zeros(50, dtype=np.int64)
    fixed.support(values, rng)
    state = {k: v.copy() for k, v in fixed.memo.state.items()}
    fixed.support(values, rng)
    assert state and all(np.array_equal(state[k], fixed.memo.state[k]) for k in state)


def test_bad_input_names_the_owner():
    proto = ll.protocol("L-GRR", **CHAIN)
    with pytest.raises(ValueError, match=r"myapp: 'engine' must be one of"):
        Population(5, "magic", owner="myapp")
    with pytest.raises(ValueError, match=r"myapp: 'n' must be"):
        Population(0, owner="myapp")
    pop = Population(5, owner="myapp")
    with pytest.raises(ValueError, match="distinct indices"):
        pop.group(proto, [0, 0, 1])
    with pytest.raises(ValueError, match=r"myapp: 'users' must be integers in \[0, 5\)"):
        pop.group(proto, [0, 7])
    group = pop.group(proto, [0, 1])
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="group 'group 0' has 2 users"):
        group.support(np.zeros(3, dtype=np.int64), rng)
    with pytest.raises(ValueError, match="pass no other oracle and no 'eps'"):
        group.support(np.zeros(2, dtype=np.int64), rng, eps=1.0)
    with pytest.raises(ValueError, match="one value array per group"):
        pop.support([np.zeros(2, dtype=np.int64)] * 2, rng)
    with pytest.raises(ValueError, match="sample_counts needs the count-level engine"):
        group.sample_counts(np.zeros((2, 5), dtype=np.int64), rng)


def test_epochs_run_the_engine_lazily_and_carry_reports_when_they_exist():
    """ReportingGroup.epochs (what the attacks run genuine users through): one epoch per row,
    records only under the reports engine, counts only at count level, and the count-level
    draw is the group's one sample_support call over all epochs (same seed, same numbers)."""
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    values = np.random.default_rng(0).integers(0, 4, size=(3, 50))
    counts = np.stack([np.bincount(v, minlength=4) for v in values])
    for engine in ENGINES:
        group = Population(50, engine).group(proto)
        epochs = list(group.epochs(np.random.default_rng(1), values=values))
        assert len(epochs) == 3 and all(e.support.shape == (4,) for e in epochs)
        assert all((e.records is not None) == (engine == "reports") for e in epochs)
        assert all(int(e.support.sum()) == 50 for e in epochs)
        assert group.reports.tolist() == [3] * 50
    direct = proto.sample_support(counts, 50, np.random.default_rng(1))
    group = Population(50, "count-level").group(proto)
    drawn = [e.support for e in group.epochs(np.random.default_rng(1), counts=counts)]
    assert np.array_equal(np.stack(drawn), direct)
    with pytest.raises(ValueError, match="'counts' suffice only"):
        next(
            Population(50, "per-user").group(proto).epochs(np.random.default_rng(1), counts=counts)
        )
    with pytest.raises(ValueError, match="exactly one"):
        next(group.epochs(np.random.default_rng(1)))
