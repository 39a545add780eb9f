"""Aggregate report archives: support counts, estimates and intervals per epoch.

The work is a map and a sum. Each slice of an archive (a row group, or part of one when a
memory limit asks for smaller pieces) is mapped to per-epoch partial aggregators, which are
merged. Locally the slices are processed one after the other, so memory stays bounded by one
slice. On Dask a task is a run of consecutive row groups of one file (about two tasks per
worker thread, `dask_tasks`): the worker reads those row groups itself from the file's path,
builds the protocol once per process, counts the slices with the same function, and sends back
only the partial counts, a few integers per epoch. Both paths run the same code on the same
slices, so their counts are identical.

Counting itself is the protocol's: every report's wire header is checked
(:func:`longldp.protocols.wire.check_headers`), the bodies are decoded and added to the
protocol's aggregator, and bit-packed unary reports are counted without unpacking (see
:mod:`longldp.protocols._bitcount`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from longldp._validate import missing_path
from longldp.archive.layout import ArchiveInfo, RowGroup, read_info, row_groups
from longldp.protocols import Estimate, FrequencyOracle, wire

__all__ = [
    "ArchiveCounts",
    "aggregate_archive",
    "archive_files",
    "local_cluster",
    "write_estimates",
]

#: Bytes of working memory per report beyond its wire bytes (body copy, header check, ids).
_WORKING_FACTOR = 4
#: Fixed working memory of reading: Parquet pages (1 MB each), the read buffer, the counters.
_FIXED_BYTES = 6_000_000
#: The smallest memory limit accepted.
MIN_MEMORY_LIMIT = 8_000_000
#: glibc settings of the workers `local_cluster` starts. Dask's nanny sets
#: ``MALLOC_TRIM_THRESHOLD_=65536``, which also freezes glibc's mmap threshold at 128 KiB, so
#: every NumPy temporary of a slice (megabytes) is a fresh mmap whose pages fault in again:
#: measured, 10⁸ reports took 4.8 s instead of 3.9 s in one process with that variable, 1.3 s of
#: it in the kernel. Slices up to 32 MiB come from the heap and 256 MiB may stay there instead.
WORKER_MALLOC = {"MALLOC_TRIM_THRESHOLD_": 256 << 20, "MALLOC_MMAP_THRESHOLD_": 32 << 20}
#: Dask tasks per worker thread: runs of row groups, few and large (each task costs the
#: scheduler a round trip), yet more than one per thread so that the work balances.
TASKS_PER_THREAD = 2


@dataclass
class ArchiveCounts:
    """Per-epoch aggregators of one protocol, merged over every slice of the archive(s)."""

    protocol: FrequencyOracle
    collection: str
    by_epoch: dict[int, Any] = field(default_factory=dict)
    slices: int = 0

    @property
    def reports(self) -> int:
        """Number of reports counted, over all epochs."""
        return int(sum(agg.n for agg in self.by_epoch.values()))

    def merge(self, other: ArchiveCounts) -> None:
        """Add ``other``'s counts into these (same protocol required)."""
        if other.protocol.spec() != self.protocol.spec():
            raise ValueError(
                "ArchiveCounts.merge: the archives hold different protocols "
                f"({self.protocol.spec()} vs {other.protocol.spec()})."
            )
        for epoch, agg in other.by_epoch.items():
            if epoch in self.by_epoch:
                self.by_epoch[epoch].merge(agg)
            else:
                self.by_epoch[epoch] = agg
        self.slices += other.slices

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable form (what a Dask task sends back)."""
        return {
            "protocol": self.protocol.spec(),
            "collection": self.collection,
            "slices": self.slices,
            "by_epoch": {str(e): agg.state() for e, agg in self.by_epoch.items()},
        }

    @classmethod
    def from_state(
        cls, state: dict[str, Any], protocol: FrequencyOracle | None = None
    ) -> ArchiveCounts:
        """Rebuild counts from `to_state`; ``protocol`` (checked against the state's spec)
        saves rebuilding the protocol object for every partial result."""
        import longldp as ll

        if protocol is not None and protocol.spec() == state["protocol"]:
            proto = protocol
        else:
            proto = ll.protocol_from_spec(state["protocol"])
        by_epoch = {int(e): proto.aggregator_from_state(s) for e, s in state["by_epoch"].items()}
        return cls(proto, state["collection"], by_epoch, int(state["slices"]))

    def estimates(self, postprocess: str | None = None, level: float = 0.95) -> list[dict]:
        """One row per (epoch, value), or per (epoch, cohort, bit) for RAPPOR's Bloom filters
        (and a sketch's rows and columns), or per (epoch, round, cohort, column) for a
        discovery's sketches (PEM: a cohort is a sketch row).

        Each row has the support count, the estimate (post-processed when a method is given),
        the unbiased estimate ``raw``, its standard error and its normal interval around
        ``raw``: the protocol's one estimate-with-SE function
        (:meth:`~longldp.protocols.base.FrequencyOracle.estimate_with_se`, docs/math.md §1.5),
        the same numbers as the collection server's. For Bloom filters the estimate is the
        share of the cohort's clients whose bit is set (the input of RAPPOR's decoder,
        ``longldp rappor decode``), with the cohort's report count as n; an empty cohort's
        numbers are NaN.
        """
        rows: list[dict] = []
        for epoch in sorted(self.by_epoch):
            agg = self.by_epoch[epoch]
            support = np.asarray(agg.support_counts)
            est = agg.estimate_with_se(postprocess, level)
            if est.raw.ndim == 2:  # (cohorts, bits): google/rappor's counts matrix
                for cohort in range(support.shape[0]):
                    rows += _rows(
                        {"epoch": epoch, "cohort": cohort},
                        int(support[cohort, 0]),
                        support[cohort, 1:],
                        est,
                        (cohort,),
                    )
                continue
            if est.raw.ndim == 3:  # (rounds, rows, columns): a discovery's sketch per round
                for r, cohort in np.ndindex(*est.raw.shape[:2]):
                    rows += _rows(
                        {"epoch": epoch, "round": r, "cohort": cohort},
                        int(support[r, cohort, 0]),
                        support[r, cohort, 1:],
                        est,
                        (r, cohort),
                    )
                continue
            counts = support if support.shape == est.raw.shape else np.full(est.raw.size, -1)
            rows += _rows({"epoch": epoch}, int(agg.n), counts, est, None)
        return rows


def _rows(
    where: dict[str, int], n: int, support: np.ndarray, est: Estimate, row: tuple[int, ...] | None
) -> list[dict]:
    """One dict per value of ``est`` (its row ``row``, an index of the leading axes, for an
    estimate of more than one dimension)."""
    pick = (lambda a: a) if row is None else (lambda a: a[row])
    estimate, raw, se = pick(est.estimate), pick(est.raw), pick(est.se)
    lower, upper = pick(est.lower), pick(est.upper)
    return [
        {
            **where,
            "value": v,
            "reports": n,
            "support": int(support[v]) if support[v] >= 0 else None,
            "estimate": float(estimate[v]),
            "raw": float(raw[v]),
            "se": float(se[v]),
            "lower": float(lower[v]),
            "upper": float(upper[v]),
        }
        for v in range(raw.size)
    ]


def archive_files(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """The Parquet files named by ``paths``: files as given, folders searched for ``*.parquet``."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.parquet") if not q.name.startswith("."))
            if not found:
                raise ValueError(f"{p}: the folder holds no .parquet archive.")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            reason = missing_path(p)
            if reason == "does not exist":
                raise ValueError(f"{p}: no such archive file or folder.")
            raise ValueError(f"{str(p)!r} {reason}; give an archive file or folder.")
    return files


