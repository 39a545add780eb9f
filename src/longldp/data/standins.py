"""Synthetic stand-ins for set-valued data that cannot be bundled, and an IBM-Quest generator.

BMS-POS (KDD Cup 2000) and Kosarak are distributed by the FIMI repository without a licence that
allows bundling; `longldp.data.read_fimi` reads the real files when a user has them. The
stand-ins here have the same published statistics: number of transactions ``n``, number of items
``k``, mean transaction length and maximum length. Everything else is a modelling choice,
documented in `StandinSpec` and ``DATA.md``:

* lengths: ``1 + NegativeBinomial(r, q)`` with ``q`` set so that the mean is the published mean,
  clipped at the published maximum (``r`` < 1 gives the heavy right tail of basket sizes);
* items: item ``i`` has popularity weight ``(i + 1)**(-s)`` (item 0 is the most popular), and a
  transaction of length ``L`` is ``L`` distinct items drawn by successive sampling proportional
  to the weights (sampling without replacement, `sample_sets`).

Generation is deterministic given ``seed`` and vectorised (no Python loop per transaction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from longldp.data.containers import CODE_DTYPE, INDPTR_DTYPE, Domain, SetData, sorted_unique
from longldp.data.synthetic import zipf_probabilities

__all__ = [
    "BMS_POS",
    "KOSARAK",
    "StandinSpec",
    "bms_pos_standin",
    "kosarak_standin",
    "quest",
    "quest_from_name",
    "sample_sets",
    "standin",
]


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an int or a numpy.random.Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _positive_int(x: object, what: str, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, int | np.integer) or int(x) < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {x!r}")
    return int(x)


def _csr_from_keys(keys: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.sort(keys)  # keys are distinct: row * k + item
    rows = keys // k
    items = (keys % k).astype(CODE_DTYPE)
    indptr = np.zeros(n + 1, dtype=INDPTR_DTYPE)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, items


def sample_sets(
    lengths: np.ndarray,
    p: np.ndarray,
    rng: np.random.Generator,
    max_rounds: int = 30,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw, for every row ``u``, ``lengths[u]`` distinct items by successive sampling from ``p``.

    Successive sampling (draw proportionally to ``p``, discard repeats, until the row holds
    ``lengths[u]`` distinct items) is run for all rows at once: each round redraws, with
    replacement, only the missing items of the unfinished rows and removes duplicates with one
    sort. Rows still unfinished after ``max_rounds`` rounds (very long rows under a skewed
    ``p``) are completed with the Gumbel-top-k trick, which samples the same law, in chunks.

    Parameters
    ----------
    lengths : array_like of int, shape (n,)
        Target set sizes, each at most the number of items with ``p > 0``.
    p : array_like of float, shape (k,)
        Item weights (normalised internally).
    rng : numpy.random.Generator
        Source of randomness.
    max_rounds : int
        Rounds of redrawing before the Gumbel-top-k fallback.

    Returns
    -------
    indptr : numpy.ndarray
        int64, shape ``(n + 1,)``.
    items : numpy.ndarray
        int32, shape ``(lengths.sum(),)``, sorted within each row.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or (p < 0).any() or not np.isfinite(p).all() or p.sum() <= 0:
        raise ValueError("p must be a non-empty vector of non-negative, finite weights")
    if lengths.ndim != 1 or (lengths.size and lengths.min() < 0):
        raise ValueError("lengths must be a 1-D array of non-negative integers")
    k = p.size
    support = int((p > 0).sum())
    if lengths.size and lengths.max() > support:
        raise ValueError(
            f"a set of {lengths.max()} distinct items is asked for, but only "
            f"{support} items have positive weight"
        )
    n = lengths.size
    cdf = np.cumsum(p / p.sum())

    def draw(m: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right"), k - 1)

    done: list[np.ndarray] = []
    active = np.flatnonzero(lengths > 0)
    need = lengths[active]
    keys = np.zeros(0, dtype=np.int64)
    deficit = need.copy()
    for _ in range(max_rounds):
        if active.size == 0:
            break
        new = np.repeat(active, deficit) * k + draw(int(deficit.sum()))
        keys = sorted_unique(np.concatenate([keys, new]))
        local = np.searchsorted(active, keys // k)
        deficit = need - np.bincount(local, minlength=active.size)
        finished = deficit == 0
        if finished.any():
            done.append(keys[finished[local]])
            keep = ~finished
            keys = keys[keep[local]]
            active, need, deficit = active[keep], need[keep], deficit[keep]
    if active.size:
        # Gumbel-top-k on the remaining rows: keys log p + Gumbel, already drawn items forced in
        logp = np.full(k, -np.inf)
        logp[p > 0] = np.log(p[p > 0])
        local = np.searchsorted(active, keys // k)
        chunk = max(1, (1 << 22) // k)
        for lo in range(0, active.size, chunk):
            hi = min(lo + chunk, active.size)
            score = logp + rng.gumbel(size=(hi - lo, k))
            sel = (local >= lo) & (local < hi)
            score[local[sel] - lo, keys[sel] % k] = np.inf
            order = np.argsort(-score, axis=1, kind="stable")
            take = np.arange(k) < need[lo:hi, None]
            rows = np.repeat(active[lo:hi], need[lo:hi])
            done.append(rows * k + order[take])
    all_keys = np.concatenate(done) if done else np.zeros(0, dtype=np.int64)
    return _csr_from_keys(all_keys, n, k)


@dataclass(frozen=True)
class StandinSpec:
    """Published statistics of a transaction dataset and the modelling choices of its stand-in.

    Attributes
    ----------
    name : str
        Dataset name.
    n : int
        Number of transactions (published).
    k : int
        Number of distinct items (published).
    mean_length : float
        Mean transaction length (published).
    max_length : int
        Maximum transaction length (published); lengths are clipped here.
    dispersion : float
        Negative-binomial shape ``r`` of ``length - 1`` (modelling choice).
    zipf_s : float
        Exponent of the item popularity law (modelling choice).
    source : str
        Where the statistics come from.
    """

    name: str
    n: int
    k: int
    mean_length: float
    max_length: int
    dispersion: float
    zipf_s: float
    source: str

    def lengths(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` transaction lengths: ``1 + NB(r, q)``, mean ``mean_length``, clipped."""
        m = self.mean_length - 1.0
        q = self.dispersion / (self.dispersion + m)
        return np.minimum(1 + rng.negative_binomial(self.dispersion, q, size=n), self.max_length)

    def generate(self, seed: int | np.random.Generator = 0, n: int | None = None) -> SetData:
        """Generate the stand-in (``n`` transactions; default the published count)."""
        rng = _rng(seed)
        n = self.n if n is None else _positive_int(n, "n", 0)
        lengths = self.lengths(n, rng)
        indptr, items = sample_sets(lengths, zipf_probabilities(self.k, self.zipf_s), rng)
        return SetData(indptr, items, Domain(self.k), f"{self.name}-standin")


