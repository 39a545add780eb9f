"""Check the docstrings of the public API: every public object has one, every cross-reference
in them resolves.

    python scripts/check_docstrings.py

Walks every public module of ``longldp`` (no part of its name starts with ``_``; the command
line ``longldp.cli`` is documented by ``longldp --help`` instead) and, for every public function
and class (its ``__all__``, or else the functions and classes it defines) and the public
methods and properties of classes, exits with status 1 and a list of problems when

* a public module, function, class, method or property has no docstring (methods may
  inherit theirs; `KNOWN_UNDOCUMENTED` lists the methods of other owners' modules that had
  none when this check was written, and may only shrink), or
* a cross-reference in any of those docstrings does not resolve: a Sphinx role
  (``:func:`x```, ``:class:``, ``:meth:``, ``:mod:``, ``:attr:``, ``:data:``, ``:obj:``,
  ``:exc:``) or a backticked dotted name starting with ``longldp.``.

The API reference itself is the documentation site's "API reference" section, rendered from
the same docstrings by mkdocstrings when the site is built (`scripts/mkdocs_hooks.py` takes its
list of modules from `public_modules` here); `tests/test_docstrings.py` runs these checks and
shows that they catch a missing docstring and a broken reference.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

#: Packages left out of the reference (documented elsewhere).
EXCLUDED = ("longldp.cli",)

#: Public methods and properties without a docstring in modules owned by other parts of the
#: project when the check was introduced. Document one, then delete its line here: the check
#: fails on a listed name that has gained a docstring, so this list can only shrink.
KNOWN_UNDOCUMENTED = frozenset(
    {
        "longldp.apps.felip.grids.Axis.domain",
        "longldp.apps.felip.grids.FelipLayout.total_cells",
        "longldp.apps.felip.grids.FelipSchema.as_json",
        "longldp.apps.felip.grids.FelipSchema.domains",
        "longldp.apps.felip.grids.FelipSchema.from_json",
        "longldp.apps.felip.grids.FelipSchema.kinds",
        "longldp.apps.felip.grids.FelipSchema.names",
        "longldp.apps.felip.grids.Grid.shape",
        "longldp.apps.felip.pipeline.FelipPlan.grids",
        "longldp.apps.felip.pipeline.FelipResult.tau",
        "longldp.apps.felip.queries.Query.as_json",
        "longldp.apps.felip.queries.Query.describe",
        "longldp.apps.felip.queries.Workload.as_json",
        "longldp.apps.felip.queries.Workload.to_json",
        "longldp.apps.gfim.gfim.GFIMResult.budget",
        "longldp.apps.gfim.gfim.GFIMResult.params",
        "longldp.apps.gfim.gfim.GFIMResult.topk",
        "longldp.apps.setvalued.metrics.MetricTable.tau",
        "longldp.apps.setvalued.metrics.SetValuedTruth.tau",
        "longldp.apps.setvalued.svim.SVIMParams.describe",
        "longldp.apps.setvalued.svsm.SVSMParams.describe",
        "longldp.audit.game.LoopClients.report",
        "longldp.audit.game.PopulationClients.report",
        "longldp.audit.game.Reporter.report",
        "longldp.audit.game.StatelessClients.report",
        "longldp.experiments.kinds.gfim.GFIMDatasetSpec.as_json",
        "longldp.experiments.kinds.gfim.GFIMMethodSpec.as_json",
        "longldp.protocols.dbitflip.DBitFlipPM.n_buckets",
        "longldp.protocols.dbitflip.DBitFlipPM.report_dtype",
        "longldp.protocols.MemoStore.nbytes",
        "longldp.protocols.PopulationMemo.memos_per_user",
        "longldp.protocols.grr.GRR.p",
        "longldp.protocols.grr.GRR.q",
        "longldp.protocols.rappor.RAPPOR.onehot",
        "longldp.protocols.rappor.RAPPOR.report_dtype",
    }
)

ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|attr|data|obj|exc):`~?\.?([^`<>]+?)`")
DOTTED = re.compile(r"(?<![`:\w])`(longldp(?:\.\w+)+)(?:\(\))?`(?!`)")


@dataclass
class Entry:
    """One documented object: its qualified name, signature and docstring."""

    name: str
    kind: str  # "module", "function", "class", "method", "property"
    signature: str
    doc: str
    members: list[Entry] = field(default_factory=list)


@dataclass
class Reference:
    """The reference text and the problems found while building it."""

    entries: list[Entry]
    missing: list[str]
    broken: list[str]
    stale_allowlist: list[str]

    @property
    def ok(self) -> bool:
        return not (self.missing or self.broken or self.stale_allowlist)

    def problems(self) -> list[str]:
        return (
            [f"no docstring: {n}" for n in self.missing]
            + [f"broken cross-reference: {b}" for b in self.broken]
            + [
                f"documented now, delete it from KNOWN_UNDOCUMENTED: {n}"
                for n in self.stale_allowlist
            ]
        )


def public_modules(package: str = "longldp") -> list[str]:
    """Every public module of ``package``, the package first, in name order."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name.startswith(EXCLUDED):
            continue
        names.append(info.name)
    return sorted(names)


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, or the functions and classes the module defines (no leading ``_``)."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return list(declared)
    return [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__
    ]


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _members(cls: type, qualname: str) -> Iterator[tuple[str, str, Any, str]]:
    """(name, kind, object, docstring) of the public methods and properties ``cls`` defines."""
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, property):
            yield name, "property", raw.fget, inspect.getdoc(raw) or ""
            continue
        func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        if inspect.isfunction(func):
            # inspect.getdoc on the attribute also finds a docstring inherited from a base
            yield name, "method", func, inspect.getdoc(getattr(cls, name)) or ""


