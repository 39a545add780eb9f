"""The privacy ledger (docs/math.md §19.6): w-event never above ε in any window (property-based,
on the decision rules and on whole runs), change-based spending grows with the changes and not
with the epochs, every ledger figure recomputed by a second route, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longldp.privacy import ledger, spent_epsilon
from longldp.privacy.streams import (
    WEVENT_METHODS,
    absorption_units,
    lbd_publication_budget,
    lpd_publication_users,
    tree_levels,
)
from longldp.protocols.streams import changes_tree, ddrm, thresh, wevent

TOL = 1 + 1e-12  # float sums of per-epoch budgets


def _brute_window(spend: np.ndarray, w: int) -> float:
    return max(spend[max(0, t - w + 1) : t + 1].sum() for t in range(spend.size))


@settings(max_examples=60, deadline=None)
@given(
    w=st.integers(1, 12),
    coins=st.lists(st.booleans(), min_size=1, max_size=60),
)
def test_absorption_rule_never_exceeds_the_window(w, coins):
    """BA/PA: whatever the publish/skip decisions, any w epochs hold at most w units."""
    units = np.zeros(len(coins), dtype=np.int64)
    last, last_units = -1, 1
    for t, publish in enumerate(coins):
        u = absorption_units(t, last, last_units, w)
        if u > 0 and (publish or t == 0):
            units[t], last, last_units = u, t, u
    assert _brute_window(units.astype(float), w) <= w


@settings(max_examples=60, deadline=None)
@given(
    w=st.integers(1, 12),
    eps=st.floats(0.05, 10.0),
    n=st.integers(24, 10_000),
    coins=st.lists(st.booleans(), min_size=1, max_size=60),
)
def test_division_rules_never_exceed_the_window(w, eps, n, coins):
    """BD/PD: whatever the decisions, publications of any w epochs use < ε/2 and <= n/2 users."""
    e2, m2 = np.zeros(len(coins)), np.zeros(len(coins), dtype=np.int64)
    for t, publish in enumerate(coins):
        lo = max(0, t - w + 1)
        e = lbd_publication_budget(eps, w, float(e2[lo:t].sum()))
        m = lpd_publication_users(n, w, int(m2[lo:t].sum()))
        if publish or t == 0:
            e2[t], m2[t] = e, m
    assert _brute_window(e2, w) <= eps / 2 * TOL
    assert _brute_window(m2.astype(float), w) <= n // 2


def _stream(rng, n, k, tau, rate):
    vals = np.empty((tau, n), dtype=np.int64)
    vals[0] = rng.integers(0, k, n)
    for t in range(1, tau):
        moved = rng.random(n) < rate
        vals[t] = np.where(moved, rng.integers(0, k, n), vals[t - 1])
    return vals


@settings(max_examples=14, deadline=None)
@given(
    method=st.sampled_from(WEVENT_METHODS),
    w=st.integers(1, 6),
    eps=st.sampled_from([0.5, 1.0, 4.0]),
    rate=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_wevent_runs_never_spend_more_than_eps_in_any_window(method, w, eps, rate, seed):
    """Random streams through the per-user engine: every user, every window of w epochs."""
    rng = np.random.default_rng(seed)
    vals = _stream(rng, 240, 3, 18, rate)
    run = wevent.run_users(method, vals, 3, eps, w, rng)
    spend = run.user_spend()
    worst = ledger.window_spent(spend, w)
    assert worst.max() <= eps * TOL
    # A second route: the brute-force window of one user.
    assert worst[7] == pytest.approx(_brute_window(spend[7], w), rel=1e-12)
    if method in ("LBU", "LSP", "LPU"):  # these spend the whole ε in some window
        assert worst.max() == pytest.approx(eps, rel=1e-9)


def test_window_and_total_spent_against_loops():
    rng = np.random.default_rng(2)
    spend = rng.random((50, 13))
    for w in (1, 3, 13, 20):
        got = ledger.window_spent(spend, w)
        assert np.allclose(got, [_brute_window(r, w) for r in spend])
    assert np.allclose(ledger.total_spent(spend), spend.sum(axis=1))
    assert ledger.window_spent(spend[0], 4) == pytest.approx(_brute_window(spend[0], 4))


def test_memo_ledger_against_rows():
    rng = np.random.default_rng(3)
    traj = rng.integers(0, 6, size=(300, 9))
    traj[:20] = traj[:20, :1]  # constant users
    d = ledger.distinct_counts(traj)
    assert d.tolist() == [len(set(r)) for r in traj.tolist()]
    got = ledger.memo_spent(traj, 6, 0.4, 1.0)
    assert np.allclose(got, [spent_epsilon(9, len(set(r)), 0.4, 1.0) for r in traj.tolist()])
    assert np.allclose(ledger.memo_spent(traj, 6, 0.4, None), 9 * 0.4)
    changes = ledger.change_counts(traj)
    assert changes.tolist() == [
        sum(a != b for a, b in itertools.pairwise(r)) for r in traj.tolist()
    ]


def _with_changes(rng, n, tau, c, k=4):
    """Trajectories with exactly c changes each, at random epochs."""
    out = np.empty((n, tau), dtype=np.int64)
    for u in range(n):
        at = np.sort(rng.choice(np.arange(1, tau), size=c, replace=False))
        v = int(rng.integers(k))
        row = np.full(tau, v)
        for s in at:
            v = (v + 1 + int(rng.integers(k - 1))) % k
            row[s:] = v
        out[u] = row
    return out


@pytest.mark.parametrize("tau", [9, 33, 129])
def test_change_based_spending_follows_changes_not_epochs(tau):
    """c changes cost CHANGES-TREE at most ε_0 + c·ε_n and DDRM at most ε·(c + 1)·L, whatever
    τ; a memo chain or a one-shot oracle pays for every epoch."""
    rng = np.random.default_rng(tau)
    c = 3
    traj = _with_changes(rng, 200, tau, c)
    tree = ledger.changes_tree_spent(traj, 0.5, 1.0)
    assert tree.max() <= 1.0 + 0.5 * c + 1e-12
    still = np.repeat(traj[:, :1], tau, axis=1)
    assert np.all(ledger.changes_tree_spent(still, 0.5, 1.0) == 1.0)
    items = rng.integers(0, 4, size=200)
    levels = tree_levels(tau)
    assert ledger.ddrm_spent(traj, items, 0.5).max() <= 0.5 * (c + 1) * levels
    # Constant users who do not hold their item spend nothing; holders pay once at the start
    # (b_0 = 0 → 1) and again at each top node spanning that start.
    held = still[:, 0] == items
    spent_still = ledger.ddrm_spent(still, items, 0.5)
    assert np.all(spent_still[~held] == 0) and np.all(spent_still[held] <= 0.5 * levels)
    oneshot = ledger.memo_spent(traj, 4, 0.5, None)
    assert np.all(oneshot == 0.5 * tau)


def test_tree_nonzero_nodes_against_definition():
    rng = np.random.default_rng(4)
    traj = _stream(rng, 60, 3, 21, 0.2).T
    got = ledger.tree_nonzero_nodes(traj)
    for u in range(0, 60, 7):
        for h in range(got.shape[1]):
            ends = range(1 << h, 21, 1 << h)
            want = sum(traj[u, s] != traj[u, s - (1 << h)] for s in ends)
            assert got[u, h] == want


def test_kernels_and_ledger_agree():
    """What the kernels record equals what the ledger computes from the trajectories."""
    rng = np.random.default_rng(6)
    vals = _stream(rng, 3000, 3, 24, 0.1)
    run = thresh.run(vals, 3, 4.0, 3, 6, rng, z=2.0)
    assert run.updates[0] and run.updates.sum() > 1
    again = ledger.thresh_spent(vals.T, run.updates, run.eps_vote, run.eps_est, 3, 6)
    assert np.allclose(run.user_spent(), again)
    assert again.max() <= 4.0 / 2 * TOL  # each counter holds a quarter of ε
    dd = ddrm.run(vals, 3, 1.0, rng)
    assert np.array_equal(dd.changed, ledger.ddrm_changed_epochs(vals.T, dd.items))
    tr = changes_tree.run(vals, 3, 0.8, 1.0, rng)
    own = ledger.changes_tree_spent(vals.T, 0.8, 1.0, tr.levels)
    worst = ledger.changes_tree_spent(vals.T, 0.8, 1.0)
    assert np.all(own <= worst) and np.all(own <= 1.0 + 0.8 * ledger.change_counts(vals.T))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ledger.window_spent(np.ones(5), 0), "'w' must be an integer >= 1"),
        (lambda: ledger.memo_spent(np.array([[0, 7]]), 4, 0.4, 1.0), r"\[0, 4\); got 7"),
        (lambda: ledger.memo_spent(np.zeros((3, 0), dtype=int), 4, 0.4, 1.0), "tau = 0"),
        (lambda: ledger.change_counts(np.zeros(4, dtype=int)), "2-D"),
        (lambda: ledger.distinct_counts(np.zeros((2, 2))), "integer dtype"),
        (lambda: wevent.run_counts("LBD", np.ones((3, 2), int), 1.0, 0, None), "'w'"),
        (lambda: wevent.run_counts("LXX", np.ones((3, 2), int), 1.0, 2, None), "'method'"),
        (
            lambda: wevent.run_users("LBU", np.array([[0, 5]]), 3, 1.0, 2, None),
            r"\[0, 3\)",
        ),
        (lambda: thresh.run(np.zeros((0, 4), int), 3, 1.0, 2, 2, None), "tau >= 1"),
    ],
)
def test_bad_input_is_one_line(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------- the front


def _registered_memo_or_report():
    """Registered protocols over codes whose accounting the front reads from counts alone."""
    import longldp as ll
    from registry_cases import build, triples

    out = []
    for cls, params, cid in triples(lambda c: c.input_domain.codes and not c.rounds.planned):
        proto = build(cls, params, 5)
        if proto.accounting.rule in ("per-report", "per-memo"):
            out.append(pytest.param(proto, id=cid))
    assert out and ll.protocols.PROTOCOL_CLASSES
    return out


@pytest.mark.parametrize("proto", _registered_memo_or_report())
def test_front_equals_the_memos_a_population_holds(proto):
    """Second route: the memos a per-user run really created (PopulationMemo) give the same
    ε per user as the ledger computes from the trajectories (with the users' state)."""
    rng = np.random.default_rng(31)
    traj = _stream(rng, 60, proto.domain_size, 7, 0.4).T.copy()
    memo = proto.new_memo(60)
    for t in range(traj.shape[1]):
        proto.perturb(proto.as_inputs(traj[:, t]), memo, rng)
    from longldp.privacy import ledger as front

    got = front(proto, traj, state=memo.state or None)
    want = proto.accounting.spent(memo.reports, memo.memos_per_user())
    assert np.allclose(got.spent, want, rtol=1e-12)
    assert got.rule == proto.accounting.rule and np.array_equal(got.lifetime, got.spent)
    summary = got.summary()
    assert summary["spent_max"] == pytest.approx(float(np.max(want)))


def test_front_bad_input_and_nominal_window():
    import longldp as ll
    from longldp.privacy import ledger as front

    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match=r"\[0, 4\); got 9") as info:
        front(proto, np.array([[0, 9]]))
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="tau = 0"):
        front(proto, np.zeros((2, 0), dtype=int))