BMS_POS = StandinSpec(
    name="bms-pos",
    n=515_597,
    k=1_657,
    mean_length=6.5,
    max_length=164,
    dispersion=0.8,
    zipf_s=1.0,
    source="BMS-POS (KDD Cup 2000 / Zheng, Kohavi & Mason 2001; FIMI repository): "
    "515,597 transactions, 1,657 items, mean length 6.5, max length 164",
)

KOSARAK = StandinSpec(
    name="kosarak",
    n=990_002,
    k=41_270,
    mean_length=8.1,
    max_length=2_498,
    dispersion=0.35,
    zipf_s=1.0,
    source="Kosarak (click-stream of a Hungarian news portal, F. Bodon; FIMI repository): "
    "990,002 transactions, 41,270 items, mean length 8.1, max length 2,498",
)


def bms_pos_standin(seed: int | np.random.Generator = 0, n: int | None = None) -> SetData:
    """Synthetic stand-in for BMS-POS (`BMS_POS`); ``n`` scales the number of transactions."""
    return BMS_POS.generate(seed, n)


def kosarak_standin(seed: int | np.random.Generator = 0, n: int | None = None) -> SetData:
    """Synthetic stand-in for Kosarak (`KOSARAK`); ``n`` scales the number of transactions."""
    return KOSARAK.generate(seed, n)


