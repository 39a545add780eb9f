"""``python -m longldp`` and the ``longldp`` console script.

The command lives in :mod:`longldp.cli`, which needs the ``cli`` extra (Typer, Rich). A core
install (NumPy only) has no command; instead of a traceback it gets one line saying which
extra to install.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``longldp`` command, or explain in one line that its extra is missing."""
    try:
        from longldp.cli import app
    except ModuleNotFoundError as err:
        missing = err.name or "a dependency"
        sys.stderr.write(
            f"error: the longldp command needs the package {missing!r}, which is not installed; "
            "install the command with: pip install 'longldp[cli]' (or 'longldp[all]').\n"
        )
        raise SystemExit(2) from None
    app(prog_name="longldp")


if __name__ == "__main__":  # pragma: no branch
    main()
