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


def cases(where=None, k: int | None = None) -> list[Any]:
    """``pytest.param(cls, params, id=...)`` for every registered class and test parameters;
    ``where(cls)`` filters by trait (the meta-test checks the filters); with ``k`` the
    parameter is the built protocol instead."""
    out = []
    for cls in CLASSES:
        if where is not None and not where(cls):
            continue
        for i, params in enumerate(cls.test_params):
            value = build(cls, params, k) if k is not None else (cls, params)
            out.append(pytest.param(*((value,) if k is not None else value), id=case_id(cls, i)))
    return out
