"""Memoization, per-user state, spent budget, serialization and the registry."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.protocols import SecureRandom
from registry_cases import CLASSES, build, cases

LONGITUDINAL = cases(where=lambda cls: cls.longitudinal)


def make(name: str, k: int = 20, **extra):
    """The registered protocol ``name`` at its first test parameters (``extra`` override)."""
    cls = ll.get_protocol_class(name)
    return build(cls, {**cls.test_params[0], **extra}, k)


def inputs(proto, codes):
    """The protocol's inputs for integer codes (strings for Bloom RAPPOR, 0/1 for boolean)."""
    values = proto.as_inputs(np.asarray(codes) % (proto.domain_size or 1 << 30))
    return values.tolist() if isinstance(values, np.ndarray) else values


def test_registry_lists_every_protocol_case_insensitively():
    names = [info.name for info in ll.protocols()]
    assert names == [cls.name for cls in CLASSES]
    assert ll.protocol("l-osue", k=5, eps_perm=1, eps_1=0.5).name == "L-OSUE"
    with pytest.raises(ValueError, match="RAPPOR: unknown parameter"):
        ll.protocol("RAPPOR", k=5, eps_perm=1, eps_1=0.5)  # never silently another protocol
    with pytest.raises(ValueError, match="unknown parameter"):
        ll.protocol("GRR", k=5, eps=1, epsilon=2)
    with pytest.raises(ValueError, match="missing parameter"):
        ll.protocol("GRR", k=5)
    with pytest.raises(ValueError, match="'name' must be one of"):
        ll.protocol("nope", k=5, eps=1)


@pytest.mark.parametrize(("cls", "params"), LONGITUDINAL)
def test_client_reuses_its_memo(cls, params):
    proto = build(cls, params, 20)
    three, four = inputs(proto, [3, 4])
    client = proto.client(np.random.default_rng(1))
    for _ in range(5):
        client.report(three)
    assert client.memo_count == 1
    memo_before = {key: np.copy(val) for key, val in client._memo.items()}
    client.report(three)
    for key, val in client._memo.items():
        np.testing.assert_array_equal(val, memo_before[key])
    client.report(four)
    assert client.memo_count <= 2


def test_memoized_reports_are_centred_on_the_memo():
    """With a memo, bit i of repeated reports is 1 w.p. p2 or q2 by the *memo* bit; without
    memoization it would be P1/P0. 4,000 reports separate the two by many standard errors."""
    proto = ll.protocol("L-SUE", k=16, eps_perm=4.0, eps_1=1.0)
    client = proto.client(np.random.default_rng(5))
    reports = np.array([client.report(7) for _ in range(4000)])
    bits = np.unpackbits(reports, axis=1, count=16).mean(axis=0)
    memo = np.unpackbits(next(iter(client._memo.values())), axis=1, count=16)[0].astype(bool)
    expected = np.where(memo, proto.p2, proto.q2)
    se = np.sqrt(expected * (1 - expected) / 4000)
    assert np.all(np.abs(bits - expected) < 5 * se)


@pytest.mark.parametrize(
    ("cls", "params"),
    cases(where=lambda cls: cls.longitudinal and cls.report_kind in ("hashed", "hadamard")),
)
def test_loloha_client_never_holds_more_than_g_memos(cls, params):
    proto = build(cls, params, 60)
    client = proto.client(np.random.default_rng(2))
    hash_ids = set()
    for v in np.random.default_rng(3).integers(0, 60, 500):
        hash_ids.add(int(client.report(int(v))["hash_id"]))
        assert client.memo_count <= proto.g
    assert len(hash_ids) == 1  # one hash function, kept forever
    assert client.spent_budget.memos <= proto.g
    assert client.spent_budget.epsilon <= proto.g * proto.eps_perm + 1e-9


@pytest.mark.parametrize(("cls", "params"), LONGITUDINAL)
def test_client_spent_budget(cls, params):
    proto = build(cls, params, 20)
    client = proto.client(np.random.default_rng(0))
    for v in inputs(proto, [1, 1, 1, 2, 1, 2, 1]):
        client.report(v)
    spent = client.spent_budget
    assert spent.reports == 7
    assert 1 <= spent.memos <= 2
    eps_1, eps_perm = proto.single_report_epsilon(), proto.first_round_epsilon()
    assert spent.epsilon == pytest.approx(min(7 * eps_1, spent.memos * eps_perm))


def test_one_shot_budget_grows_with_reports():
    client = make("GRR").client(np.random.default_rng(0))
    for _ in range(3):
        client.report(1)
    assert client.spent_budget.epsilon == pytest.approx(3.0)
    assert client.spent_budget.memos == 0


def test_client_defaults_to_os_randomness():
    client = make("L-GRR").client()
    assert isinstance(client.round2, SecureRandom)
    assert 0 <= int(client.report(5)) < 20


def test_secure_random_is_uniform_enough():
    rng = SecureRandom()
    x = rng.integers(0, 7, size=7000)
    counts = np.bincount(x, minlength=7)
    # Each count is Bin(7000, 1/7): sd ≈ 29; 6 sd is a bound that a correct source never trips.
    assert np.all(np.abs(counts - 1000) < 6 * np.sqrt(7000 / 7 * 6 / 7))
    u = rng.random(5000)
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 6 * np.sqrt(1 / 12 / 5000)


