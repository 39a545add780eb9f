"""What every command of the ``longldp`` CLI shares: the error rule and the console.

The error rule lives in one place, `ErrorsAsExit`, the click group class of the top-level
application: whatever command runs below it (including commands of sub-groups added with
``app.add_typer``), a `ValueError` it raises becomes one line ``error: <message>`` on stderr
and exit code 2. Commands therefore just raise `ValueError` for bad input. A missing optional
package (a core install running ``longldp run``) is reported the same way, naming the extra.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click
import typer
from rich.console import Console
from rich.table import Table
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
        except ModuleNotFoundError as err:
            if err.name is None or err.name.split(".")[0] == "longldp":
                raise
            raise fail(
                f"this command needs the optional package {err.name!r}: "
                "pip install 'longldp[all]'"
            ) from None


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


#: Width a key column (protocol, dataset ...) is given when planning a table; longer text folds.
KEY_WIDTH = 16


def print_table(
    con: Console, title: str, header: Sequence[str], rows: Sequence[Sequence[str]], keys: int
) -> None:
    """Print a table whose first ``keys`` columns name a row and whose others hold numbers.

    A number is never cut: number columns keep their full width (no wrapping) and, when they
    do not all fit in the console's width, they are split over several tables, each repeating
    the key columns. Key columns fold long text onto more lines.
    """
    natural = [
        max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)
    ]
    fixed = 1 + sum(min(w, KEY_WIDTH) + 3 for w in natural[:keys])
    chunks: list[list[int]] = []
    current: list[int] = []
    used = fixed
    for j in range(keys, len(header)):
        need = natural[j] + 3
        if current and used + need > con.width:
            chunks.append(current)
            current, used = [], fixed
        current.append(j)
        used += need
    chunks.append(current)
    for n, cols in enumerate(chunks):
        part = "" if len(chunks) == 1 else f" ({n + 1}/{len(chunks)})"
        table = Table(title=title + part)
        for i in range(keys):
            table.add_column(header[i], overflow="fold")
        for j in cols:
            table.add_column(
                header[j], justify="right", no_wrap=True, min_width=natural[j], overflow="fold"
            )
        for r in rows:
            table.add_row(*r[:keys], *(r[j] for j in cols))
        con.print(table)
