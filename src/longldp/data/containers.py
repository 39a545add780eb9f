"""Containers of the data layer: `Domain`, single-valued `Table`, set-valued `SetData`.

Data model (design §3): every value is an integer code in ``[0, k)`` of a `Domain` of size ``k``
(with optional human-readable labels). A single-valued dataset with several attributes is a
`Table` (one code array per attribute, all of length ``n``). A set-valued dataset is a CSR pair
``(indptr[n + 1], items[nnz])``: user ``u`` holds ``items[indptr[u]:indptr[u + 1]]``, stored
sorted and without duplicates.

Codes are held as ``numpy.int32`` (`CODE_DTYPE`) and CSR row pointers as ``numpy.int64``
(`INDPTR_DTYPE`); the arrays held by a container are read-only views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

CODE_DTYPE = np.dtype(np.int32)
INDPTR_DTYPE = np.dtype(np.int64)
_MAX_CODE = int(np.iinfo(np.int32).max)

__all__ = ["CODE_DTYPE", "INDPTR_DTYPE", "Domain", "SetData", "Table"]


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-D array (sort-based; faster than ``np.unique`` here)."""
    a = np.sort(a)
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def as_codes(values: object, k: int, what: str) -> np.ndarray:
    """Check that ``values`` is a 1-D integer array with entries in ``[0, k)``; return int32.

    Parameters
    ----------
    values : array_like
        Candidate codes.
    k : int
        Domain size.
    what : str
        Name used in error messages.

    Returns
    -------
    numpy.ndarray
        The codes as a 1-D ``int32`` array (a copy only when a conversion is needed).

    Raises
    ------
    ValueError
        If the array is not 1-D, not integer-typed, or has a code outside ``[0, k)``.
    """
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array of codes, got shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=CODE_DTYPE)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what}: expected integer codes, got dtype {a.dtype}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= k:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{what}: code {bad} outside the domain [0, {k})")
    return a.astype(CODE_DTYPE, copy=False)


def _first_unsorted(indptr: np.ndarray, items: np.ndarray) -> int:
    """Position ``j`` of the first item not greater than its predecessor in the same row, or -1."""
    if items.size < 2:
        return -1
    ok = np.diff(items) > 0
    # a step across a row boundary may go down; inside a row it must go up
    ends = indptr[1:-1]
    ends = ends[(ends > 0) & (ends < items.size)]
    ok[ends - 1] = True
    if ok.all():
        return -1
    return int(np.argmin(ok)) + 1


@dataclass(frozen=True)
class Domain:
    """A finite domain ``{0, ..., size - 1}`` with optional labels.

    Parameters
    ----------
    size : int
        Number of values ``k`` (non-negative).
    labels : sequence of str, optional
        ``labels[v]`` names code ``v``; ``len(labels) == size``. Stored as a tuple.

    Examples
    --------
    >>> Domain(3).label(2)
    '2'
    >>> Domain.of(["no", "yes"]).size
    2
    """

    size: int
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int | np.integer):
            raise ValueError(f"Domain size must be an integer, got {self.size!r}")
        if not 0 <= int(self.size) <= _MAX_CODE:
            raise ValueError(f"Domain size must be in [0, {_MAX_CODE}], got {self.size}")
        object.__setattr__(self, "size", int(self.size))
        if self.labels is not None:
            labels = tuple(str(x) for x in self.labels)
            if len(labels) != self.size:
                raise ValueError(f"Domain has size {self.size} but {len(labels)} labels were given")
            object.__setattr__(self, "labels", labels)

    @classmethod
    def of(cls, labels: Sequence[str]) -> Domain:
        """Domain whose size is the number of ``labels``."""
        return cls(len(labels), tuple(labels))

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        if self.labels is None:
            return f"Domain(size={self.size})"
        shown = ", ".join(repr(x) for x in self.labels[:6])
        more = ", ..." if self.size > 6 else ""
        return f"Domain(size={self.size}, labels=({shown}{more}))"

    def label(self, code: int) -> str:
        """Label of ``code`` (its decimal string when the domain has no labels)."""
        if not 0 <= int(code) < self.size:
            raise ValueError(f"code {code} outside the domain [0, {self.size})")
        return str(int(code)) if self.labels is None else self.labels[int(code)]

    def code(self, label: str) -> int:
        """Code of ``label`` (first match); ValueError if absent."""
        names = self.labels if self.labels is not None else tuple(map(str, range(self.size)))
        try:
            return names.index(str(label))
        except ValueError:
            raise ValueError(f"label {label!r} is not in the domain") from None


