"""The tutorials run (docs/tutorials/): each page's code blocks, in order, in a temporary folder,
as a reader would type them. ```python blocks run in one namespace per page, ```bash blocks in
bash with `set -e` (the `longldp` command of this environment first on PATH; `PORT` a free
port, for the server tutorial). The folder holds the repository's `experiments/` and
`clients/` (read only), so the pages can name the shipped study files and clients."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from server_helpers import ROOT, free_port

TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of the page's fenced blocks, in order."""
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def test_there_are_four_tutorials_and_they_hold_code():
    names = {p.stem for p in TUTORIALS}
    assert names == {
        "reproduce-a-seed-study",
        "deploy-a-collection",
        "audit-a-foreign-client",
        "attack-and-defend",
    }
    for page in TUTORIALS:
        langs = {lang for lang, _ in blocks(page)}
        assert langs <= {"python", "bash", "text"} and langs & {"python", "bash"}, page.name


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_the_tutorial_runs(page, tmp_path, monkeypatch):
    for name in ("experiments", "clients"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    env = {
        **os.environ,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
        "PORT": str(free_port()),
    }
    monkeypatch.setenv("PORT", env["PORT"])
    namespace: dict = {"__name__": "__tutorial__"}
    try:
        for i, (lang, code) in enumerate(blocks(page)):
            where = f"{page.name}, block {i + 1} ({lang})"
            if lang == "python":
                exec(compile(code, where, "exec"), namespace)
            elif lang == "bash":
                done = subprocess.run(
                    ["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                    text=True, timeout=300,
                )  # fmt: skip
                assert done.returncode == 0, (
                    f"{where}: exit {done.returncode}\n{done.stderr[-2000:]}"
                )
    finally:  # a server a failed page started is stopped (it wrote its pid)
        pid_file = tmp_path / "server.pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
