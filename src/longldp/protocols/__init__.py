"""Frequency oracles: one frozen dataclass per protocol, reachable by name.

>>> import longldp as ll
>>> proto = ll.protocol("L-OSUE", k=74, eps_perm=2.0, eps_1=0.8)
>>> [p.name for p in ll.protocols()][:3]
['GRR', 'SUE', 'OUE']

This package is also callable: ``longldp.protocols()`` lists the registry (see
:func:`list_protocols`).
"""

from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass
from typing import Any

from longldp.protocols import wire
from longldp.protocols._memo import MemoStore, PopulationMemo
from longldp.protocols._rng import HmacRandom, SecureRandom
from longldp.protocols.base import Aggregator, Client, FrequencyOracle
from longldp.protocols.dbitflip import DBitFlipPM
from longldp.protocols.grr import GRR, LGRR
from longldp.protocols.hadamard import LSH, SH
from longldp.protocols.lh import BLH, OLH, OLOLOHA, BiLOLOHA
from longldp.protocols.rappor import RAPPOR, RapporClient
from longldp.protocols.ue import LOSUE, LOUE, LSOUE, LSUE, OUE, SUE

REGISTRY: dict[str, type[FrequencyOracle]] = {
    cls.name.lower(): cls
    for cls in (
        GRR,
        SUE,
        OUE,
        BLH,
        OLH,
        SH,
        LGRR,
        LSUE,
        LOUE,
        LSOUE,
        LOSUE,
        BiLOLOHA,
        OLOLOHA,
        LSH,
        DBitFlipPM,
        RAPPOR,
    )
}
ALIASES = {"dbitflip": "dbitflippm"}
#: RAPPOR tuned by budgets instead of (f, p, q) is L-SUE (one-hot, f and q set by ε∞ and ε1).
_BUDGET_ALIASES = {"rappor": "l-sue"}


@dataclass(frozen=True)
class ProtocolInfo:
    """One registry row: the protocol's name, kind, constructor parameters and summary."""

    name: str
    longitudinal: bool
    parameters: tuple[str, ...]
    summary: str


def get_protocol_class(name: str) -> type[FrequencyOracle]:
    """The class registered under ``name`` (case-insensitive)."""
    key = name.lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    if key not in REGISTRY:
        allowed = ", ".join(cls.name for cls in REGISTRY.values())
        raise ValueError(f"protocol: 'name' must be one of {allowed}; got {name!r}.")
    return REGISTRY[key]


def protocol(name: str, **params: Any) -> FrequencyOracle:
    """Build a protocol by name, e.g. ``protocol("L-GRR", k=10, eps_perm=2, eps_1=1)``.

    ``protocol("RAPPOR", k=…, h=…, m=…, f=…, p=…, q=…)`` builds RAPPOR; given budgets
    (``eps_perm``, ``eps_1``) instead, "RAPPOR" builds L-SUE, RAPPOR tuned for utility.

    Unknown parameters raise ``ValueError`` (never silently dropped).
    """
    cls = get_protocol_class(name)
    if isinstance(name, str) and name.lower() in _BUDGET_ALIASES and "eps_perm" in params:
        cls = get_protocol_class(_BUDGET_ALIASES[name.lower()])
    allowed = _init_parameters(cls)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"{cls.name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}."
        )
    missing = [p for p in _required_parameters(cls) if p not in params]
    if missing:
        raise ValueError(f"{cls.name}: missing parameter(s) {', '.join(missing)}.")
    return cls(**params)


def protocol_from_spec(spec: dict[str, Any]) -> FrequencyOracle:
    """Rebuild a protocol from ``proto.spec()`` (``{"name": ..., "params": {...}}``)."""
    return wire.protocol_from_spec(spec)


def aggregator_from_state(state: dict[str, Any]) -> Aggregator:
    """Rebuild an aggregator, protocol included, from ``Aggregator.state()``."""
    spec, _, _ = wire.check_state(state)
    return protocol_from_spec(spec).aggregator_from_state(state)


def list_protocols() -> list[ProtocolInfo]:
    """Every registered protocol with its parameters."""
    return [
        ProtocolInfo(
            cls.name,
            cls.longitudinal,
            _init_parameters(cls),
            (cls.__doc__ or "").strip().splitlines()[0],
        )
        for cls in REGISTRY.values()
    ]


def _init_parameters(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _required_parameters(cls: type) -> tuple[str, ...]:
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


class _CallableModule(types.ModuleType):
    def __call__(self) -> list[ProtocolInfo]:
        return list_protocols()


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "BLH",
    "GRR",
    "LGRR",
    "LOSUE",
    "LOUE",
    "LSH",
    "LSOUE",
    "LSUE",
    "OLH",
    "OLOLOHA",
    "OUE",
    "RAPPOR",
    "SH",
    "SUE",
    "Aggregator",
    "BiLOLOHA",
    "Client",
    "DBitFlipPM",
    "FrequencyOracle",
    "HmacRandom",
    "MemoStore",
    "PopulationMemo",
    "ProtocolInfo",
    "RapporClient",
    "SecureRandom",
    "aggregator_from_state",
    "get_protocol_class",
    "list_protocols",
    "protocol",
    "protocol_from_spec",
    "wire",
]
