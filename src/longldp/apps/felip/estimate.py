"""FELIP's server side: per-grid counts → non-negative, consistent grids → query answers.

Source: the FELIP method of docs/math.md §8.6–§8.9, which follows HDG (Yang et al., PVLDB 14(3),
2020, §5; code ``privmdr``) and [C] (``bdreasch/mdc`` ``felip.py``, ``estimate_method.py``).
Counts are in users and every grid sums to the total n (math §8.6: ĉ = f̂·n).

1. **Non-negativity** (math §8.7.1) per grid: the seeds' Algorithm 1 (intended form, math §5.2;
   default) or Norm-Sub. :func:`nonnegative` runs it on all grids at once; it equals
   :func:`longldp.postprocess.algorithm_1` / :func:`~longldp.postprocess.norm_sub` applied grid
   by grid (tested).
2. **Consistency** (math §8.7.2): for attribute a, interval I_v of its 2-D partition and grid G
   containing a, S_G(v) sums G's cells whose a-interval lies in I_v (c_G(v) cells). The common
   target is the inverse-variance mean T(v) = Σ_G w_G(v) S_G(v) / Σ_G w_G(v) with
   w_G(v) = 1/(c_G(v)·V_G) (V_G: the per-cell variance of G's oracle, so Var S_G(v) ≈ c_G(v)V_G;
   ``weights="cells"`` uses HDG's 1/c_G(v)), and (T(v) − S_G(v))/c_G(v) is added to each
   of those cells. [R] T is constrained to Σ_v T(v) = n (weighted least squares with the known
   total: T = T⁰ + μ/W(v)). In HDG every c_G(v) is constant in v, μ = 0 and this is HDG's
   formula; with FELIP's unequal sub-cell counts the unconstrained mean would shift a grid's
   total and leak into its other attribute. With totals kept, a pass over one attribute leaves
   every other attribute's slab sums unchanged, so all attributes are updated at once (equal to
   the sequential pass; tested).
3. **Iterate** (math §8.7.3): N (C N)^K, stopping early once an iteration moves no count by more
   than ``tol``·n; K = 100 as privmdr.
4. **Response matrices** (math §8.8): for each 2-D grid, iterative proportional fitting (HDG's
   weighted update) of a matrix to the 1-D grids of its attributes and to its own cells,
   renormalised to n after each step, until an iteration changes the matrix by Σ|ΔR| < 1 user
   (privmdr's rule; ``response_tol``) or 200 iterations. Every step multiplies whole
   rectangles of 1-D cells, so the matrix is kept at that resolution (exact;
   :meth:`FelipModel.response_matrix` expands it to values).
5. **Answers** (math §8.9): λ = 1 from the 1-D grid (partial cells pro rata; a categorical
   attribute from the mean marginal of its 2-D grids, [R]); λ = 2 from the pair's grid
   (cells inside the query count whole, partial cells through R); λ > 2 by the weighted update
   of a 2^λ tensor to the C(λ, 2) pair answers (start n/2^λ, renormalise after each pair, stop at
   Σ|Δ| < 1 user or 200 sweeps; the answer is the all-satisfied entry).

Everything accepts one timestamp (a flat vector of Σ_G k_G cell counts) or a batch of
timestamps (shape (B, Σ_G k_G)), processed at once. Each timestamp keeps its own stopping rule
(converged timestamps are frozen), so a batch gives each timestamp exactly what it would get
alone, only faster: the per-call overhead is shared.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.apps.felip.grids import OWNER, FelipLayout
from longldp.apps.felip.queries import Query

NONNEGATIVE_METHODS = ("algorithm-1", "norm-sub")
WEIGHTS = ("variance", "cells")
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class EstimationOptions:
    """Server-side options (math §8.7–§8.9).

    Parameters
    ----------
    postprocess : {"algorithm-1", "norm-sub"}, default="algorithm-1"
        Per-grid non-negativity: seed 002's Algorithm 1 (corrected) or Norm-Sub ([C], privmdr).
    iterations : int, default=100
        K, the (consistency, non-negativity) rounds (privmdr 100, [C] 200).
    tol : float, default=1e-9
        Stop the rounds once none moves a count by more than ``tol``·n.
    weights : {"variance", "cells"}, default="variance"
        Consistency weights 1/(c_G V_G) or HDG's 1/c_G (equal when every grid uses the
        same oracle with the same number of users).
    response_iterations : int, default=200
    response_tol : float, default=1.0
        Weighted updates stop when an iteration changes a matrix (a query's tensor) by
        Σ|Δ| < ``response_tol`` users (privmdr: 1; [C]: 0.1 for matrices, 1 for tensors).
    """

    postprocess: str = "algorithm-1"
    iterations: int = 100
    tol: float = 1e-9
    weights: str = "variance"
    response_iterations: int = 200
    response_tol: float = 1.0

    def __post_init__(self) -> None:
        method = (
            self.postprocess.lower().replace("_", "-")
            if isinstance(self.postprocess, str)
            else self.postprocess
        )
        object.__setattr__(
            self, "postprocess", check.choice(OWNER, "postprocess", method, NONNEGATIVE_METHODS)
        )
        object.__setattr__(self, "weights", check.choice(OWNER, "weights", self.weights, WEIGHTS))
        check.integer(OWNER, "iterations", self.iterations, minimum=0)
        check.integer(OWNER, "response_iterations", self.response_iterations, minimum=1)
        check.positive_float(OWNER, "tol", self.tol)
        check.positive_float(OWNER, "response_tol", self.response_tol)


# ---------------------------------------------------------------------------------- batches


def _columns(x: ArrayLike, width: int, name: str) -> tuple[FloatArray, bool]:
    """(width, B) float copy of one vector (width,) or a batch (B, width); and 'was a batch'."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] != width or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"{OWNER}: '{name}' must be {width} finite cell counts, or a batch of shape "
            f"(B, {width}); got shape {arr.shape}."
        )
    return (np.array(arr[:, None]) if arr.ndim == 1 else np.array(arr.T)), arr.ndim == 2


