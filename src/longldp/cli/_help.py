"""Help output without ``<bool>`` after flags.

Typer (0.2x) prints a type column in ``--help``; for an on/off flag (``--force``,
``--log-y/--linear-y``, ``--help`` itself) it reads ``<bool>``, which looks like the flag takes a
value. `hide_flag_types` makes the type column of every flag empty; options that take a value
keep theirs (``<path>``, ``<int>``). It patches one method of Typer's option class, once, at
import of ``longldp.cli``; with a Typer that lacks the method nothing changes.
"""

from __future__ import annotations

from typing import Any


def hide_flag_types() -> None:
    """Give flags an empty type column in Rich help (idempotent)."""
    from typer.core import TyperOption

    original = getattr(TyperOption, "display_type_rich", None)
    if original is None or getattr(original, "_longldp_flags_hidden", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return ""
        return original(self, ctx)

    display_type_rich._longldp_flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
