"""Estimate- and report-level defences (docs/attacks.md §8): normalization, itemset detection,
LDPRecover-style recovery, and their cost on attack-free data."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp import attacks as atk
from longldp.attacks.defences import detection, normalization, recovery
from longldp.attacks.defences.apply import defend
from longldp.data import zipf_probabilities

K = 32
F = zipf_probabilities(K, 1.0)
TARGETS = [28, 29, 30]


#: The same Zipf with items 20..31 absent: a long tail of rare items (recovery's anchor).
TAIL = np.where(np.arange(K) < 20, F, 0.0) / F[:20].sum()


def population(n: int, tau: int = 1, f: np.ndarray = F) -> np.ndarray:
    counts = np.round(f * n).astype(int)
    counts[0] += n - counts.sum()
    return np.tile(np.repeat(np.arange(K), counts), (tau, 1))


def test_cao_normalize():
    f = np.array([0.5, -0.1, 0.3, 0.4])
    out = normalization.cao_normalize(f)
    assert out.sum() == pytest.approx(1.0) and out.min() == 0.0
    assert np.allclose(out, (f + 0.1) / (f + 0.1).sum())
    assert np.allclose(normalization.cao_normalize(np.zeros(3)), 1 / 3)


def test_normalization_removes_part_of_grr_gain():
    """MGA against GRR lowers every non-target by β·P0/(P1 − P0); (N.1) adds it back."""
    proto = ll.protocol("GRR", k=K, eps=1.0)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05)
    run = atk.run_attack(proto, threat, "MGA", values=population(20_000), rng=0)
    plain, normed = defend(run, "none"), defend(run, "normalize")
    assert normed.time_average_gain < 0.5 * plain.time_average_gain


@pytest.mark.parametrize("name", ["OUE", "OLH", "SH", "SS"])
def test_detection_quiet_on_attack_free_data(name):
    """No itemset is flagged on honest reports (one-sided Bonferroni at α = 1%), so the
    defended estimate equals the plain one: no cost beyond the stated FPR."""
    proto = ll.protocol(name, k=K, eps=1.0)
    for seed in range(5):
        log = atk.collect_reports(proto, population(20_000), rng=seed)
        det = detection.detect_fake_reports(proto, log.records, alpha=0.01)
        assert det.itemsets == [] and not det.flagged.any()


@pytest.mark.parametrize("name", ["OUE", "OLH", "SS", "L-OSUE"])
def test_detection_finds_mga(name):
    kw = {"eps": 1.0} if name in ("OUE", "OLH", "SS") else {"eps_perm": 2.0, "eps_1": 1.0}
    proto = ll.protocol(name, k=K, **kw)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05)
    run = atk.run_attack(
        proto, threat, "MGA", values=population(20_000), engine="reports", rng=1, hash_trials=1000
    )
    det = detection.detect_fake_reports(proto, run.log.records, alpha=0.01, min_share=0.6)
    assert any(set(TARGETS) <= set(items) for items in det.itemsets), det.itemsets
    fake = run.log.fake
    assert det.flagged[fake].mean() > 0.9
    assert det.flagged[~fake].mean() < 0.25  # honest reports that support the itemset


def test_detection_does_not_apply():
    with pytest.raises(ValueError, match="supports one item"):
        detection.detect_fake_reports(ll.protocol("GRR", k=K, eps=1.0), np.zeros(3, int))
    with pytest.raises(ValueError, match="hash pool"):
        detection.supported_sets(ll.protocol("OLH", k=K, eps=1.0, hash_pool=4), [])


@pytest.mark.parametrize("name", ["GRR", "OLH"])
def test_recovery_removes_gain(name):
    """Recovery with the suspected targets and the learned fake share cuts MGA's gain."""
    proto = ll.protocol(name, k=K, eps=1.0)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05)
    run = atk.run_attack(proto, threat, "MGA", values=population(50_000, f=TAIL), rng=2)
    plain, rec = defend(run, "none"), defend(run, "recover")
    assert abs(rec.time_average_gain) < 0.25 * plain.time_average_gain


@pytest.mark.parametrize("name", ["GRR", "OUE", "OLH"])
def test_recovery_cost_on_attack_free_data(name):
    """On honest data with a long tail the recovered estimate's error stays within 1.5× that of
    Norm-Sub (the projection it ends with): the learned fake share is near 0 (§8.3)."""
    proto = ll.protocol(name, k=K, eps=1.0)
    n = 20_000
    values = population(n, f=TAIL)[0]
    truth = proto.true_frequencies(values)
    rec_err, sub_err, shares = [], [], []
    for seed in range(20):
        support = proto.sample_support(np.bincount(values, minlength=K), n, seed)
        raw = proto.estimate(support, n)
        r = recovery.recover(proto, raw, targets=TARGETS, n_reports=n)
        rec_err.append(np.sum((r.frequencies - truth) ** 2))
        sub_err.append(np.sum((proto.estimate(support, n, "norm-sub") - truth) ** 2))
        shares.append(r.fake_share)
    assert np.mean(rec_err) <= 1.5 * np.mean(sub_err)
    assert np.mean(shares) < 0.03  # the anchor's bias when more than ρ of the items are rare


def test_detect_recover_and_memo_through_defend():
    """Report-level defences run on the reports engine; other engines are refused."""
    proto = ll.protocol("L-OSUE", k=K, eps_perm=2.0, eps_1=1.0)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05)
    values = population(5000, tau=20)
    run = atk.run_attack(proto, threat, "MGA", values=values, engine="reports", rng=3)
    assert abs(defend(run, "memo").time_average_gain) < 0.05 * run.time_average_gain
    # r = 3 targets over 20 epochs: no count of an itemset is rare enough among honest reports
    # for the derived threshold at 1% of devices (tests/test_attacks_detection.py), so the
    # plumbing is checked with the fixed rule (a report supporting all three targets)
    detected = defend(run, "detect+recover", min_share=1.0)
    assert abs(detected.time_average_gain) < 0.2 * run.time_average_gain
    assert defend(run, "detect").info == {"flagged_fake": 0.0, "flagged_genuine": 0.0}
    count = atk.run_attack(proto, threat, "MGA", values=values, rng=3)
    with pytest.raises(ValueError, match="engine 'reports'"):
        defend(count, "memo")


def test_recover_bad_input():
    proto = ll.protocol("GRR", k=K, eps=1.0)
    with pytest.raises(ValueError, match="'fake_reading' \\(from a detector\\) or suspected"):
        recovery.recover(proto, F)
    with pytest.raises(ValueError, match="'estimates' must be"):
        recovery.recover(proto, F[:3], targets=[1])
    with pytest.raises(ValueError, match="'defence' must be one of"):
        defend(
            atk.run_attack(
                proto, atk.ThreatModel(targets=[1], beta=0.1), "MGA", values=population(100)
            ),
            "magic",
        )


def test_fake_share_learned_from_sum():
    """OLH + MGA inflates Σ f̂ by η(Σφ − 1): the learned share matches η within 3 SE."""
    proto = ll.protocol("OLH", k=K, eps=1.0)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05)
    shares = []
    for seed in range(30):
        run = atk.run_attack(proto, threat, "MGA", values=population(20_000), rng=seed)
        shares.append(recovery.recover(proto, run.after[0], targets=TARGETS).fake_share)
    se = np.std(shares, ddof=1) / math.sqrt(30)
    assert abs(np.mean(shares) - threat.share(20_000)) <= 3 * se + 1e-9
