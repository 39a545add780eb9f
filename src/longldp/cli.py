"""The ``longldp`` command."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import longldp as ll

app = typer.Typer(add_completion=False, help="Local differential privacy over longitudinal data.")
# Wide enough for the tables when output is piped (Rich assumes 80 columns off a terminal).
console = Console(width=None if sys.stdout.isatty() else 160)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder for the plot.")] = Path("demo-output"),
    seed: Annotated[int, typer.Option(help="Base seed of the run.")] = 2026,
) -> None:
    """Compare every longitudinal protocol on synthetic Zipf data; print MSE_avg, write a plot."""
    from longldp.experiments.demo import N_USERS, TAU, plot_demo, run_demo

    start = time.perf_counter()
    with console.status(f"Simulating {N_USERS:,} users over {TAU} timestamps..."):
        rows = run_demo(seed)
    table = Table(title="MSE_avg by protocol and ε∞ (ε1 = 0.4·ε∞), per-user engine")
    for col in ("protocol", "ε∞", "ε1", "MSE_avg", "analytic", "ratio", "max spent ε"):
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for r in rows:
        table.add_row(
            r.protocol,
            f"{r.eps_perm:g}",
            f"{r.eps_1:.2g}",
            f"{r.mse_avg:.3e}",
            f"{r.expected_mse:.3e}",
            f"{r.mse_avg / r.expected_mse:.2f}",
            f"{r.max_spent_epsilon:.2f}",
        )
    console.print(table)
    path = plot_demo(rows, out / "mse_avg.png")
    console.print(f"Plot written to {path} ({time.perf_counter() - start:.1f} s).")


@app.command("protocols")
def protocols_cmd(
    k: Annotated[int, typer.Option(help="Domain size.")] = 74,
    eps_perm: Annotated[float, typer.Option(help="ε∞ (one-shot oracles: ε).")] = 2.0,
    alpha: Annotated[float, typer.Option(help="α = ε1/ε∞ for the chains.")] = 0.4,
    n: Annotated[int, typer.Option(help="Users, for V*.")] = 45_222,
) -> None:
    """Print every protocol with its privacy parameters and V* at the given setting."""
    table = Table(title=f"k = {k}, ε∞ = {eps_perm:g}, α = {alpha:g}, n = {n:,}")
    for col in ("protocol", "kind", "g", "p1", "q1", "p2", "q2", "ε one report", "ε memo", "V*"):
        table.add_column(col, justify="left" if col in ("protocol", "kind") else "right")
    for info in ll.list_protocols():
        params: dict = {"k": k}
        if not info.longitudinal:
            params["eps"] = eps_perm
        else:
            params["eps_perm"] = eps_perm
            if "eps_1" in info.parameters:
                params["eps_1"] = alpha * eps_perm
        try:
            proto = ll.protocol(info.name, **params)
        except ValueError as err:
            table.add_row(info.name, "", *[""] * 7, f"[red]{err}[/red]")
            continue
        table.add_row(
            info.name,
            "longitudinal" if info.longitudinal else "one-shot",
            str(getattr(proto, "g", "")),
            *(f"{x:.4g}" for x in (proto.p1, proto.q1, proto.p2, proto.q2)),
            f"{proto.single_report_epsilon():.4g}",
            f"{proto.first_round_epsilon():.4g}" if info.longitudinal else "-",
            f"{proto.approx_variance(n):.4e}",
        )
    console.print(table)


@app.command()
def datasets() -> None:
    """List the bundled datasets with their size, attributes and provenance."""
    from longldp.data import list_datasets

    table = Table(title="Bundled datasets (see DATA.md)")
    for col in ("name", "kind", "n", "attributes (domain size)", "source"):
        table.add_column(col)
    for info in list_datasets():
        attrs = getattr(info, "attributes", {}) or {}
        shown = ", ".join(f"{a} ({d})" for a, d in list(dict(attrs).items())[:8])
        if len(attrs) > 8:
            shown += f", … ({len(attrs)} in all)"
        table.add_row(
            info.name,
            str(getattr(info, "kind", "")),
            f"{getattr(info, 'n', 0):,}",
            shown,
            str(getattr(info, "source", "")),
        )
    console.print(table)


@app.command()
def run(
    study: Annotated[Path, typer.Argument(help="Study file (TOML).")],
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: results/<study name>).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Local worker processes (default: all CPUs; 1 runs in-process)."),
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address; run the cells on that cluster.")
    ] = None,
) -> None:
    """Run a study's grid (resuming a previous run in the same folder); write results.parquet."""
    from longldp.experiments import load_study, run_study, summarize

    try:
        spec = load_study(study)
        report = run_study(spec, out, workers=workers, scheduler=scheduler, console=console)
    except (ValueError, RuntimeError) as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted[/yellow]: finished cells are saved; run the same "
            "command again to resume."
        )
        raise typer.Exit(130) from None
    import pyarrow.parquet as pq

    kind = spec.study_kind
    summary = summarize(pq.read_table(report.path), kind.summary_by, kind.pivot, kind.metric, 60)
    table = Table(title=f"{spec.name}: mean {kind.metric} over {spec.repetitions} repetition(s)")
    for i, col in enumerate(summary.header):
        table.add_column(col, justify="left" if i < len(kind.summary_by) else "right")
    for row in summary.rows:
        table.add_row(*row)
    console.print(table)
    if summary.omitted:
        console.print(f"... {summary.omitted} more rows in the table.")
    console.print(
        f"{report.rows:,} rows ({report.cells:,} cells: {report.computed:,} computed, "
        f"{report.resumed:,} resumed) in {report.seconds:.1f} s -> {report.path}"
    )


