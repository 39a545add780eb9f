"""Candidate tests found from data: the search half and the held-out half (docs/audit.md §7).

A *world* is one input (one value, or one sequence of τ values) given to a black-box
randomizer many times; a *trial* is what the auditor sees of one run: a report, or the τ
reports of one client, reduced to :class:`Features`. A test of the ordered pair of worlds
(a, b) is an event T on a trial; if the randomizer is ε-DP for these inputs then
Pr[T | a] ≤ e^ε·Pr[T | b] for every T fixed in advance, and counts of T on fresh trials give a
Clopper–Pearson lower bound on ε (docs/math.md §13.3).

The events are never derived from the randomizer's claimed parameters. On the *search* half of
the trials, for every ordered pair of worlds, this module scores candidate events of five
families, all through counts (matrix operations over trials, no loop over trials):

- ``histogram``: when the trials take few distinct values (exact report histograms, at most
  :data:`MAX_CELLS` cells), the sets of cells ranked by the estimated likelihood ratio
  ĥ_a(y)/ĥ_b(y), every prefix of that ranking (the Neyman–Pearson sets of the estimated channel);
- ``column``: the same per column (a byte of the report; for lifetimes a per-bit count, a count
  of one report symbol, or an agreement statistic): events "column j ∈ S";
- ``bit``: one bit set or clear;
- ``bit-pair``: every pair of bits, the four cells of their joint value ranked the same way (from
  the Gram matrix BᵀB of the bit matrix: one matrix product per world);
- ``byte-pair`` (one report): the joint histogram of two bytes, its 65,536 cells ranked the same
  way (cells seen in the fit trials), for every adjacent pair of bytes and every pair among the
  bytes the learned scores weigh most: a leak that lives only in the joint of two bytes (a
  value byte whose meaning depends on a timing or order byte) shows in no single byte, bit or
  pair of bits, and the histogram family is skipped once reports take more than
  :data:`MAX_CELLS` values;
- ``naive-bayes`` and ``classifier``: a score learned on the search half (per-column
  log-frequencies; a multinomial logistic regression over the bits, the classifier DP-Sniper
  uses, Bichsel et al., IEEE S&P 2021), thresholded at a search-half quantile.

Every candidate is ranked by the Clopper–Pearson bound its *search* counts would give at the
held-out level (a Wilson approximation first, the exact bound for the best few); the best
``tests`` candidates over all pairs and families are then counted once on the *held-out* half and
each held-out bound is taken at level α/m, m the number of held-out tests (Bonferroni). The
byte-pair family has its own share of the m tests (:func:`pair_share`: 1 of up to 9, 2 of
10–14, …), which no other family can take, so that a joint leak is held out even when the
single-byte families fill the ranking with weaker near-copies. The
search half may try any number of events: the held-out trials are independent of the choice, so
the maximum of the m held-out bounds is below the true ε with probability ≥ 1 − α.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from longldp.audit import stats

#: Largest number of distinct trial keys for which the exact-histogram family runs.
MAX_CELLS = 4096
#: Fit and select rows per world used by the bit-pair family (its Gram matrices): enough to
#: find a pair whose effect a held-out bound can see; the held-out count uses every trial.
PAIR_ROWS = 1 << 15
#: Search rows per world on which the learned scores choose their thresholds.
SCORE_ROWS = 1 << 16
#: Rows (all worlds together) the classifier is trained on.
TRAIN_ROWS = 40_000
#: At most this many bits enter the bit-pair family (the most informative single bits).
MAX_PAIR_BITS = 128
#: Thresholds a learned score is tried at (quantiles of the select trials' scores).
SCORE_THRESHOLDS = 128
#: Candidates per family and pair whose search bound is computed exactly.
RESCORE = 3
#: Rows per block when a computation materializes rows × columns temporaries.
BLOCK = 1 << 16
#: Two columns are counted (and looked up) together as one code while their joint alphabet
#: has at most this many values (two bytes: 65,536).
PAIR_CODES = 1 << 16
#: The byte-pair family joins every adjacent pair of bytes (at most this many pairs) ...
MAX_ADJACENT_PAIRS = 64
#: ... and every pair among the bytes that the learned scores weigh most (this many bytes).
LEARNED_PAIR_BYTES = 6
FAMILIES = ("histogram", "column", "bit", "bit-pair", "byte-pair", "naive-bayes", "classifier")

_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


# ------------------------------------------------------------------------------ features


@dataclass(frozen=True)
class Layout:
    """What the columns of :class:`Features` mean (shared by every world of one audit)."""

    sizes: tuple[int, ...]
    column_names: tuple[str, ...]
    n_bits: int
    bit_labels: tuple[str, ...] = ()
    key_name: str = "report"
    #: Feed the categorical columns to the classifier too (lifetimes: counts carry more than
    #: the majority bits); for one report the columns are the bytes, already in the bits.
    classify_columns: bool = False
    #: The columns are the packed bytes of the bits (one report): bit counts are read off the
    #: column histograms instead of being counted again.
    columns_are_bytes: bool = False

    def bit_label(self, i: int) -> str:
        """What bit ``i`` of the packed bits is."""
        return self.bit_labels[i] if i < len(self.bit_labels) else f"bit {i}"


@dataclass(eq=False)
class Features:
    """n trials of one world, as the auditor sees them.

    ``cat`` (n, c): small non-negative integers, column j in [0, sizes[j]); ``bits`` (n, ⌈nb/8⌉)
    packed bits (``numpy.packbits`` order); ``key`` (n,) uint64: one code per distinct trial
    (the report's bytes, or the modal report of a lifetime), or None.
    """

    cat: NDArray
    bits: NDArray[np.uint8]
    key: NDArray[np.uint64] | None

    @property
    def n(self) -> int:
        """Number of trials."""
        return int(self.cat.shape[0])

    def head(self, rows: int) -> Features:
        """The first ``rows`` trials (the search subsamples of the costlier families)."""
        return self.rows(slice(0, rows))

    def rows(self, sl: slice) -> Features:
        """The trials in ``sl`` (views, no copy)."""
        key = None if self.key is None else self.key[sl]
        return Features(self.cat[sl], self.bits[sl], key)


def unpack_bits(bits: NDArray[np.uint8], n_bits: int, dtype: Any = np.float32) -> NDArray:
    """(n, n_bits) 0/1 matrix of packed bits."""
    return np.unpackbits(bits, axis=1, count=n_bits).astype(dtype, copy=False)


def row_keys(rows: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """One uint64 code per row of bytes: the bytes themselves when they fit in 8, else a mix.

    Only a fixed function of the row is needed (an event "key ∈ S" is an event on the report
    whatever the function); a collision merges two reports into one cell, which costs power,
    never validity.
    """
    n, w = rows.shape
    if w <= 8:
        padded = np.zeros((n, 8), dtype=np.uint8)
        padded[:, 8 - w :] = rows
        return padded.view(">u8").ravel().astype(np.uint64)
    words = -(-w // 8)
    padded = np.zeros((n, words * 8), dtype=np.uint8)
    padded[:, :w] = rows
    lanes = padded.view(">u8").astype(np.uint64)
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words):
            h ^= lanes[:, j]
            h *= np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0xBF58476D1CE4E5B9)
    return h


def column_histograms(cat: NDArray, sizes: Sequence[int]) -> NDArray[np.int64]:
    """(c, A) counts of each value of each column, A = max(sizes).

    Columns are taken two at a time: the pair (j, j + 1) is one code u·A + v of at most
    :data:`PAIR_CODES` values, counted by one ``bincount``, and its two margins are the two
    columns' histograms (half the bincount passes of one column at a time; for bytes the codes
    are the big-endian 16-bit words of the row, a view, no arithmetic).
    """
    c = cat.shape[1]
    width = max(sizes) if sizes else 1
    out = np.zeros((c, width), dtype=np.int64)
    for j, code in _column_codes(cat, width):
        pair = _paired(j, c, width)
        joint = np.bincount(code, minlength=width * width if pair else width)
        if pair:
            joint = joint.reshape(width, width)
            out[j] += joint.sum(axis=1)
            out[j + 1] += joint.sum(axis=0)
        else:
            out[j] += joint
    return out


def _paired(j: int, c: int, width: int) -> bool:
    """Does :func:`_column_codes` give column j together with column j + 1?"""
    return j + 1 < c and width * width <= PAIR_CODES


def _column_codes(cat: NDArray, width: int) -> Iterator[tuple[int, NDArray]]:
    """(j, code) for the columns of ``cat`` (values in [0, width)): the pair (j, j + 1) as one
    code ``cat[:, j]·width + cat[:, j + 1]`` while width² ≤ :data:`PAIR_CODES`, else column j
    alone (and the last column of an odd count)."""
    c = cat.shape[1]
    if width * width > PAIR_CODES:
        for j in range(c):
            yield j, cat[:, j]
        return
    even = c - c % 2
    words = None
    if cat.dtype == np.uint8 and width == 256 and even and cat.strides[1] == 1:
        words = cat[:, :even].view(">u2")  # byte pair (j, j + 1) = the word 256·b_j + b_(j+1)
    for j in range(0, even, 2):
        if words is not None:
            yield j, words[:, j // 2]
        else:
            yield j, cat[:, j].astype(np.intp) * width + cat[:, j + 1]
    if c % 2:
        yield c - 1, cat[:, c - 1]


def bit_counts(
    bits: NDArray[np.uint8], n_bits: int, hist: NDArray | None = None
) -> NDArray[np.int64]:
    """Number of trials with each bit set, from the histogram of each packed byte (``hist``:
    that histogram when already counted, e.g. when the columns are the packed bytes)."""
    if n_bits == 0:
        return np.zeros(0, dtype=np.int64)
    if hist is None:
        hist = column_histograms(bits, [256] * bits.shape[1])
    return (hist[:, :256] @ _BIT_TABLE).ravel()[:n_bits]


def lookup_scores(codes: NDArray, tables: NDArray[np.float64]) -> NDArray[np.float64]:
    """(n, W) sums Σ_j tables[j, codes[:, j], w]: a score that adds one term per column.

    Both learned scores are of this form (naive Bayes: a log-frequency per column value; the
    logistic regression: linear in the bits, so a sum over packed bytes of a 256-entry table,
    Σ_b coef[8j + b]·bit_b(v) for byte j = v). Columns go two at a time as in
    :func:`column_histograms`, through the table of their sums t_j(u) + t_(j+1)(v): one gather
    per pair and world. Returns a transposed (W, n) array, so that each world's score is a
    contiguous column.
    """
    n, c = codes.shape
    width, worlds = tables.shape[1], tables.shape[2]
    out = np.zeros((worlds, n))
    by_world = np.ascontiguousarray(tables.transpose(2, 0, 1))  # (W, c, A)
    for j, code in _column_codes(codes, width):
        pair = _paired(j, c, width)
        idx = code.astype(np.intp, copy=False)
        for w in range(worlds):
            if pair:
                table = (by_world[w, j][:, None] + by_world[w, j + 1][None, :]).ravel()
            else:
                table = by_world[w, j]
            out[w] += table.take(idx)
    return out.T


def _bit_column(bits: NDArray[np.uint8], i: int) -> NDArray[np.uint8]:
    return (bits[:, i // 8] >> np.uint8(7 - i % 8)) & np.uint8(1)


# ------------------------------------------------------------------------------ events


@dataclass(frozen=True, eq=False)
class ColumnEvent:
    """Column ``column`` takes one of ``values``."""

    column: int
    values: tuple[int, ...]

    def count(self, f: Features, layout: Layout) -> int:
        member = np.zeros(layout.sizes[self.column], dtype=bool)
        member[list(self.values)] = True
        return int(np.count_nonzero(member[f.cat[:, self.column]]))

    def describe(self, layout: Layout) -> str:
        return f"{layout.column_names[self.column]} ∈ {_short(self.values)}"


@dataclass(frozen=True, eq=False)
class BitEvent:
    """Bit ``bit`` equals ``value``."""

    bit: int
    value: int

    def count(self, f: Features, layout: Layout) -> int:
        ones = int(np.count_nonzero(_bit_column(f.bits, self.bit)))
        return ones if self.value else f.n - ones

    def describe(self, layout: Layout) -> str:
        return f"{layout.bit_label(self.bit)} = {self.value}"


@dataclass(frozen=True, eq=False)
class BitPairEvent:
    """(bit i, bit j) is one of ``cells`` (cell = 2·bit_i + bit_j)."""

    i: int
    j: int
    cells: tuple[int, ...]

    def count(self, f: Features, layout: Layout) -> int:
        cell = 2 * _bit_column(f.bits, self.i) + _bit_column(f.bits, self.j)
        return int(np.count_nonzero(np.isin(cell, self.cells)))

    def describe(self, layout: Layout) -> str:
        pairs = ", ".join(f"({c >> 1}, {c & 1})" for c in self.cells)
        return f"({layout.bit_label(self.i)}, {layout.bit_label(self.j)}) ∈ {{{pairs}}}"


@dataclass(frozen=True, eq=False)
class BytePairEvent:
    """(column i, column j) of a one-report trial, as the code 256·byte_i + byte_j, is one
    of ``cells`` (sorted)."""

    i: int
    j: int
    cells: NDArray[np.int64]

    def count(self, f: Features, layout: Layout) -> int:
        """Trials of ``f`` whose joint value of the two bytes is in ``cells``."""
        return int(np.count_nonzero(_member(self.cells, _pair_code(f.cat, self.i, self.j))))

    def describe(self, layout: Layout) -> str:
        """The event in words (the two bytes and the size of the set)."""
        names = layout.column_names
        return (
            f"({names[self.i]}, {names[self.j]}) in a set of {self.cells.size} of their "
            "65,536 joint values"
        )


def _pair_code(cat: NDArray, i: int, j: int) -> NDArray[np.int64]:
    """The joint value of byte columns i and j: 256·cat_i + cat_j."""
    return cat[:, i].astype(np.int64) * 256 + cat[:, j]


def _member(cells: NDArray[np.int64], codes: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which ``codes`` are in the sorted ``cells``."""
    if cells.size == 0:
        return np.zeros(codes.shape, dtype=bool)
    pos = np.searchsorted(cells, codes)
    pos[pos == cells.size] = 0
    return cells[pos] == codes