def collect(modules: list[str]) -> tuple[list[Entry], list[str], list[tuple[str, str, Any]]]:
    """Entries of the modules, the names without a docstring, and every docstring with its
    context (qualified name, text, the module or class it belongs to) for the reference check."""
    entries, missing, texts = [], [], []
    for mod_name in modules:
        module = importlib.import_module(mod_name)
        doc = inspect.getdoc(module) or ""
        if not doc:
            missing.append(mod_name)
        entry = Entry(mod_name, "module", "", doc)
        texts.append((mod_name, doc, module))
        for name in public_names(module):
            obj = getattr(module, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            home = getattr(obj, "__module__", "") or ""
            if home != mod_name and home.startswith("longldp") and home in modules:
                continue  # a re-export: documented where it is defined
            qual = f"{mod_name}.{name}"
            odoc = inspect.getdoc(obj) or ""
            if not odoc:
                missing.append(qual)
            kind = "class" if inspect.isclass(obj) else "function"
            item = Entry(qual, kind, _signature(obj), odoc)
            texts.append((qual, odoc, obj if inspect.isclass(obj) else module))
            if inspect.isclass(obj):
                for mname, mkind, func, mdoc in _members(obj, qual):
                    mqual = f"{qual}.{mname}"
                    if not mdoc:
                        missing.append(mqual)
                    sig = "" if mkind == "property" else _signature(func)
                    item.members.append(Entry(mqual, mkind, sig, mdoc))
                    texts.append((mqual, mdoc, obj))
            entry.members.append(item)
        entries.append(entry)
    return entries, missing, texts


def _resolve_absolute(target: str) -> bool:
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # a module that fails to import is not a target
            return False
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _resolve_in(scope: Any, target: str) -> bool:
    obj = scope
    parts = target.split(".")
    for i, attr in enumerate(parts):
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
            continue
        # a dataclass field or annotated attribute without a class-level default
        annotated = any(
            attr in getattr(c, "__annotations__", {}) for c in getattr(obj, "__mro__", ())
        )
        return annotated and i == len(parts) - 1
    return True


def broken_references(texts: list[tuple[str, str, Any]], known: set[str]) -> list[str]:
    """Cross-references in the docstrings that resolve nowhere: not from the docstring's
    module or class, not as an absolute import path, not as the tail of a documented name."""
    tails = {}
    for name in known:
        parts = name.split(".")
        for i in range(1, len(parts)):
            tails.setdefault(".".join(parts[i:]), name)
    out = []
    for where, doc, scope in texts:
        targets = [m.group(2).strip() for m in ROLE.finditer(doc)]
        targets += [m.group(1) for m in DOTTED.finditer(doc)]
        for target in targets:
            target = target.removesuffix("()")
            module = inspect.getmodule(scope) if not inspect.ismodule(scope) else scope
            if (
                _resolve_in(scope, target)
                or (module is not None and _resolve_in(module, target))
                or target in tails
                or _resolve_absolute(target)
            ):
                continue
            out.append(f"{where}: {target}")
    return out


def build(modules: list[str] | None = None) -> Reference:
    """Collect the entries of the public modules and check docstrings and references."""
    modules = public_modules() if modules is None else modules
    entries, missing, texts = collect(modules)
    known = {e.name for e in entries}
    for e in entries:
        for item in e.members:
            known.add(item.name)
            known.update(m.name for m in item.members)
    checked = set(missing)
    stale = sorted(n for n in KNOWN_UNDOCUMENTED if n in known and n not in checked)
    missing = [n for n in missing if n not in KNOWN_UNDOCUMENTED]
    return Reference(entries, missing, broken_references(texts, known), stale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    ref = build()
    if not ref.ok:
        for problem in ref.problems():
            print(problem, file=sys.stderr)
        print(f"check_docstrings: {len(ref.problems())} problem(s)", file=sys.stderr)
        return 1
    n = sum(1 + len(e.members) for e in ref.entries)
    print(f"check_docstrings: {n} public objects documented, every reference resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
