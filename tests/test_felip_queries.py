"""FELIP queries, the workload generator, MSE_avg, and the study datasets (math §8.12)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import numpy as np
import pytest

from longldp.apps.felip.data import bms_pos_attributes, coarsen, felip_table
from longldp.apps.felip.grids import Attribute, FelipSchema
from longldp.apps.felip.queries import (
    DEFAULT_SELECTIVITY,
    Query,
    Workload,
    generate_workload,
    make_query,
    mse_avg,
    mse_per_timestamp,
    true_answers,
)
from longldp.data import Domain, SetData, Table

SCHEMA = FelipSchema(
    (Attribute("age", 74), Attribute("hours", 96), Attribute("race", 5, "categorical"))
)


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ({"weight": (1, 3)}, "'weight' is unknown"),
        ({7: (1, 3)}, "7 is unknown"),
        ({"age": ()}, "range on 'age' is empty"),
        ({"age": (9, 3)}, "range on 'age' is reversed"),
        ({"hours": (10, 96)}, "96 on 'hours' is outside its domain"),
        ({"hours": -1}, "-1 on 'hours' is outside its domain"),
        ({"race": (1, 2)}, "categorical 'race' must be a point"),
        ({"age": (1, 2), 0: 3}, "'age' is constrained twice"),
        ({"age": (1.5, 3)}, "bound on 'age' must be an integer"),
        ({}, "at least one constraint"),
        ({"age": 1, "hours": 2, "race": 0, "x": 1}, "λ = 4 is larger than the number"),
    ],
)
def test_bad_queries_name_the_constraint(constraints, message):
    with pytest.raises(ValueError, match=message):
        make_query(SCHEMA, constraints)


def test_query_forms_and_validation():
    q = make_query(SCHEMA, {"race": 2, "age": (3, 40)})
    assert q == Query((0, 2), (3, 2), (40, 2)) and q.lam == 2
    assert make_query(SCHEMA, {"hours": [5]}) == Query((1,), (5,), (5,))
    assert q.describe(SCHEMA) == "3 <= age <= 40 and race = 2"
    with pytest.raises(ValueError, match="reversed"):
        Query((0,), (5,), (2,)).validate(SCHEMA)


def data_matrix(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.binomial(73, 0.3, n)
    hours = np.clip((age * 1.1 + rng.normal(0, 8, n)).astype(int), 0, 95)
    race = rng.choice(5, n, p=[0.8, 0.1, 0.05, 0.04, 0.01])
    return np.stack([age, hours, race], axis=1)


def test_workload_draws_follow_the_note():
    x = data_matrix()
    w = generate_workload(x, SCHEMA, lam=2, n_queries=60, seed=1, selectivity=[0.5, 0.3, 1.0])
    assert len(w.queries) == 60 and np.all(w.answers > 0)
    assert np.array_equal(w.answers, true_answers(x, w.queries))
    for q in w.queries:
        assert q.lam == 2 and list(q.attributes) == sorted(set(q.attributes))
        for a, lo, hi in zip(q.attributes, q.lo, q.hi, strict=True):
            if a == 2:
                assert lo == hi  # categorical: a point
            else:  # w = ⌊s·D⌋ values, hi = lo + w − 1
                assert hi - lo + 1 == int(np.floor([0.5, 0.3][a] * SCHEMA.domains[a]))
    again = generate_workload(x, SCHEMA, lam=2, n_queries=60, seed=1, selectivity=[0.5, 0.3, 1.0])
    assert again.queries == w.queries
    # attributes: truncated normal around d/2: the middle attribute is the most frequent
    counts = np.bincount([a for q in w.queries for a in q.attributes], minlength=3)
    assert counts[1] == counts.max()


def test_zero_answer_queries_are_replaced_and_lambda_checked():
    x = data_matrix()
    x[:, 0] = np.where(x[:, 0] < 30, x[:, 0], 0)  # ages ≥ 30 never occur: many empty ranges
    w = generate_workload(x, SCHEMA, lam=1, n_queries=40, seed=3, selectivity=0.05)
    assert w.replaced > 0 and np.all(w.answers > 0)
    with pytest.raises(ValueError, match="λ = 4"):
        generate_workload(x, SCHEMA, lam=4)
    with pytest.raises(ValueError, match="'selectivity'"):
        generate_workload(x, SCHEMA, selectivity="wide")


def test_workload_json_round_trip(tmp_path):
    x = data_matrix()
    w = generate_workload(x, SCHEMA, lam=3, n_queries=10, seed=2, selectivity="normal")
    assert w.selectivity_mode == "normal" and all(0 < s < 1 for s in w.selectivity[:2])
    path = tmp_path / "workload.json"
    w.save(path)
    back = Workload.load(path)
    assert back.queries == w.queries and np.array_equal(back.answers, w.answers)
    assert back.schema == w.schema and back.selectivity == w.selectivity and back.n == w.n
    default = generate_workload(x, SCHEMA, lam=1, n_queries=3)
    assert default.selectivity == DEFAULT_SELECTIVITY[:3]


def test_mse_in_fraction_units():
    est = np.array([[0.1, 0.5], [0.2, 0.4]])
    truth = np.array([0.2, 0.5])
    assert np.allclose(mse_per_timestamp(est, truth), [0.005, 0.005])
    assert mse_avg(est, truth) == pytest.approx(0.005)


def test_study_tables():
    adult = felip_table("adult")
    assert adult.n == 45_222 and len(adult.attributes) == 12 and max(adult.domain_sizes) == 50
    assert adult.attributes[0] == "age" and "fnlwgt" not in adult.attributes
    loan = felip_table("loan")
    assert len(loan.attributes) == 12 and loan.n == 10_000
    big5 = felip_table("big5", rows=2000, seed=1)
    assert big5.n == 2000 and big5.domain_sizes == (5,) * 12
    with pytest.raises(ValueError, match="'name'"):
        felip_table("iris")


def test_coarsen_merges_consecutive_codes():
    t = Table({"v": np.arange(10)}, {"v": Domain(10)})
    c = coarsen(t, 4)
    assert c["v"].tolist() == [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]
    assert c.domains["v"].labels == ("0-1", "2-3", "4-6", "7-9")


def test_bms_pos_attributes():
    sets = SetData.from_lists([[0, 1, 2], [0], [3, 4], [0, 1]], Domain(6))
    t = bms_pos_attributes(sets, bins=4, head=2, tail_from=3)
    # popularity ranks: item 0 → 0, 1 → 1, then 2, 3, 4, 5 by id
    assert t["size"].tolist() == [2, 0, 1, 1]
    assert t["head_items"].tolist() == [2, 1, 0, 2]
    assert t["tail_items"].tolist() == [0, 0, 2, 0]
    # 6 ranks in 4 bins of widths 1, 1, 2, 2: {0}, {1}, {2, 3}, {4, 5}
    assert t["best_rank"].tolist() == [0, 0, 2, 0] and t["worst_rank"].tolist() == [2, 0, 3, 1]
    assert t["median_rank"].tolist() == [1, 0, 2, 0]
    with pytest.raises(ValueError, match="at least one item"):
        bms_pos_attributes(SetData.from_lists([[0], []], Domain(2)))


def test_doctests_and_docs_example_run():
    from longldp.apps.felip import pipeline as felip
    from longldp.apps.felip import queries as felip_queries

    for module in (felip, felip_queries):
        assert doctest.testmod(module).failed == 0
    text = (Path(__file__).resolve().parents[1] / "docs" / "felip.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/felip.md", "exec"), {})