@dataclass(frozen=True, eq=False)
class Table:
    """Single-valued multi-attribute data: one code array per attribute.

    Parameters
    ----------
    columns : mapping of str to array_like
        Attribute name -> integer codes (1-D, all of the same length ``n``).
    domains : mapping of str to Domain
        Attribute name -> its domain; same keys as ``columns``.
    name : str, optional
        Dataset name.

    Notes
    -----
    Row ``u`` of the table is user ``u``. Attribute order is the order of ``columns``.
    """

    columns: Mapping[str, np.ndarray]
    domains: Mapping[str, Domain]
    name: str = ""
    _n: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.columns, Mapping) or not isinstance(self.domains, Mapping):
            raise ValueError("Table needs a mapping of columns and a mapping of domains")
        if set(self.columns) != set(self.domains):
            raise ValueError(
                "columns and domains name different attributes: "
                f"{sorted(set(self.columns) ^ set(self.domains))}"
            )
        cols: dict[str, np.ndarray] = {}
        doms: dict[str, Domain] = {}
        n: int | None = None
        for attr, values in self.columns.items():
            dom = self.domains[attr]
            if not isinstance(dom, Domain):
                raise ValueError(f"domain of attribute {attr!r} is not a Domain: {dom!r}")
            a = as_codes(values, dom.size, f"attribute {attr!r}")
            if n is None:
                n = a.size
            elif a.size != n:
                raise ValueError(
                    f"attribute {attr!r} has {a.size} rows, expected {n} like the others"
                )
            cols[attr] = _readonly(a)
            doms[attr] = dom
        object.__setattr__(self, "columns", MappingProxyType(cols))
        object.__setattr__(self, "domains", MappingProxyType(doms))
        object.__setattr__(self, "_n", 0 if n is None else n)

    @property
    def n(self) -> int:
        """Number of rows (users)."""
        return self._n

    @property
    def attributes(self) -> tuple[str, ...]:
        """Attribute names in order."""
        return tuple(self.columns)

    @property
    def domain_sizes(self) -> tuple[int, ...]:
        """Domain size of each attribute, in attribute order."""
        return tuple(d.size for d in self.domains.values())

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        attrs = ", ".join(f"{a}:{d.size}" for a, d in list(self.domains.items())[:8])
        more = ", ..." if len(self.domains) > 8 else ""
        return f"Table(name={self.name!r}, n={self._n}, attributes=[{attrs}{more}])"

    def __getitem__(self, attribute: str) -> np.ndarray:
        try:
            return self.columns[attribute]
        except KeyError:
            raise KeyError(
                f"no attribute {attribute!r}; attributes are {list(self.columns)}"
            ) from None

    def select(self, attributes: Iterable[str]) -> Table:
        """Table restricted to ``attributes`` (in the given order)."""
        attrs = list(attributes)
        missing = [a for a in attrs if a not in self.columns]
        if missing:
            raise ValueError(f"unknown attributes {missing}; attributes are {list(self.columns)}")
        return Table(
            {a: self.columns[a] for a in attrs}, {a: self.domains[a] for a in attrs}, self.name
        )

    def take(self, rows: np.ndarray) -> Table:
        """Table of the given rows (an index array: subset, permutation, or resample)."""
        idx = np.asarray(rows)
        return Table({a: c[idx] for a, c in self.columns.items()}, dict(self.domains), self.name)

    def to_matrix(self) -> np.ndarray:
        """Codes as an ``(n, d)`` int32 matrix (columns in attribute order)."""
        if not self.columns:
            return np.zeros((self._n, 0), dtype=CODE_DTYPE)
        return np.stack(list(self.columns.values()), axis=1)

    def histogram(self, attribute: str) -> np.ndarray:
        """Count of each code of ``attribute`` (length = its domain size)."""
        return np.bincount(self[attribute], minlength=self.domains[attribute].size)


