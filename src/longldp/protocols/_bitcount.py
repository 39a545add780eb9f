"""Column sums of bit-packed rows without unpacking every bit into a byte.

Unary-encoding reports travel as bit vectors packed eight to a byte (``numpy.packbits`` order,
most significant bit first). An aggregator needs, for every bit position, how many reports set
it. ``np.unpackbits(rows, axis=1).sum(axis=0)`` writes eight bytes per byte of input and reads
them back; this module counts in place instead.

Two kernels, one answer:

- **Carry-save adders and nibble lanes (large inputs).** The rows of a block are one
  contiguous byte stream; viewed as 64-bit words, byte ``o`` of a word always belongs to the
  same report column when the words are grouped in runs whose length is a multiple of
  ``lcm(8, row_bytes) / 8``. Fifteen equally shaped runs form a group. Bitwise full adders
  (sum ``a ^ b ^ c``, carry ``majority(a, b, c)``) add three runs in all 64 bit positions of
  every word at once; eleven of them (55 word operations per run) leave, for each bit
  position, its 0..15 count over the group as four bit planes of weight 1, 2, 4 and 8 (a
  Wallace tree of carry-save adders; the word-parallel form is the one of Harley–Seal
  population counts, here kept per bit position). For a shift ``s`` in 0..3,
  ``(plane >> s) & 0x1111111111111111`` leaves in each 4-bit lane bit ``s`` or ``s + 4`` of
  one byte; fifteen groups' planes are added in these lanes, each plane's lanes are shifted by
  its weight and summed into 8-bit lanes (at most 15 · 15 = 225), which are widened into
  16-bit lanes, folded into int64 every 291 such sums (291 · 225 ≤ 65535). No per-row or
  per-bit Python loop, all on cache-sized blocks; ``_lane_sums`` keeps the lanes of a run, so
  a caller whose runs hold several groups of reports (one sketch row each) folds them apart.
- **Byte histogram (the rows after the last whole group).** One histogram of (byte position,
  byte value) and a 256 × 8 table of the bits of each byte value give the counts exactly.

Both are exact integer arithmetic; ``tests/test_bitcount.py`` checks them against
``np.unpackbits`` (``benchmarks/bench_aggregate.py`` measures the ratio).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
from numpy.typing import NDArray

__all__ = ["BYTE_BITS", "grouped_column_sums", "packed_column_sums"]

#: BYTE_BITS[b, j] = bit j (most significant first, numpy.packbits' order) of byte value b.
BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)

_NIBBLE_ONES = np.uint64(0x1111111111111111)
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
#: Runs per group (the carry-save inputs) and groups per nibble sum (a 4-bit lane holds 15).
_RUNS = 15
#: Weighted nibble splits added per 16-bit accumulation (291 * 225 <= 65535).
_SPLITS = 291
#: Left shifts giving each carry-save plane its weight 1, 2, 4, 8.
_PLANE_SHIFTS = np.arange(4, dtype=np.uint64)[:, None]
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
    """Add the bit counts of ``rows`` to ``totals``: the carry-save kernel on whole groups of
    runs, then the same with shorter runs on what is left, and the histogram at the end."""
    period = math.lcm(8, row_bytes) // 8  # words after which the byte-to-column map repeats
    run = max(1, run_words // period) * period
    rows_per_group = _RUNS * run * 8 // row_bytes
    whole = (rows.shape[0] // rows_per_group) * rows_per_group
    if whole:
        totals += _csa_sums(rows[:whole], row_bytes, run)
    rest = rows[whole:]
    if rest.shape[0] == 0:
        return
    if run_words > _MIN_RUN_WORDS:
        _add_counts(rest, row_bytes, run_words // 4, totals)
    else:
        totals += _histogram_sums(rest)


def _full_add(a: NDArray, b: NDArray, c: NDArray, s: NDArray, carry: NDArray, t: NDArray) -> None:
    """Bitwise full adder: s = a ⊕ b ⊕ c (weight 1), carry = majority(a, b, c) (weight 2); ``t``
    is scratch. Five word operations add three words in all 64 bit positions at once."""
    np.bitwise_xor(a, b, out=t)
    np.bitwise_and(a, b, out=carry)
    np.bitwise_xor(t, c, out=s)
    np.bitwise_and(t, c, out=t)
    np.bitwise_or(carry, t, out=carry)


def _csa_sums(rows: NDArray[np.uint8], row_bytes: int, run: int) -> NDArray[np.int64]:
    """The carry-save kernel on whole groups of 15 runs of ``rows``, folded by byte column."""
    groups = rows.reshape(-1).view(np.uint64).reshape(-1, _RUNS, run)
    per_column = np.zeros((8, row_bytes), dtype=np.int64)

    def fold(wide: NDArray[np.uint16]) -> None:  # byte o of a run is column o % row_bytes
        per_column[...] += wide.reshape(8, -1, row_bytes).sum(axis=1, dtype=np.int64)

    _lane_sums(iter(groups), run, fold)
    return per_column.T.reshape(-1)


def _lane_sums(
    groups: Iterator[NDArray[np.uint64]], run: int, fold: Callable[[NDArray[np.uint16]], None]
) -> None:
    """Σ over groups of (15, run) words, handed to ``fold`` in parts as (8, run * 8) 16-bit
    lanes: [j, o] = how often bit j (msb first) of byte o of a run is set. Per group, 11 full
    adders (55 word operations on a run, against 165 to shift out the bits of 15 runs) leave
    the 0..15 count of every bit position in four planes of weight 1, 2, 4, 8; their bits are
    then summed in 4-bit lanes over 15 groups, weighted into 8-bit lanes (at most 225) and
    widened into 16-bit lanes (see the module docstring)."""
    f = _RUNS // 3
    t5, s5, c5 = (np.empty((f, run), dtype=np.uint64) for _ in range(3))
    # planes[k]: bit k of the 0..15 count of each bit position over a group's 15 runs.
    planes = np.empty((4, run), dtype=np.uint64)
    w = np.empty((6, run), dtype=np.uint64)  # single-run scratch: sums and carries
    t = np.empty(run, dtype=np.uint64)
    shifted = np.empty((4, run), dtype=np.uint64)
    # nib[s, k]: in 4-bit lanes, how often bit s (low nibble) / s + 4 (high) of plane k is set.
    nib = np.zeros((4, 4, run), dtype=np.uint64)
    half = np.empty((4, run), dtype=np.uint64)
    byte = np.empty(run, dtype=np.uint64)
    # wide[j]: by byte of a run, the weighted count of bit j (msb first), in 16-bit lanes.
    wide = np.zeros((8, run * 8), dtype=np.uint16)

    def split() -> None:
        # Nibbles (each <= 15) shifted by their plane's weight and added in 8-bit lanes (at
        # most 15 * (1 + 2 + 4 + 8) = 225), then widened into the 16-bit lanes. Words are
        # read back through a byte view, so offsets are byte offsets whatever the endianness.
        for s in range(4):
            for j, nibbles in ((7 - s, nib[s]), (3 - s, nib[s] >> np.uint64(4))):
                np.bitwise_and(nibbles, _LOW_NIBBLES, out=half)
                np.left_shift(half, _PLANE_SHIFTS, out=half)
                np.sum(half, axis=0, out=byte)
                wide[j] += byte.view(np.uint8)
        nib.fill(0)

    in_nib = in_wide = 0
    for g in groups:
        # 15 words of weight 1 -> 5 of weight 1 and 5 of weight 2 (five adders at once).
        _full_add(g[:f], g[f : 2 * f], g[2 * f :], s5, c5, t5)
        # weight 1: 5 -> 3 -> 1 (two adders), carries w[0], w[1] of weight 2.
        _full_add(s5[0], s5[1], s5[2], w[2], w[0], t)
        _full_add(w[2], s5[3], s5[4], planes[0], w[1], t)
        # weight 2: c5 (5) + w[0], w[1] -> 1 (three adders), carries w[2], w[4], w[0] of
        # weight 4 (no adder writes a word it still reads).
        _full_add(c5[0], c5[1], c5[2], w[5], w[2], t)
        _full_add(c5[3], c5[4], w[0], w[3], w[4], t)
        _full_add(w[5], w[3], w[1], planes[1], w[0], t)
        # weight 4: three -> one of weight 4 and one of weight 8 (the count is at most 15).
        _full_add(w[2], w[4], w[0], planes[2], planes[3], t)
        for s in range(4):
            np.right_shift(planes, np.uint64(s), out=shifted)
            np.bitwise_and(shifted, _NIBBLE_ONES, out=shifted)
            nib[s] += shifted
        in_nib += 1
        if in_nib == _RUNS:
            split()
            in_nib = 0
            in_wide += 1
            if in_wide == _SPLITS:
                fold(wide)
                wide.fill(0)
                in_wide = 0
    if in_nib:
        split()
    fold(wide)


def _histogram_sums(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Exact bit counts from one (byte position, byte value) histogram."""
    row_bytes = rows.shape[1]
    offsets = np.arange(row_bytes, dtype=np.intp) * 256
    hist = np.bincount((rows + offsets).ravel(), minlength=row_bytes * 256)
    return (hist.reshape(row_bytes, 256) @ BYTE_BITS).reshape(-1)


