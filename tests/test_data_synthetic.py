"""Synthetic generators and stand-ins: laws, published statistics (scaled down), errors.

Statistical checks use a fixed seed and a tolerance of 5 standard errors from the analytic (or
sample) variance.
"""

from __future__ import annotations

import numpy as np
import pytest

from longldp.data import (
    BMS_POS,
    KOSARAK,
    bms_pos_standin,
    gaussian,
    gaussian_probabilities,
    kosarak_standin,
    quest,
    quest_from_name,
    sample_codes,
    sample_sets,
    standin,
    uniform,
    zipf,
    zipf_probabilities,
)


def assert_counts_match(codes: np.ndarray, p: np.ndarray) -> None:
    n = codes.size
    counts = np.bincount(codes, minlength=p.size)
    se = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) <= 5 * se + 1e-9)


def test_probability_vectors():
    z = zipf_probabilities(10, 1.0)
    assert np.isclose(z.sum(), 1) and np.all(np.diff(z) < 0)
    assert np.isclose(z[0] / z[1], 2.0)
    assert np.allclose(zipf_probabilities(5, 0.0), 0.2)
    g = gaussian_probabilities(11)
    assert np.isclose(g.sum(), 1) and np.allclose(g, g[::-1]) and g.argmax() == 5
    g2 = gaussian_probabilities(4, mean=0.0, std=1.0)
    assert g2.argmax() == 0 and np.isclose(g2.sum(), 1)


@pytest.mark.parametrize(
    ("gen", "law"),
    [
        (lambda n, k, rng: zipf(n, k, rng, s=1.3), lambda k: zipf_probabilities(k, 1.3)),
        (uniform, lambda k: np.full(k, 1 / k)),
        (gaussian, gaussian_probabilities),
        (
            lambda n, k, rng: gaussian(n, k, rng, mean=3.0, std=4.0),
            lambda k: gaussian_probabilities(k, 3.0, 4.0),
        ),
    ],
)
def test_single_valued_generators(gen, law):
    rng = np.random.default_rng(12)
    codes = gen(100_000, 30, rng)
    assert codes.dtype == np.int32 and codes.shape == (100_000,)
    assert codes.min() >= 0 and codes.max() < 30
    assert_counts_match(codes, law(30))


def test_generators_are_deterministic():
    a = zipf(1000, 50, np.random.default_rng(7))
    b = zipf(1000, 50, np.random.default_rng(7))
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("call", "exc", "message"),
    [
        (lambda: zipf(10, 0, np.random.default_rng()), ValueError, "k \\(domain size\\)"),
        (lambda: zipf(-1, 5, np.random.default_rng()), ValueError, "n must be"),
        (lambda: zipf(10, 5, np.random.default_rng(), s=-1), ValueError, "exponent"),
        (lambda: uniform(10, 5, 3), ValueError, "numpy.random.Generator"),
        (lambda: gaussian(10, 5, np.random.default_rng(), std=0), ValueError, "std"),
        (lambda: gaussian(10, 5, np.random.default_rng(), mean=1e6), ValueError, "no mass"),
        (
            lambda: sample_codes(5, np.array([-1.0, 2.0]), np.random.default_rng()),
            ValueError,
            "non-negative",
        ),
    ],
)
def test_generator_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


@pytest.mark.parametrize("max_rounds", [30, 0])
def test_sample_sets_is_successive_sampling(max_rounds):
    """Inclusion probabilities of successive sampling, k = 3, sets of 2 (both code paths)."""
    p = np.array([0.6, 0.3, 0.1])
    n = 60_000
    indptr, items = sample_sets(np.full(n, 2), p, np.random.default_rng(3), max_rounds)
    assert np.all(np.diff(indptr) == 2)
    pairs = items.reshape(n, 2)
    assert np.all(pairs[:, 0] < pairs[:, 1])
    incl = np.array(
        [p[i] + sum(p[j] * p[i] / (1 - p[j]) for j in range(3) if j != i) for i in range(3)]
    )
    counts = np.bincount(items, minlength=3)
    se = np.sqrt(n * incl * (1 - incl))
    assert np.all(np.abs(counts - n * incl) <= 5 * se)


