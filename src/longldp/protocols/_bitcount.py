"""Column sums of bit-packed rows without unpacking every bit into a byte.

Unary-encoding reports travel as bit vectors packed eight to a byte (``numpy.packbits`` order,
most significant bit first). An aggregator needs, for every bit position, how many reports set
it. ``np.unpackbits(rows, axis=1).sum(axis=0)`` writes eight bytes per byte of input and reads
them back; this module counts in place instead.

Two kernels, one answer:

- **Lane sums (large inputs).** The rows of a block are one contiguous byte stream; viewed as
  64-bit words, byte ``o`` of a word always belongs to the same report column when the words
  are grouped in runs whose length is a multiple of ``lcm(8, row_bytes) / 8``. For each bit
  position ``j`` of a byte, ``(word >> j) & 0x0101010101010101`` leaves 0 or 1 in each of the
  eight byte lanes, and up to 255 such words can be added lane-wise without a carry crossing a
  lane. So up to 255 equally shaped runs are added elementwise (one long vectorized
  reduction), and the eight lane totals are read back as bytes. Three passes per bit over the
  input, all in cache-sized blocks, and no per-row or per-bit Python loop.
- **Byte histogram (the rows after the last whole run).** One histogram of (byte position,
  byte value) and a 256 × 8 table of the bits of each byte value give the counts exactly.

Both are exact integer arithmetic; ``tests/test_bitcount.py`` checks them against
``np.unpackbits``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["BYTE_BITS", "packed_column_sums"]

#: BYTE_BITS[b, j] = bit j (most significant first, numpy.packbits' order) of byte value b.
BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)

_LANE_ONES = np.uint64(0x0101010101010101)
#: A lane holds at most 255 before it would carry into its neighbour.
_LANE_MAX = 255
#: Target number of 64-bit words in one run; 255 runs (about 2 MB) stay in cache.
_RUN_WORDS = 1024


def packed_column_sums(rows: NDArray[np.uint8], width: int) -> NDArray[np.int64]:
    """Σ over rows of bit-packed vectors: the count of ones at each of the first ``width`` bits.

    Parameters
    ----------
    rows : ndarray of uint8, shape (n, row_bytes)
        Bit vectors packed most significant bit first (``numpy.packbits`` order).
    width : int
        Number of meaningful bits per row (``width <= 8 * row_bytes``).

    Returns
    -------
    ndarray of int64, shape (width,)
    """
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, row_bytes = rows.shape
    totals = np.zeros(row_bytes * 8, dtype=np.int64)
    if n == 0 or row_bytes == 0:
        return totals[:width]
    period = math.lcm(8, row_bytes) // 8  # words after which the byte-to-column map repeats
    run = max(1, _RUN_WORDS // period) * period
    rows_per_run = run * 8 // row_bytes
    whole = (n // rows_per_run) * rows_per_run
    if whole:
        totals += _lane_sums(rows[:whole], row_bytes, run)
    if whole < n:
        totals += _histogram_sums(rows[whole:])
    return totals[:width]


def _lane_sums(rows: NDArray[np.uint8], row_bytes: int, run: int) -> NDArray[np.int64]:
    """The lane-sum kernel on a whole number of runs (see the module docstring)."""
    runs = rows.reshape(-1).view(np.uint64).reshape(-1, run)
    shifted = np.empty((_LANE_MAX, run), dtype=np.uint64)
    lanes = np.empty(run, dtype=np.uint64)
    # by_offset[j, o]: ones at bit j (msb first) of byte o of a run, summed over blocks.
    by_offset = np.zeros((8, run * 8), dtype=np.int64)
    for first in range(0, runs.shape[0], _LANE_MAX):
        block = runs[first : first + _LANE_MAX]  # at most 255 runs: no lane can carry
        out = shifted[: block.shape[0]]
        for j in range(8):
            np.right_shift(block, np.uint64(7 - j), out=out)
            np.bitwise_and(out, _LANE_ONES, out=out)
            np.sum(out, axis=0, out=lanes)
            by_offset[j] += lanes.view(np.uint8)
    # A run holds a whole number of rows (run * 8 is a multiple of row_bytes): byte o of a run
    # is byte o % row_bytes of its row. Words are read in native order; the lanes map to bytes
    # through the same view, so the offsets are byte offsets whatever the endianness.
    per_column = by_offset.reshape(8, -1, row_bytes).sum(axis=1)
    return per_column.T.reshape(-1)


def _histogram_sums(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Exact bit counts from one (byte position, byte value) histogram."""
    row_bytes = rows.shape[1]
    offsets = np.arange(row_bytes, dtype=np.intp) * 256
    hist = np.bincount((rows + offsets).ravel(), minlength=row_bytes * 256)
    return (hist.reshape(row_bytes, 256) @ BYTE_BITS).reshape(-1)
