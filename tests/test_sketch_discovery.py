"""Heavy-hitter discovery (docs/math.md §21.6–§21.9) and item codecs (§21.1).

- Every item above its stated threshold is found with the stated probability on synthetic Zipf
  data (PEM, TreeHist, SFP), within 5 binomial standard errors.
- At an ε small enough that every threshold exceeds every frequency, false discoveries stay
  within the stated rate (at most α expected per collection).
- Longitudinal PEM: memoized prefix reports, and each user's ε is min(t·ε1, d·ε∞).
- Bad input: one line each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from longldp import privacy
from longldp.protocols.sketch import discovery as dsc
from longldp.protocols.sketch import items as its

Z = 5.0
WIDTH = 48


def zipf_population(n: int, distinct: int, s: float, rng: np.random.Generator):
    pool = np.unique(rng.integers(0, 1 << WIDTH, distinct * 2, dtype=np.uint64))[:distinct]
    pool = rng.permutation(pool)
    p = 1.0 / np.arange(1, distinct + 1) ** s
    p /= p.sum()
    counts = rng.multinomial(n, p)
    codes = rng.permutation(np.repeat(pool, counts))
    return codes, pool, counts / n


def found_rate(plan, n: int, R: int, seed: int, sfp: bool = False):
    rng = np.random.default_rng(seed)
    codes, pool, f = zipf_population(n, 40, 1.1, rng)
    hits = np.zeros(pool.size)
    false = 0
    for _ in range(R):
        res = dsc.sfp_discover(plan, codes, rng) if sfp else dsc.discover(plan, codes, rng)
        got = set(res.items.tolist())
        hits += [c in got for c in pool.tolist()]
        false += len(got - set(pool.tolist()))
    prob = (dsc.sfp_detection_probability if sfp else dsc.detection_probability)(plan, n, f)
    return hits / R, prob, false


def assert_detection(rate, prob, R):
    stated = prob >= 0.5
    assert stated.any(), "the setting must state a guarantee for some items"
    se = np.sqrt(prob * (1 - prob) / R) + 1e-12
    # found at least as often as stated (one-sided, 5 SE; at prob ≈ 1 a single miss fails)
    assert np.all(rate[stated] >= prob[stated] - Z * se[stated] - 1.0 / R * (prob[stated] < 1)), (
        rate,
        prob,
    )


@pytest.mark.parametrize(
    "plan",
    [
        dsc.pem_plan(WIDTH, 4.0, start=4, step=4),
        dsc.treehist_plan(WIDTH, 6.0, start=4, step=4),
    ],
    ids=["PEM", "TreeHist"],
)
def test_items_above_threshold_are_found(plan):
    R = 8
    rate, prob, _ = found_rate(plan, 30_000, R, seed=5)
    assert_detection(rate, prob, R)


def test_sfp_finds_items_above_threshold():
    plan = dsc.SFPPlan(WIDTH, 8.0, frag_bits=8, m=256, d=16, engine="count-level")
    R = 4
    rate, prob, _ = found_rate(plan, 100_000, R, seed=6, sfp=True)
    assert_detection(rate, prob, R)


@pytest.mark.parametrize("method", ["pem", "treehist", "sfp"])
def test_no_false_discoveries_beyond_the_stated_rate(method):
    """ε so small that the last threshold exceeds every frequency: any item found is found by
    chance; at most α = 0.05 expected per collection (Bonferroni per round), so over R runs the
    count is Poisson-bounded by αR + 5·sqrt(αR)."""
    rng = np.random.default_rng(9)
    n, R, alpha = 4000, 30, 0.05
    codes, _pool, f = zipf_population(n, 20, 1.1, rng)
    sel = dsc.Selection("threshold", alpha, cap=16)
    if method == "sfp":
        plan = dsc.SFPPlan(WIDTH, 0.05, m=64, d=4, select=sel, engine="count-level")
    elif method == "pem":
        plan = dsc.pem_plan(WIDTH, 0.05, start=4, step=4, select=sel)
    else:
        plan = dsc.treehist_plan(WIDTH, 0.05, start=4, step=4, select=sel)
    found = 0
    for _ in range(R):
        res = (
            dsc.sfp_discover(plan, codes, rng)
            if method == "sfp"
            else dsc.discover(plan, codes, rng)
        )
        assert res.rounds[-1].threshold > f.max()
        found += res.items.size
    assert found <= alpha * R + Z * math.sqrt(alpha * R)


def test_estimates_of_found_items_are_unbiased():
    """PEM's frequencies come from its last group: unbiased for the items it finds (which it
    finds with probability ≈ 1 here), with the oracle's variance plus group sampling."""
    rng = np.random.default_rng(3)
    n, R = 24_000, 10
    codes, pool, f = zipf_population(n, 6, 1.0, rng)
    plan = dsc.pem_plan(WIDTH, 6.0, start=4, step=4, select=dsc.Selection(cap=8))
    est = np.full((R, pool.size), np.nan)
    for r in range(R):
        res = dsc.discover(plan, codes, rng)
        where = {int(c): e for c, e in zip(res.items.tolist(), res.estimates, strict=True)}
        est[r] = [where.get(int(c), np.nan) for c in pool]
    assert not np.isnan(est).any()
    g = len(plan.lengths)
    n_g = n // g
    o = plan.round_oracle(g - 1)
    var = o.variance(n_g, f) + privacy.sketch.group_sampling_variance(f, n, n_g)
    assert np.all(np.abs(est.mean(axis=0) - f) <= Z * np.sqrt(var / R))


