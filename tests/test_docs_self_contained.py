"""The repository explains itself: no text cites a document outside it, and every citation of
docs/math.md or docs/design.md names a section that exists (docs/design.md §10)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"math": ROOT / "docs" / "math.md", "design": ROOT / "docs" / "design.md"}

#: Phrases that only made sense beside the previous team's private documents. Built from pieces
#: so that this file does not match itself.
FORBIDDEN = (
    "DESIGN" + " §",
    "DESIGN" + ".md",
    "shared" + "/notes",
    "shared" + "/seeds",
    "../" + "shared",
    "notes" + " §",
    "by the" + " lead",
)

#: A numbered heading ("## 3. Title", "### 3.2 Title") or a bold label ("**8.10.1** text").
SECTION = re.compile(r"^(?:#{1,6}\s+|\*\*)(\d+(?:\.\d+)*)\.?(?:\*\*)?\s")
#: "docs/math.md §3.2", "math §3.2", "docs/design.md §4", "design §4", with any continuation
#: such as "§8.6–§8.9" or "§9.2, §9.5".
CITATION = re.compile(
    r"\b(?:docs/)?(math|design)(?:\.md)?\s+§(\d+(?:\.\d+)*)"
    r"((?:\s*(?:[–-]|,|and)\s*§\d+(?:\.\d+)*)*)"
)
FOLLOWING = re.compile(r"§(\d+(?:\.\d+)*)")


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        skip = {".git", ".venv", "venv", "build", "dist", "__pycache__", "results"}
        names = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
        ]
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def _text_files() -> dict[Path, str]:
    texts = {}
    for path in _tracked_files():
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


TEXTS = _text_files()


def sections(doc: str) -> set[str]:
    """Section numbers defined in docs/<doc>.md."""
    lines = DOCS[doc].read_text(encoding="utf-8").splitlines()
    return {m.group(1) for line in lines if (m := SECTION.match(line))}


def citations(text: str) -> list[tuple[str, str]]:
    """(document, section) of every citation of docs/math.md or docs/design.md in ``text``."""
    found = []
    for m in CITATION.finditer(text):
        found.append((m.group(1), m.group(2)))
        found.extend((m.group(1), s) for s in FOLLOWING.findall(m.group(3)))
    return found


def test_the_two_documents_exist_and_are_numbered():
    for doc, path in DOCS.items():
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
        numbers = sections(doc)
        assert {"1", "2", "3"} <= numbers, f"docs/{doc}.md has no numbered sections"


def test_the_scanner_sees_the_sources():
    names = {p.relative_to(ROOT).as_posix() for p in TEXTS}
    assert {"README.md", "src/longldp/privacy/__init__.py", "docs/math.md"} <= names


@pytest.mark.parametrize("phrase", FORBIDDEN)
def test_no_reference_outside_the_repository(phrase):
    hits = [
        f"{path.relative_to(ROOT)}:{i}"
        for path, text in TEXTS.items()
        for i, line in enumerate(text.splitlines(), 1)
        if phrase in line
    ]
    assert not hits, f"{phrase!r} found in: {', '.join(hits[:20])}"


def test_every_cited_section_exists():
    known = {doc: sections(doc) for doc in DOCS}
    missing = []
    for path, text in TEXTS.items():
        if path in DOCS.values() or path == Path(__file__).resolve():
            continue  # the documents' own cross-references use bare "§x"; this file's examples
        for i, line in enumerate(text.splitlines(), 1):
            for doc, number in citations(line):
                if number not in known[doc]:
                    missing.append(f"{path.relative_to(ROOT)}:{i}: docs/{doc}.md §{number}")
    assert not missing, "citations of sections that do not exist:\n" + "\n".join(missing)


def test_the_checker_catches_a_bad_citation():
    cited = citations("see docs/math.md §3.2 and math §8.6–§8.9, design §4, docs/design.md §99")
    assert cited == [
        ("math", "3.2"),
        ("math", "8.6"),
        ("math", "8.9"),
        ("design", "4"),
        ("design", "99"),
    ]
    assert "99" not in sections("design")
