"""The memo-consistency defence (docs/attacks.md §7): its false-positive rate on honest
memoized devices, its cost on attack-free data, what it catches, and the persistent-vs-per-epoch
comparison on the time-averaged estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
import registry_cases
from longldp import attacks as atk
from longldp.attacks.defences import (
    defended_estimates,
    kept_law,
    law_for,
    memo,
    memo_consistency,
)
from test_attacks_gains import REFUSED

K = 8
F = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
TAU = 20
ALPHA = 0.01


def memo_refusal(cls: type) -> str | None:
    """Why the defence cannot apply to a registered class, from its traits (None: it applies).

    One-shot oracles memoize nothing; dBitFlipPM's one round makes its reports its memos; the
    protocols no attack knows (tests/test_attacks_gains.py REFUSED) are refused for that reason.
    """
    if cls.name in REFUSED:
        return REFUSED[cls.name]
    if not cls.longitudinal:
        return "is one-shot"
    if cls.report_kind == "sampled-bits":
        return "has one round"
    return None


def chains() -> list[ll.protocols.FrequencyOracle]:
    """Every registered chain (each of its test parameters) the defence applies to."""
    return [
        registry_cases.build(cls, params, K)
        for cls, params, _ in registry_cases.triples(lambda c: memo_refusal(c) is None)
    ]


def stable(n: int, tau: int = TAU) -> np.ndarray:
    """n devices that keep their value for τ epochs (one memo each)."""
    return np.tile(np.repeat(np.arange(K), (F * n).astype(int)), (tau, 1))


@pytest.mark.parametrize("proto", chains(), ids=lambda p: p.name)
def test_false_positive_rate_within_bound(proto):
    """Honest memoized devices: flagged share within 5 binomial SE of the exact FPR, which is
    at most α (the union bound the thresholds are chosen by)."""
    values = stable(20_000)
    log = atk.collect_reports(proto, values, rng=1)
    verdict = memo_consistency(proto, log.device, log.records, alpha=ALPHA)
    law = verdict.laws[TAU]
    assert law.fpr <= ALPHA
    n = verdict.flagged.size
    se = math.sqrt(max(law.fpr, 1 / n) * (1 - law.fpr) / n)
    assert abs(verdict.flagged.mean() - law.fpr) <= 5 * se, (verdict.flagged.mean(), law.fpr)


@pytest.mark.parametrize("name", ["L-GRR", "L-OSUE", "OLOLOHA"])
def test_attack_free_cost(name):
    """On attack-free data the defended estimate is unbiased and its MSE is the documented
    false-positive cost V' ((1.2) with nκ devices and the kept law's P1', P0')."""
    proto = ll.protocol(name, k=K, eps_perm=2.0, eps_1=1.0)
    n = 5000
    kappa, p1k, p0k = kept_law(proto, TAU, ALPHA)
    v_kept = (F * p1k * (1 - p1k) + (1 - F) * p0k * (1 - p0k)) / (n * kappa * (p1k - p0k) ** 2)
    v_plain = proto.variance(n, F)
    per_seed_mse, per_seed_bias = [], []
    for seed in range(30):
        log = atk.collect_reports(proto, stable(n), rng=seed)
        verdict = memo_consistency(proto, log.device, log.records, alpha=ALPHA)
        est = defended_estimates(proto, verdict, log.epoch, log.records)
        per_seed_mse.append((((est - F) ** 2) / v_kept).mean())
        per_seed_bias.append(est[0] - F)
    ratio, se = np.mean(per_seed_mse), np.std(per_seed_mse, ddof=1) / math.sqrt(30)
    assert abs(ratio - 1.0) <= 5 * se, (ratio, se)
    # Unbiased: the mean over seeds of epoch 0's estimate is within 5 SE of the truth.
    bias = np.mean(per_seed_bias, axis=0)
    assert np.all(np.abs(bias) <= 5 * np.sqrt(v_kept / 30))
    # The cost is small: at α = 1% the variance grows by at most 2%.
    assert np.all(v_kept / v_plain <= 1.02)


def test_catches_replays_not_mimics():
    """L-GRR at τ = 20: every replayed crafted report is flagged; memo-mimic devices are
    flagged only at the honest rate (their reports follow the honest law exactly)."""
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    threat = atk.ThreatModel(targets=[6, 7], beta=0.05)
    for variant, expect in (("persistent", 1.0), ("memo-mimic", None)):
        run = atk.run_attack(
            proto, threat, "MGA", values=stable(5000), engine="reports", variant=variant, rng=2
        )
        verdict = memo_consistency(proto, run.log.device, run.log.records, alpha=ALPHA)
        fake = verdict.devices >= run.n
        if expect is not None:
            assert verdict.flagged[fake].mean() == expect
        else:
            fpr = verdict.laws[TAU].fpr
            m = int(fake.sum())
            assert verdict.flagged[fake].mean() <= fpr + 5 * math.sqrt(fpr / m) + 1 / m


def _time_average(proto, variant, defended, seeds=12, n=5000):
    threat = atk.ThreatModel(targets=[6, 7], beta=0.05)
    out = []
    for seed in range(seeds):
        run = atk.run_attack(
            proto,
            threat,
            "MGA",
            values=stable(n),
            engine="reports",
            variant=variant,
            rng=seed,
            hash_trials=20,
        )
        if not defended:
            out.append(run.time_average_gain)
            continue
        verdict = memo_consistency(proto, run.log.device, run.log.records, alpha=ALPHA)
        est = defended_estimates(proto, verdict, run.log.epoch, run.log.records)
        out.append(float((est.mean(axis=0) - run.before.mean(axis=0))[[6, 7]].sum()))
    return np.mean(out), np.std(out, ddof=1) / math.sqrt(seeds)


@pytest.mark.parametrize("name", ["L-GRR", "L-OSUE", "BiLOLOHA"])
def test_persistent_vs_per_epoch_time_average(name):
    """Persistent-memo MGA (one crafted report replayed) against per-epoch MGA (re-crafted) on
    the time-averaged estimate, τ = 20, r = 2 (docs/attacks.md §5.4):

    - without a defence they tie: (G.2) does not depend on the variant;
    - with the memo-consistency defence (α = 1%): on L-GRR per-epoch wins (a replay is caught
      every time; cycling over two targets escapes the runner-up test now and then); on the UE
      chains both are caught; on BiLOLOHA (g = 2, p2 ≈ 0.80) persistent wins: a replay of 20
      epochs is within the honest law (0.80^20 ≈ 1.2% > α/3), while re-crafting must change the
      hash function, which no honest device does.
    """
    proto = ll.protocol(name, k=K, eps_perm=2.0, eps_1=1.0)
    p_plain, p_se = _time_average(proto, "persistent", False)
    e_plain, e_se = _time_average(proto, "per-epoch", False)
    assert abs(p_plain - e_plain) <= 3 * math.hypot(p_se, e_se)
    p_def, p_dse = _time_average(proto, "persistent", True)
    e_def, e_dse = _time_average(proto, "per-epoch", True)
    tol = 3 * math.hypot(p_dse, e_dse)
    if name == "L-GRR":
        assert e_def > p_def + tol
        assert e_def < 0.25 * e_plain  # still, most of the gain is gone
    elif name == "L-OSUE":
        assert abs(p_def) < 0.05 * p_plain and abs(e_def) < 0.05 * e_plain
    else:
        assert p_def > e_def + tol
        assert p_def == pytest.approx(p_plain, abs=3 * p_dse + 1e-3)


def test_replay_caught_once_tau_is_long_enough():
    """BiLOLOHA: the threshold x_hi drops to τ (a full replay is flagged) once p2^τ ≪ α."""
    proto = ll.protocol("BiLOLOHA", k=K, eps_perm=2.0, eps_1=1.0)
    assert law_for(proto, 20, ALPHA).x_hi > 20
    assert law_for(proto, 40, ALPHA).x_hi <= 40


def test_report_counts_differ_between_devices():
    """Devices with different numbers of reports are judged and read with their own law; the
    combined estimate stays unbiased."""
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    n = 4000
    ests = []
    for seed in range(20):
        log = atk.collect_reports(proto, stable(n, 10), rng=seed)
        drop = (log.device % 2 == 1) & (log.epoch >= 5)  # odd devices stop after 5 epochs
        keep = ~drop
        verdict = memo_consistency(proto, log.device[keep], log.records[keep])
        assert set(verdict.laws) == {5, 10}
        est = defended_estimates(proto, verdict, log.epoch[keep], log.records[keep])
        ests.append(est[7])  # epoch 7: only even devices report
    _, p1k, p0k = kept_law(proto, 10, ALPHA)
    kappa = kept_law(proto, 10, ALPHA)[0]
    v = (F * p1k * (1 - p1k) + (1 - F) * p0k * (1 - p0k)) / (n / 2 * kappa * (p1k - p0k) ** 2)
    assert np.all(np.abs(np.mean(ests, axis=0) - F) <= 5 * np.sqrt(v / 20))


def test_sparse_and_dense_counting_agree(monkeypatch):
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    log = atk.collect_reports(proto, stable(800, 6), rng=3)
    ids = log.device * 7919 + 10**12  # sparse, large ids: the np.unique path
    dense = memo_consistency(proto, log.device, log.records)
    monkeypatch.setattr(memo, "_DENSE_CELLS", 1)
    sparse = memo_consistency(proto, ids, log.records)
    assert np.array_equal(dense.top, sparse.top)
    assert np.array_equal(dense.runner_up, sparse.runner_up)
    assert np.array_equal(dense.flagged, sparse.flagged)


@pytest.mark.parametrize(
    "name, kw",
    [("OUE", {"eps": 1.0}), ("GRR", {"eps": 1.0}), ("dBitFlipPM", {"eps_perm": 2.0})],
)
def test_does_not_apply(name, kw):
    proto = ll.protocol(name, k=K, **kw)
    with pytest.raises(ValueError, match="memo_consistency: '"):
        memo_consistency(
            proto,
            np.zeros(1, dtype=np.int64),
            proto.perturb([0], rng=0) if not proto.longitudinal else np.zeros(1),
        )


@pytest.mark.parametrize("proto", registry_cases.cases(k=K))
def test_every_registered_protocol_is_defended_or_refused(proto):
    """Every registered protocol: the defence applies exactly when its traits say so (then the
    false-positive test above covers it), else it is refused with the trait's reason."""
    reason = memo_refusal(type(proto))
    if reason is None:
        assert memo.check_applies(proto) in atk.KINDS
        assert any(p == proto for p in chains())
    else:
        with pytest.raises(ValueError, match=reason):
            memo.check_applies(proto)


