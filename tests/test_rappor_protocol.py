"""RAPPOR's protocol layer: privacy against the exact channel, google/rappor compatibility,
one chain with L-SUE, unbiased per-bit estimates, clients, bytes and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import longldp as ll
from longldp import privacy
from longldp.protocols.rappor import (
    RAPPOR,
    RapporPy,
    bits_to_int,
    bloom_bits,
    candidate_map,
    int_to_bits,
)

Z = 5.0


def paper(**kw) -> RAPPOR:
    params = {"k": 16, "h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75} | kw
    return ll.protocol("RAPPOR", **params)


# ---------------------------------------------------------------------- privacy
@pytest.mark.parametrize(
    ("h", "p", "q", "f", "eps_1", "eps_inf"),
    [
        (2, 0.5, 0.75, 0.5, 1.0743, 4.3944),
        (2, 0.5, 0.75, 0.75, 0.5343, 2.0433),
        (2, 0.39, 0.61, 0.45, 0.9728, 4.9471),
    ],
)
def test_note_vectors(h, p, q, f, eps_1, eps_inf):
    proto = paper(h=h, p=p, q=q, f=f)
    assert proto.eps_1 == pytest.approx(eps_1, abs=5e-5)
    assert proto.eps_perm == pytest.approx(eps_inf, abs=5e-5)
    qs, ps = proto.effective
    assert qs - ps == pytest.approx((1 - f) * (q - p))


def test_one_time_basic_rappor_is_ln3():
    proto = ll.protocol("RAPPOR-onehot-one-time", k=10, f=0.0, p=0.5, q=0.75)
    assert proto.eps_1 == pytest.approx(math.log(3))
    assert privacy.rappor_eps_inf(0.0, 1) == math.inf


def _bit_channel(patterns: list[tuple[int, ...]], k: int, hi: float, lo: float) -> np.ndarray:
    """Pr[output y | Bloom pattern x] over all 2^k outputs, bits independent."""
    outs = np.array(list(itertools.product([0, 1], repeat=k)), dtype=bool)
    rows = []
    for pat in patterns:
        b = np.zeros(k, dtype=bool)
        b[list(pat)] = True
        prob1 = np.where(b, hi, lo)
        rows.append(np.prod(np.where(outs, prob1, 1 - prob1), axis=1))
    return np.array(rows)


@pytest.mark.parametrize(
    ("h", "f", "p", "q"), [(2, 0.5, 0.5, 0.75), (2, 0.3, 0.6, 0.2), (1, 0.25, 0.3, 0.8)]
)
def test_epsilons_equal_exact_channel_of_small_bloom_filter(h, f, p, q):
    k = 4
    proto = ll.protocol("RAPPOR", k=k, h=h, m=1, f=f, p=p, q=q)
    # Every Bloom filter a string can produce: 1..h distinct positions.
    patterns = [c for r in range(1, h + 1) for c in itertools.combinations(range(k), r)]
    prr = privacy.channel_epsilon(_bit_channel(patterns, k, proto.p1, proto.q1))
    one = privacy.channel_epsilon(_bit_channel(patterns, k, *proto.effective))
    assert prr == pytest.approx(proto.first_round_epsilon(), rel=1e-9)
    assert one == pytest.approx(proto.single_report_epsilon(), rel=1e-9)
    assert prr <= proto.first_round_epsilon() and one <= proto.single_report_epsilon()


# ---------------------------------------------------------------------- google/rappor
class CycleRandom:
    """google/rappor's rappor_test.MockRandom: uniforms cycle 0.0, 0.6, 0.0 over the bits."""

    def random(self, size=None):
        n = int(np.prod(size))
        return np.resize(np.array([0.0, 0.6, 0.0]), n).reshape(size)


def test_google_python_client_vector_byte_for_byte():
    proto = ll.protocol("RAPPOR", k=16, h=2, m=64, f=0.5, p=0.5, q=0.75)
    client = proto.client(CycleRandom(), secret=b"secret", cohort=0, prr_source="rappor-py")
    bloom, prr, report = client.trace("abc")
    assert bits_to_int(bloom, 16) == 8256  # bits 6 and 13
    assert bits_to_int(prr, 16) == 57576
    assert bits_to_int(report, 16) == 64493
    assert isinstance(client.round1, RapporPy) and RapporPy.realized_f(proto) == 0.5
    q45 = ll.protocol("RAPPOR", k=16, h=2, m=1, f=0.45, p=0.39, q=0.61)
    assert RapporPy.realized_f(q45) == pytest.approx(58 / 128)  # ⌈128·0.45⌉/128 = 0.4531
    eps_inf, eps_1 = RapporPy.realized_epsilons(q45)
    assert eps_inf < q45.eps_perm and eps_1 < q45.eps_1  # the realized f is larger: safer
    rec = proto._make_reports(report, {"cohort": np.zeros(1, np.int64)})
    body = proto.encode_reports(rec)[12:]
    assert body[:2] == b"\x00\x00" and bits_to_int(np.frombuffer(body[2:], np.uint8), 16) == 64493
    wire = client.report_bytes("abc")  # header + body
    assert len(wire) == proto.wire_size and proto.decode_reports(wire)["cohort"][0] == 0


