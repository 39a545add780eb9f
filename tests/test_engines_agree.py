"""The count-level sampler and the per-user client path agree in distribution (docs/design.md §4).

For every protocol, R_USER populations run the real client code (``new_memo`` + ``perturb`` +
``Aggregator``) for three timestamps: t0, t1 with the same values (every user reuses its
memo), t2 with the values permuted among users (a mix of reused and fresh memos; the counts
are unchanged). Each timestamp's support counts are compared with R_COUNT draws of
``sample_support`` for the same true counts: per support entry, the means and the variances
agree within Z = 5 combined standard errors (SE of a mean from the sample variances, SE of a
sample variance from the sample fourth moment). All draws use fixed seeds.

Only marginals (one support entry at a time) are compared: the count-level sampler does not
claim to reproduce every joint law (dBitFlipPM draws buckets independently; see its docstring).

A two-sample chi-square test then compares the whole distribution of each value's support count
for one GRR-family (L-GRR) and one UE-family (L-OSUE) protocol, see ALPHA.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from scipy.stats import chi2_contingency

import longldp as ll
from protocol_table import IDS, PROTOCOLS, F, K, representatives

Z = 5.0  # standard errors allowed by every mean/variance comparison


N = 400  # users per population (n·F is integral)
R_USER = 1_500  # per-user populations, each reporting at TIMESTAMPS
R_COUNT = 10_000  # count-level draws
TIMESTAMPS = ("t0", "t1: same values, memos reused", "t2: values permuted")

#: Significance level of the two-sample chi-square checks, Bonferroni-split over the values and
#: timestamps of one test. At a fixed seed the outcome is deterministic, so this is not a
#: flakiness rate; it bounds the chance that a *correct* implementation fails for whatever seed
#: or NumPy stream the test runs with (≤ 1e-3 per test), so a re-seed or a NumPy upgrade will
#: practically never break it. It keeps power: test_chi_square_detects_a_mismatch shows the
#: same check rejects a sampler whose ε1 is off by 25%.
ALPHA = 1e-3
BINS = 10


def make(pid: str, **override: object) -> ll.FrequencyOracle:
    name, params = PROTOCOLS[pid]
    return ll.protocol(name, k=K, **{**params, **override})


def seed_of(*parts: object) -> int:
    """A fixed seed per (test, protocol): crc32 is stable across runs and processes."""
    return zlib.crc32(repr(parts).encode())


def true_counts(n: int) -> np.ndarray:
    counts = np.rint(F * n).astype(np.int64)
    assert counts.sum() == n and np.allclose(counts / n, F)
    return counts


@functools.cache
def count_level_supports(pid: str, seed: int, **override: object) -> np.ndarray:
    """(R_COUNT, entries): flattened support of one timestamp drawn by ``sample_support``."""
    proto, counts = make(pid, **override), true_counts(N)
    rng = np.random.default_rng(seed)
    return np.array([np.ravel(proto.sample_support(counts, N, rng)) for _ in range(R_COUNT)])


@functools.cache
def per_user_supports(pid: str, seed: int) -> np.ndarray:
    """(R_USER, timestamps, entries): aggregated supports of the client path, one population
    per repetition reporting at every timestamp with the same memo."""
    proto = make(pid)
    values = np.repeat(np.arange(K), true_counts(N))
    rng = np.random.default_rng(seed)
    out = None
    for r in range(R_USER):
        memo = proto.new_memo(N)
        rows = []
        for t, vals in enumerate((values, values, rng.permutation(values))):
            agg = proto.aggregator()
            agg.add(proto.perturb(vals, memo, rng))
            rows.append(np.ravel(agg.support_counts))
            if t == 0:
                memos_t0 = memo.memos_per_user().copy()
            elif t == 1:
                # Same values again: no user creates a memo, so t1 reuses every t0 memo.
                assert np.array_equal(memo.memos_per_user(), memos_t0)
        if out is None:
            out = np.empty((R_USER, len(rows), rows[0].size), dtype=np.int64)
        out[r] = rows
    assert np.all(memo.reports == len(TIMESTAMPS))
    return out


def mean_var_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise mean, its SE, s², and the SE of s² from the fourth moment:
    Var[s²] = (μ4 − σ⁴(R−3)/(R−1))/R."""
    x = x.astype(np.float64)
    R = x.shape[0]
    dev = x - x.mean(axis=0)
    s2 = (dev**2).sum(axis=0) / (R - 1)
    m4 = (dev**4).mean(axis=0)
    se_s2 = np.sqrt(np.maximum(m4 - s2**2 * (R - 3) / (R - 1), 0.0) / R)
    return x.mean(axis=0), np.sqrt(s2 / R), s2, se_s2


