"""FIMI reader/writer on files generated in tmp_path, including malformed lines."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longldp.data import SetData, read_fimi, write_fimi


def write(tmp_path, text: str, name: str = "t.dat"):
    p = tmp_path / name
    p.write_bytes(text.encode())
    return p


def test_basic_blank_lines_duplicates_and_whitespace(tmp_path):
    p = write(tmp_path, "3 1 1\n\n  7\t2 \r\n5")
    d = read_fimi(p)
    assert d.to_lists() == [[1, 3], [], [2, 7], [5]]
    assert d.domain.size == 8 and d.name == "t"


def test_final_newline_does_not_add_a_transaction(tmp_path):
    assert read_fimi(write(tmp_path, "1 2\n3\n")).n == 2
    assert read_fimi(write(tmp_path, "1 2\n3\n\n")).n == 3  # a blank line is a transaction
    assert read_fimi(write(tmp_path, "")).n == 0
    assert read_fimi(write(tmp_path, "\n")).to_lists() == [[]]


@pytest.mark.parametrize(
    ("text", "line", "content"),
    [
        ("1 2\n3 -4\n", 2, "3 -4"),
        ("1 2\n3 4\n\n5 x 6\n", 4, "5 x 6"),
        ("1,2\n", 1, "1,2"),
        ("1 2\n2.5\n", 2, "2.5"),
        ("7\n" * 5 + "1 99999999999999999999\n", 6, "1 99999999999999999999"),
    ],
)
def test_malformed_lines_name_line_and_content(tmp_path, text, line, content):
    with pytest.raises(ValueError, match=rf"line {line}: .*{content!r}"):
        read_fimi(write(tmp_path, text))


def test_malformed_line_number_across_blocks(tmp_path, monkeypatch):
    import longldp.data.fimi as fimi

    monkeypatch.setattr(fimi, "_BLOCK", 16)
    lines = ["1 2 3"] * 40 + ["4 ; 5"] + ["6"] * 3
    with pytest.raises(ValueError, match=r"line 41: .*'4 ; 5'"):
        read_fimi(write(tmp_path, "\n".join(lines)))
    good = read_fimi(write(tmp_path, "\n".join(["10 2", "", "3"] * 20)))
    assert good.n == 60 and good.to_lists()[:3] == [[2, 10], [], [3]]


def test_n_items(tmp_path):
    p = write(tmp_path, "0 1\n2\n")
    assert read_fimi(p, n_items=10).domain.size == 10
    with pytest.raises(ValueError, match=r"line 2: item id 2 is outside the domain \[0, 2\)"):
        read_fimi(p, n_items=2)
    with pytest.raises(ValueError, match="n_items"):
        read_fimi(p, n_items=-1)


def test_gzip_roundtrip(tmp_path):
    d = SetData.from_lists([[5, 1], [], [0, 2, 3], [4]], domain=6)
    p = tmp_path / "x.dat.gz"
    write_fimi(p, d)
    with gzip.open(p, "rt") as f:
        assert f.read() == "1 5\n\n0 2 3\n4\n"
    back = read_fimi(p, n_items=6)
    assert back.to_lists() == d.to_lists() and back.name == "x"


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_fimi(tmp_path / "absent.dat")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 300), max_size=8), max_size=30))
def test_roundtrip_property(tmp_path_factory, sets):
    p = tmp_path_factory.mktemp("fimi") / "p.dat"
    d = SetData.from_lists(sets, domain=301)
    write_fimi(p, d)
    back = read_fimi(p, n_items=301)
    assert back.n == len(sets)
    assert back.to_lists() == [sorted(set(s)) for s in sets]
    assert np.array_equal(back.indptr, d.indptr)
