"""Summaries of the GFIM studies: mean ± sd tables, the thesis's numbers beside ours, the
evidence for the thesis's four comparative claims, and the figures.

Run after the four studies (``longldp run experiments/gfim_<name>.toml --out
experiments/results/gfim/<name>``)::

    python experiments/report_gfim.py [--results experiments/results/gfim]

Writes ``summary.md`` and the PNG figures into the results folder. Reads only the committed
results tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent
#: The thesis's single-run precision (GFIM thesis §4.4, Figs 5-1 to 5-8).
THESIS_PRECISION = {
    ("Laplace 50k", "GFIM"): 0.400,
    ("Normal 50k", "GFIM"): 0.267,
    ("Laplace 500k", "GFIM"): 0.967,
    ("Normal 500k", "GFIM"): 0.700,
    ("Laplace 50k", "LDPMiner-SH"): 0.267,
    ("Normal 50k", "LDPMiner-SH"): 0.300,
    ("Laplace 500k", "LDPMiner-SH"): 0.933,
    ("Normal 500k", "LDPMiner-SH"): 0.667,
}


def load(folder: Path) -> list[dict]:
    return pq.read_table(folder / "results.parquet").to_pylist()


def ms(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if a.size > 1 else f"{a.mean():.3f}"


def group(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["status"] == "ok":
            out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def synthetic(rows: list[dict]) -> list[str]:
    g = group(rows, "dataset", "method")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["## Study 1: synthetic (d = 1000, ℓ = 50, ε = 2, k = 30, k_max = 60)", ""]
    lines.append("Precision, mean ± sd over the repetitions; the thesis's single run in brackets.")
    lines.append("")
    lines.append("| data | " + " | ".join(methods) + " |")
    lines.append("|---|" + "---|" * len(methods))
    for d in datasets:
        cells = []
        for m in methods:
            thesis = THESIS_PRECISION.get((d, "GFIM" if m == "GFIM (thesis)" else m))
            extra = f" [{thesis:.3f}]" if thesis is not None else ""
            cells.append(ms([r["precision"] for r in g[(d, m)]]) + extra)
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines += ["", "Median relative error RE (estimate of every true top-k item), mean ± sd.", ""]
    lines.append("| data | " + " | ".join(methods) + " |")
    lines.append("|---|" + "---|" * len(methods))
    for d in datasets:
        lines.append(
            f"| {d} | " + " | ".join(ms([r["re"] for r in g[(d, m)]]) for m in methods) + " |"
        )
    lines += ["", "RE with 0 for true top-k items not output (the thesis's figures' reading).", ""]
    lines.append("| data | " + " | ".join(methods) + " |")
    lines.append("|---|" + "---|" * len(methods))
    for d in datasets:
        lines.append(
            f"| {d} | " + " | ".join(ms([r["re_zero"] for r in g[(d, m)]]) for m in methods) + " |"
        )
    ws = {m: g[(datasets[0], m)][0]["w"] for m in methods}
    lines += [
        "",
        "Weight of f̂2 on the candidates: " + ", ".join(f"{m}: {w:.3f}" for m, w in ws.items()),
        "",
    ]
    return lines


def sweep(rows: list[dict], x: str, title: str) -> tuple[list[str], dict]:
    g = group(rows, "method", x)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    xs = sorted({r[x] for r in rows})
    means = {
        (m, v, metric): float(np.mean([r[metric] for r in g[(m, v)]]))
        for m in methods
        for v in xs
        for metric in ("precision", "re", "re_zero")
    }
    lines = [title, ""]
    for metric, what in (
        ("precision", "Precision"),
        ("re", "RE"),
        ("re_zero", "RE (0 if not output)"),
    ):
        lines.append(f"{what}, mean ± sd over the repetitions:")
        lines.append("")
        lines.append(f"| {x} | " + " | ".join(methods) + " |")
        lines.append("|---|" + "---|" * len(methods))
        for v in xs:
            lines.append(
                f"| {v:g} | "
                + " | ".join(ms([r[metric] for r in g[(m, v)]]) for m in methods)
                + " |"
            )
        lines.append("")
    return lines, {"methods": methods, "xs": xs, "means": means}


def claims(k_sweep: dict, eps_sweep: dict) -> list[str]:
    lines = ["## The thesis's comparative claims: the evidence", ""]
    for gfim in [m for m in k_sweep["methods"] if m.startswith("GFIM")]:
        mk = k_sweep["means"]
        ks = k_sweep["xs"]
        p_win = [k for k in ks if mk[(gfim, k, "precision")] > mk[("LDPMiner-SH", k, "precision")]]
        re_win = [k for k in ks if mk[(gfim, k, "re")] < mk[("LDPMiner-SH", k, "re")]]
        re0_win = [k for k in ks if mk[(gfim, k, "re_zero")] < mk[("LDPMiner-SH", k, "re_zero")]]
        lines.append(
            f"1. {gfim} vs LDPMiner-SH at ε = 1: higher precision at k = {p_win} "
            f"({len(p_win)}/{len(ks)}); lower RE at {len(re_win)}/{len(ks)} k, lower RE(0) at "
            f"{len(re0_win)}/{len(ks)} k."
        )
        me, es = eps_sweep["means"], eps_sweep["xs"]
        p_e = [e for e in es if me[(gfim, e, "precision")] > me[("LDPMiner-SH", e, "precision")]]
        re_e = [e for e in es if me[(gfim, e, "re")] < me[("LDPMiner-SH", e, "re")]]
        lines.append(f"2. {gfim}: higher precision at ε = {p_e}; lower RE at ε = {re_e}.")
        for m in (gfim, "LDPMiner-SH"):
            p = [me[(m, e, "precision")] for e in es]
            r = [me[(m, e, "re")] for e in es]
            lines.append(
                f"   {m}: precision over ε {np.round(p, 3).tolist()}, RE {np.round(r, 3).tolist()}"
            )
        for m in (gfim, "LDPMiner-SH"):
            re_k = [mk[(m, k, "re")] for k in ks]
            re0_k = [mk[(m, k, "re_zero")] for k in ks]
            p_k = [mk[(m, k, "precision")] for k in ks]
            lines.append(
                f"3-4. {m}: argmin RE at k = {ks[int(np.argmin(re_k))]}, argmin RE(0) at "
                f"k = {ks[int(np.argmin(re0_k))]}; precision over k {np.round(p_k, 2).tolist()}; "
                f"RE over k {np.round(re_k, 3).tolist()}; "
                f"RE(0) over k {np.round(re0_k, 3).tolist()}"
            )
    return [*lines, ""]


def longitudinal(rows: list[dict]) -> list[str]:
    g = group(rows, "method")
    lines = ["## Study 4: longitudinal (Laplace 50k, τ = 20, 10% of users swap sets per step)", ""]
    lines.append("| method | precision (mean over t) | RE | memos per user (max) | ε spent (max) |")
    lines.append("|---|---|---|---|---|")
    for m, rs in g.items():
        lines.append(
            f"| {m[0]} | {ms([r['precision'] for r in rs])} | {ms([r['re'] for r in rs])} | "
            f"{max(r['memos_max'] for r in rs)} | {max(r['eps_spent_max'] for r in rs):.2f} |"
        )
    return [*lines, ""]


def figure_synthetic(rows: list[dict], path: Path) -> None:
    """Precision per dataset and method (mean ± sd), the thesis's single runs as crosses."""
    from matplotlib.figure import Figure

    g = group(rows, "dataset", "method")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig = Figure(figsize=(8, 3.8), dpi=110, layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        xs = np.arange(len(datasets)) + (j - (len(methods) - 1) / 2) * width
        vals = [[r["precision"] for r in g[(d, m)]] for d in datasets]
        ax.bar(
            xs,
            [np.mean(v) for v in vals],
            width,
            yerr=[np.std(v, ddof=1) for v in vals],
            label=m,
            color=f"C{j}",
            alpha=0.8,
            capsize=2,
        )
        thesis = [
            THESIS_PRECISION.get((d, "GFIM" if m == "GFIM (thesis)" else m)) for d in datasets
        ]
        if any(t is not None for t in thesis):
            ax.plot(xs, [np.nan if t is None else t for t in thesis], "kx", ms=7)
    ax.set_xticks(np.arange(len(datasets)), datasets)
    ax.set_ylabel("precision (top-30)")
    ax.set_ylim(0, 1)
    ax.set_title(
        "Synthetic, ε = 2, k = 30: mean ± sd over 20 runs; × = the thesis's single run", fontsize=9
    )
    ax.legend(fontsize=7, ncols=2)
    fig.savefig(path)


def figure_longitudinal(rows: list[dict], path: Path) -> None:
    """Precision at every timestamp, mean over repetitions, one line per method."""
    from matplotlib.figure import Figure

    g = group(rows, "method")
    fig = Figure(figsize=(7, 3.6), dpi=110, layout="constrained")
    ax = fig.subplots()
    for j, (m, rs) in enumerate(g.items()):
        per_t = np.mean([r["precision_t"] for r in rs], axis=0)
        ax.plot(np.arange(per_t.size), per_t, marker="o", ms=3, color=f"C{j}", label=m[0])
    ax.set_xlabel("timestamp t")
    ax.set_ylabel("precision (top-30)")
    ax.set_ylim(0, 1)
    ax.set_title("Longitudinal GFIM, Laplace 50k, ε∞ = 4, ε1 = 2 (mean over 20 runs)", fontsize=9)
    ax.legend(fontsize=7)
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "gfim")
    args = parser.parse_args()
    out: list[str] = ["# GFIM studies: summary (generated by experiments/report_gfim.py)", ""]
    folder = args.results
    if (folder / "synthetic" / "results.parquet").exists():
        out += synthetic(load(folder / "synthetic"))
        figure_synthetic(load(folder / "synthetic"), folder / "synthetic" / "precision.png")
    k_info = eps_info = None
    if (folder / "census_k" / "results.parquet").exists():
        lines, k_info = sweep(
            load(folder / "census_k"), "k", "## Study 2(a): Census-Income, ε = 1, k = 1..20"
        )
        out += lines
    if (folder / "census_eps" / "results.parquet").exists():
        lines, eps_info = sweep(
            load(folder / "census_eps"), "eps_perm", "## Study 2(b): Census-Income, k = 10"
        )
        out += lines
    if k_info and eps_info:
        out += claims(k_info, eps_info)
    if (folder / "longitudinal" / "results.parquet").exists():
        out += longitudinal(load(folder / "longitudinal"))
        figure_longitudinal(
            load(folder / "longitudinal"), folder / "longitudinal" / "precision_t.png"
        )
    (folder / "summary.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
