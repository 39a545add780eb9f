"""A compact summary of a results table: the mean metric over repetitions, pivoted.

Rows are the combinations of the ``by`` columns (e.g. dataset, attribute, protocol, α,
post-processing), columns are the values of the ``pivot`` column (e.g. ε∞), and each entry is
the mean of ``metric`` over the rows with ``status == "ok"`` (the repetitions). A combination
whose rows were all skipped shows ``skipped``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = ["Summary", "summarize"]


@dataclass(frozen=True)
class Summary:
    """Header and formatted rows of a summary (`summarize`)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    omitted: int = 0


def _fmt_key(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def summarize(
    table: pa.Table,
    by: Sequence[str],
    pivot: str = "eps_perm",
    metric: str = "mse_avg",
    max_rows: int | None = None,
) -> Summary:
    """Mean of ``metric`` over repetitions for every combination of ``by`` × ``pivot``.

    Parameters
    ----------
    table : pyarrow.Table
        A results table (`longldp.experiments.store.read_results`).
    by : sequence of str
        Columns that make a row of the summary.
    pivot : str, default="eps_perm"
        Column whose values become the summary's columns.
    metric : str, default="mse_avg"
        Column averaged.
    max_rows : int, optional
        Keep the first ``max_rows`` rows; `Summary.omitted` counts the others.

    Returns
    -------
    Summary
    """
    missing = [c for c in (*by, pivot, metric, "status") if c not in table.column_names]
    if missing:
        raise ValueError(f"summarize: the table has no column(s) {missing}.")
    cols = {c: table.column(c).to_pylist() for c in (*by, pivot, metric, "status")}
    groups: dict[tuple, dict[object, list[float]]] = {}
    pivots: list[object] = []
    for i in range(table.num_rows):
        key = tuple(cols[c][i] for c in by)
        pv = cols[pivot][i]
        if pv not in pivots:
            pivots.append(pv)
        cell = groups.setdefault(key, {}).setdefault(pv, [])
        if cols["status"][i] == "ok" and cols[metric][i] is not None:
            cell.append(cols[metric][i])
    pivots.sort(key=lambda v: (v is None, v))
    rows = []
    for key, by_pivot in groups.items():
        entries = []
        for pv in pivots:
            if pv not in by_pivot:
                entries.append("")
            elif not by_pivot[pv]:
                entries.append("skipped")
            else:
                entries.append(f"{float(np.mean(by_pivot[pv])):.3e}")
        rows.append((*(_fmt_key(k) for k in key), *entries))
    omitted = 0
    if max_rows is not None and len(rows) > max_rows:
        omitted = len(rows) - max_rows
        rows = rows[:max_rows]
    header = (*by, *(f"{pivot}={_fmt_key(p)}" for p in pivots))
    return Summary(tuple(header), tuple(rows), omitted)
