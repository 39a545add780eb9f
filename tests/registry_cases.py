"""Common-test cases derived from the protocol registry (docs/design.md §8).

Every registered protocol class declares ``test_params``: a few constructor dicts (``k`` is
supplied here unless the dict gives it or the class takes none). The common tests parametrize
over :func:`cases` instead of keeping their own tables of names, so a new protocol is enrolled
in all of them by its registry entry; ``tests/test_registry_coverage.py`` fails when a common
test leaves a registered protocol out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import longldp as ll

CLASSES = ll.protocols.PROTOCOL_CLASSES


def takes_k(cls: type) -> bool:
    """Whether ``k`` is a constructor parameter (RAPPOR-boolean has one bit, no k)."""
    return any(f.name == "k" and f.init for f in dataclasses.fields(cls))


def build(cls: type, params: dict[str, Any], k: int) -> ll.FrequencyOracle:
    """``cls`` from its test parameters, with ``k`` unless they give it or it takes none."""
    full = dict(params)
    if takes_k(cls):
        full.setdefault("k", k)
    return cls(**full)


def case_id(cls: type, i: int) -> str:
    """``NAME`` for a class's first test parameters; for the others ``NAME-`` and what differs
    from the first: a string value as is, a number after its name (``L-GRR-paper``,
    ``dBitFlipPM-d3``)."""
    if i == 0:
        return cls.name
    first, params = cls.test_params[0], cls.test_params[i]
    parts = [
        str(v) if isinstance(v, str) else f"{key}{v}"
        for key, v in params.items()
        if first.get(key) != v
    ]
    return "-".join([cls.name, *parts])


def all_ids() -> dict[str, tuple[type, dict[str, Any]]]:
    """Every case id → (class, test parameters)."""
    return {
        case_id(cls, i): (cls, params)
        for cls in CLASSES
        for i, params in enumerate(cls.test_params)
    }


def triples(where=None) -> list[tuple[type, dict[str, Any], str]]:
    """(class, test parameters, case id) of every registered class, filtered by ``where``."""
    return [
        (cls, params, case_id(cls, i))
        for cls in CLASSES
        if where is None or where(cls)
        for i, params in enumerate(cls.test_params)
    ]


def cases(where=None, k: int | None = None) -> list[Any]:
    """``pytest.param(cls, params, id=...)`` for every registered class and test parameters;
    ``where(cls)`` filters by trait (tests/test_registry_coverage.py checks the filters); with
    ``k`` the one parameter is the built protocol instead."""
    if k is not None:
        return [pytest.param(build(c, p, k), id=i) for c, p, i in triples(where)]
    return [pytest.param(c, p, id=i) for c, p, i in triples(where)]


def deployable(cls: type) -> bool:
    """A mechanism devices run and collections serve: not given for comparison only (its
    ``comparison_only`` trait; SHE, whose float Laplace draws are not the channel its ε
    describes)."""
    return cls.comparison_only is None


def comparison_only(cls: type) -> bool:
    """A mechanism given for comparison only: devices and collections refuse it."""
    return cls.comparison_only is not None


def one_shot_eps(cls: type) -> bool:
    """A one-shot oracle whose budget is ε."""
    return tuple(cls.budget_params) == ("eps",)


def two_round_chain(cls: type) -> bool:
    """A two-round chain whose budget is (ε∞, ε1)."""
    return tuple(cls.budget_params) == ("eps_perm", "eps_1")


def exact_channel(cls: type) -> bool:
    """Its report kind gives the exact channel: every kind but a density that is not piecewise
    constant (SHE's and Laplace's floats: the audit bins them for its black-box game; Laplace's
    claim is checked by tests/test_numeric_privacy.py)."""
    return cls.report_kind.exact


def sampled_items(cls: type) -> bool:
    """An exact channel over items (values or an open domain's items, not numbers): the
    sampler-threshold test rebuilds its channel from the probabilities its sampler draws with
    (a numeric mechanism's claims at high ε: tests/test_numeric_privacy.py)."""
    return exact_channel(cls) and cls.input_domain.kind != "interval"


def options(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """The test parameters other than the budget and k (calibration, hash_pool, d, …)."""
    return {k: v for k, v in params.items() if k not in cls.budget_params and k != "k"}


def engine_frequencies(cls: type) -> bool:
    """A frequency oracle the population engines run: its estimate is a frequency vector and
    its rounds are not planned (a planned mechanism needs the server's plan at every epoch,
    docs/design.md §2.5; it is simulated by its own kernels)."""
    return cls.estimates_frequencies and not cls.rounds.planned


def required_options(cls: type) -> dict[str, Any]:
    """The constructor parameters a class requires besides k and its budget (a numeric
    mechanism's declared range lo, hi), from its first test parameters."""
    need = set(cls.required_parameters()) - {"k", *cls.budget_params}
    return {p: v for p, v in cls.test_params[0].items() if p in need}


def with_budget(name: str, k: int, **budget: Any) -> Any:
    """``ll.protocol(name, ...)`` with this budget, k when the class takes one, and the other
    parameters the class requires (:func:`required_options`)."""
    cls = ll.get_protocol_class(name)
    params = {**required_options(cls), **budget}
    if takes_k(cls):
        params["k"] = k
    return ll.protocol(name, **params)
