"""Bad input to the numeric family: one ``ValueError`` line naming the owner, the argument, what
is allowed and what was given; nothing clipped unless asked, and then counted (math §20.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.audit import audit_game, exact_epsilons
from longldp.cli import app
from longldp.data import numeric as data_numeric
from longldp.privacy import numeric as nm
from longldp.protocols import numeric as num
from longldp.protocols.numeric import chains, sw

RNG = np.random.default_rng(0)


def one_line(err: pytest.ExceptionInfo[ValueError], *fragments: str) -> None:
    msg = str(err.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, (f, msg)


@pytest.mark.parametrize(
    ("lo", "hi", "fragment"),
    [
        (1.0, 1.0, "non-empty range"),
        (5.0, 1.0, "non-empty range"),
        (math.nan, 1.0, "'lo' must be a finite real"),
        (0.0, math.inf, "'hi' must be a finite real"),
        ("0", 1.0, "'lo' must be a finite real"),
        (True, 2.0, "'lo' must be a finite real"),
        (-1e308, 1e308, "width is a finite float"),
    ],
)
def test_bad_range(lo, hi, fragment):
    with pytest.raises(ValueError) as err:
        num.perturb("PM", [0.5], 1.0, RNG, lo=lo, hi=hi)
    one_line(err, "PM", fragment)


@pytest.mark.parametrize("mechanism", list(num.KERNELS))
@pytest.mark.parametrize("eps", [0, -1.0, math.nan, math.inf, 31.0, "1"])
def test_bad_eps(mechanism, eps):
    with pytest.raises(ValueError) as err:
        num.perturb(mechanism, [0.5], eps, RNG, lo=0, hi=1)
    one_line(err, mechanism, "'eps'")


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ([0.1, math.nan], "must be finite (no NaN or inf)"),
        ([math.inf], "must be finite (no NaN or inf)"),
        ([-math.inf, 0.2], "must be finite (no NaN or inf)"),
        (np.array([True, False]), "dtype bool"),
        (np.array(["a"]), "dtype <U1"),
        (np.array([1 + 1j]), "dtype complex128"),
    ],
)
def test_bad_values(values, fragment):
    for clip in (False, True):  # NaN and ±inf are refused even when clipping is asked for
        with pytest.raises(ValueError) as err:
            num.perturb("Duchi", values, 1.0, RNG, lo=0, hi=1, clip=clip)
        one_line(err, "Duchi", "'values'", fragment)


def test_outside_refused_unless_clip_then_counted():
    vals = np.array([-3.0, 0.0, 5.0, 10.0, 11.0, 10.5])
    with pytest.raises(ValueError) as err:
        num.perturb("SW", vals, 1.0, RNG, lo=0, hi=10)
    one_line(err, "SW", "[0, 10]", "clipping", "-3.0 and 2 more outside")
    got = num.perturb("SW", vals, 1.0, RNG, lo=0, hi=10, clip=True)
    assert got.clipped == 3
    assert got.reports.shape == vals.shape
    exact = num.perturb("SW", vals[1:4], 1.0, RNG, lo=0, hi=10)
    assert exact.clipped == 0
    unit = num.NumericRange(0, 10).to_unit(vals, clip=True)
    np.testing.assert_array_equal(unit.t, [0.0, 0.0, 0.5, 1.0, 1.0, 1.0])


def test_unknown_mechanism_and_empty_reports():
    with pytest.raises(ValueError) as err:
        num.perturb("Gaussian", [0.1], 1.0, RNG, lo=0, hi=1)
    one_line(err, "'mechanism'", "'laplace'", "Gaussian")
    with pytest.raises(ValueError) as err:
        num.estimate_mean("PM", np.array([]), 1.0, lo=0, hi=1)
    one_line(err, "PM", "'reports'", "at least one report")


def test_chain_budgets():
    with pytest.raises(ValueError) as err:  # a PM memo caps one report at ε∞/2
        nm.chain_budgets("PM", 2.0, 1.0)
    one_line(err, "L-PM", "'eps_1'", "(0, 1)")
    with pytest.raises(ValueError) as err:
        nm.chain_budgets("Duchi", 1.0, 1.0)
    one_line(err, "L-Duchi", "'eps_1'")
    with pytest.raises(ValueError) as err:
        nm.flip_report_epsilon(1.0, 0.5)
    one_line(err, "L-1BitMean", "'gamma'", "[0, 0.5)")
    state = chains.new_memo(3, 4, RNG)
    with pytest.raises(ValueError) as err:
        chains.perturb("PM", np.zeros(4), state, 2.0, 0.5, RNG)
    one_line(err, "'t'", "shape (3,)", "shape (4,)")
    with pytest.raises(ValueError) as err:
        nm.rounding_keys([0.5], 0, [0.1])
    one_line(err, "rounding_keys", "'s'")


def test_sw_reports_outside_refused():
    b = nm.sw_params(1.0).b
    with pytest.raises(ValueError) as err:
        sw.report_counts([0.5, 1 + b + 0.5], 1.0, 16)
    one_line(err, "SW", "'reports'")


def test_data_bad_names():
    with pytest.raises(ValueError) as err:
        data_numeric.numeric_values("adults", "age")
    one_line(err, "'dataset'", "adult")
    with pytest.raises(ValueError) as err:
        data_numeric.numeric_values("adult", "salary")
    one_line(err, "'attribute'", "hours-per-week")


def test_bundled_numeric_within_declared_ranges():
    """Every bundled numeric attribute lies in its declared range, which is wider than or equal
    to the data's (the ranges are public bounds); the row counts match the coded tables."""
    from longldp.data import load

    rows = {"adult": 45_222, "census-income": 299_285, "lending-club": 9_857}
    attrs = data_numeric.numeric_attributes()
    assert {a.dataset for a in attrs} == set(rows)
    for a in attrs:
        x = data_numeric.numeric_values(a.dataset, a.name)
        assert x.size == a.n == rows[a.dataset]
        assert a.lo <= x.min() and x.max() <= a.hi
        assert data_numeric.numeric_range(a.dataset, a.name) == (a.lo, a.hi)
    # same rows as the binned table: funded_amnt's bins recomputed from the raw amounts
    coded = load("lending-club")
    raw = data_numeric.numeric_values("lending-club", "funded_amnt")
    np.testing.assert_array_equal(
        np.minimum(np.floor(raw / 1000), 39).astype(int), coded.columns["funded_amnt"]
    )


@pytest.mark.parametrize(
    ("name", "params"),
    [("PM", {"eps": 1.0}), ("Duchi", {"eps": 1.0}), ("L-PM", {"eps_perm": 2.0, "eps_1": 0.8})],
)
def test_the_game_refuses_numbers_in_one_line(name, params):
    """The distinguishing game plays codes or strings: a numeric protocol is refused with the
    audits that apply (the exact channel, the black box over its wire reports), by the
    library and by ``longldp audit`` (one ``error:`` line, exit 2), never an AttributeError."""
    proto = ll.protocol(name, lo=0.0, hi=1.0, **params)
    with pytest.raises(ValueError) as err:
        audit_game(proto, 100)
    one_line(err, name, "not numbers", "--blackbox")
    # the exact (ideal) channel's ε; the claim adds the float samplers' slack (math §20.12)
    claim = proto.single_report_epsilon()
    assert exact_epsilons(proto).single == pytest.approx(claim - proto.report_slack(), abs=1e-9)
    budget = [f"--{k.replace('_', '-')}={v}" for k, v in params.items()]
    result = CliRunner().invoke(
        app, ["audit", name, *budget, "--param", "lo=0", "--param", "hi=1", "--trials", "100"]
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error:") and "not numbers" in result.output