def _rows(x: FloatArray, batched: bool) -> FloatArray:
    return np.ascontiguousarray(x.T) if batched else x[:, 0].copy()


def _safe_ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    """num/den where den > 0, else 1 (a zero part cannot be rescaled: skip it)."""
    return np.divide(num, den, out=np.ones(np.broadcast(num, den).shape), where=den > 0.0)


# ---------------------------------------------------------------------------------- step 1


def nonnegative(
    layout: FelipLayout, counts: ArrayLike, total: float, method: str = "algorithm-1"
) -> FloatArray:
    """Make every grid non-negative with sum ``total``, all grids at once (math §8.7.1)."""
    method = check.choice(OWNER, "postprocess", method, NONNEGATIVE_METHODS)
    x, batched = _columns(counts, layout.total_cells, "counts")
    return _rows(_nonneg(layout, x, float(total), method), batched)


def _nonneg(layout: FelipLayout, x: FloatArray, total: float, method: str) -> FloatArray:
    if method == "norm-sub":
        return _norm_sub(x, layout.offsets, layout.segment_id, total)
    return _algorithm_1(x, layout.offsets, layout.segment_id, total)


def _algorithm_1(x: FloatArray, offsets: NDArray, seg: NDArray, total: float) -> FloatArray:
    """Segmented :func:`longldp.postprocess.algorithm_1` (same passes, same stopping rule,
    its default tolerance), on (cells, B) columns."""
    f = x.copy()
    starts = offsets[:-1]
    k = np.diff(offsets)
    atol = (np.maximum(1e-12, 4.0 * k * np.finfo(np.float64).eps) * total)[:, None]
    active = np.ones((k.size, f.shape[1]), dtype=bool)
    for _ in range(int(k.max()) + 1):
        np.maximum(f, 0.0, out=f)
        pos = f > 0.0
        npos = np.add.reduceat(pos.astype(np.int64), starts, axis=0)
        empty = active & (npos == 0)
        if empty.any():
            f = np.where(empty[seg], (total / k)[seg][:, None], f)
            active &= ~empty
        sums = np.add.reduceat(f, starts, axis=0)
        delta = np.where(active & (npos > 0), (total - sums) / np.maximum(npos, 1), 0.0)
        f += np.where(pos, delta[seg], 0.0)
        done = (np.minimum.reduceat(f, starts, axis=0) >= 0.0) & (
            np.abs(np.add.reduceat(f, starts, axis=0) - total) <= atol
        )
        active &= ~done
        if not active.any():
            return f
    raise RuntimeError(f"{OWNER}: algorithm-1 did not converge; please report this input.")