@pytest.mark.slow
@pytest.mark.parametrize("pid", IDS)
def test_support_mean_and_variance_agree(pid: str) -> None:
    """Per support entry and timestamp: mean and variance of the two engines within Z SE."""
    counts = count_level_supports(pid, seed_of("count", pid))
    users = per_user_supports(pid, seed_of("user", pid))
    m_c, se_m_c, v_c, se_v_c = mean_var_se(counts)
    # Sanity: the count-level mean is the analytic n·(f·P1 + (1 − f)·P0) where that applies.
    proto = make(pid)
    if proto.name != "dBitFlipPM":
        expected = N * (F * proto.P1 + (1 - F) * proto.P0)
        assert np.all(np.abs(m_c - expected) <= Z * se_m_c)
    problems = []
    for t, label in enumerate(TIMESTAMPS):
        m_u, se_m_u, v_u, se_v_u = mean_var_se(users[:, t])
        mean_tol = Z * np.hypot(se_m_u, se_m_c)
        var_tol = Z * np.hypot(se_v_u, se_v_c)
        if np.any(np.abs(m_u - m_c) > mean_tol):
            problems.append(f"{label}: means {m_u} vs {m_c} (tolerance {mean_tol})")
        if np.any(np.abs(v_u - v_c) > var_tol):
            problems.append(f"{label}: variances {v_u} vs {v_c} (tolerance {var_tol})")
    assert not problems, f"{pid}: " + "; ".join(problems)


def binned_table(a: np.ndarray, b: np.ndarray, bins: int = BINS) -> np.ndarray:
    """2 × B contingency table of two integer samples, bins of consecutive values each holding
    at least 1/bins of the pooled sample (so every expected cell is ≥ len(row)/bins ≥ 5)."""
    vals, cnt = np.unique(np.concatenate([a, b]), return_counts=True)
    target = (a.size + b.size) / bins
    labels = np.empty(vals.size, dtype=np.int64)
    current, acc = 0, 0
    for i, c in enumerate(cnt):
        labels[i] = current
        acc += c
        if acc >= target:
            current, acc = current + 1, 0
    if acc and current > 0:  # a short last bin joins the previous one
        labels[labels == current] -= 1
    width = labels.max() + 1
    rows = [np.bincount(labels[np.searchsorted(vals, s)], minlength=width) for s in (a, b)]
    return np.vstack(rows)


def chi_square_pvalues(users: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """p-values of the two-sample chi-square test, one per support entry."""
    out = []
    for v in range(counts.shape[1]):
        table = binned_table(users[:, v], counts[:, v])
        assert table.shape[1] >= 2 and chi2_contingency(table).expected_freq.min() >= 5
        out.append(chi2_contingency(table, correction=False).pvalue)
    return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize(
    "pid", representatives(lambda c: c.longitudinal and c.report_kind in ("symbol", "bits"))
)
def test_chi_square_two_sample(pid: str) -> None:
    """Whole distribution of every value's support count, at t0 and at t1 (memos reused)."""
    counts = count_level_supports(pid, seed_of("count", pid))
    users = per_user_supports(pid, seed_of("user", pid))
    pvalues = np.array([chi_square_pvalues(users[:, t], counts) for t in (0, 1)])
    assert pvalues.min() >= ALPHA / pvalues.size, pvalues


def test_chi_square_detects_a_mismatch() -> None:
    """Power check: the same test rejects count-level draws at ε1 = 1.25 instead of 1.0."""
    pid = "L-GRR"
    wrong = count_level_supports(pid, seed_of("count-wrong", pid), eps_1=1.25)
    users = per_user_supports(pid, seed_of("user", pid))
    pvalues = chi_square_pvalues(users[:, 0], wrong)
    assert pvalues.min() < ALPHA / (2 * pvalues.size), pvalues
