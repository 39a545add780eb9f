"""A small core install: ``pip install longldp`` pulls NumPy only (issue 8, §6).

The core (protocols, clients, aggregation, post-processing, simulation) needs NumPy alone;
pyarrow, matplotlib, SciPy, typer and rich come with the extras (``[data]``, ``[apps]``,
``[experiments]``, ``[cli]``, ``[all]``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "matplotlib", "pyarrow", "typer", "rich")

#: What a device and a server do with the core alone; prints the heavy modules it loaded.
CORE_SCRIPT = f"""
import json, sys
import numpy as np
import longldp as ll
from longldp.simulate import simulate

proto = ll.protocol("L-OSUE", k=10, eps_perm=2.0, eps_1=0.8)
client = proto.client()
payloads = [client.report_bytes(v) for v in (3, 3, 7)]
agg = proto.aggregator()
agg.add_bytes(payloads)
est = agg.estimate(postprocess="norm-sub")
assert est.shape == (10,) and abs(est.sum() - 1.0) < 1e-9 and (est >= 0).all()
rng = np.random.default_rng(1)
values = rng.integers(0, 10, size=(3, 2000))
sim = simulate(proto, values, rng)
assert sim.estimates.shape == (3, 10)
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps(heavy))
"""

#: On a core install, bundled data needs the `data` extra: the error names it.
NO_DATA_SCRIPT = """
from longldp.data import load
try:
    load("adult")
except ImportError as err:
    assert "longldp[data]" in str(err), err
else:
    raise AssertionError("longldp.data.load worked without pyarrow")
"""


def _env_with_src() -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_core_dependencies_are_numpy_only():
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["numpy"]
    extras = project["optional-dependencies"]
    assert {"data", "apps", "experiments", "cli", "all", "dev"} <= set(extras)
    assert any(all(x in d for x in ("data", "apps", "experiments", "cli")) for d in extras["all"])


def test_import_longldp_loads_no_heavy_package():
    proc = subprocess.run(
        [sys.executable, "-c", CORE_SCRIPT],
        capture_output=True,
        text=True,
        env=_env_with_src(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH (the source tree must not leak into the venv)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _pip(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env(), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_the_server_extra_brings_the_command():
    """`pip install '.[server]'` alone must give a working `longldp serve` (checked by hand in a
    fresh venv too): the extra pulls the `cli` extra, whose packages the command needs."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert "longldp[cli]" in extras["server"]
    assert "longldp[shuffle]" in extras["server"]  # the central figures of a collection


@pytest.mark.slow
@pytest.mark.install
def test_core_install_in_a_fresh_venv(tmp_path):
    """Build the wheel, install it with its dependencies into an empty venv, use it there."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    wheels = tmp_path / "wheels"
    fast = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))
    isolation = ["--no-build-isolation"] if fast else []
    _pip("wheel", "--quiet", "--no-deps", *isolation, "-w", str(wheels), str(tree))
    (wheel,) = wheels.glob("longldp-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--quiet", str(wheel))
    listed = _pip("--python", str(python), "list", "--format", "json").stdout
    assert sorted(p["name"].lower() for p in json.loads(listed)) == ["longldp", "numpy"]
    proc = subprocess.run(
        [str(python), "-c", CORE_SCRIPT],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    data = subprocess.run(
        [str(python), "-c", NO_DATA_SCRIPT],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        check=False,
    )
    assert data.returncode == 0, data.stderr
    # The command needs the `cli` extra: without it, one line that says so, not a traceback.
    command = subprocess.run(
        [str(venv / "bin" / "longldp"), "--help"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        check=False,
    )
    assert command.returncode == 2
    assert command.stderr.count("\n") == 1 and "longldp[cli]" in command.stderr
