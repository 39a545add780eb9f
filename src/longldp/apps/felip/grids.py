"""FELIP's grids: attributes, cells of unequal width, the grid set and the user partition.

Source: the reconstructed FELIP method, docs/math.md §8.2 (grid set and
user partition) and §8.3 (cell partitions and the nesting rule). FELIP itself is Costa Filho and
Machado, EDBT 2023; its cells and grid layout follow HDG (Yang et al., PVLDB 14(3), 2020) with
the unequal widths of the public implementation ``bdreasch/mdc`` ([C] in docs/math.md §8).

- An attribute is *numerical* (range constraints; its axis is cut into ``g`` cells of widths
  ``floor(D/g)`` or ``ceil(D/g)``, math §8.3) or *categorical* (point constraints; one cell per
  value).
- Grid set (math §8.2.1): one 1-D grid per numerical attribute and one 2-D grid per pair of
  attributes, 1-D grids first, then the pairs in lexicographic order. Categorical attributes get
  no 1-D grid ([C]'s experiment mode; the 2-D grids resolve them exactly) except when the
  schema has a single attribute.
- Nesting (math §8.3): every 2-D grid containing attribute ``a`` uses one partition of ``a`` with
  ``g2(a)`` cells; the 1-D grid of ``a`` refines it with ``g1(a) >= g2(a)`` cells, each 2-D
  interval an exact union of consecutive 1-D cells. We use the [R] rule
  (:func:`refine_widths`) instead of [C]'s bin packing; both give that guarantee.
- Cell id in a 2-D grid over (a, b), a < b: ``i_a * g_b + i_b`` (row-major; [C] uses the
  column-major ``i_a + g_a * i_b``, an internal convention that changes no result).
- Users are split once into m groups whose sizes differ by at most one (math §8.2.2 [R]; [C]
  drops the remainder).

:class:`FelipLayout` also precomputes the index arrays that the estimation step
(:mod:`longldp.apps.felip.estimate`) uses to run consistency and the response matrices on all
grids at once.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.data import Table

OWNER = "felip"
NUMERICAL = "numerical"
CATEGORICAL = "categorical"
KINDS = (NUMERICAL, CATEGORICAL)

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


# ---------------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Attribute:
    """One attribute of a FELIP dataset: a name, a domain ``[0, domain)`` and a kind.

    Parameters
    ----------
    name : str
    domain : int
        Number of values D >= 2.
    kind : {"numerical", "categorical"}, default="numerical"
        Numerical attributes take range constraints and are cut into cells; categorical ones
        take point constraints and keep one cell per value (math §8.1, §8.3).
    """

    name: str
    domain: int
    kind: str = NUMERICAL

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(
                f"{OWNER}: attribute 'name' must be a non-empty string; got {self.name!r}."
            )
        check.integer(OWNER, f"domain of {self.name!r}", self.domain, minimum=2)
        object.__setattr__(self, "domain", int(self.domain))
        object.__setattr__(
            self, "kind", check.choice(OWNER, f"kind of {self.name!r}", self.kind, KINDS)
        )


@dataclass(frozen=True)
class FelipSchema:
    """The attributes FELIP collects, in order (attribute index = position).

    Parameters
    ----------
    attributes : sequence of Attribute
        At least one, with distinct names.
    """

    attributes: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        attrs = tuple(self.attributes)
        if not attrs or not all(isinstance(a, Attribute) for a in attrs):
            raise ValueError(
                f"{OWNER}: 'attributes' must be a non-empty sequence of Attribute; got {attrs!r}."
            )
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise ValueError(f"{OWNER}: attribute names must be distinct; got {names}.")
        object.__setattr__(self, "attributes", attrs)

    @classmethod
    def from_table(cls, table: Table, kinds: Mapping[str, str] | None = None) -> FelipSchema:
        """Schema of every column of ``table``; numerical unless ``kinds`` says otherwise."""
        kinds = dict(kinds or {})
        unknown = sorted(set(kinds) - set(table.attributes))
        if unknown:
            raise ValueError(f"{OWNER}: 'kinds' names unknown attributes {unknown}.")
        return cls(
            tuple(
                Attribute(a, table.domains[a].size, kinds.get(a, NUMERICAL))
                for a in table.attributes
            )
        )

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.attributes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def domains(self) -> tuple[int, ...]:
        return tuple(a.domain for a in self.attributes)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(a.kind for a in self.attributes)

    def index(self, attribute: int | str) -> int:
        """Position of an attribute given by name or index; ``ValueError`` if unknown."""
        if isinstance(attribute, str):
            if attribute in self.names:
                return self.names.index(attribute)
        elif (
            isinstance(attribute, (int, np.integer))
            and not isinstance(attribute, bool)
            and 0 <= int(attribute) < self.d
        ):
            return int(attribute)
        raise ValueError(
            f"{OWNER}: query attribute {attribute!r} is unknown; the attributes are "
            f"{list(self.names)} (or indices 0..{self.d - 1})."
        )

    def matrix(self, table: Table) -> NDArray[np.int32]:
        """The (n, d) int32 code matrix of ``table``'s columns in schema order (domains checked)."""
        if not isinstance(table, Table):
            raise ValueError(f"{OWNER}: expected a Table; got {type(table).__name__}.")
        missing = [a for a in self.names if a not in table.attributes]
        if missing:
            raise ValueError(f"{OWNER}: the table lacks the schema's attributes {missing}.")
        for a in self.attributes:
            if table.domains[a.name].size != a.domain:
                raise ValueError(
                    f"{OWNER}: attribute {a.name!r} has domain {table.domains[a.name].size} in "
                    f"the table but {a.domain} in the schema."
                )
        cols = [np.asarray(table[a], dtype=np.int32) for a in self.names]
        return np.stack(cols, axis=1) if cols else np.zeros((table.n, 0), np.int32)

    def as_json(self) -> list[dict[str, Any]]:
        return [{"name": a.name, "domain": a.domain, "kind": a.kind} for a in self.attributes]

    @classmethod
    def from_json(cls, rows: Sequence[Mapping[str, Any]]) -> FelipSchema:
        return cls(tuple(Attribute(r["name"], int(r["domain"]), r["kind"]) for r in rows))

    def __str__(self) -> str:
        return json.dumps(self.as_json())