def _cell_counts(cells: NDArray[np.int64], codes: NDArray[np.int64]) -> NDArray[np.int64]:
    """How many of ``codes`` fall in each of the sorted ``cells`` (others in none)."""
    pos = np.searchsorted(cells, codes)
    pos[pos == cells.size] = 0
    hit = cells[pos] == codes
    return np.bincount(pos[hit], minlength=cells.size)


@dataclass(frozen=True, eq=False)
class KeyEvent:
    """The trial's key (its whole report, or its modal report) is one of ``keys``."""

    keys: NDArray[np.uint64]

    def count(self, f: Features, layout: Layout) -> int:
        assert f.key is not None
        pos = np.searchsorted(self.keys, f.key)
        pos[pos == self.keys.size] = 0
        return int(np.count_nonzero(self.keys[pos] == f.key))

    def describe(self, layout: Layout) -> str:
        return f"{layout.key_name} in a set of {self.keys.size} (of the search histogram)"


class ScoreModel:
    """A score per world learned on the search half: ``scores(f)`` is (n, worlds)."""

    family: str = ""

    def scores(self, f: Features, layout: Layout) -> NDArray[np.float64]:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class ScoreEvent:
    """score_a − score_b ≥ ``threshold`` for a model learned on the search half."""

    model: ScoreModel
    a: int
    b: int
    threshold: float

    def count(self, f: Features, layout: Layout, cache: dict | None = None) -> int:
        s = _cached_scores(self.model, f, layout, cache)
        return int(np.count_nonzero(s[:, self.a] - s[:, self.b] >= self.threshold))

    def describe(self, layout: Layout) -> str:
        return f"{self.model.family} score of world {self.a} over {self.b} ≥ {self.threshold:.4g}"


