"""A small driver of headless chromium over the DevTools protocol on a pipe (no dependencies).

``chromium --remote-debugging-pipe`` reads commands on file descriptor 3 and writes answers and
events on descriptor 4, each a JSON object followed by a NUL byte. :class:`Chromium` starts a
headless browser with a fresh profile (or a given one, to keep its storage), opens one page and
offers ``navigate``, ``reload`` and ``evaluate`` (a JavaScript expression, awaited, its value
returned as JSON). Used by the end-to-end test of the browser client (tests/test_js_client.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-pipe",
]


#: Flags of a one-shot headless run (``--dump-dom``, ``--screenshot``): the page's scripts get
#: 5 s of virtual time.
ONE_SHOT = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--virtual-time-budget=5000",
]


def one_shot(binary: str, profile: Path, url: str, *action: str) -> str:
    """Run chromium once on ``url`` with ``action`` (``--dump-dom``, ``--screenshot=…``) and a
    fresh profile folder; its standard output (the DOM after the page's scripts ran)."""
    return subprocess.run(
        [binary, *ONE_SHOT, f"--user-data-dir={profile}", *action, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


class CdpError(RuntimeError):
    """A DevTools command failed, or the page threw."""


class Chromium:
    """One headless chromium process and one page, driven over the DevTools pipe."""

    def __init__(self, binary: str, profile: Path, timeout: float = 300.0):
        self.timeout = timeout
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:
            # In the child: fd 3 reads commands, fd 4 writes answers. Copies above 10 first, so
            # that neither dup2 overwrites the other's source; dup2 makes 3 and 4 inheritable,
            # and every other descriptor of ours is close-on-exec.
            r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)
            os.close(r)
            os.close(w)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds,
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        target = self.command("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.command("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.command("Page.enable", session=True)
        self.command("Runtime.enable", session=True)

    # ---------------------------------------------------------------- protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise CdpError("chromium: no answer before the deadline")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise CdpError(f"chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def command(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events met meanwhile are kept)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise CdpError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event ``method`` not yet consumed (waiting for it if need be)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    # ---------------------------------------------------------------- page
    def navigate(self, url: str) -> None:
        self.events.clear()
        self.command("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def reload(self) -> None:
        self.events.clear()
        self.command("Page.reload", session=True, ignoreCache=True)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` (promises awaited); a thrown error raises."""
        result = self.command(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"page threw: {text}")
        return result["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(CdpError, OSError):
            self.command("Browser.close")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
