"""Populations of the GFIM studies: the thesis's synthetic sets, Census-Income items, planted
items for tests, and a longitudinal population where a share of users changes sets.

- :func:`synthetic_sets` (GFIM thesis §4.1, §4.4): every user holds ``size`` distinct items of
  [1, d], drawn from a rounded Laplace(μ, b) or Normal(μ, σ) clipped to [1, d] until ``size``
  are distinct. The order in which distinct values first appear in i.i.d. draws is exactly
  successive sampling without replacement, so the generator draws a batch per user and keeps
  the first ``size`` distinct values (rows short of them are redrawn with a larger batch).
  Item value x is item id x − 1.
- :func:`census_sets`: the bundled Census-Income (KDD) table as "attribute=value" items, one set
  per person, ℓ = the attributes kept (DATA.md).
- :func:`planted_sets`: a small population with known frequent items (tests, examples).
- :func:`changing_population`: τ timestamps of a set-valued population in which a share of
  the users (redrawn at every timestamp) swap sets at random; the multiset of sets, so the truth,
  is the same at every timestamp, while those users' items change.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.data import LongitudinalSets, SetData, load, table_to_itemsets

OWNER = "gfim data"
DISTRIBUTIONS = ("laplace", "normal")
#: Users drawn at once by :func:`synthetic_sets` (bounds the batch matrices).
_CHUNK = 65_536


def item_probabilities(dist: str, d: int = 1000, mu: float = 500.0, scale: float = 30.0) -> NDArray:
    """pmf of round(X) clipped to [1, d], as item ids 0..d−1 (value x → id x − 1).

    ``scale`` is b for Laplace and σ for Normal (the thesis: b = 30, σ = √1800, variance 1800
    both).
    """
    dist = check.choice(OWNER, "dist", dist, DISTRIBUTIONS)
    d = check.integer(OWNER, "d", d, minimum=1)
    scale = check.positive_float(OWNER, "scale", scale)
    edges = np.arange(1, d, dtype=np.float64) + 0.5  # boundaries between values 1..d
    z = (edges - mu) / scale
    if dist == "laplace":
        cdf = np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))
    else:
        cdf = 0.5 * np.array([math.erfc(-x / math.sqrt(2)) for x in z])
    full = np.concatenate([[0.0], cdf, [1.0]])
    return np.diff(full)


def synthetic_sets(
    n: int,
    dist: str = "laplace",
    d: int = 1000,
    size: int = 50,
    mu: float = 500.0,
    scale: float | None = None,
    rng: Any = None,
) -> SetData:
    """The thesis's synthetic population: ``n`` users, ``size`` distinct items each.

    Parameters
    ----------
    n : int
        Users.
    dist : {"laplace", "normal"}
    d : int, default=1000
        Item domain (values 1..d, ids 0..d−1).
    size : int, default=50
        Distinct items per user (1 <= size <= number of items of positive probability).
    mu : float, default=500
    scale : float, optional
        Laplace b (default 30) or Normal σ (default √1800).
    rng : seed or numpy.random.Generator
    """
    n = check.integer(OWNER, "n", n, minimum=1)
    size = check.integer(OWNER, "size", size, minimum=1)
    if scale is None:
        scale = 30.0 if str(dist).lower() == "laplace" else math.sqrt(1800.0)
    pmf = item_probabilities(dist, d, mu, scale)
    if size > np.count_nonzero(pmf):
        raise ValueError(
            f"{OWNER}: 'size' must be at most the {np.count_nonzero(pmf)} items of positive "
            f"probability; got {size}."
        )
    gen = np.random.default_rng(rng)
    dist = str(dist).lower()
    rows = np.empty((n, size), dtype=np.int64)
    todo = np.arange(n)
    batch = 2 * size + 20
    while todo.size:
        done = []
        for lo in range(0, todo.size, _CHUNK):
            who = todo[lo : lo + _CHUNK]
            shape = (who.size, batch)
            x = gen.laplace(mu, scale, shape) if dist == "laplace" else gen.normal(mu, scale, shape)
            draws = (np.clip(np.rint(x), 1, d) - 1).astype(np.int32)
            ok, firsts = _first_distinct(draws, size)
            rows[who[ok]] = firsts[ok]
            done.append(who[ok])
        todo = np.setdiff1d(todo, np.concatenate(done))
        batch *= 2
    rows.sort(axis=1)
    indptr = np.arange(0, n * size + 1, size, dtype=np.int64)
    return SetData.from_csr(indptr, rows.ravel(), d, f"{dist}-{n}")


def _first_distinct(draws: NDArray[np.int64], size: int) -> tuple[NDArray[np.bool_], NDArray]:
    """Per row: whether it holds ``size`` distinct values, and the first ``size`` of them."""
    width = draws.shape[1]
    key = draws * np.int32(width) + np.arange(width, dtype=np.int32)
    key.sort(axis=1)
    vals, pos = key // width, key % width
    first = np.ones_like(vals, dtype=bool)
    first[:, 1:] = vals[:, 1:] != vals[:, :-1]
    pos = np.where(first, pos, width)
    ok = first.sum(axis=1) >= size
    pick = np.argpartition(pos, size - 1, axis=1)[:, :size] if size < width else np.arange(width)
    return ok, np.take_along_axis(vals, pick, axis=1).astype(np.int64)


def census_sets(attributes: list[str] | None = None) -> SetData:
    """Census-Income (KDD) as sets of "attribute=value" items, all 299,285 persons.

    Every nominal attribute is kept by default (34 columns, so ℓ = 34 and every set has the
    same length, as the thesis's Census 1990 records do); see DATA.md.
    """
    table = load("census_income")
    return table_to_itemsets(table, attributes)


def planted_sets(
    n: int,
    d: int = 64,
    planted: tuple[int, ...] = (3, 9),
    share: float = 0.6,
    background: int = 4,
    rng: Any = None,
) -> SetData:
    """``n`` users; each holds each planted item with probability ``share`` plus ``background``
    distinct uniform items of the rest (sizes vary; a set may be empty when background = 0)."""
    n = check.integer(OWNER, "n", n, minimum=1)
    d = check.integer(OWNER, "d", d, minimum=2)
    share = check.probability(OWNER, "share", share)
    planted_arr = np.asarray(planted, dtype=np.int64)
    if planted_arr.size == 0 or planted_arr.min() < 0 or planted_arr.max() >= d:
        raise ValueError(f"{OWNER}: 'planted' must be items of [0, {d}); got {planted!r}.")
    rest = np.setdiff1d(np.arange(d), planted_arr)
    background = check.integer(OWNER, "background", background, minimum=0, maximum=rest.size)
    gen = np.random.default_rng(rng)
    hold = gen.random((n, planted_arr.size)) < share
    noise = np.argsort(gen.random((n, rest.size)), axis=1)[:, :background]
    cols = [np.where(hold, planted_arr, -1), rest[noise]]
    mat = np.concatenate(cols, axis=1)
    keep = mat >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    return SetData.from_csr(indptr, mat[keep], d, "planted")


def changing_population(
    base: SetData, tau: int, change_share: float, rng: Any = None
) -> LongitudinalSets:
    """τ timestamps of ``base``: at each t ≥ 1 a fresh random share of the users swap sets.

    The chosen users' sets are permuted among themselves (a uniform permutation), so the
    population's multiset of sets, hence every frequency, stays the same.
    """
    tau = check.integer(OWNER, "tau", tau, minimum=1)
    share = check.probability(OWNER, "change_share", change_share)
    gen = np.random.default_rng(rng)
    n = base.n
    perm = np.empty((tau, n), dtype=np.int64)
    perm[0] = np.arange(n)
    n_move = round(share * n)
    for t in range(1, tau):  # timestamps, not users
        perm[t] = perm[t - 1]
        movers = gen.choice(n, size=n_move, replace=False)
        perm[t, movers] = perm[t - 1, gen.permutation(movers)]
    perm.flags.writeable = False
    return LongitudinalSets(base, perm)