def grouped_column_sums(
    rows: NDArray[np.uint8], labels: NDArray[np.integer], k: int, width: int
) -> NDArray[np.int64]:
    """Column sums of bit-packed rows per label: out[j] counts the ones of the rows labelled j.

    Parameters
    ----------
    rows : ndarray of uint8, shape (n, row_bytes)
        Bit vectors packed most significant bit first.
    labels : ndarray of int, shape (n,)
        A label in ``[0, k)`` per row (checked by the caller), in any order.
    k : int
        Number of labels.
    width : int
        Number of meaningful bits per row.

    Returns
    -------
    ndarray of int64, shape (k, width)

    Notes
    -----
    The full adders of the carry-save kernel work lane by lane, so a run may hold the reports
    of every label as long as each lane keeps its label: run ``r`` of the gather holds ``V``
    reports of label 0, then ``V`` of label 1, ... (the ``r``-th ``V`` of each label's
    reports, a stable counting sort's order), one ``np.take`` per group into a cache-sized
    buffer. Labels with fewer reports than the longest are padded with copies of one of their
    own reports (or of report 0 for an empty label), whose bits are subtracted at the end:
    exact, and all labels are counted in one pass instead of one call per label. When the
    padding would exceed a quarter of the reports (few reports per label), each label's
    reports are counted by :func:`packed_column_sums` instead.
    """
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    lab = np.asarray(labels, dtype=np.intp)
    n, row_bytes = rows.shape
    out = np.zeros((k, row_bytes * 8), dtype=np.int64)
    if n == 0 or row_bytes == 0:
        return out[:, :width]
    counts = np.bincount(lab, minlength=k)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    order = np.argsort(lab.astype(np.uint16) if k <= 1 << 16 else lab, kind="stable")
    unit = 8 // math.gcd(row_bytes, 8)  # reports per label that fill whole 64-bit words
    per_label = max(unit, (_RUN_WORDS * 8 // (k * row_bytes)) // unit * unit)
    slots = _RUNS * per_label  # reports of one label in one group
    n_groups = -(-int(counts.max()) // slots)
    if n_groups * slots * k > n + n // 4:
        words = rows.view(np.uint64) if row_bytes % 8 == 0 else rows
        grouped = np.take(words, order, axis=0).view(np.uint8)
        for j in np.flatnonzero(counts):
            out[j] = packed_column_sums(grouped[bounds[j] : bounds[j + 1]], row_bytes * 8)
        return out[:, :width]
    run = k * per_label * row_bytes // 8
    # Group g, run r, label j, slot v holds the label's report of rank q = (15 g + r) V + v
    # (in the sorted order), or its first report when q is past its count.
    ranks = np.arange(slots, dtype=np.intp).reshape(_RUNS, 1, per_label)
    start = bounds[:-1].reshape(1, k, 1)
    last = counts.reshape(1, k, 1)
    pos = np.empty((_RUNS, k, per_label), dtype=np.intp)
    idx = np.empty(pos.size, dtype=np.intp)
    as_words = row_bytes % 8 == 0
    source = rows.view(np.uint64) if as_words else rows
    buf = np.empty((_RUNS * k * per_label, source.shape[1]), dtype=source.dtype)
    group = buf.reshape(-1).view(np.uint64).reshape(_RUNS, run)
    per = np.zeros((8, k, row_bytes), dtype=np.int64)

    def gathered() -> Iterator[NDArray[np.uint64]]:
        for g in range(n_groups):
            q = ranks + g * slots
            np.add(start, np.where(q < last, q, 0), out=pos)
            np.take(order, pos.reshape(-1), out=idx, mode="clip")  # an empty last label: n
            np.take(source, idx, axis=0, out=buf, mode="clip")
            yield group

    def fold(wide: NDArray[np.uint16]) -> None:
        per[...] += wide.reshape(8, k, per_label, row_bytes).sum(axis=2, dtype=np.int64)

    _lane_sums(gathered(), run, fold)
    out[...] = per.transpose(1, 2, 0).reshape(k, row_bytes * 8)
    pad = n_groups * slots - counts
    dup = order[np.minimum(bounds[:-1], n - 1)]
    out -= pad[:, None] * np.unpackbits(rows[dup], axis=1).astype(np.int64)
    return out[:, :width]
