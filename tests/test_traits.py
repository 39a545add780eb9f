"""The traits of the mechanism base (docs/design.md §2.2–§2.5): domains, estimands, rounds and
plans, accounting, report kinds, and the registry's check that every class declares them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import longldp as ll
import registry_cases
from longldp import privacy
from longldp.audit.channels import exact_epsilons, exact_lifetime_epsilon
from longldp.protocols import (
    Categorical,
    ContinuousReport,
    Estimand,
    Interval,
    ItemSpace,
    ReportKind,
    Rounds,
    Strings,
)
from longldp.protocols._registry import check_class
from longldp.simulate.engines import ENGINES, engines_for

# ---------------------------------------------------------------------- input domains


def test_interval_refuses_nan_inf_and_outside_unless_clipping_is_asked_and_counted():
    dom = Interval(-1.0, 1.0)
    assert np.array_equal(dom.check("M", [0.5, -1.0, 1]), [0.5, -1.0, 1.0])
    for bad in ([np.nan], [np.inf], [-np.inf]):
        with pytest.raises(ValueError, match="finite"):
            dom.check("M", bad)
    with pytest.raises(ValueError, match=r"must lie in \[-1, 1\].*got 1.5 and 1 more"):
        dom.check("M", [0.0, 1.5, -3.0])
    with pytest.raises(ValueError, match="real numbers"):
        dom.check("M", np.array(["a"]))
    clipped, count = Interval(-1.0, 1.0, clip=True).clip_values("M", [0.0, 1.5, -3.0])
    assert count == 2 and np.array_equal(clipped, [0.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="non-empty range lo < hi"):
        Interval(1.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        Interval(0.0, math.inf)
    assert np.array_equal(dom.as_inputs([0, 1, 2]), [-1.0, 1.0, -1.0])


def test_item_space_takes_b_bit_integers_or_bytes():
    dom = ItemSpace(bits=32)
    assert dom.size == 2**32 and dom.describe() == "items[2^32]"
    assert dom.check("M", [0, 2**32 - 1]).dtype == np.uint64
    with pytest.raises(ValueError, match=r"\[0, 2\^32\)"):
        dom.check("M", [2**32])
    with pytest.raises(ValueError, match="integers"):
        dom.check("M", [0.5])
    words = ItemSpace()
    assert words.size is None and words.check("M", [b"a", "b"]) == [b"a", "b"]
    with pytest.raises(ValueError, match="strings or bytes"):
        words.check("M", [1])


def test_categorical_and_strings_domains_are_what_the_protocols_check_with():
    proto = ll.protocol("GRR", k=4, eps=1.0)
    assert proto.domain == Categorical(4) and proto.domain_size == 4
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        proto.perturb([4], rng=0)
    bloom = ll.protocol("RAPPOR", k=8, h=2, m=2, f=0.5, p=0.25, q=0.75)
    assert bloom.domain == Strings() and bloom.domain_size is None
    assert bloom.as_inputs([3]) == ["value-3"]
    boolean = ll.protocol("RAPPOR-boolean", m=2, f=0.5, p=0.25, q=0.75)
    assert boolean.domain.check("B", np.array([True, False])).tolist() == [1, 0]


@pytest.mark.parametrize("cls", ll.protocols.PROTOCOL_CLASSES, ids=lambda c: c.name)
def test_each_instance_domain_is_of_its_class_domain_type(cls):
    proto = registry_cases.build(cls, cls.test_params[0], 6)
    assert isinstance(proto.domain, cls.input_domain)


# ---------------------------------------------------------------------- estimands, engines


def test_engines_are_derived_from_the_traits():
    """count level: codes and a frequency estimand; planned rounds: no engine yet."""
    grr = ll.protocols.GRR
    assert engines_for(grr) == ENGINES
    assert engines_for(ll.protocols.RAPPOR) == ("per-user", "reports")
    numeric = type(
        "Numeric",
        (),
        {"rounds": Rounds.ONE_SHOT, "estimand": Estimand.MEAN, "input_domain": Interval},
    )
    assert engines_for(numeric) == ("per-user", "reports")
    planned = type(
        "Planned",
        (),
        {"rounds": Rounds.PLANNED, "estimand": Estimand.FREQUENCIES, "input_domain": Categorical},
    )
    assert engines_for(planned) == ()
    assert Estimand.DISTRIBUTION.on_simplex and not Estimand.DISTRIBUTION.frequency_vector
    assert not Estimand.QUERIED_ITEMS.on_simplex


def test_rounds_follow_longitudinal_and_plans_are_refused_when_nothing_is_planned():
    assert ll.protocols.GRR.rounds is Rounds.ONE_SHOT
    assert ll.protocols.LGRR.rounds is Rounds.MEMO_CHAIN
    assert ll.protocols.RapporOneTime.rounds is Rounds.ONE_SHOT  # one-time under a chain
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    assert not proto.planned and proto.plan_keys == ()
    assert proto.for_round(None) is proto and proto.for_round({}) is proto
    with pytest.raises(ValueError, match="nothing"):
        proto.for_round({"eps": 1.0})
    with pytest.raises(ValueError, match="JSON object"):
        proto.check_plan([1])


def test_a_planned_mechanism_names_what_a_device_needs():
    base = ll.protocols.GRR

    @dataclasses.dataclass(frozen=True)
    class PlannedGRR(base):
        rounds = Rounds.PLANNED
        plan_keys = ("eps",)

        def for_round(self, plan):
            return dataclasses.replace(self, eps=float(self.check_plan(plan)["eps"]))

    proto = PlannedGRR(k=4, eps=1.0)
    assert proto.planned and PlannedGRR.rounds is Rounds.PLANNED
    assert proto.for_round({"eps": 0.5}).eps == 0.5
    with pytest.raises(ValueError, match="missing"):
        proto.check_plan({})


# ---------------------------------------------------------------------- accounting


def test_accounting_rules_use_the_one_budget_rule():
    chain = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=0.5).accounting
    assert chain.rule == "per-memo" and chain.memoizes
    t, m = np.array([1, 4, 10]), np.array([1, 1, 3])
    assert np.allclose(
        chain.spent(t, m), privacy.spent_epsilon(t, m, chain.eps_report, chain.eps_memo)
    )
    assert np.allclose(chain.spent(t, m), np.minimum(t * 0.5, m * 2.0), rtol=1e-9)
    one = ll.protocol("OUE", k=4, eps=1.0).accounting
    assert one.rule == "per-report" and one.spent(7) == pytest.approx(7.0)
    window = privacy.Accounting("per-window", 0.0, window=5, eps_window=1.0)
    assert window.worst_case(11) == 3.0
    with pytest.raises(ValueError, match="trajectory"):
        window.spent(3)
    with pytest.raises(ValueError, match="'eps_memo' is required"):
        privacy.Accounting("per-memo", 1.0)
    with pytest.raises(ValueError, match="'window' must be None"):
        privacy.Accounting("per-report", 1.0, window=3)
    with pytest.raises(ValueError, match="rule"):
        privacy.Accounting("per-day", 1.0)


# ---------------------------------------------------------------------- report kinds


def test_report_kinds_compare_to_their_names_and_listings_show_them():
    kinds = {cls.name: cls.report_kind for cls in ll.protocols.PROTOCOL_CLASSES}
    assert kinds["GRR"] == "symbol" and str(kinds["OLH"]) == "hashed"
    assert kinds["SH"] != kinds["OLH"] and kinds["L-SH"] == kinds["SH"]
    assert {info.report_kind for info in ll.list_protocols()} >= {"symbol", "bits", "hashed"}
    assert all(isinstance(k, ReportKind) for k in kinds.values())


def test_a_continuous_report_has_no_exact_channel_and_bins_its_reports():
    class FloatReports(ContinuousReport):
        name = "float"

        def report_range(self, proto):
            return (-2.0, 2.0)

    kind = FloatReports()
    odd_cls = type("FloatGRR", (ll.protocols.GRR,), {"report_kind": kind, "__doc__": "f"})
    odd = odd_cls(k=3, eps=1.0)
    assert not kind.discrete and kind.output_space_size(odd) is None
    with pytest.raises(ValueError, match="continuous"):
        exact_epsilons(odd)
    with pytest.raises(ValueError, match="continuous"):
        exact_lifetime_epsilon(odd, 1)
    bins = kind.observe(odd, np.array([-2.0, 0.0, 1.99, 2.0]))
    assert bins.tolist() == [0, 32, 63, 63]


# ---------------------------------------------------------------------- the registry's check


def test_registry_refuses_a_class_without_a_trait_or_the_roles():
    check_class(ll.protocols.GRR)
    own = {"report_kind": "symbol", "linkage": ll.protocols.GRR.linkage}
    odd = type("NoKind", (ll.protocols.GRR,), own)
    with pytest.raises(RuntimeError, match="'report_kind'"):
        check_class(dataclasses.dataclass(frozen=True)(odd))
    unlinked = type("NoLinkage", (ll.protocols.GRR,), {})
    with pytest.raises(RuntimeError, match="'linkage'"):
        check_class(dataclasses.dataclass(frozen=True)(unlinked))
    with pytest.raises(RuntimeError, match="mechanism, estimator and codec"):
        check_class(int)
