"""Uploading a device's queue to the collection server over HTTP (standard library only).

**Identity.** A collection with device identities (the default, docs/server.md) gives the app an
*enrollment token*: on its first upload the device enrolls (``POST
{base_url}/v1/collections/{name}/devices``), receives its own credential and keeps it in its
state file; every upload then carries that credential. A collection in shared-token mode gives
one *ingest token* for every device instead. Construct ``Uploader(base_url, collection,
enroll_token=...)`` or ``Uploader(base_url, collection, token)`` accordingly.

``POST {base_url}/v1/collections/{name}/reports`` with ``Authorization: Bearer <credential or
ingest token>`` and a binary batch (``application/octet-stream``, docs/wire-format.md §4).
Report ids are the device's own: the server scopes them to the device, so another device (or an
attacker) posting the same ids cannot make this device's reports conflict. What each answer
does:

- **2xx**: the batch is committed on the server; its reports leave the queue.
- **408, 429, 5xx, or no complete answer** (connection refused or dropped, a timeout, an
  answer cut short after its headers: any transport error): the batch stays queued and is
  retried after an exponential backoff with full jitter, ``uniform(0, min(max_delay,
  base_delay·2^attempt))``, but never sooner than the server's ``Retry-After`` (seconds or an
  HTTP date). Retries send the same report ids, so the server counts each report once.
- **425** (the report's epoch is not open yet: this device's clock runs ahead of the
  collection's): the report named by ``"item"`` (the whole batch if none) stays queued and is
  left out of the rest of this flush; a later flush sends it again.
- **413** (batch too large): the batch is halved and sent again.
- **401, 403** (no or wrong token): nothing is dropped, the flush stops and logs an error:
  the reports are fine, the credentials are not.
- **another 4xx**: the server refuses the report for good (a 409 also when the device's quota
  of reports per epoch is spent). If the JSON answer names an ``"item"``, that report is
  dropped and the rest of the batch is sent again; otherwise the whole batch is dropped. Either
  way the drop is logged (logger ``longldp.client``).

Enrolling follows the same rules: 201 keeps the credential; 408, 429, 5xx or no answer back
off and retry; 401, 403 or 409 (a shared-token collection) stop the flush, queue kept.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from longldp.client import DeviceClient
from longldp.protocols import FrequencyOracle, protocol_from_spec

log = logging.getLogger("longldp.client")

RETRY_STATUSES = frozenset({408, 429})


@dataclass
class UploadResult:
    """What one :meth:`Uploader.flush` did."""

    acknowledged: int = 0
    dropped: int = 0
    attempts: int = 0
    remaining: int = 0
    #: HTTP status (401 or 403) that stopped the flush, else None.
    refused: int | None = None
    #: Reports kept for a later flush: their epoch is not open yet (425).
    deferred: int = 0
    waits: list[float] = field(default_factory=list)


@dataclass
class Uploader:
    """Sends a :class:`DeviceClient`'s queue to one collection of a server.

    ``sleep`` and ``rand`` (uniform on [0, 1)) are injectable for tests; by default
    :func:`time.sleep` and the OS random generator.
    """

    base_url: str
    collection: str
    token: str | None = None
    enroll_token: str | None = None
    batch_size: int = 500
    timeout: float = 10.0
    max_attempts: int = 8
    base_delay: float = 1.0
    max_delay: float = 3600.0
    sleep: Callable[[float], None] = time.sleep
    rand: Callable[[], float] = random.SystemRandom().random

    def __post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.base_url).scheme
        if scheme not in ("http", "https"):
            raise ValueError(f"Uploader: 'base_url' must be http(s)://…; got {self.base_url!r}.")
        if bool(self.token) == bool(self.enroll_token):
            raise ValueError(
                "Uploader: give exactly one of 'enroll_token' (device identities: the device "
                "enrolls on first use) and 'token' (the collection's shared ingest token)."
            )
        if self.batch_size < 1 or self.max_attempts < 1 or self.base_delay < 0:
            raise ValueError(
                "Uploader: 'batch_size' and 'max_attempts' must be ≥ 1, 'base_delay' ≥ 0."
            )

    @property
    def url(self) -> str:
        name = urllib.parse.quote(self.collection, safe="")
        return f"{self.base_url.rstrip('/')}/v1/collections/{name}/reports"

    @property
    def enroll_url(self) -> str:
        name = urllib.parse.quote(self.collection, safe="")
        return f"{self.base_url.rstrip('/')}/v1/collections/{name}/devices"

    def flush(self, client: DeviceClient) -> UploadResult:
        """Send the queue until it is empty or ``max_attempts`` consecutive failures.

        The queue survives anything left unsent (it is in the client's state file); call
        again later.
        """
        result = UploadResult()
        failures = 0
        limit = self.batch_size
        bearer = self._bearer(client, result) if client.queue else None
        later: set[bytes] = set()
        while bearer is not None and client.queue and failures < self.max_attempts:
            items, data = client.batch(limit, later)
            if not items:
                break
            result.attempts += 1
            status, body, retry_after = self._post(self.url, data, bearer)
            if status is not None and 200 <= status < 300:
                client.acknowledge([q.id for q in items])
                result.acknowledged += len(items)
                failures = 0
                continue
            if status == 425:
                item = _item(body)
                wait = [items[item]] if item is not None and 0 <= item < len(items) else items
                later.update(q.id for q in wait)
                result.deferred += len(wait)
                log.info("upload to %s: %d report(s) for a later epoch kept", self.url, len(wait))
                continue
            if status == 413 and limit > 1:
                limit = max(1, len(items) // 2)
                continue
            if status in (401, 403):
                log.error(
                    "upload to %s refused (HTTP %d: %s); queue kept",
                    self.url,
                    status,
                    _message(body),
                )
                result.refused = status
                break
            if status is not None and 400 <= status < 500 and status not in RETRY_STATUSES:
                reason = f"HTTP {status}: {_message(body)}"
                item = _item(body)
                bad = [items[item]] if item is not None and 0 <= item < len(items) else items
                client.drop([q.id for q in bad], reason)
                result.dropped += len(bad)
                continue
            wait = self._backoff(failures, retry_after)
            failures += 1
            if failures < self.max_attempts:
                result.waits.append(wait)
                self.sleep(wait)
        result.remaining = len(client.queue)
        return result

    def _bearer(self, client: DeviceClient, result: UploadResult) -> str | None:
        """The token uploads carry: the shared ingest token, the device's credential, or one
        obtained now by enrolling (kept in the device's state); None if enrolling failed."""
        if self.token:
            return self.token
        held = client.credential(self.base_url)
        if held is not None:
            return held[1]
        failures = 0
        while failures < self.max_attempts:
            result.attempts += 1
            status, body, retry_after = self._post(self.enroll_url, b"", str(self.enroll_token))
            answer = _json(body) if status == 201 else None
            if (
                isinstance(answer, dict)
                and isinstance(answer.get("device"), int)
                and isinstance(answer.get("credential"), str)
            ):
                client.set_credential(self.base_url, answer["device"], answer["credential"])
                return str(answer["credential"])
            if status == 201:  # an answer cut short or garbled: as if none had come
                status = None
            if status is not None and 400 <= status < 500 and status not in RETRY_STATUSES:
                log.error(
                    "enrolling at %s refused (HTTP %d: %s); queue kept",
                    self.enroll_url,
                    status,
                    _message(body),
                )
                result.refused = status
                return None
            wait = self._backoff(failures, retry_after)
            failures += 1
            if failures < self.max_attempts:
                result.waits.append(wait)
                self.sleep(wait)
        return None

    def _backoff(self, failures: int, retry_after: float | None) -> float:
        cap = min(self.max_delay, self.base_delay * 2.0**failures)
        wait = self.rand() * cap
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait

    def _post(self, url: str, data: bytes, bearer: str) -> tuple[int | None, bytes, float | None]:
        req = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={
                "Authorization": f"Bearer {bearer}",
                "Content-Type": "application/octet-stream",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, resp.read(), None
        except urllib.error.HTTPError as err:
            try:
                body = err.read() if err.fp is not None else b""
            except (OSError, http.client.HTTPException) as cut:
                # A refusal whose body (which names the item to drop) was cut short: as if no
                # answer had come, rather than drop a whole batch for one bad item.
                log.info("answer of %s cut short: %s", url, cut)
                return None, b"", None
            return err.code, body, parse_retry_after(err.headers.get("Retry-After"))
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            # Any transport error (refused, reset, timed out, an answer cut short after its
            # headers: http.client.IncompleteRead) is no answer: back off, keep the queue.
            log.info("request to %s failed: %s", url, err)
            return None, b"", None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def fetch_protocol(
    base_url: str, collection: str, token: str, timeout: float = 10.0
) -> FrequencyOracle:
    """The collection's protocol as the server describes it (``GET /v1/collections/{name}``),
    its fingerprint checked against the rebuilt protocol's."""
    name = urllib.parse.quote(collection, safe="")
    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/v1/collections/{name}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        info = json.loads(resp.read())
    proto = protocol_from_spec(info["protocol"])
    if "fingerprint" in info and proto.fingerprint().hex() != info["fingerprint"]:
        raise ValueError(
            f"collection {collection!r}: the server's fingerprint {info['fingerprint']} is not "
            f"the rebuilt protocol's {proto.fingerprint().hex()} (another library version?)."
        )
    return proto


def fetch_plan(
    base_url: str, collection: str, epoch: int, token: str, timeout: float = 10.0
) -> dict[str, Any]:
    """What a device reports with at ``epoch`` (``GET /v1/collections/{name}/epochs/{epoch}/plan``,
    docs/server.md): ``{"status": "report" | "none" | "pending", "plan": {...} or None, …}``.
    ``token``: any token of the collection (the device's credential, its enrollment token)."""
    name = urllib.parse.quote(collection, safe="")
    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/v1/collections/{name}/epochs/{int(epoch)}/plan",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _message(body: bytes) -> str:
    obj = _json(body)
    if isinstance(obj, dict) and isinstance(obj.get("error"), str):
        return obj["error"]
    return body[:200].decode("utf-8", "replace")


def _item(body: bytes) -> int | None:
    obj = _json(body)
    if isinstance(obj, dict) and isinstance(obj.get("item"), int):
        return int(obj["item"])
    return None


__all__ = ["UploadResult", "Uploader", "fetch_plan", "fetch_protocol", "parse_retry_after"]
