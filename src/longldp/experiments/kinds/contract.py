"""The kind contract: what a kind of study plugs into the runner (`longldp.experiments.kinds`).

- `Cell`: one unit of work, identified by the hash of everything it depends on;
- `StudyKind`: a kind's keys, parser, cells, cell runner, columns and summary defaults;
- `StudyLike`: what a kind reads of a checked study (the kinds never import
  `longldp.experiments.config`, which imports them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from longldp.experiments import _schema as sc

__all__ = ["Cell", "StudyKind", "StudyLike"]


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
