"""``longldp demo``, ``longldp run`` and ``longldp plot``: studies and their figures."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from longldp.cli._common import (
    check_memory,
    check_scheduler,
    client_memory,
    console,
    existing,
    fail,
    input_file,
    output_folder,
    print_table,
)


def demo_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the plot.")] = Path("demo-output"),
    seed: Annotated[int, typer.Option(help="Base seed of the run (an integer >= 0).")] = 2026,
) -> None:
    """Compare every longitudinal protocol on synthetic Zipf data; print MSE_avg (and, column
    MLE, the MSE_avg of the same estimates after maximum-likelihood post-processing), write a
    plot."""
    from longldp.experiments.demo import N_USERS, TAU, plot_demo, run_demo

    if seed < 0:
        raise ValueError(f"'--seed' must be an integer >= 0; got {seed}.")
    output_folder(out, "--out")  # before the demo runs, not after
    con = console()
    start = time.perf_counter()
    with con.status(f"Simulating {N_USERS:,} users over {TAU} timestamps..."):
        rows = run_demo(seed)
    table = Table(title="MSE_avg by protocol and ε∞ (ε1 = 0.4·ε∞), per-user engine")
    for col in ("protocol", "ε∞", "ε1", "MSE_avg", "analytic", "ratio", "max spent ε", "MLE"):
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
            f"{r.mse_avg_mle:.3e}",
        )
    con.print(table)
    path = plot_demo(rows, out / "mse_avg.png")
    con.print(f"Plot written to {path} ({time.perf_counter() - start:.1f} s).")


def run_cmd(
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
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="If --out holds another study's results, delete them and run there."
        ),
    ] = False,
) -> None:
    """Run a study's grid (resuming a previous run in the same folder); write results.parquet."""
    from longldp.experiments import load_study, run_study, summarize

    input_file(study, "STUDY")
    if out is not None:
        output_folder(out, "--out")
    if workers is not None and workers < 1:
        raise ValueError(f"'--workers' must be an integer >= 1; got {workers}.")
    if scheduler is not None:
        check_scheduler(scheduler)
    con = console()
    try:
        spec = load_study(study)
        check_study_memory(spec, workers)
        with _sigterm_interrupts() as signals:
            report = run_study(
                spec, out, workers=workers, scheduler=scheduler, console=con, force=force
            )
    except RuntimeError as err:
        raise fail(str(err)) from None
    except KeyboardInterrupt:
        con.print(
            "[yellow]interrupted[/yellow]: finished cells are saved; run the same "
            "command again to resume."
        )
        # 128 + the signal: 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them.
        raise typer.Exit(128 + (signals[-1] if signals else signal.SIGINT)) from None
    import pyarrow.parquet as pq

    kind = spec.study_kind
    summary = summarize(pq.read_table(report.path), kind.summary_by, kind.pivot, kind.metric, 60)
    title = f"{spec.name}: mean {kind.metric} over {spec.repetitions} repetition(s)"
    print_table(con, title, summary.header, summary.rows, len(kind.summary_by))
    if summary.omitted:
        con.print(f"... {summary.omitted} more rows in the table.")
    con.print(
        f"{report.rows:,} rows ({report.cells:,} cells: {report.computed:,} computed, "
        f"{report.resumed:,} resumed) in {report.seconds:.1f} s -> {report.path}"
    )


