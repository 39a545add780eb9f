"""What every command of the ``longldp`` CLI shares: the error rule and the console.

The error rule lives in one place, `ErrorsAsExit`, the click group class of the top-level
application: whatever command runs below it (including commands of sub-groups added with
``app.add_typer``), a `ValueError` it raises becomes one line ``error: <message>`` on stderr
and exit code 2. Commands therefore just raise `ValueError` for bad input.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

#: Exit code of a command refused for bad input (click uses 2 for usage errors too).
EXIT_BAD_INPUT = 2

#: Width of the tables when output is not a terminal and ``COLUMNS`` is not set.
PIPE_WIDTH = 160


def one_line(err: BaseException) -> str:
    """The message of ``err`` on a single line (internal whitespace collapsed)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` (one line) on stderr; return the exit to raise (code 2)."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


class ErrorsAsExit(TyperGroup):
    """A Typer group turning a `ValueError` of any command below it into one line and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValueError as err:
            raise fail(one_line(err)) from None


def console() -> Console:
    """A Rich console for the current output.

    On a terminal Rich measures it; off a terminal the width is ``COLUMNS`` when set, else
    `PIPE_WIDTH` (Rich alone would assume 80 columns). Built per command, so that ``COLUMNS``
    is read when the command runs.
    """
    columns = os.environ.get("COLUMNS", "")
    if sys.stdout.isatty() or columns.isdigit():
        return Console(width=int(columns) if columns.isdigit() else None)
    return Console(width=PIPE_WIDTH)