Event = ColumnEvent | BitEvent | BitPairEvent | BytePairEvent | KeyEvent | ScoreEvent


def _cached_scores(model: ScoreModel, f: Features, layout: Layout, cache: dict | None) -> NDArray:
    if cache is None:
        return model.scores(f, layout)
    key = (id(model), id(f))
    if key not in cache:
        cache[key] = model.scores(f, layout)
    return cache[key]


def _short(values: Sequence[int]) -> str:
    vals = list(values)
    shown = ", ".join(str(v) for v in vals[:6])
    return "{" + shown + (", …" if len(vals) > 6 else "") + f"}} ({len(vals)} values)"


# ------------------------------------------------------------------------------ learned scores


class NaiveBayes(ScoreModel):
    """Σ_j ln ĥ_x(column j = value) per world x: the log-likelihood if the columns were
    independent (exact for unary encodings, whose bits are), learned from search histograms."""

    family = "naive-bayes"

    def __init__(self, hists: Sequence[NDArray[np.int64]], n: Sequence[int], layout: Layout):
        sizes = np.asarray(layout.sizes)
        width = hists[0].shape[1]
        valid = np.arange(width)[None, :] < sizes[:, None]
        tables = []
        for h, m in zip(hists, n, strict=True):
            freq = (h + 0.5) / (m + 0.5 * sizes[:, None])
            tables.append(np.where(valid, np.log(freq), 0.0))
        # (c, A, worlds): one gather per column gives every world's score.
        self.tables = np.stack(tables, axis=2)
        self.width = width

    def scores(self, f: Features, layout: Layout) -> NDArray[np.float64]:
        return lookup_scores(f.cat, self.tables)


