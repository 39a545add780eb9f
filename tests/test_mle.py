"""The maximum-likelihood post-processing (postprocess.mle, docs/math.md §5.3): it maximises
the likelihood it documents, agrees with IBU run to convergence, and is consistent."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

import longldp as ll
from longldp import postprocess as pp
from longldp.postprocess import ChannelInfo


def _channel(proto, n: int) -> ChannelInfo:
    return ChannelInfo(P1=proto.P1, P0=proto.P0, n=n, grr_type=proto.name in ("GRR", "L-GRR"))


def _raw(proto, truth: np.ndarray, n: int, rng) -> np.ndarray:
    counts = np.round(truth * n).astype(np.int64)
    counts[0] += n - counts.sum()
    return proto.estimate(proto.sample_support(counts, n, rng), n)


def _loglik(theta, raw, ch: ChannelInfo) -> float:
    """The likelihood mle documents: multinomial (GRR-type) or composite binomial."""
    gap = ch.P1 - ch.P0
    obs = ch.P0 + raw * gap
    pi = ch.P0 + gap * np.asarray(theta)
    if ch.grr_type:
        return float(np.sum(obs / obs.sum() * np.log(pi)))
    return float(np.sum(obs * np.log(pi) + (1 - obs) * np.log1p(-pi)))


SKEWED = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02, 0.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- the maximiser


@pytest.mark.parametrize(("k", "eps", "n"), [(12, 1.0, 2000), (20, 2.0, 5000), (6, 3.0, 300)])
def test_grr_mle_is_the_converged_ibu(k, eps, n):
    rng = np.random.default_rng(k)
    proto = ll.protocol("GRR", k=k, eps=eps)
    truth = rng.dirichlet(np.full(k, 0.3))
    raw = _raw(proto, truth, n, rng)
    ch = _channel(proto, n)
    got = pp.mle(raw, 1.0, ch)
    slow = pp.ibu(raw, 1.0, ch, max_iter=100_000, tol=1e-14)
    assert _loglik(got, raw, ch) >= _loglik(slow, raw, ch) - 1e-13
    np.testing.assert_allclose(got, slow, atol=1e-6)


def test_grr_mle_returns_interior_unbiased_estimates_unchanged():
    ch = ChannelInfo(P1=0.5, P0=0.125, n=1000, grr_type=True)  # k = 5: 0.5 + 4·0.125 = 1
    raw = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    np.testing.assert_allclose(pp.mle(raw, 1.0, ch), raw, atol=1e-15)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("OUE", {"eps": 1.0}),
        ("OLH", {"eps": 1.5}),
        ("L-OSUE", {"eps_perm": 2.0, "eps_1": 0.8}),
        ("BiLOLOHA", {"eps_perm": 2.0, "eps_1": 0.8}),
        ("SH", {"eps": 1.0}),
    ],
)
def test_composite_mle_maximises_the_composite_likelihood(name, params):
    rng = np.random.default_rng(7)
    k = SKEWED.size
    proto = ll.protocol(name, k=k, **params)
    raw = _raw(proto, SKEWED, 3000, rng)
    ch = _channel(proto, 3000)
    got = pp.mle(raw, 1.0, ch)
    # KKT: the gradient is equal on the support and no larger off it.
    gap = ch.P1 - ch.P0
    obs = ch.P0 + raw * gap
    pi = ch.P0 + gap * got
    grad = gap * (obs / pi - (1 - obs) / (1 - pi))
    support = got > 1e-12
    lam = grad[support].mean()
    np.testing.assert_allclose(grad[support], lam, rtol=1e-7, atol=1e-7)
    assert np.all(grad[~support] <= lam + 1e-7)
    # And no general-purpose optimiser finds a better point.
    res = optimize.minimize(
        lambda t: -_loglik(np.clip(t, 0, 1), raw, ch),
        np.full(k, 1 / k),
        method="SLSQP",
        bounds=[(0, 1)] * k,
        constraints=[{"type": "eq", "fun": lambda t: t.sum() - 1}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert _loglik(got, raw, ch) >= -res.fun - 1e-12


@pytest.mark.parametrize("grr_type", [True, False])
def test_output_is_a_scaled_distribution(grr_type):
    rng = np.random.default_rng(3)
    k = 12
    P1, P0 = (0.45, 0.05) if grr_type else (0.5, 0.2)
    ch = ChannelInfo(P1=P1, P0=P0, n=500, grr_type=grr_type)
    for _ in range(50):
        raw = rng.normal(1 / k, 0.2, size=k)
        if grr_type:
            raw += (1 - raw.sum()) / k  # GRR estimates sum to 1
        raw = np.clip(raw, -P0 / (P1 - P0), (1 - P0) / (P1 - P0))
        for total in (1.0, 500.0):
            out = pp.mle(raw * total, total, ch)
            assert out.min() >= 0 and out.sum() == pytest.approx(total, rel=1e-12)


def test_protocol_estimate_accepts_mle():
    rng = np.random.default_rng(0)
    proto = ll.protocol("L-GRR", k=12, eps_perm=2.0, eps_1=0.8)
    counts = np.round(SKEWED * 4000).astype(np.int64)
    support = proto.sample_support(counts, int(counts.sum()), rng)
    out = proto.estimate(support, int(counts.sum()), postprocess="mle")
    assert out.min() >= 0 and out.sum() == pytest.approx(1.0)


# ----------------------------------------------------------------------------- consistency


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("GRR", {"eps": 1.0}),
        ("OUE", {"eps": 1.0}),
        ("OLH", {"eps": 1.0}),
        ("L-OSUE", {"eps_perm": 2.0, "eps_1": 0.8}),
    ],
)
def test_mle_converges_to_the_truth(name, params):
    """Each coordinate within 5·(SE_v + SE_Σ) of the truth at every n, SE from the unbiased
    estimator's exact variance (math §1.2) and SE_Σ = √(k·Σ_v Var_v) ≥ the SD of Σ f̂ (the
    shift that enforces Σθ = 1; docs/math.md §5.3); the error falls as n grows."""
    rng = np.random.default_rng(2026)
    k = SKEWED.size
    proto = ll.protocol(name, k=k, **params)
    mean_error = {}
    for n in (10_000, 100_000, 1_000_000):
        var = proto.variance(n, SKEWED)
        tol = 5 * (np.sqrt(var) + np.sqrt(k * var.sum()))
        errors = []
        for _ in range(20):
            est = pp.mle(_raw(proto, SKEWED, n, rng), 1.0, _channel(proto, n))
            truth = np.round(SKEWED * n) / n
            assert np.all(np.abs(est - truth) <= tol)
            errors.append(np.abs(est - truth).max())
        mean_error[n] = float(np.mean(errors))
    # The error scales like n^{-1/2}: a factor √100 = 10 from 10⁴ to 10⁶; ask for 3.
    assert mean_error[1_000_000] < mean_error[10_000] / 3
    assert mean_error[100_000] < mean_error[10_000]


# ----------------------------------------------------------------------------- bad input


GRR5 = ChannelInfo(P1=0.5, P0=0.125, n=1000, grr_type=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"estimates": [0.5, 0.5], "channel": None}, "'channel'"),
        ({"estimates": [0.5, 0.5], "channel": {"P1": 0.5}}, "'channel'"),
        ({"estimates": [0.2] * 5, "channel": ChannelInfo(0.5, 0.2, 10, grr_type=True)}, "GRR"),
        ({"estimates": [3.0, -2.0, 0.0, 0.0, 0.0], "channel": GRR5}, "'estimates'"),
        ({"estimates": [0.2, float("nan"), 0.2, 0.2, 0.2], "channel": GRR5}, "'estimates'"),
        ({"estimates": [0.2] * 5, "channel": GRR5, "total": -1.0}, "'total'"),
    ],
)
def test_bad_input_is_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        pp.mle(**kwargs)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- the demo table


def test_demo_adds_the_mle_column_without_changing_its_rows(monkeypatch):
    """`longldp demo` gains an MLE column computed from the same raw estimates: its other
    columns are what the simulation without post-processing gives, draw for draw."""
    from longldp.data import to_longitudinal, zipf
    from longldp.experiments import demo
    from longldp.simulate import simulate

    monkeypatch.setattr(demo, "N_USERS", 2000)
    monkeypatch.setattr(demo, "PROTOCOLS", (demo.PROTOCOLS[0], demo.PROTOCOLS[-1]))
    monkeypatch.setattr(demo, "EPS_PERM", (1.0, 4.0))
    rows = demo.run_demo(7)
    data_seed, *cell_seeds = np.random.SeedSequence(7).spawn(1 + 4)
    data_rng = np.random.default_rng(data_seed)
    values = to_longitudinal(zipf(2000, demo.K, rng=data_rng), demo.TAU, data_rng)
    cells = [(p, e) for p in demo.PROTOCOLS for e in demo.EPS_PERM]
    for row, ((_, name, extra), eps_perm), seed in zip(rows, cells, cell_seeds, strict=True):
        proto = demo.make_proto(name, extra, eps_perm)
        sim = simulate(proto, values, np.random.default_rng(seed))
        assert row.mse_avg == sim.mse_avg
        # the MLE column: pp.mle of those same raw estimates under the protocol's channel
        channel = proto.postprocess_channel(2000)
        mle = np.stack([pp.mle(raw, 1.0, channel) for raw in sim.estimates])
        assert row.mse_avg_mle == pytest.approx(np.mean((mle - sim.truth) ** 2), rel=1e-12)
