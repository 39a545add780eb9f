"""The report archive: a Parquet layout for stored reports, and its writer and reader.

One archive file holds the reports of one collection and one protocol, as the server stores
and exports them and as :func:`longldp.archive.simulate_reports` writes them. Columns:

============  =========================  ==================================================
column        Arrow type                 meaning
============  =========================  ==================================================
``epoch``     uint32                     collection period the report belongs to
``cohort``    uint16 (nullable)          RAPPOR's cohort; null for other protocols
``report_id`` fixed_size_binary(16)      random id the client gave the report
``report``    fixed_size_binary(W)       the report in wire format v1 (header and body,
                                         ``docs/wire-format.md``); W = ``proto.wire_size``
============  =========================  ==================================================

The file's key-value metadata ``longldp.archive`` is a JSON object with the layout version,
the collection name and the protocol's spec (``proto.spec()``), so an archive is read without
being told its protocol. Reports are grouped in row groups of bounded size; a reader
processes one row group (or a slice of one) at a time, so memory does not grow with the file.

A file is written under a temporary name and renamed into place when complete: a crash leaves
no half archive behind.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import ArrayLike, NDArray

import longldp as ll
from longldp.protocols import FrequencyOracle, wire

__all__ = [
    "LAYOUT_VERSION",
    "METADATA_KEY",
    "ArchiveInfo",
    "ArchiveWriter",
    "RowGroup",
    "archive_bytes",
    "archive_schema",
    "read_info",
    "report_table",
    "row_groups",
]

LAYOUT_VERSION = 1
#: Parquet options: reports and ids are random bytes, so plain encoding, no compression and no
#: statistics for them (dictionaries only for the small columns).
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "none",
    "use_dictionary": ["epoch", "cohort"],
    "write_statistics": ["epoch", "cohort"],
}
METADATA_KEY = b"longldp.archive"
REPORT_ID_BYTES = 16


def archive_schema(proto: FrequencyOracle, collection: str) -> pa.Schema:
    """The Arrow schema of an archive of ``proto``'s reports for ``collection``."""
    if not isinstance(collection, str) or not collection.strip():
        raise ValueError(f"archive: 'collection' must be a non-empty name; got {collection!r}.")
    meta = {
        "version": LAYOUT_VERSION,
        "collection": collection,
        "protocol": proto.spec(),
    }
    return pa.schema(
        [
            pa.field("epoch", pa.uint32(), nullable=False),
            pa.field("cohort", pa.uint16(), nullable=True),
            pa.field("report_id", pa.binary(REPORT_ID_BYTES), nullable=False),
            pa.field("report", pa.binary(proto.wire_size), nullable=False),
        ],
        metadata={METADATA_KEY: json.dumps(meta, sort_keys=True).encode()},
    )


@dataclass(frozen=True)
class ArchiveInfo:
    """What an archive file says about itself."""

    path: Path
    collection: str
    protocol: FrequencyOracle
    num_rows: int
    num_row_groups: int


