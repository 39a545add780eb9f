"""Exact over time: the variance of a time-averaged estimate of unchanging values.

Users whose values never change reuse the same memos (and hash functions, sampled buckets) at
every report, so averaging τ estimates only removes the report-level part of the variance:

    Var[(1/τ) Σ_t f̂_v(t)] = V1 + (Vtot − V1)/τ

with Vtot = ``variance`` (one report) and V1 = ``first_round_variance`` (the part fixed by the
memos; docs/math.md, "Variance over time"). An engine that redraws anything a real client keeps
(the old per-user engine redrew LOLOHA's hash collisions at every timestamp) gives less.

For every longitudinal protocol of the shared table and both exact engines ("per-user",
"reports"), R populations of N users report τ times; per value v the sample variance s² of the
R time averages is compared with σ² = V1 + (Vtot − V1)/τ. For normal averages
(R − 1)·s²/σ² ~ χ²(R − 1) (N = 300 users make f̂ close to normal); each ratio s²/σ² must lie
between that law's ALPHA/(2·K) and 1 − ALPHA/(2·K) quantiles (Bonferroni over the K values
and both tails). Fixed seeds make the outcome deterministic; ALPHA bounds how likely a correct
engine would be to fail under another seed or NumPy stream.

The count-level engine draws timestamps independently: its time average has variance Vtot/τ,
which the last test checks, with the factor by which it understates the truth.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy.stats import chi2

import longldp as ll
from longldp import privacy
from longldp.simulate import simulate
from protocol_table import PROTOCOLS, F, K, representatives, table_ids

N = 300  # users per population (N·F integral)
TAU = 10  # timestamps
R = 120  # populations
ALPHA = 1e-4
LO, HI = (chi2.ppf([ALPHA / (2 * K), 1 - ALPHA / (2 * K)], R - 1) / (R - 1)).tolist()

LONGITUDINAL = [
    pid for pid, (name, _) in PROTOCOLS.items() if ll.get_protocol_class(name).longitudinal
]


def make(pid: str) -> ll.FrequencyOracle:
    name, params = PROTOCOLS[pid]
    return ll.protocol(name, k=K, **params)


def constant_values() -> np.ndarray:
    """(τ, N): every user holds the same value at every timestamp; histogram N·F."""
    counts = np.rint(F * N).astype(np.int64)
    assert counts.sum() == N
    return np.broadcast_to(np.repeat(np.arange(K), counts), (TAU, N))


def time_average_ratios(pid: str, engine: str) -> np.ndarray:
    """Per value: sample variance of the R time averages over V1 + (Vtot − V1)/τ."""
    proto, values = make(pid), constant_values()
    seeds = np.random.SeedSequence(zlib.crc32(f"{pid}/{engine}".encode())).spawn(R)
    means = np.array(
        [
            simulate(proto, values, np.random.default_rng(s), engine=engine).estimates.mean(0)
            for s in seeds
        ]
    )
    f = proto.frequencies_from_counts(np.bincount(values[0], minlength=K), N)
    return means.var(axis=0, ddof=1) / proto.time_average_variance(N, f, TAU)


@pytest.mark.parametrize("engine", ["per-user", "reports"])
@pytest.mark.parametrize("pid", LONGITUDINAL)
def test_time_average_variance_is_v1_plus_rest_over_tau(pid, engine):
    ratios = time_average_ratios(pid, engine)
    assert np.all((ratios > LO) & (ratios < HI)), (ratios.round(3), LO, HI)


@pytest.mark.parametrize("pid", table_ids(lambda c: c.longitudinal and c.report_kind == "hashed"))
def test_the_check_rejects_redrawn_hash_collisions(pid):
    # The old per-user engine redrew, at every timestamp, whether a non-holder's hash collides
    # with v: only the holders' part of V1 survived averaging. These bounds reject that law.
    proto = make(pid)
    r1 = proto.p1
    v1_holders = F * r1 * (1 - r1) / (N * (r1 - 1 / proto.g) ** 2)
    old = privacy.time_average_variance(proto.variance(N, F), v1_holders, TAU)
    assert np.mean(old / proto.time_average_variance(N, F, TAU) < LO) >= 0.5


def test_count_level_time_average_is_vtot_over_tau():
    """Count-level timestamps are independent: Var of the time average is Vtot/τ, short of the
    truth by the factor 1 + (τ − 1)·V1/Vtot (docs/math.md, "Variance over time")."""
    values = constant_values()
    for pid in representatives(lambda cls: cls.longitudinal):
        proto = make(pid)
        seeds = np.random.SeedSequence(zlib.crc32(pid.encode())).spawn(R)
        means = np.array(
            [
                simulate(
                    proto, values, np.random.default_rng(s), engine="count-level"
                ).estimates.mean(0)
                for s in seeds
            ]
        )
        ratios = means.var(axis=0, ddof=1) / (proto.variance(N, F) / TAU)
        assert np.all((ratios > LO) & (ratios < HI)), (pid, ratios.round(3))
        factor = proto.time_average_variance(N, F, TAU) / (proto.variance(N, F) / TAU)
        v1_share = proto.first_round_variance(N, F) / proto.variance(N, F)
        assert factor == pytest.approx(1 + (TAU - 1) * v1_share)
        assert np.all(factor > 1.5)


def test_first_round_variance_per_family():
    n, f = 1000, F
    ue = make("L-OUE")
    assert ue.first_round_variance(n, f) == pytest.approx(
        privacy.estimator_variance(n, f, ue.p1, ue.q1)
    )
    lgrr = make("L-GRR-paper")
    assert lgrr.first_round_variance(n, f) == pytest.approx(
        privacy.estimator_variance(n, f, lgrr.p1, lgrr.q1)
    )
    lh = make("OLOLOHA")  # a non-holder's memo supports v when H(v) hits it: 1/g, not q1
    assert lh.first_round_variance(n, f) == pytest.approx(
        privacy.estimator_variance(n, f, lh.p1, 1 / lh.g)
    )
    db = make("dBitFlipPM-d3")  # no second round: everything is fixed by the memos
    assert np.allclose(db.first_round_variance(n, f), db.variance(n, f))
    one_shot = ll.protocol("OLH", k=K, eps=1.0)  # nothing memoized
    assert np.all(one_shot.first_round_variance(n, f) == 0)
    for pid in LONGITUDINAL:
        proto = make(pid)
        v1, vt = proto.first_round_variance(n, f), proto.variance(n, f)
        assert np.all(v1 > 0) and np.all(v1 <= vt * (1 + 1e-12))
    with pytest.raises(ValueError, match="tau"):
        lh.time_average_variance(n, f, 0)


@pytest.mark.parametrize(
    "pid", table_ids(lambda c: c.longitudinal and c.report_kind in ("hashed", "hadamard"))
)
@pytest.mark.parametrize("cached", [True, False])
def test_per_user_loloha_is_the_reports_path_draw_for_draw(pid, cached, monkeypatch):
    """Both engines draw round 1, then each user's round-2 bucket, from the same stream; the
    per-user engine only aggregates differently (cached bit masks of H_u, or, above the cache
    limit, the server's own aggregation). So with one seed the estimates are identical."""
    from longldp.protocols import lh

    if not cached:
        monkeypatch.setattr(lh, "HASH_CACHE_LIMIT", 0)
    proto = make(pid)
    rng = np.random.default_rng(11)
    values = rng.integers(0, K, size=(6, 150))  # values change: memos are reused and created
    values[3:] = values[:3]
    a = simulate(proto, values, np.random.default_rng(5), engine="per-user")
    b = simulate(proto, values, np.random.default_rng(5), engine="reports")
    assert np.array_equal(a.estimates, b.estimates)
    assert np.array_equal(a.spent_epsilon, b.spent_epsilon)