def _norm_sub(x: FloatArray, offsets: NDArray, seg: NDArray, total: float) -> FloatArray:
    """Segmented :func:`longldp.postprocess.norm_sub` (projection onto the simplex per grid),
    on (cells, B) columns."""
    starts = offsets[:-1]
    rows = x.T
    order = np.lexsort((-rows, np.broadcast_to(seg, rows.shape)))
    u = np.take_along_axis(rows, order, axis=1)
    cs = np.cumsum(u, axis=1)
    before = np.concatenate([np.zeros((u.shape[0], 1)), cs[:, offsets[1:-1] - 1]], axis=1)
    j = np.arange(seg.size) - np.repeat(starts, np.diff(offsets)) + 1
    thetas = (cs - before[:, seg] - total) / j
    rho = np.maximum.reduceat(np.where(u - thetas > 0.0, j, 0), starts, axis=1)
    theta = np.take_along_axis(thetas, starts + np.maximum(rho, 1) - 1, axis=1)
    return np.maximum(x - theta.T[seg], 0.0)


# ---------------------------------------------------------------------------------- step 2


def consistency_step(
    layout: FelipLayout, counts: ArrayLike, total: float, variances: ArrayLike | None = None
) -> FloatArray:
    """One consistency pass over every attribute (math §8.7.2, with the [R] total constraint).

    Parameters
    ----------
    layout : FelipLayout
    counts : array_like, shape (Σk,) or (B, Σk)
        Flat cell counts; every grid should sum to ``total`` (true after :func:`nonnegative`).
    total : float
        n.
    variances : array_like of shape (m,), optional
        Per-cell variance V_G of each grid (weights 1/(c_G V_G)); None: HDG's 1/c_G.

    Returns
    -------
    numpy.ndarray
        The updated counts: each attribute's slab sums equal in every grid containing it.
    """
    c, batched = _columns(counts, layout.total_cells, "counts")
    return _rows(_consistency(layout, c, float(total), _weights(layout, variances)), batched)


def _weights(layout: FelipLayout, variances: ArrayLike | None) -> FloatArray:
    """w per (attribute, grid, slab) group: 1/c_G(v), divided by V_G when given."""
    ci = layout.consistency_index
    w = 1.0 / ci["count"]
    if variances is not None:
        v = np.asarray(variances, dtype=np.float64)
        if v.shape != (layout.m,) or not np.all(v > 0):
            raise ValueError(f"{OWNER}: 'variances' must be {layout.m} positive numbers.")
        w = w / v[ci["grid"]]
    return w


def _consistency(layout: FelipLayout, c: FloatArray, total: float, w: FloatArray) -> FloatArray:
    ops, count = layout.consistency_operators, layout.consistency_index["count"][:, None]
    S = ops["PT"] @ c  # S_G(v) per group, (groups, B)
    W = ops["QT"] @ w  # Σ_G w_G(v) per slab
    T = (ops["QT"] @ (S * w[:, None])) / W[:, None]
    mu = (total - ops["AT"] @ T) / (ops["AT"] @ (1.0 / W))[:, None]  # Σ_v T(v) = n per attribute
    T += (ops["A"] @ mu) / W[:, None]
    return c + ops["P"] @ ((ops["Q"] @ T - S) / count)


