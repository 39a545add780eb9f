"""The variance from split users (docs/math.md §20.13): unbiased by exact enumeration, its
variance against the first-order formula (20.30) and its interval's coverage over seeded
repetitions, on real data (Adult's ages)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp.data.numeric import numeric_values
from longldp.privacy import numeric as nm
from longldp.protocols.numeric import moments

AGES = numeric_values("adult", "age")[:1000]


def test_unbiased_by_exact_enumeration():
    """Duchi's bits: every split of five users (2 report x, 3 the square) and every report
    pattern, weighted by the sampler's own probabilities: E[estimate] is the population
    variance, to rounding (an exact check of (20.29), the 1/n and pair corrections included)."""
    x = np.array([17.0, 30.0, 41.5, 66.0, 90.0])
    proto = ll.protocol("Duchi", eps=1.0, lo=17, hi=90)
    u = 2 * (x - 17) / 73 - 1
    plus_a = nm.duchi_probability(1.0, u)
    plus_b = nm.duchi_probability(1.0, 2 * u * u - 1)
    expected = 0.0
    splits = list(itertools.combinations(range(5), 2))
    for group_a in splits:
        group_b = [i for i in range(5) if i not in group_a]
        for bits in itertools.product((0, 1), repeat=5):
            pr = 1.0
            for pos, i in enumerate(list(group_a) + group_b):
                p1 = plus_a[i] if pos < 2 else plus_b[i]
                pr *= p1 if bits[pos] else 1 - p1
            est = moments.estimate_population_variance(
                proto, [sum(bits[:2])], 2, [sum(bits[2:])], 3
            )
            expected += pr * est.variance / len(splits)
    assert expected == pytest.approx(float(np.var(x)), rel=1e-9)


CASES = [
    ("Duchi", {"eps": 1.0}),
    ("Laplace", {"eps": 2.0}),
    ("PM", {"eps": 2.0}),
    ("HM", {"eps": 1.0}),
    ("L-PM", {"eps_perm": 2.0, "eps_1": 0.8}),
]


@pytest.mark.parametrize(("name", "budget"), CASES)
def test_unbiased_variance_and_coverage(name, budget):
    """400 seeded collections of 1,000 ages: the mean estimate within 5 SE of the population
    variance; the sample variance of the estimates against (20.30) within 5 SE of a normal
    sample variance (relative SE sqrt(2/(R − 1))); the 95% interval of (20.31), an upper bound
    about the population's own variance, covers it at least 95% of the time less 5 binomial
    SE."""
    proto = ll.protocol(name, lo=17, hi=90, **budget)
    sq = moments.square_protocol(proto)
    truth = moments.population_variance(proto, AGES)
    rng = np.random.default_rng(2023)
    reps = 400
    est = []
    covered = 0
    for _ in range(reps):
        a, b = moments.perturb_split(proto, AGES, rng)
        e = moments.estimate_population_variance(
            proto, proto.support_counts(a), a.size, sq.support_counts(b), b.size
        )
        est.append(e.variance)
        covered += e.lower <= truth <= e.upper
    got = np.array(est)
    assert abs(got.mean() - truth) <= 5 * got.std(ddof=1) / math.sqrt(reps)
    ratio = got.var(ddof=1) / moments.split_variance_variance(proto, AGES)
    assert abs(ratio - 1) <= 5 * math.sqrt(2 / (reps - 1))
    assert covered / reps >= 0.95 - 5 * math.sqrt(0.95 * 0.05 / reps)


def test_square_protocol_and_inputs():
    proto = ll.protocol("PM", eps=2.0, lo=17, hi=90)
    sq = moments.square_protocol(proto)
    assert type(sq) is type(proto) and sq.eps == proto.eps
    assert (sq.lo, sq.hi) == (0.0, 36.5**2)
    z = moments.centred_squares(proto, [17.0, 53.5, 90.0, 40.0])
    np.testing.assert_allclose(z, [36.5**2, 0.0, 36.5**2, 13.5**2])
    assert z.max() <= sq.hi  # never refused by the square's own range
    chain = ll.protocol("L-PM", eps_perm=2.0, eps_1=0.8, lo=0, hi=10, s=6)
    assert moments.square_protocol(chain).s == 6 and moments.square_protocol(chain).hi == 25.0
    a, b = moments.perturb_split(proto, AGES[:11], 3, share=0.3)
    assert (a.size, b.size) == nm.split_sizes(11, 0.3) == (3, 8)


def test_refusals():
    sw = ll.protocol("SW", eps=1.0, lo=0, hi=1)
    with pytest.raises(ValueError, match="estimate is a mean"):
        moments.square_protocol(sw)
    pm = ll.protocol("PM", eps=1.0, lo=0, hi=1)
    with pytest.raises(ValueError, match="'n_mean' must be an integer >= 2"):
        moments.estimate_population_variance(pm, [0.1, 0.2], 1, [0.0, 0.1], 3)
    with pytest.raises(ValueError, match="'share' must be a finite number in"):
        nm.split_sizes(10, 1.0)
    with pytest.raises(ValueError, match="'n' must be an integer >= 3"):
        nm.split_sizes(2)
    with pytest.raises(ValueError, match="must lie in"):
        moments.centred_squares(pm, [1.5])
