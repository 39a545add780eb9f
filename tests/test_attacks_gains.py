"""Poisoning attacks: simulated gains against the closed forms (docs/attacks.md §3–§5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
import registry_cases
from longldp import attacks as atk
from longldp.attacks import gains

K = 8
N = 1000
F = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
VALUES = np.repeat(np.arange(K), (F * N).astype(int))
TARGETS = [5, 6, 7]
SEEDS = 120
#: Hash functions searched per fake user in the per-user MGA against OLH (kept small: fast).
TRIALS = 8


def refusal(cls: type) -> str | None:
    """Why no frequency attack applies to a registered class, read from its traits alone (None:
    the attacks know it): an estimate that is not a frequency vector has no gain on target
    values (longldp.attacks.kinds); a fake user of a mechanism whose rounds the server plans
    would need the plan of every epoch."""
    if cls.rounds.planned:
        return "rounds are planned by the server"
    if not cls.estimand.frequency_vector:
        return "estimates_frequencies is False"
    return None


#: Registered protocols no frequency attack applies to, with the reason each is refused,
#: derived from the traits (never a list of names).
REFUSED = {
    cls.name: why for cls in ll.protocols.PROTOCOL_CLASSES if (why := refusal(cls)) is not None
}


def build(cls: type, k: int = K) -> ll.protocols.FrequencyOracle:
    """A registry class at a small k from its first test parameters."""
    return registry_cases.build(cls, cls.test_params[0], k)


def attackable() -> list[ll.protocols.FrequencyOracle]:
    """Every registered class (first test parameters) that the attacks know."""
    return [build(cls) for cls in ll.protocols.PROTOCOL_CLASSES if cls.name not in REFUSED]


def targets_of(proto) -> list[int]:
    """TARGETS, or the last estimate index when the estimate is shorter (dBitFlipPM, b < k)."""
    size = proto.estimate_size
    return TARGETS if size >= K else [size - 1]


def simulated(
    proto, attack, engine, seeds=SEEDS, trials=TRIALS, variant="per-epoch", tau=1, targets=None
):
    threat = atk.ThreatModel(targets=TARGETS if targets is None else targets, beta=0.05)
    values = np.tile(VALUES, (tau, 1))
    g = [
        atk.run_attack(
            proto,
            threat,
            attack,
            values=values,
            engine=engine,
            rng=s,
            hash_trials=trials,
            variant=variant,
        ).time_average_gain
        for s in range(seeds)
    ]
    return float(np.mean(g)), float(np.std(g, ddof=1) / math.sqrt(seeds)), threat


@pytest.mark.parametrize("engine", ["count-level", "per-user"])
@pytest.mark.parametrize("attack", atk.ATTACKS)
@pytest.mark.parametrize("name", ["GRR", "OUE", "OLH"])
def test_gain_matches_closed_form(name, attack, engine):
    """Mean gain over 120 seeds within 3 SE of β(Σ_T φ_t − f_T) (G.1), both engines."""
    proto = ll.protocol(name, k=K, eps=1.0)
    mean, se, threat = simulated(proto, attack, engine)
    forecast = atk.expected_gain(
        proto,
        attack,
        TARGETS,
        threat.share(N),
        proto.true_frequencies(VALUES),
        hash_trials=TRIALS,
    )
    assert se > 0
    assert abs(mean - forecast.total) <= 3 * se, (mean, se, forecast.total)


@pytest.mark.parametrize("proto", registry_cases.cases(k=K))
def test_every_registered_protocol_is_attacked_or_refused(proto):
    """Every registered protocol and test parameters: MGA and RIA at count level match (G.1),
    or the protocol is refused with the reason listed in REFUSED (and nothing else is)."""
    if proto.name in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[proto.name]):
            atk.attack_kind(proto)
        return
    assert atk.attack_kind(proto) in atk.KINDS
    T = targets_of(proto)
    for attack in ("MGA", "RIA"):
        mean, se, threat = simulated(proto, attack, "count-level", seeds=100, targets=T)
        forecast = atk.expected_gain(
            proto,
            attack,
            T,
            threat.share(N),
            proto.true_frequencies(VALUES),
            hash_trials=TRIALS,
        )
        assert abs(mean - forecast.total) <= 3 * se, (attack, mean, se, forecast.total)


def test_attack_tests_cover_the_registry():
    """The test above is parametrized over every registered class (the registry-coverage check
    of tests/test_registry_coverage.py, applied to it), and REFUSED names only registered,
    refused protocols."""
    from test_registry_coverage import every, missing

    assert missing(test_every_registered_protocol_is_attacked_or_refused, every) == []
    assert REFUSED and set(REFUSED) <= set(ll.protocols.NAMES)
    left_out = type("Unlisted", (ll.protocols.GRR,), {"name": "Unlisted"})
    classes = (*ll.protocols.PROTOCOL_CLASSES, left_out)
    assert missing(test_every_registered_protocol_is_attacked_or_refused, every, classes) == [
        "Unlisted"
    ]


@pytest.mark.parametrize("engine", ["count-level", "per-user"])
@pytest.mark.parametrize("omega", [2, 4])
def test_subset_selection_gains(omega, engine):
    """SS: RPA, RIA and MGA with r = 3 targets above (ω = 2) and below (ω = 4) the subset size
    match (G.1) on both engines; crafted reports hold exactly ω values."""
    proto = ll.protocol("SS", k=K, eps=1.0, omega=omega)
    for attack in atk.ATTACKS:
        mean, se, threat = simulated(proto, attack, engine, seeds=100)
        forecast = atk.expected_gain(
            proto, attack, TARGETS, threat.share(N), proto.true_frequencies(VALUES)
        )
        assert abs(mean - forecast.total) <= 3 * se, (attack, mean, se, forecast.total)
        rec = atk.craft_reports(proto, attack, TARGETS, 200, rng=0)
        assert (np.unpackbits(rec, axis=1)[:, :K].sum(axis=1) == omega).all()
    mga = atk.expected_support(proto, "MGA", TARGETS)
    assert mga[TARGETS].sum() == pytest.approx(min(omega, len(TARGETS)))


def test_unknown_report_kinds_are_refused():
    """An enumerated report space that is not fixed-size subsets is refused, never attacked as
    another kind."""
    proto = ll.protocol("SS", k=K, eps=1.0)
    fake = type("Opaque", (type(proto),), {"name": "Opaque"})
    opaque = fake(k=K, eps=1.0)
    object.__setattr__(opaque, "omega", None)
    with pytest.raises(ValueError, match="opaque to the attacks"):
        atk.attack_kind(opaque)


@pytest.mark.parametrize("name", ["L-GRR", "L-OSUE", "OLOLOHA", "dBitFlipPM"])
def test_longitudinal_chains_per_user(name):
    """Chains on the per-user engine (memos kept over τ = 3 epochs) match (G.2) for MGA."""
    cls = ll.protocols.get_protocol_class(name)
    proto = build(cls)
    mean, se, threat = simulated(proto, "MGA", "per-user", seeds=100, tau=3)
    truth = np.tile(proto.true_frequencies(VALUES), (3, 1))
    forecast = atk.expected_time_average_gain(proto, "MGA", threat, N, truth, hash_trials=TRIALS)
    assert abs(mean - forecast.total) <= 3 * se, (mean, se, forecast.total)


@pytest.mark.parametrize("name", ["L-GRR", "L-SUE", "BiLOLOHA"])
def test_memo_mimic_gain(name):
    """Crafted memo + honest round 2: E[support] = q2 + (p2 − q2)·Pr[memo points at v]."""
    proto = build(ll.protocols.get_protocol_class(name))
    mean, se, threat = simulated(proto, "MGA", "per-user", seeds=100, tau=2, variant="memo-mimic")
    truth = np.tile(proto.true_frequencies(VALUES), (2, 1))
    forecast = atk.expected_time_average_gain(
        proto, "MGA", threat, N, truth, variant="memo-mimic", hash_trials=TRIALS
    )
    assert abs(mean - forecast.total) <= 3 * se, (mean, se, forecast.total)
    plain = atk.expected_time_average_gain(proto, "MGA", threat, N, truth, hash_trials=TRIALS)
    assert forecast.total < plain.total  # mimicry costs gain: p2 < 1


def test_join_epoch_and_report_rate():
    """Fake users joining at epoch 2 of 4 and reporting half the time: (G.2) with E[M/(n+M)]."""
    proto = ll.protocol("L-GRR", k=K, eps_perm=2.0, eps_1=1.0)
    threat = atk.ThreatModel(targets=TARGETS, beta=0.05, join_epoch=2, report_rate=0.5)
    values = np.tile(VALUES, (4, 1))
    g = [
        atk.run_attack(
            proto, threat, "MGA", values=values, engine="per-user", rng=s
        ).time_average_gain
        for s in range(100)
    ]
    truth = np.tile(proto.true_frequencies(VALUES), (4, 1))
    forecast = atk.expected_time_average_gain(proto, "MGA", threat, N, truth)
    se = np.std(g, ddof=1) / 10
    assert abs(np.mean(g) - forecast.total) <= 3 * se
    assert (
        forecast.total
        < 0.5
        * atk.expected_time_average_gain(
            proto, "MGA", atk.ThreatModel(targets=TARGETS, beta=0.05), N, truth
        ).total
    )


@pytest.mark.parametrize("attack", atk.ATTACKS)
@pytest.mark.parametrize("name", ["GRR", "OUE", "OLH"])
def test_reproduces_cao_table1(name, attack):
    """(G.1) equals [CJG21] Table 1 where the paper's assumptions hold: ε = ln 3 makes OLH's
    g = e^ε + 1 = 4 an integer, and MGA-OLH's ideal search gathers all r targets."""
    eps = math.log(3.0)
    proto = ll.protocol(name, k=K, eps=eps)
    f = proto.true_frequencies(VALUES)
    ours = atk.expected_gain(proto, attack, TARGETS, 0.05, f, hash_trials=TRIALS)
    if name == "OLH" and attack == "MGA":
        assert proto.g == 4
        ideal = np.where(np.isin(np.arange(K), TARGETS), 1.0, 1.0 / proto.g)
        total = 0.05 * (atk.reading(proto, ideal)[TARGETS] - f[TARGETS]).sum()
        assert ours.total < total  # a finite search gathers fewer than r targets
    else:
        total = ours.total
    paper = gains.cao_table1(name, attack, 0.05, len(TARGETS), f[TARGETS].sum(), eps, K)
    assert total == pytest.approx(paper, rel=1e-12, abs=1e-12)


