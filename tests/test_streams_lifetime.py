"""Lifetime privacy of the change-based mechanisms against the strongest analyst (math §19).

Given the public facts (a CHANGES-TREE user's level, DDRM's item and coins, THRESH's update
epochs), a user's reports at different epochs are independent, so the exact ε between two
trajectories is the sum over epochs of each report's worst log-ratio, in the worse direction.
It is computed here from the report channels themselves (enumerated from the samplers'
probabilities) and compared with the ledger's bound (19.10), spent(x) + spent(x').
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp.privacy import grr_probabilities, ledger
from longldp.privacy.streams import (
    ddrm_plus_probabilities,
    rr_probabilities,
    thresh_budgets,
    trailing_level,
    tree_levels,
    tree_node_probabilities,
)
from streams_helpers import node_encoding, node_row


def _worst(p_rows: np.ndarray, q_rows: np.ndarray) -> float:
    """Exact ε of a sequence of independent reports: Σ_t max_y |ln p_t(y)/q_t(y)|, per side."""
    forward = sum(float(np.max(np.log(p / q))) for p, q in zip(p_rows, q_rows, strict=True))
    back = sum(float(np.max(np.log(q / p))) for p, q in zip(p_rows, q_rows, strict=True))
    return max(forward, back, 0.0)


def _node_row(k: int, before: int, after: int, p: float, q: float) -> np.ndarray:
    return node_row(node_encoding(k, before, after), p, q)


def _grr_row(k: int, eps: float, v: int) -> np.ndarray:
    p, q = grr_probabilities(eps, k)
    row = np.full(k, q)
    row[v] = p
    return row


def _pairs(rng, k, tau, count):
    for _ in range(count):
        yield tuple(rng.integers(0, k, size=(2, tau)) * (rng.random((2, tau)) < 0.7))


@pytest.mark.parametrize("tau", [3, 6])
def test_changes_tree_lifetime_within_the_ledger_bound(tau):
    k, eps_node, eps_0 = 2, 0.9, 0.5
    p, q = tree_node_probabilities(eps_node)
    rng = np.random.default_rng(tau)
    n_levels = tree_levels(tau - 1)
    tight = 0.0
    for x, y in _pairs(rng, k, tau, 40):
        for h in range(n_levels):
            ends = range(1 << h, tau, 1 << h)
            px = [_grr_row(k, eps_0, x[0])] + [
                _node_row(k, x[s - (1 << h)], x[s], p, q) for s in ends
            ]
            py = [_grr_row(k, eps_0, y[0])] + [
                _node_row(k, y[s - (1 << h)], y[s], p, q) for s in ends
            ]
            exact = _worst(np.array(px, dtype=object), np.array(py, dtype=object))
            bound = ledger.changes_tree_spent(np.array([x, y]), eps_node, eps_0, [h, h]).sum()
            assert exact <= bound + 1e-9
            tight = max(tight, exact / bound)
    assert tight > 0.5  # the bound is not vacuous


@pytest.mark.parametrize("tau", [4, 7])
def test_ddrm_lifetime_within_the_ledger_bound(tau):
    k, eps = 3, 1.1
    probs = dict(zip((-1, 0, 1), ddrm_plus_probabilities(eps), strict=True))
    rng = np.random.default_rng(tau)
    for x, y in _pairs(rng, k, tau, 60):
        item = int(rng.integers(k))
        bx = np.concatenate([[0], np.asarray(x) == item]).astype(int)
        by = np.concatenate([[0], np.asarray(y) == item]).astype(int)
        worst = 0.0  # over the public coins: each epoch takes its worse candidate
        for s in range(1, tau + 1):
            cands = {0, trailing_level(s)}
            per = []
            for h in cands:
                dx, dy = bx[s] - bx[s - (1 << h)], by[s] - by[s - (1 << h)]
                a = np.array([probs[dx], 1 - probs[dx]])
                b = np.array([probs[dy], 1 - probs[dy]])
                per.append(float(np.max(np.abs(np.log(a / b)))))
            worst += max(per)
        bound = ledger.ddrm_spent(np.array([x, y]), np.array([item, item]), eps).sum()
        assert worst <= bound + 1e-9


def test_thresh_lifetime_within_the_ledger_bound():
    k, eps, max_votes, max_updates = 3, 2.0, 3, 2
    eps_vote, eps_est = thresh_budgets(eps, max_votes, max_updates)
    pv, qv = rr_probabilities(eps_vote)
    rng = np.random.default_rng(9)
    tau = 7
    default_est = np.mean([_grr_row(k, eps_est, v) for v in range(k)], axis=0)
    for x, y in _pairs(rng, k, tau, 80):
        updates = rng.random(tau) < 0.4
        updates[0] = True
        rows_x, rows_y = [], []
        for traj, rows in ((x, rows_x), (y, rows_y)):
            ref, votes, done = traj[0], 0, 0
            for t in range(tau):
                if t > 0:
                    real = traj[t] != ref and votes < max_votes
                    votes += int(real)
                    rows.append(np.array([1 - (pv if real else qv), pv if real else qv]))
                if updates[t]:
                    row = _grr_row(k, eps_est, traj[t]) if done < max_updates else default_est
                    rows.append(row)
                    ref, done = traj[t], done + 1
        exact = _worst(np.array(rows_x, dtype=object), np.array(rows_y, dtype=object))
        spent = ledger.thresh_spent(np.array([x, y]), updates, eps_vote, eps_est, 3, 2)
        assert exact <= spent.sum() + 1e-9 <= eps + 1e-9
    assert math.isclose(max_votes * eps_vote + max_updates * eps_est, eps / 2)
