"""The one exception a client can fix: an HTTP status, a message, for a batch the index of
the first bad item, and headers to send (``Retry-After`` of a 425, 429 or 503). Raised by every
part of the server; the web layer answers it as JSON."""

from __future__ import annotations


class ClientError(ValueError):
    """A request the client can fix: HTTP ``status``, a message, optionally the bad item."""

    def __init__(
        self,
        status: int,
        message: str,
        item: int | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.item = item
        self.headers = headers or {}
