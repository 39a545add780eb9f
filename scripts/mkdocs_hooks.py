"""MkDocs hooks of the documentation site (`mkdocs.yml`): the API reference pages, and links to
repository files outside `docs/`.

* **API reference.** One page per package (`reference/<package>.md`), generated at build time
  with a mkdocstrings block (``::: module``) for each public module, the modules listed by
  `scripts/check_docstrings.py`'s `public_modules` (the same walk that checks every public
  object has a docstring); `reference/index.md` links them. Nothing is kept by hand: a new
  module appears in the reference at the next build.
* **Links outside `docs/`.** A page may link a file of the repository outside the site
  (`../../benchmarks/README.md`, a figure under `experiments/results/`). An image is copied into
  the site (under `_repository/`, the link rewritten to it); any other file becomes its
  repository path in code (`benchmarks/README.md`), since the site cannot serve it. A link to a
  file that does not exist, or outside the repository, fails the build: with `--strict` every
  broken link fails, inside the site (MkDocs' own validation) or out of it (here).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
REPO_PREFIX = "_repository"
IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
FENCE = re.compile(r"^\s*(```|~~~)")
#: A Markdown link (its text may hold code spans), or a code span (left alone).
TOKEN = re.compile(r"(!?)\[((?:[^\]`]|`[^`]*`)*)\]\(([^)\s]+)\)|(`[^`]*`)")


def public_modules() -> list[str]:
    """The public modules of longldp, from scripts/check_docstrings.py (one list, one place)."""
    spec = importlib.util.spec_from_file_location(
        "check_docstrings", ROOT / "scripts" / "check_docstrings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_docstrings", module)
    spec.loader.exec_module(module)
    return module.public_modules()


def package_of(module: str) -> str:
    """The reference page a module belongs to: ``longldp.protocols.grr`` → ``protocols``;
    applications by application (``apps.rappor``); top-level modules share ``longldp``."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and not (ROOT / "src" / Path(*parts)).is_dir()):
        return "longldp"
    if parts[1] == "apps" and len(parts) > 2:
        return f"apps.{parts[2]}"
    return parts[1]


def reference_pages() -> dict[str, str]:
    """src_uri → Markdown of every API reference page."""
    groups: dict[str, list[str]] = {}
    for module in public_modules():
        groups.setdefault(package_of(module), []).append(module)
    pages = {}
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings when the site is built (mkdocstrings; nothing here is",
        "written by hand). One page per package; each public module with its functions, classes",
        "and their methods. The formulas and their sources are in the docstrings and in",
        "[math.md](../math.md); the design of the packages in [design.md](../design.md).",
        "",
    ]
    for group, modules in sorted(groups.items()):
        name = "longldp" if group == "longldp" else f"longldp.{group}"
        lines.append(f"- [`{name}`]({group}.md): {len(modules)} module(s)")
        body = [f"# `{name}`", ""]
        for module in modules:
            body += [f"::: {module}", "    options:", "      heading_level: 2", ""]
        pages[f"reference/{group}.md"] = "\n".join(body)
    pages["reference/index.md"] = "\n".join(lines) + "\n"
    return pages


def _links(markdown: str) -> list[str]:
    """Every link target outside fenced code and code spans."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += [m.group(3) for m in TOKEN.finditer(line) if m.group(4) is None]
    return found


def _outside_targets(markdown: str, page_path: Path, docs_dir: Path) -> list[tuple[str, Path]]:
    """(target, resolved path) of every link leaving docs/."""
    found = []
    for target in _links(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path = (page_path.parent / target.partition("#")[0]).resolve()
        if docs_dir not in path.parents:
            found.append((target, path))
    return found


def on_files(files: Files, config: Any) -> Files:
    """Add the generated API pages and the repository images the pages show."""
    for uri, text in reference_pages().items():
        files.append(File.generated(config, uri, content=text))
    docs_dir = Path(config["docs_dir"]).resolve()
    images: set[Path] = set()
    for page in docs_dir.rglob("*.md"):
        for _, path in _outside_targets(page.read_text(encoding="utf-8"), page, docs_dir):
            if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file() and ROOT in path.parents:
                images.add(path)
    for path in sorted(images):
        uri = f"{REPO_PREFIX}/{path.relative_to(ROOT).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Rewrite links that leave docs/ (see the module docstring); fail on a broken one."""
    if page.file.abs_src_path is None:  # a generated page: no links out
        return markdown
    docs_dir = Path(config["docs_dir"]).resolve()
    src = Path(page.file.abs_src_path).resolve()
    depth = page.file.src_uri.count("/")

    def fix(match: re.Match) -> str:
        bang, text, target, code = match.groups()
        if code is not None or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path = (src.parent / target.partition("#")[0]).resolve()
        if docs_dir in path.parents:
            return match.group(0)  # inside the site: MkDocs validates it
        if ROOT not in path.parents or not path.exists():
            raise PluginError(
                f"{page.file.src_uri}: the link {target!r} names no file of the repository"
            )
        rel = path.relative_to(ROOT).as_posix()
        if bang and path.suffix.lower() in IMAGE_SUFFIXES:
            return f"![{text}]({'../' * depth}{REPO_PREFIX}/{rel})"
        shown = rel + ("/" if path.is_dir() else "")
        plain = text.strip("`")
        return f"`{shown}`" if plain in (rel, shown, target) else f"{text} (`{shown}`)"

    out, fenced = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        if fenced:
            out.append(line)
            continue
        out.append(TOKEN.sub(fix, line))
    return "\n".join(out)
