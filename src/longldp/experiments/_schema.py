"""A small declarative schema for study files: keys, their checks, one error template.

Every key of a TOML table is described by a `Key` (name, a check that normalizes the value,
whether it is required, its default, and the words for what is allowed). `check_table` rejects
unknown keys, fills defaults and runs the checks, so every message has the same shape::

    <where>: key '<name>' must be <allowed>; got <value>.
    <where>: unknown key '<name>'; allowed keys: a, b, c.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Key",
    "check_table",
    "choice",
    "fail",
    "integer",
    "number",
    "number_list",
    "optional_string",
    "string",
    "string_list",
    "table_list",
]

Check = Callable[[str, str, Any], Any]


def fail(where: str, name: str, allowed: str, got: Any) -> ValueError:
    """The one error of a study file: where, which key, what is allowed, what was given."""
    shown = repr(got)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return ValueError(f"{where}: key '{name}' must be {allowed}; got {shown}.")


@dataclass(frozen=True)
class Key:
    """One key of a TOML table.

    Parameters
    ----------
    name : str
        The key as written in the file.
    check : callable
        ``check(where, name, value) -> value``: normalizes the value or raises `ValueError`.
    required : bool, default=False
        Whether the key must be present.
    default : object, default=None
        Value used when an optional key is absent.
    """

    name: str
    check: Check
    required: bool = False
    default: Any = None


def check_table(where: str, table: Any, keys: Sequence[Key]) -> dict[str, Any]:
    """Validate one TOML table against its keys.

    Parameters
    ----------
    where : str
        Location used in messages, e.g. ``"study"`` or ``"protocols[2]"``.
    table : mapping
        The parsed TOML table.
    keys : sequence of Key
        Every key the table may hold.

    Returns
    -------
    dict
        Normalized values of every key (defaults filled in for absent optional keys).

    Raises
    ------
    ValueError
        For a table that is not a mapping, an unknown key, a missing required key or a value
        that fails its check.
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    allowed = {k.name: k for k in keys}
    for name in table:
        if name not in allowed:
            raise ValueError(f"{where}: unknown key '{name}'; allowed keys: {', '.join(allowed)}.")
    out: dict[str, Any] = {}
    for key in keys:
        if key.name in table:
            out[key.name] = key.check(where, key.name, table[key.name])
        elif key.required:
            raise ValueError(f"{where}: missing required key '{key.name}'.")
        else:
            out[key.name] = key.default
    return out


def string(where: str, name: str, value: Any) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise fail(where, name, "a non-empty string", value)
    return value.strip()


def optional_string(where: str, name: str, value: Any) -> str:
    """Any string (may be empty)."""
    if not isinstance(value, str):
        raise fail(where, name, "a string", value)
    return value


def integer(minimum: int) -> Check:
    """An integer (not a bool) >= ``minimum``."""

    def check(where: str, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise fail(where, name, f"an integer >= {minimum}", value)
        return int(value)

    return check


def integer_or_list(minimum: int) -> Check:
    """An integer >= ``minimum`` (one value), or a non-empty list of distinct such integers
    (an axis of the grid), returned as an int or a tuple."""
    allowed = f"an integer >= {minimum} or a non-empty list of distinct such integers"

    def one(x: Any) -> bool:
        return not isinstance(x, bool) and isinstance(x, numbers.Integral) and x >= minimum

    def check(where: str, name: str, value: Any) -> int | tuple[int, ...]:
        if one(value):
            return int(value)
        if (
            not isinstance(value, list)
            or not value
            or not all(one(x) for x in value)
            or len(set(value)) != len(value)
        ):
            raise fail(where, name, allowed, value)
        return tuple(int(x) for x in value)

    return check


def number(lower: float | None = None, *, inclusive: bool = False) -> Check:
    """A finite real number (> ``lower``, or >= with ``inclusive``, when ``lower`` is given)."""
    if lower is None:
        allowed = "a finite number"
    else:
        allowed = f"a finite number {'>=' if inclusive else '>'} {lower:g}"

    def check(where: str, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise fail(where, name, allowed, value)
        x = float(value)
        below = lower is not None and (x < lower if inclusive else x <= lower)
        if not math.isfinite(x) or below:
            raise fail(where, name, allowed, value)
        return x

    return check


def choice(options: Sequence[str]) -> Check:
    """One of ``options`` (case-insensitive; returned as spelled in ``options``)."""

    def check(where: str, name: str, value: Any) -> str:
        lookup = {o.lower(): o for o in options}
        if not isinstance(value, str) or value.strip().lower() not in lookup:
            raise fail(where, name, "one of " + ", ".join(repr(o) for o in options), value)
        return lookup[value.strip().lower()]

    return check


def number_list(*, lower: float = 0.0, upper: float | None = None, what: str = "numbers") -> Check:
    """A non-empty list of distinct finite numbers in (lower, upper) (upper open, if given)."""
    allowed = (
        f"a non-empty list of distinct {what} > {lower:g}"
        if upper is None
        else f"a non-empty list of distinct {what} in ({lower:g}, {upper:g})"
    )

    def check(where: str, name: str, value: Any) -> tuple[float, ...]:
        if not isinstance(value, list) or not value:
            raise fail(where, name, allowed, value)
        out = []
        for x in value:
            if isinstance(x, bool) or not isinstance(x, numbers.Real):
                raise fail(where, name, allowed, value)
            f = float(x)
            if not math.isfinite(f) or f <= lower or (upper is not None and f >= upper):
                raise fail(where, name, allowed, value)
            out.append(f)
        if len(set(out)) != len(out):
            raise fail(where, name, allowed, value)
        return tuple(out)

    return check


def string_list(options: Sequence[str] | None = None) -> Check:
    """A non-empty list of distinct strings (each one of ``options`` when given)."""
    allowed = "a non-empty list of distinct strings"
    if options is not None:
        allowed += " from " + ", ".join(repr(o) for o in options)

    def check(where: str, name: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise fail(where, name, allowed, value)
        out = []
        lookup = None if options is None else {o.lower(): o for o in options}
        for x in value:
            if not isinstance(x, str) or not x.strip():
                raise fail(where, name, allowed, value)
            if lookup is not None:
                if x.strip().lower() not in lookup:
                    raise fail(where, name, allowed, x)
                x = lookup[x.strip().lower()]
            out.append(x.strip())
        if len(set(out)) != len(out):
            raise fail(where, name, allowed, value)
        return tuple(out)

    return check


def table_list(where: str, name: str, value: Any) -> tuple[Mapping[str, Any], ...]:
    """A non-empty list of tables (``[[name]]`` blocks or an inline array of tables)."""
    if not isinstance(value, list) or not value or not all(isinstance(x, Mapping) for x in value):
        raise fail(where, name, "a non-empty list of tables", value)
    return tuple(value)
