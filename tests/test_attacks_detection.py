"""Itemset detection's report threshold (docs/attacks.md §8.2): the honest law of how many
items of an itemset one report supports, the threshold derived from it at a false-positive
budget, and what that threshold catches of MGA against local hashing at r = 10 targets, where
a searched hash function gathers only some of the targets (issue 33)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp import attacks as atk
from longldp.attacks import occupancy
from longldp.attacks.defences import detection
from longldp.data import zipf_probabilities
from longldp.protocols.hadamard import hadamard_parity

K = 32
F = zipf_probabilities(K, 1.0)
TEN = list(range(22, 32))  # the ten rarest items


def population(n: int, tau: int = 1) -> np.ndarray:
    counts = np.round(F * n).astype(int)
    counts[0] += n - counts.sum()
    return np.tile(np.repeat(np.arange(K), counts), (tau, 1))


def build(name: str, eps: float = 1.0, k: int = K):
    if name in ("OUE", "OLH", "SS", "SH"):
        return ll.protocol(name, k=k, eps=eps)
    return ll.protocol(name, k=k, eps_perm=2 * eps, eps_1=eps)


def empirical_tail(proto, value: int, items: list[int], n: int, seed: int):
    """Pr[X ≥ c] over n honest reports of one value, and its standard error."""
    log = atk.collect_reports(proto, np.full((1, n), value, dtype=np.int64), rng=seed)
    x = detection.supported_sets(proto, log.records)[:, items].sum(axis=1)
    tail = np.array([(x >= c).mean() for c in range(len(items) + 1)])
    return tail, np.sqrt(np.maximum(tail * (1 - tail), 1 / n) / n)


@pytest.mark.parametrize("name", ["OUE", "OLH", "L-OSUE", "OLOLOHA"])
def test_independent_supports_follow_the_binomial_law(name):
    """UE bits and per-user hash values: with the value in I, X = Bern(P1) + Bin(|I| − 1, P0),
    the worst case, which the tail returns; with it outside, X = Bin(|I|, P0) lies below."""
    proto = build(name, k=16)
    items = [2, 5, 7, 11, 12, 13]
    tail = detection.honest_support_tail(proto, items)
    inside, se = empirical_tail(proto, 5, items, 20_000, seed=1)
    assert np.all(np.abs(inside - tail) <= 5 * se), (inside, tail)
    outside, se = empirical_tail(proto, 0, items, 20_000, seed=2)
    p0 = float(proto.P0)
    binomial = [sum(math.comb(6, j) * p0**j * (1 - p0) ** (6 - j) for j in range(c, 7))
                for c in range(7)]  # fmt: skip
    assert np.all(np.abs(outside - binomial) <= 5 * se)
    assert np.all(np.asarray(binomial) <= tail + 1e-12)


@pytest.mark.parametrize("name", ["SS", "SH", "L-SH"])
def test_dependent_supports_stay_below_the_tail(name):
    """Subsets (drawn without replacement) and Hadamard rows (pairwise independent only):
    every value's honest tail is at most the returned one."""
    proto = build(name, k=16)
    items = [2, 5, 7, 11, 12, 13]
    tail = detection.honest_support_tail(proto, items)
    for value, seed in ((5, 3), (0, 4), (9, 5)):
        got, se = empirical_tail(proto, value, items, 20_000, seed)
        assert np.all(got <= tail + 5 * se), (value, got, tail)


def test_hadamard_tail_is_the_worst_value_enumerated_row_by_row():
    """The vectorized Hadamard law equals a plain enumeration over rows and values."""
    proto = build("SH", k=16)
    items = [1, 2, 3, 6, 9]
    p1, m = float(proto.P1), int(proto.m)
    worst = np.zeros(len(items) + 1)
    for v in range(proto.k):
        law = np.zeros(len(items) + 1)
        for j in range(m):
            ones = sum(int(hadamard_parity(np.int64(j), np.int64(w))) for w in items)
            mine = int(hadamard_parity(np.int64(j), np.int64(v)))
            for bit, prob in ((mine, p1), (1 - mine, 1 - p1)):
                x = ones if bit == 1 else len(items) - ones
                law[: x + 1] += prob / m
        worst = np.maximum(worst, law)
    np.testing.assert_allclose(detection.honest_support_tail(proto, items), worst, atol=1e-12)


