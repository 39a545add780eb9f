"""Plots drawn from a results table (never from in-memory state, docs/design.md §5).

`plot_results` draws, for every combination of the ``figure_by`` columns (by default α and the
post-processing), one PNG with one panel per combination of the ``panel_by`` columns (dataset
and attribute): ``y`` (MSE_avg) against ``x`` (ε∞) on a log y-axis, one line per protocol,
the mean over repetitions with a 95% band.

Bands: ``"t"`` (default) is the Student t confidence interval of the mean,
mean ± t(0.975, r − 1)·s/√r with s the sample standard deviation of the r repetitions;
``"percentile"`` spans the 2.5th to 97.5th percentiles of the repetitions (the spread of one
repetition, not of the mean). With one repetition no band is drawn. On the log axis a lower
edge at or below zero is drawn at 1/1000 of the mean.

A row whose ``figure_by`` value is empty (a protocol without ε1, such as dBitFlipPM, has no α)
is drawn in every figure. Only rows with ``status == "ok"`` are plotted.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats

from longldp.experiments.store import read_results

__all__ = ["BANDS", "DEFAULTS", "band", "kind_defaults", "plot_results"]

BANDS = ("t", "percentile")
_LABELS = {
    "eps_perm": "ε∞",
    "alpha": "α",
    "mse_avg": "MSE_avg",
    "postprocess": "post-processing",
    "precision": "precision",
    "re": "median relative error",
}


def band(
    values: Sequence[float], kind: str = "t", level: float = 0.95
) -> tuple[float, float, float]:
    """Mean and band of repeated measurements.

    Parameters
    ----------
    values : sequence of float
        One value per repetition.
    kind : {"t", "percentile"}, default="t"
        Student t interval of the mean, or central percentile range of the values.
    level : float, default=0.95
        Coverage of the band.

    Returns
    -------
    tuple of float
        ``(mean, low, high)``; ``low = high = mean`` for a single value.
    """
    if kind not in BANDS:
        raise ValueError(f"band: 'kind' must be one of {BANDS}; got {kind!r}.")
    v = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(v))
    if v.size < 2:
        return mean, mean, mean
    if kind == "t":
        half = float(
            stats.t.ppf(0.5 + level / 2, v.size - 1) * np.std(v, ddof=1) / math.sqrt(v.size)
        )
        return mean, mean - half, mean + half
    lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
    return mean, float(lo), float(hi)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_")


#: What `plot_results` draws when neither the caller nor the table's kind says otherwise.
DEFAULTS: dict[str, Any] = {
    "x": "eps_perm",
    "y": "mse_avg",
    "figure_by": ("alpha", "postprocess"),
    "panel_by": ("dataset", "attribute"),
    "line_by": "protocol",
    "log_y": True,
}


def kind_defaults(table: pa.Table) -> dict[str, Any]:
    """`DEFAULTS` updated by the plot defaults of the table's study kind (its ``kind`` column)."""
    out = dict(DEFAULTS)
    if "kind" in table.column_names and table.num_rows:
        from longldp.experiments.kinds import get_kind

        with contextlib.suppress(ValueError):  # an unknown kind: the generic plot
            out.update(get_kind(str(table.column("kind")[0].as_py())).plot)
    return out