def test_defence_tests_cover_the_registry():
    from test_registry_coverage import every, missing

    assert missing(test_every_registered_protocol_is_defended_or_refused, every) == []


def test_bad_input():
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'tau' must be"):
        law_for(proto, 0, ALPHA)
    with pytest.raises(ValueError, match="'alpha' must be a finite number in \\(0, 1\\)"):
        law_for(proto, 5, 1.5)
    with pytest.raises(ValueError, match="one report per device id"):
        memo_consistency(proto, np.arange(3), np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize(
    "name, tau", [("L-OSUE", 6), ("L-OSUE", 260), ("L-GRR", 6), ("OLOLOHA", 6)]
)
def test_counting_paths_agree_with_a_direct_count(name, tau):
    """Epoch-by-epoch layout, shuffled reports and long histories (≥ 256 reports, no byte
    lanes) all give the statistics of a direct per-device count."""
    proto = ll.protocol(name, k=K, eps_perm=2.0, eps_1=1.0)
    log = atk.collect_reports(proto, stable(60, tau), rng=7)
    n = int(log.device.max()) + 1
    tiled = memo_consistency(proto, log.device, log.records)
    perm = np.random.default_rng(8).permutation(log.device.size)
    shuffled = memo_consistency(proto, log.device[perm], log.records[perm])
    assert np.array_equal(tiled.top, shuffled.top)
    assert np.array_equal(tiled.flagged, shuffled.flagged)
    for u in range(n):
        mine = log.records[log.device == u]
        if memo.check_applies(proto) == "unary":
            x = np.unpackbits(mine, axis=1, count=K).sum(axis=0)
            assert tiled.top[u] == x.max()
        else:
            sym = mine if mine.dtype.names is None else mine["bucket"]
            c = np.sort(np.bincount(sym))[::-1]
            assert tiled.top[u] == c[0] and tiled.runner_up[u] == (c[1] if c.size > 1 else 0)


@pytest.mark.parametrize("name", ["L-GRR", "OLOLOHA", "BiLOLOHA", "L-OSUE"])
def test_changing_values(name):
    """Devices whose value changes every epoch (docs/math.md §6.1) hold several memos. The
    replay test keeps its bound for them (5 SE); the one-value test's tails were not made for
    them (documented: LOLOHA flags several percent)."""
    from longldp.data import to_longitudinal

    proto = ll.protocol(name, k=K, eps_perm=2.0, eps_1=1.0)
    values = to_longitudinal(stable(20_000, 1)[0], TAU, np.random.default_rng(0))
    log = atk.collect_reports(proto, values, rng=1)
    replay = memo_consistency(proto, log.device, log.records, tests="replay")
    n = replay.flagged.size
    bound = replay.stated_fpr()
    assert replay.flagged.mean() <= bound + 5 * math.sqrt(max(bound, 1 / n) / n)
