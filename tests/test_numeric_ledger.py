"""The privacy ledger over numeric trajectories (docs/math.md §19.6, §20.8): a numeric chain is
charged min(τ·ε1, d·ε∞) with d its distinct α-rounded keys, which equals what the simulated
devices spent (their memo store, another route); without the offsets, per distinct value (an
upper bound); a one-shot mechanism τ·ε; bad trajectories and states are refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.privacy import ledger, spent_epsilon
from longldp.simulate import Population

CHAIN = {"eps_perm": 4.0, "eps_1": 1.0, "lo": 0.0, "hi": 10.0}
N, TAU = 60, 6


def _trajectories(rng: np.random.Generator) -> np.ndarray:
    """(τ, n) values: a third never change, a third drift a little (keys mostly kept), a third
    jump around the range."""
    vals = rng.uniform(0.0, 10.0, (TAU, N))
    third = N // 3
    vals[:, :third] = vals[0, :third]
    vals[:, third : 2 * third] = np.clip(
        vals[0, third : 2 * third] + rng.normal(0.0, 0.05, (TAU, third)), 0.0, 10.0
    )
    return vals


@pytest.mark.parametrize("name", ["L-1BitMean", "L-PM", "L-HM", "L-SW", "HM"])
def test_ledger_equals_what_the_devices_spent(name):
    params = {"eps": 1.0, "lo": 0.0, "hi": 10.0} if name == "HM" else CHAIN
    proto = ll.protocol(name, **params)
    rng = np.random.default_rng(41)
    vals = _trajectories(rng)
    pop = Population.of(proto, N, "per-user")
    pop.run(([v] for v in vals), rng)
    spent = pop.budget()
    state = pop.groups[0].memo.state if proto.longitudinal else None
    with_state = ledger(proto, vals.T, state=state)
    np.testing.assert_allclose(with_state.spent, spent["epsilon"], rtol=1e-12)
    upper = ledger(proto, vals.T).spent  # per distinct value, counted here from the data
    distinct = np.array([np.unique(row).size for row in vals.T])
    acc = proto.accounting
    if proto.longitudinal:
        expected = spent_epsilon(TAU, distinct, acc.eps_report, acc.eps_memo)
        assert with_state.rule == "per-memo"
        np.testing.assert_allclose(
            with_state.spent, spent_epsilon(TAU, spent["memos"], acc.eps_report, acc.eps_memo)
        )
        assert np.any(spent["memos"][N // 3 :] < distinct[N // 3 :])  # rounding kept keys
    else:
        expected = np.full(N, TAU * acc.eps_report)
    np.testing.assert_allclose(upper, expected, rtol=1e-12)
    assert np.all(upper >= with_state.spent)


def test_bad_trajectories_and_states_are_refused():
    proto = ll.protocol("L-PM", **CHAIN)
    good = np.full((4, 3), 5.0)
    for bad, match in [
        (np.array([[1.0, np.nan]]), "finite"),
        (np.array([[1.0, 11.0]]), r"must lie in \[0, 10\]"),
        (np.ones(3), "2-D"),
        (np.ones((3, 0)), "2-D"),
        (np.array([["a", "b"]]), "real numbers"),
    ]:
        with pytest.raises(ValueError, match=match) as err:
            ledger(proto, bad)
        assert "\n" not in str(err.value) and "L-PM" in str(err.value)
    for state, match in [
        ({"hash_id": np.zeros(4)}, "offset"),
        ({"offset": np.zeros(3)}, "4 offsets"),
        ({"offset": np.ones(4)}, r"in \[0, 1\)"),
    ]:
        with pytest.raises(ValueError, match=match):
            ledger(proto, good, state=state)
    clipped = ll.protocol("L-PM", **CHAIN, clip=True)  # asked for: clipped, then counted
    row = np.array([[1.0, 11.0, 10.0] + [1.0] * 7])  # 11 is 10 once clipped: 2 values, τ = 10
    assert ledger(clipped, row).spent[0] == pytest.approx(min(10 * 1.0, 2 * 4.0))
    with pytest.raises(ValueError, match="not codes or numbers"):
        ledger(ll.protocol("RAPPOR", k=16), np.zeros((2, 2), dtype=np.int64))
