"""Upload logic of the device client against a stub HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import longldp as ll
from longldp.client import DeviceClient
from longldp.client.upload import Uploader, fetch_protocol, parse_retry_after
from longldp.protocols import wire

PROTO = ll.protocol("L-GRR", k=8, eps_perm=2.0, eps_1=1.0)
#: A stub answer whose body is cut short after its headers (the connection drops).
CUT = "cut short"


class Stub:
    """Answers POSTs from a script of (status, headers, body); records every request."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": data}
                )
                status, headers, body = stub.script.pop(0) if stub.script else (200, {}, {})
                self._answer(status, headers, body)

            def do_GET(self):
                stub.requests.append({"path": self.path, "headers": dict(self.headers)})
                self._answer(
                    200, {}, {"protocol": PROTO.spec(), "fingerprint": PROTO.fingerprint().hex()}
                )

            def _answer(self, status, headers, body):
                if body == CUT:  # headers promise 100 bytes; 10 come, then the connection ends
                    self.send_response(status)
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    self.wfile.write(b'{"receive')
                    self.close_connection = True
                    return
                raw = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def records(self, i):
        return wire.decode_records(PROTO, self.requests[i]["body"])


@pytest.fixture
def stub():
    made = []

    def start(*script):
        s = Stub(script)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


def uploader(url, waits, **kw):
    return Uploader(url, "demo", "tok-123", sleep=waits.append, rand=lambda: 0.5, **kw)


def client_with(tmp_path, n):
    c = DeviceClient(tmp_path / "s", PROTO, "demo")
    ids = [c.report(i % 8, epoch=3) for i in range(n)]
    return c, ids


def test_success_sends_a_binary_batch_with_the_token(tmp_path, stub):
    s = stub((200, {}, {"accepted": 3}))
    client, ids = client_with(tmp_path, 3)
    waits: list[float] = []
    res = uploader(s.url, waits).flush(client)
    assert (res.acknowledged, res.remaining, waits) == (3, 0, [])
    req = s.requests[0]
    assert req["path"] == "/v1/collections/demo/reports"
    assert req["headers"]["Authorization"] == "Bearer tok-123"
    assert req["headers"]["Content-Type"] == "application/octet-stream"
    got_ids, epochs, _ = s.records(0)
    assert [bytes(i) for i in got_ids] == ids and epochs.tolist() == [3, 3, 3]
    assert DeviceClient(tmp_path / "s").queue == []


def test_retry_after_is_honoured_and_retries_reuse_ids(tmp_path, stub):
    s = stub(
        (503, {"Retry-After": "7"}, {"error": "db down"}),
        (429, {"Retry-After": "2"}, {}),
        (200, {}, {}),
    )
    client, _ = client_with(tmp_path, 4)
    waits: list[float] = []
    res = uploader(s.url, waits).flush(client)
    # jitter 0.5 × 1 s < 7 s asked; 0.5 × 2 s < 2 s asked
    assert waits == [7.0, 2.0] and res.acknowledged == 4
    assert s.requests[0]["body"] == s.requests[1]["body"] == s.requests[2]["body"]


def test_exponential_backoff_with_jitter_then_give_up_keeping_the_queue(tmp_path, stub):
    s = stub(*[(500, {}, {})] * 4, (408, {}, {}))
    client, ids = client_with(tmp_path, 2)
    waits: list[float] = []
    res = uploader(s.url, waits, max_attempts=5, base_delay=1.0, max_delay=5.0).flush(client)
    assert waits == [0.5, 1.0, 2.0, 2.5]  # 0.5 × min(5, 2^i), no wait after the last attempt
    assert (res.attempts, res.acknowledged, res.remaining) == (5, 0, 2)
    again = DeviceClient(tmp_path / "s")
    assert [q.id for q in again.queue] == ids  # the queue survives a restart
    s2 = stub((200, {}, {}))
    assert uploader(s2.url, []).flush(again).acknowledged == 2
    assert [bytes(i) for i in s2.records(0)[0]] == ids  # same report ids after the restart


