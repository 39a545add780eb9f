"""Domain, Table, SetData and table_to_itemsets: behaviour and input validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longldp.data import Domain, SetData, Table, table_to_itemsets


def small_table() -> Table:
    return Table(
        {"a": np.array([0, 1, 2, 1]), "b": np.array([1, 0, 0, 1], dtype=np.uint8)},
        {"a": Domain.of(["x", "y", "z"]), "b": Domain(2)},
        name="small",
    )


def test_domain():
    d = Domain.of(["lo", "hi"])
    assert d.size == len(d) == 2 and d.label(1) == "hi" and d.code("lo") == 0
    assert Domain(3).label(2) == "2" and Domain(3).code("1") == 1
    assert "size=9066" in repr(Domain.of([str(i) for i in range(9066)]))
    with pytest.raises(ValueError, match="size 3 but 2 labels"):
        Domain(3, ("a", "b"))
    with pytest.raises(ValueError, match="Domain size"):
        Domain(-1)
    with pytest.raises(ValueError, match="Domain size must be an integer"):
        Domain(2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside the domain"):
        d.label(2)
    with pytest.raises(ValueError, match="not in the domain"):
        d.code("mid")


def test_table():
    t = small_table()
    assert t.n == len(t) == 4 and t.attributes == ("a", "b") and t.domain_sizes == (3, 2)
    assert t["b"].dtype == np.int32 and not t["a"].flags.writeable
    assert t.histogram("a").tolist() == [1, 2, 1]
    assert t.to_matrix().tolist() == [[0, 1], [1, 0], [2, 0], [1, 1]]
    assert t.take(np.array([3, 0])).to_matrix().tolist() == [[1, 1], [0, 1]]
    assert t.select(["b"]).attributes == ("b",)
    with pytest.raises(KeyError, match="no attribute 'c'"):
        t["c"]
    with pytest.raises(ValueError, match="unknown attributes"):
        t.select(["c"])


@pytest.mark.parametrize(
    ("columns", "domains", "message"),
    [
        ({"a": [0, 3]}, {"a": Domain(3)}, r"attribute 'a': code 3 outside the domain \[0, 3\)"),
        ({"a": [0, -1]}, {"a": Domain(3)}, "code -1 outside"),
        ({"a": [0.0, 1.0]}, {"a": Domain(3)}, "expected integer codes"),
        ({"a": [[0, 1]]}, {"a": Domain(3)}, "expected a 1-D array"),
        ({"a": [0, 1], "b": [0]}, {"a": Domain(3), "b": Domain(3)}, "has 1 rows, expected 2"),
        ({"a": [0]}, {"b": Domain(3)}, "name different attributes"),
        ({"a": [0]}, {"a": 3}, "is not a Domain"),
    ],
)
def test_table_validation(columns, domains, message):
    with pytest.raises(ValueError, match=message):
        Table(columns, domains)


def test_setdata_basics():
    s = SetData(np.array([0, 2, 2, 5]), np.array([1, 4, 0, 2, 3]), Domain(5))
    assert s.n == 3 and s.nnz == 5 and s.lengths.tolist() == [2, 0, 3]
    assert s.row(2).tolist() == [0, 2, 3] and s.row(-1).tolist() == [0, 2, 3]
    assert s.item_counts().tolist() == [1, 1, 1, 1, 1]
    t = s.take(np.array([2, 2, 1, 0]))
    assert t.to_lists() == [[0, 2, 3], [0, 2, 3], [], [1, 4]]
    assert s.take(np.array([True, False, True])).to_lists() == [[1, 4], [0, 2, 3]]
    with pytest.raises(IndexError):
        s.row(3)
    with pytest.raises(ValueError, match="out of range"):
        s.take(np.array([3]))


@pytest.mark.parametrize(
    ("indptr", "items", "message"),
    [
        ([0, 2], [3, 1], "row 0: items must be strictly increasing"),
        ([0, 1, 3], [0, 2, 2], "row 1: items must be strictly increasing"),
        ([0, 2], [1, 5], r"code 5 outside the domain \[0, 5\)"),
        ([0, 3], [1, 2], "end at len"),
        ([1, 2], [1, 2], "start at 0"),
        ([0, 2, 1, 2], [1, 2], "decreases"),
        ([], [], "length n \\+ 1"),
    ],
)
def test_setdata_validation(indptr, items, message):
    with pytest.raises(ValueError, match=message):
        SetData(np.array(indptr, dtype=np.int64), np.array(items, dtype=np.int64), Domain(5))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=10), max_size=25))
def test_from_lists_canonicalizes(sets):
    s = SetData.from_lists(sets, domain=41)
    assert s.to_lists() == [sorted(set(x)) for x in sets]


def test_table_to_itemsets():
    t = small_table()
    s = table_to_itemsets(t)
    assert s.domain.labels == ("a=x", "a=y", "a=z", "b=0", "b=1")
    assert s.to_lists() == [[0, 4], [1, 3], [2, 3], [1, 4]]
    lean = table_to_itemsets(t, exclude={"b": [0], "a": ["x"]})
    assert lean.domain.labels == ("a=y", "a=z", "b=1")
    assert lean.to_lists() == [[2], [0], [1], [0, 2]]
    assert table_to_itemsets(t, attributes=["b"]).to_lists() == [[1], [0], [0], [1]]
    with pytest.raises(ValueError, match="unknown attributes"):
        table_to_itemsets(t, attributes=["c"])
    with pytest.raises(ValueError, match="not in the domain"):
        table_to_itemsets(t, exclude={"a": ["w"]})
    with pytest.raises(ValueError, match="not used"):
        table_to_itemsets(t, attributes=["a"], exclude={"b": [0]})
