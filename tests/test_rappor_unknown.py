"""RAPPOR with the unknown (apps/rappor/unknown.py, docs/math.md §21.10): the strings are
learned from n-gram reports, then decoded; what was found is stated with its uncertainty;
``longldp rappor decode --ngrams`` runs it without a candidate file; bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from longldp.apps.rappor import files, unknown
from longldp.cli import app
from longldp.protocols.rappor import RAPPOR

ALPHABET = "abcdefgh"
SCHEME = unknown.NgramScheme(ALPHABET, length=4, n=2)
WORDS = ["abba", "cafe", "dead", "bad"]
SHARES = [0.3, 0.2, 0.1, 0.05]


def population(n: int, rng: np.random.Generator) -> list[str]:
    """The four words at their shares; the rest random strings of 1-4 letters."""
    pick = rng.choice(len(WORDS) + 1, size=n, p=[*SHARES, 1 - sum(SHARES)])
    tail = ["".join(rng.choice(list(ALPHABET), int(rng.integers(1, 5)))) for _ in range(n)]
    return [WORDS[i] if i < len(WORDS) else tail[j] for j, i in enumerate(pick)]


ITEMS = population(40_000, np.random.default_rng(0))


@pytest.fixture(scope="module")
def collection() -> unknown.Collection:
    proto = RAPPOR(k=32, h=2, m=8, f=0.2, p=0.25, q=0.75)
    return unknown.collect(SCHEME, proto, proto, ITEMS, 1)


def test_strings_are_learned_without_a_candidate_list(collection):
    """Every word of share ≥ 5% is learned and detected with an interval that covers its count
    in the population (up to 5 SE of an interval's own error), and every detected string is
    held by some client (the tail's one-letter strings, about 1.1% each, are real)."""
    learned = unknown.learn(collection)
    rows = {r["string"]: r for r in learned.found()}
    held = {s: ITEMS.count(s) for s in set(ITEMS)}
    for word in WORDS:
        assert word in learned.candidates and word in rows, (word, learned.grams)
        r = rows[word]
        width = (r["ci_high"] - r["ci_low"]) / 2
        assert r["ci_low"] - 1.5 * width <= held[word] <= r["ci_high"] + 1.5 * width
    assert all(held.get(s, 0) > 0 for s in rows), set(rows) - set(held)
    assert collection.epsilon == pytest.approx(3 * collection.word_proto.single_report_epsilon())
    assert collection.epsilon_lifetime > collection.epsilon


def test_cli_decodes_without_a_candidate_file(collection, tmp_path):
    files.write_params(collection.word_proto, tmp_path / "params.csv")
    files.write_counts(
        collection.word_proto.support_counts(collection.words),
        tmp_path / "counts.csv",
        collection.word_proto,
    )
    unknown.write_ngram_reports(tmp_path / "ngrams.csv", collection)
    args = [
        "rappor",
        "decode",
        "--counts",
        str(tmp_path / "counts.csv"),
        "--params",
        str(tmp_path / "params.csv"),
        "--ngrams",
        str(tmp_path / "ngrams.csv"),
        "--alphabet",
        ALPHABET,
        "--length",
        "4",
        "--out",
        str(tmp_path / "out.json"),
    ]
    got = CliRunner().invoke(app, args)
    assert got.exit_code == 0, got.output
    assert "Learned" in got.output and "abba" in got.output
    out = json.loads((tmp_path / "out.json").read_text())
    detected = {r["string"] for r in out["rows"] if r["detected"]}
    assert set(WORDS) <= detected <= set(out["candidates"])
    pairs, first, _ = unknown.read_ngram_reports(
        tmp_path / "ngrams.csv", SCHEME, collection.gram_proto
    )
    np.testing.assert_array_equal(pairs, collection.pairs)
    np.testing.assert_array_equal(first["bits"], collection.first["bits"])
    bad = CliRunner().invoke(app, args[:6])
    assert bad.exit_code == 2 and "give exactly one of --map, --candidates and --ngrams" in (
        bad.output
    )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([], "at least one item; got an empty set"),
        (["abcde"], "at most 4 characters .* item 0 has 5"),
        (["ab", b"\xff"], "item 1 is not UTF-8"),
        (["abz"], "only the characters"),
        ("abba", "a sequence of strings"),
    ],
)
def test_bad_input_is_one_line(items, message):
    proto = RAPPOR(k=16, h=2, m=2)
    with pytest.raises(ValueError, match=message) as err:
        unknown.collect(SCHEME, proto, proto, items, 0)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="multiple of n"):
        unknown.NgramScheme(ALPHABET, length=5, n=2)
