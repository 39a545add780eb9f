"""The simulation engines over a whole longitudinal dataset (docs/design.md §4)."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.data import to_longitudinal, zipf
from longldp.simulate import simulate
from registry_cases import cases, engine_frequencies


@pytest.mark.slow
@pytest.mark.parametrize("proto", cases(where=engine_frequencies, k=6))
def test_engines_give_the_same_distribution_of_estimates(proto):
    """Same data (n = 300, k = 6, τ = 3): every per-timestamp estimate has the same mean and
    variance under the per-user, reports and count-level engines, within 5 standard errors;
    and the mean is the truth (5 SE from the exact variance). Every registered frequency
    oracle (the estimates of RAPPOR's Bloom and boolean encoders are per-cohort shares)."""
    data_rng = np.random.default_rng(0)
    values = to_longitudinal(zipf(300, 6, rng=data_rng), 3, data_rng)
    reps = 400
    runs = {engine: [] for engine in ("per-user", "reports", "count-level")}
    rng = np.random.default_rng(1)
    for _ in range(reps):
        for engine, out in runs.items():
            out.append(simulate(proto, values, rng, engine=engine).estimates)
    truth = simulate(proto, values, rng, engine="count-level").truth
    var = np.stack([proto.variance(300, f) for f in truth])
    ref = np.array(runs["count-level"])
    for engine in ("per-user", "reports"):
        est = np.array(runs[engine])
        assert np.all(np.abs(est.mean(0) - truth) < 5 * np.sqrt(var / reps))
        se_mean = np.sqrt(est.var(0, ddof=1) / reps + ref.var(0, ddof=1) / reps)
        assert np.all(np.abs(est.mean(0) - ref.mean(0)) < 5 * se_mean)
        ratio = est.var(0, ddof=1) / ref.var(0, ddof=1)
        assert np.all(np.abs(ratio - 1) < 5 * 2 / np.sqrt(reps - 1))


def test_simulation_records_budget_and_rejects_bad_input():
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    values = np.array([[0, 1, 2], [0, 1, 3], [1, 1, 2]])
    sim = simulate(proto, values, 0, engine="per-user")
    assert sim.estimates.shape == (3, 4) and sim.spent_epsilon.shape == (3,)
    # users hold (0, 0, 1), (1, 1, 1), (2, 3, 2): 2, 1, 2 memos; min(3·ε1, memos·ε∞)
    np.testing.assert_allclose(sim.spent_epsilon, [min(3.0, 4.0), min(3.0, 2.0), min(3.0, 4.0)])
    assert simulate(proto, values, 0, engine="count-level").spent_epsilon is None
    assert sim.mse_avg == pytest.approx(np.mean(sim.mse_per_timestamp))
    with pytest.raises(ValueError, match="'engine' must be one of"):
        simulate(proto, values, 0, engine="magic")
    with pytest.raises(ValueError, match=r"'values' must have shape \(tau, n\)"):
        simulate(proto, values[0], 0)
    shares = ll.protocol("RAPPOR-boolean", m=2, f=0.5, p=0.25, q=0.75)
    with pytest.raises(ValueError, match="estimates cohort-shares"):
        simulate(shares, values % 2, 0)
    tree = ll.protocol("CHANGES-TREE", k=3, eps_0=1.0, eps_node=1.0, tau=4)
    with pytest.raises(ValueError, match=r"estimates change-parts .* proto.run"):
        simulate(tree, values % 3, 0)
