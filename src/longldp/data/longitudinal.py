"""Longitudinal interpolation of a one-shot dataset over ``tau`` timestamps.

math §6.1 and the seeds ([000], [002]): timestamp 0 is the original data; every later timestamp
is an independent, uniformly random permutation of the users' values. The domain, the value
histogram and (for set-valued data) the set-size distribution are identical at every timestamp;
only who holds what changes. Whole values move together: a user's full set for set-valued data,
a user's full row for multi-attribute tables.

Representation: a permutation matrix ``perm`` of shape ``(tau, n)`` with ``perm[0] = arange(n)``
and ``perm[t, u]`` = the original user whose value user ``u`` holds at timestamp ``t``; so the
data at ``t`` is ``data.take(perm[t])``. It is stored as int32 when ``n < 2**31``: 60 MB for
10**6 users x 15 timestamps, independent of the set sizes. Set-valued data and tables are
returned lazily (`LongitudinalSets`, `LongitudinalTable`): one timestamp is materialised on
demand; a 1-D array of codes is returned materialised as ``values[tau, n]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

import numpy as np

from longldp.data.containers import SetData, Table

D = TypeVar("D", Table, SetData)

__all__ = [
    "LongitudinalSets",
    "LongitudinalTable",
    "permutations",
    "to_longitudinal",
]


def _check_tau(tau: object) -> int:
    if isinstance(tau, bool) or not isinstance(tau, int | np.integer) or int(tau) < 1:
        raise ValueError(f"tau must be an integer >= 1 (number of timestamps), got {tau!r}")
    return int(tau)


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def permutations(n: int, tau: int, rng: np.random.Generator) -> np.ndarray:
    """Identity followed by ``tau - 1`` independent uniform permutations of ``range(n)``.

    Parameters
    ----------
    n : int
        Number of users.
    tau : int
        Number of timestamps (>= 1).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        Shape ``(tau, n)``, dtype int32 if ``n < 2**31`` else int64; row 0 is ``arange(n)``.
    """
    tau = _check_tau(tau)
    rng = _check_rng(rng)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or int(n) < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    dtype = np.int32 if n < 2**31 else np.int64
    perm = np.empty((tau, int(n)), dtype=dtype)
    perm[:] = np.arange(n, dtype=dtype)
    if tau > 1:
        rng.permuted(perm[1:], axis=1, out=perm[1:])
    perm.flags.writeable = False
    return perm


@dataclass(frozen=True, eq=False)
class _Permuted(Generic[D]):
    """``base`` over ``tau`` timestamps, its users permuted by ``perm[t]`` at every ``t >= 1``.

    Attributes
    ----------
    base : Table or SetData
        The original data (timestamp 0).
    perm : numpy.ndarray
        ``(tau, n)`` permutation matrix (see module docstring).
    """

    base: D
    perm: np.ndarray

    @property
    def tau(self) -> int:
        """Number of timestamps."""
        return int(self.perm.shape[0])

    @property
    def n(self) -> int:
        """Number of users."""
        return self.base.n

    def __len__(self) -> int:
        return self.tau

    def at(self, t: int) -> D:
        """The data at timestamp ``t`` (materialised: a row gather of the base)."""
        if t == 0 or (t < 0 and t + self.tau == 0):
            return self.base
        return self.base.take(self.perm[t])

    def __iter__(self) -> Iterator[D]:
        for t in range(self.tau):
            yield self.at(t)


@dataclass(frozen=True, eq=False)
class LongitudinalTable(_Permuted[Table]):
    """A `Table` over ``tau`` timestamps: rows permuted jointly at every ``t >= 1``."""

    def values(self, attribute: str) -> np.ndarray:
        """Codes of ``attribute`` at every timestamp, shape ``(tau, n)``."""
        return self.base[attribute][self.perm]


@dataclass(frozen=True, eq=False)
class LongitudinalSets(_Permuted[SetData]):
    """A `SetData` over ``tau`` timestamps: whole sets permuted at every ``t >= 1``."""

    def lengths(self) -> np.ndarray:
        """Set size of every user at every timestamp, shape ``(tau, n)``."""
        return self.base.lengths[self.perm]


@overload
def to_longitudinal(data: np.ndarray, tau: int, rng: np.random.Generator) -> np.ndarray: ...
@overload
def to_longitudinal(data: Table, tau: int, rng: np.random.Generator) -> LongitudinalTable: ...
@overload
def to_longitudinal(data: SetData, tau: int, rng: np.random.Generator) -> LongitudinalSets: ...


def to_longitudinal(
    data: np.ndarray | Table | SetData, tau: int, rng: np.random.Generator
) -> np.ndarray | LongitudinalTable | LongitudinalSets:
    """Interpolate one-shot data to ``tau`` timestamps by random permutation of the users.

    Timestamp 0 is the original data; each timestamp ``t >= 1`` holds an independent uniform
    permutation of the users' values (docs/math.md §6.1; seeds [000] §5 and [002]).

    Parameters
    ----------
    data : numpy.ndarray, Table or SetData
        A 1-D integer array of codes (one value per user), a multi-attribute `Table` (rows move
        as a whole) or set-valued `SetData` (sets move as a whole).
    tau : int
        Number of timestamps (>= 1).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray or LongitudinalTable or LongitudinalSets
        ``values[tau, n]`` (same dtype as ``data``) for a 1-D array; otherwise a lazy
        container holding the original data and the ``(tau, n)`` permutation matrix.

    Raises
    ------
    ValueError
        If ``tau < 1`` or ``data`` is an array that is not 1-D integer.
    ValueError
        If ``rng`` is not a ``numpy.random.Generator`` or ``data`` has an unsupported type.
    """
    tau = _check_tau(tau)
    rng = _check_rng(rng)
    if isinstance(data, SetData):
        return LongitudinalSets(data, permutations(data.n, tau, rng))
    if isinstance(data, Table):
        return LongitudinalTable(data, permutations(data.n, tau, rng))
    if isinstance(data, np.ndarray | list | tuple):
        a = np.asarray(data)
        if a.ndim != 1:
            raise ValueError(
                f"expected a 1-D array of codes (one value per user), got shape {a.shape}; "
                "use a Table for several attributes"
            )
        if a.size and (a.dtype == bool or not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"expected integer codes, got dtype {a.dtype}")
        return a[permutations(a.size, tau, rng)]
    raise ValueError(
        f"data must be a 1-D numpy array, a Table or a SetData, got {type(data).__name__}"
    )
