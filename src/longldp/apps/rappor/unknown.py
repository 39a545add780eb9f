"""RAPPOR with the unknown: learn the candidate strings from the reports ([FPE16]; math §21.10).

Fanti, Pihur and Erlingsson, "Building a RAPPOR with the unknown" (PoPETs 2016). Strings of
at most ``length`` characters of a public ``alphabet`` are padded with ``PAD`` to ``length``
and cut into ``length/n`` n-grams at fixed positions. Each client sends three RAPPOR reports
(one collection; the ε of the three add up, docs/math.md §4):

- her whole string (the ordinary RAPPOR report, decoded against candidates, math §11.2);
- the n-grams at a pair of positions (i, j), the pair drawn uniformly from the public list of
  all position pairs and sent in the clear (it says nothing about the string); each n-gram is
  a RAPPOR report of the string ``"<position>:<n-gram>"``.

The server (:func:`learn`), with no candidate list:

1. per position, decodes the n-gram reports of that position against every n-gram of the
   alphabet (|alphabet + PAD|^n candidates; procedure A with its multiple-testing correction)
   and keeps the significant n-grams;
2. per pair of positions, estimates the joint distribution of the two positions' kept n-grams
   from the clients who reported that pair (the EM of :mod:`longldp.apps.rappor.association`)
   and keeps the pairs whose joint share exceeds ``z`` standard errors;
3. builds candidate strings: one kept n-gram per position such that every pair of positions
   holds a kept pair (the cliques of the position graph), at most ``max_candidates``;
4. decodes the whole-string reports against these candidates (procedure A), which tests every
   candidate, so a candidate that nobody holds is rejected like any other.

What it found is a :class:`~longldp.apps.rappor.decode.DecodeResult` over the learned
candidates (estimates, standard errors, p-values, detection) plus, per position and pair, what
was kept (:class:`Learned`). ``longldp rappor decode`` runs it when no candidate file is given.

[FPE16] G. Fanti, V. Pihur, Ú. Erlingsson, "Building a RAPPOR with the unknown: privacy-
preserving learning of associations and data dictionaries", PoPETs 2016(3).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.apps.rappor.association import OTHER, associate
from longldp.apps.rappor.decode import DecodeResult, blas_limit, decode
from longldp.protocols.rappor import RAPPOR

OWNER = "rappor.unknown"
#: The padding character of strings shorter than the declared length.
PAD = "_"


@dataclass(frozen=True)
class NgramScheme:
    """How strings are cut: the public ``alphabet``, the declared ``length`` (a multiple of
    ``n``) and the n-gram size ``n``; position pairs are every (i, j), i < j."""

    alphabet: str
    length: int = 8
    n: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.alphabet, str) or not self.alphabet:
            raise ValueError(f"{OWNER}: 'alphabet' must be a non-empty str; got {self.alphabet!r}.")
        if PAD in self.alphabet or len(set(self.alphabet)) != len(self.alphabet):
            raise ValueError(
                f"{OWNER}: 'alphabet' must list distinct characters other than {PAD!r}; got "
                f"{self.alphabet!r}."
            )
        check.integer(OWNER, "n", self.n, minimum=1, maximum=4)
        check.integer(OWNER, "length", self.length, minimum=2 * self.n, maximum=64)
        if self.length % self.n:
            raise ValueError(
                f"{OWNER}: 'length' must be a multiple of n = {self.n}; got {self.length}."
            )

    @property
    def positions(self) -> int:
        """Number of n-gram positions, length/n."""
        return self.length // self.n

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The public list of position pairs (i, j), i < j."""
        return list(itertools.combinations(range(self.positions), 2))

    def grams(self) -> list[str]:
        """Every n-gram of the alphabet and the padding."""
        symbols = self.alphabet + PAD
        return ["".join(t) for t in itertools.product(symbols, repeat=self.n)]

    def pad(self, items: Sequence[str]) -> list[str]:
        """The strings padded to ``length``; ValueError (one line) for an empty set, a string
        over the declared length, a character outside the alphabet, or non-UTF-8 bytes."""
        if isinstance(items, (str, bytes)):
            raise ValueError(f"{OWNER}: 'items' must be a sequence of strings; got one string.")
        out = []
        allowed = set(self.alphabet)
        for i, raw in enumerate(items):
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(
                        f"{OWNER}: item {i} is not UTF-8 ({err.reason} at byte {err.start})."
                    ) from None
            if not isinstance(raw, str):
                raise ValueError(f"{OWNER}: items must be str; item {i} is {raw!r}.")
            if len(raw) > self.length:
                raise ValueError(
                    f"{OWNER}: items must have at most {self.length} characters (the declared "
                    f"length); item {i} has {len(raw)}: {raw!r}."
                )
            bad = next((c for c in raw if c not in allowed), None)
            if bad is not None:
                raise ValueError(
                    f"{OWNER}: items must use only the characters {self.alphabet!r}; item {i} "
                    f"has {bad!r}."
                )
            out.append(raw + PAD * (self.length - len(raw)))
        if not out:
            raise ValueError(f"{OWNER}: 'items' must hold at least one item; got an empty set.")
        return out

    def gram_at(self, padded: str, position: int) -> str:
        """The n-gram of a padded string at ``position``."""
        return padded[position * self.n : (position + 1) * self.n]


