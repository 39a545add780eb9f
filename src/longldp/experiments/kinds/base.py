"""What every kind of study shares: the kind contract, common keys, entries, grid and rows.

A kind is a short module over this one (see `longldp.experiments.kinds`):

- the contract: `Cell` (one unit of work, identified by the hash of everything it depends
  on), `StudyKind` (what a kind plugs into the runner) and `StudyLike` (what a kind reads of a
  checked study; the kinds never import `longldp.experiments.config`, which imports them);
- study-file keys every kind spells the same way (`tau_key`, `engine_key`, `EPS_PERM`,
  `alpha_key`, `postprocess_key`, `entries_key`) and the checks of their entries
  (`parse_entries`, `distinct_labels`, `parse_protocol_entry` for protocol entries of any
  kind, with or without one-shot protocols and extra names such as ``"adaptive"``);
- grid expansion and cell seeding (`grid`): cells in the nested order of the axes, each with
  the spawn key ``(CELL, i1, i2, ...)`` of its indices (`longldp.experiments.seeding`);
- data and rows: `longitudinal_codes` (a dataset's attributes over τ timestamps, whole rows
  permuted), `SkipReasons`, `skipped_rows`, `apply_postprocess`, `postprocess_rows` and
  `mse_columns`;
- `columns`, the Arrow fields of a kind's rows from a compact text.

Nothing here changes a cell's identity: the parameters a kind puts in its cells, and so the
cell ids and random streams of committed results, are the kind's own.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

import longldp as ll
from longldp import postprocess as pp
from longldp import privacy
from longldp.data.longitudinal import permutations
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import attribute_codes

__all__ = [
    "EPS_PERM",
    "Cell",
    "GridSpec",
    "PlainEntry",
    "ProtocolEntry",
    "SkipReasons",
    "StudyKind",
    "StudyLike",
    "alpha_key",
    "alphas",
    "apply_postprocess",
    "budget_axes",
    "columns",
    "distinct_labels",
    "engine_key",
    "entries_key",
    "grid",
    "grid_values",
    "longitudinal_codes",
    "mse_columns",
    "option_value",
    "parse_entries",
    "parse_grid",
    "parse_protocol_entry",
    "plain",
    "postprocess_key",
    "postprocess_rows",
    "skipped_rows",
    "tau_key",
]

NONE = "none"
#: Parameters the grid sets; a protocol entry may not give them.
GRID_PARAMETERS = ("k", "eps_perm", "eps_1", "eps")


# ------------------------------------------------------------------------------- contract


class StudyLike(Protocol):
    """What a kind reads of a checked study (`longldp.experiments.config.Study`)."""

    name: str
    seed: int
    repetitions: int
    spec: Any
    out_dir: Any  # pathlib.Path or None: the run's output folder


@dataclass(frozen=True)
class Cell:
    """One unit of work of a study: a pure function of its fields.

    Parameters
    ----------
    kind : str
        Name of the kind whose ``run_cell`` runs it.
    entropy : int
        The study's base seed.
    spawn_key : tuple of int
        Position of the cell's own random stream (`longldp.experiments.seeding`).
    params : mapping
        Everything else the runner needs, JSON-serializable (dataset spec, protocol, ε∞ ...).
    order : int
        Position of the cell in the study's enumeration (the row order of the final table).

    Attributes
    ----------
    cell_id : str
        Hex digest of (kind, entropy, spawn_key, params): the name of the cell's saved part.
        Two cells with the same id compute the same rows; a changed config gives new ids.
    """

    kind: str
    entropy: int
    spawn_key: tuple[int, ...]
    params: Mapping[str, Any]
    order: int = 0
    cell_id: str = field(init=False)

    def __post_init__(self) -> None:
        blob = json.dumps(
            {
                "kind": self.kind,
                "entropy": int(self.entropy),
                "spawn_key": list(self.spawn_key),
                "params": self.params,
            },
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=True,
        )
        object.__setattr__(self, "cell_id", hashlib.sha256(blob.encode()).hexdigest()[:24])


@dataclass(frozen=True)
class StudyKind:
    """What a kind of study plugs into the experiment runner (`longldp.experiments.kinds`)."""

    name: str
    keys: tuple[sc.Key, ...]
    parse: Callable[[dict[str, Any], str], Any]
    cells: Callable[[Any], list[Cell]]
    run_cell: Callable[[Cell], list[dict[str, Any]]]
    columns: Sequence[pa.Field]
    summary_by: tuple[str, ...] = ()
    pivot: str = "eps_perm"
    metric: str = "mse_avg"
    #: Defaults of `longldp.experiments.plot_results` for this kind's tables (``x``, ``y``,
    #: ``figure_by``, ``panel_by``, ``line_by``, ``log_y``); empty: the MSE_avg-vs-ε∞ plot.
    plot: Mapping[str, Any] = field(default_factory=dict)
    #: More metrics ``longldp plot`` draws, each on a linear axis (set-valued: precision...).
    linear_metrics: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GridSpec:
    """What every kind's checked spec holds: datasets, the ε∞ and α grids, the engine.

    Each kind's spec extends it with its entries (protocols, solutions, oracles) and options.
    """

    datasets: tuple[Any, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...] | None
    engine: str


def grid_values(values: Mapping[str, Any], datasets: tuple[Any, ...]) -> dict[str, Any]:
    """The `GridSpec` fields: ``datasets`` and the grid keys of the checked top-level values."""
    return {
        "datasets": datasets,
        **{k: values[k] for k in ("eps_perm", "alpha", "engine")},
    }


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


# ------------------------------------------------------------------------------- keys


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


# ------------------------------------------------------------------------------- entries


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


# ------------------------------------------------------------------------------- grid

#: An axis of the grid: its values, or a function of the values chosen on the axes before it
#: returning (index, value) pairs.
Axis = Sequence[Any] | Callable[[Mapping[str, Any]], Iterable[tuple[int, Any]]]


def budget_axes(
    name: str, entries: Sequence[Any], spec: GridSpec, uses_alpha: Callable[[Any], bool]
) -> dict[str, Axis]:
    """The three inner axes of every kind: its entries (``name``), ε∞, and α for the entries
    that ``uses_alpha`` (the others run once, with α None)."""
    return {
        name: entries,
        "eps_perm": spec.eps_perm,
        "alpha": lambda v: alphas(spec.alpha, uses_alpha(v[name])),
    }


def alphas(grid_alpha: Sequence[float] | None, uses_alpha: bool) -> list[tuple[int, Any]]:
    """The α axis of one entry: every α of the grid, or the single (0, None) without ε1."""
    return list(enumerate(grid_alpha or ())) if uses_alpha else [(0, None)]


def grid(
    study: StudyLike,
    kind: str,
    axes: Mapping[str, Axis],
    params: Callable[[Mapping[str, Any], Mapping[str, int]], dict[str, Any]],
) -> list[Cell]:
    """Every cell of a study: the nested product of ``axes``, in their order.

    The cell at indices (i1, i2, ...) of the axes gets the spawn key ``(CELL, i1, i2, ...)``
    and ``params(values, indices)`` (both keyed by axis name); its order is its position.

    Parameters
    ----------
    study : StudyLike
        The checked study (its seed is the cells' entropy).
    kind : str
        The kind's name.
    axes : mapping of str to Axis
        Axis name -> its values (a sequence, enumerated) or a function of the values chosen
        so far returning (index, value) pairs.
    params : callable
        ``params(values, indices) -> dict``: the cell's JSON-serializable parameters.

    Returns
    -------
    list of Cell
    """
    names = list(axes)
    out: list[Cell] = []

    def walk(depth: int, values: dict[str, Any], at: dict[str, int]) -> None:
        if depth == len(names):
            key = (seeding.CELL, *at.values())
            out.append(Cell(kind, study.seed, key, params(values, at), len(out)))
            return
        name = names[depth]
        axis = axes[name]
        pairs = axis(values) if callable(axis) else enumerate(axis)
        for i, value in pairs:
            walk(depth + 1, {**values, name: value}, {**at, name: i})

    walk(0, {}, {})
    return out


class SkipReasons:
    """Why a protocol cannot run at a point of the grid (None when it can), memoized by key."""

    def __init__(self) -> None:
        self._seen: dict[Any, str | None] = {}

    def __call__(self, key: Any, build: Callable[..., Any], *args: Any) -> str | None:
        if key not in self._seen:
            try:
                build(*args)
            except ValueError as err:
                self._seen[key] = str(err)
            else:
                self._seen[key] = None
        return self._seen[key]


# ------------------------------------------------------------------------------- data, rows


@functools.lru_cache(maxsize=2)
def longitudinal_codes(
    dataset: str,
    attributes: tuple[str, ...],
    entropy: int,
    data_key: tuple[int, ...],
    perm_key: tuple[int, ...],
) -> tuple[np.ndarray, ...]:
    """Per attribute, values[τ, n] of one (dataset, repetition), cached per process.

    Timestamp 0 is the dataset; every later timestamp permutes whole rows (one permutation of
    the users per timestamp, drawn from stream ``perm_key``: `longldp.data.to_longitudinal`),
    so every user keeps a coherent tuple.

    Parameters
    ----------
    dataset : str
        ``json.dumps(DatasetSpec.as_json(), sort_keys=True)``.
    attributes : tuple of str
        The attributes wanted.
    entropy : int
        The study's base seed.
    data_key, perm_key : tuple of int
        Spawn keys of the synthetic data and of the permutations.

    Returns
    -------
    tuple of numpy.ndarray
        One read-only ``(τ, n)`` array per attribute.
    """
    spec = json.loads(dataset)
    codes = [np.asarray(attribute_codes(spec, a, entropy, data_key)) for a in attributes]
    perm = permutations(codes[0].size, spec["tau"], seeding.generator(entropy, perm_key))
    out = tuple(c[perm] for c in codes)
    for a in out:
        a.flags.writeable = False
    return out


def skipped_rows(
    base: Mapping[str, Any], column: str, values: Iterable[Any], reason: str
) -> list[dict[str, Any]]:
    """One ``status = "skipped"`` row per value of ``column``, with the reason."""
    return [{**base, column: v, "status": "skipped", "skip_reason": reason} for v in values]


def apply_postprocess(
    method: str,
    raw: np.ndarray,
    channel: pp.ChannelInfo | None,
    own: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> np.ndarray:
    """One post-processing applied to every timestamp (row) of raw estimates.

    ``"none"`` returns ``raw``; a name in ``own`` (a kind's own method) is applied row by row;
    any other name is `longldp.postprocess.apply` with total 1 and the protocol's channel.
    """
    if method == NONE:
        return raw
    if own and method in own:
        return np.stack([own[method](row) for row in raw])
    return np.stack([pp.apply(method, row, 1.0, channel) for row in raw])


def postprocess_rows(
    base: Mapping[str, Any],
    methods: Iterable[str],
    apply: Callable[[str], Any],
    score: Callable[[Any], Mapping[str, Any]],
    seconds: float,
) -> list[dict[str, Any]]:
    """One row per post-processing of the same raw estimates.

    ``apply(method)`` post-processes; a `ValueError` it raises makes a skipped row with the
    message. ``score(estimates)`` gives the metric columns. ``runtime_s`` is ``seconds`` (the
    shared simulation) plus the post-processing and scoring time of that row.
    """
    rows = []
    for method in methods:
        start = time.perf_counter()
        try:
            estimates = apply(method)
        except ValueError as err:
            rows += skipped_rows(base, "postprocess", [method], str(err))
            continue
        metrics = dict(score(estimates))
        runtime = seconds + time.perf_counter() - start
        ok = {"postprocess": method, "status": "ok", **metrics, "runtime_s": runtime}
        rows.append({**base, **ok})
    return rows


def mse_columns(per_t: np.ndarray, keep: bool = True) -> dict[str, Any]:
    """``mse_avg`` (the mean over timestamps, [002] eq. 1) and ``mse_per_timestamp``."""
    per_t = np.asarray(per_t, dtype=np.float64)
    return {
        "mse_avg": float(np.mean(per_t)),
        "mse_per_timestamp": [float(v) for v in per_t] if keep else None,
    }


# ------------------------------------------------------------------------------- columns

_ARROW = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}


def columns(text: str) -> tuple[pa.Field, ...]:
    """Arrow fields from ``"name:type name:[type] ..."`` (types str, int, float, bool; ``[t]``
    a list of t), in order."""
    out = []
    for item in text.split():
        name, kind = item.split(":")
        listed = kind.startswith("[")
        arrow = _ARROW[kind.strip("[]")]
        out.append(pa.field(name, pa.list_(arrow) if listed else arrow))
    return tuple(out)
