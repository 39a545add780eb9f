"""Every registered protocol is in every common test (docs/design.md §8).

The common tests parametrize over the registry (tests/registry_cases.py), never over a table of
their own. This test reads each common test's parametrization, maps every parameter back to
its protocol class, and fails when a registered class that the test's trait filter admits is
missing: adding a protocol to the registry enrolls it everywhere, and a test that drops one is
caught. The filter each test may apply is written here, as a function of the class's traits.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
from _pytest.mark.structures import ParameterSet

import longldp as ll
from longldp.protocols.mechanism import Mechanism
from protocol_table import PROTOCOLS
from registry_cases import (
    CLASSES,
    comparison_only,
    deployable,
    engine_frequencies,
    one_shot_eps,
    sampled_items,
    takes_k,
    two_round_chain,
)

Trait = Callable[[type], bool]


def every(cls: type) -> bool:
    return True


def longitudinal(cls: type) -> bool:
    return cls.longitudinal


def frequencies(cls: type) -> bool:
    """Its estimate is a vector of value frequencies (the frequency tests apply)."""
    return cls.estimates_frequencies


def linkable(cls: type) -> bool:
    """Its reports carry a per-device field that links a device's epochs."""
    return cls.linkage.linkable


def no_history(cls: type) -> bool:
    """Its reports depend on each epoch's value alone (no ``history`` trait): the shuffle
    routes of math §17.4 are proven for these, and central_summary refuses the others."""
    return cls.history is None


def history(cls: type) -> bool:
    """A history-dependent mechanism (its ``history`` trait, docs/design.md §2.5)."""
    return cls.history is not None


def eps_budget(cls: type) -> bool:
    """Its budget is given as ε or ε∞, ε1 (not parameters of its own)."""
    return set(cls.budget_params) <= {"eps", "eps_perm", "eps_1"}


def exact_channel(cls: type) -> bool:
    """Its report kind gives an exact channel: every kind but a density that is not piecewise
    constant (Laplace: its claim, the density ratio's supremum, is checked by
    tests/test_numeric_privacy.py)."""
    return cls.report_kind.exact


#: test module → test function → the classes it must cover (a trait of the class).
COMMON: dict[str, dict[str, Trait]] = {
    "test_bad_input": {
        "test_budget_values_are_refused": every,
        "test_k_is_checked": takes_k,
        "test_inputs_outside_the_domain": every,
    },
    "test_privacy_channels": {
        "test_claims_equal_the_exact_channel": exact_channel,
        "test_chain_channel_never_exceeds_claim": two_round_chain,
        "test_one_shot_channel_equals_eps": lambda cls: one_shot_eps(cls) and exact_channel(cls),
    },
    "test_wire": {
        "test_spec_round_trip_and_fingerprint": every,
        "test_reports_round_trip": every,
        "test_merge_and_state_equal_one_aggregation": every,
    },
    "test_clients": {
        "test_serialization_round_trip": every,
        "test_client_reuses_its_memo": longitudinal,
        "test_client_spent_budget": longitudinal,
        "test_population_memo_and_budget": longitudinal,
    },
    "test_device_client": {"test_deleted_store_reproduces_round1": longitudinal},
    "test_memo_stores": {
        "test_dense_and_sparse_stores_give_identical_reports": longitudinal,
        "test_perturb_support_matches_materialized_reports": longitudinal,
    },
    "test_budgets": {
        "test_budget_of_the_wrong_form_is_refused_never_another_protocol": every,
        "test_a_memo_for_fewer_users_is_refused": every,
        "test_every_protocol_accepts_eps_max_and_refuses_above": eps_budget,
        "test_claims_cover_the_exact_channel_at_large_budgets": (
            lambda cls: eps_budget(cls) and exact_channel(cls)
        ),
    },
    "test_parameters": {
        # V* is a frequency oracle's figure; a mean's worst case: tests/test_numeric_*.py
        "test_vstar_is_variance_at_zero": frequencies,
        "test_chain_eps_round_trips": two_round_chain,
        "test_one_shot_protocol_eps_round_trips": one_shot_eps,
    },
    "test_statistics": {
        "test_unbiased_count_level": frequencies,
        "test_unbiased_per_user": frequencies,
        "test_variance_count_level": frequencies,
        "test_variance_per_user": frequencies,
        "test_approx_variance_is_variance_at_zero": frequencies,
        "test_estimate_interval_covers_the_truth_at_its_level": frequencies,
    },
    "test_engines_agree": {"test_support_mean_and_variance_agree": frequencies},
    "test_simulate": {"test_engines_give_the_same_distribution_of_estimates": engine_frequencies},
    "test_population": {"test_every_registered_protocol_runs_through_its_engines": every},
    "test_time_average_variance": {
        "test_time_average_variance_is_v1_plus_rest_over_tau": (
            lambda cls: frequencies(cls) and longitudinal(cls)
        ),
    },
    "test_server_protocols": {
        "test_footprint_is_within_the_budget_and_bounds_what_is_allocated": deployable,
        "test_every_registered_protocol_is_collected_and_served": deployable,
        "test_comparison_only_mechanisms_are_refused": comparison_only,
    },
    "test_roundtrip_server": {"test_server_round_trip": deployable},
    "test_roundtrip_archive": {"test_archive_round_trip": deployable},
    # Its channel rebuild reads the stored probabilities of an exact channel over items; the
    # numeric mechanisms draw positions too, and their claims against what their samplers
    # realize at high ε are checked by tests/test_numeric_privacy.py.
    "test_sampler_thresholds": {"test_claims_equal_what_the_sampler_realizes": sampled_items},
    "test_shuffle_linkage": {
        "test_declared_linkage_covers_what_the_reports_carry": every,
        "test_routes_follow_the_linkage": no_history,
        "test_every_central_claim_survives_the_linkage_attack": no_history,
        "test_a_halved_claim_is_refuted_where_the_attack_has_power": no_history,
        "test_linking_refutes_the_excluded_route": lambda cls: linkable(cls) and no_history(cls),
        "test_a_history_dependent_mechanism_gets_no_central_figure": history,
    },
    "test_audit": {
        "test_exact_lifetime_within_claims_and_saturates": frequencies,
        "test_one_report_bound_never_exceeds_claim": frequencies,
        "test_lifetime_bound_never_exceeds_claim": frequencies,
    },
}


