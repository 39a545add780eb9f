"""Reports of a ``felip`` results table: summary with 95% intervals, paired gaps, plots.

`summary_markdown` and `plot_study` turn a results table into the study's summary table (mean
MSE_avg with a 95% t-interval per dataset × oracle × ε∞, and paired gaps between two oracles,
`gap_rows`/`gap_markdown`) and its plots. Without the ``longldp`` command::

    python -m longldp.experiments.reports.felip RESULTS.parquet --out DIR
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["gap_markdown", "gap_rows", "main", "plot_study", "summary_markdown"]


def _ok_rows(table: pa.Table) -> list[dict[str, Any]]:
    cols = [c for c in table.column_names if c != "mse_per_timestamp"]
    return [r for r in table.select(cols).to_pylist() if r["status"] == "ok"]


def _fmt_ci(values: Sequence[float]) -> str:
    from longldp.experiments.plot import band

    mean, lo, hi = band(values)
    if len(values) < 2:
        return f"{mean:.3e}"
    return f"{mean:.3e} [{lo:.2e}, {hi:.2e}]"


def summary_markdown(table: pa.Table) -> str:
    """Mean MSE_avg with a 95% t-interval per dataset × oracle × ε∞, as a Markdown table.

    Parameters
    ----------
    table : pyarrow.Table
        A felip results table.

    Returns
    -------
    str
        One row per (dataset, oracle, α), one column per ε∞; entries ``mean [low, high]``.
    """
    rows = _ok_rows(table)
    eps = sorted({r["eps_perm"] for r in rows})
    groups: dict[tuple, dict[float, list[float]]] = {}
    reps = 0
    for r in rows:
        key = (r["dataset"], r["oracle"], r["alpha"])
        groups.setdefault(key, {}).setdefault(r["eps_perm"], []).append(r["mse_avg"])
    header = ["dataset", "oracle", "α", *(f"ε∞ = {e:g}" for e in eps)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (dataset, oracle, alpha), by_eps in groups.items():
        reps = max(reps, *(len(v) for v in by_eps.values()))
        cells_ = [_fmt_ci(by_eps[e]) if e in by_eps else "" for e in eps]
        a = "–" if alpha is None else f"{alpha:g}"
        lines.append("| " + " | ".join([dataset, oracle, a, *cells_]) + " |")
    note = (
        f"Mean MSE_avg over {reps} repetitions, with the 95% Student t interval of the mean "
        "in brackets."
    )
    return note + "\n\n" + "\n".join(lines) + "\n"


def gap_rows(table: pa.Table, better: str, worse: str) -> list[dict[str, Any]]:
    """Paired gap between two oracles per dataset and ε∞ (same repetitions, same α).

    Parameters
    ----------
    table : pyarrow.Table
        A felip results table.
    better, worse : str
        Oracle labels; the gap is ``MSE_avg(worse) − MSE_avg(better)`` per repetition.

    Returns
    -------
    list of dict
        Per (dataset, ε∞): ``ratio`` (mean of ``worse`` over mean of ``better``), the mean
        relative gap ``1 − mean(better)/mean(worse)``, the mean paired difference and its 95%
        t-interval, and the repetitions paired.
    """
    from longldp.experiments.plot import band

    rows = _ok_rows(table)
    index = {(r["dataset"], r["eps_perm"], r["alpha"], r["rep"], r["oracle"]): r for r in rows}
    out: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for (dataset, eps, alpha, rep, oracle), r in index.items():
        if oracle != better:
            continue
        other = index.get((dataset, eps, alpha, rep, worse))
        if other is not None:
            out.setdefault((dataset, eps), []).append((r["mse_avg"], other["mse_avg"]))
    result = []
    for (dataset, eps), pairs in out.items():
        b = np.array([p[0] for p in pairs])
        w = np.array([p[1] for p in pairs])
        mean, lo, hi = band(list(w - b))
        result.append(
            {
                "dataset": dataset,
                "eps_perm": eps,
                "ratio": float(w.mean() / b.mean()),
                "relative_gap": float(1.0 - b.mean() / w.mean()),
                "difference": mean,
                "low": lo,
                "high": hi,
                "reps": len(pairs),
            }
        )
    return result


def gap_markdown(table: pa.Table, better: str, worse: str) -> str:
    """`gap_rows` as a Markdown table (one row per dataset, one column per ε∞)."""
    rows = gap_rows(table, better, worse)
    if not rows:
        return ""
    eps = sorted({r["eps_perm"] for r in rows})
    header = ["dataset", *(f"ε∞ = {e:g}" for e in eps)]
    lines = [
        f"Paired gap MSE_avg({worse}) − MSE_avg({better}): mean difference [95% t-interval] "
        f"and, in parentheses, 1 − mean({better})/mean({worse}). A positive gap means "
        f"{better} is better.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        by_eps = {r["eps_perm"]: r for r in rows if r["dataset"] == dataset}
        entries = []
        for e in eps:
            r = by_eps.get(e)
            if r is None:
                entries.append("")
                continue
            rel = r["relative_gap"]
            entries.append(
                f"{r['difference']:+.2e} [{r['low']:+.1e}, {r['high']:+.1e}] "
                f"({'nan' if math.isnan(rel) else f'{100 * rel:+.1f}%'})"
            )
        lines.append("| " + " | ".join([dataset, *entries]) + " |")
    return "\n".join(lines) + "\n"


def plot_study(table: pa.Table, out: str | Path) -> list[Path]:
    """MSE_avg against ε∞: one PNG with a panel per dataset, and one PNG per dataset."""
    from longldp.experiments.plot import plot_results

    out_dir = Path(out)
    paths = plot_results(table, out_dir, figure_by=(), panel_by=("dataset",), line_by="oracle")
    combined = out_dir / "mse_avg_all_datasets.png"
    paths[0].replace(combined)
    per = plot_results(table, out_dir, figure_by=("dataset",), panel_by=("tau",), line_by="oracle")
    return [combined, *per]


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``summary.md`` and the plots of a felip results table (module docstring)."""
    import pyarrow.parquet as pq

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results.parquet of a felip study")
    parser.add_argument("--out", type=Path, default=None, help="folder (default: beside it)")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("BETTER", "WORSE"),
        help="oracle labels whose paired gap to tabulate (repeatable)",
    )
    args = parser.parse_args(argv)
    path = args.results / "results.parquet" if args.results.is_dir() else args.results
    table = pq.read_table(path)
    out = args.out if args.out is not None else path.parent
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# FELIP study: summary\n", summary_markdown(table)]
    for better, worse in args.pair or []:
        parts += ["", gap_markdown(table, better, worse)]
    (out / "summary.md").write_text("\n".join(parts))
    for p in plot_study(table, out):
        print(p)
    print(out / "summary.md")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
