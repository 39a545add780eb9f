"""``--help`` reads well at any width (issue 33): summaries reflowed from the docstrings, no
``<list[str]>`` metavars, no text lost to Rich markup, and ``audit --help`` fits a screen or
two at 80 columns."""

from __future__ import annotations

import inspect
import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from longldp.cli import app
from longldp.cli._help import reflow

runner = CliRunner()


def _commands(cmd=None, path=()):
    """(path, click command) of every leaf command, through sub-groups."""
    cmd = get_command(app) if cmd is None else cmd
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


COMMANDS = list(_commands())


def _help(args, columns: int) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_command_is_listed():
    assert len(COMMANDS) >= 12 and ("rappor", "decode") in {p for p, _ in COMMANDS}


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_a_summary_is_one_paragraph_per_line(path):
    """At 400 columns a summary is printed on one line, as its reflowed docstring reads: the
    docstring's own line breaks (at 96 columns) are gone."""
    cmd = dict(COMMANDS)[path]
    first = inspect.cleandoc(cmd.help).split("\n\n")[0]
    assert "\n" not in first  # reflowed at registration (longldp.cli._help.finish_app)
    group_help = _help(list(path[:-1]), 400)
    line = next(x for x in group_help.splitlines() if x.lstrip("│ ").startswith(f"{path[-1]} "))
    assert " ".join(first.split()) in " ".join(line.split()), line
    own = " ".join(_help(list(path), 400).split())
    assert " ".join(first.split()) in own


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_help_has_no_python_types_and_loses_no_text(path):
    text = _help(list(path), 100)
    assert "list[" not in text  # lists read <str>... (or their metavar)
    # "audit [default: ...]." lost its bracket to Rich markup and printed "audit ."
    assert re.search(r"\w [.,;](?![.\w])", text) is None, text


def test_audit_help_fits_at_80_columns():
    assert len(_help(["audit"], 80).splitlines()) <= 80


def test_reflow_keeps_paragraphs_and_verbatim_blocks():
    text = "One\nline.\n\nTwo\n  lines here.\n\n\b\nkept\n  as is"
    assert reflow(text) == "One line.\n\nTwo lines here.\n\n\b\nkept\n  as is"
