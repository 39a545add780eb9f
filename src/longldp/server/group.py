"""Group commit: concurrent small ingest requests share one durable transaction.

A device sends its one report per epoch in a request of its own; stored one transaction per
request, every request pays a durable commit (an fsync of SQLite's WAL, or of PostgreSQL's), and
the server's rate is the disk's rate of fsyncs, whatever the number of devices. Here the
requests of device credentials with at most :data:`GROUP_MAX_REPORTS` reports are queued; a
committer thread takes every queued job (at most one per device, up to :data:`MAX_GROUP_JOBS`)
and stores them in ONE transaction (:func:`longldp.server.ingest.run_group`): each job checked
as if alone, refused alone (its rows never written), the count rows updated once for the whole
group; then one commit, and only after it has returned is each request answered. While a group
commits, the next one gathers: the group size follows the load, and no request waits for a
timer. A crash between the commit and the answers loses no acknowledged report (none was
acknowledged) and counts none twice (the devices' retries are duplicates of stored ids).

The shared token's requests and larger batches run in transactions of their own, as before:
the lock order of :mod:`longldp.server.ingest` is the same for both, so they never deadlock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sqlalchemy.engine import Engine

from longldp.server import db, ingest

log = logging.getLogger("longldp.server")

#: Largest batch (reports) a request may have to be grouped.
GROUP_MAX_REPORTS = 64
#: Most jobs in one group transaction.
MAX_GROUP_JOBS = 512
#: Seconds a committer thread waits for a job before it ends.
IDLE_S = 30.0
#: Fault injection for the tests only: seconds the committer waits between a group's commit
#: and its answers (tests/server_sim.py kills the process there).
FAULT_PAUSE_ENV = "LONGLDP_FAULT_GROUP_PAUSE"


def groupable(job: ingest.Job) -> bool:
    """Whether ``job`` joins a group: a device's (not the shared token's), small."""
    return job.device != db.SHARED_DEVICE and len(job.batch) <= GROUP_MAX_REPORTS


def _settle(future: Any, result: Any) -> None:
    """Resolve a future with an answer or an exception (a cancelled one is left alone)."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


def _settle_all(pairs: list[tuple[Any, Any]]) -> None:
    for future, result in pairs:
        _settle(future, result)


def _deliver(targets: list[Any], results: list[Any]) -> None:
    """Hand each answer to its target: concurrent futures at once, asyncio ones in their
    loop, one call per loop."""
    by_loop: dict[Any, list[tuple[Any, Any]]] = {}
    for target, result in zip(targets, results, strict=True):
        if isinstance(target, tuple):
            loop, future = target
            by_loop.setdefault(loop, []).append((future, result))
        else:
            _settle(target, result)
    for loop, pairs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_settle_all, pairs)


class Batches:
    """Work handed to a few worker threads and taken by them in batches.

    :meth:`submit_async` queues an item from an event loop and returns an asyncio future;
    a worker thread takes every queued item (:meth:`_take`), processes them together
    (:meth:`_process`) and resolves their futures with one call per event loop
    (:func:`_deliver`). A thread is woken only when it waits for work: under load the
    workers are busy, the items queue up, and each hand-off (a lock, a wake-up, a write to the
    loop's self-pipe) is paid once per batch instead of once per item. A thread starts with
    the first item and ends after :data:`IDLE_S` seconds without one.
    """

    #: The worker threads' name.
    NAME = "longldp-batches"

    def __init__(self, threads: int):
        # Each queued item with where its answer goes: a concurrent Future, or an asyncio
        # future and its event loop.
        self._pending: collections.deque[tuple[Any, Any]] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._live: list[threading.Thread] = []
        self.threads = int(threads)

    def submit(self, item: Any) -> Future:
        """Queue ``item``; its future holds its answer (or its exception) once processed."""
        future: Future = Future()
        self._queue(item, future)
        return future

    def submit_async(self, item: Any) -> asyncio.Future:
        """:meth:`submit` from a running event loop: an asyncio future, resolved in that loop
        (one wake-up per batch, however many of its items came from the loop)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue(item, (loop, future))
        return future

    def _queue(self, item: Any, target: Any) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self.NAME} is closed")
            self._pending.append((item, target))
            while len(self._live) < self.threads:
                thread = threading.Thread(target=self._run, name=self.NAME, daemon=True)
                self._live.append(thread)
                thread.start()
            self._cond.notify()  # a system call only if a thread waits for work

    def _take(self) -> list[tuple[Any, Any]]:
        """The next batch (the lock held): every queued item, in order."""
        batch = list(self._pending)
        self._pending.clear()
        return batch

    def _process(self, items: list[Any]) -> list[Any]:
        """One answer (a result or an exception) per item."""
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    if not self._cond.wait(IDLE_S) and not self._pending:
                        break  # idle: this thread ends (the next item starts another)
                if not self._pending:
                    self._live.remove(threading.current_thread())
                    return
                batch = self._take()
            results = self._process([item for item, _ in batch])
            _deliver([target for _, target in batch], results)

    def close(self) -> None:
        """Stop after the queued items are done."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            live = list(self._live)
        for thread in live:
            thread.join()


class GroupCommitter(Batches):
    """Committer threads over ``engine`` (one on SQLite, whose writers are serialized anyway;
    two on PostgreSQL, so that one group gathers while the other commits): each batch is a
    group of jobs stored in one transaction."""

    NAME = "longldp-group-commit"

    def __init__(self, engine: Engine):
        super().__init__(2 if db.is_postgres(engine) else 1)
        self.engine = engine
        self.pause = float(os.environ.get(FAULT_PAUSE_ENV, "0") or 0)

    def _take(self) -> list[tuple[ingest.Job, Any]]:
        """The next group (the lock held): queued jobs in order, one per device."""
        group, later, seen = [], [], set()
        while self._pending and len(group) < MAX_GROUP_JOBS:
            job, future = self._pending.popleft()
            key = (job.col.id, job.device)
            if key in seen:
                later.append((job, future))
            else:
                seen.add(key)
                group.append((job, future))
        self._pending.extendleft(reversed(later))
        return group

    def _process(self, items: list[ingest.Job]) -> list[Any]:
        try:
            results: list[Any] = ingest.run_group(self.engine, items)
        except BaseException as exc:  # the database's error: every job answers 503
            return [exc] * len(items)
        if self.pause:
            time.sleep(self.pause)
        return results


class Calls(Batches):
    """``function(*args)`` for queued argument tuples on ``threads`` threads, in batches of
    at most ``max_batch`` (the server's authentication: every request's first database
    query, handed off without a thread pool's per-call cost)."""

    NAME = "longldp-calls"

    def __init__(
        self,
        function: Callable[..., Any],
        threads: int,
        max_batch: int = 64,
        name: str = "longldp-calls",
    ):
        super().__init__(threads)
        self.NAME = name
        self.function = function
        self.max_batch = int(max_batch)

    def _take(self) -> list[tuple[Any, Any]]:
        n = min(len(self._pending), self.max_batch)
        return [self._pending.popleft() for _ in range(n)]

    def _process(self, items: list[tuple[Any, ...]]) -> list[Any]:
        results: list[Any] = []
        for args in items:
            try:
                results.append(self.function(*args))
            except Exception as exc:  # the caller's: raised where it awaits the answer
                results.append(exc)
        return results
