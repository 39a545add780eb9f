"""The ``longldp`` command (entry point ``longldp = "longldp.cli:app"``; also
``python -m longldp``).

One module per command group; this module only builds `app` and registers them.

Adding commands
---------------
Write a module ``longldp/cli/<group>.py`` with a function ``register(app)`` and add its name to
`COMMAND_MODULES` below. Keep heavy imports (pyarrow, matplotlib, your application's package)
inside the command functions, so that ``longldp --help`` stays fast. Two shapes:

* top-level commands (``longldp protocols``)::

      def register(app: typer.Typer) -> None:
          app.command("protocols")(protocols_cmd)

* a sub-group (``longldp rappor decode``)::

      group = typer.Typer(help="RAPPOR reports.", no_args_is_help=True)

      @group.command("decode")
      def decode(...) -> None: ...

      def register(app: typer.Typer) -> None:
          app.add_typer(group, name="rappor")

Errors: raise `ValueError` with a message saying what is wrong and what is allowed. The
top-level group (`longldp.cli._common.ErrorsAsExit`) turns it, for every command and sub-group,
into one line ``error: ...`` on stderr and exit code 2; do not catch it yourself. For other
refusals use ``raise fail("message")`` from `longldp.cli._common` (same line, same code).
Print tables with ``console()`` from there (it honours ``COLUMNS`` off a terminal).
"""

from __future__ import annotations

from importlib import import_module
from typing import Annotated

import typer

import longldp
from longldp.cli._common import ErrorsAsExit, OptionErrors
from longldp.cli._help import finish_app, hide_flag_types

hide_flag_types()

#: The modules of ``longldp.cli`` whose ``register(app)`` adds commands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "studies",
    "info",
    "allomfree",
    "serve",
    "devices",
    "rappor",
    "heavy_hitters",
    "audit",
    "archive",
    "privacy",
)

app = typer.Typer(
    cls=ErrorsAsExit,
    add_completion=False,
    no_args_is_help=True,
    help="Local differential privacy over longitudinal data.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"longldp {longldp.__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Local differential privacy over longitudinal data."""


for _name in COMMAND_MODULES:
    import_module(f"longldp.cli.{_name}").register(app)
finish_app(app, OptionErrors)

__all__ = ["COMMAND_MODULES", "app"]
