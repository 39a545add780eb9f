"""The documents hold together: every Markdown link and anchor resolves, docs/index.md lists
every document, the README is a landing page, the examples say what they do (the short
example's byte count, the `__main__` guard of multi-process examples), and every script under
experiments/ answers ``--help``. The docstring checks are tests/test_docstrings.py; the site's
hooks are tests/test_docs_site.py (`make test` builds the site with `mkdocs build --strict`)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in out if (ROOT / name).is_file()]


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    found = []
    for line in prose(path.read_text(encoding="utf-8")):
        line = re.sub(r"`[^`]*`", "", line)  # a link inside inline code is not a link
        found += LINK.findall(line)
    return found


def test_slug_matches_githubs_rule():
    assert slug("11. RAPPOR: Bloom filters, PRR/IRR and decoding") == (
        "11-rappor-bloom-filters-prrirr-and-decoding"
    )
    assert slug("12. Hadamard response (SH, L-SH) and GFIM") == (
        "12-hadamard-response-sh-l-sh-and-gfim"
    )
    assert slug("`bench_oracles.py`: one collection") == "bench_oraclespy-one-collection"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(path):
    bad = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(
                f"{target}: no file {dest.relative_to(ROOT) if ROOT in dest.parents else dest}"
            )
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not bad, f"{path.relative_to(ROOT)}: " + "; ".join(bad)


def test_the_checker_finds_a_broken_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## 2. Two\n\nSee [two](#2-two) and [three](#3-three).\n")
    assert "2-two" in anchors(page) and "3-three" not in anchors(page)
    assert links(page) == ["#2-two", "#3-three"]


def test_the_docs_index_lists_every_document():
    """docs/index.md (the site's home) links every page of docs/, subfolders included (the
    generated API reference aside), and the README points to it."""
    index = ROOT / "docs" / "index.md"
    listed = {(index.parent / t.partition("#")[0]).resolve() for t in links(index)}
    docs = {p.resolve() for p in (ROOT / "docs").rglob("*.md") if p != index}
    missing = sorted(str(p.relative_to(ROOT)) for p in docs - listed)
    assert not missing, f"docs/index.md does not list {missing}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/index.md" in readme


def test_the_readme_is_a_landing_page():
    """The README is a front door read in five minutes: under 250 lines, the two commands, one
    example per audience, links into the documentation."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count("\n") < 250
    for audience in ("Researchers", "App developers", "Auditors", "Attack researchers"):
        assert f"**{audience}" in text, audience
    for tutorial in sorted((ROOT / "docs" / "tutorials").glob("*.md")):
        assert f"docs/tutorials/{tutorial.name}" in text, tutorial.name


# ---------------------------------------------------------------------- examples
def python_blocks(path: Path) -> list[str]:
    """Every ```python block, dedented (a block inside a list item is indented)."""
    text = path.read_text(encoding="utf-8")
    found = re.findall(r"^([ \t]*)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_short_example_states_the_true_report_size(page):
    block = next(b for b in python_blocks(ROOT / page) if "report_bytes(31)" in b)
    said = re.search(r"report_bytes\(31\)\s+# (\d+) bytes", block)
    assert said, f"the {page} example no longer says how many bytes a report takes"
    namespace: dict = {}
    exec(compile(block, page, "exec"), namespace)
    assert len(namespace["payload"]) == int(said.group(1))


def _guarded(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if __name__ == "__main__":``."""
    inside = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            inside |= {id(n) for n in ast.walk(node)}
    return inside


@pytest.mark.parametrize(
    "path",
    [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_multiprocess_examples_have_the_main_guard(path):
    """Worker processes start with ``spawn`` and import the script again: a call with
    ``workers`` > 1 outside ``if __name__ == "__main__":`` would start them recursively."""
    for block in python_blocks(path):
        try:
            tree = ast.parse(block)
        except SyntaxError as err:  # a ```python block must be Python, not skipped unread
            pytest.fail(f"{path.name}: a ```python block does not parse: {err}")
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or id(node) in guarded:
                continue
            for kw in node.keywords:
                value = kw.value
                many = not (isinstance(value, ast.Constant) and value.value in (None, 1))
                assert not (kw.arg == "workers" and many), (
                    f'{path.name}: `{ast.unparse(node)}` needs `if __name__ == "__main__":`'
                )


@pytest.mark.slow
@pytest.mark.parametrize(
    "script", sorted((ROOT / "experiments").glob("*.py")), ids=lambda p: p.name
)
def test_experiment_scripts_answer_help(script):
    res = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:") and "Traceback" not in res.stderr
