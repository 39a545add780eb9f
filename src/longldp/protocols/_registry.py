"""The registry: the one table of protocol classes, and everything derived from it.

Each class declares its traits (``name``, ``aliases``, ``wire_id``, ``report_kind``,
``budget_params``, ``test_params``, ``linkage``; docs/design.md §2.1). This module lists the
classes once, in :data:`PROTOCOL_CLASSES`, and derives the lookup by name, the wire ids
(:data:`PROTOCOL_IDS`, re-exported by :mod:`longldp.protocols.wire`), the listing
``ll.protocols()``, and the one spec parser :func:`protocol_from_spec`. Names (with aliases,
case-insensitively) and wire ids are checked unique at import, and every protocol class that
claims a wire id must be in the table. Adding a protocol = its module + one entry here
(docs/design.md §8).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from longldp import privacy
from longldp.privacy.linkage import Linkage
from longldp.protocols import _codec
from longldp.protocols.base import Aggregator, FrequencyOracle
from longldp.protocols.codec import ReportCodec
from longldp.protocols.dbitflip import DBitFlipPM
from longldp.protocols.estimator import Estimator
from longldp.protocols.grr import GRR, LGRR
from longldp.protocols.hadamard import LSH, SH
from longldp.protocols.hr import HR
from longldp.protocols.lh import BLH, OLH, OLOLOHA, BiLOLOHA
from longldp.protocols.mechanism import Mechanism
from longldp.protocols.numeric.mechanisms import NUMERIC_CLASSES
from longldp.protocols.rappor import (
    RAPPOR,
    RapporBoolean,
    RapporBooleanOneTime,
    RapporOneHot,
    RapporOneHotOneTime,
    RapporOneTime,
)
from longldp.protocols.report_kinds import ReportKind
from longldp.protocols.sketch.mechanisms import CMS, HCMS, LCMS, LHCMS, PCS, SHE, THE
from longldp.protocols.sketch.pem import PEM
from longldp.protocols.streams.changes import DDRM, ChangesTree, Thresh
from longldp.protocols.streams.ldp_ids import LBA, LBD, LBU, LPA, LPD, LPU, LSP
from longldp.protocols.subset import SubsetSelection
from longldp.protocols.traits import Estimand, Rounds
from longldp.protocols.ue import LOSUE, LOUE, LSOUE, LSUE, OUE, SUE

#: Entry-point group through which other packages register protocols (docs/design.md §8).
ENTRY_POINT_GROUP = "longldp.protocols"
#: Wire ids of protocols registered from outside this package; this package's are below 128, so
#: that a protocol added here never takes an id a third-party package already uses.
OUTSIDE_WIRE_IDS = range(128, 256)

#: This package's protocols, in the order ``ll.protocols()`` lists them (one-shot first).
BUILTIN_CLASSES: tuple[type[FrequencyOracle], ...] = (
    GRR,
    SUE,
    OUE,
    BLH,
    OLH,
    SH,
    SubsetSelection,
    HR,
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
    RapporOneHot,
    RapporBoolean,
    RapporOneTime,
    RapporOneHotOneTime,
    RapporBooleanOneTime,
    LBU,
    LSP,
    LBD,
    LBA,
    LPU,
    LPD,
    LPA,
    Thresh,
    ChangesTree,
    DDRM,
    CMS,
    HCMS,
    PCS,
    SHE,
    THE,
    LCMS,
    LHCMS,
    PEM,
    *NUMERIC_CLASSES,
)

#: Every registered protocol: this package's, then those of other packages' entry points (in
#: the order they are found), as ``ll.protocols()`` lists them.
PROTOCOL_CLASSES: tuple[type[FrequencyOracle], ...] = BUILTIN_CLASSES
#: Lower-case name → class.
REGISTRY: dict[str, type[FrequencyOracle]] = {}
#: Lower-case alias → lower-case registry name.
ALIASES: dict[str, str] = {}
#: Protocol name → one-byte wire id (docs/wire-format.md §1), fixed forever.
PROTOCOL_IDS: dict[str, int] = {}
#: Names of every registered protocol, in registry order.
NAMES: tuple[str, ...] = ()
#: Name → where a protocol registered from outside comes from (its entry point).
SOURCES: dict[str, str] = {}


def _index(classes: tuple[type[FrequencyOracle], ...]) -> None:
    """Rebuild the lookups from ``classes`` (in place, so that every module holding them sees
    the registered protocols)."""
    global PROTOCOL_CLASSES, NAMES
    PROTOCOL_CLASSES = classes
    NAMES = tuple(cls.name for cls in classes)
    REGISTRY.clear()
    REGISTRY.update({cls.name.lower(): cls for cls in classes})
    ALIASES.clear()
    ALIASES.update({alias.lower(): cls.name.lower() for cls in classes for alias in cls.aliases})
    PROTOCOL_IDS.clear()
    PROTOCOL_IDS.update({cls.name: cls.wire_id for cls in classes})


def _check_table(classes: tuple[type[FrequencyOracle], ...]) -> None:
    """Unique names and aliases (case-insensitive), unique wire ids, every trait declared, and
    no protocol class with a wire id left out of the table."""
    keys = [cls.name.lower() for cls in classes]
    keys += [alias.lower() for cls in classes for alias in cls.aliases]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise RuntimeError(f"protocol registry: names or aliases used twice: {', '.join(dup)}.")
    ids = [cls.wire_id for cls in classes]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"protocol registry: wire ids used twice: {sorted(ids)}.")
    for cls in classes:
        check_class(cls)
        if not cls.test_params:
            raise RuntimeError(f"protocol registry: {cls.name} has no test parameters.")
        unknown = set(cls.budget_params) - set(_init_parameters(cls))
        if unknown:
            raise RuntimeError(
                f"protocol registry: {cls.name}.budget_params names non-parameters {unknown}."
            )
    stray = set(_codec.WIRE_NAMES.values()) - {cls.name for cls in classes}
    if stray:
        raise RuntimeError(
            f"protocol registry: {', '.join(sorted(stray))} claim a wire id but are not in "
            "PROTOCOL_CLASSES."
        )


def _check_linkage(cls: type[FrequencyOracle]) -> None:
    """The class declares its own ``linkage`` (never inherited: a one-time variant keeps none of
    its parent's memos), a :class:`Linkage` with a memo exactly when the class memoizes."""
    linkage = cls.__dict__.get("linkage")
    if not isinstance(linkage, Linkage):
        raise RuntimeError(
            f"protocol registry: {cls.name} does not declare its own 'linkage' (a Linkage of "
            "what persists per device; docs/design.md §2.1)."
        )
    if linkage.memoized != cls.longitudinal:
        raise RuntimeError(
            f"protocol registry: {cls.name}.linkage says memo = {linkage.memoized}, but "
            f"longitudinal = {cls.longitudinal}."
        )


#: The traits every registered class declares (or inherits), with the type each must have.
TRAITS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "wire_id": int,
    "report_kind": ReportKind,
    "budget_params": tuple,
    "test_params": tuple,
    "longitudinal": bool,
    "rounds": Rounds,
    "estimand": Estimand,
    "input_domain": type,
}


