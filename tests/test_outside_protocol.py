"""A protocol from another package joins the registry through its entry point (docs/design.md
§8): installed into a fresh virtual environment, it is listed by ``longldp protocols``, audited
by ``longldp audit``, enrolled in the common tests and served by a collection.

The package is tests/data/outside_protocol (``OUT-RR``, wire id 200, entry point
``out-rr = "outside_protocol:OutsideRR"`` in the group ``longldp.protocols``). The venv sees this
project's environment through one ``.pth`` line (longldp and its dependencies are not installed
again) and the package is installed with ``--no-deps --no-build-isolation --no-index``, so the
test builds one tiny wheel and reads nothing from the network.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import longldp as ll
from longldp.protocols import _registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "data" / "outside_protocol"
NAME = "OUT-RR"


def _run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CI"] = os.environ.get("CI", "")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if check:
        assert proc.returncode == 0, f"{args}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory) -> Path:
    """A fresh venv that sees this environment's packages, with the outside package installed."""
    tmp = tmp_path_factory.mktemp("outside")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp
    ).stdout.strip()
    # This environment's site-packages (with the editable longldp) after the venv's own.
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "parent_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    )
    copy = tmp / "outside_protocol"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(copy),
        ],
        cwd=tmp,
    )
    return python


def test_the_package_is_not_registered_here():
    """The example is registered only where it is installed (the check below can fail)."""
    assert NAME not in ll.protocols.NAMES
    with pytest.raises(ValueError, match="'name' must be one of"):
        ll.protocol(NAME, k=4, eps=1.0)


@pytest.mark.slow
@pytest.mark.install
def test_listed_and_audited_from_the_command_line(venv_python):
    listed = _run([str(venv_python), "-m", "longldp", "protocols"], cwd=ROOT).stdout
    assert NAME in listed
    audit = _run(
        [
            str(venv_python),
            "-m",
            "longldp",
            "audit",
            NAME,
            "--k",
            "4",
            "--eps",
            "1.0",
            "--trials",
            "2000",
            "--taus",
            "3",
            "--lifetime-trials",
            "1000",
        ],
        cwd=ROOT,
    )
    assert NAME in audit.stdout and "exact" in audit.stdout.lower(), audit.stdout
    where = _run(
        [
            str(venv_python),
            "-c",
            f"import longldp as ll; "
            f"c = ll.get_protocol_class({NAME!r}); "
            "from longldp.protocols import _registry as r; "
            f"print(c.__module__, c.wire_id, r.SOURCES[{NAME!r}], {NAME!r} in ll.protocols.NAMES)",
        ],
        cwd=ROOT,
    ).stdout.split()
    assert where[:2] == ["outside_protocol", "200"] and where[-1] == "True"
    assert "'out-rr'" in " ".join(where)


@pytest.mark.slow
@pytest.mark.install
def test_enrolled_in_the_common_tests_and_served(venv_python):
    """The registry's common tests pick it up (their ids carry its name): the exact channel
    against the claim, wire round trips and specs, and a server collection on SQLite (create,
    ingest real device clients' reports, estimate, series, dashboard, export)."""
    tests = [
        "tests/test_privacy_channels.py",
        "tests/test_wire.py",
        "tests/test_roundtrip_server.py",
    ]
    proc = _run(
        [
            str(venv_python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            NAME,
            "-W",
            "ignore::DeprecationWarning",
            *tests,
        ],
        cwd=ROOT,
    )
    passed = [line for line in proc.stdout.splitlines() if " passed" in line]
    assert passed and "failed" not in passed[-1], proc.stdout
    count = int(passed[-1].split(" passed")[0].split()[-1])
    assert count >= len(tests), proc.stdout


def test_an_outside_protocol_must_take_an_outside_wire_id_and_every_trait():
    """What the entry-point loader refuses, without installing anything: a reused or an
    in-package wire id, a class that is not a protocol."""
    grr = ll.protocols.GRR
    with pytest.raises(RuntimeError, match="128–255"):
        _registry.register(grr, "a test")
    with pytest.raises(RuntimeError, match="not a protocol class"):
        _registry.register([int], "a test")