def test_no_server_backs_off(tmp_path, stub):
    s = stub()
    url = s.url
    s.close()
    client, _ = client_with(tmp_path, 1)
    waits: list[float] = []
    res = uploader(url, waits, max_attempts=3, timeout=2.0).flush(client)
    assert res.remaining == 1 and waits == [0.5, 1.0]


def test_4xx_naming_an_item_drops_only_it(tmp_path, stub, caplog):
    s = stub((422, {}, {"error": "report 1 is bad", "item": 1}), (200, {}, {}))
    client, ids = client_with(tmp_path, 3)
    res = uploader(s.url, []).flush(client)
    assert (res.dropped, res.acknowledged, res.remaining) == (1, 2, 0)
    assert [bytes(i) for i in s.records(1)[0]] == [ids[0], ids[2]]
    assert f"dropped report {ids[1].hex()}" in caplog.text and "report 1 is bad" in caplog.text
    assert DeviceClient(tmp_path / "s").dropped == 1


def test_4xx_without_item_drops_the_batch(tmp_path, stub, caplog):
    s = stub((400, {}, {"error": "epoch 3 is closed"}))
    client, _ = client_with(tmp_path, 2)
    res = uploader(s.url, []).flush(client)
    assert (res.dropped, res.remaining) == (2, 0)
    assert "epoch 3 is closed" in caplog.text


def test_auth_failure_keeps_the_queue(tmp_path, stub, caplog):
    s = stub((401, {}, {"error": "invalid token."}))
    client, _ = client_with(tmp_path, 2)
    res = uploader(s.url, []).flush(client)
    assert (res.refused, res.dropped, res.remaining) == (401, 0, 2)
    assert "invalid token" in caplog.text


def test_413_halves_the_batch(tmp_path, stub):
    s = stub((413, {}, {}), (200, {}, {}), (200, {}, {}))
    client, _ = client_with(tmp_path, 4)
    res = uploader(s.url, [], batch_size=4).flush(client)
    assert res.acknowledged == 4
    assert [len(s.records(i)[0]) for i in range(3)] == [4, 2, 2]


def test_batches_are_bounded(tmp_path, stub):
    s = stub()
    client, _ = client_with(tmp_path, 5)
    uploader(s.url, [], batch_size=2).flush(client)
    assert [len(s.records(i)[0]) for i in range(3)] == [2, 2, 1]


def test_parse_retry_after_and_fetch_protocol(stub):
    assert parse_retry_after("12") == 12.0
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    s = stub()
    assert fetch_protocol(s.url, "demo", "tok") == PROTO
    with pytest.raises(ValueError, match="'base_url' must be http"):
        Uploader("ftp://x", "demo", "tok")


def test_an_answer_cut_short_is_no_answer(tmp_path, stub):
    """A connection that drops after the headers (http.client.IncompleteRead), on a success
    or on a refusal naming an item, is a transport error: back off, keep the queue, send the
    same ids again (main: flush raised IncompleteRead)."""
    s = stub((200, {}, CUT), (409, {}, CUT), (200, {}, {}))
    client, ids = client_with(tmp_path, 3)
    waits: list[float] = []
    res = uploader(s.url, waits).flush(client)
    assert waits == [0.5, 1.0]  # two backoffs, nothing dropped
    assert (res.acknowledged, res.dropped, res.remaining) == (3, 0, 0)
    assert [bytes(i) for i in s.records(2)[0]] == ids


def test_a_report_for_an_epoch_not_open_yet_is_kept(tmp_path, stub):
    """425 (the device's clock runs ahead of the collection's): the report it names stays
    queued for a later flush and the others are sent (main: dropped as refused)."""
    s = stub(
        (425, {"Retry-After": "30"}, {"error": "item 1: epoch 3 is not open yet", "item": 1}),
        (200, {}, {}),
    )
    client, ids = client_with(tmp_path, 3)
    res = uploader(s.url, []).flush(client)
    assert [bytes(i) for i in s.records(1)[0]] == [ids[0], ids[2]]
    assert [q.id for q in DeviceClient(tmp_path / "s").queue] == [ids[1]]
    assert (res.acknowledged, res.deferred, res.dropped, res.remaining) == (2, 1, 0, 1)
    s2 = stub((200, {}, {}))
    assert uploader(s2.url, []).flush(client).acknowledged == 1  # sent by the next flush
