"""Presenting a decode: a Rich table and a plot of estimates with 95% intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from longldp.apps.rappor.decode import DecodeResult


def rich_table(result: DecodeResult, limit: int | None = 50) -> Any:
    """A :class:`rich.table.Table` of the detected strings (largest first)."""
    from rich.table import Table

    rows = result.table()
    s = result.summary
    caption = (
        f"{len(rows)} of {len(result.candidates)} candidates detected "
        f"({result.correction}, α = {result.alpha:g}); N = {result.n_reports:,}"
    )
    if "explained" in s:
        caption += (
            f"; variance explained {s['explained']:.1%}, noise {s['noise']:.1%}, "
            f"missing {s['missing']:.1%}"
        )
    table = Table(title="RAPPOR decode", caption=caption)
    for name in ("string", "estimate", "std error", "proportion", "95% interval", "p-value"):
        table.add_column(name, justify="left" if name == "string" else "right")
    for r in rows[:limit]:
        table.add_row(
            str(r["string"]),
            f"{r['estimate']:,.0f}",
            f"{r['std_error']:,.0f}",
            f"{r['proportion']:.4f}",
            f"[{r['ci_low']:,.0f}, {r['ci_high']:,.0f}]",
            f"{r['p_value']:.2e}",
        )
    return table


def plot_estimates(
    result: DecodeResult,
    path: str | Path,
    truth: dict[str, float] | None = None,
    limit: int = 60,
    title: str = "RAPPOR: detected strings (95% intervals)",
) -> Path:
    """Bar-and-whisker plot of the detected strings' estimated counts (optionally the truth)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result.table()[:limit]
    fig, ax = plt.subplots(figsize=(max(6, 0.18 * len(rows) + 2), 4))
    x = np.arange(len(rows))
    est = np.array([r["estimate"] for r in rows])
    err = 1.959964 * np.array([r["std_error"] for r in rows])
    ax.errorbar(x, est, yerr=err, fmt="o", ms=3, capsize=2, label="estimate ± 1.96 SE")
    if truth is not None:
        ax.plot(x, [truth.get(str(r["string"]), 0) for r in rows], "x", color="C3", label="true")
    ax.set_xticks(x, [str(r["string"]) for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("clients")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
