"""THRESH, CHANGES-TREE and DDRM as registered mechanisms (docs/math.md §19.3–§19.5; their
``history`` trait, docs/design.md §2.5): the channel of each context against an independent
enumeration, the device client with its history across restarts, the population path's
spending against the ledger, unbiased per-epoch parts, and a lifetime black-box audit over
trajectories against the ledger's bound (19.10)."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest

import longldp as ll
from longldp.audit import audit_lifetime
from longldp.audit import randomizers as rz
from longldp.client import BudgetExceededError, DeviceClient
from longldp.privacy import grr_probabilities, ledger
from longldp.privacy.streams import ddrm_plus_probabilities, rr_probabilities, trailing_level
from server_helpers import ROOT
from streams_helpers import node_encoding, node_row

TREE = {"k": 3, "eps_0": 1.0, "eps_node": 0.8, "tau": 9}
DDRM = {"k": 3, "eps": 1.1, "tau": 9}
THRESH = {"k": 3, "eps_total": 4.0, "max_votes": 2, "max_updates": 3}


# ------------------------------------------------------------------------------ channels


def test_changes_tree_node_channel_is_the_enumerated_one():
    """Each transition's row equals the law of its 2k bits enumerated one by one
    (tests/streams_helpers.py), and the initial report's is GRR's at ε_0."""
    proto = ll.protocol("CHANGES-TREE", **TREE)
    initial, node = proto.context_channels()
    p, q = proto.node_probabilities
    k = proto.k
    for a in range(k):
        for b in range(k):
            np.testing.assert_allclose(node[a * k + b], node_row(node_encoding(k, a, b), p, q))
    keep, other = grr_probabilities(1.0, k)
    np.testing.assert_allclose(initial, np.where(np.eye(k, dtype=bool), keep, other))


def test_ddrm_and_thresh_channels_are_the_samplers_laws():
    d = ll.protocol("DDRM", **DDRM)
    odd, even = d.context_channels()
    plus = np.array(ddrm_plus_probabilities(1.1))
    np.testing.assert_allclose(odd[:, 1], plus)
    for leaf in range(3):  # a fair coin picks the leaf or the top node
        for top in range(3):
            row = even[3 * leaf + top]
            np.testing.assert_allclose(row, [*(0.5 * odd[leaf]), *(0.5 * odd[top])])
    t = ll.protocol("THRESH", **THRESH)
    vote, update = t.context_channels()
    p, q = rr_probabilities(4.0 / 8)
    np.testing.assert_allclose(vote, [[1 - q, q], [1 - p, p]])
    np.testing.assert_allclose(update[-1], update[:-1].mean(axis=0))  # the default: uniform


# ------------------------------------------------------------------------------ devices


def _walk(name, params, path, values, epochs, plans=None):
    """Report ``values`` at ``epochs`` through a device reopened from its state file before
    every report (a restart each time); returns the last device."""
    proto = ll.protocol(name, **params)
    DeviceClient(path, proto, "c", secret=b"s" * 32)
    for i, (v, e) in enumerate(zip(values, epochs, strict=True)):
        dev = DeviceClient(path, secret=b"s" * 32)
        dev.report(v, e, None if plans is None else plans[i])
    return DeviceClient(path, secret=b"s" * 32)


@pytest.mark.parametrize(
    ("name", "params", "key"), [("CHANGES-TREE", TREE, "level"), ("DDRM", DDRM, "item")]
)
def test_a_device_keeps_its_history_across_restarts_and_spends_what_the_ledger_says(
    tmp_path, name, params, key
):
    values = [0, 0, 2, 2, 1, 1, 1, 0, 2]
    dev = _walk(name, params, tmp_path / "d.json", values, range(9))
    x = np.array([values])
    state = {key: dev.user_state[key]}
    want = ll.privacy.ledger(dev.proto, x, state=state).spent[0]
    assert dev.spent_budget.epsilon == pytest.approx(want, abs=1e-12)
    assert dev.history["last"].tolist() == [8]
    # A report goes forward only: epoch 8 again is refused, and nothing changes.
    before = (tmp_path / "d.json").read_bytes()
    with pytest.raises(ValueError, match="does not follow the device's last epoch 8"):
        dev.report(1, 8)
    assert (tmp_path / "d.json").read_bytes() == before


def test_a_changes_tree_device_sends_at_its_node_ends_only(tmp_path):
    proto = ll.protocol("CHANGES-TREE", **TREE)
    dev = DeviceClient(tmp_path / "t.json", proto, "c", secret=b"t" * 32)
    size = 1 << int(dev.user_state["level"][0])
    sent = [dev.report(1, e) is not None for e in range(9)]
    assert sent == [e == 0 or e % size == 0 for e in range(9)]
    with pytest.raises(ValueError, match=r"'epoch' must be in \[0, 9\)"):
        dev.report(1, 9)


def test_a_thresh_device_follows_the_rounds_and_its_counters(tmp_path):
    plans = [{"round": r} for r in ("estimate", "vote", "vote", "estimate", "vote", "vote")]
    values, epochs = [2, 1, 0, 0, 1, 2], [0, 1, 2, 2, 3, 4]
    dev = _walk("THRESH", THRESH, tmp_path / "h.json", values, epochs, plans)
    eps_vote, eps_est = 4.0 / 8, 4.0 / 12
    # estimate (real); votes: changed, changed (counter 2 full); estimate; vote: changed but
    # the counter is spent; vote: the default.
    assert dev.spent_budget.epsilon == pytest.approx(2 * eps_est + 2 * eps_vote)
    assert dev.history["votes"].tolist() == [2] and dev.history["reference"].tolist() == [0]
    with pytest.raises(ValueError, match="planned by the server"):
        dev.report(1, 5)
    with pytest.raises(ValueError, match="'round' must be 'vote' or 'estimate'"):
        dev.report(1, 5, {"round": "publish"})
    capped = DeviceClient(tmp_path / "m.json", dev.proto, "c", max_epsilon=0.4)
    capped.report(0, 0, {"round": "estimate"})  # ε_est = 1/3
    with pytest.raises(BudgetExceededError):  # then a real vote of 1/2: past 0.4
        capped.report(1, 1, {"round": "vote"})
    assert capped.spent_budget.epsilon == pytest.approx(eps_est)
    assert capped.history["votes"].tolist() == [0]  # the refused vote changed nothing


# ------------------------------------------------------------------------------ estimates


def _population(name, params, values, rng, plans=None):
    proto = ll.protocol(name, **params)
    memo = proto.new_memo(values.shape[1])
    supports = []
    for t, row in enumerate(values):
        plan = None if plans is None else plans[t]
        supports.append(proto.support_counts(proto.perturb(row, memo, rng, plan=plan)))
    return proto, memo, supports


def _within(est, truth, z=5.0):
    ok = ~np.isnan(est.raw)
    assert np.all(np.abs(est.raw[ok] - truth[ok]) <= z * est.se[ok]), (est.raw, truth, est.se)


def test_changes_tree_parts_and_release_are_unbiased():
    rng = np.random.default_rng(3)
    n, tau, k = 6000, 5, 3
    values = np.empty((tau, n), dtype=np.int64)
    values[0] = rng.integers(0, k, n)
    for t in range(1, tau):
        move = rng.random(n) < 0.3
        values[t] = np.where(move, rng.integers(0, k, n), values[t - 1])
    params = {**TREE, "tau": tau, "eps_node": 2.0}
    proto, memo, supports = _population("CHANGES-TREE", params, values, rng)
    levels = memo.state["level"]
    estimates = [proto.estimate_with_se(s, int(s[:, 0].sum())) for s in supports]
    f = lambda v: np.bincount(v, minlength=k) / v.size  # noqa: E731
    _within(types.SimpleNamespace(raw=estimates[0].raw[0], se=estimates[0].se[0]), f(values[0]))
    for s in range(1, tau):  # the node of level h ending at s: the flow of its users
        for h in range(proto.levels):
            if s % (1 << h):
                continue
            who = levels == h
            flow = f(values[s, who]) - f(values[s - (1 << h), who])
            row = 1 + h
            _within(types.SimpleNamespace(raw=estimates[s].raw[row], se=estimates[s].se[row]), flow)
    released = proto.release(np.stack([e.raw for e in estimates]))
    # The node flows telescope to f(s): its variance is the sum of its independent parts'.
    var = proto.release(np.stack([e.se**2 for e in estimates]))
    truth = np.stack([f(v) for v in values])
    _within(types.SimpleNamespace(raw=released, se=np.sqrt(var)), truth)


def test_ddrm_parts_are_unbiased_and_thresh_rounds_estimate_what_they_say():
    rng = np.random.default_rng(4)
    n, k = 8000, 3
    values = np.stack([rng.integers(0, k, n), rng.integers(0, k, n)])
    proto, memo, supports = _population("DDRM", DDRM, values, rng)
    items = memo.state["item"]
    est = proto.estimate_with_se(supports[1], n)  # s = 2: leaf (1, 2] and top (0, 2]
    b1, b2 = values[0] == items, values[1] == items
    leaf = np.array([np.mean(b2[items == j] * 1.0 - b1[items == j]) for j in range(k)])
    top = np.array([np.mean(b2[items == j] * 1.0) for j in range(k)])
    _within(types.SimpleNamespace(raw=est.raw[0], se=est.se[0]), leaf)
    _within(types.SimpleNamespace(raw=est.raw[1], se=est.se[1]), top)

    plans = [{"round": "estimate"}, {"round": "vote"}]
    values[1] = np.where(rng.random(n) < 0.4, (values[0] + 1) % k, values[0])
    proto, memo, supports = _population("THRESH", THRESH, values, rng, plans)
    first = proto.estimate_with_se(supports[0], n)
    _within(
        types.SimpleNamespace(raw=first.raw[1:], se=first.se[1:]),
        np.bincount(values[0], minlength=k) / n,
    )
    votes = proto.estimate_with_se(supports[1], n)
    changed = np.mean(values[1] != values[0])
    _within(types.SimpleNamespace(raw=votes.raw[:1], se=votes.se[:1]), np.array([changed]))
    assert proto.update_needed(supports[1])  # 40% changed: far above no change


# ------------------------------------------------------------------------------ lifetime audit


def _claim(proto, worlds, run=None):
    """(19.10): the most any two worlds' trajectories can be told apart, spent(x) + spent(x'),
    at the worst public draws (run None) or the given ones."""
    spent = proto.change_spent(np.stack(worlds), run)
    return float(spent.max() * 2)


@pytest.mark.parametrize("pattern", ["one-value", "alternating"])
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("CHANGES-TREE", {"k": 3, "eps_0": 0.7, "eps_node": 0.6, "tau": 6}),
        ("DDRM", {"k": 3, "eps": 1.5, "tau": 6}),
        ("THRESH", {"k": 3, "eps_total": 4.0, "max_votes": 2, "max_updates": 2}),
    ],
)
def test_the_lifetime_of_a_trajectory_is_within_the_ledgers_bound(name, params, pattern):
    """A device's τ reports over a trajectory (one value; or two values alternating, which
    makes every node non-zero), audited black-box (docs/audit.md §8) through the population
    path with its history, against the claim (19.10) spent(x) + spent(x'); the search finds a
    positive lower bound, so the audit has power."""
    proto = ll.protocol(name, **params)
    tau = 6
    a, b = 0, 2
    if pattern == "one-value":
        worlds = [np.full(tau, a), np.full(tau, b)]
    else:
        worlds = [np.arange(tau) % 2 * (b - a) + a, (np.arange(tau) + 1) % 2 * (b - a) + a]
    # THRESH without a server: the example plans, an update at epoch 0 and votes after.
    run = types.SimpleNamespace(updates=np.arange(tau) == 0) if name == "THRESH" else None
    claim = _claim(proto, worlds, run)
    res = audit_lifetime(
        rz.protocol_lifetime(proto),
        k=3,
        claim=claim,
        tau=tau,
        trials=2000,
        pattern=pattern,
        inputs=(a, b),
        rng=8,
        classifier=False,
    )
    assert not res.violates, res.summary()
    assert res.lower > 0.05, res.summary()


def test_the_ledger_bound_is_what_a_trajectory_pair_costs_at_most():
    """(19.10) against the exact ε of the trajectory pair, per public draw, for DDRM's item and
    the parities of its epochs (the candidate node taken at its worse side)."""
    proto = ll.protocol("DDRM", **DDRM)
    up = ddrm_plus_probabilities(1.1)
    probs = dict(zip((-1, 0, 1), up, strict=True))
    x = np.array([0, 0, 1, 1, 0, 2, 2, 0, 1])
    y = np.array([1, 0, 1, 2, 2, 2, 0, 0, 1])
    for item in range(3):
        bx = np.concatenate([[0], x == item]).astype(int)
        by = np.concatenate([[0], y == item]).astype(int)
        exact = 0.0
        for s in range(1, 10):
            worst = 0.0
            for h in {0, trailing_level(s)}:
                dx, dy = bx[s] - bx[s - (1 << h)], by[s] - by[s - (1 << h)]
                pa = np.array([probs[dx], 1 - probs[dx]])
                pb = np.array([probs[dy], 1 - probs[dy]])
                worst = max(worst, float(np.max(np.abs(np.log(pa / pb)))))
            exact += worst
        run = types.SimpleNamespace(items=np.array([item, item]))
        bound = proto.change_spent(np.stack([x, y]), run).sum()
        assert exact <= bound + 1e-9
        assert bound == pytest.approx(ledger.ddrm_spent(np.stack([x, y]), [item, item], 1.1).sum())


def test_the_user_page_example_runs_as_written(tmp_path):
    """docs/streams.md, "Registered: devices with a history": its code, and its claim that a
    population's spending is the ledger's."""
    text = (ROOT / "docs" / "streams.md").read_text()
    block = text.split("## Registered: devices with a history")[1]
    code = block.split("```python")[1].split("```")[0]
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        exec(code, scope)
    finally:
        os.chdir(here)
    tree, values, memo = scope["tree"], scope["values"], scope["memo"]
    want = ll.privacy.ledger(tree, values.T, state=memo.state).spent
    np.testing.assert_allclose(scope["spent"], want, rtol=1e-12)
    assert scope["tracked"].shape == (64, 8)


def test_the_audit_command_refuses_the_game_and_runs_the_black_box(capsys):
    """``longldp audit`` of a history-dependent mechanism: the likelihood game's client model
    does not apply (one line, exit 2, naming the audits that do); ``--blackbox`` runs."""
    from typer.testing import CliRunner

    from longldp.cli import app

    runner = CliRunner()
    args = ["audit", "DDRM", "--k", "3", "--eps", "1.0", "--param", "tau=4"]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--blackbox" in res.output, res.output
    res = runner.invoke(
        app, [*args, "--blackbox", "--trials", "2000", "--taus", "3", "--no-classifier"]
    )
    assert res.exit_code == 0, res.output
