"""What every kind of study shares, in one namespace: contract, keys, grid and rows.

A kind is a short module over this one (see `longldp.experiments.kinds`); the pieces live in
one module per concern and are re-exported here, so a kind writes ``base.grid(...)``:

- `longldp.experiments.kinds.contract`: `Cell` (one unit of work, identified by the hash of
  everything it depends on), `StudyKind` (what a kind plugs into the runner) and `StudyLike`
  (what a kind reads of a checked study);
- `longldp.experiments.kinds.keys`: study-file keys every kind spells the same way
  (`tau_key`, `engine_key`, `EPS_PERM`, `alpha_key`, `postprocess_key`, `entries_key`) and the
  checks of their entries (`parse_entries`, `parse_grid`, `distinct_labels`, `plain`,
  `ProtocolEntry`, `parse_protocol_entry`);
- `longldp.experiments.kinds.grid`: grid expansion and cell seeding (`GridSpec`, `grid`,
  `budget_axes`, `alphas`, `SkipReasons`);
- `longldp.experiments.kinds.rows`: data and rows (`longitudinal_codes`, `skipped_rows`,
  `apply_postprocess`, `postprocess_rows`, `mse_columns`, `columns`).

Nothing here changes a cell's identity: the parameters a kind puts in its cells, and so the
cell ids and random streams of committed results, are the kind's own.
"""

from __future__ import annotations

from longldp.experiments.kinds.contract import Cell, StudyKind, StudyLike
from longldp.experiments.kinds.grid import (
    Axis,
    GridSpec,
    SkipReasons,
    alphas,
    budget_axes,
    grid,
    grid_values,
)
from longldp.experiments.kinds.keys import (
    EPS_PERM,
    GRID_PARAMETERS,
    NONE,
    PlainEntry,
    ProtocolEntry,
    alpha_key,
    distinct_labels,
    engine_key,
    entries_key,
    option_value,
    parse_entries,
    parse_grid,
    parse_protocol_entry,
    plain,
    postprocess_key,
    tau_key,
)
from longldp.experiments.kinds.rows import (
    apply_postprocess,
    columns,
    longitudinal_codes,
    mse_columns,
    postprocess_rows,
    skipped_rows,
)

__all__ = [
    "EPS_PERM",
    "GRID_PARAMETERS",
    "NONE",
    "Axis",
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