def gram_value(position: int, gram: str) -> str:
    """The string an n-gram report encodes: ``"<position>:<n-gram>"``."""
    return f"{position}:{gram}"


@dataclass(frozen=True)
class Collection:
    """One collection's reports: the whole-string reports (RAPPOR records, or their counts
    matrix), and per client the pair index into ``scheme.pairs`` and her two n-gram reports
    (RAPPOR records, row-aligned)."""

    scheme: NgramScheme
    word_proto: RAPPOR
    gram_proto: RAPPOR
    words: NDArray
    pairs: NDArray[np.int64]
    first: NDArray
    second: NDArray

    @property
    def epsilon(self) -> float:
        """Each client's ε in this collection: the three reports' ε1 added (sequential
        composition, math §4)."""
        return self.word_proto.single_report_epsilon() + 2 * self.gram_proto.single_report_epsilon()

    @property
    def epsilon_lifetime(self) -> float:
        """What the three memoized PRRs reveal however often the client reports them again:
        the three ε∞ added (one-time RAPPOR: equal to :attr:`epsilon`)."""
        return self.word_proto.first_round_epsilon() + 2 * self.gram_proto.first_round_epsilon()


def _irr_text(proto: RAPPOR, records: NDArray) -> list[str]:
    """google/rappor's IRR column: bit i of the report as character k − 1 − i (MSB first)."""
    bits = np.unpackbits(np.ascontiguousarray(records["bits"]), axis=1, count=proto.k)
    return ["".join("1" if b else "0" for b in row[::-1]) for row in bits]


def _records(proto: RAPPOR, cohorts: list[int], irr: list[str]) -> NDArray:
    out = np.zeros(len(cohorts), dtype=proto.report_dtype)
    out["cohort"] = cohorts
    bits = np.array([[c == "1" for c in text[::-1]] for text in irr], dtype=bool).reshape(
        len(irr), proto.k
    )
    out["bits"] = np.packbits(bits, axis=1)
    return proto.check_reports(out)


def write_ngram_reports(path: Any, col: Collection) -> None:
    """The n-gram reports as CSV: header ``pair,cohort_a,irr_a,cohort_b,irr_b``, one row per
    client (the pair's index into the scheme's pairs; IRRs as google/rappor prints them)."""
    import csv

    a, b = _irr_text(col.gram_proto, col.first), _irr_text(col.gram_proto, col.second)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pair", "cohort_a", "irr_a", "cohort_b", "irr_b"])
        for i in range(col.pairs.size):
            w.writerow(
                [
                    int(col.pairs[i]),
                    int(col.first["cohort"][i]),
                    a[i],
                    int(col.second["cohort"][i]),
                    b[i],
                ]
            )