def classes_of(value: object) -> set[type]:
    """The protocol classes a parameter value stands for: a class, an instance, a case id of
    tests/protocol_table.py or a registry name; nothing for other values."""
    if isinstance(value, type) and issubclass(value, Mechanism):
        return {value}
    if isinstance(value, Mechanism):
        return {type(value)}
    if isinstance(value, str):
        if value in PROTOCOLS:
            return {ll.get_protocol_class(PROTOCOLS[value][0])}
        try:
            return {ll.get_protocol_class(value)}
        except ValueError:
            return set()
    return set()


def covered(test: Callable) -> set[type]:
    """Every protocol class in the parametrization of ``test`` (all its parametrize marks)."""
    found: set[type] = set()
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        for item in mark.args[1]:
            values = item.values if isinstance(item, ParameterSet) else item
            for value in values if isinstance(values, tuple) else (values,):
                found |= classes_of(value)
    return found


def missing(test: Callable, trait: Trait, classes: tuple[type, ...] = CLASSES) -> list[str]:
    """Registered classes the trait admits that ``test`` does not cover."""
    have = covered(test)
    return [cls.name for cls in classes if trait(cls) and cls not in have]


@pytest.mark.parametrize(
    ("module", "function"), [(m, f) for m, tests in COMMON.items() for f in tests]
)
def test_every_registered_protocol_is_in_every_common_test(module, function):
    test = getattr(importlib.import_module(module), function)
    trait = COMMON[module][function]
    assert not missing(test, trait), (
        f"{module}::{function} leaves out registered protocols {missing(test, trait)}; "
        "parametrize it over tests/registry_cases.py"
    )
    assert any(trait(cls) for cls in CLASSES), f"{module}::{function} covers no protocol"


def test_the_check_fails_for_a_protocol_left_out():
    """A registered class that a common test does not list is reported (the check can fail)."""
    test = importlib.import_module("test_wire").test_reports_round_trip
    left_out = type("Unlisted", (ll.protocols.GRR,), {"name": "Unlisted"})
    assert missing(test, every, (*CLASSES, left_out)) == ["Unlisted"]
    assert missing(test, every) == []
