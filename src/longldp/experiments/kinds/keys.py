"""Study-file keys every kind spells the same way, and the checks of their entries.

- keys: `tau_key`, `engine_key`, `EPS_PERM`, `alpha_key`, `postprocess_key`, `entries_key`,
  `option_value`;
- entries: `parse_entries`, `parse_grid` (datasets and one list of entries), `distinct_labels`,
  `PlainEntry` / `plain` (how an entry enters a cell's parameters, and so its identity), and
  `ProtocolEntry` / `parse_protocol_entry` for protocol entries of any kind, with or without
  one-shot protocols and extra names such as ``"adaptive"``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import longldp as ll
from longldp import privacy
from longldp.experiments import _schema as sc

__all__ = [
    "EPS_PERM",
    "GRID_PARAMETERS",
    "NONE",
    "PlainEntry",
    "ProtocolEntry",
    "alpha_key",
    "distinct_labels",
    "engine_key",
    "entries_key",
    "option_value",
    "parse_entries",
    "parse_grid",
    "parse_protocol_entry",
    "plain",
    "postprocess_key",
    "tau_key",
]

NONE = "none"
#: Parameters the grid sets; a protocol entry may not give them.
GRID_PARAMETERS = ("k", "eps_perm", "eps_1", "eps")


def tau_key(default: int | None = None) -> sc.Key:
    """``tau``: default τ of the datasets (each entry may set its own)."""
    return sc.Key("tau", sc.integer(1), default=default)


def engine_key(engines: Sequence[str], default: str) -> sc.Key:
    """``engine``: one of the kind's simulation engines."""
    return sc.Key("engine", sc.choice(engines), default=default)


#: ``eps_perm``: the ε∞ grid (the ε of a one-shot protocol).
EPS_PERM = sc.Key("eps_perm", sc.number_list(what="ε∞ values"), required=True)


def alpha_key(*, required: bool = False, default: tuple[float, ...] | None = None) -> sc.Key:
    """``alpha``: the α = ε1/ε∞ grid, each in (0, 1)."""
    check = sc.number_list(lower=0.0, upper=1.0, what="α values")
    return sc.Key("alpha", check, required=required, default=default)


def postprocess_key(methods: Sequence[str], default: str = NONE) -> sc.Key:
    """``postprocess``: the post-processings applied to the same raw estimates."""
    return sc.Key("postprocess", sc.string_list(methods), default=(default,))


def entries_key(name: str) -> sc.Key:
    """A required non-empty list of entry tables (``datasets``, ``protocols`` ...)."""
    return sc.Key(name, sc.table_list, required=True)


def option_value(where: str, name: str, value: Any) -> Any:
    """A protocol option: a number, a string or a boolean."""
    if isinstance(value, bool | int | float | str):
        return value
    raise sc.fail(where, name, "a number, a string or a boolean", value)


def parse_entries(
    where: str, values: Mapping[str, Any], key: str, parse_one: Callable[..., Any], *args: Any
) -> tuple[Any, ...]:
    """``parse_one(f"{where}: {key}[i]", entry, *args)`` for every entry of list ``key``."""
    return tuple(parse_one(f"{where}: {key}[{i}]", t, *args) for i, t in enumerate(values[key]))