def test_occupancy_law_against_enumeration():
    """Pr[M ≤ x] of r = 3 items in g = 3 buckets, by enumerating the 27 assignments."""
    from itertools import product

    from longldp.attacks import occupancy

    cdf = occupancy.max_occupancy_cdf(3, 3)
    tops = [max(np.bincount(a, minlength=3)) for a in product(range(3), repeat=3)]
    for x in range(4):
        assert cdf[x] == pytest.approx(np.mean(np.array(tops) <= x))
    assert occupancy.expected_best(3, 3, 1) == pytest.approx(np.mean(tops))


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.1, 1.5, float("nan"), "x"])
def test_bad_beta(beta):
    with pytest.raises(ValueError, match="'beta' must be a finite number in \\(0, 1\\)"):
        atk.ThreatModel(targets=[1], beta=beta)


@pytest.mark.parametrize("targets", [[], [K], [-1], [1, 1]])
def test_bad_targets(targets):
    proto = ll.protocol("GRR", k=K, eps=1.0)
    with pytest.raises(ValueError, match="targets"):
        atk.run_attack(proto, atk.ThreatModel(targets=targets, beta=0.1), "MGA", values=VALUES)


def test_bad_threat_and_attack():
    with pytest.raises(ValueError, match="exactly one of 'beta'"):
        atk.ThreatModel(targets=[1])
    with pytest.raises(ValueError, match="'report_rate' must be in \\(0, 1\\]"):
        atk.ThreatModel(targets=[1], beta=0.1, report_rate=1.5)
    proto = ll.protocol("GRR", k=K, eps=1.0)
    with pytest.raises(ValueError, match="'attack' must be one of RPA, RIA, MGA"):
        atk.expected_gain(proto, "XYZ", [1], 0.1, F)
    with pytest.raises(ValueError, match="'tau' must be"):
        atk.ThreatModel(targets=[1], beta=0.1).active(0)
    with pytest.raises(ValueError, match="one-shot"):
        atk.craft_memos(proto, [1], 3)
    with pytest.raises(ValueError, match="memo-mimic"):
        atk.run_attack(
            proto,
            atk.ThreatModel(targets=[1], beta=0.1),
            "RPA",
            values=VALUES,
            variant="memo-mimic",
        )


def test_bloom_rappor_is_refused():
    proto = ll.protocol("RAPPOR", k=16)
    with pytest.raises(ValueError, match="promote_string"):
        atk.expected_gain(proto, "MGA", [1], 0.1, np.full(16, 1 / 16))
    with pytest.raises(ValueError, match="must be a protocol object"):
        atk.attack_kind("GRR")


@pytest.mark.parametrize("proto", attackable(), ids=lambda p: p.name)
def test_fake_reports_are_wire_records(proto):
    """Crafted reports are what a client sends: they encode to the wire format, decode back
    and are counted by the server's aggregator."""
    for attack in atk.ATTACKS:
        rec = atk.craft_reports(proto, attack, TARGETS, 50, rng=1, hash_trials=TRIALS)
        back = proto.decode_reports(proto.encode_reports(rec))
        assert np.array_equal(back, rec)
        agg = proto.aggregator()
        agg.add(rec)
        assert agg.n == 50