def read_info(path: str | Path) -> ArchiveInfo:
    """Open ``path`` and check that it is a longldp archive; return its description."""
    path = Path(path)
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{path}: not a readable Parquet file ({exc}).") from None
    raw = (meta.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError(
            f"{path}: not a longldp report archive (no '{METADATA_KEY.decode()}' metadata)."
        )
    try:
        doc = json.loads(raw)
        version = doc["version"]
        collection = str(doc["collection"])
        spec = doc["protocol"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path}: the archive metadata is not valid JSON of layout v1.") from None
    if version != LAYOUT_VERSION:
        raise ValueError(
            f"{path}: archive layout version {version!r} is not supported (only {LAYOUT_VERSION})."
        )
    proto = ll.protocol_from_spec(spec)
    names = set(meta.schema.to_arrow_schema().names)
    missing = {"epoch", "cohort", "report_id", "report"} - names
    if missing:
        raise ValueError(f"{path}: the archive lacks the column(s) {sorted(missing)}.")
    return ArchiveInfo(path, collection, proto, meta.num_rows, meta.num_row_groups)


class ArchiveWriter:
    """Write reports to an archive file, row group by row group, atomically.

    Use as a context manager; the file appears at ``path`` only when the block exits without
    an exception.

    Parameters
    ----------
    path : str or Path
        Destination file.
    proto : FrequencyOracle
        The protocol every report belongs to (its wire header is checked on write).
    collection : str
        Name of the collection, recorded in the file's metadata.
    """

    def __init__(self, path: str | Path, proto: FrequencyOracle, collection: str = "default"):
        self.path = Path(path)
        self.proto = proto
        self.schema = archive_schema(proto, collection)
        self._tmp = self.path.with_name(f".tmp-{self.path.name}-{uuid.uuid4().hex[:8]}")
        self._writer: pq.ParquetWriter | None = None
        self.rows_written = 0

    def __enter__(self) -> ArchiveWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self._tmp, self.schema, **WRITE_OPTIONS)
        return self

    def write(
        self,
        epochs: ArrayLike,
        report_ids: NDArray[np.uint8],
        reports: NDArray[np.uint8],
        cohorts: ArrayLike | None = None,
    ) -> None:
        """Append one row group: ``reports`` is (n, wire_size) uint8 of wire-format reports."""
        if self._writer is None:
            raise ValueError("ArchiveWriter.write: use the writer inside a 'with' block.")
        table = report_table(self.proto, self.schema, epochs, report_ids, reports, cohorts)
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.rows_written += table.num_rows

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._writer is not None
        try:
            self._writer.close()
            if exc_type is None:
                with open(self._tmp, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(self._tmp, self.path)
        finally:  # whatever failed (the work, closing, the rename), no temporary is left
            self._tmp.unlink(missing_ok=True)


def report_table(
    proto: FrequencyOracle,
    schema: pa.Schema,
    epochs: ArrayLike,
    report_ids: NDArray[np.uint8],
    reports: NDArray[np.uint8],
    cohorts: ArrayLike | None = None,
) -> pa.Table:
    """Check a batch of wire reports and build its Arrow table (one row per report)."""
    reports = np.ascontiguousarray(reports, dtype=np.uint8)
    if reports.ndim != 2 or reports.shape[1] != proto.wire_size:
        raise ValueError(
            f"archive: 'reports' must be uint8 of shape (n, {proto.wire_size}); "
            f"got {reports.shape}."
        )
    n = reports.shape[0]
    wire.check_headers(proto, reports)  # every header is checked before anything is written
    wire.decode_rows(proto, reports)  # and every body
    ids = np.ascontiguousarray(report_ids, dtype=np.uint8)
    if ids.shape != (n, REPORT_ID_BYTES):
        raise ValueError(
            f"archive: 'report_ids' must be uint8 of shape ({n}, {REPORT_ID_BYTES}); "
            f"got {ids.shape}."
        )
    ep = np.broadcast_to(np.asarray(epochs), (n,))
    if ep.dtype.kind not in "iu" or (n and (ep.min() < 0 or ep.max() > 0xFFFFFFFF)):
        raise ValueError("archive: 'epochs' must be integers in [0, 2**32).")
    cohort_col = _cohort_column(cohorts, n)
    return pa.table(
        {
            "epoch": pa.array(ep.astype(np.uint32)),
            "cohort": cohort_col,
            "report_id": _fixed_binary(ids),
            "report": _fixed_binary(reports),
        },
        schema=schema,
    )


def _cohort_column(cohorts: ArrayLike | None, n: int) -> pa.Array:
    """The nullable uint16 cohort column: None (all null), integers, or integers and Nones."""
    if cohorts is None:
        return pa.nulls(n, pa.uint16())
    raw = np.asarray(cohorts, dtype=object if not hasattr(cohorts, "dtype") else None)
    raw = np.broadcast_to(raw, (n,))
    known = raw[np.array([c is not None for c in raw], dtype=bool)] if raw.dtype == object else raw
    values = np.asarray(known.tolist() if raw.dtype == object else known)
    if values.size and (values.dtype.kind not in "iu" or values.min() < 0 or values.max() > 0xFFFF):
        raise ValueError("archive: 'cohorts' must be integers in [0, 2**16) or None.")
    if raw.dtype == object:
        return pa.array(raw.tolist(), type=pa.uint16())
    return pa.array(raw.astype(np.uint16))


def archive_bytes(
    proto: FrequencyOracle,
    collection: str,
    epochs: ArrayLike,
    report_ids: NDArray[np.uint8],
    reports: NDArray[np.uint8],
    cohorts: ArrayLike | None = None,
) -> bytes:
    """A whole archive (one row group) in memory, e.g. for a server's export endpoint."""
    sink = io.BytesIO()
    schema = archive_schema(proto, collection)
    table = report_table(proto, schema, epochs, report_ids, reports, cohorts)
    pq.write_table(table, sink, **WRITE_OPTIONS)
    return sink.getvalue()


def _fixed_binary(rows: NDArray[np.uint8]) -> pa.FixedSizeBinaryArray:
    """A fixed_size_binary Arrow array over the bytes of ``rows`` (one value per row)."""
    n, width = rows.shape
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), n, [None, pa.py_buffer(rows.reshape(-1))]
    )