def postprocess_grids(
    layout: FelipLayout,
    raw: ArrayLike,
    total: float,
    variances: ArrayLike | None = None,
    options: EstimationOptions | None = None,
) -> tuple[FloatArray, NDArray[np.int64]]:
    """N (C N)^K of math §8.7.3 with early stopping; returns (counts, rounds run per timestamp)."""
    x, batched = _columns(raw, layout.total_cells, "raw")
    opts = options or EstimationOptions()
    f, rounds = _postprocess(layout, x, float(total), variances, opts)
    return _rows(f, batched), rounds


def _postprocess(
    layout: FelipLayout,
    x: FloatArray,
    total: float,
    variances: ArrayLike | None,
    opts: EstimationOptions,
) -> tuple[FloatArray, NDArray[np.int64]]:
    w = _weights(layout, None if opts.weights == "cells" else variances)
    f = _nonneg(layout, x, total, opts.postprocess)
    rounds = np.zeros(f.shape[1], dtype=np.int64)
    live = np.arange(f.shape[1])
    for _ in range(opts.iterations):
        cur = f[:, live]
        nxt = _nonneg(layout, _consistency(layout, cur, total, w), total, opts.postprocess)
        f[:, live] = nxt
        rounds[live] += 1
        live = live[np.max(np.abs(nxt - cur), axis=0) > opts.tol * total]
        if live.size == 0:
            break
    return f, rounds


# ---------------------------------------------------------------------------------- step 4


def response_matrices(
    layout: FelipLayout, counts: ArrayLike, total: float, iterations: int = 200, tol: float = 1.0
) -> tuple[FloatArray, NDArray[np.int64]]:
    """The weighted update of every 2-D grid's matrix at once (math §8.8).

    Returns the flat matrices at 1-D-cell resolution (shape (E,) or (B, E)) and the iterations
    run per timestamp. Stops when an iteration changes every matrix by Σ|ΔR| < ``tol`` users,
    or after ``iterations``.
    """
    c, batched = _columns(counts, layout.total_cells, "counts")
    R, its = _response(layout, c, float(total), iterations, tol)
    return _rows(R, batched), its


def _response(
    layout: FelipLayout, c: FloatArray, total: float, iterations: int, tol: float
) -> tuple[FloatArray, NDArray[np.int64]]:
    ri, ops = layout.response_index, layout.response_operators
    b = c.shape[1]
    its = np.zeros(b, dtype=np.int64)
    if ri["grid"].size == 0:
        return np.zeros((0, b)), its
    grid = ri["grid"]
    R = total * np.repeat(ri["init"][:, None], b, axis=1)
    fits = [
        (ops["row"], ri["row"], c[ri["row_target"]], ri["row_has"][:, None]),
        (ops["col"], ri["col"], c[ri["col_target"]], ri["col_has"][:, None]),
        (ops["block"], ri["block"], c, True),
    ]
    live = np.arange(b)
    for _ in range(iterations):
        cur = R[:, live]
        old = cur.copy()
        for M, idx, target, has in fits:
            cur *= np.where(has, _safe_ratio(target[:, live], M @ cur), 1.0)[idx]
            cur *= _safe_ratio(np.full((layout.m, live.size), total), ops["grid"] @ cur)[grid]
        R[:, live] = cur
        its[live] += 1
        live = live[np.max(ops["grid"] @ np.abs(cur - old), axis=0) >= tol]
        if live.size == 0:
            break
    return R, its


# ---------------------------------------------------------------------------------- answers


@dataclass(frozen=True, eq=False)
class QueryBatch:
    """Queries prepared for one layout: everything that does not depend on the counts."""

    queries: tuple[Query, ...]
    singles: list[tuple[int, int, FloatArray]]
    pair_items: dict[int, dict[str, Any]]
    n_pairs: int
    tensors: list[tuple[int, NDArray[np.int64], NDArray[np.int64]]]
    pair_of_query: dict[int, int] = field(default_factory=dict)


