"""Connection timeouts of the collection server: uvicorn's HTTP/1.1 protocol (h11) with a
deadline for the request headers and one for the request body.

uvicorn closes a keep-alive connection left idle after a response (``timeout_keep_alive``),
but by itself it waits forever for a new connection's first bytes, for headers that trickle
in, and for a body shorter than its ``Content-Length`` (a "slowloris" holds a connection, a
task and a file descriptor that way). :class:`GuardedH11Protocol` adds:

- **header deadline**: from the moment a connection opens, and again after each response, the
  next request's complete headers must arrive within ``header_timeout`` seconds, else the
  server answers ``408 Request Timeout`` and closes the connection;
- **body deadline**: once the headers are in, the whole body must arrive within
  ``body_timeout`` seconds, else ``408`` (if no answer has started) and the connection closes;
  the application sees the client as gone;
- **write deadline**: when the client reads its answer so slowly that the connection's send
  buffer fills (asyncio pauses writing above its high-water mark), the buffer must drain
  below the low-water mark within ``write_timeout`` seconds, else the connection is aborted
  and its buffered answer freed. A slow reader cannot keep a large answer in the server's
  memory: it must read at least the buffer's worth (64 KiB) every ``write_timeout`` seconds.

It also writes each answer in one piece: what uvicorn writes in one step of the event loop (an
answer's status line and headers, then its body: two writes, so two ``send`` system calls and
two TCP segments on the wire) leaves in one ``send`` at the end of that step
(:class:`CoalescedWrites`); a write of :data:`FLUSH_BYTES` or more goes out at once, so large
and streamed answers keep the transport's flow control as they had it.

The timeouts are read from the uvicorn ``Config`` object (attributes ``header_timeout``,
``body_timeout`` and ``write_timeout``, set by :func:`longldp.server.serve`), so they reach
every worker process.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Defaults (seconds), also the ``longldp serve`` options' defaults.
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 60.0
KEEP_ALIVE_TIMEOUT = 5
WRITE_TIMEOUT = 30.0
#: Bytes held for one step of the event loop at most (more are written at once).
FLUSH_BYTES = 64 * 1024


class CoalescedWrites:
    """A transport whose small writes made in one step of the event loop are sent together,
    once the step ends (``loop.call_soon``); everything else is the wrapped transport's.
    ``close`` sends what is held first; ``abort`` drops it, as the transport drops its own
    buffer."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0
        self._flush_soon: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        """Hold ``data`` until the event loop's step ends (sent at once past FLUSH_BYTES)."""
        if not data:
            return
        self._held.append(data)
        self._size += len(data)
        if self._size >= FLUSH_BYTES:
            self.flush()
        elif self._flush_soon is None:
            self._flush_soon = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what is held now."""
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held.clear()
            self._size = 0
            self._transport.write(data)

    def close(self) -> None:
        """Send what is held, then close the wrapped transport."""
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is held and abort the wrapped transport."""
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        self._held.clear()
        self._size = 0
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body deadlines (see the module docstring)."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.header_timeout = float(getattr(config, "header_timeout", HEADER_TIMEOUT))
        self.body_timeout = float(getattr(config, "body_timeout", BODY_TIMEOUT))
        self.write_timeout = float(getattr(config, "write_timeout", WRITE_TIMEOUT))
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_kind = ""
        self._write_deadline: asyncio.TimerHandle | None = None

    # -- when the deadlines start and stop
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection (its writes coalesced): its first request's headers are due within
        the header timeout."""
        super().connection_made(CoalescedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._arm(self.header_timeout, self._headers_late)

    def data_received(self, data: bytes) -> None:
        """Bytes in: parse them (uvicorn), then arm the deadline of where the request is."""
        super().data_received(data)
        self._follow_state()

    def on_response_complete(self) -> None:
        """After a response: uvicorn's keep-alive timer, and the next headers' deadline."""
        super().on_response_complete()
        self._follow_state()

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no deadline is left armed."""
        self._disarm()
        self._disarm_write()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The send buffer is full (the client reads slowly): it must drain in time."""
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.write_timeout, self._write_late)

    def resume_writing(self) -> None:
        """The send buffer drained: the client keeps up again."""
        self._disarm_write()
        super().resume_writing()

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_late(self) -> None:
        """The client has not read its answer in time: drop the connection and its buffer
        (``abort``: ``close`` would wait for the buffer to be sent)."""
        self._write_deadline = None
        if not self.transport.is_closing() or self.flow.write_paused:
            self.transport.abort()

    def _follow_state(self) -> None:
        """Arm the deadline that fits where the current request is."""
        if self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.IDLE:  # waiting for the next request's headers
            if self._deadline is None or self._deadline_kind != "headers":
                self._arm(self.header_timeout, self._headers_late)
        elif state is h11.SEND_BODY:  # headers in, body coming
            if self._deadline is None or self._deadline_kind != "body":
                self._arm(self.body_timeout, self._body_late)
        else:  # the request is complete (or the connection is closing)
            self._disarm()

    def _arm(self, seconds: float, handler: Any) -> None:
        self._disarm()
        self._deadline_kind = "headers" if handler == self._headers_late else "body"
        self._deadline = self.loop.call_later(seconds, handler)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    # -- what happens when one passes
    def _headers_late(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is being written: the keep-alive logic takes over after it
        self.transport.write(
            _raw_408(f"request headers not received within {self.header_timeout:g} s")
        )
        self.transport.close()

    def _body_late(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body:
            return
        if not cycle.response_started:
            message = f"request body not received within {self.body_timeout:g} s"
            body = json.dumps({"error": message + "."}).encode()
            try:
                out = self.conn.send(
                    h11.Response(
                        status_code=408,
                        reason=b"Request Timeout",
                        headers=[
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                        ],
                    )
                )
                out = (out or b"") + (self.conn.send(h11.Data(data=body)) or b"")
                out += self.conn.send(h11.EndOfMessage()) or b""
                self.transport.write(out)
            except h11.LocalProtocolError:
                pass
            cycle.response_started = True  # the application's own answer is dropped
        cycle.disconnected = True
        cycle.message_event.set()  # the application's receive() now reports a disconnect
        self.transport.close()


def _raw_408(message: str) -> bytes:
    """A complete 408 answer, written before any request exists (h11 cannot send one then)."""
    body = json.dumps({"error": message + "."}).encode()
    return (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
