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

from longldp.experiments.kinds import contract as _contract
from longldp.experiments.kinds import grid as _grid
from longldp.experiments.kinds import keys as _keys
from longldp.experiments.kinds import rows as _rows
from longldp.experiments.kinds.contract import *  # noqa: F403  (re-exported, see above)
from longldp.experiments.kinds.grid import *  # noqa: F403
from longldp.experiments.kinds.keys import *  # noqa: F403
from longldp.experiments.kinds.rows import *  # noqa: F403

__all__ = sorted({*_contract.__all__, *_grid.__all__, *_keys.__all__, *_rows.__all__})