def prepare_queries(layout: FelipLayout, queries: Sequence[Query]) -> QueryBatch:
    """Validate queries against the layout's schema and precompute their cell overlaps."""
    schema = layout.schema
    qs = tuple(q.validate(schema) for q in queries)
    singles: list[tuple[int, int, FloatArray]] = []
    pairs: list[tuple[int, int, int, int, int, int]] = []  # (a, b, lo_a, hi_a, lo_b, hi_b)
    pair_of_query: dict[int, int] = {}
    by_lam: dict[int, list[tuple[int, list[int]]]] = {}
    for i, q in enumerate(qs):
        if q.lam == 1:
            a = q.attributes[0]
            singles.append((i, a, layout.fine[a].overlap([q.lo[0]], [q.hi[0]])[0]))
            continue
        slots = []
        for x, y in itertools.combinations(range(q.lam), 2):
            slots.append(len(pairs))
            pairs.append((q.attributes[x], q.attributes[y], q.lo[x], q.hi[x], q.lo[y], q.hi[y]))
        if q.lam == 2:
            pair_of_query[i] = slots[0]
        else:
            by_lam.setdefault(q.lam, []).append((i, slots))
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 6)
    pair_items: dict[int, dict[str, Any]] = {}
    for (a, b), g in layout.pair_grid.items():
        sel = np.flatnonzero((arr[:, 0] == a) & (arr[:, 1] == b))
        if sel.size == 0:
            continue
        ca, cb = layout.coarse[a], layout.coarse[b]
        pair_items[g] = {
            "items": sel,
            "wa": layout.fine[a].overlap(arr[sel, 2], arr[sel, 3]),
            "wb": layout.fine[b].overlap(arr[sel, 4], arr[sel, 5]),
            "ia": (ca.overlap(arr[sel, 2], arr[sel, 3]) == 1.0).astype(np.float64),
            "ib": (cb.overlap(arr[sel, 4], arr[sel, 5]) == 1.0).astype(np.float64),
        }
    tensors = [
        (lam, np.array([i for i, _ in rows]), np.array([s for _, s in rows]))
        for lam, rows in sorted(by_lam.items())
    ]
    return QueryBatch(qs, singles, pair_items, len(pairs), tensors, pair_of_query)


def weighted_update(
    pair_answers: ArrayLike,
    lam: int,
    total: float,
    iterations: int = 200,
    tol: float = 1.0,
    groups: ArrayLike | None = None,
) -> FloatArray:
    """λ > 2 answers from the C(λ, 2) pair answers (math §8.9; HDG's weighted update).

    ``pair_answers`` has shape (Q, C(λ, 2)), pairs in ``itertools.combinations`` order. A
    tensor of shape (Q, 2, ..., 2) (index 0 = satisfies the attribute's constraint) starts at
    n/2^λ; each sweep rescales, for every pair, the entries with 0 on both to the pair's answer
    (skipped when that part is 0) and then the tensor to n, until a sweep changes every
    tensor by Σ|Δ| < ``tol`` users (privmdr: 1) or after ``iterations`` sweeps. ``groups``
    (one label per query, e.g. its timestamp) makes each group stop on its own. Returns the
    all-0 entries.
    """
    A = np.asarray(pair_answers, dtype=np.float64)
    q = A.shape[0]
    if q == 0:
        return np.zeros(0)
    labels = (
        np.zeros(q, dtype=np.int64) if groups is None else np.unique(groups, return_inverse=True)[1]
    )
    # entry e of the flattened tensor has bit (λ − 1 − x) of e set iff attribute x is violated
    bits = (np.arange(2**lam)[None, :] >> (lam - 1 - np.arange(lam))[:, None]) & 1
    masks = np.array(
        [(bits[x] == 0) & (bits[y] == 0) for x, y in itertools.combinations(range(lam), 2)]
    ).astype(np.float64)
    flat = np.full((q, 2**lam), total / 2**lam)
    live = np.arange(q)
    for _ in range(iterations):
        cur = flat[live]
        old = cur.copy()
        for p, mask in enumerate(masks):
            # scale the pair's part by c = A/s, then the tensor (total n − s + A) back to n
            s = cur @ mask
            c = _safe_ratio(A[live, p], s) - 1.0
            k = _safe_ratio(np.full(live.size, total), total + c * s)
            factor = np.multiply.outer(c, mask)
            factor += 1.0
            factor *= k[:, None]
            cur *= factor
        flat[live] = cur
        moved = np.zeros(labels.max() + 1)
        np.maximum.at(moved, labels[live], np.abs(cur - old).sum(axis=1))
        live = live[moved[labels[live]] >= tol]
        if live.size == 0:
            break
    return flat[:, 0].copy()


