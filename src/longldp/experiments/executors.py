"""Executors: run cells in this process, in local worker processes, or on a Dask cluster.

`execute` yields ``(cell, rows)`` as cells finish, in whatever order they finish; the results
do not depend on it, since every cell is a pure function of itself (its own seeds included).

- ``workers == 1`` and no scheduler: one cell after the other, in this process.
- ``workers > 1``: a `concurrent.futures.ProcessPoolExecutor` with the ``spawn`` start method
  (no state is inherited from the parent, the same on every platform). Workers ignore SIGINT:
  on Ctrl-C the parent stops submitting, terminates the workers it started and re-raises
  (``longldp run`` turns SIGTERM into the same interruption). On Linux each worker also asks
  the kernel for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so that even a parent
  killed outright (SIGKILL) leaves no worker computing behind it.
- ``scheduler = "tcp://host:8786"``: a Dask ``distributed.Client`` on that scheduler (the
  package is imported only then; workers need longldp installed). Rows come back to this
  process, which writes them, so workers need no shared file system.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import secrets
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from longldp.experiments.kinds import Cell

__all__ = ["execute"]

Rows = list[dict[str, Any]]
RunCell = Callable[[Cell], Rows]


def execute(
    run_cell: RunCell,
    cells: Sequence[Cell],
    *,
    workers: int = 1,
    scheduler: str | None = None,
) -> Iterator[tuple[Cell, Rows]]:
    """Run ``run_cell`` on every cell; yield ``(cell, rows)`` as each finishes.

    Parameters
    ----------
    run_cell : callable
        A module-level function (it is sent to other processes by name).
    cells : sequence of Cell
        The cells to run.
    workers : int, default=1
        Local worker processes (1: run in this process). Ignored with ``scheduler``.
    scheduler : str or None, default=None
        Address of a Dask scheduler.

    Yields
    ------
    tuple of (Cell, list of dict)
    """
    if not cells:
        return iter(())
    if scheduler is not None:
        return _dask(run_cell, cells, scheduler)
    if workers < 1:
        raise ValueError(f"execute: 'workers' must be an integer >= 1; got {workers!r}.")
    if workers == 1:
        return ((cell, run_cell(cell)) for cell in cells)
    return _processes(run_cell, cells, min(workers, len(cells)))


#: ``PR_SET_PDEATHSIG`` of Linux's prctl(2).
_PR_SET_PDEATHSIG = 1


def _init_worker(parent: int) -> None:
    """Worker start: ignore SIGINT (the parent handles Ctrl-C); die with the parent (Linux).

    A spawned worker starts slowly (it imports longldp); a parent that died meanwhile sent no
    signal, so the worker checks that ``parent`` is still its parent after asking for one.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _processes(
    run_cell: RunCell, cells: Sequence[Cell], workers: int
) -> Iterator[tuple[Cell, Rows]]:
    context = mp.get_context("spawn")
    before = {p.pid for p in mp.active_children()}
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),)
    )
    # Submit a bounded window so that an interruption cancels little and memory stays flat.
    window = 4 * workers
    pending: dict[Future, Cell] = {}
    queue = iter(cells)
    try:
        for cell in queue:
            pending[pool.submit(run_cell, cell)] = cell
            if len(pending) >= window:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f].order):
                cell = pending.pop(future)
                rows = future.result()
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(run_cell, nxt)] = nxt
                yield cell, rows
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in mp.active_children():
            if proc.pid not in before:
                proc.terminate()
        raise
    else:
        pool.shutdown(wait=True)


def _dask(run_cell: RunCell, cells: Sequence[Cell], address: str) -> Iterator[tuple[Cell, Rows]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise RuntimeError(
            "the Dask executor (--scheduler) needs the 'distributed' package, which is not "
            "installed; install it (pip install distributed) or run on local processes "
            "(--workers N)."
        ) from None
    client = Client(address)
    # A key unique to this run: a resumed run submits the same cells again, and the scheduler
    # may still be cancelling the interrupted run's futures under the same keys.
    run_token = secrets.token_hex(4)
    futures = []
    try:
        futures = [
            client.submit(
                run_cell, cell, key=f"longldp-cell-{cell.cell_id}-{run_token}", pure=False
            )
            for cell in cells
        ]
        by_key = {f.key: cell for f, cell in zip(futures, cells, strict=True)}
        for future in as_completed(futures):
            yield by_key[future.key], future.result()
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise
    finally:
        client.close()
