"""Kinds of study: a registry from a ``kind`` name to its keys, cells and cell runner.

A kind is one small module that defines a module-level ``KIND = StudyKind(...)``:

- ``keys``: the kind's own top-level keys of the study file (`longldp.experiments._schema.Key`);
- ``parse(values, where) -> spec``: turns the checked values into the kind's spec (deeper
  checks too; ``where`` starts error messages);
- ``cells(study) -> list[Cell]``: the grid, one `Cell` per unit of work, in table order;
- ``run_cell(cell) -> list[dict]``: the rows of one cell. It must be a module-level function
  (a worker process or a Dask worker imports it by name) and a pure function of the cell;
- ``columns``: the Arrow fields of the kind's rows (the runner adds the common columns);
- ``summary_by`` / ``pivot`` / ``metric``: how ``longldp run`` summarizes the table.

Built-in kinds are imported lazily from `BUILTIN_KINDS` (name -> module); other code can add
one with `register_kind`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from longldp.experiments._schema import Key

if TYPE_CHECKING:
    import pyarrow as pa

    from longldp.experiments.config import Study

__all__ = [
    "BUILTIN_KINDS",
    "Cell",
    "StudyKind",
    "get_kind",
    "kind_names",
    "register_kind",
]

#: Kinds shipped with longldp: name -> module that defines ``KIND``.
BUILTIN_KINDS: dict[str, str] = {
    "standalone": "longldp.experiments.kinds.standalone",
    "multidim": "longldp.experiments.kinds.multidim",
    "felip": "longldp.experiments.kinds.felip",
    "setvalued": "longldp.experiments.kinds.setvalued",
}

_REGISTERED: dict[str, StudyKind] = {}


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
    """What a kind of study plugs into the experiment runner (see the module docstring)."""

    name: str
    keys: tuple[Key, ...]
    parse: Callable[[dict[str, Any], str], Any]
    cells: Callable[[Study], list[Cell]]
    run_cell: Callable[[Cell], list[dict[str, Any]]]
    columns: Sequence[pa.Field]
    summary_by: tuple[str, ...] = ()
    pivot: str = "eps_perm"
    metric: str = "mse_avg"


def register_kind(kind: StudyKind) -> None:
    """Make ``kind`` available under ``kind.name`` (replacing a kind of that name)."""
    if not isinstance(kind, StudyKind):
        raise ValueError(f"register_kind: 'kind' must be a StudyKind; got {kind!r}.")
    _REGISTERED[kind.name] = kind


def kind_names() -> list[str]:
    """Names accepted by the ``kind`` key: built-in and registered kinds."""
    return list(dict.fromkeys([*BUILTIN_KINDS, *_REGISTERED]))


def get_kind(name: str) -> StudyKind:
    """The kind registered as ``name``; built-in kinds are imported on first use."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in BUILTIN_KINDS:
        module = importlib.import_module(BUILTIN_KINDS[name])
        kind = module.KIND
        _REGISTERED[name] = kind
        return kind
    raise ValueError(
        f"key 'kind' must be one of {', '.join(repr(k) for k in kind_names())}; got {name!r}."
    )
