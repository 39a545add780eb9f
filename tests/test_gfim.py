"""GFIM, sampling S-Hist and LDPMiner-SH: exact variance, unbiasedness, planted items, budget."""

from __future__ import annotations

import numpy as np
import pytest

from longldp.apps.gfim import (
    GFIM,
    GFIMParams,
    LDPMinerSH,
    changing_population,
    combine_estimates,
    evaluate,
    item_probabilities,
    planted_sets,
    sampling_shist,
    sampling_target,
    shist_variance,
    synthetic_sets,
)
from longldp.apps.setvalued.common import sample_one_item
from longldp.apps.setvalued.oracle import OracleSpec
from longldp.apps.setvalued.psfo import pad_and_sample
from longldp.data import SetData

Z = 5.0


def mixed_sizes(n: int = 300, d: int = 12, seed: int = 0) -> SetData:
    """Sets of sizes 0..8 over 12 items: some shorter than L = 4 (padded), some longer
    (sampled), some empty (always ⊥)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 9, n)
    sets = [
        np.sort(
            rng.choice(d, s, replace=False, p=np.linspace(2, 1, d) / np.linspace(2, 1, d).sum())
        )
        for s in sizes
    ]
    return SetData.from_lists(sets, d)


def shist_estimates(data: SetData, L: int, eps: float, R: int, engine: str, seed: int):
    psfo = sampling_shist(data.domain.size, L, eps)
    rng = np.random.default_rng(seed)
    rows = np.arange(data.n)
    m = data.lengths.astype(np.int64)
    out = np.empty((R, data.domain.size))
    for rep in range(R):
        r = pad_and_sample(m, L, rng)
        items, _ = sample_one_item(data, rows, r)
        codes = psfo.encode(r, m, items)
        if engine == "count-level":
            support = psfo.oracle.sample_support(np.bincount(codes, minlength=psfo.size), rng=rng)
        else:
            support = psfo.oracle.support_counts(psfo.oracle.perturb(codes, rng=rng))
        out[rep] = psfo.estimate(support, data.n)
    return out


def var_and_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    R = x.shape[0]
    dev = x - x.mean(axis=0)
    s2 = (dev**2).sum(axis=0) / (R - 1)
    m4 = (dev**4).mean(axis=0)
    return s2, np.sqrt(np.maximum(m4 - s2**2 * (R - 3) / (R - 1), 0.0) / R)


@pytest.mark.parametrize(("engine", "R"), [("count-level", 4000), ("reports", 1500)])
def test_sampling_shist_unbiased_with_exact_variance(engine: str, R: int) -> None:
    """Mean = f_L(v) and Var = (L²c_ε² − Σa_u²/n_g)/n_g on the client path (FWHT) and at count
    level."""
    data, L, eps = mixed_sizes(), 4, 1.0
    est = shist_estimates(data, L, eps, R, engine, seed=11 if engine == "reports" else 12)
    target = sampling_target(data, L)
    var = shist_variance(data, L, eps)
    assert np.all(np.abs(est.mean(axis=0) - target) <= Z * np.sqrt(var / R))
    s2, se = var_and_se(est)
    assert np.all(np.abs(s2 - var) <= Z * se), (s2, var)
    c2 = ((np.e + 1) / (np.e - 1)) ** 2
    assert np.all(var <= L * L * c2 / data.n) and np.all(var > 0)


@pytest.mark.slow
def test_ivw_combination_unbiased() -> None:
    """With C = every item there is no selection: the combined estimate is unbiased for f on
    every item, and its weight is V1/(V1 + V2)."""
    data = planted_sets(400, d=8, planted=(1, 5), share=0.5, background=2, rng=3)
    f = np.bincount(data.items, minlength=8) / data.n
    app = GFIM(2, OracleSpec("SH", eps=1.0), GFIMParams(k_max=8, ell=4, phase2_pad=5))
    rng = np.random.default_rng(4)
    R = 1500
    est = np.array([app.run(data, rng=rng).estimates[0]["f_hat"] for _ in range(R)])
    n1, n2 = 200, 200
    w = (16 / n1) / (16 / n1 + 25 / n2)  # sets hold <= 4 items: no truncation
    assert app.run(data, rng=0).estimates[0]["w"] == pytest.approx(w)
    sd = est.std(axis=0, ddof=1)
    assert np.all(np.abs(est.mean(axis=0) - f) <= Z * sd / np.sqrt(R))


def test_combination_rules() -> None:
    f1, f2 = np.array([0.2, 0.4]), np.array([0.3, 0.1])
    out, w = combine_estimates(f1, f2, "thesis", 50, 60, 100, 100)
    assert w == pytest.approx(49 / 50) and np.allclose(out, (f1 + 49 * f2) / 50)
    out, w = combine_estimates(f1, f2, "ivw", 50, 60, 100, 100)
    assert w == pytest.approx(2500 / (2500 + 3600))  # 0.41, docs/math.md §12.4
    out, w = combine_estimates(f1, f2, "phase2", 50, 60, 100, 100)
    assert w == 1.0 and np.allclose(out, f2)


@pytest.mark.parametrize("combine", ["ivw", "thesis", "phase2"])
@pytest.mark.parametrize("output", ["all", "candidates"])
def test_gfim_finds_planted_items(combine: str, output: str) -> None:
    data = planted_sets(6000, d=64, planted=(3, 9, 40), share=0.6, background=4, rng=1)
    app = GFIM(3, OracleSpec("SH", eps=4.0), GFIMParams(combine=combine, output=output))
    res = app.run(data, rng=2)
    assert sorted(res.topk[0].items.tolist()) == [3, 9, 40]
    assert evaluate(res, data)["precision_avg"] == 1.0
    rec = res.params
    assert rec["combine"] == combine and rec["output"] == output and rec["k_max"] == 6
    assert rec["L2"] == 6 and rec["ell"] == int(np.quantile(data.lengths, 0.9, method="higher"))


def test_gfim_global_codes_and_min_padding() -> None:
    """Phase 2 by global id (SH over d + 1 columns) and L2 = min(k_max, ℓ): same answer."""
    data = planted_sets(6000, d=64, planted=(3, 9, 40), share=0.6, background=4, rng=1)
    prm = GFIMParams(phase2_codes="global", phase2_pad="min", k_max=10)
    res = GFIM(3, OracleSpec("SH", eps=4.0), prm).run(data, rng=2)
    assert sorted(res.topk[0].items.tolist()) == [3, 9, 40]
    ell = res.params["ell"]
    assert res.params["L2"] == min(10, ell) and res.params["phase2_codes"] == "global"
    assert res.mining.diagnostics[0]["phase2"]["fo_domain"] == 65


def test_ldpminer_sh_finds_planted_items() -> None:
    data = planted_sets(6000, d=64, planted=(3, 9, 40), share=0.6, background=4, rng=1)
    for output in ("phase2", "thesis"):
        res = LDPMinerSH(3, OracleSpec("SH", eps=4.0), output=output).run(data, rng=2)
        assert sorted(res.topk[0].items.tolist()) == [3, 9, 40]
        assert res.params["per_phase_oracle"] == {
            "protocol": "SH",
            "longitudinal": False,
            "eps": 2.0,
        }


def test_gfim_reports_engine_matches_planted() -> None:
    """The real client/server path (perturb + FWHT aggregation) on a small population."""
    data = planted_sets(3000, d=30, planted=(7, 20), share=0.7, background=2, rng=5)
    res = GFIM(2, OracleSpec("SH", eps=3.0)).run(data, rng=6, engine="reports")
    assert sorted(res.topk[0].items.tolist()) == [7, 20]


@pytest.mark.parametrize("chain", ["L-SH", "OLOLOHA", "L-OSUE"])
def test_longitudinal_gfim_budget(chain: str) -> None:
    """Fixed groups, a chain over [d] ∪ {⊥}: L-SH spends at most min(t·ε1, 2·ε∞) per user."""
    base = planted_sets(4000, d=20, planted=(2, 11), share=0.7, background=3, rng=7)
    tau, eps_perm, eps_1 = 6, 4.0, 2.0
    data = changing_population(base, tau, 0.5, rng=8)
    spec = OracleSpec(chain, eps_perm=eps_perm, eps_1=eps_1)
    res = GFIM(2, spec).run(data, rng=9, engine="per-user")
    assert len(res.topk) == tau
    budget = res.budget
    assert np.all(budget["reports"] == tau)
    if chain == "L-SH":  # a user's hash maps every value to ±1: at most two memos
        assert budget["memos"].max() <= 2
    # one chain per user (fixed groups): min(τ·ε1, memos·ε∞) of math §4
    np.testing.assert_allclose(
        budget["epsilon"], np.minimum(tau * eps_1, budget["memos"] * eps_perm), rtol=1e-9
    )
    assert all(sorted(top.items.tolist()) == [2, 11] for top in res.topk)


def test_synthetic_population() -> None:
    pmf = item_probabilities("laplace")
    assert pmf.sum() == pytest.approx(1.0) and pmf.argmax() == 499
    data = synthetic_sets(3000, "normal", rng=0)
    assert np.all(data.lengths == 50) and data.domain.size == 1000
    f = np.bincount(data.items, minlength=1000) / data.n
    # The mode (value 500 = id 499) is held by a large share; the tails by almost nobody.
    assert f[499] > 0.35 and f[:300].sum() == 0


def test_bad_input() -> None:
    data = planted_sets(200, d=16, planted=(1,), rng=0)
    with pytest.raises(ValueError, match="k_max"):
        GFIM(5, OracleSpec("SH", eps=1.0), GFIMParams(k_max=3))
    with pytest.raises(ValueError, match="outside the item domain"):
        GFIM(1, OracleSpec("SH", eps=1.0)).run(data, n_items=8)
    with pytest.raises(ValueError, match="'L'"):
        sampling_shist(10, 0, 1.0)
    with pytest.raises(ValueError, match="'ell'"):
        GFIMParams(ell=0)
    empty = SetData.from_lists([[] for _ in range(10)], 5)
    with pytest.raises(ValueError, match="empty"):
        GFIM(1, OracleSpec("SH", eps=1.0)).run(empty)
    with pytest.raises(ValueError, match="'combine'"):
        GFIMParams(combine="average")
    with pytest.raises(ValueError, match="'phase2_pad'"):
        GFIMParams(phase2_pad="max")
    with pytest.raises(ValueError, match="'size'"):
        synthetic_sets(10, size=0)
    with pytest.raises(ValueError, match="'k'"):
        GFIM(20, OracleSpec("SH", eps=1.0)).run(data)