@app.command()
def plot(
    results: Annotated[Path, typer.Argument(help="results.parquet written by 'longldp run'.")],
    out: Annotated[
        Path | None, typer.Option(help="Folder for the PNG files (default: plots/ beside it).")
    ] = None,
    band: Annotated[
        str, typer.Option(help="95% band over repetitions: 't' (of the mean) or 'percentile'.")
    ] = "t",
) -> None:
    """Draw MSE_avg against ε∞ (log scale, a panel per dataset) from a results table."""
    from longldp.experiments import plot_results

    try:
        paths = plot_results(results, out, band_kind=band)
    except ValueError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None
    for path in paths:
        console.print(str(path))


@app.command("allomfree-tables")
def allomfree_tables_cmd(
    n: Annotated[int, typer.Option(help="Users, for V* (the paper: 10,000).")] = 10_000,
    calibration: Annotated[
        str, typer.Option(help="L-GRR calibration: 'paper' (as published) or 'exact'.")
    ] = "paper",
) -> None:
    """Regenerate ALLOMFREE Tables 1-2 (analytic V*) beside the paper's printed cells."""
    from longldp.apps.multidim.tables import allomfree_tables

    try:
        tables = allomfree_tables(n, calibration=calibration)
    except ValueError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from None
    typer.echo(tables.format())


@app.command("allomfree-gains")
def allomfree_gains_cmd(
    results: Annotated[Path, typer.Argument(help="results.parquet of a multidim study.")],
    out: Annotated[Path | None, typer.Option(help="Also write the Markdown table here.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Also draw the gains to this PNG.")] = None,
) -> None:
    """Gains of ALLOMFREE over SMP+L-SUE and SMP+L-OUE (Tables 3-4) beside the paper's."""
    from longldp.experiments.kinds.multidim import format_gain_table, gain_table, plot_gains

    try:
        rows = gain_table(results)
    except ValueError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from None
    text = format_gain_table(rows)
    typer.echo(text)
    if out is not None:
        out.write_text(text + "\n")
    if plot is not None:
        console.print(f"Plot written to {plot_gains(rows, plot)}.")


if __name__ == "__main__":  # pragma: no cover
    app()
