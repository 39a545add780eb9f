"""The real parts some tests need (PostgreSQL, chromium, Dask, a package install, node), and
how to tell whether this machine has them.

A test that needs one carries the marker of the same name (``@pytest.mark.postgres``, ...);
tests/conftest.py reads the markers before each test runs: a missing part skips the test on a
developer's machine and FAILS it under ``CI=true``. This module imports nothing heavy, so the
conftest can load it on a bare install.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


def pg_bin() -> Path | None:
    """The newest PostgreSQL server binaries of the distribution (initdb, pg_ctl), if any."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    return Path(found[-1]).parent if found else None


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


#: marker → (what the test needs, in words; whether this machine has it). Only the parts that
#: can be absent on a developer's machine are here; ``slow`` is a speed marker, not a part.
REAL_PARTS: dict[str, tuple[str, Callable[[], bool]]] = {
    "postgres": (
        "PostgreSQL (initdb and pg_ctl under /usr/lib/postgresql/*/bin, and psycopg)",
        lambda: pg_bin() is not None and _has_module("psycopg"),
    ),
    "browser": (
        "headless chromium (chromium on PATH or /usr/bin/chromium)",
        lambda: bool(CHROMIUM),
    ),
    "dask": ("Dask's 'distributed' package (the dask extra)", lambda: _has_module("distributed")),
    "install": (
        "pip, venv, setuptools and wheel (building and installing the package)",
        lambda: all(_has_module(m) for m in ("pip", "venv", "setuptools", "wheel")),
    ),
    "node": ("node (Node.js on PATH)", lambda: shutil.which("node") is not None),
}

#: The markers registered in pyproject.toml: every real part, plus the speed marker.
MARKERS = ("slow", *REAL_PARTS)


#: Parts to treat as missing although present (comma-separated markers): how
#: tests/test_markers.py, or a developer, sees what a machine without them would do.
HIDDEN = {p.strip() for p in os.environ.get("LONGLDP_HIDE_PARTS", "").split(",") if p.strip()}


@cache
def _present(name: str) -> bool:
    return name not in HIDDEN and REAL_PARTS[name][1]()


def missing_parts(marker_names: set[str]) -> list[str]:
    """The words for each real part among ``marker_names`` that this machine lacks."""
    return [REAL_PARTS[n][0] for n in REAL_PARTS if n in marker_names and not _present(n)]
