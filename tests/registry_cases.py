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


def one_shot_eps(cls: type) -> bool:
    """A one-shot oracle whose budget is ε."""
    return tuple(cls.budget_params) == ("eps",)


def two_round_chain(cls: type) -> bool:
    """A two-round chain whose budget is (ε∞, ε1)."""
    return tuple(cls.budget_params) == ("eps_perm", "eps_1")


def exact_channel(cls: type) -> bool:
    """Its reports are discrete, so their exact channel is enumerated; a continuous report (SHE's
    Laplace floats) has none and is audited by the binned black-box game instead."""
    return cls.report_kind.discrete


def counted(cls: type) -> bool:
    """Its support is integer counts, what the collection server stores; a continuous report's
    support is a sum of reals (SHE), which the server refuses to collect."""
    return cls.report_kind.discrete


def options(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """The test parameters other than the budget and k (calibration, hash_pool, d, …)."""
    return {k: v for k, v in params.items() if k not in cls.budget_params and k != "k"}
