"""What every command of the ``longldp`` CLI shares: the error rule, path and size checks, the
console.

The error rule lives in one place, `ErrorsAsExit`, the click group class of the top-level
application: whatever command runs below it (including commands of sub-groups added with
``app.add_typer``), a `ValueError` it raises becomes one line ``error: <message>`` on stderr
and exit code 2. Commands therefore just raise `ValueError` for bad input. The same group turns
click's usage errors (an unknown command or option, a value that is not a number, a missing
option) into one such line, reports a missing optional package naming the extra, and a
`MemoryError` naming the allocation that failed.

Paths are checked before any work starts, by `input_file`, `output_file` and `output_folder`:
an input must be an existing file (not a folder); an output file must not be a folder and must
have one of the command's suffixes; an output folder must not be a file. Missing folders on the
way to an output are created (``mkdir -p``), provided the nearest existing one is a folder this
process may write in. Sizes are checked by `check_memory` against the memory the machine has
available, with the need computed by the command from its arguments.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from longldp._validate import missing_path

try:  # recent Typer vendors click as typer._click; older ones use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older Typer
    from click import exceptions as click_errors  # type: ignore[no-redef]

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
    """A Typer group turning a `ValueError` of any command below it into one line and exit 2.

    Click's own usage errors (raised while parsing, before a command runs) get the same line:
    ``main`` runs click in non-standalone mode and prints the error itself instead of click's
    or Rich's box. ``--help`` and ``--version`` are untouched.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click_errors.UsageError as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # the help was printed: that is all
                sys.exit(err.exit_code)
            sys.exit(_usage_line(err))
        except click_errors.ClickException as err:  # FileError and the like
            typer.echo(f"error: {one_line(Exception(err.format_message()))}", err=True)
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("error: aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValueError as err:
            raise fail(one_line(err)) from None
        except MemoryError as err:
            raise fail(
                f"not enough memory for this run ({one_line(err)}); choose smaller sizes."
            ) from None
        except ModuleNotFoundError as err:
            if err.name is None or err.name.split(".")[0] == "longldp":
                raise
            raise fail(
                f"this command needs the optional package {err.name!r}: pip install 'longldp[all]'"
            ) from None


#: A library check's message (`longldp._validate`): ``owner: 'name' must ...`` (the owner may be
#: absent, and the name may be followed by a parenthesis, ``'alpha' (= ε1/ε∞) must ...``).
_CHECK_MESSAGE = re.compile(
    r"^(?:[^'\n]*?: )?'(?P<name>[A-Za-z_][A-Za-z0-9_]*)'(?P<rest>(?: \([^)]*\))? must .*)$",
    re.DOTALL,
)


class OptionErrors(TyperCommand):
    """A command whose refusals name the option the user typed, not a library parameter.

    A library check says ``simulate_reports: 'change' must be in [0, 1]; got 2.0.``; the user
    typed ``--change 2``. When the refused name is the Python name of one of this command's
    options and the user gave that option (on the command line or through the environment),
    the message becomes ``'--change' must be in [0, 1]; got 2.0.``. Any other `ValueError`
    passes unchanged (a parameter given inside a protocol spec, ``k=1``, keeps its owner).
    `longldp.cli._help.finish_app` gives every command this class.
    """

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValueError as err:
            renamed = option_message(ctx, one_line(err))
            if renamed is None:
                raise
            raise ValueError(renamed) from None


def option_message(ctx: Any, message: str) -> str | None:
    """``message`` with its parameter replaced by the option the user typed, or None.

    The parameter matches an option by the option's Python name or by its spelling
    (``--format`` is ``format`` even when its Python name is ``fmt``).
    """
    match = _CHECK_MESSAGE.match(message)
    if match is None:
        return None
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        spellings = {param.name, *(o.lstrip("-").replace("-", "_") for o in param.opts)}
        if (
            param.param_type_name == "option"
            and match["name"] in spellings
            and getattr(source, "name", None) in ("COMMANDLINE", "ENVIRONMENT")
        ):
            return f"'{max(param.opts, key=len)}'{match['rest']}"
    return None


def _usage_line(err: Any) -> int:
    """Print a click usage error as one ``error:`` line naming the command; return its code."""
    path = err.ctx.command_path if err.ctx is not None else "longldp"
    message = one_line(Exception(err.format_message())).rstrip(".")
    typer.echo(f"error: {path}: {message} (see '{path} --help').", err=True)
    return err.exit_code


# ------------------------------------------------------------------------------- paths


def parse_value(raw: str) -> Any:
    """A parameter's value: a bool (true/false), None (none), an int or a float when the text
    looks like one, else the text itself."""
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


def parse_assignments(
    items: Sequence[str], what: str = "protocol parameters", reserved: Sequence[str] = ()
) -> dict[str, Any]:
    """The one ``NAME=VALUE`` parser of every command: ``k=74 eps-perm=2 calibration=paper``
    → ``{"k": 74, "eps_perm": 2, "calibration": "paper"}``.

    Names are stripped and ``-`` is ``_`` (``eps-perm=`` and ``eps_perm=`` are one name);
    values go through :func:`parse_value`. A word without ``=`` or with an empty name, a name
    given twice in one command line, or a name in ``reserved`` (set by an option of its own)
    raises ``ValueError`` naming it.
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        key = name.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{what} are written NAME=VALUE (e.g. k=74); got {item!r}.")
        if key in out:
            raise ValueError(f"{what}: {key!r} is given twice ({key}={out[key]!r} and {item!r}).")
        if key in reserved:
            raise ValueError(
                f"{what}: {key!r} has an option of its own (--{key.replace('_', '-')}); "
                f"got {item!r}."
            )
        out[key] = parse_value(raw)
    return out


def _quoted(path: Path) -> str:
    return repr(str(path))


def existing(path: Path, option: str) -> Path:
    """``path`` if it exists (a file or a folder); else a `ValueError` naming ``option`` and why
    (missing, a broken symbolic link, a loop of links: `longldp._validate.missing_path`)."""
    if not path.exists():
        raise ValueError(f"{option}: {_quoted(path)} {missing_path(path)}.")
    return path


def input_file(path: Path, option: str) -> Path:
    """``path`` if it is an existing, readable file; else a `ValueError` naming ``option``."""
    existing(path, option)
    if path.is_dir():
        raise ValueError(f"{option}: {_quoted(path)} is a folder; give a file.")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{option}: {_quoted(path)} cannot be read (permission denied).")
    return path


def nearest_existing(path: Path) -> Path:
    """``path`` itself, or its nearest ancestor that exists (what ``mkdir -p`` would extend)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _writable_folder(folder: Path, option: str, target: Path) -> None:
    """The nearest existing folder on the way to ``folder`` must be a writable folder."""
    probe = nearest_existing(folder)
    if not probe.is_dir():
        raise ValueError(
            f"{option}: {_quoted(target)} cannot be created: {_quoted(probe)} is a file, "
            "not a folder."
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(
            f"{option}: {_quoted(target)} cannot be written: no permission to write in "
            f"{_quoted(probe)}."
        )


def output_file(path: Path, option: str, suffixes: Sequence[str] | None = None) -> Path:
    """Check an output file before the work starts (an existing file is replaced).

    It must not be a folder, its name must end in one of ``suffixes`` (what it will be
    written as; None: any name), and its folder must exist or be creatable.
    """
    if path.is_dir():
        raise ValueError(f"{option}: {_quoted(path)} is a folder; give a file name.")
    if path.is_symlink() and "loop" in missing_path(path):
        raise ValueError(f"{option}: {_quoted(path)} {missing_path(path)}.")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise ValueError(
            f"{option}: the file name must end in {' or '.join(suffixes)} (the format written); "
            f"got {_quoted(path)}."
        )
    _writable_folder(path.parent, option, path)
    return path


#: Figure files a command may write (the suffixes of `longldp.experiments.plot.FORMATS`, kept
#: here so that a command checks ``--plot`` without importing the plotting stack; a test ties
#: the two).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def output_folder(path: Path, option: str) -> Path:
    """Check an output folder before the work starts: not a file, creatable if missing."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option}: {_quoted(path)} is a file; give a folder.")
    if path.is_symlink() and not path.exists():  # mkdir cannot make a folder there
        raise ValueError(f"{option}: {_quoted(path)} {missing_path(path)}.")
    _writable_folder(path, option, path)
    return path


# ------------------------------------------------------------------------------- Dask

#: Seconds to wait for a Dask scheduler to accept a connection before refusing the command.
SCHEDULER_TIMEOUT_S = 5.0


def check_scheduler(address: str, option: str = "--scheduler") -> str:
    """Refuse, within `SCHEDULER_TIMEOUT_S`, a scheduler address nothing answers at.

    Dask's client would retry for 30 s and then print a long traceback; one TCP connection
    tells the same in a moment. ``tcp://host:port`` and ``host:port`` are accepted.
    """
    import socket
    from urllib.parse import urlsplit

    text = address.strip()
    parts = urlsplit(text if "://" in text else f"tcp://{text}")
    if parts.scheme not in ("tcp", "tls") or not parts.hostname:
        raise ValueError(
            f"{option}: a scheduler address is tcp://HOST:PORT (or 'local' where allowed); "
            f"got {address!r}."
        )
    try:
        port = parts.port or 8786
    except ValueError:
        raise ValueError(f"{option}: the port of {address!r} is not a number.") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=SCHEDULER_TIMEOUT_S).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ValueError(
            f"{option}: no Dask scheduler answers at {address} ({reason.lower()}); start one "
            "(`dask scheduler`) or give its address."
        ) from None
    return text


# ------------------------------------------------------------------------------- sizes


def available_memory() -> int:
    """Bytes of memory the machine can give a new allocation now (``MemAvailable`` on Linux,
    else the physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    try:  # pragma: no cover - not Linux
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 1 << 62


def human_bytes(n: float) -> str:
    """``1.5e9`` -> ``'1.5 GB'`` (decimal units)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1000
    raise AssertionError  # pragma: no cover


def client_memory(proto: Any, users: int = 4) -> tuple[int, int]:
    """Measured memory of simulating ``proto``'s clients: ``(fixed, per_user)`` bytes.

    Draws the memos of 1 and of ``users`` clients, their reports and the reports' wire bytes
    under `tracemalloc` (which sees NumPy's allocations) and fits peak = fixed + per_user · n.
    Protocols differ by orders of magnitude here (a unary client at k = 10⁷ holds about
    14 MB while it reports; a GRR client a few bytes), so sizes are measured, not guessed.
    """
    import tracemalloc

    import numpy as np

    def peak(n: int) -> int:
        rng = np.random.default_rng(0)
        values = proto.as_inputs(np.zeros(n, np.int64))  # codes, or the strings they stand for
        tracemalloc.start()
        try:
            memo = proto.new_memo(n)
            reports = proto.perturb(values, memo, rng)
            with contextlib.suppress(ValueError):  # a protocol without a wire format (a control)
                proto.encode_reports(reports)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(1)  # warm-up: a first call in a process also allocates one-time caches, which made
    # peak(1) too large and the per-user share (many - one) too small, or even negative
    one, many = peak(1), peak(users)
    per_user = max((many - one) // (users - 1), int(proto.wire_size))
    return max(one - per_user, 0), per_user


def check_memory(need: float, what: str, advice: str) -> None:
    """Refuse up front, with a `ValueError`, a run that needs more than the memory available.

    ``need`` is the command's own estimate in bytes of what it will hold at once; ``what``
    says what needs it and ``advice`` which option to lower.
    """
    have = available_memory()
    if need > have:
        raise ValueError(
            f"{what} needs about {human_bytes(need)} of memory, more than the "
            f"{human_bytes(have)} available; {advice}"
        )


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
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
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
