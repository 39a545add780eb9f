"""Plots drawn from a results table (never from in-memory state, docs/design.md §5).

`plot_results` draws, for every combination of the ``figure_by`` columns (by default α and the
post-processing), one figure (PNG, PDF or SVG at a chosen resolution) with one panel per
combination of the ``panel_by`` columns (dataset and attribute): ``y`` (MSE_avg) against ``x``
(ε∞) on a log y-axis (or a linear one), one line per protocol, the mean over repetitions with
a 95% band. Lines differ by colour, marker, line style and marker fill, and under every panel
a smaller one shows each line's mean divided by the best line's at the same x, so that lines
lying on each other (the unary-encoding and LOLOHA chains) can be told apart. Axes are
labelled in words. `plot_study` draws
every figure of a study with its kind's layout (`longldp.experiments.kinds.StudyKind`): what
``longldp plot`` does.

Bands: ``"t"`` (default) is the Student t confidence interval of the mean. On a linear axis it
is mean ± h, h = t(0.975, r − 1)·s/√r with s the sample standard deviation of the r
repetitions. On the log axis it is computed in log space (delta method: the standard error of
log(mean) is s/(√r·mean)), mean·exp(±h/mean): positive and symmetric on the axis it is drawn
on. ``"percentile"`` spans the 2.5th to 97.5th percentiles of the repetitions (the spread of
one repetition, not of the mean). With one repetition no band is drawn.

A row whose ``figure_by`` value is empty (a protocol without ε1, such as dBitFlipPM, has no α)
is drawn in every figure. Only rows with ``status == "ok"`` are plotted.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats

from longldp.experiments import store
from longldp.experiments.store import read_results

__all__ = [
    "BANDS",
    "DEFAULTS",
    "DPI_RANGE",
    "FORMATS",
    "HIGHER_IS_BETTER",
    "band",
    "kind_defaults",
    "line_styles",
    "plot_results",
    "plot_study",
    "ratio_panel",
]

BANDS = ("t", "percentile")
_LABELS = {
    "eps_perm": "privacy budget ε∞ (of the memoized answer)",
    "alpha": "α = ε1/ε∞",
    "mse_avg": "mean squared error, averaged over time",
    "postprocess": "post-processing",
    "precision": "precision",
    "re": "median relative error",
    "re_zero": "median relative error (missed items count as 0)",
    "ncr": "normalized cumulative rank",
    "tau": "τ (timestamps)",
    "f1": "F1 score",
    "dataset": "dataset",
    "protocol": "protocol",
}
#: Metrics for which a larger value is better (their ratio panel divides by the largest).
HIGHER_IS_BETTER = frozenset({"precision", "f1", "ncr", "recall"})
#: File formats `plot_results` writes, and the resolution range it accepts.
FORMATS = ("png", "pdf", "svg")
DPI_RANGE = (20, 1200)
_MARKERS = "osD^v<>ph*"
_LINESTYLES = ("-", "--", "-.", ":")


def wrap_phrases(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters, broken only between phrases.

    A figure's title reads "study: y vs x (a = 1, b = 2); mean and 95% band over r
    repetitions"; a line may end only after "; " or ", " (inside parentheses too), so that
    "ε∞ (of the memoized answer)" or "b = 2" never wraps in the middle. A single phrase longer
    than ``width`` keeps its own line whole.
    """
    pieces = re.split(r"(?<=[;,]) ", text)
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def band(
    values: Sequence[float], kind: str = "t", level: float = 0.95, *, log: bool = False
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
    log : bool, default=False
        For ``"t"``: the interval in log space, mean·exp(±h/mean) (module docstring), for a
        positive mean drawn on a log axis.

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
        if log:  # a mean <= 0 has no place on a log axis: no band
            if not mean > 0:
                return mean, mean, mean
            return mean, mean * math.exp(-half / mean), mean * math.exp(half / mean)
        return mean, mean - half, mean + half
    lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
    return mean, float(lo), float(hi)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_")


def line_styles(labels: Sequence[object]) -> dict[object, dict[str, object]]:
    """Matplotlib keywords of each line: colour, marker, line style and marker fill all vary
    with the line's position, so that no two of the first 20 lines look alike."""
    return {
        label: {
            "color": f"C{j % 10}",
            "marker": _MARKERS[j % len(_MARKERS)],
            "linestyle": _LINESTYLES[j % len(_LINESTYLES)],
            "fillstyle": "full" if j % 2 == 0 else "none",
        }
        for j, label in enumerate(labels)
    }


def check_format(fmt: object, dpi: object) -> tuple[str, int]:
    """The file format (one of `FORMATS`, any case) and the resolution (an integer in
    `DPI_RANGE`), or a one-line ValueError naming the bad one."""
    text = str(fmt).lower().lstrip(".")
    if text not in FORMATS:
        raise ValueError(f"plot: 'format' must be one of {', '.join(FORMATS)}; got {fmt!r}.")
    low, high = DPI_RANGE
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or not low <= dpi <= high:
        raise ValueError(f"plot: 'dpi' must be an integer in [{low}, {high}]; got {dpi!r}.")
    return text, int(dpi)


#: Lines whose ratio to the best stays within this factor form the "near-best" bundle that the
#: ratio panel zooms in on (linear axis); the others are named as off the scale.
NEAR_BEST = 3.0


def ratio_panel(
    ax: Any, means: dict[object, dict[float, float]], styles: dict[object, dict], metric: str
) -> None:
    """Each line's mean over the best line's mean at the same x (lowest, or highest for a
    `HIGHER_IS_BETTER` metric): 1 is the best. The axis is linear and zoomed on the lines
    within `NEAR_BEST` of the best (the ones that lie on each other above); lines farther
    away leave the axis and are named in the panel. With fewer than two such lines, a log axis
    shows every line."""
    higher = metric in HIGHER_IS_BETTER
    xs = sorted({v for m in means.values() for v in m})
    best = {}
    for v in xs:
        at = [m[v] for m in means.values() if v in m and np.isfinite(m[v]) and m[v] > 0]
        if at:
            best[v] = max(at) if higher else min(at)
    curves: dict[object, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    for label, m in means.items():
        pts = [(v, m[v] / best[v]) for v in sorted(m) if v in best and np.isfinite(m[v])]
        if pts:
            curves[label] = tuple(zip(*pts, strict=True))  # type: ignore[assignment]

    def distance(ys: Sequence[float]) -> float:  # how far from the best, as a factor ≥ 1
        worst = min(ys) if higher else max(ys)
        if worst <= 0:
            return math.inf
        return 1 / worst if higher else worst

    near = [lb for lb, (_, ys) in curves.items() if distance(ys) <= NEAR_BEST]
    for label, (px, py) in curves.items():
        ax.plot(px, py, ms=4, label=str(label), **styles[label])
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    if len(near) >= 2:
        far = max(distance(curves[lb][1]) for lb in near)
        span = max(far - 1, 0.02)
        if higher:
            ax.set_ylim(1 / far - 0.08 * span, 1 + 0.04 * span)
        else:
            ax.set_ylim(1 - 0.04 * span, far + 0.08 * span)
        off = [str(lb) for lb in curves if lb not in near]
        if off:
            ax.text(
                0.01,
                0.97 if not higher else 0.03,
                "beyond the axis: " + ", ".join(off),
                transform=ax.transAxes,
                ha="left",
                va="top" if not higher else "bottom",
                fontsize=7,
                color="0.35",
            )
    else:
        ax.set_yscale("log")
    ax.set_ylabel("÷ best (highest)" if higher else "÷ best (lowest)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)


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
    fmt: str = "png",
    dpi: int = 110,
    ratios: bool = True,
) -> list[Path]:
    """Draw ``y`` against ``x`` from a results table into image files; return their paths.

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
        Log scale on the vertical axis (the default for MSE; bands in log space); False for a
        linear axis (metrics in [0, 1] such as precision).
    fmt : {"png", "pdf", "svg"}
        File format (pdf and svg are vector graphics, for papers).
    dpi : int
        Resolution in dots per inch (of the PNG; of rasterized parts in pdf/svg), in
        `DPI_RANGE`.
    ratios : bool
        Under every panel with two lines or more, a panel of each line's mean divided by the
        best line's mean at each x (the lowest; the highest for `HIGHER_IS_BETTER` metrics),
        so that curves lying on each other in the main panel can be told apart.

    Returns
    -------
    list of Path
        The files written.
    """
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    if band_kind not in BANDS:
        raise ValueError(f"plot_results: 'band_kind' must be one of {BANDS}; got {band_kind!r}.")
    fmt, dpi = check_format(fmt, dpi)
    results_dir: Path | None = None
    if isinstance(results, pa.Table):
        if out is None:
            raise ValueError("plot_results: 'out' is required when a table is given.")
        table = results
    else:
        table = read_results(results)
        p = Path(results)
        results_dir = p if p.is_dir() else p.parent
        out = out if out is not None else results_dir / "plots"
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
    styles = line_styles(lines)
    log_y = bool(chosen["log_y"])

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
        with_ratios = ratios and len(lines) > 1
        width = max(6.4, 5.2 * ncols)
        legend_cols = max(1, min(len(lines), int(width / 1.9)))
        legend_rows = math.ceil(len(lines) / legend_cols)
        height = (5.3 if with_ratios else 3.9) * nrows + 0.9 + 0.22 * legend_rows
        fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
        if with_ratios:  # main axes first (fig.axes[:n]), each with its ratio panel below
            grid = fig.add_gridspec(2 * nrows, ncols, height_ratios=[3.0, 1.4] * nrows)
            axes = [fig.add_subplot(grid[2 * (j // ncols), j % ncols]) for j in range(len(panels))]
            ratio_axes = [
                fig.add_subplot(grid[2 * (j // ncols) + 1, j % ncols], sharex=ax)
                for j, ax in enumerate(axes)
            ]
        else:
            axes = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
            ratio_axes = []
        reps = 0
        for n_panel, (ax, panel) in enumerate(zip(axes, panels, strict=False)):
            mine = [i for i in rows if key(i, panel_by) == panel]
            means: dict[object, dict[float, float]] = {}
            for label in [lb for lb in lines if any(cols[line_by][i] == lb for i in mine)]:
                by_x: dict[float, list[float]] = {}
                for i in mine:
                    if cols[line_by][i] == label:
                        by_x.setdefault(cols[x][i], []).append(cols[y][i])
                xs = sorted(by_x)
                summary = np.array([band(by_x[v], band_kind, log=log_y) for v in xs])
                reps = max(reps, *(len(by_x[v]) for v in xs))
                mean, lo, hi = summary.T
                means[label] = dict(zip(xs, mean, strict=True))
                ax.plot(xs, mean, ms=5, label=str(label), **styles[label])  # type: ignore[arg-type]
                colour = styles[label]["color"]
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.15, linewidth=0)
            if log_y:
                ax.set_yscale("log")
            ax.set_ylabel(_LABELS.get(y, y))
            title = " · ".join(  # a bare number says which column it is: "τ = 260"
                _fmt(v) if isinstance(v, str) else f"{_LABELS.get(c, c)} = {_fmt(v)}"
                for c, v in zip(panel_by, panel, strict=True)
                if v is not None
            )
            if title:
                ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if with_ratios:
                ax.tick_params(labelbottom=False)
                ratio_panel(ratio_axes[n_panel], means, styles, y)
                ratio_axes[n_panel].set_xlabel(_LABELS.get(x, x))
            else:
                ax.set_xlabel(_LABELS.get(x, x))
        if not with_ratios:
            for ax in axes[len(panels) :]:
                ax.set_visible(False)
        handles, labels = [], []
        for ax in axes[: len(panels)]:
            for h, lb in zip(*ax.get_legend_handles_labels(), strict=True):
                if lb not in labels:
                    handles.append(h)
                    labels.append(lb)
        fig.legend(handles, labels, loc="outside lower center", ncols=legend_cols, fontsize=8)
        shown = [(c, v) for c, v in zip(figure_by, fig_key, strict=True) if v is not None]
        what = ", ".join(f"{_LABELS.get(c, c)} = {_fmt(v)}" for c, v in shown)
        interval = "t-interval" if band_kind == "t" else "percentile band"
        title = f"{study}: " if study else ""
        title += f"{_LABELS.get(y, y)} vs {_LABELS.get(x, x)}" + (f" ({what})" if what else "")
        title += f"; mean and 95% {interval} over {reps} repetition{'s' if reps != 1 else ''}"
        fig.suptitle(wrap_phrases(title, int(width * 12)), fontsize=10)
        name = "_".join([y, *(f"{c}-{_fmt(v)}" for c, v in shown)])
        path = out_dir / f"{_slug(name)}.{fmt}"
        fig.savefig(path, format=fmt, dpi=dpi)
        paths.append(path)
    if results_dir is not None:
        store.record_figures(results_dir, paths)
    return paths


def plot_study(
    results: str | Path,
    out: str | Path | None = None,
    *,
    band_kind: str = "t",
    fmt: str = "png",
    dpi: int = 110,
    ratios: bool = True,
) -> list[Path]:
    """Every figure of a study, with its kind's defaults: what ``longldp plot`` draws.

    The kind (the ``kind`` column) gives the layout (`kind_defaults`): its main plot, then
    each of its ``linear_metrics`` (set-valued: precision, F1, NCR) on a linear axis.

    Parameters
    ----------
    results : str or Path
        ``results.parquet`` written by ``longldp run`` (or its folder).
    out : str or Path, optional
        Folder for the PNG files (default: ``plots/`` beside the results file).
    band_kind : {"t", "percentile"}
        How the 95% band over repetitions is computed (module docstring).
    fmt, dpi, ratios
        As for `plot_results`.

    Returns
    -------
    list of Path
        The files written (also listed in the results folder's ``figures.json``).
    """
    from longldp.experiments.kinds import get_kind

    table = read_results(results)
    kinds = set(table.column("kind").to_pylist()) if "kind" in table.column_names else set()
    if len(kinds) != 1:
        raise ValueError(
            f"plot: {str(results)!r} is not a results table of one study (kinds {sorted(kinds)})."
        )
    kind = get_kind(str(kinds.pop()))
    fmt, dpi = check_format(fmt, dpi)
    style = {"band_kind": band_kind, "fmt": fmt, "dpi": dpi, "ratios": ratios}
    paths = plot_results(results, out, **style)  # type: ignore[arg-type]
    for metric in kind.linear_metrics:
        paths += plot_results(results, out, y=metric, log_y=False, **style)  # type: ignore[arg-type]
    return paths
