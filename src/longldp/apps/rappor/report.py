"""Presenting a decode: a Rich table and a plot of estimates with 95% intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from longldp.apps.rappor.decode import DecodeResult


def short_label(row: dict[str, object], shown: int = 4) -> str:
    """A row's string, an alias group cut to its first ``shown`` members: ``{a, b, … (9)}``."""
    members = list(row["members"])  # type: ignore[call-overload]
    if not row["aliased"] or len(members) <= shown:
        return str(row["string"])
    return "{" + ", ".join(members[:shown]) + f", … ({len(members)} strings)}}"


def rich_table(result: DecodeResult, limit: int | None = 50) -> Any:
    """A :class:`rich.table.Table` of the detected strings and alias groups (largest first).

    An alias group (``{a, b}``: candidates whose Bloom bits the counts cannot tell apart) is
    one row with the group's total, SE and test; the caption says how many groups there are.
    """
    from rich.table import Table

    rows = result.table()
    s = result.summary
    tests = int(s.get("tests", len(result.candidates)))
    caption = (
        f"{len(rows)} detected of {tests} tests over {len(result.candidates)} candidates "
        f"({result.correction}, α = {result.alpha:g}); N = {result.n_reports:,}"
    )
    if "explained" in s:
        caption += (
            f"; variance explained {s['explained']:.1%}, noise {s['noise']:.1%}, "
            f"missing {s['missing']:.1%}"
        )
    if result.groups:
        members = sum(len(g.members) for g in result.groups)
        caption += (
            f". {{a, b}}: one of {len(result.groups)} alias group(s) ({members} candidates) "
            "whose Bloom bits the counts cannot tell apart; each group is estimated and tested "
            "once, as a whole, never string by string"
        )
    table = Table(title="RAPPOR decode", caption=caption)
    for name in ("string", "estimate", "std error", "proportion", "95% interval", "p-value"):
        table.add_column(name, justify="left" if name == "string" else "right")
    for r in rows[:limit]:
        table.add_row(
            short_label(r),
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
        members = [list(r["members"]) for r in rows]  # type: ignore[call-overload]
        true = [sum(truth.get(str(s), 0) for s in names) for names in members]
        ax.plot(x, true, "x", color="C3", label="true")
    ax.set_xticks(x, [short_label(r, 2) for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("clients")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
