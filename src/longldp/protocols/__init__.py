"""Protocols: one frozen dataclass per mechanism, reachable by name (docs/design.md §2).

>>> import longldp as ll
>>> proto = ll.protocol("L-OSUE", k=74, eps_perm=2.0, eps_1=0.8)
>>> ll.protocols()[0].name, ll.protocols()[0].wire_id
('GRR', 1)

``ll.protocols()`` (the top-level package's callable view of this one) lists the registry
(:func:`list_protocols`). Protocols of other installed packages join the registry through the
entry-point group ``longldp.protocols`` when this package is imported
(:func:`~longldp.protocols._registry.load_entry_points`, docs/design.md §8); ``__all__`` names
this package's API and every registered protocol class.
"""

# The names below are re-exported through an ``__all__`` computed from the registry (at the end),
# which a linter cannot read: hence no unused-import check in this file.
# ruff: noqa: F401

from __future__ import annotations

from longldp.protocols import _registry, wire
from longldp.protocols._memo import MemoStore, PopulationMemo
from longldp.protocols._registry import (
    ALIASES,
    REGISTRY,
    ProtocolInfo,
    aggregator_from_state,
    get_protocol_class,
    list_protocols,
    protocol,
    protocol_from_spec,
)
from longldp.protocols._rng import HmacRandom, SecureRandom
from longldp.protocols.base import Aggregator, Estimate, FrequencyOracle, OneShot
from longldp.protocols.client import Client, DerivedRound1, DrawnRound1, Round1Source
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import Estimator, SupportEstimator
from longldp.protocols.mechanism import Mechanism, PopulationStep
from longldp.protocols.report_kinds import (
    BitReports,
    ContinuousReport,
    EnumeratedReports,
    ExactChannel,
    HashFamily,
    ReportKind,
    SymbolReports,
)
from longldp.protocols.traits import (
    Categorical,
    Domain,
    Estimand,
    Interval,
    ItemSpace,
    Rounds,
    Strings,
)

#: The package's API besides the protocol classes (which follow the registry, below).
API = [
    "ALIASES",
    "NAMES",
    "PROTOCOL_CLASSES",
    "REGISTRY",
    "Aggregator",
    "BitReports",
    "Categorical",
    "Client",
    "ContinuousReport",
    "DerivedRound1",
    "Domain",
    "DrawnRound1",
    "EnumeratedReports",
    "Estimand",
    "Estimate",
    "Estimator",
    "ExactChannel",
    "FrequencyOracle",
    "HashFamily",
    "HmacRandom",
    "Interval",
    "ItemSpace",
    "Mechanism",
    "MemoStore",
    "OneShot",
    "PopulationMemo",
    "PopulationStep",
    "ProtocolInfo",
    "ReportCodec",
    "ReportKind",
    "Round1Source",
    "Rounds",
    "SecureRandom",
    "Strings",
    "SupportEstimator",
    "SymbolReports",
    "aggregator_from_state",
    "get_protocol_class",
    "list_protocols",
    "protocol",
    "protocol_from_spec",
    "wire",
]

# Protocols of other packages (entry points); then every registered class is a name of this
# package (``from longldp.protocols import GRR``), and ``__all__`` follows the registry.
_registry.load_entry_points()
NAMES = _registry.NAMES
PROTOCOL_CLASSES = _registry.PROTOCOL_CLASSES
for _cls in PROTOCOL_CLASSES:
    if globals().setdefault(_cls.__name__, _cls) is not _cls:
        raise RuntimeError(
            f"protocol registry: {_cls.name}'s class name {_cls.__name__!r} is already a name of "
            "longldp.protocols; rename the class."
        )
__all__ = sorted({*API, *(cls.__name__ for cls in PROTOCOL_CLASSES)})
del _cls