def test_longitudinal_pem_accounting():
    rng = np.random.default_rng(4)
    n, tau = 6000, 4
    codes, pool, _f = zipf_population(n, 8, 1.2, rng)
    series = np.stack([codes] * tau)
    series[2:, : n // 10] = pool[-1]  # a tenth of the users change item at epoch 2
    plan = dsc.pem_plan(WIDTH, 2.0, start=4, step=8)
    out = dsc.discover_over_time(plan, series, eps_perm=2.0, eps_1=0.5, rng=rng)
    assert len(out.epochs) == tau
    # each user: at most one memo per distinct prefix bucket she reported (<= 2 items here)
    assert out.memos.min() >= 1 and out.memos.max() <= 2
    expect = np.minimum(tau * 0.5, out.memos * 2.0)
    assert np.allclose(out.spent, expect)
    stable = out.memos[n // 10 :]
    assert np.all(stable == 1)  # an unchanged item is one memo: ε stays at min(t·ε1, ε∞)
    sizes = privacy.sketch.group_sizes(n, len(plan.lengths))
    assert sorted(r.reports for r in out.epochs[0].rounds) == sorted(sizes)


# ------------------------------------------------------------------------------------------
# Item codecs and bad input
# ------------------------------------------------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def test_text_codec_round_trip_and_prefixes():
    codec = its.TextItems(LETTERS, 6)
    words = ["hello", "help", "a", "", "zzzzzz"]
    codes = codec.encode(words)
    assert codec.decode(codes) == words
    # the first 3 symbols of "hello" and "help" are the same prefix
    p = codec.prefix(codes, 3 * codec.symbol_bits)
    assert p[0] == p[1] and codec.decode(p[:1], symbols=3) == ["hel"]
    assert codec.width == 30
    bytes_codes = codec.encode([w.encode() for w in words])
    assert np.array_equal(bytes_codes, codes)


def test_text_keys_distinguish_strings():
    keys = its.text_keys(["a", "b", "ab", "ba", "a\u00e9", "ab"], max_length=8)
    assert keys[2] == keys[5] and len(set(keys[:5].tolist())) == 5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: its.TextItems(LETTERS, 6).encode([]), "empty set"),
        (lambda: its.TextItems(LETTERS, 3).encode(["abcd"]), "at most 3 characters"),
        (lambda: its.TextItems(LETTERS, 6).encode(["ab1"]), "only the characters"),
        (lambda: its.TextItems(LETTERS, 6).encode([b"ab\xff"]), "not UTF-8"),
        (lambda: its.TextItems(LETTERS, 6).encode(["ab\x00"]), "NUL"),
        (lambda: its.TextItems(LETTERS, 6).encode("abc"), "a sequence of strings"),
        (lambda: its.TextItems(LETTERS, 20), "'length' must be an integer in [1, 12]"),
        (lambda: its.IntegerItems(8).encode([3, 256]), "[0, 2^8)"),
        (lambda: its.IntegerItems(8).encode([-1]), "[0, 2^8)"),
        (lambda: its.IntegerItems(8).encode([1.0]), "dtype float64"),
        (lambda: its.text_keys(["x" * 9], 8), "at most 8 characters"),
        (lambda: dsc.pem_plan(4, 1.0, start=0, step=2, select=dsc.Selection(cap=17)), "2^4"),
        (lambda: dsc.discover(dsc.pem_plan(8, 1.0), np.array([], np.uint64), None), "empty set"),
        (lambda: dsc.pem_plan(48, 1.0, start=20, step=4), "first round would test"),
        (lambda: dsc.SFPPlan(48, 1.0, frag_bits=7), "must divide the width"),
    ],
)
def test_bad_input_one_line(call, message):
    with pytest.raises(ValueError) as info:
        out = call()
        if isinstance(out, dsc.PrefixPlan):  # the first round's size is checked when run
            dsc.discover(out, np.zeros(10, np.uint64), np.random.default_rng(0))
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_english_words_bundled_and_discoverable():
    """The bundled word list (DATA.md): Zipf-like (frequencies non-increasing, the first word
    'the'), codable as text items, and PEM over words of <= 6 letters finds the most frequent
    ones at a large ε (their stated detection probability is ≈ 1)."""
    from longldp.data import english_words

    words, per_billion = english_words()
    assert len(words) == 10_000 and words[0] == "the"
    assert np.all(np.diff(per_billion) <= 0)
    codec = its.TextItems(LETTERS, 6)
    short = [i for i, w in enumerate(words) if len(w) <= 6 and set(w) <= set(LETTERS)]
    assert len(short) > 4000
    vocab = [words[i] for i in short[:500]]
    p = per_billion[short[:500]] / per_billion[short[:500]].sum()
    rng = np.random.default_rng(8)
    n = 100_000
    counts = rng.multinomial(n, p)
    codes = rng.permutation(np.repeat(codec.encode(vocab), counts))
    plan = dsc.pem_plan(codec.width, 8.0, start=0, step=5, select=dsc.Selection(cap=16))
    res = dsc.discover(plan, codes, rng)
    sure = np.flatnonzero(dsc.detection_probability(plan, n, counts / n) > 0.99)
    assert sure.size >= 3
    assert {vocab[i] for i in sure} <= set(codec.decode(res.items))