def test_sample_sets_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="only 2 items have positive weight"):
        sample_sets(np.array([3]), np.array([0.5, 0.5, 0.0]), rng)
    with pytest.raises(ValueError, match="non-negative"):
        sample_sets(np.array([-1]), np.array([1.0]), rng)


@pytest.mark.parametrize(("spec", "make"), [(BMS_POS, bms_pos_standin), (KOSARAK, kosarak_standin)])
def test_standin_statistics(spec, make):
    n = 20_000
    s = make(seed=0, n=n)
    assert s.n == n and s.domain.size == spec.k
    lengths = s.lengths
    assert lengths.min() >= 1 and lengths.max() <= spec.max_length
    se = lengths.std() / np.sqrt(n)
    assert abs(lengths.mean() - spec.mean_length) <= 5 * se
    counts = s.item_counts()
    # skewed popularity: item 0 is the most popular and the top 1% of items hold a large share
    assert counts.argmax() == 0
    top = np.sort(counts)[::-1][: max(1, spec.k // 100)].sum()
    assert top / counts.sum() > 0.25
    assert counts[0] > 5 * counts[100]


def test_standin_published_sizes_and_determinism():
    assert (BMS_POS.n, BMS_POS.k, BMS_POS.mean_length) == (515_597, 1_657, 6.5)
    assert (KOSARAK.n, KOSARAK.k, KOSARAK.mean_length) == (990_002, 41_270, 8.1)
    a, b = bms_pos_standin(seed=5, n=2000), bms_pos_standin(seed=5, n=2000)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.items, b.items)
    c = bms_pos_standin(seed=6, n=2000)
    assert not np.array_equal(a.items[:100], c.items[:100])
    assert standin("KOSARAK", seed=1, n=10).n == 10
    with pytest.raises(ValueError, match="unknown stand-in"):
        standin("retail")
    with pytest.raises(ValueError, match="n must be"):
        bms_pos_standin(n=-5)


@pytest.mark.slow
def test_quest():
    d = quest(10, 4, 3000, N=500, seed=1)
    assert d.n == 3000 and d.domain.size == 500
    assert d.lengths.min() >= 1
    assert 0.8 * 10 <= d.lengths.mean() <= 1.1 * 10
    again = quest(10, 4, 3000, N=500, seed=1)
    assert np.array_equal(d.items, again.items)
    # items come from patterns: some pairs co-occur far more often than under independence
    x = np.zeros((d.n, d.domain.size))
    x[np.repeat(np.arange(d.n), d.lengths), d.items] = 1.0
    f = x.sum(axis=0)
    expected = np.outer(f, f) / d.n
    mask = (expected >= 5) & ~np.eye(d.domain.size, dtype=bool)
    ratio = (x.T @ x)[mask] / expected[mask]
    assert ratio.max() > 3
    q = quest_from_name("T40I10D100K", D=400)
    assert q.n == 400 and q.domain.size == 1000 and q.name == "T40I10D400"
    assert 30 <= q.lengths.mean() <= 44


@pytest.mark.parametrize("name", ["T10I4", "t10i4d100k", "T10I4D100G", ""])
def test_quest_bad_names(name):
    with pytest.raises(ValueError, match="not a Quest dataset name"):
        quest_from_name(name)


def test_quest_bad_parameters():
    with pytest.raises(ValueError, match="T and I must be > 0"):
        quest(0, 4, 10)
    with pytest.raises(ValueError, match="D must be"):
        quest(10, 4, -1)
    with pytest.raises(ValueError, match="corruption_mean"):
        quest(10, 4, 10, corruption_mean=2.0)
