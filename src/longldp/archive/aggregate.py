"""Aggregate report archives: support counts, estimates and intervals per epoch.

The work is a map and a sum. Each slice of an archive (a row group, or part of one when a
memory limit asks for smaller pieces) is mapped to per-epoch partial aggregators, which are
merged. Locally the slices are processed one after the other, so memory stays bounded by one
slice; on Dask the same function runs as one task per row group on the workers and the
partial counts, a few integers per epoch, come back to be merged. Both paths run the same code
on the same slices, so their counts are identical.

Counting itself is the protocol's: every report's wire header is checked
(:func:`longldp.protocols.wire.check_headers`), the bodies are decoded and added to the
protocol's aggregator, and bit-packed unary reports are counted without unpacking (see
:mod:`longldp.protocols._bitcount`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
        """One row per (epoch, value), or per (epoch, cohort, bit) for RAPPOR's Bloom filters.

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
                        cohort,
                    )
                continue
            counts = support if support.shape == est.raw.shape else np.full(est.raw.size, -1)
            rows += _rows({"epoch": epoch}, int(agg.n), counts, est, None)
        return rows


def _rows(
    where: dict[str, int], n: int, support: np.ndarray, est: Estimate, row: int | None
) -> list[dict]:
    """One dict per value of ``est`` (its row ``row`` for a 2-D estimate)."""
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
            raise ValueError(f"{p}: no such archive file or folder.")
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


def _count_group(path: str, group: int, max_rows: int | None) -> dict[str, Any]:
    """Count one row group of one file (a Dask task); returns an ArchiveCounts state."""
    info = read_info(path)
    counts = ArchiveCounts(info.protocol, info.collection)
    for piece in row_groups(info, max_rows=max_rows, groups=[group]):
        part = ArchiveCounts(info.protocol, info.collection, count_slice(info.protocol, piece), 1)
        counts.merge(part)
    return counts.to_state()


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
        for info in infos:
            for piece in row_groups(info, max_rows=_max_rows(info, memory_limit, slice_rows)):
                part = count_slice(first.protocol, piece)
                total.merge(ArchiveCounts(first.protocol, first.collection, part, 1))
        return total
    return _aggregate_on_dask(infos, total, memory_limit, slice_rows, scheduler)


def local_cluster(workers: int = 2) -> Any:
    """A Dask ``LocalCluster`` on loopback: ``workers`` processes of one thread each, no
    dashboards (use it as a context manager; needs the ``dask`` extra)."""
    if int(workers) != workers or workers < 1:
        raise ValueError(f"local_cluster: 'workers' must be an integer >= 1; got {workers!r}.")
    try:
        from distributed import LocalCluster
    except ImportError:
        raise RuntimeError(
            "a local Dask cluster needs the 'distributed' package (pip install 'longldp[dask]')."
        ) from None
    return LocalCluster(
        n_workers=int(workers),
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
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
        futures = [
            client.submit(
                _count_group,
                str(info.path.resolve()),
                g,
                _max_rows(info, memory_limit, slice_rows),
                pure=False,
            )
            for info in infos
            for g in range(info.num_row_groups)
        ]
        for future in as_completed(futures):
            total.merge(ArchiveCounts.from_state(future.result(), total.protocol))
    finally:
        if owns_client:
            client.close()
    return total


def write_estimates(rows: list[dict], path: str | Path) -> Path:
    """Write estimate rows as JSON (``.json``) or CSV (otherwise), atomically."""
    path = Path(path)
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