def test_bloom_hash_matches_google_for_v1():
    assert bloom_bits("v1", 0, 2, 128) == (56, 26)
    assert bloom_bits("v1", 1, 2, 128) == (99, 86)
    np.testing.assert_array_equal(candidate_map(["v1"], 2, 128, 2)[0], [[56, 26], [99, 86]])
    assert bits_to_int(int_to_bits(8256, 16), 16) == 8256


# ---------------------------------------------------------------------- one chain
def test_onehot_rappor_and_lsue_give_identical_reports():
    lsue = ll.protocol("L-SUE", k=12, eps_perm=2.0, eps_1=0.8)
    rap = ll.protocol("RAPPOR-onehot", k=12, f=2 * lsue.q1, p=lsue.q2, q=lsue.p2)
    assert rap.single_report_epsilon() == pytest.approx(lsue.single_report_epsilon())
    assert rap.first_round_epsilon() == pytest.approx(lsue.first_round_epsilon())
    values = np.random.default_rng(0).integers(0, 12, 400)
    r1, r2 = np.random.default_rng(7), np.random.default_rng(7)
    m1, m2 = lsue.new_memo(400), rap.new_memo(400)
    for t in range(3):
        a = lsue.perturb((values + t) % 12, m1, r1)
        b = rap.perturb((values + t) % 12, m2, r2)
        np.testing.assert_array_equal(a, b["bits"])
        assert np.all(b["cohort"] == 0)


# ---------------------------------------------------------------------- estimates
@pytest.mark.slow
def test_per_bit_estimates_unbiased_with_analytic_variance():
    proto = paper(m=1)
    strings = ["a", "b", "c", "d"]
    counts = np.array([600, 300, 100, 0])
    idx = candidate_map(strings, proto.h, proto.k, proto.m)
    truth = proto.true_ones(idx, counts[:, None])[0] / counts.sum()
    rng = np.random.default_rng(11)
    R, n = 4000, int(counts.sum())
    est = np.array(
        [
            proto.estimate(proto.sample_counts(strings, counts, rng, bloom_map=idx), n)[0]
            for _ in range(R)
        ]
    )
    var = privacy.estimator_variance(n, truth, proto.P1, proto.P0)
    assert np.all(np.abs(est.mean(axis=0) - truth) <= Z * np.sqrt(var / R))
    dev = est - est.mean(axis=0)
    s2 = (dev**2).sum(axis=0) / (R - 1)
    se = np.sqrt(np.maximum((dev**4).mean(axis=0) - s2**2 * (R - 3) / (R - 1), 0) / R)
    assert np.all(np.abs(s2 - var) <= Z * se)


def test_per_user_path_matches_count_level_in_mean():
    proto = paper(m=2)
    rng = np.random.default_rng(3)
    strings = np.array(["x"] * 300 + ["y"] * 100, dtype=object)
    memo = proto.new_memo(400)
    R = 60
    est = []
    for _ in range(R):
        reports = proto.perturb(strings, memo, rng)
        est.append(proto.estimate(proto.support_counts(reports), 400))
    est = np.array(est).mean(axis=0)
    coh = memo.state["cohort"]
    idx = candidate_map(["x", "y"], proto.h, proto.k, proto.m)
    per = np.stack([np.bincount(coh[:300], minlength=2), np.bincount(coh[300:], minlength=2)])
    truth = proto.true_ones(idx, per) / per.sum(axis=0)[:, None]
    # The PRR is drawn once and then fixed: the mean over reports targets the PRR's share,
    # whose spread around the truth is the PRR's own binomial noise, p1(1 − p1) = q1(1 − q1) =
    # p1·q1 per bit (q1 = 1 − p1); the IRR adds at most max(p2(1 − p2), q2(1 − q2)) per
    # report, averaged over R collections, on the scale 1/(P1 − P0).
    n_j = per.sum(axis=0)[:, None]
    var_prr = proto.p1 * proto.q1 / n_j / (proto.p1 - proto.q1) ** 2
    irr = max(proto.p2 * (1 - proto.p2), proto.q2 * (1 - proto.q2))
    var_irr = irr / (n_j * R) / (proto.P1 - proto.P0) ** 2
    assert np.all(np.abs(est - truth) <= Z * np.sqrt(var_prr + var_irr))
    assert np.all(memo.memos_per_user() == 1)
    spent = proto.spent_budget(memo)  # one PRR each: min(R·ε1, ε∞)
    np.testing.assert_allclose(spent["epsilon"], min(R * proto.eps_1, proto.eps_perm))