@dataclass(frozen=True, eq=False)
class SetData:
    """Set-valued data in CSR form: user ``u`` holds ``items[indptr[u]:indptr[u+1]]``.

    Parameters
    ----------
    indptr : array_like of int, shape (n + 1,)
        Row pointers: ``indptr[0] == 0``, non-decreasing, ``indptr[-1] == len(items)``.
    items : array_like of int, shape (nnz,)
        Item codes in ``[0, domain.size)``, strictly increasing within each row.
    domain : Domain
        The item domain.
    name : str, optional
        Dataset name.

    Notes
    -----
    The constructor validates but does not reorder; use `SetData.from_csr` (which sorts and
    removes duplicates within rows) or `SetData.from_lists` for unordered input.
    """

    indptr: np.ndarray
    items: np.ndarray
    domain: Domain
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.domain, Domain):
            raise ValueError(f"domain must be a Domain, got {self.domain!r}")
        indptr = np.asarray(self.indptr)
        if indptr.ndim != 1 or indptr.size < 1:
            raise ValueError("indptr must be a 1-D array of length n + 1 >= 1")
        if indptr.dtype == bool or not np.issubdtype(indptr.dtype, np.integer):
            raise ValueError(f"indptr must be integer, got dtype {indptr.dtype}")
        indptr = indptr.astype(INDPTR_DTYPE, copy=False)
        items = as_codes(self.items, self.domain.size, "items")
        if indptr[0] != 0 or indptr[-1] != items.size:
            raise ValueError(
                f"indptr must start at 0 and end at len(items)={items.size}, "
                f"got {indptr[0]} and {indptr[-1]}"
            )
        lengths = np.diff(indptr)
        if (lengths < 0).any():
            raise ValueError(f"indptr decreases at row {int(np.argmax(lengths < 0))}")
        bad = _first_unsorted(indptr, items)
        if bad >= 0:
            row = int(np.searchsorted(indptr, bad, side="right")) - 1
            raise ValueError(
                f"row {row}: items must be strictly increasing (sorted, no duplicates); "
                "use SetData.from_csr to canonicalize"
            )
        object.__setattr__(self, "indptr", _readonly(indptr))
        object.__setattr__(self, "items", _readonly(items))

    @classmethod
    def from_csr(
        cls,
        indptr: object,
        items: object,
        domain: Domain | int,
        name: str = "",
    ) -> SetData:
        """Build from a CSR pair whose rows may be unsorted or hold duplicates.

        Rows are sorted and duplicates removed (vectorised: one sort of ``(row, item)``).
        ``domain`` may be a `Domain` or an int size.
        """
        dom = domain if isinstance(domain, Domain) else Domain(int(domain))
        ip = np.asarray(indptr)
        if ip.ndim != 1 or ip.size < 1 or not np.issubdtype(ip.dtype, np.integer):
            raise ValueError("indptr must be a 1-D integer array of length n + 1 >= 1")
        ip = ip.astype(INDPTR_DTYPE)
        it = as_codes(items, dom.size, "items")
        lengths = np.diff(ip)
        if ip[0] != 0 or ip[-1] != it.size or (lengths < 0).any():
            raise ValueError("indptr must start at 0, be non-decreasing and end at len(items)")
        if _first_unsorted(ip, it) < 0:
            return cls(ip, it, dom, name)
        n = lengths.size
        k = max(dom.size, 1)
        rows = np.repeat(np.arange(n, dtype=INDPTR_DTYPE), lengths)
        keys = sorted_unique(rows * k + it)
        new_rows = keys // k
        new_items = (keys % k).astype(CODE_DTYPE)
        new_ip = np.zeros(n + 1, dtype=INDPTR_DTYPE)
        np.cumsum(np.bincount(new_rows, minlength=n), out=new_ip[1:])
        return cls(new_ip, new_items, dom, name)

    @classmethod
    def from_lists(
        cls, sets: Iterable[Iterable[int]], domain: Domain | int | None = None, name: str = ""
    ) -> SetData:
        """Build from an iterable of item collections (domain size defaults to max + 1)."""
        rows = [np.asarray(list(s), dtype=np.int64) for s in sets]
        lengths = np.fromiter((r.size for r in rows), dtype=INDPTR_DTYPE, count=len(rows))
        indptr = np.zeros(len(rows) + 1, dtype=INDPTR_DTYPE)
        np.cumsum(lengths, out=indptr[1:])
        items = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        if domain is None:
            domain = int(items.max()) + 1 if items.size else 0
        return cls.from_csr(indptr, items, domain, name)

    @property
    def n(self) -> int:
        """Number of users (rows)."""
        return int(self.indptr.size - 1)

    @property
    def nnz(self) -> int:
        """Total number of items over all users."""
        return int(self.items.size)

    @property
    def lengths(self) -> np.ndarray:
        """Set size of every user, shape ``(n,)``."""
        return np.diff(self.indptr)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"SetData(name={self.name!r}, n={self.n}, nnz={self.nnz}, domain={self.domain!r})"

    def row(self, u: int) -> np.ndarray:
        """Items of user ``u``."""
        if not -self.n <= u < self.n:
            raise IndexError(f"row {u} out of range for {self.n} users")
        u = u % self.n
        return self.items[self.indptr[u] : self.indptr[u + 1]]

    def item_counts(self) -> np.ndarray:
        """Number of users holding each item (length = domain size)."""
        return np.bincount(self.items, minlength=self.domain.size)

    def take(self, rows: np.ndarray) -> SetData:
        """Sets of the given users, in the given order (vectorised CSR gather)."""
        idx = np.asarray(rows)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < -self.n or idx.max() >= self.n):
            raise ValueError(f"row index out of range for {self.n} users")
        idx = idx % max(self.n, 1)
        lengths = self.lengths[idx]
        indptr = np.zeros(idx.size + 1, dtype=INDPTR_DTYPE)
        np.cumsum(lengths, out=indptr[1:])
        pos = np.arange(indptr[-1], dtype=INDPTR_DTYPE)
        pos += np.repeat(self.indptr[:-1][idx] - indptr[:-1], lengths)
        return SetData(indptr, self.items[pos], self.domain, self.name)

    def to_lists(self) -> list[list[int]]:
        """The sets as Python lists (for small data and tests)."""
        if self.n == 0:
            return []
        return [a.tolist() for a in np.split(self.items, self.indptr[1:-1])]