# ---------------------------------------------------------------------------------- axes


def cell_widths(domain: int, cells: int) -> IntArray:
    """Widths of ``cells`` consecutive cells covering ``[0, domain)`` (math §8.3, [C]).

    [C] builds them greedily (next width = remaining domain // remaining cells). With
    D = q·g + r that gives g − r widths q followed by r widths q + 1, computed here directly.
    Example: D = 50, g = 15 → ten cells of width 3, then five of width 4.
    """
    domain = check.integer(OWNER, "domain", domain, minimum=1)
    cells = check.integer(OWNER, "cells", cells, minimum=1, maximum=domain)
    q, r = divmod(domain, cells)
    return np.concatenate([np.full(cells - r, q), np.full(r, q + 1)]).astype(np.int64)


def refine_widths(coarse: ArrayLike, cells: int) -> tuple[IntArray, IntArray]:
    """Cut each coarse cell into sub-cells so that there are ``cells`` in all (math §8.3 [R]).

    Coarse cell j (width w_j) gets k_j sub-cells, 1 <= k_j <= w_j, Σ k_j = ``cells``, in
    proportion to w_j: k_j starts at clip(floor(s_j), 1, w_j) with s_j = cells·w_j/D, then the
    largest remainders s_j − k_j gain (or the smallest lose) one until the sum is right. Each
    coarse cell is then split by :func:`cell_widths`, so every coarse interval is an exact union
    of consecutive fine cells.

    Returns
    -------
    widths : numpy.ndarray of int64, shape (cells,)
    parent : numpy.ndarray of int64, shape (cells,)
        The coarse cell containing each fine cell.
    """
    w = np.asarray(coarse, dtype=np.int64)
    domain = int(w.sum())
    cells = check.integer(OWNER, "cells", cells, minimum=w.size, maximum=domain)
    share = cells * w / domain
    k = np.clip(np.floor(share).astype(np.int64), 1, w)
    while k.sum() < cells:
        k[np.argmax(np.where(k < w, share - k, -np.inf))] += 1
    while k.sum() > cells:
        k[np.argmin(np.where(k > 1, share - k, np.inf))] -= 1
    widths = np.concatenate([cell_widths(int(wj), int(kj)) for wj, kj in zip(w, k, strict=True)])
    return widths, np.repeat(np.arange(w.size), k)


