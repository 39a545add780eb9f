"""Run a study: enumerate its cells, run the unfinished ones, assemble one Parquet table.

A run is a pure function of (study, seed) (design §5). Each cell is identified by a digest of
everything it depends on (`Cell.cell_id`); its rows are saved as ``parts/<cell_id>.parquet`` as
soon as it finishes (atomically, `longldp.experiments.store`). A rerun with the same study and
output folder skips every cell whose part exists, so an interrupted run resumes where it
stopped; a cell whose configuration changed gets a new id and is computed again. The final
``results.parquet`` holds the parts of the study's cells in the study's cell order, so it
does not depend on the number of workers or on the order in which cells finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import longldp as ll
from longldp.experiments import store
from longldp.experiments.config import Study, load_study
from longldp.experiments.executors import execute
from longldp.experiments.kinds import Cell

__all__ = ["RunReport", "default_workers", "run_study"]


@dataclass(frozen=True)
class RunReport:
    """What a run did.

    Attributes
    ----------
    path : Path
        The assembled ``results.parquet``.
    cells : int
        Cells in the study.
    computed : int
        Cells computed by this run.
    resumed : int
        Cells whose saved part was reused.
    rows : int
        Rows of the table.
    seconds : float
        Wall time of this run.
    """

    path: Path
    cells: int
    computed: int
    resumed: int
    rows: int
    seconds: float


def default_workers() -> int:
    """Number of local worker processes by default: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _complete(rows: list[dict[str, Any]], study: Study, cell: Cell) -> list[dict[str, Any]]:
    """Add the common columns (study, seeds, provenance) to a cell's rows."""
    common = {
        "study": study.name,
        "kind": study.kind,
        "seed_entropy": str(cell.entropy),
        "spawn_key": list(cell.spawn_key),
        "longldp_version": ll.__version__,
        "cell_id": cell.cell_id,
    }
    return [{"status": "ok", "skip_reason": None, "runtime_s": None} | r | common for r in rows]


def run_study(
    study: Study | str | Path,
    out: str | Path | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    console: Console | None = None,
    on_cell_done: Callable[[Cell], None] | None = None,
    force: bool = False,
) -> RunReport:
    """Run every unfinished cell of a study and write ``OUT/results.parquet``.

    Parameters
    ----------
    study : Study, str or Path
        A checked study, or the path of its TOML file.
    out : str or Path, optional
        Output folder (default ``results/<study name>``).
    workers : int, optional
        Local worker processes (default: the CPUs available; 1 runs in this process).
    scheduler : str, optional
        Dask scheduler address; when given, cells run on that cluster instead.
    progress : bool, default=True
        Show a Rich progress bar with the elapsed time and an ETA.
    console : rich.console.Console, optional
        Where the progress bar is drawn.
    on_cell_done : callable, optional
        Called with each cell after its part is saved (used by tests to interrupt a run).
    force : bool, default=False
        When ``out`` holds the results of another study (another name or kind), delete them
        (table, parts, workloads, figures) and run; without it that is refused.

    Returns
    -------
    RunReport

    Raises
    ------
    ValueError
        For a bad study file, ``workers < 1``, or an ``out`` holding another study's results
        (without ``force``).
    RuntimeError
        When a worker process dies or Dask is not installed; the parts saved so far are kept.
    KeyboardInterrupt
        Re-raised after the workers are stopped; rerun the same command to resume.
    """
    start = time.perf_counter()
    if not isinstance(study, Study):
        study = load_study(study)
    kind = study.study_kind
    out_dir = Path(out) if out is not None else Path("results") / study.name
    nworkers = default_workers() if workers is None else workers
    if isinstance(nworkers, bool) or not isinstance(nworkers, int) or nworkers < 1:
        raise ValueError(f"run_study: 'workers' must be an integer >= 1; got {workers!r}.")
    if store.check_owner(out_dir, study.name, study.kind):
        if not force:
            raise ValueError(
                f"output folder {str(out_dir)!r} holds the results of study "
                f"{store.owner(out_dir)}, not {study.name!r} (kind {study.kind}); choose "
                "another --out, or pass --force to delete those results and run there."
            )
        store.clear(out_dir)
    study = dataclasses.replace(study, out_dir=out_dir)
    cells = kind.cells(study)
    schema = store.schema_for(kind.columns)
    out_dir.mkdir(parents=True, exist_ok=True)
    store.clean_temporaries(out_dir)
    meta = {
        "study": study.name,
        "kind": study.kind,
        "seed": study.seed,
        "repetitions": study.repetitions,
        "cells": len(cells),
        "longldp_version": ll.__version__,
        "document": dict(study.document),
    }
    before = store.read_json(out_dir / store.STUDY)
    store.write_json(out_dir / store.STUDY, meta)
    todo = [c for c in cells if not store.part_path(out_dir, c.cell_id).exists()]
    resumed = len(cells) - len(todo)
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells •"),
        TimeElapsedColumn(),
        TextColumn("• ETA"),
        TimeRemainingColumn(),
    )
    label = study.name + (f" ({resumed} cells already done)" if resumed else "")
    done = 0
    with Progress(
        *columns, console=console, disable=not progress, speed_estimate_period=600.0
    ) as bar:
        task = bar.add_task(label, total=len(todo))
        results = execute(kind.run_cell, todo, workers=nworkers, scheduler=scheduler)
        try:
            for cell, rows in results:
                store.write_part(out_dir, cell.cell_id, _complete(rows, study, cell), schema)
                done += 1
                bar.advance(task)
                if on_cell_done is not None:
                    on_cell_done(cell)
        except BrokenExecutor as err:
            raise RuntimeError(
                f"a worker process died ({err}); {resumed + done} of {len(cells)} cells are "
                f"saved in {out_dir / store.PARTS}; run the same command again to resume."
            ) from err
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()
    same = isinstance(before, dict) and all(
        before.get(k) == json.loads(json.dumps(meta[k], default=str)) for k in ("document", "cells")
    )
    if done or not same or not (out_dir / store.RESULTS).exists():
        store.remove_figures(out_dir)  # drawn from a table that is about to change
    path = store.assemble(out_dir, [c.cell_id for c in cells], schema, meta)
    return RunReport(
        path=path,
        cells=len(cells),
        computed=done,
        resumed=resumed,
        rows=_count_rows(path),
        seconds=time.perf_counter() - start,
    )


def _count_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows
