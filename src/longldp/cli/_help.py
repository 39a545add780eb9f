"""What Typer's help and errors need on top of the defaults, applied once to the whole app.

* `hide_flag_types`: Typer (0.2x) prints a type column in ``--help``; for an on/off flag
  (``--force``, ``--log-y/--linear-y``, ``--help`` itself) it reads ``<bool>``, which looks like
  the flag takes a value, so flags get an empty type column; and a repeatable option or a
  variadic argument reads ``<str>...`` instead of ``<list[str]>``.
* `finish_app`: every command's docstring is reflowed (Typer's Rich mode keeps a docstring's hard
  line breaks, so a summary printed at another width broke mid-phrase), and every command gets
  the class `OptionErrors` (`longldp.cli._common`), which names the option when a library check
  refuses the value the user typed for it.

Both patch Typer's objects once, at import of ``longldp.cli``; with a Typer that lacks the
patched method nothing changes.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

_LIST_TYPE = re.compile(r"^<?list\[(?P<item>[^\]]+)\]>?$")


def hide_flag_types() -> None:
    """Flags get an empty type column, lists ``<item>...`` (idempotent)."""
    from typer.core import TyperArgument, TyperOption

    for cls in (TyperOption, TyperArgument):
        original = getattr(cls, "display_type_rich", None)
        if original is None or getattr(original, "_longldp_patched", False):
            continue

        def display_type_rich(self: Any, ctx: Any, _original: Any = original) -> str | None:
            if getattr(self, "is_flag", False) and self.metavar is None:
                return ""
            shown = _original(self, ctx)
            if isinstance(shown, str):
                match = _LIST_TYPE.match(shown.removesuffix("..."))
                if match is not None:
                    return f"<{match['item']}>..."
            return shown

        display_type_rich._longldp_patched = True  # type: ignore[attr-defined]
        cls.display_type_rich = display_type_rich  # type: ignore[method-assign]


def reflow(text: str) -> str:
    """A docstring's paragraphs each on one line (blank lines kept; ``\\b`` blocks untouched).

    Typer's Rich help keeps single line breaks, so a docstring wrapped at 96 columns printed at
    80 broke every line in two places. Reflowed, Rich wraps each paragraph at the terminal's
    width.
    """
    head, cut, tail = inspect.cleandoc(text).partition("\f")
    paragraphs = [
        p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
        for p in head.split("\n\n")
    ]
    return "\n\n".join(paragraphs) + cut + tail


def finish_app(app: Any, command_cls: type) -> None:
    """Reflow every command's help and give it ``command_cls``, through sub-groups too."""
    from typer.core import TyperCommand

    for info in app.registered_commands:
        text = info.help if info.help is not None else inspect.getdoc(info.callback)
        if text:
            info.help = reflow(text)
        if info.cls is None or info.cls is TyperCommand:
            info.cls = command_cls
    for group in app.registered_groups:
        if isinstance(group.help, str):
            group.help = reflow(group.help)
        sub = group.typer_instance
        if sub is not None:
            if isinstance(sub.info.help, str):
                sub.info.help = reflow(sub.info.help)
            finish_app(sub, command_cls)
