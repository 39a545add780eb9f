"""Column sums of bit-packed rows without unpacking every bit into a byte.

Unary-encoding reports travel as bit vectors packed eight to a byte (``numpy.packbits`` order,
most significant bit first). An aggregator needs, for every bit position, how many reports set
it. ``np.unpackbits(rows, axis=1).sum(axis=0)`` writes eight bytes per byte of input and reads
them back; this module counts in place instead.

Two kernels, one answer:

- **Nibble lanes (large inputs).** The rows of a block are one contiguous byte stream; viewed
  as 64-bit words, byte ``o`` of a word always belongs to the same report column when the words
  are grouped in runs whose length is a multiple of ``lcm(8, row_bytes) / 8``. For a shift
  ``s`` in 0..3, ``(word >> s) & 0x1111111111111111`` leaves, in each of the sixteen 4-bit
  lanes, bit ``s`` or bit ``s + 4`` of one byte (0 or 1). Fifteen equally shaped runs are then
  added elementwise (a lane holds at most 15), the low and high nibbles are split into 8-bit
  lanes, and seventeen such sums are added before an 8-bit lane could reach 256. Eleven
  passes over the input give the eight bits (three per shift, two without one), all on
  cache-sized blocks, with no per-row or per-bit Python loop.
- **Byte histogram (the rows after the last whole group).** One histogram of (byte position,
  byte value) and a 256 × 8 table of the bits of each byte value give the counts exactly.

Both are exact integer arithmetic; ``tests/test_bitcount.py`` checks them against
``np.unpackbits`` (``benchmarks/bench_aggregate.py`` measures the ratio).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["BYTE_BITS", "packed_column_sums"]

#: BYTE_BITS[b, j] = bit j (most significant first, numpy.packbits' order) of byte value b.
BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)

_NIBBLE_ONES = np.uint64(0x1111111111111111)
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
#: Runs added per nibble sum (a 4-bit lane holds at most 15).
_RUNS = 15
#: Nibble sums added per 8-bit accumulation (17 × 15 = 255, the most a byte lane holds).
_SUMS = 17
#: Target number of 64-bit words in one run; 15 runs (about 1 MB) stay in cache.
_RUN_WORDS = 8192
#: Below this many words per run the histogram is as fast.
_MIN_RUN_WORDS = 256


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
    _add_counts(rows, row_bytes, _RUN_WORDS, totals)
    return totals[:width]


def _add_counts(rows: NDArray[np.uint8], row_bytes: int, run_words: int, totals: NDArray) -> None:
    """Add the bit counts of ``rows`` to ``totals``: nibble lanes on whole groups of runs,
    then the same with shorter runs on what is left, and the histogram at the end."""
    period = math.lcm(8, row_bytes) // 8  # words after which the byte-to-column map repeats
    run = max(1, run_words // period) * period
    rows_per_group = _RUNS * run * 8 // row_bytes
    whole = (rows.shape[0] // rows_per_group) * rows_per_group
    if whole:
        totals += _nibble_sums(rows[:whole], row_bytes, run)
    rest = rows[whole:]
    if rest.shape[0] == 0:
        return
    if run_words > _MIN_RUN_WORDS:
        _add_counts(rest, row_bytes, run_words // 4, totals)
    else:
        totals += _histogram_sums(rest)


def _nibble_sums(rows: NDArray[np.uint8], row_bytes: int, run: int) -> NDArray[np.int64]:
    """The nibble-lane kernel on whole groups of 15 runs (see the module docstring)."""
    groups = rows.reshape(-1).view(np.uint64).reshape(-1, _RUNS, run)
    shifted = np.empty((_RUNS, run), dtype=np.uint64)
    nibbles = np.empty(run, dtype=np.uint64)
    half = np.empty(run, dtype=np.uint64)
    # byte_lanes[j]: ones at bit j (msb first) of each byte of a run, in 8-bit lanes.
    byte_lanes = np.zeros((8, run), dtype=np.uint64)
    # per_column[j, c]: the same, flushed to int64, by byte column c of a row. A run holds a
    # whole number of rows (run * 8 is a multiple of row_bytes), so byte o of a run is byte
    # o % row_bytes of its row. Words are read in native order and the lanes are read back
    # through the same view, so the offsets are byte offsets whatever the endianness.
    per_column = np.zeros((8, row_bytes), dtype=np.int64)

    def flush() -> None:
        lanes = byte_lanes.view(np.uint8).reshape(8, -1, row_bytes)
        per_column[...] += lanes.sum(axis=1, dtype=np.int64)
        byte_lanes.fill(0)

    pending = 0
    for group in groups:
        for s in range(4):
            if s:
                np.right_shift(group, np.uint64(s), out=shifted)
                np.bitwise_and(shifted, _NIBBLE_ONES, out=shifted)
            else:  # no shift: one pass fewer
                np.bitwise_and(group, _NIBBLE_ONES, out=shifted)
            np.sum(shifted, axis=0, out=nibbles)
            # Low nibble: bit s of the byte (msb-first index 7 - s); high: bit s + 4 (3 - s).
            np.bitwise_and(nibbles, _LOW_NIBBLES, out=half)
            byte_lanes[7 - s] += half
            np.right_shift(nibbles, np.uint64(4), out=half)
            np.bitwise_and(half, _LOW_NIBBLES, out=half)
            byte_lanes[3 - s] += half
        pending += 1
        if pending == _SUMS:
            flush()
            pending = 0
    if pending:
        flush()
    return per_column.T.reshape(-1)


def _histogram_sums(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Exact bit counts from one (byte position, byte value) histogram."""
    row_bytes = rows.shape[1]
    offsets = np.arange(row_bytes, dtype=np.intp) * 256
    hist = np.bincount((rows + offsets).ravel(), minlength=row_bytes * 256)
    return (hist.reshape(row_bytes, 256) @ BYTE_BITS).reshape(-1)
