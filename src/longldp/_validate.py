"""Shared argument checks: one error template for every public entry point.

Messages follow one shape -- "<owner>: '<name>' must be <allowed>; got <value>." -- so a user
always learns what was wrong and what is allowed (docs/design.md §2.4).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


class Described(str):
    """A value already described in words, printed as is in an error message."""


def _fail(owner: str, name: str, allowed: str, got: Any) -> ValueError:
    shown = got if isinstance(got, Described) else repr(got)
    return ValueError(f"{owner}: '{name}' must be {allowed}; got {shown}.")


def positive_float(owner: str, name: str, value: Any, *, upper: float | None = None) -> float:
    """A finite real number > 0 (and < ``upper`` when given)."""
    allowed = "a finite number > 0" if upper is None else f"a finite number in (0, {upper:g})"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(owner, name, allowed, value)
    x = float(value)
    if not math.isfinite(x) or x <= 0 or (upper is not None and x >= upper):
        raise _fail(owner, name, allowed, value)
    return x


def probability(owner: str, name: str, value: Any) -> float:
    """A real number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(owner, name, "a number in [0, 1]", value)
    x = float(value)
    if not (0.0 <= x <= 1.0):
        raise _fail(owner, name, "a number in [0, 1]", value)
    return x


def integer(owner: str, name: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    """An integer (Python or NumPy, not bool) in [minimum, maximum]."""
    allowed = (
        f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(owner, name, allowed, value)
    x = int(value)
    if x < minimum or (maximum is not None and x > maximum):
        raise _fail(owner, name, allowed, value)
    return x


#: Largest privacy budget a protocol accepts (re-exported and explained as
#: :data:`longldp.privacy.EPS_MAX`; see docs/math.md, "Budgets a protocol accepts").
EPS_MAX = 30.0


def budget(owner: str, name: str, value: Any) -> float:
    """A privacy budget ε: a finite number in (0, EPS_MAX]."""
    allowed = (
        f"a finite number > 0 and <= {EPS_MAX:g} (longldp.privacy.EPS_MAX: above it float64 "
        "cannot represent the protocols' probabilities faithfully)"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(owner, name, allowed, value)
    x = float(value)
    if not math.isfinite(x) or x <= 0 or x > EPS_MAX:
        raise _fail(owner, name, allowed, value)
    return x


def chain_budgets(owner: str, eps_perm: Any, eps_1: Any) -> tuple[float, float]:
    """0 < ε∞ ≤ EPS_MAX and 0 < ε1 < ε∞ for a two-round chain."""
    eps_perm = budget(owner, "eps_perm", eps_perm)
    return eps_perm, positive_float(owner, "eps_1", eps_1, upper=eps_perm)


def choice(owner: str, name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """One of a fixed set of lower-case strings (case-insensitive)."""
    if not isinstance(value, str) or value.lower() not in allowed:
        raise _fail(owner, name, "one of " + ", ".join(repr(a) for a in allowed), value)
    return value.lower()


def domain_values(owner: str, values: ArrayLike, k: int, name: str = "values") -> NDArray[np.int64]:
    """Integer values in [0, k); floats (even integral ones), NaN and bools are rejected."""
    arr = np.asarray(values)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise _fail(
            owner, name, f"integers in [0, {k}) (an integer dtype)", Described(f"dtype {arr.dtype}")
        )
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        bad = arr[(arr < 0) | (arr >= k)].ravel()[0]
        raise _fail(owner, name, f"integers in [0, {k})", Described(f"{int(bad)} (outside)"))
    return arr.astype(np.int64, copy=False)


def counts(owner: str, values: ArrayLike, k: int, name: str = "true_counts") -> NDArray[np.int64]:
    """A length-k vector of non-negative integer counts."""
    arr = np.asarray(values)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or arr.shape != (k,):
        raise _fail(
            owner,
            name,
            f"a length-{k} integer vector",
            Described(f"shape {arr.shape}, dtype {arr.dtype}"),
        )
    if arr.size and arr.min() < 0:
        raise _fail(owner, name, "non-negative counts", int(arr.min()))
    return arr.astype(np.int64, copy=False)


def missing_path(path: Any) -> str:
    """Why ``path``, which does not resolve to a file or folder, cannot be used, in words.

    ``Path.exists`` is False for a missing path, a symbolic link whose target is missing and a
    loop of symbolic links alike; a user told "does not exist" of a link she can list goes
    looking in the wrong place, so the three are told apart (``os.stat``'s ``ELOOP``).
    """
    import errno
    import os

    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a loop of symbolic links (it never reaches a file)"
        if os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        if err.errno == errno.ENOTDIR:
            return "does not exist (a part of it is a file, not a folder)"
        if err.errno == errno.EACCES:
            return "cannot be reached (permission denied on a folder on its way)"
        return "does not exist"
    return "exists"