def standin(name: str, seed: int | np.random.Generator = 0, n: int | None = None) -> SetData:
    """Stand-in by name: ``"bms-pos"`` or ``"kosarak"``."""
    specs = {"bms-pos": BMS_POS, "kosarak": KOSARAK}
    key = name.lower().replace("_", "-").removesuffix("-standin")
    if key not in specs:
        raise ValueError(f"unknown stand-in {name!r}; known: {sorted(specs)}")
    return specs[key].generate(seed, n)


def quest(
    T: float,
    I: float,
    D: int,
    N: int = 1000,
    L: int = 2000,
    *,
    correlation: float = 0.5,
    corruption_mean: float = 0.5,
    corruption_sd: float = 0.1,
    seed: int | np.random.Generator = 0,
) -> SetData:
    """IBM-Quest-style market-basket generator (Agrawal & Srikant, VLDB 1994, §2.4.3).

    A pool of ``L`` potentially large itemsets is drawn first: sizes ``max(1, Poisson(I))``;
    each itemset shares a fraction ``Exponential(correlation)`` of its items with the previous
    one, the rest uniform over the ``N`` items; each has a weight ``Exponential(1)``
    (normalised) and a corruption level ``clip(Normal(corruption_mean, corruption_sd), 0, 1)``.
    Transactions have target sizes ``max(1, Poisson(T))`` and are filled with itemsets picked
    by weight; a picked itemset loses items while a uniform draw is below its corruption level
    (``Geometric`` number of random items dropped).

    Vectorised variant (documented deviations): the corrupted picks form one stream that is cut
    into transactions by the cumulative target sizes; a pick belongs to the transaction in
    whose range it starts, so an itemset that does not fit is always kept whole (Quest keeps it
    in half of the cases and moves it to the next transaction otherwise); the rare transaction
    that receives no pick gets one uncorrupted pick truncated to its target size; items of a
    transaction are a set (repeats across picks collapse), so mean lengths fall slightly below
    ``T`` when itemsets overlap.

    Parameters
    ----------
    T : float
        Mean transaction size.
    I : float
        Mean size of the potentially large itemsets.
    D : int
        Number of transactions.
    N : int
        Number of items (default 1000, as in T10I4D100K and T40I10D100K).
    L : int
        Number of potentially large itemsets (default 2000).
    correlation, corruption_mean, corruption_sd : float
        Quest's correlation level and corruption law.
    seed : int or numpy.random.Generator
        Seed (deterministic output) or generator.

    Returns
    -------
    SetData
        ``D`` transactions over ``Domain(N)``.
    """
    rng = _rng(seed)
    D = _positive_int(D, "D", 0)
    N = _positive_int(N, "N")
    L = _positive_int(L, "L")
    if not (T > 0 and I > 0):
        raise ValueError(f"T and I must be > 0, got T={T!r}, I={I!r}")
    if not correlation >= 0 or not 0 <= corruption_mean <= 1 or not corruption_sd >= 0:
        raise ValueError("need correlation >= 0, 0 <= corruption_mean <= 1, corruption_sd >= 0")

    # 1. pool of potentially large itemsets (a loop over L itemsets, not over users)
    sizes = np.minimum(np.maximum(1, rng.poisson(I, size=L)), N)
    fracs = (
        np.minimum(1.0, rng.exponential(correlation, size=L)) if correlation > 0 else np.zeros(L)
    )
    pool: list[np.ndarray] = []
    prev = np.zeros(0, dtype=np.int64)
    for j in range(L):
        m = min(round(fracs[j] * sizes[j]), prev.size) if j else 0
        common = rng.choice(prev, size=m, replace=False) if m else prev[:0]
        fresh = rng.choice(N, size=min(N, int(sizes[j]) + m), replace=False)
        fresh = fresh[~np.isin(fresh, common)][: int(sizes[j]) - m]
        cur = np.concatenate([common, fresh]).astype(np.int64)
        pool.append(cur)
        prev = cur
    psizes = np.array([a.size for a in pool], dtype=np.int64)
    pstart = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(psizes, out=pstart[1:])
    pitems = np.concatenate(pool)
    weights = rng.exponential(1.0, size=L)
    weights /= weights.sum()
    corruption = np.clip(rng.normal(corruption_mean, corruption_sd, size=L), 0.0, 1.0)

    # 2. target sizes and the stream of corrupted picks
    target = np.maximum(1, rng.poisson(T, size=D)).astype(np.int64)
    bounds = np.cumsum(target)
    total = int(bounds[-1]) if D else 0
    cdf = np.cumsum(weights)

    def picks(m: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.minimum(np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right"), L - 1)
        c = corruption[ids]
        dropped = np.where(c >= 1.0, psizes[ids], rng.geometric(1.0 - np.minimum(c, 1 - 1e-12)) - 1)
        return ids, np.maximum(psizes[ids] - dropped, 0)

    mean_kept = max(float(np.dot(weights, psizes * (1 - corruption))), 0.5)
    ids, kept = picks(int(1.2 * total / mean_kept) + 100)
    while kept.sum() < total:
        more_ids, more_kept = picks(int(0.5 * total / mean_kept) + 100)
        ids, kept = np.concatenate([ids, more_ids]), np.concatenate([kept, more_kept])
    start = np.cumsum(kept) - kept
    use = (start < total) & (kept > 0)
    ids, kept, start = ids[use], kept[use], start[use]
    tx = np.searchsorted(bounds, start, side="right")

    # which items survive: a random subset of size kept of each picked itemset
    flat_pick = np.repeat(np.arange(ids.size), psizes[ids])
    offs = np.arange(flat_pick.size) - np.repeat(np.cumsum(psizes[ids]) - psizes[ids], psizes[ids])
    flat_item = pitems[pstart[ids][flat_pick] + offs]
    order = np.lexsort((rng.random(flat_pick.size), flat_pick))
    rank = np.empty(flat_pick.size, dtype=np.int64)
    rank[order] = offs  # offs runs 0..size-1 within each pick, in flat_pick order
    survive = rank < kept[flat_pick]
    rows = tx[flat_pick[survive]]
    items = flat_item[survive]

    # transactions that received no pick: one uncorrupted itemset, truncated to the target size
    empty = np.setdiff1d(np.arange(D), tx, assume_unique=False)
    if empty.size:
        eids = np.minimum(
            np.searchsorted(cdf, rng.random(empty.size) * cdf[-1], side="right"), L - 1
        )
        elen = np.minimum(psizes[eids], target[empty])
        eoff = np.arange(int(elen.sum())) - np.repeat(np.cumsum(elen) - elen, elen)
        rows = np.concatenate([rows, np.repeat(empty, elen)])
        items = np.concatenate([items, pitems[np.repeat(pstart[eids], elen) + eoff]])
    keys = sorted_unique(rows.astype(np.int64) * N + items)
    indptr, codes = _csr_from_keys(keys, D, N)
    return SetData(indptr, codes, Domain(N), f"T{T:g}I{I:g}D{D}")


_QUEST_NAME = re.compile(r"^T(\d+(?:\.\d+)?)I(\d+(?:\.\d+)?)D(\d+)([KkMm]?)$")


def quest_from_name(
    name: str, N: int = 1000, seed: int | np.random.Generator = 0, D: int | None = None
) -> SetData:
    """Quest data named like ``"T40I10D100K"`` (``D`` overrides the size, e.g. to scale down)."""
    m = _QUEST_NAME.match(name.strip())
    if not m:
        raise ValueError(f"not a Quest dataset name like 'T40I10D100K': {name!r}")
    mult = {"": 1, "k": 1000, "m": 1_000_000}[m.group(4).lower()]
    d = int(m.group(3)) * mult if D is None else D
    return quest(float(m.group(1)), float(m.group(2)), d, N=N, seed=seed)
