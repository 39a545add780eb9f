"""An external command as a black-box randomizer (``longldp audit --exec``; docs/audit.md §9).

Framing (one process per batch; text on both sides, UTF-8, ``\\n`` line ends):

- **stdin**: one line per report to produce, ``<client> <value>``: ``client`` a decimal id
  (0, 1, 2, …) naming the client that reports, ``value`` its input, a decimal in [0, k).
  Then end of input.
- **stdout**: exactly one line per input line, in the same order: the report's bytes in
  hexadecimal (upper or lower case), every report of a run the same length. For a longldp
  protocol this is its wire-format report (docs/wire-format.md §1); any fixed-width byte
  string is accepted.
- **exit status** 0. Anything on stderr is ignored unless the command fails.

One-report audits send batches of distinct client ids (every trial a fresh client). Lifetime
audits send, for a batch of n clients, the n·τ lines of τ timestamps in time order: the lines
of timestamp 0 (clients 0 … n − 1), then those of timestamp 1, …; a client keeps its state
(memos, hash seed) across its lines within the process, and a new process starts with no
clients. The environment carries ``LONGLDP_AUDIT_K`` (the domain size) and
``LONGLDP_AUDIT_TAU`` (reports per client in this batch).

The command line is split like a POSIX shell does (``shlex``) and run without a shell; to use
pipes or redirections wrap it in ``sh -c '…'``. A command that cannot start, exits non-zero,
times out, or writes the wrong number of lines, a line that is not hexadecimal, or lines of
different lengths make the audit fail with one line naming what was wrong (``ValueError``).
"""

from __future__ import annotations

import binascii
import os
import shlex
import subprocess
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from longldp.audit.blackbox import RandomizerError

#: Seconds a batch may take before the command is stopped.
TIMEOUT = 600.0


def _argv(command: str | list[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("exec: 'command' must not be empty.")
    return argv


def run_command(
    command: str | list[str],
    clients: NDArray[np.int64],
    values: NDArray[np.int64],
    *,
    k: int,
    tau: int = 1,
    timeout: float = TIMEOUT,
) -> NDArray[np.uint8]:
    """Send ``clients[i] values[i]`` lines to one run of ``command``; parse one report per line.

    Returns the reports as (n, width) uint8 rows, in input order.
    """
    argv = _argv(command)
    lines = np.char.add(np.char.add(clients.astype(str), " "), values.astype(str))
    payload = ("\n".join(lines.tolist()) + "\n").encode() if lines.size else b""
    env = {**os.environ, "LONGLDP_AUDIT_K": str(k), "LONGLDP_AUDIT_TAU": str(tau)}
    name = argv[0]
    try:
        done = subprocess.run(
            argv, input=payload, capture_output=True, timeout=timeout, env=env, check=False
        )
    except FileNotFoundError:
        raise RandomizerError(f"exec: command not found: {name!r}.") from None
    except PermissionError:
        raise RandomizerError(f"exec: command not executable: {name!r}.") from None
    except subprocess.TimeoutExpired:
        raise RandomizerError(f"exec: {name!r} took more than {timeout:g} s for a batch.") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()
        said = f": {' '.join(tail[-1].split())}" if tail else ""
        raise RandomizerError(f"exec: {name!r} exited with status {done.returncode}{said}.")
    return parse_reports(done.stdout, values.size, name)


def parse_reports(stdout: bytes, n: int, name: str = "command") -> NDArray[np.uint8]:
    """Hex lines → (n, width) uint8 rows; every defect named with its line number."""
    text = stdout.decode("ascii", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln.rstrip("\r") for ln in lines]
    if len(lines) != n:
        raise RandomizerError(f"exec: {name!r} wrote {len(lines)} report lines for {n} inputs.")
    if n == 0:
        return np.zeros((0, 1), dtype=np.uint8)
    width = len(lines[0])
    for i, ln in enumerate(lines):
        if len(ln) != width:
            raise RandomizerError(
                f"exec: {name!r} wrote reports of varying width: line 1 has {width // 2} bytes, "
                f"line {i + 1} has {len(ln) / 2:g}."
            )
    if width == 0 or width % 2:
        raise RandomizerError(
            f"exec: {name!r} line 1 is not a report in hexadecimal: {lines[0][:40]!r}."
        )
    try:
        raw = binascii.unhexlify("".join(lines))
    except (binascii.Error, ValueError):
        for i, ln in enumerate(lines):
            try:
                binascii.unhexlify(ln)
            except (binascii.Error, ValueError):
                raise RandomizerError(
                    f"exec: {name!r} line {i + 1} is not a report in hexadecimal: {ln[:40]!r}."
                ) from None
        raise  # pragma: no cover  (the join failed, so some line fails)
    return np.frombuffer(raw, dtype=np.uint8).reshape(n, width // 2)


def exec_randomizer(
    command: str | list[str], k: int, timeout: float = TIMEOUT
) -> Callable[[NDArray[np.int64], np.random.Generator], NDArray[np.uint8]]:
    """``randomize(values, rng)`` for :func:`~longldp.audit.blackbox.audit_randomizer`: one run
    of ``command`` per call, every input a fresh client (ids 0 … n − 1). The command draws its
    own randomness; ``rng`` is not used."""
    _argv(command)

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        ids = np.arange(values.size, dtype=np.int64)
        return run_command(command, ids, values, k=k, tau=1, timeout=timeout)

    return randomize


def exec_lifetime(
    command: str | list[str], k: int, timeout: float = TIMEOUT
) -> Callable[[NDArray[np.int64], np.random.Generator], NDArray[np.uint8]]:
    """``run(values, rng)`` for :func:`~longldp.audit.blackbox.audit_lifetime`: one run of
    ``command`` per batch of clients, their τ reports sent in time order."""
    _argv(command)

    def run(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        n, tau = values.shape
        ids = np.tile(np.arange(n, dtype=np.int64), tau)  # time-major: t = 0 for all, then 1…
        flat = values.T.ravel()
        rows = run_command(command, ids, flat, k=k, tau=tau, timeout=timeout)
        return np.ascontiguousarray(rows.reshape(tau, n, -1).transpose(1, 0, 2))

    return run