@dataclass(frozen=True, eq=False)
class FelipModel:
    """Estimated grids of one timestamp (or a batch of B), ready to answer queries.

    Build it with :func:`fit_model`. Accessors return one timestamp's arrays, or arrays with a
    leading batch axis of length B when the model was fitted on a batch.

    Attributes
    ----------
    layout : FelipLayout
    total : float
        n: every grid and every response matrix sums to it.
    cell_columns : numpy.ndarray, shape (Σk, B)
        Non-negative, consistent cell counts of all grids, one column per timestamp
        (:attr:`counts` and :meth:`grid_counts` give them the usual way round).
    fine_columns : numpy.ndarray, shape (E, B)
        Response matrices of the 2-D grids at 1-D-cell resolution, one column per timestamp.
    rounds, response_iterations : numpy.ndarray of int64, shape (B,)
        Consistency rounds and weighted-update iterations run per timestamp.
    options : EstimationOptions
    batched : bool
        Whether accessors keep the batch axis.
    """

    layout: FelipLayout
    total: float
    cell_columns: FloatArray
    fine_columns: FloatArray
    rounds: NDArray[np.int64]
    response_iterations: NDArray[np.int64]
    options: EstimationOptions
    batched: bool = False

    @property
    def batch(self) -> int:
        """Number of timestamps B."""
        return int(self.cell_columns.shape[1])

    @property
    def counts(self) -> FloatArray:
        """Flat cell counts of all grids, shape (Σk,) or (B, Σk)."""
        return self._out(self.cell_columns)

    def at(self, i: int) -> FelipModel:
        """Timestamp i of a batch, as a one-timestamp model."""
        sl = slice(i, i + 1)
        return FelipModel(
            self.layout,
            self.total,
            self.cell_columns[:, sl],
            self.fine_columns[:, sl],
            self.rounds[sl],
            self.response_iterations[sl],
            self.options,
        )

    def _out(self, x: np.ndarray) -> np.ndarray:
        """Batch axis (last internally) moved first, or dropped for one timestamp."""
        x = np.moveaxis(x, -1, 0)
        return x if self.batched else x[0]

    def _grid(self, grid: int) -> FloatArray:
        g = self.layout.grids[grid]
        lo, hi = self.layout.offsets[grid], self.layout.offsets[grid + 1]
        return self.cell_columns[lo:hi].reshape((*g.shape, self.batch))

    def grid_counts(self, grid: int) -> FloatArray:
        """Counts of one grid, shaped like the grid, (g,) or (g_a, g_b) (batch axis first)."""
        return self._out(self._grid(grid))

    def _fine(self, grid: int) -> FloatArray:
        ri = self.layout.response_index
        start, shape = ri["starts"][grid], ri["shapes"][grid]
        return self.fine_columns[start : start + shape[0] * shape[1]].reshape((*shape, self.batch))

    def response_matrix(self, a: int | str, b: int | str) -> FloatArray:
        """The D_a × D_b response matrix of the pair's grid at value resolution (math §8.8)."""
        s = self.layout.schema
        a, b = s.index(a), s.index(b)
        if a == b:
            raise ValueError(f"{OWNER}: a response matrix needs two different attributes.")
        lo, hi = sorted((a, b))
        fa, fb = self.layout.fine[lo], self.layout.fine[hi]
        w = np.outer(fa.widths, fb.widths)[:, :, None]
        m = self._fine(self.layout.pair_grid[(lo, hi)]) / w
        out = np.repeat(np.repeat(m, fa.widths, axis=0), fb.widths, axis=1)
        return self._out(out if a < b else out.transpose(1, 0, 2))

    def answer(self, queries: Sequence[Query] | QueryBatch) -> FloatArray:
        """Estimated counts of the queries (math §8.9): shape (|Q|,), or (B, |Q|) for a batch.

        Divide by :attr:`total` for fractions.
        """
        batch = (
            queries if isinstance(queries, QueryBatch) else prepare_queries(self.layout, queries)
        )
        lay, b = self.layout, self.batch
        out = np.empty((b, len(batch.queries)))
        for i, a, w in batch.singles:
            one = lay.one_d[a]
            out[:, i] = w @ (self._grid(one) if one >= 0 else self._marginal(a))
        pair = np.zeros((b, batch.n_pairs))
        for g, item in batch.pair_items.items():
            a, c = lay.grids[g].attributes
            fine = self._fine(g)
            blocks = np.add.reduceat(
                np.add.reduceat(fine, _starts(lay.parent[a]), axis=0), _starts(lay.parent[c]), 1
            )
            resid = self._grid(g) - blocks  # zero unless a block of R could not be fitted
            pair[:, item["items"]] = np.einsum(
                "qi,ijb,qj->bq", item["wa"], fine, item["wb"]
            ) + np.einsum("qi,ijb,qj->bq", item["ia"], resid, item["ib"])
        for i, slot in batch.pair_of_query.items():
            out[:, i] = pair[:, slot]
        opts = self.options
        for lam, rows, slots in batch.tensors:
            ans = weighted_update(
                pair[:, slots].reshape(-1, slots.shape[1]),
                lam,
                self.total,
                opts.response_iterations,
                opts.response_tol,
                np.repeat(np.arange(b), rows.size),
            )
            out[:, rows] = ans.reshape(b, rows.size)
        return out if self.batched else out[0]

    def _marginal(self, a: int) -> FloatArray:
        """Mean over a's 2-D grids of their a-marginal (a categorical attribute, math §8.9 [R])."""
        rows = [
            self._grid(g).sum(axis=1 if a == x else 0)
            for (x, y), g in self.layout.pair_grid.items()
            if a in (x, y)
        ]
        return np.mean(rows, axis=0)