def parse_grid(
    where: str,
    values: Mapping[str, Any],
    parse_dataset: Callable[..., Any],
    key: str,
    parse_entry: Callable[..., Any],
    *args: Any,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The ``datasets`` (each with the study's default τ) and the entries of list ``key``
    (``parse_entry(where, entry, *args)``), their labels distinct within each list."""
    datasets = parse_entries(where, values, "datasets", parse_dataset, values["tau"])
    entries = parse_entries(where, values, key, parse_entry, *args)
    distinct_labels(
        where, datasets=[d.label for d in datasets], **{key: [e.label for e in entries]}
    )
    return datasets, entries


def distinct_labels(where: str, **labels: Sequence[str]) -> None:
    """Refuse a list of entries (keyword: its key) whose labels repeat."""
    for what, names in labels.items():
        dup = sorted({x for x in names if list(names).count(x) > 1})
        if dup:
            raise sc.fail(where, what, "entries with distinct labels (set 'label')", dup)


class PlainEntry:
    """Mixin of a frozen dataclass entry that enters a cell's parameters as `plain` JSON."""

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return plain(self)


def plain(entry: Any, *drop: str) -> dict[str, Any]:
    """A dataclass entry as plain JSON types (tuples as lists), without the fields ``drop``:
    how an entry enters a cell's parameters (and so its identity)."""
    out = json.loads(json.dumps(dataclasses.asdict(entry)))
    return {k: v for k, v in out.items() if k not in drop}


@dataclass(frozen=True)
class ProtocolEntry:
    """A checked protocol entry of any kind.

    Attributes
    ----------
    label : str
        Name of the line in tables and plots.
    name : str
        Registry name, or an extra name of the kind (``"adaptive"`` ...).
    options : mapping
        The protocol's own options (``calibration``, ``hash_pool``, ``d`` ...).
    longitudinal : bool
        A memoizing chain (ε∞, ε1) rather than a one-shot oracle (ε).
    takes_eps_1 : bool
        Whether the chain has a first round of its own (not dBitFlipPM).
    """

    label: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    longitudinal: bool = True
    takes_eps_1: bool = True

    @property
    def uses_alpha(self) -> bool:
        """Whether the entry runs once per α (a chain with ε1)."""
        return self.longitudinal and self.takes_eps_1

    def budget(self, eps_perm: float, eps_1: float | None) -> dict[str, float | None]:
        """The privacy parameters of the registry call at the grid point (ε∞, ε1): ε∞ (and
        ε1), or ε = ε∞ of a one-shot (:meth:`longldp.privacy.Budget.at_level`)."""
        takes = ("eps_perm", "eps_1") if self.takes_eps_1 else ("eps_perm",)
        return privacy.Budget.at_level(
            eps_perm, eps_1, takes if self.longitudinal else ("eps",)
        ).given()

    def as_json(self, *drop: str) -> dict[str, Any]:
        """The entry in a cell's parameters, without the fields ``drop`` (see `plain`)."""
        return plain(self, *drop)

    def build(self, k: int, eps_perm: float, eps_1: float | None = None) -> ll.FrequencyOracle:
        """The registry protocol at one budget (raises `ValueError` when unreachable)."""
        return ll.protocol(self.name, k=k, **self.options, **self.budget(eps_perm, eps_1))


#: Budget at which a protocol entry's options are checked before any data is read.
_PROBE = {"k": 64, "eps_perm": 1.0, "eps_1": 0.1}


def parse_protocol_entry(
    where: str,
    table: Any,
    *,
    name_key: str = "name",
    one_shot: bool = False,
    extra: Mapping[str, ProtocolEntry] | None = None,
    options: bool = True,
    extra_keys: Sequence[sc.Key] = (),
) -> tuple[ProtocolEntry, dict[str, Any]]:
    """Check one protocol entry: a registry name (or an extra name), a label and options.

    Parameters
    ----------
    where, table : str, mapping
        Location for messages (``"study.toml: protocols[1]"``) and the entry as read.
    name_key : str, default="name"
        The key holding the protocol's name.
    one_shot : bool, default=False
        Accept one-shot protocols too (otherwise longitudinal chains only).
    extra : mapping of str to ProtocolEntry, optional
        Names outside the registry (lower case) and the entry each stands for (label empty).
    options : bool, default=True
        Accept the protocol's own options as keys (and check them by building it once).
    extra_keys : sequence of Key
        More keys the kind accepts; their values are returned.

    Returns
    -------
    (ProtocolEntry, dict)
        The entry (label defaulting to the name) and the checked values of every key.

    Raises
    ------
    ValueError
        Unknown name or key, a grid parameter given as an option, or options the protocol
        refuses.
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    extra = dict(extra or {})
    infos = {i.name: i for i in ll.list_protocols() if one_shot or i.longitudinal}
    allowed = "one of " + ", ".join(repr(n) for n in [*extra, *infos])
    raw = table.get(name_key)
    if raw is None:
        raise ValueError(f"{where}: missing required key '{name_key}'.")
    name = sc.string(where, name_key, raw)
    option_names: list[str] = []
    if name.lower() in extra:
        entry = extra[name.lower()]
    else:
        try:
            name = ll.get_protocol_class(name).name
        except ValueError:
            raise sc.fail(where, name_key, allowed, raw) from None
        if name not in infos:
            raise sc.fail(where, name_key, f"a longitudinal protocol: {allowed}", raw)
        info = infos[name]
        if options:
            option_names = [p for p in info.parameters if p not in GRID_PARAMETERS]
        entry = ProtocolEntry("", name, {}, bool(info.longitudinal), "eps_1" in info.parameters)
    keys = [sc.Key(name_key, sc.string, required=True), sc.Key("label", sc.string), *extra_keys]
    keys += [sc.Key(o, option_value) for o in option_names]
    try:
        values = sc.check_table(where, table, keys)
    except ValueError as err:
        if any(g in table for g in GRID_PARAMETERS):
            raise ValueError(f"{err} (k, eps_perm and eps_1 come from the grid)") from None
        raise
    chosen = {o: values[o] for o in option_names if values[o] is not None}
    entry = ProtocolEntry(
        values["label"] or entry.name, entry.name, chosen, entry.longitudinal, entry.takes_eps_1
    )
    if option_names:
        buckets = chosen.get("b")
        probe_k = max(_PROBE["k"], buckets if isinstance(buckets, int) else 0)
        try:
            entry.build(probe_k, _PROBE["eps_perm"], _PROBE["eps_1"])
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}: bad options for {name}: {err}") from None
    return entry, values
