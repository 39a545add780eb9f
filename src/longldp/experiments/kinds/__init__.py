"""Kinds of study: a registry from a ``kind`` name to its keys, cells and cell runner.

A kind is one small module that defines a module-level ``KIND = StudyKind(...)``:

- ``keys``: the kind's own top-level keys of the study file (`longldp.experiments._schema.Key`);
- ``parse(values, where) -> spec``: turns the checked values into the kind's spec (deeper
  checks too; ``where`` starts error messages);
- ``cells(study) -> list[Cell]``: the grid, one `Cell` per unit of work, in table order;
- ``run_cell(cell) -> list[dict]``: the rows of one cell. It must be a module-level function
  (a worker process or a Dask worker imports it by name) and a pure function of the cell;
- ``columns``: the Arrow fields of the kind's rows (the runner adds the common columns);
- ``summary_by`` / ``pivot`` / ``metric``: how ``longldp run`` summarizes the table;
- ``plot`` / ``linear_metrics``: how ``longldp plot`` draws it (the layout of
  `longldp.experiments.plot.plot_results`, and more metrics on linear axes: `plot_study`).

What the kinds share is written once, one module per concern: `contract` (`Cell`, `StudyKind`,
`StudyLike`), `keys` (common keys and protocol entries), `grid` (grid expansion and seeding) and
`rows` (data over τ, skipped and post-processed rows, Arrow columns); `base` re-exports them
all, so each kind is a short module over ``base``. The kinds import neither this
package's callers nor `longldp.experiments.config` (which imports them).

Built-in kinds are imported lazily from `BUILTIN_KINDS` (name -> module); other code can add
one with `register_kind`.
"""

from __future__ import annotations

import importlib

from longldp.experiments.kinds.contract import Cell, StudyKind

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
    "gfim": "longldp.experiments.kinds.gfim",
    "attacks": "longldp.experiments.kinds.attacks",
    "heavy_hitters": "longldp.experiments.kinds.heavy_hitters",
    "changing": "longldp.experiments.kinds.changing",
    "numeric": "longldp.experiments.kinds.numeric",
    "mixed": "longldp.experiments.kinds.mixed",
}

_REGISTERED: dict[str, StudyKind] = {}


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
