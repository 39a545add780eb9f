"""Statistics of the stream kernels (docs/math.md §19): unbiased estimates whose empirical
variance equals the analytic one, checked with standardized residuals.

For R repetitions, z = (estimate − conditional mean)/sqrt(conditional variance) has mean 0 and
mean square 1 when the formulas are right; the tolerances are 5 standard errors of those two
sample moments (5/sqrt(R) and 5·sqrt(2/R), the latter for near-Gaussian z).
"""

from __future__ import annotations

import numpy as np
import pytest

from longldp.privacy import estimator_variance
from longldp.privacy.streams import fo_probabilities
from longldp.protocols.streams import changes_tree, ddrm, oracle, thresh, wevent

R = 300


def _check_z(z: np.ndarray) -> None:
    z = np.asarray(z, dtype=np.float64).ravel()
    r = z.size
    assert abs(z.mean()) < 5 / np.sqrt(r), z.mean()
    assert abs((z * z).mean() - 1) < 5 * np.sqrt(2 / r), (z * z).mean()


@pytest.mark.parametrize("kind", ["grr", "oue"])
def test_count_level_support_has_the_per_user_law(kind):
    """sample_support draws the law of support(perturb(...)): both match (1.2) moments."""
    k, eps = 4, 0.9
    counts = np.array([500, 300, 150, 50])
    values = np.repeat(np.arange(k), counts)
    rng = np.random.default_rng(11)
    f = counts / counts.sum()
    var = estimator_variance(counts.sum(), f, *fo_probabilities(kind, k, eps))
    for route in ("users", "counts"):
        z = []
        for _ in range(R):
            if route == "users":
                s = oracle.support(oracle.perturb(values, kind, k, eps, rng), kind, k)
            else:
                s = oracle.sample_support(counts, kind, k, eps, rng)
            z.append((oracle.estimate(s, counts.sum(), kind, k, eps) - f) / np.sqrt(var))
        _check_z(z)