class Classifier(ScoreModel):
    """Multinomial logistic regression over the bits (and, for lifetimes, the scaled columns):
    the DP-Sniper classifier (Bichsel et al., IEEE S&P 2021), trained on search trials only.

    The fitted score β_w·x + β0_w is linear in the bits, so it is evaluated as a sum of table
    look-ups (:func:`lookup_scores`): per packed byte j a 256-entry table
    Σ_b β_w[8j + b]·bit_b(v), and per scaled column (lifetimes) the table β_w[j]·v/(size_j − 1);
    no (n × bits) design matrix is built outside training.
    """

    family = "classifier"

    def __init__(self, train: Sequence[Features], layout: Layout):
        from sklearn.linear_model import LogisticRegression

        x = np.concatenate([_design(f, layout) for f in train])
        y = np.concatenate([np.full(f.n, i) for i, f in enumerate(train)])
        model = LogisticRegression(C=1.0, max_iter=300)
        model.fit(x, y)
        coef, icpt = model.coef_, model.intercept_
        if coef.shape[0] == 1:  # two classes: one log-odds row for class 1
            coef = np.vstack([-coef / 2, coef / 2])
            icpt = np.array([-icpt[0] / 2, icpt[0] / 2])
        coef = coef.T.astype(np.float64)  # (features, worlds)
        self.coef, self.intercept = coef, icpt
        nb = layout.n_bits
        padded = np.zeros((8 * (-(-nb // 8)), coef.shape[1]))
        padded[:nb] = coef[:nb]
        # (bytes, 256, worlds): table[j, v] = Σ_b bit_b(v)·β[8j + b].
        self.bit_tables = np.einsum("vb,jbw->jvw", _BIT_TABLE, padded.reshape(-1, 8, coef.shape[1]))
        self.column_tables = None
        if layout.classify_columns and layout.sizes:
            sizes = np.asarray(layout.sizes)
            weight = coef[nb:] / np.maximum(1, sizes - 1)[:, None]  # (c, worlds)
            self.column_tables = np.arange(max(sizes))[None, :, None] * weight[:, None, :]

    def scores(self, f: Features, layout: Layout) -> NDArray[np.float64]:
        out = lookup_scores(f.bits, self.bit_tables)
        if self.column_tables is not None:
            out += lookup_scores(f.cat, self.column_tables)
        out += self.intercept
        return out


def _design(f: Features, layout: Layout) -> NDArray[np.float32]:
    cols = [unpack_bits(f.bits, layout.n_bits)]
    if layout.classify_columns and f.cat.shape[1]:
        scale = np.maximum(1, np.asarray(layout.sizes) - 1).astype(np.float32)
        cols.append(f.cat.astype(np.float32) / scale)
    return np.hstack(cols) if len(cols) > 1 else cols[0]


def sklearn_available() -> bool:
    """Is scikit-learn importable (the classifier family needs it)?"""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------------ ranking


def wilson_bound(tp: NDArray, n0: Any, fp: NDArray, n1: Any, z: float) -> NDArray[np.float64]:
    """ln(Wilson lower(TP)/Wilson upper(FP)): a fast stand-in for (13.4) to rank candidates."""
    tp, fp = np.asarray(tp, dtype=np.float64), np.asarray(fp, dtype=np.float64)
    n0, n1 = np.asarray(n0, dtype=np.float64), np.asarray(n1, dtype=np.float64)
    z2 = z * z
    lo = (tp + z2 / 2 - z * np.sqrt(np.maximum(tp * (1 - tp / n0), 0) + z2 / 4)) / (n0 + z2)
    hi = (fp + z2 / 2 + z * np.sqrt(np.maximum(fp * (1 - fp / n1), 0) + z2 / 4)) / (n1 + z2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.maximum(lo, 0)) - np.log(hi)
    return np.where(np.isfinite(out), out, -np.inf)


def likelihood_prefixes(
    fa: NDArray, fb: NDArray, ha: NDArray, hb: NDArray, na: int, nb: int, z: float
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray, NDArray, NDArray]:
    """Best prefix of the likelihood-ratio ranking of the cells, for every group at once.

    ``fa``, ``fb``: (G, A) *fit* counts of the cells of G groups (columns, bit pairs, …) in
    worlds a and b, which rank the cells by (f_a + ½)/(f_b + ½)·(Σf_b + ½A)/(Σf_a + ½A),
    descending (the Neyman–Pearson sets of the estimated channel); ``ha``, ``hb``: the *select*
    counts (na, nb trials) that count every prefix. Returns per group: the cell order (G, A),
    the best prefix length, its TP, its FP and its Wilson rank.
    """
    width = fa.shape[1]
    tot_a = fa.sum(axis=1, keepdims=True) + 0.5 * width
    tot_b = fb.sum(axis=1, keepdims=True) + 0.5 * width
    ratio = (fa + 0.5) / tot_a / ((fb + 0.5) / tot_b)
    order = np.argsort(-ratio, axis=1, kind="stable")
    tp = np.cumsum(np.take_along_axis(ha, order, axis=1), axis=1)
    fp = np.cumsum(np.take_along_axis(hb, order, axis=1), axis=1)
    rank = wilson_bound(tp, na, fp, nb, z)
    best = np.argmax(rank, axis=1)
    rows = np.arange(fa.shape[0])
    return order, best + 1, tp[rows, best], fp[rows, best], rank[rows, best]


@dataclass(eq=False)
class Candidate:
    """One (pair of worlds, event) with its search counts."""

    a: int
    b: int
    family: str
    event: Any
    tp: int
    fp: int
    n0: int
    n1: int
    rank: float
    bound: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """One held-out test: its event, counts and (1 − α/m) lower bound."""

    a: int
    b: int
    family: str
    test: str
    tp: int
    fp: int
    n0: int
    n1: int
    lower: float
    estimate: float
    search_tp: int
    search_fp: int
    search_n0: int
    search_n1: int


@dataclass
class SearchReport:
    """What the search tried (counted per family) and the candidates it kept."""

    candidates: list[Candidate]
    tried: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------ the search


def search(
    worlds: Sequence[Features],
    layout: Layout,
    pairs: Sequence[tuple[int, int]],
    level: float,
    *,
    families: Sequence[str] = FAMILIES,
    tests: int = 10,
) -> SearchReport:
    """Score candidate events of every family for every ordered pair on the search trials.

    The search trials of each world are split once more: the first half (*fit*) ranks the
    cells by their estimated likelihood ratio and trains the scores, the second (*select*)
    counts every prefix of that ranking and every threshold, so that a cell ranked high by
    chance is not also counted high by the same chance. ``level`` is the held-out level α/m;
    candidates are ranked by the bound their select counts would give at it. Returns the best
    ``tests`` candidates over all pairs and families.
    """
    z = float(norm.isf(level / 2))
    fit = [f.rows(slice(0, f.n // 2)) for f in worlds]
    sel = [f.rows(slice(f.n // 2, f.n)) for f in worlds]
    n_fit, n_sel = [f.n for f in fit], [f.n for f in sel]
    tried = dict.fromkeys(families, 0)
    found: list[Candidate] = []
    sizes = layout.sizes
    hist_fit = [column_histograms(f.cat, sizes) for f in fit]
    hist_sel = [column_histograms(f.cat, sizes) for f in sel]
    ones_sel = [_ones(f, h, layout) for f, h in zip(sel, hist_sel, strict=True)]
    keyed = None
    if "histogram" in families:
        keyed = _key_histograms(fit, sel)
    gram = None
    if "bit-pair" in families and layout.n_bits >= 2:
        ones_fit = [_ones(f, h, layout) for f, h in zip(fit, hist_fit, strict=True)]
        chosen = _pair_bits(layout.n_bits, ones_fit, n_fit, pairs, z)
        gram = (chosen, _cells(fit, layout, chosen), _cells(sel, layout, chosen))
    models: list[ScoreModel] = []
    if "naive-bayes" in families and sizes:
        models.append(NaiveBayes(hist_fit, n_fit, layout))
    if "classifier" in families and layout.n_bits + len(sizes) > 0:
        per_world = max(1, TRAIN_ROWS // len(worlds))
        models.append(Classifier([f.head(per_world) for f in fit], layout))
    score_sets = [f.head(SCORE_ROWS) for f in sel]
    scored = [[m.scores(f, layout) for f in score_sets] for m in models]
    joint: list[Candidate] = []
    if "byte-pair" in families and layout.columns_are_bytes and len(sizes) >= 2:
        byte_pairs = byte_pairs_to_join(layout, models, hist_fit, n_fit)
        joint, tried["byte-pair"] = _byte_pair_candidates(fit, sel, pairs, byte_pairs, z)
    for a, b in pairs:
        if "column" in families and sizes:
            found += _column_candidates(hist_fit, hist_sel, n_fit, n_sel, a, b, z, layout)
            tried["column"] += int(np.sum(sizes))
        if "bit" in families and layout.n_bits:
            found += _bit_candidates(ones_sel, n_sel, a, b, z)
            tried["bit"] += 2 * layout.n_bits
        if keyed is not None:
            found += _key_candidates(keyed, a, b, z)
            tried["histogram"] += keyed[0].size
        if gram is not None:
            found += _pair_candidates(gram, a, b, z)
            tried["bit-pair"] += 3 * gram[0].size * (gram[0].size - 1) // 2
        for model, sc in zip(models, scored, strict=True):
            found += _score_candidates(model, sc, a, b, z)
            tried[model.family] += SCORE_THRESHOLDS
    _exact_rank(found, level)
    _exact_rank(joint, level)
    # One candidate per (pair, family): near-copies of one event would waste the held-out level.
    others = _best_per_pair(found)
    pairs_kept = _best_per_pair(joint)[: pair_share(tests)]
    return SearchReport(others[: tests - len(pairs_kept)] + pairs_kept, tried)


def pair_share(tests: int) -> int:
    """Held-out tests reserved for the byte-pair family among ``tests``: ⌊tests/5⌋, at least
    one when there are two tests or more (its own share of the Bonferroni budget)."""
    return 0 if tests < 2 else max(1, tests // 5)


def _best_per_pair(found: list[Candidate]) -> list[Candidate]:
    """The candidates by decreasing exact bound (then rank), one per (pair, family)."""
    found = sorted(found, key=lambda c: (c.bound, c.rank), reverse=True)
    kept: dict[tuple[int, int, str], Candidate] = {}
    for c in found:
        kept.setdefault((c.a, c.b, c.family), c)
    return list(kept.values())


def _ones(f: Features, hist: NDArray[np.int64], layout: Layout) -> NDArray[np.int64]:
    """Trials with each bit set (from the column histograms when the columns are the bytes)."""
    return bit_counts(f.bits, layout.n_bits, hist if layout.columns_are_bytes else None)


def _exact_rank(found: list[Candidate], level: float) -> None:
    if not found:
        return
    tp = np.array([c.tp for c in found])
    fp = np.array([c.fp for c in found])
    n0 = np.array([c.n0 for c in found])
    n1 = np.array([c.n1 for c in found])
    lo, hi = stats.cp_lower(tp, n0, level / 2), stats.cp_upper(fp, n1, level / 2)
    with np.errstate(divide="ignore"):
        bound = np.maximum(0.0, np.log(lo) - np.log(hi))
    for c, value in zip(found, bound, strict=True):
        c.bound = float(value)


def _top(rank: NDArray, count: int = RESCORE) -> NDArray[np.int64]:
    flat = rank.ravel()
    count = min(count, flat.size)
    idx = np.argpartition(-flat, count - 1)[:count]
    return idx[np.isfinite(flat[idx])]


def _column_candidates(
    hist_fit: list[NDArray],
    hist_sel: list[NDArray],
    n_fit: list[int],
    n_sel: list[int],
    a: int,
    b: int,
    z: float,
    layout: Layout,
) -> list[Candidate]:
    order, length, tp, fp, rank = likelihood_prefixes(
        hist_fit[a], hist_fit[b], hist_sel[a], hist_sel[b], n_sel[a], n_sel[b], z
    )
    out = []
    for col in _top(rank):
        # Cells past the column's alphabet have zero counts in both worlds: never useful.
        cells = [int(v) for v in order[col, : length[col]] if v < layout.sizes[col]]
        if not cells or len(cells) == layout.sizes[col]:
            continue
        event = ColumnEvent(int(col), tuple(sorted(cells)))
        out.append(
            Candidate(
                a,
                b,
                "column",
                event,
                int(tp[col]),
                int(fp[col]),
                n_sel[a],
                n_sel[b],
                float(rank[col]),
            )
        )
    return out


def _bit_candidates(ones: list[NDArray], n: list[int], a: int, b: int, z: float) -> list[Candidate]:
    tp = np.stack([n[a] - ones[a], ones[a]], axis=1)
    fp = np.stack([n[b] - ones[b], ones[b]], axis=1)
    rank = wilson_bound(tp, n[a], fp, n[b], z)
    out = []
    for flat in _top(rank):
        bit, value = divmod(int(flat), 2)
        out.append(
            Candidate(
                a,
                b,
                "bit",
                BitEvent(bit, value),
                int(tp[bit, value]),
                int(fp[bit, value]),
                n[a],
                n[b],
                float(rank[bit, value]),
            )
        )
    return out


def _key_histograms(
    fit: Sequence[Features], sel: Sequence[Features]
) -> tuple[NDArray, list[NDArray], list[NDArray], list[int]] | None:
    """(distinct keys of the fit trials, fit counts, select counts, select sizes) per world;
    None when there are more than MAX_CELLS distinct keys. Select trials whose key the fit
    trials never showed fall in no cell (they are in no set)."""
    if any(f.key is None for f in (*fit, *sel)):
        return None
    # A cheap look at a few rows first: most large report spaces are refused right there.
    probe = np.unique(np.concatenate([f.key[: 4 * MAX_CELLS] for f in fit]))  # type: ignore[index]
    if probe.size > MAX_CELLS:
        return None
    distinct = np.unique(np.concatenate([np.unique(f.key) for f in fit]))  # type: ignore[arg-type]
    if distinct.size > MAX_CELLS or distinct.size < 2:
        return None

    def counts(f: Features) -> NDArray[np.int64]:
        assert f.key is not None
        pos = np.searchsorted(distinct, f.key)
        pos[pos == distinct.size] = 0
        hit = distinct[pos] == f.key
        return np.bincount(pos[hit], minlength=distinct.size)

    return distinct, [counts(f) for f in fit], [counts(f) for f in sel], [f.n for f in sel]


def _key_candidates(keyed: tuple, a: int, b: int, z: float) -> list[Candidate]:
    distinct, fit, sel, n = keyed
    order, length, tp, fp, rank = likelihood_prefixes(
        fit[a][None, :], fit[b][None, :], sel[a][None, :], sel[b][None, :], n[a], n[b], z
    )
    if not np.isfinite(rank[0]) or length[0] == distinct.size:
        return []
    keys = np.sort(distinct[order[0, : length[0]]])
    return [
        Candidate(
            a, b, "histogram", KeyEvent(keys), int(tp[0]), int(fp[0]), n[a], n[b], float(rank[0])
        )
    ]


def _pair_bits(
    nb: int, ones: list[NDArray], n: list[int], pairs: Sequence[tuple[int, int]], z: float
) -> NDArray[np.int64]:
    """Every bit when there are at most MAX_PAIR_BITS, else the bits whose single-bit test
    ranks best for some pair on the fit trials (power, not validity)."""
    if nb <= MAX_PAIR_BITS:
        return np.arange(nb)
    best = np.full(nb, -np.inf)
    for a, b in pairs:
        r1 = wilson_bound(ones[a], n[a], ones[b], n[b], z)
        r0 = wilson_bound(n[a] - ones[a], n[a], n[b] - ones[b], n[b], z)
        best = np.maximum(best, np.maximum(r1, r0))
    return np.sort(np.argsort(-best, kind="stable")[:MAX_PAIR_BITS])


def _cells(
    worlds: Sequence[Features], layout: Layout, chosen: NDArray[np.int64]
) -> tuple[list[NDArray], list[int]]:
    """Per world the (4, B, B) counts of the joint values of every pair of chosen bits, from
    the Gram matrix BᵀB of at most PAIR_ROWS trials (cell 2·bit_i + bit_j), and rows used."""
    cells, used = [], []
    every_bit = chosen.size == layout.n_bits  # chosen is then 0 … n_bits − 1: no column copy
    for f in worlds:
        rows = f.head(PAIR_ROWS)
        g = np.zeros((chosen.size, chosen.size))
        for start in range(0, rows.n, BLOCK):
            x = unpack_bits(rows.bits[start : start + BLOCK], layout.n_bits)
            if not every_bit:
                x = x[:, chosen]
            g += x.T @ x  # exact: float32 sums of 0/1 stay below 2^24 per block
        c = np.diag(g).copy()  # bit_i·bit_i = bit_i: the diagonal counts each bit's ones
        m = rows.n
        n10 = c[:, None] - g
        n01 = c[None, :] - g
        n00 = m - c[:, None] - c[None, :] + g
        cells.append(np.stack([n00, n01, n10, g]).round().astype(np.int64))
        used.append(m)
    return cells, used


def one_blas_thread() -> contextlib.AbstractContextManager:
    """A context running BLAS on one thread (threadpoolctl, installed with scikit-learn).

    The search's matrix products are small; on a machine with more runnable processes than
    cores, OpenBLAS's threads spin against each other: the 32,768 × 128 Gram matrix took 2.7 s
    with two threads at load 9 on two cores, 0.08 s with one (measured in the same session).
    Without threadpoolctl nothing changes."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _pair_candidates(gram: tuple, a: int, b: int, z: float) -> list[Candidate]:
    chosen, (fit, _), (sel, used) = gram
    iu, ju = np.triu_indices(chosen.size, k=1)
    order, length, tp, fp, rank = likelihood_prefixes(
        fit[a][:, iu, ju].T,
        fit[b][:, iu, ju].T,
        sel[a][:, iu, ju].T,
        sel[b][:, iu, ju].T,
        used[a],
        used[b],
        z,
    )
    out = []
    for g in _top(rank):
        if length[g] == 4:
            continue
        cells = tuple(sorted(int(c) for c in order[g, : length[g]]))
        event = BitPairEvent(int(chosen[iu[g]]), int(chosen[ju[g]]), cells)
        out.append(
            Candidate(
                a, b, "bit-pair", event, int(tp[g]), int(fp[g]), used[a], used[b], float(rank[g])
            )
        )
    return out


def byte_pairs_to_join(
    layout: Layout, models: Sequence[ScoreModel], hists: Sequence[NDArray], n: Sequence[int]
) -> list[tuple[int, int]]:
    """The byte pairs whose joint histogram the byte-pair family reads: every adjacent pair
    (at most :data:`MAX_ADJACENT_PAIRS`), then every pair among the :data:`LEARNED_PAIR_BYTES`
    bytes that the learned scores weigh most (:func:`learned_byte_weights`)."""
    c = len(layout.sizes)
    chosen = [(j, j + 1) for j in range(min(c - 1, MAX_ADJACENT_PAIRS))]
    weights = learned_byte_weights(models, hists, n, c)
    top = np.sort(np.argsort(-weights, kind="stable")[:LEARNED_PAIR_BYTES])
    seen = set(chosen)
    for x in range(top.size):
        for y in range(x + 1, top.size):
            pair = (int(top[x]), int(top[y]))
            if pair not in seen:
                seen.add(pair)
                chosen.append(pair)
    return chosen


def learned_byte_weights(
    models: Sequence[ScoreModel], hists: Sequence[NDArray], n: Sequence[int], columns: int
) -> NDArray[np.float64]:
    """How much each byte weighs in the learned scores: for naive Bayes the largest expected
    gain of its term between two worlds, Σ_v ĥ_a(v)·(t_a(v) − t_b(v)) (t its log-frequency
    table, ĥ_a the fit frequencies); for the classifier the mean over byte values of the spread
    of its table entry across worlds. The larger of the two normalized weights (ours)."""
    out = np.zeros(columns)
    for model in models:
        if isinstance(model, NaiveBayes):
            t = model.tables[:columns]  # (c, A, worlds)
            freq = np.stack([h[:columns] / max(1, m) for h, m in zip(hists, n, strict=True)], 2)
            gain = np.einsum("cva,cva->ca", freq, t)[:, :, None] - np.einsum(
                "cva,cvb->cab", freq, t
            )  # (c, a, b): expected t_a − t_b under world a
            w = gain.max(axis=(1, 2))
        elif isinstance(model, Classifier):
            tables = model.bit_tables[:columns]  # (bytes, 256, worlds)
            w = (tables.max(axis=2) - tables.min(axis=2)).mean(axis=1)
        else:  # pragma: no cover - every model of the search is one of the two
            continue
        top = float(np.max(w)) if w.size else 0.0
        if top > 0:
            out = np.maximum(out, w / top)
    return out


def _byte_pair_candidates(
    fit: Sequence[Features],
    sel: Sequence[Features],
    pairs: Sequence[tuple[int, int]],
    byte_pairs: Sequence[tuple[int, int]],
    z: float,
) -> tuple[list[Candidate], int]:
    """For every byte pair and ordered pair of worlds (a, b): the cells of the joint value seen
    in a's fit trials, ranked by their likelihood ratio against b's fit counts, and the best
    prefix counted on the select trials (:func:`likelihood_prefixes`). Returns the candidates
    and the number of candidate sets scored."""
    against: dict[int, list[int]] = {}
    for a, b in pairs:
        against.setdefault(a, []).append(b)
    n_sel = np.array([f.n for f in sel])
    out = []
    tried = 0
    for i, j in byte_pairs:
        fit_codes = [_pair_code(f.cat, i, j) for f in fit]
        sel_codes = [_pair_code(f.cat, i, j) for f in sel]
        for a, bs in against.items():
            cells, fa = np.unique(fit_codes[a], return_counts=True)
            if cells.size < 2:
                continue
            fb = np.stack([_cell_counts(cells, fit_codes[b]) for b in bs])
            hb = np.stack([_cell_counts(cells, sel_codes[b]) for b in bs])
            ha = _cell_counts(cells, sel_codes[a])
            tried += cells.size * len(bs)
            order, length, tp, fp, rank = likelihood_prefixes(
                np.broadcast_to(fa, fb.shape),
                fb,
                np.broadcast_to(ha, hb.shape),
                hb,
                int(n_sel[a]),
                n_sel[bs][:, None],
                z,
            )
            for g in _top(rank):
                event = BytePairEvent(i, j, np.sort(cells[order[g, : length[g]]]))
                b = bs[int(g)]
                out.append(
                    Candidate(
                        a,
                        b,
                        "byte-pair",
                        event,
                        int(tp[g]),
                        int(fp[g]),
                        int(n_sel[a]),
                        int(n_sel[b]),
                        float(rank[g]),
                    )
                )
    return out, tried


def _score_candidates(
    model: ScoreModel, scored: list[NDArray], a: int, b: int, z: float
) -> list[Candidate]:
    sa = np.sort(scored[a][:, a] - scored[a][:, b])
    sb = np.sort(scored[b][:, a] - scored[b][:, b])
    pooled = np.concatenate([sa, sb])
    cand = np.unique(np.quantile(pooled, np.linspace(0, 1, SCORE_THRESHOLDS + 1)[1:-1]))
    cand = np.concatenate([cand, [sa[-1]]])  # also the most extreme world-a trial
    tp = stats.counts_at_or_above(sa, cand)
    fp = stats.counts_at_or_above(sb, cand)
    rank = wilson_bound(tp, sa.size, fp, sb.size, z)
    out = []
    for i in _top(rank):
        out.append(
            Candidate(
                a,
                b,
                model.family,
                ScoreEvent(model, a, b, float(cand[i])),
                int(tp[i]),
                int(fp[i]),
                sa.size,
                sb.size,
                float(rank[i]),
            )
        )
    return out


# ------------------------------------------------------------------------------ held out


def evaluate(
    candidates: Sequence[Candidate], worlds: Sequence[Features], layout: Layout, alpha: float
) -> list[Outcome]:
    """Count each candidate's event once on the held-out trials; bounds at level α/m."""
    m = max(1, len(candidates))
    cache: dict = {}
    counts = []
    for c in candidates:
        fa, fb = worlds[c.a], worlds[c.b]
        if isinstance(c.event, ScoreEvent):
            counts.append((c.event.count(fa, layout, cache), c.event.count(fb, layout, cache)))
        else:
            counts.append((c.event.count(fa, layout), c.event.count(fb, layout)))
    if not counts:
        return []
    tp, fp = np.array(counts).T
    n0 = np.array([worlds[c.a].n for c in candidates])
    n1 = np.array([worlds[c.b].n for c in candidates])
    lower = stats.epsilon_lower_bound(tp, n0, fp, n1, alpha / m)
    return [
        Outcome(
            a=c.a,
            b=c.b,
            family=c.family,
            test=c.event.describe(layout),
            tp=int(tp[i]),
            fp=int(fp[i]),
            n0=int(n0[i]),
            n1=int(n1[i]),
            lower=float(lower[i]),
            estimate=stats.point_epsilon(int(tp[i]), int(n0[i]), int(fp[i]), int(n1[i])),
            search_tp=c.tp,
            search_fp=c.fp,
            search_n0=c.n0,
            search_n1=c.n1,
        )
        for i, c in enumerate(candidates)
    ]


def ordered_pairs(count: int) -> list[tuple[int, int]]:
    """Every ordered pair of distinct world indices."""
    return [(a, b) for a in range(count) for b in range(count) if a != b]


def level_z(alpha: float, tests: int) -> float:
    """z of the one-sided level α/(2m) (the Wilson ranking's quantile)."""
    return float(norm.isf(alpha / (2 * max(1, tests))))


__all__ = [
    "FAMILIES",
    "BytePairEvent",
    "Candidate",
    "Features",
    "Layout",
    "Outcome",
    "evaluate",
    "likelihood_prefixes",
    "ordered_pairs",
    "row_keys",
    "search",
    "sklearn_available",
    "wilson_bound",
]