def _max_rows(info: ArchiveInfo, memory_limit: int | None, slice_rows: int | None) -> int | None:
    if slice_rows is not None:
        if int(slice_rows) != slice_rows or slice_rows < 1:
            raise ValueError(
                f"aggregate: 'slice_rows' must be an integer >= 1; got {slice_rows!r}."
            )
        return int(slice_rows)
    if memory_limit is None:
        return None
    if memory_limit < MIN_MEMORY_LIMIT:
        raise ValueError(
            f"aggregate: the memory limit must be at least {MIN_MEMORY_LIMIT:,} bytes (Parquet "
            f"pages and read buffers need about {_FIXED_BYTES:,}); got {memory_limit:,}."
        )
    per_row = _WORKING_FACTOR * (info.protocol.wire_size + 24)
    return int((memory_limit - _FIXED_BYTES) // per_row)


def count_slice(proto: FrequencyOracle, piece: RowGroup) -> dict[int, Any]:
    """Per-epoch aggregators of one slice; errors name the file and row group."""
    out: dict[int, Any] = {}
    try:
        epochs = piece.epochs
        if epochs.size and epochs.min() == epochs.max():
            groups: Iterable[tuple[int, np.ndarray]] = [(int(epochs[0]), piece.reports)]
        else:
            order = np.argsort(epochs, kind="stable")
            sorted_epochs = epochs[order]
            cuts = np.flatnonzero(np.diff(sorted_epochs)) + 1
            groups = (
                (int(sorted_epochs[idx[0]]), piece.reports[idx])
                for idx in np.split(order, cuts)
                if idx.size
            )
        for epoch, reports in groups:
            wire.check_headers(proto, reports)
            agg = proto.aggregator()
            agg.add(wire.decode_rows(proto, reports))
            out[epoch] = agg
    except ValueError as exc:
        raise ValueError(
            f"{piece.path}, row group {piece.row_group} (rows from {piece.first_row}): {exc}"
        ) from None
    return out


@functools.lru_cache(maxsize=16)
def _protocol(spec_json: str) -> FrequencyOracle:
    """The protocol of a spec, built once per process (a Dask worker runs many tasks)."""
    import longldp as ll

    return ll.protocol_from_spec(json.loads(spec_json))


def _count_groups(
    path: str, groups: list[int], max_rows: int | None, spec_json: str, collection: str
) -> dict[str, Any]:
    """Count a run of row groups of one file (one Dask task); returns an ArchiveCounts state.

    The worker reads the row groups itself from ``path`` (nothing but the path and the group
    numbers is sent), builds the protocol once per process, and sends back only the counts.
    """
    proto = _protocol(spec_json)
    info = ArchiveInfo(Path(path), collection, proto, num_rows=-1, num_row_groups=-1)
    counts = ArchiveCounts(proto, collection)
    for piece in row_groups(info, max_rows=max_rows, groups=groups):
        counts.merge(ArchiveCounts(proto, collection, count_slice(proto, piece), 1))
    return counts.to_state()


def dask_tasks(infos: Sequence[ArchiveInfo], threads: int) -> list[tuple[ArchiveInfo, list[int]]]:
    """Split the row groups of ``infos`` into runs of consecutive groups of one file, one task
    each: about `TASKS_PER_THREAD` tasks per worker thread (so that a slow worker does not hold
    the others back), never more than one per row group, run lengths differing by at most one
    (a run that would straddle two files is cut in two)."""
    flat = [(i, g) for i, info in enumerate(infos) for g in range(info.num_row_groups)]
    tasks = max(1, min(len(flat), TASKS_PER_THREAD * max(1, threads)))
    out: list[tuple[ArchiveInfo, list[int]]] = []
    for run in np.array_split(np.arange(len(flat)), tasks):
        by_file: dict[int, list[int]] = {}
        for j in run:
            i, g = flat[j]
            by_file.setdefault(i, []).append(g)
        out += [(infos[i], groups) for i, groups in by_file.items()]
    return out


def aggregate_archive(
    paths: str | Path | Sequence[str | Path],
    *,
    memory_limit: int | None = None,
    slice_rows: int | None = None,
    scheduler: Any = None,
) -> ArchiveCounts:
    """Support counts per epoch of every report in the archive file(s) ``paths``.

    Parameters
    ----------
    paths : path or sequence of paths
        Archive files, or folders of them (searched recursively). All must hold the same
        protocol with the same parameters.
    memory_limit : int, optional
        Bytes of working memory to stay within: row groups are read in slices small enough
        (at least `MIN_MEMORY_LIMIT`).
    slice_rows : int, optional
        Read at most this many reports at a time (overrides the size derived from
        ``memory_limit``).
    scheduler : str, distributed.Client or LocalCluster, optional
        Run on Dask: one task per row group. A string is a scheduler address.

    Returns
    -------
    ArchiveCounts
    """
    files = archive_files(paths)
    infos = [read_info(f) for f in files]
    first = infos[0]
    for info in infos[1:]:
        if info.protocol.spec() != first.protocol.spec():
            raise ValueError(
                f"{info.path}: its protocol {info.protocol.spec()} differs from "
                f"{first.path}'s {first.protocol.spec()}; aggregate one protocol at a time."
            )
    total = ArchiveCounts(first.protocol, first.collection)
    if scheduler is None:
        with _returning_allocator(memory_limit is not None):
            for info in infos:
                for piece in row_groups(info, max_rows=_max_rows(info, memory_limit, slice_rows)):
                    part = count_slice(first.protocol, piece)
                    total.merge(ArchiveCounts(first.protocol, first.collection, part, 1))
        return total
    return _aggregate_on_dask(infos, total, memory_limit, slice_rows, scheduler)


@contextlib.contextmanager
def _returning_allocator(bounded: bool) -> Iterator[None]:
    """Under a memory limit, let Arrow allocate with the C library's malloc, which returns freed
    slices to the system, instead of its default pool (mimalloc or jemalloc), which keeps them:
    with the default pool a 16 MB limit grew the process by 21 MB of RSS, with malloc by
    about 6 MB (`tests/test_archive.py` measures the growth). The pool is restored after."""
    if not bounded:
        yield
        return
    import pyarrow as pa

    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def local_cluster(workers: int = 2) -> Any:
    """A Dask ``LocalCluster`` on loopback: ``workers`` processes of one thread each, no
    dashboard on a fixed port (use it as a context manager; needs the ``dask`` extra)."""
    if int(workers) != workers or workers < 1:
        raise ValueError(f"local_cluster: 'workers' must be an integer >= 1; got {workers!r}.")
    try:
        import dask
        from distributed import LocalCluster
    except ImportError:
        raise RuntimeError(
            "a local Dask cluster needs the 'distributed' package (pip install 'longldp[dask]')."
        ) from None
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(
            n_workers=int(workers),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            # The scheduler serves HTTP even without a dashboard; a free port (":0") rather
            # than 8787, which another cluster on the machine may hold (distributed then warns).
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address=None,
        )


def _aggregate_on_dask(
    infos: list[ArchiveInfo],
    total: ArchiveCounts,
    memory_limit: int | None,
    slice_rows: int | None,
    scheduler: Any,
) -> ArchiveCounts:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise RuntimeError(
            "aggregating on Dask needs the 'distributed' package (pip install 'longldp[dask]')."
        ) from None
    owns_client = not isinstance(scheduler, Client)
    if isinstance(scheduler, Client):
        client = scheduler
    elif isinstance(scheduler, str):
        client = Client(scheduler)
    else:  # a cluster object (LocalCluster, …)
        client = Client(scheduler)
    try:
        spec_json = json.dumps(total.protocol.spec(), sort_keys=True)
        threads = sum(client.nthreads().values())
        futures = [
            client.submit(
                _count_groups,
                str(info.path.resolve()),
                groups,
                _max_rows(info, memory_limit, slice_rows),
                spec_json,
                info.collection,
                pure=False,
            )
            for info, groups in dask_tasks(infos, threads)
        ]
        for future in as_completed(futures):
            total.merge(ArchiveCounts.from_state(future.result(), total.protocol))
    finally:
        if owns_client:
            client.close()
    return total


def write_estimates(rows: list[dict], path: str | Path) -> Path:
    """Write estimate rows as JSON (``.json``) or CSV (otherwise), atomically; missing folders
    on the way are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{uuid.uuid4().hex[:8]}")
    try:
        if path.suffix == ".json":
            tmp.write_text(json.dumps(rows, indent=1))
        else:
            cols = list(rows[0]) if rows else ["epoch", "value", "estimate"]
            lines = [",".join(cols)]
            lines += [",".join("" if r[c] is None else repr(r[c]) for c in cols) for r in rows]
            tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
