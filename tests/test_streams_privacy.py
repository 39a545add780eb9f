"""Exact ε of every report channel of the stream mechanisms (docs/math.md §19).

Channels are enumerated from the probabilities the samplers use (longldp.privacy.streams) and
compared with the claimed ε from both sides; the samplers are checked to realize them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from longldp.privacy import channel_epsilon, grr_probabilities, oue_probabilities
from longldp.privacy.streams import (
    ddrm_plus_probabilities,
    fo_kind,
    rr_probabilities,
    thresh_budgets,
    tree_node_epsilon,
    tree_node_probabilities,
)
from longldp.protocols.streams import oracle
from streams_helpers import node_encoding, node_row


def _node_channel(k: int, p: float, q: float) -> np.ndarray:
    """Rows: no change, then every (a → b), a ≠ b."""
    inputs = [(0, 0), *itertools.permutations(range(k), 2)]
    return np.array([node_row(node_encoding(k, a, b), p, q) for a, b in inputs])


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("eps_node", [0.3, 1.0, 2.5])
def test_tree_node_channel_epsilon_is_exact(k, eps_node):
    p, q = tree_node_probabilities(eps_node)
    channel = _node_channel(k, p, q)
    assert np.allclose(channel.sum(axis=1), 1.0)
    exact = channel_epsilon(channel)
    assert exact == pytest.approx(tree_node_epsilon(p, q), rel=1e-12)
    assert exact == pytest.approx(eps_node, rel=1e-12)
    # Against "no change" (row 0) a report costs less than the node's ε.
    to_none = np.max(np.abs(np.log(channel[1:] / channel[0])))
    assert to_none < exact
    assert to_none == pytest.approx(2 * math.log((math.exp(eps_node / 2) + 1) / 2), rel=1e-12)


@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0])
def test_ddrm_ternary_channel(eps):
    down, zero, up = ddrm_plus_probabilities(eps)
    channel = np.array([[d, 1 - d] for d in (down, zero, up)])
    assert channel_epsilon(channel) == pytest.approx(eps, rel=1e-12)
    assert channel_epsilon(channel[[1, 2]]) == pytest.approx(
        math.log((math.exp(eps) + 1) / 2), rel=1e-12
    )
    assert zero == 0.5  # no change: a fair coin, independent of the data


@pytest.mark.parametrize("kind", ["grr", "oue"])
def test_thresh_default_report_within_eps_of_every_real_one(kind):
    """The default estimate (the oracle on a uniform value) is the mixture of the real rows."""
    k, eps = 3, 0.7
    if kind == "grr":
        p, q = grr_probabilities(eps, k)
        real = np.full((k, k), q) + np.eye(k) * (p - q)
    else:
        p, q = oue_probabilities(eps)
        outs = list(itertools.product((0, 1), repeat=k))
        real = np.array(
            [
                [
                    np.prod(
                        [
                            (p if i == v else q) if b else 1 - (p if i == v else q)
                            for i, b in enumerate(y)
                        ]
                    )
                    for y in outs
                ]
                for v in range(k)
            ]
        )
    default = real.mean(axis=0)
    assert channel_epsilon(np.vstack([real, default])) == pytest.approx(
        channel_epsilon(real), rel=1e-12
    )
    assert channel_epsilon(real) <= eps * (1 + 1e-12)
    assert channel_epsilon(np.vstack([default, real[0]])) < eps


def test_thresh_vote_channel_and_budgets():
    eps_vote, eps_est = thresh_budgets(2.0, 10, 4)
    assert (eps_vote, eps_est) == (pytest.approx(0.05), pytest.approx(0.125))
    p, q = rr_probabilities(eps_vote)
    assert channel_epsilon([[q, p], [p, q]]) == pytest.approx(eps_vote, rel=1e-12)
    # Counters full: votes and estimates each cost at most a quarter of ε.
    assert 10 * eps_vote == pytest.approx(0.5) and 4 * eps_est == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["grr", "oue"])
def test_oracle_samplers_realize_their_probabilities(kind):
    """Per-user reports hit their channel: 5-SE binomial bounds on every output frequency."""
    k, eps, m = 4, 1.0, 40_000
    rng = np.random.default_rng(5)
    values = np.full(m, 2)
    reports = oracle.perturb(values, kind, k, eps, rng)
    got = oracle.support(reports, kind, k) / m
    p, q = grr_probabilities(eps, k) if kind == "grr" else oue_probabilities(eps)
    want = np.where(np.arange(k) == 2, p, q)
    assert np.all(np.abs(got - want) <= 5 * np.sqrt(want * (1 - want) / m))


def test_fo_kind_rule():
    assert fo_kind("adaptive", 4, 1.0) == "grr"  # 4 < 3e + 2
    assert fo_kind("adaptive", 64, 1.0) == "oue"
    assert fo_kind("oue", 4, 1.0) == "oue"
    # The rule is where the mean variances cross (docs/math.md §19.1): 3e^ε + 2 = k.
    from longldp.privacy.streams import fo_mean_variance

    for k in (3, 6, 12, 40):
        for eps in (0.5, 1.0, 2.0):
            g, o = (fo_mean_variance(x, k, eps, 1000) for x in ("grr", "oue"))
            assert (g < o) == (fo_kind("adaptive", k, eps) == "grr") or abs(g - o) < 1e-3 * o