def read_ngram_reports(
    path: Any, scheme: NgramScheme, gram_proto: RAPPOR
) -> tuple[NDArray[np.int64], NDArray, NDArray]:
    """(pairs, first, second) of an n-gram reports CSV (:func:`write_ngram_reports`); every
    row checked (ValueError naming the line)."""
    import csv

    pairs, ca, ia, cb, ib = [], [], [], [], []
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, None)
        if head != ["pair", "cohort_a", "irr_a", "cohort_b", "irr_b"]:
            raise ValueError(
                f"{OWNER}: {path} must start with the header pair,cohort_a,irr_a,cohort_b,irr_b."
            )
        for line, row in enumerate(reader, start=2):
            if len(row) != 5:
                raise ValueError(f"{OWNER}: {path} line {line}: expected 5 columns.")
            try:
                p, c1, c2 = int(row[0]), int(row[1]), int(row[3])
            except ValueError:
                raise ValueError(
                    f"{OWNER}: {path} line {line}: pair and cohorts must be integers."
                ) from None
            if not 0 <= p < len(scheme.pairs):
                raise ValueError(
                    f"{OWNER}: {path} line {line}: pair {p} is not in [0, {len(scheme.pairs)})."
                )
            for c, irr in ((c1, row[2]), (c2, row[4])):
                if not 0 <= c < gram_proto.m or len(irr) != gram_proto.k or set(irr) - {"0", "1"}:
                    raise ValueError(
                        f"{OWNER}: {path} line {line}: cohorts in [0, {gram_proto.m}) and IRRs "
                        f"of {gram_proto.k} binary digits expected."
                    )
            pairs.append(p)
            ca.append(c1)
            ia.append(row[2])
            cb.append(c2)
            ib.append(row[4])
    if not pairs:
        raise ValueError(f"{OWNER}: {path} holds no reports.")
    return (
        np.array(pairs, dtype=np.int64),
        _records(gram_proto, ca, ia),
        _records(gram_proto, cb, ib),
    )


def from_files(
    scheme: NgramScheme, word_proto: RAPPOR, word_counts: Any, gram_proto: RAPPOR, ngrams: Any
) -> Collection:
    """A collection whose whole-string reports are given as a counts matrix (what google/rappor
    tools produce) and whose n-gram reports are read from ``ngrams``."""
    pairs, first, second = read_ngram_reports(ngrams, scheme, gram_proto)
    return Collection(scheme, word_proto, gram_proto, word_counts, pairs, first, second)


def collect(
    scheme: NgramScheme, word_proto: RAPPOR, gram_proto: RAPPOR, items: Sequence[str], rng: Any
) -> Collection:
    """Simulate the clients: each reports her padded string and the n-grams of a uniform pair
    of positions (one-time reports: every client reports once)."""
    gen = np.random.default_rng(rng)
    padded = scheme.pad(items)
    n = len(padded)
    pair_list = scheme.pairs
    pairs = gen.integers(0, len(pair_list), size=n)
    words = word_proto.perturb(padded, word_proto.new_memo(n), gen)
    vals_a = [
        gram_value(pair_list[p][0], scheme.gram_at(s, pair_list[p][0]))
        for s, p in zip(padded, pairs, strict=True)
    ]
    vals_b = [
        gram_value(pair_list[p][1], scheme.gram_at(s, pair_list[p][1]))
        for s, p in zip(padded, pairs, strict=True)
    ]
    memo = gram_proto.new_memo(n)
    first = gram_proto.perturb(vals_a, memo, gen)
    second = gram_proto.perturb(vals_b, gram_proto.new_memo(n), gen)
    return Collection(scheme, word_proto, gram_proto, words, pairs.astype(np.int64), first, second)


@dataclass(frozen=True)
class Learned:
    """What the server learned: per position the kept n-grams (with their decoded shares), per
    pair the kept n-gram pairs (joint share and SE), the candidates built, and the final
    decode of the whole strings against them (``result``; padding stripped from the names)."""

    grams: dict[int, dict[str, float]]
    pairs: dict[tuple[int, int], dict[tuple[str, str], tuple[float, float]]]
    candidates: list[str]
    result: DecodeResult
    truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def found(self) -> list[dict[str, object]]:
        """The detected strings, largest first, with counts, proportions and 95% intervals."""
        return [row for row in self.result.table(True)]


def _position_reports(col: Collection, position: int) -> NDArray:
    """The n-gram reports of ``position``: the first of pairs starting there, the second of
    pairs ending there."""
    starts = np.array([p[0] == position for p in col.scheme.pairs])
    ends = np.array([p[1] == position for p in col.scheme.pairs])
    return np.concatenate([col.first[starts[col.pairs]], col.second[ends[col.pairs]]])


