"""The dense and sparse memo stores agree, and the count-level round 2 from memos
(``perturb_support``) has the law of aggregating ``perturb``."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.protocols import _memo
from registry_cases import build, cases

LONGITUDINAL = cases(where=lambda cls: cls.longitudinal)


def inputs(proto, codes: np.ndarray):
    """The protocol's inputs for integer codes (strings for Bloom RAPPOR, 0/1 for boolean)."""
    return proto.as_inputs(codes % (proto.domain_size or 1 << 30))


@pytest.mark.parametrize(("cls", "params"), LONGITUDINAL)
def test_dense_and_sparse_stores_give_identical_reports(cls, params, monkeypatch):
    proto = build(cls, params, 9)
    data = np.random.default_rng(0).integers(0, 9, (4, 200))
    runs, stores = [], set()
    for limit in (0, 1 << 40):  # 0 forces the sparse store, a huge limit the dense one
        monkeypatch.setattr(_memo, "DENSE_LIMIT", limit)
        rng = np.random.default_rng(1)
        memo = proto.new_memo(200)
        runs.append([proto.perturb(inputs(proto, row), memo, rng) for row in data])
        runs[-1].append(memo.memos_per_user())
        stores.add(type(memo.store).__name__)
    # Memo keys of a bounded range get both stores; RAPPOR's pattern ids always the sparse one.
    big_keys = memo.store.key_range >= 1 << 31
    assert stores == ({"MemoStore"} if big_keys else {"MemoStore", "DenseMemoStore"})
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("cls", "params"), LONGITUDINAL)
def test_perturb_support_matches_materialized_reports(cls, params):
    """Mean and variance of every support count over R repetitions of a two-timestamp
    collection (the second reusing memos) agree within 5 combined standard errors."""
    proto = build(cls, params, 5)
    n, reps = 400, 300
    data_rng = np.random.default_rng(2)
    codes = data_rng.integers(0, 5, n)
    first = inputs(proto, codes)
    second = inputs(proto, np.where(data_rng.random(n) < 0.5, codes, data_rng.integers(0, 5, n)))
    samples = {"materialized": [], "count-level": []}
    rng = np.random.default_rng(3)
    for _ in range(reps):
        for path in samples:
            memo = proto.new_memo(n)
            out = []
            for values in (first, second):
                if path == "materialized":
                    out.append(proto.support_counts(proto.perturb(values, memo, rng)))
                else:
                    out.append(proto.perturb_support(values, memo, rng))
            samples[path].append(np.concatenate([np.ravel(o) for o in out]))
    a, b = (np.array(samples[p], dtype=float) for p in samples)
    se_mean = np.sqrt(a.var(axis=0, ddof=1) / reps + b.var(axis=0, ddof=1) / reps)
    live = se_mean > 0
    assert np.all(np.abs(a.mean(0) - b.mean(0))[live] < 5 * se_mean[live])

    # Variance: SE of a sample variance from the fourth central moment of each sample.
    def var_se(x):
        m2 = x.var(axis=0, ddof=1)
        m4 = np.mean((x - x.mean(0)) ** 4, axis=0)
        return np.sqrt(np.maximum(m4 - m2**2 * (reps - 3) / (reps - 1), 0) / reps)

    se_var = np.sqrt(var_se(a) ** 2 + var_se(b) ** 2)
    live = se_var > 0
    diff = np.abs(a.var(0, ddof=1) - b.var(0, ddof=1))
    assert np.all(diff[live] < 5 * se_var[live])


def test_perturb_support_of_one_shot_is_sample_support():
    proto = ll.protocol("OUE", k=6, eps=1.0)
    values = np.arange(6).repeat(10)
    memo = proto.new_memo(60)
    s1 = proto.perturb_support(values, memo, np.random.default_rng(5))
    s2 = proto.sample_support(np.bincount(values, minlength=6), rng=np.random.default_rng(5))
    np.testing.assert_array_equal(s1, s2)
    assert memo.reports.tolist() == [1] * 60