@dataclass(frozen=True, eq=False)
class Axis:
    """A partition of ``[0, domain)`` into consecutive cells of the given widths."""

    widths: tuple[int, ...]
    edges: IntArray = field(init=False, repr=False)
    lut: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        w = np.asarray(self.widths, dtype=np.int64)
        if w.ndim != 1 or w.size == 0 or np.any(w < 1):
            raise ValueError(f"{OWNER}: axis widths must be positive integers; got {self.widths}.")
        object.__setattr__(self, "widths", tuple(int(x) for x in w))
        object.__setattr__(self, "edges", np.concatenate([[0], np.cumsum(w)]))
        object.__setattr__(self, "lut", np.repeat(np.arange(w.size), w))

    @property
    def size(self) -> int:
        """Number of cells g."""
        return len(self.widths)

    @property
    def domain(self) -> int:
        return int(self.edges[-1])

    def cell_of(self, values: ArrayLike) -> IntArray:
        """Cell of each value (a table lookup; [C] scans prefix sums)."""
        return self.lut[np.asarray(values)]

    def overlap(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray:
        """Fraction of each cell inside ``[lo, hi]`` (inclusive), shape (len(lo), g).

        Values are spread uniformly within a cell, so a cell covering w values of which o lie in
        the range contributes o/w of its count (math §8.9; [C] divides by w − 1, a bug).
        """
        lo = np.asarray(lo, dtype=np.int64)[:, None]
        hi = np.asarray(hi, dtype=np.int64)[:, None] + 1
        inside = np.minimum(hi, self.edges[1:]) - np.maximum(lo, self.edges[:-1])
        return np.clip(inside, 0, None) / np.asarray(self.widths, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Grid:
    """A 1-D or 2-D grid: the attributes it covers (increasing) and one axis per attribute."""

    index: int
    attributes: tuple[int, ...]
    axes: tuple[Axis, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(ax.size for ax in self.axes)

    @property
    def k(self) -> int:
        """Number of cells: the domain of the grid's frequency oracle."""
        return int(np.prod(self.shape))

    def cell_of(self, columns: Sequence[ArrayLike]) -> IntArray:
        """Cell ids of users whose values on the grid's attributes are ``columns`` (math §8.6)."""
        idx = [ax.cell_of(c) for ax, c in zip(self.axes, columns, strict=True)]
        return idx[0] if len(idx) == 1 else idx[0] * self.shape[1] + idx[1]


def balanced_groups(n: int, m: int, rng: Any) -> IntArray:
    """The group (grid) of each of n users: a uniform permutation dealt round-robin into m.

    Group j gets ⌊n/m⌋ or ⌊n/m⌋ + 1 users, the first n mod m groups the extra one; nobody is
    dropped (math §8.2.2 [R]). Drawn once and kept for every timestamp (math §8.11).
    """
    n = check.integer(OWNER, "n", n, minimum=1)
    m = check.integer(OWNER, "m", m, minimum=1, maximum=n)
    out = np.empty(n, dtype=np.int64)
    out[np.random.default_rng(rng).permutation(n)] = np.arange(n, dtype=np.int64) % m
    return out


def group_sizes(n: int, m: int) -> IntArray:
    """Sizes of the groups of :func:`balanced_groups`."""
    return (n - np.arange(m) + m - 1) // m


# ---------------------------------------------------------------------------------- layout


@dataclass(frozen=True, eq=False)
class FelipLayout:
    """The grid set of one FELIP collection, built from the final sizes g1 and g2.

    Parameters
    ----------
    schema : FelipSchema
    g1 : sequence of int
        Cells of each attribute's 1-D grid (0: no 1-D grid, categorical attributes).
    g2 : sequence of int
        Cells of each attribute's axis in the 2-D grids (categorical: its domain).

    Attributes
    ----------
    fine, coarse : tuple of Axis
        Per attribute: the finest partition (1-D grid, or one cell per value when the attribute
        has no 1-D grid) and the 2-D partition it refines.
    parent : tuple of numpy.ndarray
        Per attribute: the coarse cell of each fine cell.
    grids : tuple of Grid
        1-D grids (attribute order), then 2-D grids (pairs in lexicographic order).
    offsets : numpy.ndarray, shape (m + 1,)
        Position of each grid's cells in the flat vector of all cell counts.
    """

    schema: FelipSchema
    g1: tuple[int, ...]
    g2: tuple[int, ...]
    fine: tuple[Axis, ...] = field(init=False, repr=False)
    coarse: tuple[Axis, ...] = field(init=False, repr=False)
    parent: tuple[IntArray, ...] = field(init=False, repr=False)
    grids: tuple[Grid, ...] = field(init=False, repr=False)
    offsets: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        s = self.schema
        g1 = tuple(int(x) for x in self.g1)
        g2 = tuple(int(x) for x in self.g2)
        if len(g1) != s.d or len(g2) != s.d:
            raise ValueError(f"{OWNER}: 'g1' and 'g2' need one size per attribute ({s.d}).")
        fine, coarse, parent = [], [], []
        for a, (attr, n1, n2) in enumerate(zip(s.attributes, g1, g2, strict=True)):
            if attr.kind == CATEGORICAL and n2 != attr.domain:
                raise ValueError(f"{OWNER}: categorical {attr.name!r} needs g2 = its domain.")
            has_1d = n1 > 0
            if has_1d != (attr.kind == NUMERICAL or s.d == 1):
                raise ValueError(f"{OWNER}: attribute {a} has a wrong 1-D grid size {n1}.")
            c = Axis(tuple(cell_widths(attr.domain, n2)))
            if has_1d:
                w, par = refine_widths(c.widths, max(n1, n2))
            else:
                w, par = np.ones(attr.domain, dtype=np.int64), c.lut
            coarse.append(c)
            fine.append(Axis(tuple(w)))
            parent.append(par)
        grids: list[Grid] = []
        for a in range(s.d):
            if g1[a] > 0:
                grids.append(Grid(len(grids), (a,), (fine[a],)))
        for a, b in itertools.combinations(range(s.d), 2):
            grids.append(Grid(len(grids), (a, b), (coarse[a], coarse[b])))
        offsets = np.concatenate([[0], np.cumsum([gr.k for gr in grids])]).astype(np.int64)
        for name, value in (
            ("g1", tuple(fine[a].size if g1[a] else 0 for a in range(s.d))),
            ("g2", g2),
            ("fine", tuple(fine)),
            ("coarse", tuple(coarse)),
            ("parent", tuple(parent)),
            ("grids", tuple(grids)),
            ("offsets", offsets),
        ):
            object.__setattr__(self, name, value)

    @property
    def m(self) -> int:
        """Number of grids."""
        return len(self.grids)

    @property
    def total_cells(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def one_d(self) -> tuple[int, ...]:
        """Index of each attribute's 1-D grid, or −1."""
        out = [-1] * self.schema.d
        for g in self.grids:
            if len(g.attributes) == 1:
                out[g.attributes[0]] = g.index
        return tuple(out)

    @cached_property
    def pair_grid(self) -> dict[tuple[int, int], int]:
        """Index of the 2-D grid of each attribute pair (a, b), a < b."""
        return {g.attributes: g.index for g in self.grids if len(g.attributes) == 2}

    def split(self, flat: ArrayLike) -> list[FloatArray]:
        """Per-grid views of a flat vector of cell values."""
        arr = np.asarray(flat)
        return [arr[..., self.offsets[i] : self.offsets[i + 1]] for i in range(self.m)]

    def cells(self, matrix: ArrayLike) -> NDArray[np.int32]:
        """Cell of every row under every grid, shape (n, m): what each user would report."""
        x = np.asarray(matrix)
        out = np.empty((x.shape[0], self.m), dtype=np.int32)
        d = self.schema.d
        fine = [self.fine[a].cell_of(x[:, a]) if self.g1[a] else None for a in range(d)]
        coarse = [self.coarse[a].cell_of(x[:, a]) for a in range(d)] if d > 1 else []
        for g in self.grids:
            if len(g.attributes) == 1:
                out[:, g.index] = fine[g.attributes[0]]
            else:
                a, b = g.attributes
                out[:, g.index] = coarse[a] * g.shape[1] + coarse[b]
        return out

    # ------------------------------------------------------------ index arrays for estimation
    @cached_property
    def segment_id(self) -> IntArray:
        """Grid of every entry of the flat cell vector."""
        return np.repeat(np.arange(self.m), np.diff(self.offsets))

    @cached_property
    def consistency_index(self) -> dict[str, IntArray]:
        """Index arrays of the consistency step (math §8.7.2) for every attribute at once.

        A *group* is (attribute a, grid G containing a, interval v of a's 2-D partition): the
        cells of G whose a-interval lies in I_v. Arrays: ``cells``/``group`` list every
        (cell, group) membership (a 2-D cell belongs to one group per axis); per group,
        ``slab`` (global id of (a, v)), ``grid`` and ``count`` (c_G(v), the cells in it).
        """
        cells, groups, slab, grid, count = [], [], [], [], []
        slab_base = np.concatenate([[0], np.cumsum(self.g2)])
        n_groups = 0
        for g in self.grids:
            base = self.offsets[g.index]
            for pos, a in enumerate(g.attributes):
                ga = self.g2[a]
                if len(g.attributes) == 1:
                    v = self.parent[a]
                    members = np.bincount(v, minlength=ga)
                else:
                    gb = g.shape[1 - pos]
                    ii, jj = np.divmod(np.arange(g.k), g.shape[1])
                    v = ii if pos == 0 else jj
                    members = np.full(ga, gb)
                cells.append(base + np.arange(g.k))
                groups.append(n_groups + v)
                slab.append(slab_base[a] + np.arange(ga))
                grid.append(np.full(ga, g.index))
                count.append(members)
                n_groups += ga
        return {
            "cells": np.concatenate(cells),
            "group": np.concatenate(groups),
            "slab": np.concatenate(slab),
            "grid": np.concatenate(grid),
            "count": np.concatenate(count).astype(np.float64),
            "n_slabs": np.array(slab_base[-1]),
            "slab_attribute": np.repeat(np.arange(self.schema.d), self.g2),
        }

    @cached_property
    def response_index(self) -> dict[str, Any]:
        """Index arrays of the response matrices of every 2-D grid at once (math §8.8).

        A 2-D grid over (a, b) gets a matrix over the *fine* cells of a and b (1-D cells, or
        values for attributes without a 1-D grid). Every scaling step of the weighted update
        multiplies whole fine rectangles, so a value-resolution matrix is constant (per value)
        inside each rectangle and this matrix is exact, not an approximation.
        """
        entry_grid, rows, cols, blocks, init = [], [], [], [], []
        row_target, col_target, row_has, col_has, starts = [], [], [], [], []
        n_rows = n_cols = 0
        shapes: dict[int, tuple[int, int]] = {}
        pos = 0
        for g in self.grids:
            if len(g.attributes) != 2:
                continue
            a, b = g.attributes
            fa, fb = self.fine[a], self.fine[b]
            ii, jj = np.divmod(np.arange(fa.size * fb.size), fb.size)
            entry_grid.append(np.full(ii.size, g.index))
            rows.append(n_rows + ii)
            cols.append(n_cols + jj)
            blocks.append(
                self.offsets[g.index] + self.parent[a][ii] * g.shape[1] + self.parent[b][jj]
            )
            wa = np.asarray(fa.widths, dtype=np.float64)
            wb = np.asarray(fb.widths, dtype=np.float64)
            init.append((wa[ii] * wb[jj]) / (fa.domain * fb.domain))
            for fx, attr, tgt, has in ((fa, a, row_target, row_has), (fb, b, col_target, col_has)):
                one = self.one_d[attr]
                tgt.append(
                    self.offsets[one] + np.arange(fx.size)
                    if one >= 0
                    else np.zeros(fx.size, np.int64)
                )
                has.append(np.full(fx.size, one >= 0))
            starts.append(pos)
            shapes[g.index] = (fa.size, fb.size)
            pos += ii.size
            n_rows += fa.size
            n_cols += fb.size
        if not entry_grid:
            empty = np.zeros(0, dtype=np.int64)
            return {"grid": empty, "shapes": {}, "starts": {}}
        two_d = [g.index for g in self.grids if len(g.attributes) == 2]
        return {
            "grid": np.concatenate(entry_grid),
            "row": np.concatenate(rows),
            "col": np.concatenate(cols),
            "block": np.concatenate(blocks),
            "init": np.concatenate(init),
            "row_target": np.concatenate(row_target),
            "col_target": np.concatenate(col_target),
            "row_has": np.concatenate(row_has),
            "col_has": np.concatenate(col_has),
            "shapes": shapes,
            "starts": dict(zip(two_d, starts, strict=True)),
        }

    @cached_property
    def consistency_operators(self) -> dict[str, Any]:
        """Sparse 0/1 matrices of :attr:`consistency_index` (cells × groups, groups × slabs,
        slabs × attributes) and their transposes, for batched sums."""
        ci = self.consistency_index
        n_groups, n_slabs = ci["count"].size, int(ci["n_slabs"])
        P = _indicator(ci["cells"], ci["group"], (self.total_cells, n_groups))
        Q = _indicator(np.arange(n_groups), ci["slab"], (n_groups, n_slabs))
        A = _indicator(np.arange(n_slabs), ci["slab_attribute"], (n_slabs, self.schema.d))
        return {
            "P": P,
            "PT": P.T.tocsr(),
            "Q": Q,
            "QT": Q.T.tocsr(),
            "A": A,
            "AT": A.T.tocsr(),
        }

    @cached_property
    def response_operators(self) -> dict[str, Any]:
        """Sparse 0/1 matrices summing response-matrix entries by 1-D row, 1-D column, 2-D
        cell and grid (shape groups × entries)."""
        ri = self.response_index
        e = ri["grid"].size
        if e == 0:
            return {}
        idx = np.arange(e)
        return {
            "row": _indicator(ri["row"], idx, (int(ri["row"].max()) + 1, e)),
            "col": _indicator(ri["col"], idx, (int(ri["col"].max()) + 1, e)),
            "block": _indicator(ri["block"], idx, (self.total_cells, e)),
            "grid": _indicator(ri["grid"], idx, (self.m, e)),
        }


def _indicator(rows: ArrayLike, cols: ArrayLike, shape: tuple[int, int]) -> sp.csr_array:
    r = np.asarray(rows)
    return sp.csr_array((np.ones(r.size), (r, np.asarray(cols))), shape=shape)


__all__ = [
    "CATEGORICAL",
    "KINDS",
    "NUMERICAL",
    "Attribute",
    "Axis",
    "FelipLayout",
    "FelipSchema",
    "Grid",
    "balanced_groups",
    "cell_widths",
    "group_sizes",
    "refine_widths",
]