def learn(
    col: Collection,
    *,
    alpha: float = 0.05,
    correction: str = "bh",
    z: float = 3.0,
    max_candidates: int = 5000,
    selection: str = "lasso-sigma",
    seed: int = 0,
) -> Learned:
    """The dictionary learned from the reports, then the whole strings decoded against it
    (module docstring, steps 1–4). ``alpha`` and ``correction`` are the decodes' level and
    multiple-testing correction (steps 1 and 4); ``z`` the standard errors a pair's joint share
    must exceed (step 2)."""
    scheme = col.scheme
    grams_all = scheme.grams()
    kept: dict[int, dict[str, float]] = {}
    for pos in range(scheme.positions):
        reports = _position_reports(col, pos)
        if reports.size == 0:
            kept[pos] = {}
            continue
        names = [gram_value(pos, g) for g in grams_all]
        res = decode(
            col.gram_proto,
            col.gram_proto.support_counts(reports),
            names,
            alpha=alpha,
            correction=correction,
            selection=selection,
            seed=seed,
        )
        kept[pos] = {grams_all[i]: float(res.proportion[i]) for i in np.flatnonzero(res.detected)}
    pairs: dict[tuple[int, int], dict[tuple[str, str], tuple[float, float]]] = {}
    for idx, (a, b) in enumerate(scheme.pairs):
        rows, cols = list(kept[a]), list(kept[b])
        mine = col.pairs == idx
        if not rows or not cols or not np.any(mine):
            pairs[(a, b)] = {}
            continue
        with blas_limit():  # small dense products: one BLAS thread is fastest
            assoc = associate(
                col.gram_proto,
                col.first[mine],
                [gram_value(a, g) for g in rows],
                col.gram_proto,
                col.second[mine],
                [gram_value(b, g) for g in cols],
                shares1=[kept[a][g] for g in rows],
                shares2=[kept[b][g] for g in cols],
                tol=1e-5,
                max_iter=300,
            )
        found = {}
        for i, ga in enumerate(rows):
            for j, gb in enumerate(cols):
                share, se = float(assoc.joint[i, j]), float(assoc.std_error[i, j])
                if share > z * se and share > 0:
                    found[(ga, gb)] = (share, se)
        pairs[(a, b)] = found
    cands, truncated = _cliques(scheme, kept, pairs, max_candidates)
    notes = []
    if truncated:
        notes.append(f"candidates capped at {max_candidates} (max_candidates)")
    if not cands:
        notes.append("no candidate string: no n-gram combination is significant at every pair")
    names = cands or [PAD * scheme.length]
    words = np.asarray(col.words)
    counts = words if words.dtype.names is None else col.word_proto.support_counts(words)
    result = decode(
        col.word_proto,
        counts,
        names,
        alpha=alpha,
        correction=correction,
        selection=selection,
        seed=seed,
    )
    result.candidates[:] = [c.rstrip(PAD) for c in result.candidates]
    return Learned(kept, pairs, [c.rstrip(PAD) for c in cands], result, truncated, notes)


def _cliques(
    scheme: NgramScheme,
    kept: dict[int, dict[str, float]],
    pairs: dict[tuple[int, int], dict[tuple[str, str], tuple[float, float]]],
    limit: int,
) -> tuple[list[str], bool]:
    """Every choice of one kept n-gram per position whose every pair is kept (backtracking in
    position order), as padded strings; at most ``limit`` (then truncated)."""
    out: list[str] = []
    P = scheme.positions

    def extend(chosen: list[str]) -> bool:
        pos = len(chosen)
        if pos == P:
            text = "".join(chosen)
            valid = PAD not in text.rstrip(PAD)  # padding only at the end
            if valid:
                out.append(text)
            return len(out) < limit
        for g in kept[pos]:
            if all((chosen[i], g) in pairs[(i, pos)] for i in range(pos)):
                chosen.append(g)
                go = extend(chosen)
                chosen.pop()
                if not go:
                    return False
        return True

    complete = extend([])
    return out, not complete


__all__ = [
    "OTHER",
    "PAD",
    "Collection",
    "Learned",
    "NgramScheme",
    "collect",
    "from_files",
    "gram_value",
    "learn",
    "read_ngram_reports",
    "write_ngram_reports",
]