def plot_results(
    results: str | Path | pa.Table,
    out: str | Path | None = None,
    *,
    x: str | None = None,
    y: str | None = None,
    figure_by: Sequence[str] | None = None,
    panel_by: Sequence[str] | None = None,
    line_by: str | None = None,
    band_kind: str = "t",
    log_y: bool | None = None,
) -> list[Path]:
    """Draw ``y`` against ``x`` from a results table into PNG files; return their paths.

    Every argument left None takes the default of the table's study kind (`kind_defaults`:
    MSE_avg on a log axis against ε∞, one line per protocol, unless the kind says otherwise,
    e.g. the ``gfim`` kind: precision on a linear axis, one line per method).

    Parameters
    ----------
    results : str, Path or pyarrow.Table
        ``results.parquet`` (or its folder), or the table itself.
    out : str or Path, optional
        Folder for the PNG files (default: ``plots/`` beside the results file; required when
        a table is given).
    x, y : str
        Columns on the horizontal axis (linear) and vertical axis (log scale).
    figure_by : sequence of str
        One figure per combination of these columns.
    panel_by : sequence of str
        One panel per combination of these columns.
    line_by : str
        One line per value of this column.
    band_kind : {"t", "percentile"}
        How the 95% band over repetitions is computed (module docstring).
    log_y : bool, optional
        Log scale on the vertical axis (the default for MSE).

    Returns
    -------
    list of Path
        The PNG files written.
    """
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    if band_kind not in BANDS:
        raise ValueError(f"plot_results: 'band_kind' must be one of {BANDS}; got {band_kind!r}.")
    if isinstance(results, pa.Table):
        if out is None:
            raise ValueError("plot_results: 'out' is required when a table is given.")
        table = results
    else:
        table = read_results(results)
        p = Path(results)
        out = out if out is not None else (p if p.is_dir() else p.parent) / "plots"
    out_dir = Path(out)
    chosen = kind_defaults(table)
    given = {"x": x, "y": y, "figure_by": figure_by, "panel_by": panel_by, "line_by": line_by}
    chosen.update({k: v for k, v in given.items() if v is not None})
    if log_y is not None:
        chosen["log_y"] = log_y
    x, y, line_by = chosen["x"], chosen["y"], chosen["line_by"]
    figure_by, panel_by = tuple(chosen["figure_by"]), tuple(chosen["panel_by"])
    needed = {x, y, line_by, "status", *figure_by, *panel_by}
    missing = sorted(needed - set(table.column_names))
    if missing:
        raise ValueError(f"plot_results: the results table has no column(s) {missing}.")
    wanted = needed | ({"study"} & set(table.column_names))
    cols = {c: table.column(c).to_pylist() for c in wanted}
    keep = [
        i for i in range(table.num_rows) if cols["status"][i] == "ok" and cols[y][i] is not None
    ]
    if not keep:
        raise ValueError("plot_results: the table has no finished rows (status 'ok') to plot.")
    study = cols["study"][keep[0]] if "study" in cols else ""
    lines = list(dict.fromkeys(cols[line_by][i] for i in keep))
    colors = {label: f"C{j % 10}" for j, label in enumerate(lines)}
    markers = "osD^v<>ph*"
    styles = {label: markers[(j // 10) % len(markers)] for j, label in enumerate(lines)}

    def key(i: int, names: Sequence[str]) -> tuple:
        return tuple(cols[c][i] for c in names)

    figures = list(dict.fromkeys(key(i, figure_by) for i in keep if None not in key(i, figure_by)))
    if not figures:
        figures = list(dict.fromkeys(key(i, figure_by) for i in keep))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fig_key in figures:
        rows = [
            i
            for i in keep
            if all(v is None or v == f for v, f in zip(key(i, figure_by), fig_key, strict=True))
        ]
        panels = list(dict.fromkeys(key(i, panel_by) for i in rows))
        ncols = min(3, len(panels))
        nrows = math.ceil(len(panels) / ncols)
        fig = Figure(figsize=(5.2 * ncols, 3.9 * nrows + 0.9), dpi=110, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        reps = 0
        for ax, panel in zip(axes, panels, strict=False):
            mine = [i for i in rows if key(i, panel_by) == panel]
            for label in [lb for lb in lines if any(cols[line_by][i] == lb for i in mine)]:
                by_x: dict[float, list[float]] = {}
                for i in mine:
                    if cols[line_by][i] == label:
                        by_x.setdefault(cols[x][i], []).append(cols[y][i])
                xs = sorted(by_x)
                summary = np.array([band(by_x[v], band_kind) for v in xs])
                reps = max(reps, *(len(by_x[v]) for v in xs))
                mean, lo, hi = summary.T
                if chosen["log_y"]:
                    lo = np.where(lo > 0, lo, mean * 1e-3)
                ax.plot(xs, mean, marker=styles[label], ms=4, color=colors[label], label=str(label))
                ax.fill_between(xs, lo, hi, color=colors[label], alpha=0.18, linewidth=0)
            if chosen["log_y"]:
                ax.set_yscale("log")
            ax.set_xlabel(_LABELS.get(x, x))
            ax.set_ylabel(_LABELS.get(y, y))
            ax.set_title(" · ".join(_fmt(v) for v in panel), fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        handles, labels = [], []
        for ax in axes[: len(panels)]:
            for h, lb in zip(*ax.get_legend_handles_labels(), strict=True):
                if lb not in labels:
                    handles.append(h)
                    labels.append(lb)
        fig.legend(
            handles, labels, loc="outside lower center", ncols=min(5, len(labels)), fontsize=8
        )
        what = ", ".join(
            f"{_LABELS.get(c, c)} = {_fmt(v)}" for c, v in zip(figure_by, fig_key, strict=True)
        )
        interval = "t-interval" if band_kind == "t" else "percentile band"
        fig.suptitle(
            f"{study}: {_LABELS.get(y, y)} vs {_LABELS.get(x, x)} ({what}); "
            f"mean and 95% {interval} over {reps} repetition{'s' if reps != 1 else ''}",
            fontsize=10,
        )
        name = "_".join([y, *(f"{c}-{_fmt(v)}" for c, v in zip(figure_by, fig_key, strict=True))])
        path = out_dir / f"{_slug(name)}.png"
        fig.savefig(path)
        paths.append(path)
    return paths