@pytest.mark.parametrize("method", ["LBU", "LSP", "LBD", "LBA", "LPU", "LPD", "LPA"])
def test_wevent_fresh_publications_are_unbiased_with_their_variance(method):
    """Every fresh publication, over τ = 6 epochs of a changing stream (count level)."""
    rng = np.random.default_rng(12)
    n, w = 2000, 3
    counts = np.array(
        [
            [1200, 500, 300],
            [900, 700, 400],
            [900, 700, 400],
            [300, 900, 800],
            [300, 900, 800],
            [1000, 600, 400],
        ]
    )
    z = []
    for _ in range(R // 3):
        run = wevent.run_counts(method, counts, 2.0, w, rng)
        for t in np.flatnonzero(run.published):
            f = counts[t] / n
            z.append((run.estimates[t] - f) / np.sqrt(run.publication_variance(t, f)))
    _check_z(z)


def test_wevent_population_variance_includes_sampling_per_user():
    """Per-user LPU: a group is a sample of the users, so (19.2) adds its sampling variance."""
    rng = np.random.default_rng(13)
    k, n = 2, 400
    vals = np.repeat(np.array([[0] * 100 + [1] * 300]), 2, axis=0)
    f = np.array([0.25, 0.75])
    z = []
    for _ in range(R):
        run = wevent.run_users("LPU", vals, k, 3.0, 2, rng)
        z.append((run.estimates[0] - f) / np.sqrt(run.publication_variance(0, f)))
    _check_z(np.asarray(z)[:, 0])
    # Without the sampling term the z-scores are too wide: the term is needed.
    m = n // 2
    no_sampling = estimator_variance(m, f, *fo_probabilities("grr", k, 3.0))
    zs = np.asarray(z)[:, 0] * np.sqrt(run.publication_variance(0, f)[0] / no_sampling[0])
    assert (zs * zs).mean() > 1 + 5 * np.sqrt(2 / R)


def test_changes_tree_unbiased_with_exact_variance():
    rng = np.random.default_rng(14)
    k, n, tau = 3, 1500, 8
    vals = np.empty((tau, n), dtype=np.int64)
    vals[0] = rng.integers(0, k, n)
    for t in range(1, tau):
        vals[t] = np.where(rng.random(n) < 0.3, rng.integers(0, k, n), vals[t - 1])
    p1, p0 = fo_probabilities("grr", k, 1.0)
    f0 = np.bincount(vals[0], minlength=k) / n
    z_cond, est_7 = [], []
    for _ in range(R):
        run = changes_tree.run(vals, k, 1.2, 1.0, rng, oracle_name="grr")
        s = tau - 1
        nodes = [(h, e) for h, e in _decomposition(s)]
        mean = f0 + sum((run.plus[key] - run.minus[key]) / run.node_users[key[0]] for key in nodes)
        var = estimator_variance(n, f0, p1, p0) + sum(run.node_variance(key) for key in nodes)
        z_cond.append((run.estimates[s] - mean) / np.sqrt(var))
        est_7.append(run.estimates[s])
    _check_z(z_cond)
    # Every node estimate on its own: many more residuals, so the node variance (19.9) is
    # pinned to a few percent.
    z_nodes = []
    for _ in range(R // 3):
        run = changes_tree.run(vals, k, 1.2, 1.0, rng, oracle_name="grr")
        for key, est in run.nodes.items():
            truth = (run.plus[key] - run.minus[key]) / run.node_users[key[0]]
            z_nodes.append((est - truth) / np.sqrt(run.node_variance(key)))
    _check_z(z_nodes)
    # Unconditionally (over the levels too) the estimate is unbiased for f at epoch 7.
    f7 = np.bincount(vals[7], minlength=k) / n
    est_7 = np.asarray(est_7)
    assert np.all(np.abs(est_7.mean(0) - f7) < 5 * est_7.std(0, ddof=1) / np.sqrt(R))


def _decomposition(s):
    from longldp.privacy.streams import dyadic_decomposition

    return dyadic_decomposition(s)


def test_ddrm_unbiased_with_exact_variance():
    rng = np.random.default_rng(15)
    k, n, tau = 2, 1200, 8
    vals = np.empty((tau, n), dtype=np.int64)
    vals[0] = (rng.random(n) < 0.3).astype(np.int64)
    for t in range(1, tau):
        vals[t] = np.where(rng.random(n) < 0.5, 1 - vals[t - 1], vals[t - 1])
    items = rng.integers(0, k, n)
    z, z_nodes, est = [], [], []
    for _ in range(R):
        run = ddrm.run(vals, k, 3.0, rng, items=items)
        t = tau - 1
        z.append((run.estimates[t] - run.conditional_mean(t)) / np.sqrt(run.estimate_variance(t)))
        est.append(run.estimates[t])
        for e, d, v in zip(run.node_estimates, run.node_truth, run.node_variance, strict=True):
            z_nodes.append((e - d) / np.sqrt(v))
    _check_z(z)
    _check_z(np.concatenate(z_nodes))
    # Unbiased for the share of each item's users who hold it (over the coins too).
    group = np.array([np.mean(vals[tau - 1][items == j] == j) for j in range(k)])
    est = np.asarray(est)
    assert np.all(np.abs(est.mean(0) - group) < 5 * est.std(0, ddof=1) / np.sqrt(R))


def test_thresh_updates_follow_changes():
    """Epoch 0 is an unbiased oracle estimate; with no change almost no update fires, and a
    change of half the users fires one at once."""
    rng = np.random.default_rng(16)
    k, n, tau = 3, 20_000, 10
    still = np.repeat(rng.integers(0, k, (1, n)), tau, axis=0)
    moved = still.copy()
    moved[5:, : n // 2] = (moved[5:, : n // 2] + 1) % k
    f0 = np.bincount(still[0], minlength=k) / n
    false_alarms, z = 0, []
    for _ in range(20):
        run = thresh.run(still, k, 4.0, 4, 4, rng, z=3.0)
        false_alarms += int(run.updates[1:].sum())
        var = estimator_variance(n, f0, *fo_probabilities(run.kind, k, run.eps_est))
        z.append((run.estimates[0] - f0) / np.sqrt(var))
        hit = thresh.run(moved, k, 4.0, 4, 4, rng, z=3.0)
        assert hit.updates[5] and not hit.updates[1:5].any()
        f5 = np.bincount(moved[5], minlength=k) / n
        assert np.all(np.abs(hit.estimates[5] - f5) < 5 * np.sqrt(var.max()))
    assert false_alarms <= 2  # Pr[z > 3] ≈ 0.13% per epoch, 180 epochs
    z = np.asarray(z)
    assert np.all(np.abs(z.mean(0)) < 5 / np.sqrt(20))
