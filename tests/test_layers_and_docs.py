"""Import layering (docs/design.md §1) and the README's example, executed as written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "longldp"

#: Which longldp modules each layer may import. Leaves (postprocess, metrics) import nothing.
ALLOWED = {
    "_validate": set(),
    "privacy": {"_validate", "privacy"},
    # Shuffle accounting: pure math beside privacy, on SciPy (extra "shuffle").
    "shuffle": {"_validate", "privacy"},
    "postprocess": set(),
    "metrics": set(),
    "protocols": {"_validate", "privacy", "postprocess", "protocols"},
    "data": {"_validate", "privacy", "data"},
    "simulate": {"privacy", "postprocess", "metrics", "protocols", "data", "_validate"},
    "apps": {
        "_validate",
        "privacy",
        "postprocess",
        "metrics",
        "protocols",
        "data",
        "simulate",
        "apps",
    },
    "audit": {"_validate", "privacy", "postprocess", "metrics", "protocols", "simulate", "audit"},
    # Report archives (Parquet layout, aggregation, simulated writers) sit on the protocols.
    "archive": {"_validate", "privacy", "postprocess", "protocols", "archive", "__init__"},
    # Poisoning attacks and defences: they attack the applications and run defences on stored
    # reports (archives); the experiments and interfaces sit above them.
    "attacks": {
        "_validate",
        "privacy",
        "postprocess",
        "metrics",
        "protocols",
        "data",
        "simulate",
        "apps",
        "archive",
        "attacks",
    },
    "experiments": {
        "attacks",
        "audit",
        "_validate",
        "privacy",
        "postprocess",
        "metrics",
        "protocols",
        "data",
        "simulate",
        "apps",
        "experiments",
        "__init__",
    },
    # Interfaces: the device client sits on the protocols only (small dependencies).
    "client": {"_validate", "privacy", "postprocess", "protocols", "client", "__init__"},
    # Interfaces: the collection server sits on the protocols (exports report archives, and
    # shows a collection's central privacy under shuffling); nothing imports it back.
    "server": {
        "_validate",
        "privacy",
        "shuffle",
        "postprocess",
        "protocols",
        "archive",
        "server",
        "__init__",
    },
}


def _layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "longldp":
                names = [f"longldp.{a.name}" for a in node.names]
        for name in names:
            if name == "longldp":
                found.add("__init__")
            elif name.startswith("longldp."):
                found.add(name.split(".")[1])
    return found


@pytest.mark.parametrize(
    "path", sorted(p for p in SRC.rglob("*.py") if _layer(p) in ALLOWED), ids=str
)
def test_no_upward_imports(path):
    layer = _layer(path)
    bad = _imported_layers(path) - ALLOWED[layer] - {layer}
    assert not bad, f"{path.relative_to(ROOT)} ({layer}) imports {sorted(bad)}"


def test_protocol_and_math_modules_need_only_numpy():
    """The core install is NumPy alone (pyproject's dependencies): no SciPy here."""
    allowed_roots = {
        "numpy",
        "statistics",
        "longldp",
        "__future__",
        "math",
        "numbers",
        "dataclasses",
        "typing",
        "abc",
        "collections",
        "os",
        "sys",
        "types",
        "itertools",
        "functools",
        "enum",
        # standard library, for the wire format and the keyed round-1 stream
        "hashlib",
        "hmac",
        "json",
        "base64",
        "binascii",
        "struct",
        # standard library, for the entry points of protocols from other packages
        "importlib",
    }
    for path in [
        *sorted((SRC / "privacy").glob("*.py")),
        SRC / "postprocess.py",
        *sorted((SRC / "protocols").glob("*.py")),
    ]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed_roots, f"{path.name} imports {roots - allowed_roots}"


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no Python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_design_protocol_example_runs():
    """docs/design.md §2.1's example runs as written, given the names it leaves to the reader
    (a population of 10 users holding codes of [0, 74) and their OUE reports)."""
    import numpy as np

    import longldp as ll

    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("### 2.1") : text.index("### 2.2")]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    rng = np.random.default_rng(0)
    values = rng.integers(0, 74, size=10)
    given = {
        "n": 10,
        "f": 0.1,
        "value": 3,
        "n_users": 10,
        "values": values,
        "rng": rng,
        "true_counts": np.bincount(values, minlength=74),
        "reports": ll.protocol("OUE", k=74, eps=1.0).perturb(values, rng=rng),
    }
    exec(compile(blocks[0], "docs/design.md", "exec"), given)
    assert given["freqs"].shape == (74,)
