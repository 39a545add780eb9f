"""``longldp simulate-reports`` and ``longldp aggregate``: report archives (docs/scale-out.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from longldp.cli._common import (
    available_memory,
    check_memory,
    check_scheduler,
    client_memory,
    console,
    human_bytes,
    nearest_existing,
    output_file,
    parse_assignments,
)


def protocol_from_words(name: str, words: list[str]):
    """``L-OSUE`` and ``["k=74", "eps_perm=2", "eps_1=0.8"]`` -> the protocol object."""
    import longldp as ll

    return ll.protocol(name, **parse_assignments(words))


def simulate_reports_cmd(
    protocol: Annotated[str, typer.Argument(help="Protocol name (see `longldp protocols`).")],
    params: Annotated[
        list[str] | None, typer.Argument(help="Protocol parameters: k=74 eps_perm=2 eps_1=0.8")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Archive file to write; the name must end in .parquet.")
    ] = Path("reports.parquet"),
    n: Annotated[int, typer.Option(help="Users (one report each per epoch).")] = 100_000,
    epochs: Annotated[int, typer.Option(help="Epochs (collection periods).")] = 1,
    distribution: Annotated[str, typer.Option(help="zipf or uniform.")] = "zipf",
    change: Annotated[float, typer.Option(help="Share of users changing value per epoch.")] = 0.0,
    chunk_users: Annotated[
        int, typer.Option(help="Users simulated at once (bounds the memory used).")
    ] = 1_000_000,
    collection: Annotated[str, typer.Option(help="Collection name.")] = "simulated",
    seed: Annotated[int, typer.Option(help="Simulation seed (>= 0).")] = 0,
) -> None:
    """Write the reports a simulated population would send, as a report archive.

    Refused before anything is written when the archive would not fit on the disk or one
    chunk of users would not fit in the memory available; shows progress on a terminal.
    """
    from longldp.archive import simulate_reports
    from longldp.archive.simulate import MAX_EPOCHS

    output_file(out, "--out", (".parquet",))
    if seed < 0:
        raise ValueError(f"'--seed' must be an integer >= 0; got {seed}.")
    for option, value, top in (
        ("--n", n, None),
        ("--epochs", epochs, MAX_EPOCHS),
        ("--chunk-users", chunk_users, None),
    ):
        if value < 1 or (top is not None and value > top):
            allowed = ">= 1" if top is None else f"in [1, {top:,}] (epochs are stored as uint32)"
            raise ValueError(f"'{option}' must be an integer {allowed}; got {value:,}.")
    if not collection.strip():
        raise ValueError("'--collection' must be a non-empty name; got ''.")
    proto = protocol_from_words(protocol, params or [])
    _check_simulation_size(proto, out, n, epochs, min(chunk_users, n))
    start = time.perf_counter()
    with _progress(n * epochs, "reports") as advance:
        result = simulate_reports(
            proto,
            out,
            n=n,
            epochs=epochs,
            distribution=distribution,
            change=change,
            chunk_users=chunk_users,
            collection=collection,
            rng=seed,
            progress=advance,
        )
    elapsed = time.perf_counter() - start
    console().print(
        f"wrote {result['reports']:,} {proto.name} reports ({proto.wire_size} bytes each) "
        f"to {out} in {elapsed:.1f} s"
    )


def _check_simulation_size(proto, out: Path, n: int, epochs: int, chunk: int) -> None:  # type: ignore[no-untyped-def]
    """Refuse a simulation whose archive exceeds the free disk or whose chunk the memory."""
    import shutil

    from longldp.archive import archive_size

    folder = nearest_existing(out.parent)
    size, free = archive_size(proto, n, epochs), shutil.disk_usage(folder).free
    if size > free:
        raise ValueError(
            f"--n {n:,} users x --epochs {epochs:,} make an archive of about "
            f"{human_bytes(size)}, more than the {human_bytes(free)} free in {str(folder)!r}; "
            "lower --n or --epochs."
        )
    domain = proto.domain_size or 100  # a domain of strings: the 100 simulated values
    truth = 8 * epochs * domain  # the true counts per epoch, returned with the archive
    check_memory(truth, f"counting the true values of {epochs:,} epochs", "lower --epochs.")
    fixed, per_user = client_memory(proto)
    per_user += 8 + 16  # the user's value and report id
    need = fixed + truth + chunk * per_user
    fits = max(0, (available_memory() - fixed - truth) // per_user)
    check_memory(
        need,
        f"simulating {chunk:,} users at once ({proto.name}, k = {proto.k:,}: about "
        f"{human_bytes(per_user)} per user, measured)",
        f"lower --chunk-users to at most {fits:,}." if fits else "use a smaller k.",
    )


@contextmanager
def _progress(total: int, unit: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (shown on a terminal only); yields ``advance(done_so_far)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    err = Console(stderr=True)
    with Progress(
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(unit, total=total)
        yield lambda done: bar.update(task, completed=done)


def aggregate_cmd(
    archive: Annotated[list[Path], typer.Argument(help="Archive file(s) or folder(s).")],
    scheduler: Annotated[
        str | None,
        typer.Option(help="Dask scheduler (tcp://host:8786), or 'local' for a LocalCluster."),
    ] = None,
    workers: Annotated[int, typer.Option(help="Workers of a --scheduler local cluster.")] = 2,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            help="Memory a local aggregation may add to this process (its peak RSS growth), "
            "e.g. 200MB or 2GB; at least 8MB. On Dask it sizes the slices each task reads."
        ),
    ] = None,
    postprocess: Annotated[str | None, typer.Option(help="Post-processing of estimates.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write every estimate to this file: its name ends in .csv or .json."),
    ] = None,
    top: Annotated[int, typer.Option(help="Rows per epoch shown in the table (>= 1).")] = 10,
    defence: Annotated[
        str | None,
        typer.Option(
            help="Poisoning defence: memo, memo-replay, detect or normalize (docs/attacks.md §9)."
        ),
    ] = None,
    alpha: Annotated[
        float,
        typer.Option(
            help="False-positive budget of --defence: the share of honest devices it may drop."
        ),
    ] = 0.01,
    min_share: Annotated[
        float | None,
        typer.Option(
            help="--defence detect: flag a report that supports this share of an "
            "itemset, instead of the threshold derived from --alpha."
        ),
    ] = None,
) -> None:
    """Support counts, estimates and 95% intervals per epoch of a report archive."""
    from longldp.archive import aggregate_archive, local_cluster, write_estimates

    if out is not None:
        output_file(out, "--out", (".csv", ".json"))
    if top < 1:
        raise ValueError(f"'--top' must be an integer >= 1; got {top}.")
    if postprocess is not None:  # refused before the archive is read
        from longldp.postprocess import get_method

        get_method(postprocess, owner="aggregate", param="postprocess")
    if workers < 1:
        raise ValueError(f"'--workers' must be an integer >= 1; got {workers}.")
    if scheduler not in (None, "local"):
        check_scheduler(scheduler)
    limit = None if memory_limit is None else parse_bytes(memory_limit)
    start = time.perf_counter()
    if defence is not None:  # report-level defences read whole device histories in memory
        from longldp.attacks.archive import defended_rows

        proto, rows, summary = defended_rows(archive, defence, alpha=alpha, min_share=min_share)
        title = f"{proto.name} with defence {defence!r}: {summary}"
    elif scheduler == "local":
        with local_cluster(workers) as cluster:
            counts = aggregate_archive(archive, memory_limit=limit, scheduler=cluster)
    else:
        counts = aggregate_archive(archive, memory_limit=limit, scheduler=scheduler)
    elapsed = time.perf_counter() - start
    if defence is None:
        rows = counts.estimates(postprocess=postprocess)
        title = (
            f"{counts.protocol.name}: {counts.reports:,} reports in {elapsed:.2f} s "
            f"({counts.reports / max(elapsed, 1e-9):,.0f} reports/s)"
        )
    if out is not None:
        write_estimates(rows, out)
    table = Table(title=title)
    per_cohort = bool(rows) and "cohort" in rows[0]  # RAPPOR: shares of Bloom bits per cohort
    heads = ("epoch", "cohort", "bit") if per_cohort else ("epoch", "value")
    for col in (*heads, "reports", "estimate", "se", "95% interval"):
        table.add_column(col, justify="right")
    groups = sorted({(r["epoch"], r.get("cohort")) for r in rows}, key=lambda g: (g[0], g[1] or 0))
    for epoch, cohort in groups:
        mine = [r for r in rows if r["epoch"] == epoch and r.get("cohort") == cohort]
        for r in sorted(mine, key=lambda r: -r["estimate"])[:top]:
            table.add_row(
                str(epoch),
                *([str(cohort)] if per_cohort else []),
                str(r["value"]),
                f"{r['reports']:,}",
                f"{r['estimate']:.5f}",
                f"{r['se']:.5f}",
                f"[{r['lower']:.5f}, {r['upper']:.5f}]",
            )
    console().print(table)
    if out is not None:
        console().print(f"estimates written to {out}")


_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}


def parse_bytes(text: str) -> int:
    """'200MB' -> 200_000_000; plain integers are bytes."""
    raw = text.strip().upper().replace(" ", "")
    number = raw.rstrip("KMGIB")
    unit = raw[len(number) :]
    if unit not in _UNITS or not number:
        raise ValueError(
            f"a memory size is a number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB); "
            f"got {text!r}."
        )
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"a memory size must start with a number; got {text!r}.") from None
    if value < 1:
        raise ValueError(f"a memory size must be positive; got {text!r}.")
    return int(value)


def register(app: typer.Typer) -> None:
    app.command("simulate-reports")(simulate_reports_cmd)
    app.command("aggregate")(aggregate_cmd)
