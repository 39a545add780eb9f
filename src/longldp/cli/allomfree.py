"""``longldp allomfree-tables`` and ``longldp allomfree-gains`` (the multidim application)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from longldp.cli._common import FIGURE_SUFFIXES, console, existing, output_file


def allomfree_tables_cmd(
    n: Annotated[int, typer.Option(help="Users, for V* (the paper: 10,000).")] = 10_000,
    calibration: Annotated[
        str, typer.Option(help="L-GRR calibration: 'paper' (as published) or 'exact'.")
    ] = "paper",
) -> None:
    """Regenerate ALLOMFREE Tables 1-2 (analytic V*) beside the paper's printed cells."""
    from longldp.apps.multidim.tables import allomfree_tables

    typer.echo(allomfree_tables(n, calibration=calibration).format())


def allomfree_gains_cmd(
    results: Annotated[Path, typer.Argument(help="results.parquet of a multidim study.")],
    out: Annotated[Path | None, typer.Option(help="Also write the Markdown table here.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Also draw the gains to this file (.png, .pdf or .svg)."),
    ] = None,
) -> None:
    """Gains of ALLOMFREE over SMP+L-SUE and SMP+L-OUE (Tables 3-4) beside the paper's."""
    from longldp.experiments.reports.multidim import format_gain_table, gain_table, plot_gains

    existing(results, "RESULTS")
    if out is not None:
        output_file(out, "--out")
    if plot is not None:
        output_file(plot, "--plot", FIGURE_SUFFIXES)
    rows = gain_table(results)
    text = format_gain_table(rows)
    typer.echo(text)
    if out is not None:
        out.write_text(text + "\n")
    if plot is not None:
        console().print(f"Plot written to {plot_gains(rows, plot)}.")


def register(app: typer.Typer) -> None:
    """Add ``allomfree-tables`` and ``allomfree-gains`` to ``app``."""
    app.command("allomfree-tables")(allomfree_tables_cmd)
    app.command("allomfree-gains")(allomfree_gains_cmd)
