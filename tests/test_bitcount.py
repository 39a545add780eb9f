"""The packed bit counter against np.unpackbits, on both kernels and their seam."""

import numpy as np
import pytest

from longldp.protocols._bitcount import packed_column_sums


@pytest.mark.parametrize("row_bytes", [1, 3, 8, 10, 13, 16])
@pytest.mark.parametrize("n", [0, 1, 1000, 300_000])
def test_counts_equal_unpackbits(row_bytes, n):
    rng = np.random.default_rng(row_bytes * 1_000_003 + n)
    rows = rng.integers(0, 256, size=(n, row_bytes), dtype=np.uint8)
    width = 8 * row_bytes - (3 if row_bytes > 1 else 0)
    expected = np.unpackbits(rows, axis=1)[:, :width].sum(axis=0, dtype=np.int64)
    got = packed_column_sums(rows, width)
    assert got.dtype == np.int64 and got.shape == (width,)
    np.testing.assert_array_equal(got, expected)


def test_all_ones_do_not_carry_between_lanes():
    # 255 equal words per lane is the largest sum a byte lane holds; all-ones rows test it.
    rows = np.full((700_000, 10), 0xFF, dtype=np.uint8)
    np.testing.assert_array_equal(packed_column_sums(rows, 80), np.full(80, 700_000))


def test_non_contiguous_input():
    rng = np.random.default_rng(7)
    wide = rng.integers(0, 256, size=(250_000, 22), dtype=np.uint8)
    body = wide[:, 12:]
    expected = np.unpackbits(body, axis=1).sum(axis=0, dtype=np.int64)
    np.testing.assert_array_equal(packed_column_sums(body, 80), expected)


@pytest.mark.parametrize("row_bytes", [1, 10, 16])
def test_many_groups_flush_the_byte_lanes_exactly(monkeypatch, row_bytes):
    # Tiny runs make thousands of groups per call: every 17 nibble sums the 8-bit lanes are
    # flushed; all-ones rows put 255 in a lane just before each flush (the most it holds).
    from longldp.protocols import _bitcount

    monkeypatch.setattr(_bitcount, "_RUN_WORDS", 8)
    monkeypatch.setattr(_bitcount, "_MIN_RUN_WORDS", 2)
    rng = np.random.default_rng(row_bytes)
    ones = np.full((50_003, row_bytes), 0xFF, dtype=np.uint8)
    np.testing.assert_array_equal(
        packed_column_sums(ones, 8 * row_bytes), np.full(8 * row_bytes, 50_003)
    )
    rows = rng.integers(0, 256, size=(50_003, row_bytes), dtype=np.uint8)
    expected = np.unpackbits(rows, axis=1).sum(axis=0, dtype=np.int64)
    np.testing.assert_array_equal(packed_column_sums(rows, 8 * row_bytes), expected)


def test_sixteen_bit_lanes_hold_their_stated_capacity(monkeypatch):
    # One-word runs make 120-row groups: 292 splits of 15 groups pass the 291 weighted splits
    # (each adding 225 to a lane for all-ones rows) a 16-bit lane holds before it is folded.
    from longldp.protocols import _bitcount

    monkeypatch.setattr(_bitcount, "_RUN_WORDS", 1)
    monkeypatch.setattr(_bitcount, "_MIN_RUN_WORDS", 0)
    n = 292 * 15 * 120 + 7
    ones = np.full((n, 1), 0xFF, dtype=np.uint8)
    np.testing.assert_array_equal(packed_column_sums(ones, 8), np.full(8, n))


@pytest.mark.parametrize("run_words", [64, 8192])  # 64: one gather pass; 8192: per label
@pytest.mark.parametrize(
    ("n", "row_bytes", "k"), [(0, 8, 3), (1, 8, 3), (20_000, 16, 8), (20_000, 3, 9), (9_000, 1, 2)]
)
def test_grouped_counts_equal_unpackbits_per_label(monkeypatch, run_words, n, row_bytes, k):
    from longldp.protocols import _bitcount

    monkeypatch.setattr(_bitcount, "_RUN_WORDS", run_words)
    per_label = []
    real = _bitcount.packed_column_sums
    monkeypatch.setattr(_bitcount, "packed_column_sums", lambda *a: per_label.append(1) or real(*a))
    rng = np.random.default_rng(n + row_bytes + k)
    labels = rng.integers(0, k - 1, n)
    labels[labels >= 1] += 1  # label 1 empty: padded with report 0, subtracted
    width = 8 * row_bytes - (3 if row_bytes > 1 else 0)
    for rows in (
        rng.integers(0, 256, size=(n, row_bytes), dtype=np.uint8),
        np.full((n, row_bytes), 0xFF, dtype=np.uint8),
    ):
        expected = np.zeros((k, width), dtype=np.int64)
        np.add.at(expected, labels, np.unpackbits(rows, axis=1)[:, :width].astype(np.int64))
        got = _bitcount.grouped_column_sums(rows, labels, k, width)
        assert got.dtype == np.int64 and got.shape == (k, width)
        np.testing.assert_array_equal(got, expected)
    # The one-pass gather needs enough reports per label: small runs and no label with half of
    # them (k = 2 with label 1 empty); one report, or the default runs, go label by label.
    assert bool(per_label) == (n > 0 and (run_words == 8192 or n == 1 or k == 2)), per_label