def check_class(cls: type) -> None:
    """A protocol class is the three roles and declares every trait of :data:`TRAITS` with
    its type; ``RuntimeError`` naming the class and the trait otherwise (checked at import for
    this package's table and for every protocol registered from outside)."""
    name = getattr(cls, "name", cls.__name__)
    roles = (Mechanism, Estimator, ReportCodec)
    if not (isinstance(cls, type) and all(issubclass(cls, role) for role in roles)):
        raise RuntimeError(
            f"protocol registry: {name} must subclass the mechanism, estimator and codec roles "
            "(e.g. longldp.protocols.FrequencyOracle)."
        )
    if not dataclasses.is_dataclass(cls):
        raise RuntimeError(f"protocol registry: {name} must be a (frozen) dataclass.")
    _check_linkage(cls)
    for trait, kind in TRAITS.items():
        value = getattr(cls, trait, None)
        if (
            value is None
            or not isinstance(value, kind)
            or isinstance(value, bool) != (kind is bool)
        ):
            raise RuntimeError(
                f"protocol registry: {name} does not declare {trait!r} "
                f"(a {getattr(kind, '__name__', kind)}); got {value!r}."
            )


@dataclass(frozen=True)
class ProtocolInfo:
    """One registry row: the protocol's name, traits, constructor parameters and summary
    (``linkage``: what persists per device, in words, :meth:`Linkage.describe`)."""

    name: str
    longitudinal: bool
    parameters: tuple[str, ...]
    summary: str
    wire_id: int
    report_kind: str
    budget_params: tuple[str, ...]
    linkage: str
    estimand: str = Estimand.FREQUENCIES.value
    rounds: str = Rounds.ONE_SHOT.value
    domain: str = "categorical"


def get_protocol_class(name: str) -> type[FrequencyOracle]:
    """The class registered under ``name`` (case-insensitive; aliases accepted)."""
    key = name.lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    if key not in REGISTRY:
        allowed = ", ".join(NAMES)
        raise ValueError(f"protocol: 'name' must be one of {allowed}; got {name!r}.")
    return REGISTRY[key]