def test_report_threshold_is_the_smallest_count_within_budget():
    proto = build("OLH")
    tail = detection.honest_support_tail(proto, TEN)
    need = detection.report_threshold(proto, TEN, 0.01)
    assert need is not None and tail[need] <= 0.01 < tail[need - 1]
    # three targets: even all three together are too common (P1·P0² ≈ 3%) for a 1% budget
    assert detection.report_threshold(proto, TEN[:3], 0.01) is None


@pytest.mark.parametrize(
    ("eps", "trials"),
    [(1.0, 100), (1.0, 1000), (2.0, 100)],
    ids=["eps1-S100", "eps1-S1000", "eps2-S100"],
)
def test_ten_targets_against_olh_recall_and_false_positives(eps, trials):
    """MGA against OLH at r = 10, β = 0.05: the itemset found is the targets; the share of
    fake reports flagged is Pr[M_S ≥ need] of the search's exact law (docs/attacks.md (A.1));
    the share of honest reports flagged is the honest law's, below the stated bound; the fixed
    rule (all ten targets) flags only Pr[M_S = 10] of the fakes."""
    proto = build("OLH", eps)
    threat = atk.ThreatModel(targets=TEN, beta=0.05)
    values = population(20_000)
    run = atk.run_attack(
        proto, threat, "MGA", values=values, engine="reports", rng=5, hash_trials=trials
    )
    det = detection.detect_fake_reports(proto, run.log.records, alpha=0.01)
    assert det.itemsets == [tuple(TEN)]
    (need,) = det.needs
    assert need == detection.report_threshold(proto, TEN, 0.01)
    fake = run.log.fake
    cdf = occupancy.max_occupancy_cdf(10, proto.g)
    for flagged, threshold in ((det.flagged, need), (
        detection.detect_fake_reports(proto, run.log.records, min_share=1.0).flagged, 10)
    ):  # fmt: skip
        recall = 1.0 - cdf[threshold - 1] ** trials
        se = math.sqrt(max(recall * (1 - recall), 1e-4) / fake.sum())
        assert abs(flagged[fake].mean() - recall) <= 5 * se, (flagged[fake].mean(), recall)
    # honest: users holding a target support it with P1, others with P0 = 1/g
    p1, p0 = float(proto.P1), float(proto.P0)
    held = np.isin(values[0][run.log.device[~fake]], TEN)

    def at_least(first: float) -> float:  # Pr[Bern(first) + Bin(9, P0) ≥ need]
        rest = [math.comb(9, j) * p0**j * (1 - p0) ** (9 - j) for j in range(10)]
        return float(np.convolve([1 - first, first], rest)[need:].sum())

    expected = held.mean() * at_least(p1) + (1 - held.mean()) * at_least(p0)
    honest = det.flagged[~fake].mean()
    assert abs(honest - expected) <= 5 * math.sqrt(expected * (1 - expected) / (~fake).sum())
    assert expected <= det.stated_fpr <= 0.01


def test_over_epochs_the_budget_is_shared_by_the_epochs():
    """Over τ epochs each detection gets fpr/τ, so a device is dropped with probability ≤ fpr;
    a fake device re-crafting every epoch is dropped unless all three of its reports fall short
    of the threshold."""
    proto = build("OLOLOHA")
    threat = atk.ThreatModel(targets=TEN, beta=0.05)
    values = population(20_000, tau=3)
    run = atk.run_attack(
        proto, threat, "MGA", values=values, engine="reports", rng=6, hash_trials=100
    )
    log = run.log
    flags, found = detection.detect_over_epochs(proto, log.device, log.epoch, log.records,
                                                fpr=0.02)  # fmt: skip
    assert len(found) == 3 and all(d.itemsets == [tuple(TEN)] for d in found)
    assert all(d.needs == [detection.report_threshold(proto, TEN, 0.02 / 3)] for d in found)
    assert all(d.stated_fpr <= 0.02 / 3 for d in found)
    honest_devices = np.unique(log.device[~log.fake & flags]).size / 20_000
    assert honest_devices <= 0.02 + 5 * math.sqrt(0.02 * 0.98 / 20_000)
    (need,) = found[0].needs
    report = 1.0 - occupancy.max_occupancy_cdf(10, proto.g)[need - 1] ** 100
    device = 1.0 - (1.0 - report) ** 3
    fakes = np.unique(log.device[log.fake])
    caught = np.isin(fakes, log.device[flags]).mean()
    assert abs(caught - device) <= 5 * math.sqrt(device * (1 - device) / fakes.size) + 1e-9
