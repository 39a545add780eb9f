"""The documentation site's hooks (scripts/mkdocs_hooks.py): the generated API reference covers
every public module, links that leave docs/ become repository paths or copied figures, and a
link to a file that does not exist fails the build. `make test` builds the whole site with
`mkdocs build --strict` (MkDocs' own validation of links and anchors inside the site)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from server_helpers import ROOT


def hooks() -> types.ModuleType:
    path = ROOT / "scripts" / "mkdocs_hooks.py"
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mkdocs_hooks"] = module
    spec.loader.exec_module(module)
    return module


def test_the_reference_has_a_page_for_every_public_module():
    h = hooks()
    pages = h.reference_pages()
    blocks = {
        line.removeprefix("::: ")
        for text in pages.values()
        for line in text.splitlines()
        if line.startswith("::: ")
    }
    assert blocks == set(h.public_modules())
    assert "longldp.protocols.grr" in pages["reference/protocols.md"]
    index = pages["reference/index.md"]
    others = [uri.removeprefix("reference/") for uri in pages if uri != "reference/index.md"]
    assert all(f"]({name})" in index for name in others)


class _Page:
    def __init__(self, path: Path):
        self.file = types.SimpleNamespace(
            abs_src_path=str(path), src_uri=path.relative_to(ROOT / "docs").as_posix()
        )


def _rewrite(markdown: str, page: str = "guide/x.md") -> str:
    h = hooks()
    config = {"docs_dir": str(ROOT / "docs")}
    return h.on_page_markdown(markdown, _Page(ROOT / "docs" / page), config, None)


def test_links_outside_the_site_become_repository_paths_or_copied_figures():
    text = (
        "See [the benchmarks](../../benchmarks/README.md), [`DATA.md`](../../DATA.md), "
        "[math](../math.md#1-frequency-oracles), `[not a link](x)` and "
        "![a figure](../../experiments/results/audit/asr.png).\n"
        "```\n[inside code](../../nowhere.md)\n```"
    )
    out = _rewrite(text)
    assert "the benchmarks (`benchmarks/README.md`)" in out
    assert "`DATA.md`" in out and "](../../DATA.md)" not in out
    assert "[math](../math.md#1-frequency-oracles)" in out  # inside the site: left to MkDocs
    assert "![a figure](../_repository/experiments/results/audit/asr.png)" in out
    assert "`[not a link](x)`" in out and "[inside code](../../nowhere.md)" in out


@pytest.mark.parametrize("target", ["../../no/such/file.md", "../../../outside.md"])
def test_a_broken_link_fails_the_build(target):
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="names no file of the repository"):
        _rewrite(f"A [broken link]({target}).")