@dataclass(frozen=True)
class RowGroup:
    """One slice of an archive: its place in the file and its columns as NumPy arrays."""

    path: Path
    row_group: int
    first_row: int
    epochs: NDArray[np.uint32]
    cohorts: NDArray[np.int64] | None  # -1 where a report has none; None if no report has one
    reports: NDArray[np.uint8]


def row_groups(
    path: str | Path | ArchiveInfo,
    *,
    max_rows: int | None = None,
    groups: list[int] | None = None,
) -> Iterator[RowGroup]:
    """Yield the archive's reports slice by slice (at most ``max_rows`` rows each).

    ``path`` may be an `ArchiveInfo` already read. Only the ``epoch``, ``cohort`` and
    ``report`` columns are read; the reports come as a zero-copy (n, wire_size) view of
    Arrow's buffer.
    """
    info = path if isinstance(path, ArchiveInfo) else read_info(path)
    width = info.protocol.wire_size
    # With a row bound, read pages through a small buffer instead of whole column chunks.
    file = (
        pq.ParquetFile(info.path)
        if max_rows is None
        else pq.ParquetFile(info.path, pre_buffer=False, buffer_size=1 << 20)
    )
    wanted = range(file.num_row_groups) if groups is None else groups
    for g in wanted:
        rows_in_group = file.metadata.row_group(g).num_rows
        step = max(1, rows_in_group if max_rows is None else int(max_rows))
        start = 0
        batches = file.iter_batches(
            batch_size=step,
            row_groups=[g],
            columns=["epoch", "cohort", "report"],
            use_threads=False,  # one slice, one core: parallelism comes from the map (Dask)
        )
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (OSError, pa.ArrowException) as exc:
                raise ValueError(
                    f"{info.path}, row group {g}: the row group cannot be read ({exc})."
                ) from None
            yield _slice(info.path, g, start, batch, width)
            start += batch.num_rows


def _slice(path: Path, group: int, start: int, batch: pa.RecordBatch, width: int) -> RowGroup:
    where = f"{path}, row group {group}"
    report = batch.column("report")
    epoch = batch.column("epoch")
    if report.type != pa.binary(width) or report.null_count:
        raise ValueError(
            f"{where}: column 'report' must hold {width}-byte reports with no nulls; "
            f"got {report.type} with {report.null_count} null(s)."
        )
    if epoch.type != pa.uint32() or epoch.null_count:
        raise ValueError(f"{where}: column 'epoch' must be uint32 with no nulls.")
    buf = report.buffers()[1]
    offset = report.offset * width
    reports = np.frombuffer(buf, dtype=np.uint8, count=len(report) * width, offset=offset)
    cohort = batch.column("cohort")
    cohorts = (
        None
        if cohort.null_count == len(cohort)
        else cohort.cast(pa.int64()).fill_null(-1).to_numpy()  # -1: no cohort sent
    )
    return RowGroup(
        path=path,
        row_group=group,
        first_row=start,
        epochs=epoch.to_numpy(),
        cohorts=None if cohorts is None else np.asarray(cohorts, dtype=np.int64),
        reports=reports.reshape(len(report), width),
    )