# ---------------------------------------------------------------------- clients
def test_hmac_prr_is_reproducible_from_the_secret():
    proto = paper()
    a = proto.client(np.random.default_rng(0), secret=b"k" * 32)
    b = proto.client(np.random.default_rng(1), secret=b"k" * 32)
    assert a.state["cohort"] == b.state["cohort"]
    pa = a.trace("home.example").memo
    pb = b.trace("home.example").memo
    np.testing.assert_array_equal(pa, pb)  # a client that lost its memo gets the same PRR
    for _ in range(3):
        a.report("home.example")
    assert a.memo_count == 1
    a.report("other")
    assert a.spent_budget.memos == 2
    assert a.spent_budget.epsilon == pytest.approx(min(5 * proto.eps_1, 2 * proto.eps_perm))


def test_hmac_prr_has_the_prr_law():
    proto = ll.protocol("RAPPOR", k=64, h=2, m=1, f=0.5, p=0.5, q=0.75)
    ones_on, ones_off, n_on, n_off = 0, 0, 0, 0
    for i in range(300):
        internals = proto.client(secret=bytes([i % 256, i // 256]) * 8).trace("s")
        b = np.unpackbits(internals.encoded.ravel(), count=64).astype(bool)
        r = np.unpackbits(internals.memo.ravel(), count=64).astype(bool)
        ones_on, n_on = ones_on + r[b].sum(), n_on + b.sum()
        ones_off, n_off = ones_off + r[~b].sum(), n_off + (~b).sum()
    for ones, n, prob in ((ones_on, n_on, proto.p1), (ones_off, n_off, proto.q1)):
        assert abs(ones / n - prob) <= Z * math.sqrt(prob * (1 - prob) / n)


def test_table_prr_is_kept_and_exported():
    proto = paper()
    client = proto.client(np.random.default_rng(2), prr_source="table")
    first = client.trace("v").memo
    again = client.trace("v").memo
    np.testing.assert_array_equal(first, again)
    restored = proto.client(
        np.random.default_rng(9),
        prr_source="table",
        memo=client.export_memo(),
        cohort=int(client.state["cohort"][0]),
    )
    np.testing.assert_array_equal(restored.trace("v").memo, first)


def test_boolean_rappor():
    proto = ll.protocol("RAPPOR-boolean", m=2, f=0.5, p=0.25, q=0.75)
    rng = np.random.default_rng(4)
    values = rng.random(2000) < 0.3
    memo = proto.new_memo(2000)
    counts = proto.support_counts(proto.perturb(values, memo, rng))
    assert counts.shape == (2, 2) and counts[:, 0].sum() == 2000
    est = proto.estimate(counts, 2000)
    share = np.average(est[:, 0], weights=counts[:, 0])
    assert abs(share - values.mean()) < 0.15


# ---------------------------------------------------------------------- bytes and bad input
def test_report_body_is_cohort_u16_then_packed_bits():
    proto = paper(m=300, k=20)
    rng = np.random.default_rng(5)
    reports = proto.perturb(["a", "b", "c"], proto.new_memo(3), rng)
    data = proto.encode_reports(reports)
    assert proto.report_nbytes == 2 + 3 and proto.wire_size == 12 + 5
    blobs = [data[i : i + 17][12:] for i in range(0, len(data), 17)]
    for rec, blob in zip(reports, blobs, strict=True):
        assert int.from_bytes(blob[:2], "big") == rec["cohort"]
        assert blob[2:] == rec["bits"].tobytes()
    back = proto.decode_reports(data)
    np.testing.assert_array_equal(back["cohort"], reports["cohort"])
    np.testing.assert_array_equal(proto.support_counts(back), proto.support_counts(reports))
    bad = bytearray(data[:17])
    bad[12:14] = (301).to_bytes(2, "big")
    with pytest.raises(ValueError, match="unknown cohort 301"):
        proto.decode_reports(bytes(bad))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"f": 1.0}, "'f' must be a number in \\[0, 1\\)"),
        ({"f": -0.1}, "'f' must be a number in \\[0, 1\\]"),
        ({"p": 0.6, "q": 0.6}, "'p' and 'q' must differ"),
        ({"f": 0.0}, "use the one-time variant"),
        ({"h": 17}, "'h' must be an integer in \\[1, 16\\]"),
        ({"k": 300}, "'k' must be an integer in \\[1, 256\\]"),
        ({"encoder": "onehot"}, "unknown parameter\\(s\\) encoder"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        paper(**params)


def test_bad_client_and_values():
    proto = paper()
    with pytest.raises(ValueError, match="k <= 32"):
        paper(k=64).client(prr_source="rappor-py")
    with pytest.raises(ValueError, match="prr_source"):
        proto.client(prr_source="nope")
    with pytest.raises(ValueError, match="unknown cohort"):
        proto.client(cohort=4)
    with pytest.raises(ValueError, match="str \\(UTF-8\\) or bytes"):
        proto.perturb([1, 2], proto.new_memo(2))
    with pytest.raises(ValueError, match="sample_counts"):
        proto.sample_support(np.array([1, 2]))
    # Budgets instead of (f, p, q) are refused, never silently another protocol.
    with pytest.raises(ValueError, match="RAPPOR: unknown parameter"):
        ll.protocol("RAPPOR", k=5, eps_perm=1.0, eps_1=0.5)
