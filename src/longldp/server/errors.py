"""The one exception a client can fix: an HTTP status, a message, and for a batch the index of
the first bad item. Raised by every part of the server; the web layer answers it as JSON."""

from __future__ import annotations


class ClientError(ValueError):
    """A request the client can fix: HTTP ``status``, a message, optionally the bad item."""

    def __init__(self, status: int, message: str, item: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.item = item
