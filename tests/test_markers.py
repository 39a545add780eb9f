"""The test markers: registered, and a missing real part fails under CI=true, skips elsewhere.

tests/real_parts.py lists the real parts; ``LONGLDP_HIDE_PARTS`` makes this machine look as if
it lacked some, so the rule is checked on the real tests that need them, in a subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from real_parts import MARKERS, REAL_PARTS

ROOT = Path(__file__).resolve().parents[1]

#: One test per way a test gets a real-part marker: a decorator, a fixture parameter's mark,
#: and a fixture that starts the part (tests/conftest.py adds the marker).
MARKED = {
    "browser": "tests/test_figures.py::test_dashboard_ticks_are_round_in_chromium",
    "postgres": "tests/test_server.py::test_token_matrix[postgresql]",
    "dask": "tests/test_archive.py::test_local_and_dask_counts_are_identical_and_exact[grr]",
}


def test_registered_markers_are_the_real_parts_and_slow():
    with (ROOT / "pyproject.toml").open("rb") as f:
        ini = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in ini["addopts"].split()
    registered = [m.split(":")[0] for m in ini["markers"]]
    assert registered == list(MARKERS) == ["slow", *REAL_PARTS]


def _run(ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["LONGLDP_HIDE_PARTS"] = ",".join(MARKED)
    if ci:
        env["CI"] = "true"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    return subprocess.run(
        [*cmd, *MARKED.values()], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.slow
def test_missing_real_parts_fail_under_ci_and_skip_elsewhere():
    ci = _run(ci=True)
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert re.search(rf"\b{len(MARKED)} errors?\b", ci.stdout), ci.stdout
    for marker, test in MARKED.items():
        what = REAL_PARTS[marker][0]
        assert f"ERROR {test} - Failed: {what}: required in CI (CI=true)" in ci.stdout, ci.stdout
    local = _run(ci=False)
    assert local.returncode == 0, local.stdout + local.stderr
    assert re.search(rf"\b{len(MARKED)} skipped\b", local.stdout), local.stdout
    assert "passed" not in local.stdout and "error" not in local.stdout
