"""Every public object of longldp has a docstring and every cross-reference in them resolves
(scripts/check_docstrings.py); the API reference of the documentation site is rendered from
these docstrings at build time."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from server_helpers import ROOT


def load_script(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_public_object_has_a_docstring_and_its_references_resolve():
    check = load_script("check_docstrings")
    ref = check.build()
    assert ref.ok, "\n".join(ref.problems())
    names = {e.name for e in ref.entries}
    for name in ("longldp.apps.rappor.decode", "longldp.protocols", "longldp.experiments.plot"):
        assert name in names
    assert not any(n.startswith("longldp.cli") for n in names)  # documented by --help


def test_the_check_can_fail(monkeypatch):
    check = load_script("check_docstrings")
    fake = types.ModuleType("longldp_fake_for_api_check")
    fake.__doc__ = "A module for the test (see :func:`documented`)."

    def documented() -> None:
        """Points at :func:`nowhere_at_all` and `longldp.no_such_module`."""

    def undocumented() -> None:
        pass

    for f in (documented, undocumented):
        f.__module__ = fake.__name__
        setattr(fake, f.__name__, f)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    ref = check.build([fake.__name__])
    assert not ref.ok
    assert ref.missing == [f"{fake.__name__}.undocumented"]
    assert {b.split(": ")[1] for b in ref.broken} == {"nowhere_at_all", "longldp.no_such_module"}
