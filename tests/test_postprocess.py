"""Tests for longldp.postprocess: exact hand-made cases, properties, and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm as normal

from longldp import postprocess as pp
from longldp.postprocess import ChannelInfo

# Deterministic and fast: a fixed example sequence, no example database written to disk.
PROPERTY = settings(max_examples=150, derandomize=True, database=None, deadline=None)

ATOL = 1e-9


def grr_channel(k: int, eps: float, n: int = 1000) -> ChannelInfo:
    """GRR over k values: P1 = e^ε/(e^ε+k−1), P0 = 1/(e^ε+k−1) (docs/math.md §2.1)."""
    e = math.exp(eps)
    return ChannelInfo(P1=e / (e + k - 1), P0=1.0 / (e + k - 1), n=n, grr_type=True)


def grr_matrix(k: int, P1: float, P0: float) -> np.ndarray:
    A = np.full((k, k), P0)
    np.fill_diagonal(A, P1)
    return A


# Strategies -----------------------------------------------------------------------------------

values = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False, width=64)
vectors = st.lists(values, min_size=1, max_size=40).map(np.array)
totals = st.floats(0.05, 20.0, allow_nan=False, allow_infinity=False)

ALWAYS_CONSISTENT = ["norm-mul", "norm-sub", "algorithm-1"]


# ChannelInfo ----------------------------------------------------------------------------------


def test_channel_approx_variance_matches_design_formula() -> None:
    # GRR, k = 4, e^ε = 3: P1 = 1/2, P0 = 1/6; V* = (1/6)(5/6) / (1000 (1/3)^2) = 1/800.
    ch = ChannelInfo(P1=0.5, P0=1 / 6, n=1000)
    assert ch.approx_variance == pytest.approx(1 / 800, rel=1e-14)
    assert ch.grr_type is False


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"P1": 0.3, "P0": 0.3, "n": 10}, "P1"),
        ({"P1": 0.2, "P0": 0.3, "n": 10}, "P1"),
        ({"P1": 1.5, "P0": 0.3, "n": 10}, "P1"),
        ({"P1": 0.5, "P0": -0.1, "n": 10}, "P0"),
        ({"P1": 0.5, "P0": float("nan"), "n": 10}, "P0"),
        ({"P1": 0.5, "P0": 0.1, "n": 0}, "n"),
        ({"P1": 0.5, "P0": 0.1, "n": 2.5}, "n"),
        ({"P1": 0.5, "P0": 0.1, "n": 10, "grr_type": "yes"}, "grr_type"),
    ],
)
def test_channel_rejects_bad_fields(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}'"):
        ChannelInfo(**kwargs)


# Registry -------------------------------------------------------------------------------------


def test_method_names_are_exactly_the_documented_ones() -> None:
    assert set(pp.METHODS) == {
        "base-pos",
        "norm",
        "norm-mul",
        "norm-cut",
        "norm-sub",
        "base-cut",
        "algorithm-1",
        "ibu",
        "mle",
    }


@pytest.mark.parametrize("spelling", ["norm-sub", "NORM-SUB", "norm_sub", "Norm_Sub", " norm-sub "])
def test_get_method_is_case_insensitive_and_accepts_underscores(spelling: str) -> None:
    assert pp.get_method(spelling) is pp.norm_sub


def test_get_method_unknown_name_lists_allowed_names() -> None:
    with pytest.raises(ValueError, match="'name'") as info:
        pp.get_method("norm-div")
    for name in pp.METHODS:
        assert repr(name) in str(info.value)


def test_apply_dispatches_by_name_callable_and_none() -> None:
    f = np.array([0.75, 0.5, -0.5, 0.25])
    np.testing.assert_array_equal(pp.apply("Norm_Mul", f), pp.norm_mul(f))
    np.testing.assert_array_equal(pp.apply(pp.norm_cut, f, 1.0), pp.norm_cut(f))
    unchanged = pp.apply(None, [1, 2, -3])
    assert unchanged.dtype == np.float64
    np.testing.assert_array_equal(unchanged, [1.0, 2.0, -3.0])
    with pytest.raises(ValueError, match="'method'"):
        pp.apply("no-such-method", f)
    with pytest.raises(ValueError, match="'method'"):
        pp.apply(3, f)


def test_apply_protects_input_from_a_callable_that_writes() -> None:
    def vandal(est: np.ndarray, total: float, channel: ChannelInfo | None) -> np.ndarray:
        est[:] = 0.0
        return est

    f = np.array([0.2, 0.8])
    out = pp.apply(vandal, f)
    np.testing.assert_array_equal(f, [0.2, 0.8])
    np.testing.assert_array_equal(out, [0.0, 0.0])


# Exact hand-made cases --------------------------------------------------------------------------

F = [0.75, 0.5, -0.5, 0.25]  # sum 1, positive sum 1.5

HAND_CASES = [
    ("base-pos", F, 1.0, [0.75, 0.5, 0.0, 0.25]),
    ("norm", [0.6, 0.3, -0.2, 0.1], 1.0, [0.65, 0.35, -0.15, 0.15]),  # shift by (1 - 0.8)/4
    ("norm", F, 1.0, F),  # already sums to the total: identity
    ("norm", [1.0, 2.0], 6.0, [2.5, 3.5]),
    ("norm-mul", F, 1.0, [0.5, 1 / 3, 0.0, 1 / 6]),  # clip, then × 1/1.5
    ("norm-mul", [-0.1, 0.0, -0.2], 1.0, [1 / 3, 1 / 3, 1 / 3]),  # nothing positive: uniform
    ("norm-mul", [0.25, 0.25, -0.5], 2.0, [1.0, 1.0, 0.0]),
    ("norm-cut", F, 1.0, [0.75, 0.0, 0.0, 0.0]),  # 0.75 + 0.5 > 1
    ("norm-cut", [0.5, 0.25, 0.25, 0.125, -0.125], 1.0, [0.5, 0.25, 0.25, 0.0, 0.0]),
    ("norm-cut", [0.5, 0.375, 0.375, -0.25], 1.0, [0.5, 0.0, 0.0, 0.0]),  # ties cut together
    ("norm-cut", [0.25, 0.25, -0.5], 1.0, [0.25, 0.25, 0.0]),  # positive sum < total: Base-Pos
    ("norm-cut", [1.25, -0.25], 1.0, [0.0, 0.0]),  # the largest alone exceeds the total
    ("norm-sub", F, 1.0, [7 / 12, 1 / 3, 0.0, 1 / 12]),  # θ = 1/6
    ("norm-sub", [0.5, 0.25, 0.0, -0.25], 1.0, [7 / 12, 1 / 3, 1 / 12, 0.0]),  # θ = −1/12
    ("norm-sub", [1.0, 0.5, 0.125, -0.5], 1.0, [0.75, 0.25, 0.0, 0.0]),  # θ = 1/4
    ("norm-sub", [-1.0, -2.0, -3.0], 3.0, [2.0, 1.0, 0.0]),  # θ = −3
    ("norm-sub", [0.3], 1.0, [1.0]),
    ("algorithm-1", F, 1.0, [7 / 12, 1 / 3, 0.0, 1 / 12]),  # one pass, δ = −1/6
    # two passes: δ = −5/24 drives 0.125 negative; clip; δ = −1/24 on the two left.
    ("algorithm-1", [1.0, 0.5, 0.125, -0.5], 1.0, [0.75, 0.25, 0.0, 0.0]),
    # first δ = +1/8 goes only to the positive entries; the 0 stays 0 (unlike Norm-Sub).
    ("algorithm-1", [0.5, 0.25, 0.0, -0.25], 1.0, [0.625, 0.375, 0.0, 0.0]),
    ("algorithm-1", [-0.1, 0.0, -0.2], 1.0, [1 / 3, 1 / 3, 1 / 3]),  # nothing positive
    ("algorithm-1", [400.0, 700.0, -100.0], 1000.0, [350.0, 650.0, 0.0]),  # counts, n = 1000
]


@pytest.mark.parametrize(("method", "estimates", "total", "expected"), HAND_CASES)
def test_hand_made_cases(method: str, estimates: list, total: float, expected: list) -> None:
    out = pp.get_method(method)(np.array(estimates), total)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)


def test_base_cut_hand_case() -> None:
    ch = ChannelInfo(P1=0.5, P0=1 / 6, n=1000)
    T = normal.ppf(1 - 0.05 / 4) * math.sqrt(1 / 800)  # ≈ 0.07925
    f = np.array([0.5, T * (1 + 1e-9), T * (1 - 1e-9), -0.05])
    np.testing.assert_array_equal(pp.base_cut(f, channel=ch), [0.5, f[1], 0.0, 0.0])


def test_ibu_hand_cases() -> None:
    ch = ChannelInfo(P1=0.5, P0=0.25, n=100, grr_type=True)  # GRR, k = 3, e^ε = 2
    # A valid distribution with exact observed frequencies is a fixed point of the update.
    np.testing.assert_allclose(pp.ibu([0.5, 0.3, 0.2], channel=ch), [0.5, 0.3, 0.2], atol=1e-12)
    np.testing.assert_allclose(pp.ibu([0.5, 0.3, 0.2], 2.0, ch), [1.0, 0.6, 0.4], atol=1e-12)
    # k = 2: an estimate above 1 has its maximum-likelihood point at the vertex (1, 0).
    two = grr_channel(2, 0.5)
    np.testing.assert_allclose(pp.ibu([1.2, -0.2], channel=two), [1.0, 0.0], atol=1e-6)


# Base-Cut ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "eps", "n", "alpha"), [(4, 1.0, 1000, 0.05), (50, 0.5, 20_000, 0.01)]
)
def test_base_cut_zeroes_below_threshold_and_keeps_the_rest(
    k: int, eps: float, n: int, alpha: float
) -> None:
    ch = grr_channel(k, eps, n)
    T = normal.ppf(1 - alpha / k) * math.sqrt(ch.P0 * (1 - ch.P0) / (n * (ch.P1 - ch.P0) ** 2))
    f = np.random.default_rng(7).uniform(-3 * T, 3 * T, size=k)
    out = pp.base_cut(f, channel=ch, alpha=alpha)
    below = f < T
    assert below.any() and (~below).any()
    np.testing.assert_array_equal(out[below], 0.0)
    np.testing.assert_array_equal(out[~below], f[~below])


def test_base_cut_needs_a_channel() -> None:
    with pytest.raises(ValueError, match="'channel'"):
        pp.base_cut([0.5, 0.5])
    with pytest.raises(ValueError, match="'channel'"):
        pp.apply("base-cut", [0.5, 0.5])


@pytest.mark.parametrize("alpha", [0.0, -0.1, 0.6, float("nan"), True])
def test_base_cut_rejects_bad_alpha(alpha: float) -> None:
    with pytest.raises(ValueError, match="'alpha'"):
        pp.base_cut([0.5, 0.5], channel=ChannelInfo(0.5, 0.25, 10), alpha=alpha)


# Consistency properties -------------------------------------------------------------------------


@pytest.mark.parametrize("method", ALWAYS_CONSISTENT)
@PROPERTY
@given(f=vectors, total=totals)
def test_consistent_methods_are_nonnegative_and_sum_to_total(
    method: str, f: np.ndarray, total: float
) -> None:
    out = pp.get_method(method)(f, total)
    assert out.shape == f.shape
    assert out.min() >= 0.0
    assert out.sum() == pytest.approx(total, abs=ATOL)


@PROPERTY
@given(f=vectors, total=totals)
def test_norm_sums_to_total(f: np.ndarray, total: float) -> None:
    out = pp.norm(f, total)
    assert out.sum() == pytest.approx(total, abs=ATOL)
    np.testing.assert_allclose(np.diff(out), np.diff(f), atol=ATOL)  # one common shift


@PROPERTY
@given(f=vectors)
def test_base_pos_clips_only_negatives(f: np.ndarray) -> None:
    out = pp.base_pos(f)
    np.testing.assert_array_equal(out, np.where(f < 0, 0.0, f))


@PROPERTY
@given(f=vectors, total=totals)
def test_norm_cut_keeps_a_maximal_top_set_within_total(f: np.ndarray, total: float) -> None:
    out = pp.norm_cut(f, total)
    kept = out > 0
    assert out.min() >= 0.0
    assert out.sum() <= total + ATOL
    np.testing.assert_array_equal(out[kept], f[kept])  # no rescaling
    cut = (f > 0) & ~kept
    if cut.any():
        # every kept estimate beats every cut one, and the next tie group would not fit
        assert not kept.any() or f[kept].min() > f[cut].max()
        top_cut = f[cut].max()
        assert out.sum() + top_cut * np.count_nonzero(f == top_cut) > total
    else:
        np.testing.assert_array_equal(out, np.maximum(f, 0.0))


# Norm-Sub is the Euclidean projection ----------------------------------------------------------


def projection_by_root_finding(f: np.ndarray, total: float) -> np.ndarray:
    """Independent projection: solve Σ max(f − θ, 0) = total for θ by bracketing (Brent)."""

    def excess(theta: float) -> float:
        return float(np.maximum(f - theta, 0.0).sum() - total)

    lo = f.min() - total - 1.0  # every term ≥ total + 1 > 0: excess > 0
    hi = f.max()  # every term is 0: excess = −total < 0
    theta = brentq(excess, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return np.maximum(f - theta, 0.0)


@PROPERTY
@given(f=vectors, total=totals)
def test_norm_sub_is_the_projection_onto_the_scaled_simplex(f: np.ndarray, total: float) -> None:
    x = pp.norm_sub(f, total)
    np.testing.assert_allclose(x, projection_by_root_finding(f, total), atol=1e-9)

    # KKT of min ½‖x − f‖² s.t. x ≥ 0, Σx = total: f − x = θ on the support, f ≤ θ off it.
    assert x.min() >= 0.0
    assert x.sum() == pytest.approx(total, abs=ATOL)
    top = int(np.argmax(x))
    theta = f[top] - x[top]
    support = x > 0
    np.testing.assert_allclose(f[support] - x[support], theta, atol=1e-9)
    assert np.all(f[~support] <= theta + 1e-9)


@PROPERTY
@given(f=vectors, total=totals, seed=st.integers(0, 2**32 - 1))
def test_norm_sub_is_closer_than_other_feasible_points(
    f: np.ndarray, total: float, seed: int
) -> None:
    x = pp.norm_sub(f, total)
    others = np.random.default_rng(seed).dirichlet(np.ones(f.size), size=20) * total
    best = np.linalg.norm(x - f)
    assert np.all(np.linalg.norm(others - f, axis=1) >= best - 1e-9)


# Algorithm 1 ------------------------------------------------------------------------------------


@PROPERTY
@given(f=vectors, fraction=st.floats(0.01, 1.0))
def test_algorithm_1_equals_norm_sub_when_first_shift_is_nonpositive(
    f: np.ndarray, fraction: float
) -> None:
    positive_sum = np.maximum(f, 0.0).sum()
    assume(positive_sum > 1e-3)
    total = fraction * positive_sum  # first shift (total − positive_sum)/|P| ≤ 0
    np.testing.assert_allclose(pp.algorithm_1(f, total), pp.norm_sub(f, total), atol=1e-9)


@PROPERTY
@given(f=vectors, total=totals)
def test_algorithm_1_with_positive_first_shift_only_lifts_positive_entries(
    f: np.ndarray, total: float
) -> None:
    positive = f > 0
    assume(positive.any() and np.maximum(f, 0.0).sum() < total)
    out = pp.algorithm_1(f, total)
    np.testing.assert_array_equal(out[~positive], 0.0)
    delta = (total - f[positive].sum()) / np.count_nonzero(positive)
    np.testing.assert_allclose(out[positive], f[positive] + delta, atol=1e-9)


def test_algorithm_1_rejects_bad_tol() -> None:
    with pytest.raises(ValueError, match="'tol'"):
        pp.algorithm_1([0.5, 0.5], tol=0.0)


# IBU --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "eps"), [(2, 0.5), (3, 1.0), (5, 1.0), (10, 2.0), (32, 3.0), (8, 0.5)]
)
def test_ibu_recovers_truth_from_expected_observed_frequencies(k: int, eps: float) -> None:
    ch = grr_channel(k, eps)
    f = np.random.default_rng(k).dirichlet(np.full(k, 5.0))
    obs = grr_matrix(k, ch.P1, ch.P0) @ f
    est = (obs - ch.P0) / (ch.P1 - ch.P0)
    np.testing.assert_allclose(pp.ibu(est, channel=ch), f, atol=1e-6)


def test_ibu_works_for_an_lgrr_like_channel() -> None:
    # Any P1 > P0 with P1 + (k−1) P0 = 1 is GRR-type, e.g. a composed L-GRR chain.
    k, P1 = 6, 0.3
    ch = ChannelInfo(P1=P1, P0=(1 - P1) / (k - 1), n=500, grr_type=True)
    f = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    est = (grr_matrix(k, ch.P1, ch.P0) @ f - ch.P0) / (ch.P1 - ch.P0)
    np.testing.assert_allclose(pp.apply("IBU", est, 1.0, ch), f, atol=1e-6)


@PROPERTY
@given(data=st.data(), k=st.integers(2, 20), eps=st.floats(0.2, 4.0), total=totals)
def test_ibu_output_is_a_scaled_distribution(
    data: st.DataObject, k: int, eps: float, total: float
) -> None:
    ch = grr_channel(k, eps)
    # Estimates of a real GRR run: observed frequencies on the simplex, mapped through f̂.
    weights = data.draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k).map(np.array))
    assume(weights.sum() > 1e-3)
    est = (weights / weights.sum() - ch.P0) / (ch.P1 - ch.P0)
    out = pp.ibu(est, total, ch, max_iter=200)
    assert out.min() >= 0.0
    assert out.sum() == pytest.approx(total, abs=ATOL)


def test_ibu_accepts_rounding_level_negative_observations() -> None:
    ch = ChannelInfo(P1=0.5, P0=0.25, n=100, grr_type=True)
    edge = -ch.P0 / (ch.P1 - ch.P0)  # obs = 0 exactly
    out = pp.ibu([edge - 1e-14, 1.0, 1.0 - edge], channel=ch)
    assert out.min() >= 0.0 and out.sum() == pytest.approx(1.0)


def test_ibu_rejects_materially_negative_observations() -> None:
    ch = ChannelInfo(P1=0.5, P0=0.25, n=100, grr_type=True)
    with pytest.raises(ValueError, match="'estimates'"):
        pp.ibu([-5.0, 3.0, 3.0], channel=ch)
    # Noiseless channel (P0 = 0): all-zero estimates mean no report was observed at all.
    with pytest.raises(ValueError, match="'estimates'"):
        pp.ibu([0.0, 0.0], channel=ChannelInfo(P1=1.0, P0=0.0, n=10, grr_type=True))


def test_ibu_noiseless_channel_returns_the_observed_distribution() -> None:
    ch = ChannelInfo(P1=1.0, P0=0.0, n=10, grr_type=True)
    np.testing.assert_allclose(pp.ibu([0.7, 0.0, 0.3], channel=ch), [0.7, 0.0, 0.3], atol=1e-15)


@pytest.mark.parametrize(
    "channel",
    [
        None,
        ChannelInfo(P1=0.5, P0=0.25, n=100),  # grr_type=False
        ChannelInfo(P1=0.75, P0=0.25, n=100, grr_type=True),  # rows do not sum to 1 (k = 3)
        "GRR",
    ],
)
def test_ibu_needs_a_grr_type_channel(channel: object) -> None:
    with pytest.raises(ValueError, match="'channel'"):
        pp.ibu([0.5, 0.3, 0.2], channel=channel)  # type: ignore[arg-type]


def test_ibu_non_grr_message_says_why() -> None:
    with pytest.raises(ValueError, match="GRR-type"):
        pp.ibu([0.5, 0.5], channel=ChannelInfo(P1=0.75, P0=0.25, n=10))


@pytest.mark.parametrize(("kwargs", "name"), [({"max_iter": 0}, "max_iter"), ({"tol": 0.0}, "tol")])
def test_ibu_rejects_bad_iteration_settings(kwargs: dict, name: str) -> None:
    ch = ChannelInfo(P1=0.5, P0=0.25, n=100, grr_type=True)
    with pytest.raises(ValueError, match=f"'{name}'"):
        pp.ibu([0.5, 0.3, 0.2], channel=ch, **kwargs)


# Input validation and purity --------------------------------------------------------------------

# A GRR channel over k = 4 (P1 + 3 P0 = 1) so that every method, IBU included, accepts it.
CH4 = ChannelInfo(P1=0.4, P0=0.2, n=1000, grr_type=True)
ALL = sorted(pp.METHODS)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize(
    "bad",
    [
        [0.5, float("nan"), 0.2, 0.1],
        [0.5, float("inf"), 0.2, 0.1],
        [0.5, -float("inf"), 0.2, 0.1],
        [[0.5, 0.5], [0.2, 0.1]],
        [],
        ["a", "b", "c", "d"],
        [0.5 + 1j, 0.2, 0.2, 0.1],
    ],
)
def test_bad_estimates_are_rejected(method: str, bad: list) -> None:
    with pytest.raises(ValueError, match="'estimates'"):
        pp.apply(method, np.array(bad), 1.0, CH4)


@pytest.mark.parametrize("method", [*ALL, None])
@pytest.mark.parametrize("total", [0.0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_total_is_rejected(method: str | None, total: object) -> None:
    with pytest.raises(ValueError, match="'total'"):
        pp.apply(method, [0.4, 0.3, 0.2, 0.1], total, CH4)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ALL)
def test_wrong_channel_object_is_rejected(method: str) -> None:
    with pytest.raises(ValueError, match="'channel'"):
        pp.apply(method, [0.4, 0.3, 0.2, 0.1], 1.0, {"P1": 0.4})  # type: ignore[arg-type]


@pytest.mark.parametrize("method", [*ALL, None])
def test_input_is_never_modified(method: str | None) -> None:
    f = np.array([0.45, 0.35, -0.05, 0.25])
    original = f.copy()
    out = pp.apply(method, f, 1.0, CH4)
    np.testing.assert_array_equal(f, original)
    assert out.dtype == np.float64
    assert not np.shares_memory(out, f)
    out[:] = 123.0  # the result is the caller's to change, without touching the input
    np.testing.assert_array_equal(f, original)


@pytest.mark.parametrize("method", ALL)
def test_read_only_and_integer_inputs_are_accepted(method: str) -> None:
    f = np.array([2, 1, 0, 1])
    f.flags.writeable = False
    out = pp.apply(method, f, 4.0, ChannelInfo(P1=0.4, P0=0.2, n=1000, grr_type=True))
    assert out.shape == (4,) and np.all(np.isfinite(out))