def protocol(name: str, **params: Any) -> FrequencyOracle:
    """Build a protocol by name, e.g. ``protocol("L-GRR", k=10, eps_perm=2, eps_1=1)``.

    The budget goes through the one parser :class:`longldp.privacy.Budget`: ``eps`` for a
    one-shot oracle, ``eps_perm`` with ``eps_1`` or ``alpha`` (ε1 = α·ε∞) for a chain,
    ``eps_perm`` alone for dBitFlipPM, RAPPOR's own ``f, p, q``. A budget of the wrong form,
    an unknown parameter or a missing one raises ``ValueError`` naming it and what is allowed
    (never a silent switch to another protocol).
    """
    cls = get_protocol_class(name)
    budget = privacy.Budget(**{k: params.pop(k) for k in privacy.BUDGET_KEYS if k in params})
    params.update(budget.parameters(cls.name, cls.budget_params, cls.budget_note))
    allowed = _init_parameters(cls)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"{cls.name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}."
        )
    missing = [p for p in cls.required_parameters() if p not in params]
    if missing:
        raise ValueError(f"{cls.name}: missing parameter(s) {', '.join(missing)}.")
    return cls(**params)


def protocol_from_spec(spec: Mapping[str, Any]) -> FrequencyOracle:
    """Rebuild a protocol from ``proto.spec()`` (``{"name": ..., "params": {...}}``), e.g. as
    stored by a server as JSON: the one spec parser.

    Raises ``ValueError`` for a malformed spec, an unknown protocol or bad parameters.
    """
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        raise ValueError(
            "protocol spec: must be an object {'name': str, 'params': object}; "
            f"got {spec!r:.200}."
        )
    params = spec.get("params", {})
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ValueError(f"protocol spec: 'params' must be an object; got {params!r:.200}.")
    extra = sorted(set(spec) - {"name", "params"})
    if extra:
        raise ValueError(
            f"protocol spec: unknown key(s) {', '.join(extra)}; allowed: name, params."
        )
    return protocol(spec["name"], **dict(params))


def aggregator_from_state(state: dict[str, Any]) -> Aggregator:
    """Rebuild an aggregator, protocol included, from ``Aggregator.state()``."""
    spec, _, _ = _codec.check_state(state)
    return protocol_from_spec(spec).aggregator_from_state(state)


def list_protocols() -> list[ProtocolInfo]:
    """Every registered protocol with its traits and parameters."""
    return [
        ProtocolInfo(
            cls.name,
            cls.longitudinal,
            _init_parameters(cls),
            (cls.__doc__ or "").strip().splitlines()[0],
            cls.wire_id,
            str(cls.report_kind),
            cls.budget_params,
            cls.linkage.describe(),
            str(cls.estimand),
            str(cls.rounds),
            cls.input_domain.kind,
        )
        for cls in PROTOCOL_CLASSES
    ]


def _init_parameters(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def register(classes: Any, source: str) -> list[type[FrequencyOracle]]:
    """Add protocol classes registered from outside this package (one class, or a list or
    tuple of them: what an entry point of :data:`ENTRY_POINT_GROUP` loads).

    Each goes through every check of this package's table (:func:`check_class`, unique names,
    aliases and wire ids, test parameters, budget parameters) and must take a wire id of
    :data:`OUTSIDE_WIRE_IDS`; ``RuntimeError`` naming ``source`` otherwise.
    """
    group = list(classes) if isinstance(classes, (list, tuple)) else [classes]
    for cls in group:
        if not isinstance(cls, type) or not issubclass(cls, Mechanism):
            raise RuntimeError(f"protocol registry: {source} gives {cls!r}, not a protocol class.")
        if cls.wire_id not in OUTSIDE_WIRE_IDS:
            raise RuntimeError(
                f"protocol registry: {cls.name} ({source}) takes wire id {cls.wire_id}; a "
                f"protocol from outside longldp takes one of {OUTSIDE_WIRE_IDS.start}–"
                f"{OUTSIDE_WIRE_IDS.stop - 1} (below are longldp's own)."
            )
    table = (*PROTOCOL_CLASSES, *(cls for cls in group if cls not in PROTOCOL_CLASSES))
    try:
        _check_table(table)
    except RuntimeError as err:
        raise RuntimeError(f"{err} (registering {source})") from None
    _index(table)
    for cls in group:
        SOURCES[cls.name] = source
    return group


def load_entry_points() -> list[type[FrequencyOracle]]:
    """Register the protocols of every installed package's :data:`ENTRY_POINT_GROUP` entry
    points (``name = "package.module:ProtocolClass"``, docs/design.md §8); called once when
    :mod:`longldp.protocols` is imported. A broken entry point raises ``RuntimeError`` naming
    it, never a silently shorter registry."""
    from importlib.metadata import entry_points

    added: list[type[FrequencyOracle]] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(ep.dist, "name", "?")
        source = f"entry point {ep.name!r} = {ep.value!r} of {dist}"
        try:
            obj = ep.load()
        except Exception as err:  # a broken package: say which one
            raise RuntimeError(f"protocol registry: cannot load {source}: {err}") from err
        added += register(obj, source)
    return added


_check_table(BUILTIN_CLASSES)
_index(BUILTIN_CLASSES)
