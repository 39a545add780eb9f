"""Grid expansion and cell seeding, shared by every kind.

`GridSpec` (datasets, the ε∞ and α grids, the engine) is what every kind's spec extends;
`grid` enumerates the cells in the nested order of the axes, each with the spawn key
``(CELL, i1, i2, ...)`` of its indices (`longldp.experiments.seeding`); `budget_axes` and
`alphas` are the three inner axes every kind uses; `SkipReasons` memoizes why a protocol cannot
run at a point of the grid. Nothing here changes a cell's identity: the parameters a kind puts
in its cells, and so the cell ids and random streams of committed results, are the kind's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from longldp.experiments import seeding
from longldp.experiments.kinds.contract import Cell, StudyLike

__all__ = [
    "Axis",
    "GridSpec",
    "SkipReasons",
    "alphas",
    "budget_axes",
    "eps_1_at",
    "grid",
    "grid_values",
]


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


def eps_1_at(eps_perm: float, alpha: float | None) -> float | None:
    """ε1 = α·ε∞ at a grid point (docs/math.md §4.1); None for an entry without ε1."""
    return None if alpha is None else alpha * eps_perm


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
