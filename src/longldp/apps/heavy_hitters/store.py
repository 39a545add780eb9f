"""A sketch's reports stored by row on ingestion (the CMS aggregation bottleneck).

A CMS (or THE, PCS, L-CMS) report is (row j, m packed bits). Counting an unsorted batch sorts
the row labels and gathers every report into cache-sized groups that hold all rows (one pass,
``grouped_column_sums``); the gather reads the reports in row order, not in storage order
(benchmarks/bench_sketch.py measures both layouts). :class:`RowStore` groups once, on
ingestion: each batch's reports are appended to one growable buffer per row, so that counting
reads each row's reports as one contiguous block (the carry-save column sums of
:mod:`longldp.protocols._bitcount`), and only the reports added since the last count are read
again. Its support equals the protocol's ``support_counts`` of everything added
(``tests/test_heavy_hitters.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.protocols._bitcount import packed_column_sums


class RowStore:
    """Reports of a bit-vector sketch, grouped by row as they arrive.

    Parameters
    ----------
    proto : a registered sketch whose records have fields ``hash_id`` (the sketch row) and
        ``bits`` (CMS, THE,
        PCS, L-CMS); ``ValueError`` otherwise.
    """

    def __init__(self, proto: Any):
        dtype = getattr(proto, "report_dtype", None)
        if dtype is None or dtype.names != ("hash_id", "bits"):
            raise ValueError(
                f"RowStore: stores (hash_id, bits) reports of a bit-vector sketch (CMS, THE, PCS, "
                f"L-CMS); got {proto.name}."
            )
        self.proto = proto
        self.width = int(dtype["bits"].shape[0])
        d = int(proto.d)
        self._buffers = [np.empty((0, self.width), dtype=np.uint8) for _ in range(d)]
        self._sizes = np.zeros(d, dtype=np.int64)
        self._counted = np.zeros(d, dtype=np.int64)
        self._sums = np.zeros((d, int(proto.m)), dtype=np.int64)

    @property
    def n(self) -> int:
        """Reports stored."""
        return int(self._sizes.sum())

    def add(self, reports: Any) -> None:
        """Append a batch of report records (checked by the protocol), grouped by row."""
        rep = self.proto._check_reports(np.asarray(reports))
        rows = rep["hash_id"]
        bits = np.ascontiguousarray(rep["bits"])
        d = len(self._buffers)
        order = np.argsort(rows.astype(np.uint16 if d <= 1 << 16 else np.int64), kind="stable")
        bounds = np.searchsorted(rows[order], np.arange(d + 1))
        grouped = bits[order]
        for j in np.flatnonzero(np.diff(bounds)):
            block = grouped[bounds[j] : bounds[j + 1]]
            self._append(int(j), block)

    def add_grouped(self, row: int, bits: NDArray[np.uint8]) -> None:
        """Append reports already known to be of one row (a server's per-row partition)."""
        rep = np.empty(len(bits), dtype=self.proto.report_dtype)
        rep["hash_id"], rep["bits"] = row, bits
        self.proto._check_reports(rep)
        self._append(int(row), np.ascontiguousarray(bits, dtype=np.uint8))

    def _append(self, j: int, block: NDArray[np.uint8]) -> None:
        size, buf = int(self._sizes[j]), self._buffers[j]
        need = size + block.shape[0]
        if need > buf.shape[0]:
            grown = np.empty((max(need, 2 * buf.shape[0], 1024), self.width), dtype=np.uint8)
            grown[:size] = buf[:size]
            self._buffers[j] = buf = grown
        buf[size:need] = block
        self._sizes[j] = need

    def support(self) -> NDArray[np.int64]:
        """The (d, m + 1) support of everything stored (the protocol's layout): reports per
        row, then set bits per column; reports counted before are not read again."""
        m = int(self.proto.m)
        for j, buf in enumerate(self._buffers):
            lo, hi = int(self._counted[j]), int(self._sizes[j])
            if hi > lo:
                self._sums[j] += packed_column_sums(buf[lo:hi], m)
                self._counted[j] = hi
        out = np.empty((len(self._buffers), m + 1), dtype=np.int64)
        out[:, 0] = self._sizes
        out[:, 1:] = self._sums
        return out

    def rows(self, j: int) -> NDArray[np.uint8]:
        """The packed bits of row j's reports, in arrival order (a view)."""
        return self._buffers[j][: int(self._sizes[j])]
