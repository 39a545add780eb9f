"""Reports of ``setvalued`` results tables: compact tables, summaries and figures.

Run after the studies (``longldp run experiments/<study>.toml --out results/<study>``)::

    python -m longldp.experiments.reports.setvalued --results results \
        --out experiments/results/setvalued

For each study found under ``--results`` (or, without it, from the table already kept in
``--out``) it writes into ``--out``: ``<study>.parquet`` (the results table; the per-timestamp
lists are dropped if the file would exceed 5 MB), ``<study>_summary.md`` (mean over
repetitions of MSE_avg, precision, F1 and NCR, one column per ε∞) and the figures
(``<study>/``, redrawn from scratch): top-k MSE_avg on a log axis and precision and NCR on a
linear axis, drawn by `longldp.experiments.plot.plot_results` (mean and 95% band over
repetitions). A study with a single protocol (the one-shot comparison of SVIM and LDPMiner)
gets one line per app instead of one per protocol. ``longldp plot`` draws the same kind of
figures for any set-valued table.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from longldp.experiments.plot import plot_results

__all__ = ["STUDIES", "main", "plot_study", "save_table", "summary_markdown"]

#: The shipped set-valued studies (``experiments/<name>.toml``).
STUDIES = ("svim_seed000", "svim_svsm_seed002", "setvalued_oneshot")
LIMIT = 5 * 2**20
LISTS = ("mse_t", "precision_t", "recall_t", "f1_t", "ncr_t")
GROUP = ("dataset", "app", "target", "protocol")


def save_table(table: pa.Table, path: Path) -> pa.Table:
    """Write ``table`` (without the per-timestamp lists if it would exceed 5 MB)."""
    pq.write_table(table, path, compression="zstd")
    if path.stat().st_size > LIMIT:
        table = table.drop_columns([c for c in LISTS if c in table.column_names])
        pq.write_table(table, path, compression="zstd")
    return table


def _means(table: pa.Table, metric: str) -> tuple[dict[tuple, dict[float, float]], list[float]]:
    """Mean of ``metric`` over repetitions per (dataset, app, target, protocol) and ε∞."""
    ok = table.filter(pc.equal(table["status"], "ok"))
    cols = {c: ok[c].to_pylist() for c in (*GROUP, "eps_perm", metric)}
    cells: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in range(ok.num_rows):
        cells[tuple(cols[c][i] for c in GROUP)][cols["eps_perm"][i]].append(cols[metric][i])
    eps = sorted({e for v in cells.values() for e in v})
    return {k: {e: float(np.mean(v[e])) for e in v} for k, v in cells.items()}, eps


def summary_markdown(table: pa.Table, name: str) -> str:
    """Mean MSE_avg, precision, F1 and NCR over repetitions: one Markdown table each."""
    parts = [f"# {name}: mean over repetitions\n"]
    for metric in ("mse_avg", "precision", "f1", "ncr"):
        fmt = ".3e" if metric == "mse_avg" else ".3f"
        mean, eps = _means(table, metric)
        head = "| " + " | ".join([*GROUP, *(f"ε={e:g}" for e in eps)]) + " |"
        lines = [head, "|" + "---|" * (len(GROUP) + len(eps))]
        for key, by_eps in mean.items():
            vals = [format(by_eps[e], fmt) if e in by_eps else "–" for e in eps]
            lines.append("| " + " | ".join([*map(str, key), *vals]) + " |")
        parts.append(f"## {metric}\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts)


def plot_study(table: pa.Table, out: Path) -> list[Path]:
    """MSE_avg (log axis), precision and NCR (linear axes) against ε∞; return the PNGs."""
    one_protocol = len(set(table.column("protocol").to_pylist())) == 1
    layout = (
        {"figure_by": (), "panel_by": ("dataset",), "line_by": "app"}
        if one_protocol
        else {"figure_by": ("app", "target"), "panel_by": ("dataset",), "line_by": "protocol"}
    )
    paths = plot_results(table, out, y="mse_avg", **layout)  # type: ignore[arg-type]
    for metric in ("precision", "ncr"):
        paths += plot_results(table, out, y=metric, log_y=False, **layout)  # type: ignore[arg-type]
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, required=True, help="folder for tables and figures")
    parser.add_argument("--study", action="append", help="study name (default: the shipped)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for study in args.study or STUDIES:
        src = args.results / study / "results.parquet"
        kept = args.out / f"{study}.parquet"
        if src.exists():
            table = save_table(pq.read_table(src), kept)
        elif kept.exists():  # redraw from the table kept in --out
            table = pq.read_table(kept)
        else:
            print(f"{study}: neither {src} nor {kept} exists, skipped")
            continue
        (args.out / f"{study}_summary.md").write_text(summary_markdown(table, study))
        figures = args.out / study
        for old in figures.glob("*.png"):  # the folder holds this report's figures only
            old.unlink()
        plot_study(table, figures)
        print(f"{study}: {table.num_rows} rows -> {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
