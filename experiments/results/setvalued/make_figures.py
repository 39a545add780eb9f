"""Tables and plots of the set-valued studies, from their results tables.

Run after the three studies (``longldp run experiments/<study>.toml --out results/<study>``)::

    .venv/bin/python experiments/results/setvalued/make_figures.py [--results results]

For each study it writes, beside this script: ``<study>.parquet`` (the results table; the
per-timestamp lists are dropped if the file would exceed 5 MB), ``<study>_summary.md`` (mean
over repetitions, one column per ε∞) and PNG plots (``<study>/``): the top-k MSE_avg on a log
axis with `longldp.experiments.plot.plot_results`, and precision, F1 and NCR on a linear axis.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from longldp.experiments.plot import plot_results

HERE = Path(__file__).resolve().parent
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


def means(table: pa.Table, metric: str) -> tuple[dict, list[float], dict]:
    """Mean and standard error of ``metric`` over repetitions per (group, ε∞)."""
    ok = table.filter(pc.equal(table["status"], "ok"))
    cols = {c: ok[c].to_pylist() for c in (*GROUP, "eps_perm", metric)}
    cells: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in range(ok.num_rows):
        key = tuple(cols[c][i] for c in GROUP)
        cells[key][cols["eps_perm"][i]].append(cols[metric][i])
    eps = sorted({e for v in cells.values() for e in v})
    mean = {k: {e: float(np.mean(v[e])) for e in v} for k, v in cells.items()}
    se = {
        k: {
            e: float(np.std(v[e], ddof=1) / np.sqrt(len(v[e]))) if len(v[e]) > 1 else 0.0 for e in v
        }
        for k, v in cells.items()
    }
    return mean, eps, se


def _se(values: list[float]) -> float:
    """Standard error of the mean (0 for one value)."""
    if len(values) < 2:
        return 0.0
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def markdown(table: pa.Table, metric: str, fmt: str) -> str:
    """One Markdown table: mean ``metric`` over repetitions, groups × ε∞."""
    mean, eps, _ = means(table, metric)
    head = "| dataset | app | target | protocol | " + " | ".join(f"ε={e:g}" for e in eps) + " |"
    lines = [head, "|" + "---|" * (4 + len(eps))]
    for key in mean:
        vals = [format(mean[key][e], fmt) if e in mean[key] else "–" for e in eps]
        lines.append("| " + " | ".join(map(str, key)) + " | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def linear_plots(table: pa.Table, out: Path, metrics: tuple[str, ...], line_by: str) -> None:
    """Mean ± 1.96 se of each metric against ε, one panel per dataset, one figure per target."""
    from matplotlib.figure import Figure

    for metric in metrics:
        mean, eps, se = means(table, metric)
        figures: dict[tuple, list[tuple]] = defaultdict(list)
        for key in mean:
            figures[(key[1], key[2])].append(key)
        for (app, target), keys in figures.items():
            datasets = list(dict.fromkeys(k[0] for k in keys))
            fig = Figure(figsize=(4.2 * len(datasets), 3.4), layout="constrained")
            axes = fig.subplots(1, len(datasets), squeeze=False)[0]
            for ax, ds in zip(axes, datasets, strict=True):
                for key in (k for k in keys if k[0] == ds):
                    xs = [e for e in eps if e in mean[key]]
                    ys = np.array([mean[key][e] for e in xs])
                    band = 1.96 * np.array([se[key][e] for e in xs])
                    label = key[3] if line_by == "protocol" else key[1]
                    ax.plot(xs, ys, marker="o", label=label)
                    ax.fill_between(xs, ys - band, ys + band, alpha=0.15)
                ax.set_title(ds)
                ax.set_xlabel("ε∞ (ε one-shot)")
                ax.set_ylabel(metric)
                ax.set_ylim(-0.02, 1.02)
                ax.grid(alpha=0.3)
            axes[-1].legend(fontsize=7)
            fig.suptitle(f"{app}: {target}, {metric} (mean, 95% band)")
            fig.savefig(out / f"{metric}_{app}_{target}.png", dpi=110)


def oneshot_plots(table: pa.Table, out: Path) -> None:
    """Precision and NCR of SVIM and LDPMiner per dataset (one-shot study)."""
    from matplotlib.figure import Figure

    for metric in ("precision", "ncr"):
        mean, eps, se = means(table, metric)
        datasets = list(dict.fromkeys(k[0] for k in mean))
        fig = Figure(figsize=(4.2 * len(datasets), 3.4), layout="constrained")
        axes = fig.subplots(1, len(datasets), squeeze=False)[0]
        for ax, ds in zip(axes, datasets, strict=True):
            for key in (k for k in mean if k[0] == ds):
                ys = np.array([mean[key][e] for e in eps])
                band = 1.96 * np.array([se[key][e] for e in eps])
                ax.plot(eps, ys, marker="o", label=key[1])
                ax.fill_between(eps, ys - band, ys + band, alpha=0.15)
            ax.set_title(ds)
            ax.set_xlabel("ε")
            ax.set_ylabel(metric)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        axes[-1].legend(fontsize=8)
        fig.suptitle(f"one-shot: SVIM vs LDPMiner, {metric} (k = 64, mean, 95% band)")
        fig.savefig(out / f"{metric}.png", dpi=110)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args()
    for study in STUDIES:
        src = args.results / study / "results.parquet"
        if not src.exists():
            print(f"{study}: {src} missing, skipped")
            continue
        table = save_table(pq.read_table(src), HERE / f"{study}.parquet")
        out = HERE / study
        out.mkdir(exist_ok=True)
        parts = [f"# {study}: mean over repetitions\n"]
        metrics = ("mse_avg", "precision", "f1", "ncr")
        for metric in metrics:
            fmt = ".3e" if metric == "mse_avg" else ".3f"
            parts.append(f"## {metric}\n\n{markdown(table, metric, fmt)}\n")
        (HERE / f"{study}_summary.md").write_text("\n".join(parts))
        if study == "setvalued_oneshot":
            oneshot_plots(table, out)
        else:
            plot_results(
                table,
                out,
                x="eps_perm",
                y="mse_avg",
                figure_by=("app", "target"),
                panel_by=("dataset",),
                line_by="protocol",
            )
            linear_plots(table, out, ("precision", "ncr"), "protocol")
        print(f"{study}: {table.num_rows} rows -> {HERE}")


if __name__ == "__main__":
    main()