@pytest.mark.parametrize(("cls", "params"), LONGITUDINAL)
def test_population_memo_and_budget(cls, params):
    proto = build(cls, params, 20)
    rng = np.random.default_rng(4)
    n = 300
    memo = proto.new_memo(n)
    first = rng.integers(0, 20, n)
    proto.perturb(inputs(proto, first), memo, rng)
    proto.perturb(inputs(proto, first), memo, rng)
    assert np.all(memo.memos_per_user() == 1)
    second = (first + 10) % 20  # a different value, and for dBitFlipPM a different bucket
    proto.perturb(inputs(proto, second), memo, rng)
    per_user = memo.memos_per_user()
    assert np.all(per_user <= 2)
    spent = proto.spent_budget(memo)
    assert np.all(spent["reports"] == 3)
    expected = np.minimum(3 * proto.single_report_epsilon(), per_user * proto.first_round_epsilon())
    np.testing.assert_allclose(spent["epsilon"], expected)


def test_population_memo_is_reused_not_redrawn():
    """Same value twice: L-GRR with p2 → 1 would repeat the memo exactly; with the exact
    calibration at α close to 1 the memo shows through: the two timestamps' reports agree far
    more often than two independent draws would."""
    proto = ll.protocol("L-GRR", k=50, eps_perm=1.0, eps_1=0.999)
    rng = np.random.default_rng(9)
    values = rng.integers(0, 50, 5000)
    memo = proto.new_memo(5000)
    a = proto.perturb(values, memo, rng)
    b = proto.perturb(values, memo, rng)
    agree = np.mean(a == b)
    # Redrawing round 1 would make them agree w.p. Σ_y Pr[y]² ≈ 0.02; reusing the memo makes
    # them agree w.p. ≥ p2² ≈ 0.99. Half-way between is a bound neither side comes near.
    assert proto.p2**2 > 0.9
    assert agree > 0.5


def test_perturb_subset_of_users_keeps_hashes():
    proto = make("OLOLOHA")
    rng = np.random.default_rng(0)
    memo = proto.new_memo(10)
    r1 = proto.perturb(np.array([1, 2, 3]), memo, rng, users=np.array([7, 2, 5]))
    r2 = proto.perturb(np.array([1, 2, 3]), memo, rng, users=np.array([7, 2, 5]))
    np.testing.assert_array_equal(r1["hash_id"], r2["hash_id"])
    assert memo.reports.tolist() == [0, 0, 2, 0, 0, 2, 0, 2, 0, 0]


@pytest.mark.parametrize(("cls", "params"), cases())
def test_serialization_round_trip(cls, params):
    proto = build(cls, params, 300)
    rng = np.random.default_rng(1)
    reports = proto.perturb(inputs(proto, rng.integers(0, 300, 50)), proto.new_memo(50), rng)
    data = proto.encode_reports(reports)
    assert len(data) == 50 * proto.wire_size
    back = proto.decode_reports(data)
    np.testing.assert_array_equal(proto.support_counts(back), proto.support_counts(reports))
    agg = proto.aggregator()
    agg.add_bytes(data)
    np.testing.assert_array_equal(agg.support_counts, proto.support_counts(reports))
    client = proto.client(np.random.default_rng(3))
    value = inputs(proto, [299])[0]
    assert len(client.report_bytes(value)) == proto.wire_size == 12 + proto.report_nbytes


def test_report_sizes_are_compact():
    assert make("GRR", k=200).report_nbytes == 1
    assert make("L-GRR", k=1000).report_nbytes == 2
    assert make("L-OSUE", k=74).report_nbytes == 10
    assert make("OLOLOHA", k=74).report_nbytes == 9  # 8-byte hash id + 1-byte bucket
    assert make("OLOLOHA", k=74, hash_pool=256).report_nbytes == 2


def test_aggregator_is_incremental():
    proto = make("L-OSUE")
    rng = np.random.default_rng(0)
    values = rng.integers(0, 20, 1000)
    memo = proto.new_memo(1000)
    reports = proto.perturb(values, memo, rng)
    whole, parts = proto.aggregator(), proto.aggregator()
    whole.add(reports)
    parts.add(reports[:400])
    parts.add(reports[400:])
    assert parts.n == whole.n == 1000
    np.testing.assert_array_equal(parts.estimate(), whole.estimate())
    # Norm-Sub of the whole unbiased estimate (checking only "a distribution" would also pass
    # for any other consistent method).
    est = whole.estimate(postprocess="norm-sub")
    np.testing.assert_allclose(est, ll.postprocess.norm_sub(whole.estimate(), 1.0), atol=1e-12)
    assert np.any(whole.estimate() < 0)  # so Norm-Sub had something to do


def test_same_seed_same_reports():
    proto = make("OLOLOHA")
    values = np.arange(20).repeat(5)
    runs = []
    for _ in range(2):
        rng = np.random.default_rng(42)
        runs.append(proto.perturb(values, proto.new_memo(100), rng))
    np.testing.assert_array_equal(runs[0], runs[1])
