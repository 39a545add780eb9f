"""The files that restate the protocol registry are generated from it and are not stale
(docs/design.md §8): the JavaScript client's table (clients/js/src/registry.js) and the three
registry tables of docs/client-spec.md (scripts/registry_tables.py); the device test vectors
are checked by tests/test_client_vectors.py, their cases read from the registry."""

from __future__ import annotations

import dataclasses
import re

import pytest

from longldp.protocols._registry import BUILTIN_CLASSES
from server_helpers import ROOT
from test_docstrings import load_script


@pytest.fixture(scope="module")
def tables():
    return load_script("registry_tables")


def test_generated_files_are_current(tables):
    for path, text in tables.outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run python scripts/registry_tables.py"
        )
    assert tables.main(["--check"]) == 0


def test_a_changed_registry_makes_them_stale(tables, monkeypatch):
    """The check can fail: a protocol that changes a default or its client spec is seen."""
    grr = BUILTIN_CLASSES[0]
    spec = dataclasses.replace(grr.client_spec, round1="y = something else")
    monkeypatch.setattr(grr, "client_spec", spec)
    stale = [p for p, text in tables.outputs().items() if p.read_text(encoding="utf-8") != text]
    assert stale == [tables.CLIENT_SPEC]
    assert tables.main(["--check"]) == 1


def test_the_js_table_has_every_parameter_and_default(tables):
    """Every constructor parameter of every protocol with a device client, with its default,
    and a planned protocol's plan keys (an independent read of the dataclass fields and traits
    against the generated JavaScript)."""
    js = tables.JS_REGISTRY.read_text(encoding="utf-8")
    for cls in tables.device_classes():
        row = re.search(
            rf'^  "{re.escape(cls.name)}": \[(\d+), ([01]), "(\w+)", \{{(.*)\}}(, \[(.*)\])?\],$',
            js,
            flags=re.M,
        )
        assert row, cls.name
        # A planned protocol's row ends with its plan keys; no other row has them.
        keys = None if row.group(5) is None else re.findall(r'"(\w+)"', row.group(6))
        assert keys == (list(cls.plan_keys) if cls.rounds.planned else None), cls.name
        assert int(row.group(1)) == cls.wire_id and row.group(3) == cls.client_spec.family
        assert (row.group(2) == "1") == cls.longitudinal
        fields = [f for f in dataclasses.fields(cls) if f.init]
        assert re.findall(r"(\w+): \[", row.group(4)) == [f.name for f in fields]
        for f in fields:
            if f.default is not dataclasses.MISSING:
                assert re.search(rf"{f.name}: \[\w+, [^\]]+\]", row.group(4)), (cls.name, f.name)
        assert (ROOT / "clients" / "js" / "src" / f"{cls.client_spec.family}.js").exists()
