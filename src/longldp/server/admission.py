"""Admission control: a process-wide budget of the bytes the requests in flight may hold.

Every request takes a :class:`Ticket` from the process's :class:`Budget` before anything is
read: a fixed part and three times its declared body (the body, its chunks and the arrays it
is split into). Once the request knows what it will compute (its collection's protocol, the
answer it will build), it asks for the rest (:meth:`Ticket.need`, from
:mod:`longldp.server.sizing`'s figures). A request that does not fit what the others hold is
answered ``503`` with ``Retry-After`` at once, before its body is read or its work begins,
instead of the process running out of memory; the ticket is given back when the answer has
been written (a slow reader keeps it until then, and :mod:`longldp.server.timeouts` bounds how
long). A lone request always fits: the budget is at least the largest footprint a collection
may have (``Limits.max_inflight_bytes ≥ max_collection_bytes``).

:class:`AdmissionMiddleware` also refuses a body by its declared length (413) before a byte of
it is read, on every path, and gives a chunked body (no ``Content-Length``) the budget of a
maximal one.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from longldp.server.errors import ClientError

#: The fixed part of a request's ticket (interpreter objects, headers, routing).
REQUEST_BASE = 256 * 1024
#: Seconds a client refused for lack of memory is asked to wait.
BUSY_RETRY_S = 2


class Budget:
    """Bytes of working memory the requests in flight may hold, process-wide (thread-safe)."""

    def __init__(self, total: int):
        self.total = int(total)
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Reserve ``n`` bytes if they fit; whether they did."""
        with self._lock:
            if self.used + n > self.total:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        """Return ``n`` reserved bytes."""
        with self._lock:
            self.used -= n


class Ticket:
    """One request's reservation, grown as the request learns what it needs."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.held = 0

    def need(self, n: int) -> None:
        """Hold at least ``n`` bytes in all; 503 with ``Retry-After`` when they do not fit."""
        more = int(n) - self.held
        if more <= 0:
            return
        if not self.budget.take(more):
            raise ClientError(
                503,
                "the server is busy (its memory budget is taken by requests in flight); "
                "retry later.",
                headers={"Retry-After": str(BUSY_RETRY_S)},
            )
        self.held += more

    def release(self) -> None:
        """Give everything back (when the answer has been written)."""
        self.budget.give(self.held)
        self.held = 0


def ticket_of(scope: dict[str, Any]) -> Ticket | None:
    """The ticket :class:`AdmissionMiddleware` gave the request of ``scope`` (None outside it)."""
    return scope.get("state", {}).get("ticket")


class AdmissionMiddleware:
    """Pure ASGI middleware: declared bodies above ``max_body_bytes`` refused (413) and every
    request admitted against ``budget`` (503) before anything is read."""

    def __init__(self, app: Any, budget: Budget, max_body_bytes: int):
        self.app = app
        self.budget = budget
        self.max_body_bytes = int(max_body_bytes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        chunked = False
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _answer(send, 400, "Content-Length is not an integer.")
                    return
            elif key == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if declared is not None and declared > self.max_body_bytes:
            await _answer(
                send,
                413,
                f"the body has {declared} bytes; at most {self.max_body_bytes} allowed.",
                {"connection": "close"},
            )
            return
        body = self.max_body_bytes if chunked and declared is None else declared or 0
        ticket = Ticket(self.budget)
        try:
            ticket.need(REQUEST_BASE + 3 * body)
        except ClientError as exc:
            await _answer(send, exc.status, exc.message, {**exc.headers, "connection": "close"})
            return
        scope.setdefault("state", {})["ticket"] = ticket
        try:
            await self.app(scope, receive, send)
        finally:
            ticket.release()


async def _answer(send: Any, status: int, message: str, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    await send_json(send, status, {"error": message}, headers)


async def send_json(
    send: Any, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    """Answer ``payload`` as JSON on a raw ASGI ``send``, encoded as Starlette's
    ``JSONResponse`` encodes it (compact, UTF-8), with ``headers`` added."""
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    data = body.encode()
    raw = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
