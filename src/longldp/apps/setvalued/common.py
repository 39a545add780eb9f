"""Shared machinery of the set-valued mining apps: data access, groups, vectorized set queries.

- :class:`Timeline` gives, for timestamp t, a base `SetData` and the base row each user holds
  (a `LongitudinalSets` is its base plus a permutation per t, math §6.1), so no timestamp is
  ever materialized: every per-user quantity is a gather over the users' base rows.
- :func:`split_groups` draws the fixed, disjoint user groups (math §9.2, §9.3, §9.5).
- :class:`MembershipIndex` answers |v_u ∩ C| and "the r-th item of v_u ∩ C" for many users in
  O(1) each after one O(nnz) pass; :class:`ContainmentIndex` does the same for "the candidate
  itemsets contained in v_u" with bit masks over the candidates' items.
- :class:`TopK` and :class:`MiningResult` are what the apps return.

No Python loop runs per user or per item; loops run over timestamps, groups, mask words and
candidate itemsets only.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.data import LongitudinalSets, SetData

OWNER = "setvalued"
#: Longitudinal policies for candidates and padding lengths (math §9.5).
POLICIES = ("reestimate", "freeze")

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


# ------------------------------------------------------------------------------ data access


class Timeline:
    """Set-valued data over τ timestamps, addressed as (base data, base row of each user).

    Parameters
    ----------
    data : SetData, LongitudinalSets or sequence of SetData
        One timestamp, the seeds' permutation interpolation (math §6.1), or one `SetData` per
        timestamp (same n and item domain).
    n_items : int, optional
        The public item domain [0, n_items); default the data's domain size. Items outside it
        raise ``ValueError``.

    Attributes
    ----------
    n, tau, d : int
        Users, timestamps, item domain size.
    permutation_invariant : bool
        True when every timestamp holds the same multiset of sets (one `SetData`, or a
        `LongitudinalSets`): ground truth is then the same at every t.
    """

    def __init__(self, data: Any, n_items: int | None = None):
        if isinstance(data, LongitudinalSets):
            self._bases: list[SetData] = [data.base]
            self._perm: NDArray | None = np.asarray(data.perm)
            self.tau = int(self._perm.shape[0])
            self.permutation_invariant = True
        elif isinstance(data, SetData):
            self._bases, self._perm, self.tau = [data], None, 1
            self.permutation_invariant = True
        elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
            bases = list(data)
            if not bases or not all(isinstance(b, SetData) for b in bases):
                raise ValueError(
                    f"{OWNER}: 'data' must be a SetData, a LongitudinalSets or a non-empty "
                    "sequence of SetData (one per timestamp)."
                )
            if len({b.n for b in bases}) != 1 or len({b.domain.size for b in bases}) != 1:
                raise ValueError(
                    f"{OWNER}: every timestamp of 'data' must have the same number of users "
                    f"and item domain; got n = {[b.n for b in bases]}, domain sizes = "
                    f"{[b.domain.size for b in bases]}."
                )
            self._bases, self._perm, self.tau = bases, None, len(bases)
            self.permutation_invariant = len(bases) == 1
        else:
            raise ValueError(
                f"{OWNER}: 'data' must be a SetData, a LongitudinalSets or a sequence of "
                f"SetData; got {type(data).__name__}."
            )
        self.n = self._bases[0].n
        if self.n < 1:
            raise ValueError(f"{OWNER}: 'data' is empty (no users); need at least one user.")
        d = self._bases[0].domain.size
        if n_items is not None:
            d = check.integer(OWNER, "n_items", n_items, minimum=1)
            top = max((int(b.items.max()) for b in self._bases if b.nnz), default=-1)
            if top >= d:
                raise ValueError(
                    f"{OWNER}: 'data' holds item {top}, outside the item domain "
                    f"[0, {d}) given by 'n_items'."
                )
        if d < 1:
            raise ValueError(f"{OWNER}: 'data' has an empty item domain; need >= 1 item.")
        self.d = d

    def rows(self, t: int) -> tuple[SetData, IntArray]:
        """(base, rows): user u holds ``base.row(rows[u])`` at timestamp t."""
        if self._perm is not None:
            return self._bases[0], self._perm[t].astype(np.int64)
        return self._bases[t], np.arange(self.n, dtype=np.int64)

    def at(self, t: int) -> SetData:
        """The data of timestamp t, materialized (for ground truth)."""
        base, rows = self.rows(t)
        return base if self._perm is None or t == 0 else base.take(rows)

    def base_at(self, t: int) -> SetData:
        """The base `SetData` of timestamp t (the same object for permuted timestamps)."""
        return self._bases[0] if self._perm is not None else self._bases[t]


def gather_rows(base: SetData, rows: IntArray) -> tuple[IntArray, NDArray]:
    """CSR of the given base rows, in order: (indptr, items), without validation."""
    starts = base.indptr[rows]
    lengths = base.indptr[rows + 1] - starts
    indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    pos = np.arange(indptr[-1], dtype=np.int64)
    pos += np.repeat(starts - indptr[:-1], lengths)
    return indptr, base.items[pos]


def sample_one_item(
    base: SetData, rows: IntArray, r: IntArray
) -> tuple[IntArray, NDArray[np.bool_]]:
    """Items ``base.row(rows[u])[r[u]]`` for the users with r < |row| (PS_1 on whole sets)."""
    start = base.indptr[rows]
    real = r < base.indptr[rows + 1] - start
    return base.items[start[real] + r[real]].astype(np.int64), real


# ------------------------------------------------------------------------------ groups


def split_groups(n: int, shares: Sequence[float], rng: np.random.Generator) -> list[IntArray]:
    """A uniformly random partition of n users into groups of the given shares.

    Sizes are ⌊n·s⌋ plus one for the largest remainders (ties to the earlier group), so they
    sum to n; a uniform permutation is cut into consecutive blocks and each block sorted. Every
    group must get at least one user.
    """
    s = np.asarray(shares, dtype=np.float64)
    raw = n * s / s.sum()
    sizes = np.floor(raw).astype(np.int64)
    extra = n - int(sizes.sum())
    order = np.lexsort((np.arange(s.size), -(raw - sizes)))
    sizes[order[:extra]] += 1
    if np.any(sizes < 1):
        raise ValueError(
            f"{OWNER}: {n} users are too few for groups of shares {tuple(s.round(4))}: every "
            f"group needs at least one user (sizes {sizes.tolist()})."
        )
    perm = rng.permutation(n)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(perm[a:b]).astype(np.int64) for a, b in itertools.pairwise(bounds)]


def check_shares(owner: str, name: str, shares: Any, count: int) -> tuple[float, ...]:
    """``count`` positive shares summing to 1 (within 1e-9)."""
    try:
        vals = tuple(float(x) for x in shares)
    except TypeError:
        raise ValueError(f"{owner}: '{name}' must be a sequence of {count} numbers.") from None
    if len(vals) != count or any(not np.isfinite(v) or v <= 0 for v in vals):
        raise ValueError(f"{owner}: '{name}' must be {count} positive fractions; got {shares!r}.")
    if abs(sum(vals) - 1.0) > 1e-9:
        raise ValueError(f"{owner}: '{name}' must sum to 1; got {shares!r} (sum {sum(vals)}).")
    return vals


def max_itemsets(k_items: int) -> int:
    """Number of itemsets of size >= 2 over k_items items: 2^k − k − 1 (capped)."""
    if k_items >= 62:
        return 1 << 62
    return (1 << k_items) - k_items - 1


# ------------------------------------------------------------------------------ slots


def sticky_slots(
    previous: list[Hashable | None] | None, keys: Sequence[Hashable], n_slots: int
) -> list[Hashable | None]:
    """Slot of each key: keys that stay keep their slot, new keys take the free slots in order.

    A time-stable encoding for a memoizing chain whose candidate list changes over time: a
    value keeps its memo as long as it stays a candidate (math §9.5, "domain stability").
    """
    if len(keys) > n_slots:
        raise ValueError(f"{OWNER}: {len(keys)} keys do not fit {n_slots} slots.")
    wanted = set(keys)
    slots: list[Hashable | None] = (
        [None] * n_slots if previous is None else [k if k in wanted else None for k in previous]
    )
    placed = {k for k in slots if k is not None}
    free = iter([i for i, k in enumerate(slots) if k is None])
    for key in keys:
        if key not in placed:
            slots[next(free)] = key
            placed.add(key)
    return slots


def top_indices(values: ArrayLike, count: int, rng: np.random.Generator | None = None) -> IntArray:
    """Positions of the ``count`` largest values, best first.

    Ties go to a uniformly random order when ``rng`` is given, else to the earlier position.
    Never break server-side ties by item id: after post-processing many estimates are exactly 0,
    and item ids often follow popularity (the stand-ins number items by popularity), so id
    order would leak the truth into the output.
    """
    v = np.asarray(values, dtype=np.float64)
    second = np.arange(v.size) if rng is None else rng.random(v.size)
    return np.lexsort((second, -v))[:count].astype(np.int64)


# ------------------------------------------------------------------------------ set queries


class MembershipIndex:
    """|v ∩ C| and the r-th item of v ∩ C for base rows, after one O(nnz) pass.

    ``pos`` lists the positions of the stored items that are members of C; a row's members are
    contiguous in ``pos``, from ``first[row]`` on, ``count[row]`` of them. Per-row arrays keep
    every later query a gather into an n-long array (cache-friendly), not into the nnz-long
    prefix sums.
    """

    def __init__(self, base: SetData, member: NDArray[np.bool_]):
        self.base = base
        flag = member[base.items]
        self.pos = np.flatnonzero(flag)
        # Members per row by one segmented sum over the non-empty rows (a prefix sum over the
        # nnz flags, or a binary search of the row starts in pos, costs several times more at
        # 25M stored items); a row's members start after those of the rows before it.
        lengths = np.diff(base.indptr)
        self.count = np.zeros(lengths.size, dtype=np.int64)
        full = lengths > 0
        if flag.size:
            starts = base.indptr[:-1][full]
            self.count[full] = np.add.reduceat(flag.view(np.uint8), starts, dtype=np.int64)
        self.first = np.zeros(lengths.size, dtype=np.int64)
        np.cumsum(self.count[:-1], out=self.first[1:])
        self._restricted: tuple[IntArray, NDArray] | None = None

    def counts(self, rows: IntArray) -> IntArray:
        """m_u = |v_u ∩ C| for the given base rows."""
        return self.count[rows]

    def pick(self, rows: IntArray, r: IntArray) -> IntArray:
        """The r-th member of C in each row (requires r < m)."""
        return self.base.items[self.pos[self.first[rows] + r]].astype(np.int64)

    def restricted(self) -> tuple[IntArray, NDArray]:
        """CSR (indptr, items) of v ∩ C for every base row (computed once, cached)."""
        if self._restricted is None:
            indptr = np.append(self.first, self.pos.size)
            self._restricted = (indptr, self.base.items[self.pos])
        return self._restricted


def row_masks(indptr: IntArray, items: NDArray, bitpos: IntArray, words: int) -> NDArray[np.uint64]:
    """Bit mask of each CSR row over the items with ``bitpos >= 0`` (bit ``bitpos[x]``).

    One pass over the stored items; rows without such items get 0. Shape (rows, words).
    """
    n = indptr.size - 1
    bp = bitpos[items]
    keep = bp >= 0
    owner = np.repeat(np.arange(n), np.diff(indptr))[keep]
    bp = bp[keep]
    masks = np.zeros((n, words), dtype=np.uint64)
    if owner.size:
        starts = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
        bits = np.left_shift(np.uint64(1), (bp % 64).astype(np.uint64))
        word = bp // 64
        for w in range(words):  # mask words, not users
            vals = bits if words == 1 else np.where(word == w, bits, np.uint64(0))
            masks[owner[starts], w] = np.bitwise_or.reduceat(vals, starts)
    return masks


def unique_rows(masks: NDArray[np.uint64]) -> tuple[NDArray[np.uint64], IntArray, IntArray]:
    """Distinct mask rows, the inverse index of every row and the count of each distinct row."""
    if masks.shape[1] == 1:
        uniq, inv, counts = np.unique(masks[:, 0], return_inverse=True, return_counts=True)
        return uniq[:, None], inv.ravel().astype(np.int64), counts.astype(np.int64)
    view = np.ascontiguousarray(masks).view(np.dtype((np.void, 8 * masks.shape[1]))).ravel()
    _, first, inv, counts = np.unique(
        view, return_index=True, return_inverse=True, return_counts=True
    )
    return masks[first], inv.ravel().astype(np.int64), counts.astype(np.int64)


class ContainmentIndex:
    """Which candidate itemsets each given base row contains, via bit masks.

    Every row is reduced to a mask over the items that occur in the candidates (⌈u/64⌉
    uint64 words for u such items); rows with equal masks are merged (``numpy.unique``), and
    containment S ⊆ v is (mask_v & mask_S) == mask_S on the distinct masks only.

    Parameters
    ----------
    base : SetData
    rows : numpy.ndarray of int64
        Base rows of the users (one per user, repeats allowed).
    itemsets : sequence of tuple of int
        The candidate itemsets, codes 0..len−1 in this order.
    within : MembershipIndex, optional
        An index of a set C that holds every item of the itemsets (SVSM: SVIM's candidates):
        the masks are then computed from the items in C of every base row, in one sequential
        pass, and gathered for ``rows``.
    """

    def __init__(
        self,
        base: SetData,
        rows: IntArray,
        itemsets: Sequence[tuple[int, ...]],
        within: MembershipIndex | None = None,
    ):
        d = base.domain.size
        universe = np.unique(np.fromiter((x for s in itemsets for x in s), dtype=np.int64))
        words = max(1, -(-universe.size // 64))
        bitpos = np.full(max(d, 1), -1, dtype=np.int64)
        bitpos[universe] = np.arange(universe.size)
        sets = np.zeros((len(itemsets), words), dtype=np.uint64)
        for j, s in enumerate(itemsets):  # candidate itemsets (<= 2k), not users
            b = bitpos[np.asarray(s, dtype=np.int64)]
            np.bitwise_or.at(
                sets[j], b // 64, np.left_shift(np.uint64(1), (b % 64).astype(np.uint64))
            )
        if within is None:
            masks = row_masks(*gather_rows(base, rows), bitpos, words)
        else:
            masks = row_masks(*within.restricted(), bitpos, words)[rows]
        # A row with fewer candidate items than the smallest candidate (2 in SVSM) contains
        # none: such rows share the empty mask and only the others are deduplicated.
        bits = np.bitwise_count(masks).sum(axis=1)
        small = bits < min((len(s) for s in itemsets), default=1)
        masks[small] = 0
        busy = np.flatnonzero(~small)
        uniq_busy, inv_busy, _ = unique_rows(masks[busy])
        uniq = np.vstack([np.zeros((1, words), dtype=np.uint64), uniq_busy])
        inv = np.zeros(rows.size, dtype=np.int64)
        inv[busy] = inv_busy + 1
        inside = np.ones((uniq.shape[0], len(itemsets)), dtype=bool)
        for w in range(words):
            inside &= (uniq[:, w, None] & sets[None, :, w]) == sets[None, :, w]
        self._count = inside.sum(axis=1).astype(np.int64)
        _ui, self._ids = np.nonzero(inside)
        self._ptr = np.zeros(uniq.shape[0] + 1, dtype=np.int64)
        np.cumsum(self._count, out=self._ptr[1:])
        self._inv = inv

    def counts(self, which: IntArray | slice = slice(None)) -> IntArray:
        """m_u = number of candidates contained, for the selected users (positions in rows)."""
        return self._count[self._inv[which]]

    def pick(self, which: IntArray, r: IntArray) -> IntArray:
        """The r-th contained candidate (its code) of each selected user (requires r < m)."""
        return self._ids[self._ptr[self._inv[which]] + r].astype(np.int64)


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class TopK:
    """A reported top-k at one timestamp, best first.

    Attributes
    ----------
    keys : tuple of tuple of int
        Items as 1-tuples, itemsets as sorted tuples of item ids.
    freqs : numpy.ndarray of float64
        Estimated frequencies, fractions of all n users (never renormalized).
    """

    keys: tuple[tuple[int, ...], ...]
    freqs: FloatArray

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def items(self) -> IntArray:
        """The keys as item ids (only for a top-k of single items)."""
        if any(len(key) != 1 for key in self.keys):
            raise ValueError(f"{OWNER}: this top-k holds itemsets; use 'keys'.")
        return np.array([key[0] for key in self.keys], dtype=np.int64)

    def as_dict(self) -> dict[tuple[int, ...], float]:
        """key -> estimated frequency."""
        return dict(zip(self.keys, self.freqs.tolist(), strict=True))


@dataclass(frozen=True)
class MiningResult:
    """The output of SVIM, SVSM or LDPMiner over τ timestamps.

    Attributes
    ----------
    app : str
        ``"SVIM"``, ``"SVSM"`` or ``"LDPMiner"``.
    target : str
        ``"items"`` or ``"itemsets"``.
    k : int
        Output size.
    topk : tuple of TopK
        One per timestamp.
    diagnostics : tuple of dict
        Per timestamp: ℓ, u(ℓ), candidate counts, the FOs used, ...
    params : dict
        Every setting of the run (shares, percentile rule, candidate counts, policy, domains,
        oracle and budget, post-processing, engine, tie rules), JSON-friendly.
    groups : dict of str to numpy.ndarray
        The fixed users of each oracle instance.
    budget : dict of str to numpy.ndarray or None
        Per user over all timestamps: ``reports``, ``memos`` and ``epsilon`` (sequential
        composition over the user's instances; min(t·ε1, m·ε∞) per memoizing instance,
        math §4; :meth:`longldp.simulate.Population.budget`). ``epsilon``/``memos`` are None
        for count-level longitudinal runs, which draw no memo.
    items : MiningResult or None
        SVSM: the top-k items of its internal SVIM.
    """

    app: str
    target: str
    k: int
    topk: tuple[TopK, ...]
    diagnostics: tuple[dict[str, Any], ...]
    params: dict[str, Any]
    groups: dict[str, IntArray] = field(repr=False)
    budget: dict[str, NDArray | None] = field(repr=False)
    items: MiningResult | None = None

    @property
    def tau(self) -> int:
        """Number of timestamps."""
        return len(self.topk)