@contextmanager
def _sigterm_interrupts() -> Iterator[list[int]]:
    """Turn SIGTERM into KeyboardInterrupt while a study runs, so that ``kill`` stops the
    worker processes and keeps the finished cells exactly as Ctrl-C does; yields the list of
    signals received."""
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (an embedding application): leave signals alone
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_study_memory(spec: Any, workers: int | None) -> None:
    """Refuse up front a study whose cells need more memory than the machine has.

    A cell of a dataset with n users over τ timestamps holds their values (8 bytes each per
    timestamp) and, with a per-user engine, the clients of the protocol it runs, whose memory
    per user is measured (`longldp.cli._common.client_memory`, at the dataset's k). Cells run
    ``workers`` at a time, so the largest cell counts once per worker. Kinds whose datasets do
    not say n, τ and k (set-valued data, …) are not checked here.
    """
    import longldp as ll
    from longldp.experiments.runner import default_workers

    grid = spec.spec
    datasets = getattr(grid, "datasets", ())
    protocols = getattr(grid, "protocols", ())
    engine = getattr(grid, "engine", "per-user")
    eps = max(getattr(grid, "eps_perm", (1.0,)) or (1.0,))
    alphas = getattr(grid, "alpha", None) or (0.5,)
    worst, where = 0.0, ""
    for ds in datasets:
        n, tau, ks = (getattr(ds, a, None) for a in ("n", "tau", "domain_sizes"))
        if not (isinstance(n, int) and isinstance(tau, int) and ks):
            continue
        k = max(ks)
        need = 8.0 * n * tau * 2  # the values over τ and the interpolation's copy
        per_user, label = 0, ""
        for entry in protocols if engine != "count-level" else ():
            budget: dict[str, float] = (
                {"eps": eps}
                if not getattr(entry, "longitudinal", True)
                else {"eps_perm": eps, "eps_1": eps * min(alphas)}
                if getattr(entry, "takes_eps_1", True)
                else {"eps_perm": eps}
            )
            try:
                proto = ll.protocol(entry.name, k=k, **budget, **dict(entry.options))
            except (ValueError, TypeError, AttributeError):
                continue  # a cell the grid skips, or a protocol built another way
            _, per = client_memory(proto)
            if per > per_user:
                per_user, label = per, entry.name
        need += n * per_user
        if need > worst:
            worst = need
            where = f"dataset {ds.label!r} (n = {n:,}, τ = {tau:,}, k = {k:,}" + (
                f", {label} clients)" if label else ")"
            )
    if not worst:
        return
    running = default_workers() if workers is None else workers
    check_memory(
        worst * running,
        f"a cell of {where}, {running} at a time (--workers)",
        "lower n, τ or k, or --workers.",
    )


def plot_cmd(
    results: Annotated[Path, typer.Argument(help="results.parquet written by 'longldp run'.")],
    out: Annotated[
        Path | None, typer.Option(help="Folder for the figures (default: plots/ beside it).")
    ] = None,
    band: Annotated[
        str, typer.Option(help="95% band over repetitions: 't' (of the mean) or 'percentile'.")
    ] = "t",
    x: Annotated[str | None, typer.Option(help="Column on the x axis (default: ε∞).")] = None,
    y: Annotated[
        str | None, typer.Option(help="Column on the y axis (default: the kind's metric).")
    ] = None,
    lines: Annotated[str | None, typer.Option(help="Column giving one line per value.")] = None,
    panels: Annotated[
        str | None, typer.Option(help="Comma-separated columns giving one panel per value.")
    ] = None,
    figures: Annotated[
        str | None, typer.Option(help="Comma-separated columns giving one figure per value.")
    ] = None,
    log_y: Annotated[
        bool | None, typer.Option("--log-y/--linear-y", help="Scale of the y axis.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="File format: png, pdf or svg (vector, for papers).")
    ] = "png",
    dpi: Annotated[int, typer.Option(help="Resolution in dots per inch (20 to 1200).")] = 110,
    ratios: Annotated[
        bool,
        typer.Option(
            "--ratios/--no-ratios",
            help="Under each panel, every line divided by the best one (tells close lines apart).",
        ),
    ] = True,
) -> None:
    """Draw a study's figures from its results table. Without options: every figure of its
    kind (MSE_avg against ε∞ on a log scale, a panel per dataset; set-valued studies also
    precision, F1 and NCR; gfim: precision). Options draw one chosen plot instead."""
    from longldp.experiments import plot_results, plot_study

    def cols(text: str | None) -> tuple[str, ...] | None:
        return None if text is None else tuple(c.strip() for c in text.split(",") if c.strip())

    existing(results, "RESULTS")
    if out is not None:
        output_folder(out, "--out")
    from longldp.experiments.plot import check_format

    fmt, dpi = check_format(fmt, dpi)  # refused before the table is read
    con = console()
    chosen = (x, y, lines, panels, figures, log_y)
    if all(c is None for c in chosen):
        paths = plot_study(results, out, band_kind=band, fmt=fmt, dpi=dpi, ratios=ratios)
    else:
        paths = plot_results(
            results,
            out,
            x=x,
            y=y,
            line_by=lines,
            panel_by=cols(panels),
            figure_by=cols(figures),
            band_kind=band,
            log_y=log_y,
            fmt=fmt,
            dpi=dpi,
            ratios=ratios,
        )
    for path in paths:
        con.print(str(path))


def register(app: typer.Typer) -> None:
    """Add ``run``, ``plot`` and ``demo`` to ``app``."""
    app.command("run")(run_cmd)
    app.command("plot")(plot_cmd)
    app.command("demo")(demo_cmd)
