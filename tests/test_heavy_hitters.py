"""apps/heavy_hitters: discovery with each round's users and budget stated, the detection
guarantee on Zipf data, no false discoveries at small ε, discovery over epochs with its
accounting, the row store, bad input (docs/heavy_hitters.md, docs/math.md §21.6–§21.9)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import longldp as ll
from longldp.apps import heavy_hitters as hh

ALPHA = "abcdefghijklmnopqrstuvwxyz"
CODEC = hh.text_codec(ALPHA, 6)  # 5 bits per symbol: 30-bit codes


def zipf_items(
    n: int, rng: np.random.Generator, support: int = 400, draw_rng: np.random.Generator = None
) -> tuple[list[str], dict]:
    """n draws (from ``draw_rng``, default ``rng``) of a Zipf(1.1) law over ``support``
    random 3-6 letter words (drawn from ``rng``)."""
    words = set()
    while len(words) < support:
        size = int(rng.integers(3, 7))
        words.add("".join(rng.choice(list(ALPHA), size)))
    vocab = sorted(words)
    p = 1.0 / np.arange(1, support + 1) ** 1.1
    p /= p.sum()
    order = rng.permutation(support)  # frequencies not in alphabetical order
    draws = (rng if draw_rng is None else draw_rng).choice(support, size=n, p=p)
    freq = {vocab[order[i]]: float(p[i]) for i in range(support)}
    return [vocab[order[i]] for i in draws], freq


@pytest.mark.parametrize("method", hh.METHODS)
def test_rounds_state_who_answered_and_at_what_epsilon(method):
    """PEM: every user answers exactly one prefix round, at ε. TreeHist and SFP: every user
    answers one prefix (fragment) round and the whole-item round, and the two ε add up to ε."""
    rng = np.random.default_rng(1)
    items, _ = zipf_items(6000, rng)
    opts = {"frag_bits": 10, "hash_bits": 6, "m": 256, "d": 16} if method == "sfp" else {}
    got = hh.find(items, 4.0, method=method, codec=CODEC, k=8, rng=2, **opts)
    parts = [r for r in got.rounds if r.what != "item"]
    assert sum(r.users for r in parts) == len(items)
    if method == "pem":
        assert all(r.epsilon == 4.0 for r in got.rounds)
    else:
        (final,) = [r for r in got.rounds if r.what == "item"]
        assert final.users == len(items) and final is got.rounds[-1]
        assert all(r.epsilon + final.epsilon == pytest.approx(4.0) for r in parts)
    assert got.epsilon == 4.0 and got.n == len(items)
    assert np.all(np.diff(got.estimates) <= 0)  # largest first
    assert np.allclose(got.upper - got.lower, 2 * 1.959963984540054 * got.se)
    assert got.as_dict()["items"][0]["item"] == got.items[0]


def test_pem_finds_every_item_above_its_stated_probability_on_zipf():
    """Threshold selection: items whose stated detection probability is at least 0.9 are found
    in (nearly) every collection: over 12 collections, misses of such items stay within what
    their stated miss probabilities allow (Markov: a 5x margin on the expected count)."""
    rng = np.random.default_rng(5)
    n = 30_000
    _, freq = zipf_items(n, rng)
    opts = {"start": 5, "step": 5}
    heavy = [w for w, f in freq.items() if f > 0.02]
    prob = hh.detection_probability(n, [freq[w] for w in heavy], 6.0, CODEC.width, k=32, **opts)
    sure = [w for w, p in zip(heavy, prob, strict=True) if p >= 0.9]
    assert len(sure) >= 3
    misses, expected = 0, 0.0
    for rep in range(12):
        draw, _ = zipf_items(n, np.random.default_rng(5), draw_rng=np.random.default_rng(rep))
        got = hh.find(draw, 6.0, codec=CODEC, k=32, select="threshold", rng=rep, **opts)
        found = set(got.items)
        misses += sum(w not in found for w in sure)
        expected += sum(1 - p for w, p in zip(heavy, prob, strict=True) if w in sure)
    assert misses <= max(1.0, 5 * expected)


def test_nothing_is_found_when_the_threshold_exceeds_every_frequency():
    """At ε = 0.05 the first round's threshold is above 1: every collection finds nothing (the
    false discoveries are at most α per round in expectation, here none in 10 collections)."""
    rng = np.random.default_rng(7)
    items, _ = zipf_items(5000, rng)
    for rep in range(10):
        got = hh.find(items, 0.05, codec=CODEC, k=8, select="threshold", rng=rep)
        assert got.items == [] and got.rounds[0].threshold > 1.0


def test_discovery_over_epochs_spends_at_most_eps_perm_on_a_fixed_item():
    """Devices whose item never changes hold one memo per oracle: after τ epochs they have
    spent min(τ·ε1, ε∞) = ε∞; a device whose item changes every epoch may hold more memos."""
    rng = np.random.default_rng(8)
    items, freq = zipf_items(12_000, rng)
    fixed = [items] * 4
    out = hh.find_over_time(fixed, 4.0, 2.0, codec=CODEC, k=8, rng=3, start=5, step=5)
    assert len(out.epochs) == 4 and out.accounting.rule == "per-memo"
    assert np.all(out.memos == 1)
    np.testing.assert_allclose(out.spent, 4.0)
    assert out.summary()["max"] == pytest.approx(4.0)
    top = max(freq, key=freq.get)
    assert all(top in epoch.items for epoch in out.epochs)
    moving = [list(np.roll(items, t)) for t in range(4)]
    out2 = hh.find_over_time(moving, 4.0, 2.0, codec=CODEC, k=8, rng=3, start=5, step=5)
    assert out2.memos.max() > 1 and out2.spent.max() <= 4 * 2.0 + 1e-9


def test_row_store_equals_the_protocol_support():
    rng = np.random.default_rng(9)
    for name, budget in (("CMS", {"eps": 2.0}), ("L-CMS", {"eps_perm": 2.0, "eps_1": 1.0})):
        proto = ll.protocol(name, m=100, d=7, **budget)
        store = hh.RowStore(proto)
        agg = proto.aggregator()
        memo = proto.new_memo(300)
        for _ in range(3):
            items = [f"w{int(i)}" for i in rng.integers(0, 50, 300)]
            rep = proto.perturb(items, memo, rng)
            store.add(rep)
            agg.add(rep)
            np.testing.assert_array_equal(store.support(), agg.support_counts)
        assert store.n == agg.n == 900
    with pytest.raises(ValueError, match="RowStore: stores \\(hash_id, bits\\) reports"):
        hh.RowStore(ll.protocol("HCMS", m=16, d=2, eps=1.0))


@pytest.mark.parametrize(
    ("items", "options", "message"),
    [
        ([], {}, "at least one item; got an empty set"),
        (["abc"], {"k": 2**31}, "'k' must be <= the domain size 2\\^30"),
        (["abcdefg"], {}, "at most 6 characters .* item 0 has 7"),
        ([b"ab", b"\xff"], {}, "item 1 is not UTF-8"),
        (["ab1"], {}, "only the characters"),
        (["ab"], {"method": "nope"}, "'method' must be one of"),
    ],
)
def test_bad_input_is_one_line(items, options, message):
    with pytest.raises(ValueError, match=message) as err:
        hh.find(items, 1.0, codec=CODEC, **options)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ the command line
def test_cli_finds_the_frequent_words_of_a_file(tmp_path):
    """`longldp heavy-hitters FILE`: one device per line; the words drawn most often are
    found with intervals, each round's devices and ε printed, the JSON the library's."""
    from typer.testing import CliRunner

    from longldp.cli import app

    rng = np.random.default_rng(5)
    words = rng.choice(["apple", "pear", "fig"], 6000, p=[0.5, 0.3, 0.2])
    path = tmp_path / "words.txt"
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    args = ["heavy-hitters", str(path), "--eps", "4", "--length", "6", "--k", "3"]
    got = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "f.json")])
    assert got.exit_code == 0, got.output
    assert "pem: 6,000 devices, ε = 4 per device" in got.stdout and "round 0 (prefix" in got.stdout
    found = json.loads((tmp_path / "f.json").read_text())
    want = hh.find(list(words), 4.0, codec=hh.text_codec(length=6), k=3, rng=0).as_dict()
    assert found == json.loads(json.dumps(want))
    assert {r["item"] for r in found["items"]} == {"apple", "pear", "fig"}


@pytest.mark.parametrize(
    ("content", "options", "message"),
    [
        (b"", [], "at least one item; got an empty set"),
        (b"ab\ncd\n", ["--length", "2", "--alphabet", "abcd", "--k", "65"],
         "'--k' must be <= the domain size 2\\^6"),
        (b"apple\nbananas\n", ["--length", "6"], "at most 6 characters .* item 1 has 7"),
        (b"apple\n\xff\xfe\n", [], "item 1 is not UTF-8"),
        (b"5\n70000\n", ["--bits", "16"], "line 2 must be a decimal integer in \\[0, 2\\^16\\)"),
        (b"5\n", ["--method", "x"], "'--method' must be one of"),
    ],
)  # fmt: skip
def test_cli_bad_input_is_one_error_line(tmp_path, content, options, message):
    from test_cli_errors import one_error_line

    path = tmp_path / "items.txt"
    path.write_bytes(content)
    out = tmp_path / "f.json"
    line = one_error_line(["heavy-hitters", str(path), *options, "--out", str(out)])
    assert re.search(message, line), line
    assert not out.exists()  # nothing half-written


# ------------------------------------------------------------------ the server
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"eps": 2.0, "bits": 4, "start": 0, "step": 2, "keep": 17},
         "'keep' must be <= the domain size 2\\^4"),
        ({"eps": 2.0, "bits": None, "alphabet": "", "length": 3}, "alphabet"),
        ({"eps": 2.0, "bits": None, "alphabet": "ab", "length": 0}, "length"),
        ({"eps": 2.0, "bits": 4, "alphabet": "ab"}, "not both"),
    ],
)  # fmt: skip
def test_server_refuses_a_bad_discovery_collection_with_4xx_json(tmp_path, params, message):
    """A PEM collection whose parameters are refused (k = keep above the domain's size, an
    empty alphabet, a zero length, integers and text at once): 422 with the reason as JSON,
    and no collection is created."""
    from server_helpers import ADMIN, bearer
    from test_server_protocols import make

    client = make(tmp_path)
    spec = {"name": "PEM", "params": params}
    r = client.post("/v1/collections", json={"name": "p", "protocol": spec}, headers=bearer(ADMIN))
    assert r.status_code == 422 and re.search(message, r.json()["error"]), r.text
    assert client.get("/v1/collections/p", headers=bearer(ADMIN)).status_code == 404