def _starts(parent: NDArray) -> NDArray:
    return np.flatnonzero(np.concatenate([[True], parent[1:] != parent[:-1]]))


def fit_model(
    layout: FelipLayout,
    raw: ArrayLike,
    total: float,
    variances: ArrayLike | None = None,
    options: EstimationOptions | None = None,
) -> FelipModel:
    """Steps 1–4 of the module docstring on raw (unbiased) cell counts.

    Parameters
    ----------
    layout : FelipLayout
    raw : array_like, shape (Σk,) or (B, Σk)
        Raw cell counts of all grids (per grid ĉ = f̂·n, math §8.6), or exact counts; a batch
        of B timestamps is fitted at once, each exactly as on its own.
    total : float
        n.
    variances : array_like of shape (m,), optional
        Per-cell variance of each grid (consistency weights); None: HDG's 1/c_G.
    options : EstimationOptions, optional
    """
    opts = options or EstimationOptions()
    total = check.positive_float(OWNER, "total", total)
    x, batched = _columns(raw, layout.total_cells, "raw")
    counts, rounds = _postprocess(layout, x, total, variances, opts)
    fine, its = _response(layout, counts, total, opts.response_iterations, opts.response_tol)
    return FelipModel(layout, total, counts, fine, rounds, its, opts, batched)


__all__ = [
    "NONNEGATIVE_METHODS",
    "WEIGHTS",
    "EstimationOptions",
    "FelipModel",
    "QueryBatch",
    "consistency_step",
    "fit_model",
    "nonnegative",
    "postprocess_grids",
    "prepare_queries",
    "response_matrices",
    "weighted_update",
]
