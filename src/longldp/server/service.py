"""What the collection server does, without HTTP: collections, devices, authentication,
idempotent ingest, estimates, series and export over one SQLAlchemy engine.

Every method is synchronous and safe to call from many threads and processes at once; the web
layer (:mod:`longldp.server.app`) runs them in a thread pool. Errors a client can fix raise
:class:`ClientError` (with an HTTP status and, for a batch, the index of the first bad item);
an unreachable or busy database raises :class:`~longldp.server.db.DatabaseUnavailableError`.
The ingest transaction itself is in :mod:`longldp.server.ingest`.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import io
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa
from numpy.typing import NDArray
from sqlalchemy.engine import Engine

from longldp import postprocess as pp
from longldp.protocols import Estimand, Estimate, FrequencyOracle, protocol_from_spec
from longldp.server import _codec as codec
from longldp.server import central, db, ingest, sizing, tokens
from longldp.server.errors import ClientError
from longldp.server.group import Calls, GroupCommitter

#: A collection name, matched whole (``re.fullmatch``: ``$`` would accept a trailing newline).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_EPOCH = 2**32 - 1
#: Largest domain a collection may have (support counts are stored per epoch).
MAX_K = 1 << 20
#: Epoch window of a new collection unless it names one.
DEFAULT_EPOCH_WINDOW = 8
#: Future epochs a wall-clock collection accepts beyond the current one (clock skew).
DEFAULT_EPOCH_SKEW = 1
#: Retry-After (seconds) of a report for an epoch the operator has not opened yet.
NOT_YET_OPEN_RETRY_S = 300
#: Reports per device and epoch of a new device-mode collection unless it names a quota.
DEFAULT_REPORTS_PER_EPOCH = 1
#: Count rows (shards) per epoch of a new PostgreSQL collection: concurrent ingests update
#: different rows (a random one each), so they do not queue on one row's lock through their
#: commits. SQLite serializes writers anyway: one row.
COUNT_SHARDS_POSTGRES = 8
#: The row insert of the SQLite path (also what benchmarks/bench_service.py times raw).
SQLITE_INSERT = ingest.SQLITE_INSERT


@dataclass(frozen=True)
class Limits:
    """The server's bounds (docs/server.md, "Bounds"); every one is a positive integer.

    ``max_body_bytes`` and ``max_batch`` bound one ingest request, ``max_epochs_per_request``
    the distinct epochs it may name; ``max_open_epochs`` bounds a collection's epoch window
    (the epochs open at once); ``max_collection_bytes`` the working memory one request on a
    collection may need (:mod:`longldp.server.sizing`, checked at creation);
    ``max_answer_values`` the numbers (epochs × values) one estimate, series or dashboard
    answer computes and sends; ``max_inflight_bytes`` the working memory of all the requests
    the process serves at once (admission control, :mod:`longldp.server.admission`);
    ``max_devices`` and ``enroll_per_minute`` the default device cap and enrollment rate of
    a device-mode collection (each collection may set its own).
    """

    max_body_bytes: int = 16 * 1024 * 1024
    max_batch: int = 10_000
    max_epochs_per_request: int = 8
    max_open_epochs: int = 64
    max_collection_bytes: int = 512 * 1024 * 1024
    max_answer_values: int = 100_000
    max_inflight_bytes: int = 1024 * 1024 * 1024
    max_devices: int = 1_000_000
    enroll_per_minute: int = 600

    def __post_init__(self) -> None:
        least = {
            "max_body_bytes": 1024,
            "max_batch": 1,
            "max_epochs_per_request": 1,
            "max_open_epochs": 2,
            "max_collection_bytes": 1 << 20,
            "max_answer_values": 100,
            "max_inflight_bytes": 1 << 20,
            "max_devices": 1,
            "enroll_per_minute": 1,
        }
        for name, low in least.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"server: '{name}' must be an integer ≥ {low}; got {value!r}.")
        if self.max_inflight_bytes < self.max_collection_bytes:
            raise ValueError(
                "server: 'max_inflight_bytes' must be at least 'max_collection_bytes' (a "
                f"lone maximal request must fit); got {self.max_inflight_bytes} < "
                f"{self.max_collection_bytes}."
            )

    def footprint(self, proto: FrequencyOracle, count_shards: int = 1) -> sizing.Footprint:
        """The memory a collection of ``proto`` needs under these limits."""
        return sizing.footprint(
            proto,
            max_body_bytes=self.max_body_bytes,
            max_batch=self.max_batch,
            max_epochs_per_request=self.max_epochs_per_request,
            max_answer_values=self.max_answer_values,
            count_shards=count_shards,
        )


@dataclass
class Collection:
    """A collection as loaded from the database (read again on every request: the epoch
    window and the device bounds may change; its protocol object is built once)."""

    id: int
    name: str
    proto: FrequencyOracle
    spec: dict[str, Any]
    protocol_id: int
    fingerprint: bytes
    first_epoch: int
    last_epoch: int | None
    epoch_seconds: float | None
    start_time: float | None
    postprocess: str | None
    description: str
    ingest_hash: bytes
    read_hash: bytes
    created_at: float
    auth: str = db.AUTH_SHARED
    enroll_hash: bytes | None = None
    reports_per_epoch: int | None = None
    epoch_window: int | None = None
    count_shards: int = 1
    open_from: int | None = None
    epoch_skew: int = DEFAULT_EPOCH_SKEW
    max_devices: int | None = None
    expected_devices: int | None = None
    enroll_per_minute: int | None = None
    device_count: int = 0
    record_size: int = field(init=False)

    def __post_init__(self) -> None:
        self.record_size = codec.ID_BYTES + codec.EPOCH_BYTES + codec.report_size(self.proto)

    def current_epoch(self, now: float | None = None) -> int | None:
        """The epoch of wall-clock time ``now`` when the collection has an epoch length."""
        if self.epoch_seconds is None or self.start_time is None:
            return None
        now = time.time() if now is None else now
        return self.first_epoch + math.floor((now - self.start_time) / self.epoch_seconds)

    def open_range(self, now: float | None = None) -> tuple[int, int]:
        """(lowest, highest) epoch open for reports (empty when lowest > highest).

        Within [first_epoch, last_epoch], and: with a wall clock, the W epochs up to the
        current one and the ``epoch_skew`` S after it (devices whose clocks run ahead),
        [c − W + 1, c + S]; without one, the W epochs from ``open_from``, which only the
        operator moves, [open_from, open_from + W − 1]. No report moves it.
        """
        low, high = self.first_epoch, MAX_EPOCH if self.last_epoch is None else self.last_epoch
        window = self.epoch_window or DEFAULT_EPOCH_WINDOW
        current = self.current_epoch(now)
        if current is not None:
            return max(low, current - window + 1), min(high, current + self.epoch_skew)
        start = self.first_epoch if self.open_from is None else self.open_from
        return max(low, start), min(high, start + window - 1)

    def opens_later(self, epoch: int, now: float | None = None) -> float | None:
        """Seconds until ``epoch`` opens, when it is not open yet but will be (a device ahead
        of the collection's clock keeps it: 425 with Retry-After); None if it never will
        (past the window or after ``last_epoch``)."""
        high = self.open_range(now)[1]
        if epoch <= high or (self.last_epoch is not None and epoch > self.last_epoch):
            return None
        if self.epoch_seconds is None or self.start_time is None:
            return float(NOT_YET_OPEN_RETRY_S)  # the operator moves it: ask again later
        now = time.time() if now is None else now
        opens = self.start_time + (epoch - self.epoch_skew - self.first_epoch) * self.epoch_seconds
        return max(1.0, opens - now)

    def device_cap(self, limits: Limits) -> int:
        """Most active devices the collection admits (its own cap, else the server's)."""
        return self.max_devices if self.max_devices is not None else limits.max_devices

    def enroll_rate(self, limits: Limits) -> int:
        """Enrollments per minute the collection admits (its own rate, else the server's)."""
        return (
            self.enroll_per_minute if self.enroll_per_minute is not None
            else limits.enroll_per_minute
        )

    def public(self) -> dict[str, Any]:
        """What any token holder may see about the collection."""
        return {
            "name": self.name,
            "protocol": self.spec,
            "protocol_id": self.protocol_id,
            "fingerprint": self.fingerprint.hex(),
            "report_bytes": codec.report_size(self.proto),
            "first_epoch": self.first_epoch,
            "last_epoch": self.last_epoch,
            "epoch_seconds": self.epoch_seconds,
            "start_time": self.start_time,
            "current_epoch": self.current_epoch(),
            "epoch_window": self.epoch_window,
            "epoch_skew": self.epoch_skew,
            "open_from": self.open_from,
            "open_epochs": _range_or_none(*self.open_range()),
            "auth": self.auth,
            "reports_per_epoch": self.reports_per_epoch,
            "postprocess": self.postprocess,
            "description": self.description,
            "privacy": privacy_summary(self.proto),
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class Batch:
    """A checked ingest batch: ids (n, 16), epochs (n,), wire rows (n, wire_size), the decoded
    report records and the cohorts (None where an item has none)."""

    ids: NDArray[np.uint8]
    epochs: NDArray[np.int64]
    rows: NDArray[np.uint8]
    records: NDArray
    cohorts: list[int | None]

    def __len__(self) -> int:
        return len(self.epochs)


@dataclass(frozen=True)
class Access:
    """Who a request is: its collection (None if unknown), role, and device (0 unless the
    credential is a device's)."""

    collection: Collection | None
    role: str | None
    device: int = db.SHARED_DEVICE


def privacy_summary(proto: FrequencyOracle) -> dict[str, Any]:
    """The privacy parameters of a protocol, as numbers and in words."""
    eps_report = float(proto.single_report_epsilon())
    eps_memo = float(proto.first_round_epsilon())
    dom = proto.domain
    over = (
        f"{dom.size} values"
        if dom.codes
        else (f"numbers in [{dom.lo:g}, {dom.hi:g}]" if dom.kind == "interval" else dom.describe())
    )
    per = "rounded value" if dom.kind == "interval" else "value"
    if proto.longitudinal:
        words = (
            f"{proto.name} over {over}. Each device randomizes its value twice: a "
            f"permanent answer memoized per {per} (ε∞ = {eps_memo:.3g}) and a fresh one per "
            f"report (ε1 = {eps_report:.3g}). One report reveals at most ε = {eps_report:.3g}; "
            f"a device that reports t times over d distinct values reveals at most "
            f"min(t·{eps_report:.3g}, d·{eps_memo:.3g}), however long it keeps reporting."
        )
    else:
        words = (
            f"{proto.name} over {over}, one-shot: every report is randomized afresh "
            f"and reveals at most ε = {eps_report:.3g}; t reports reveal at most t·ε."
        )
    return {
        "longitudinal": bool(proto.longitudinal),
        "epsilon_per_report": eps_report,
        "epsilon_memo": eps_memo,
        "words": words,
    }


#: One query per request: the collection, and the stored hash of the device a credential names.
#: It always reads exactly one collection row: the one named, else the decoy
#: (:data:`db.DECOY_NAME`), found by the same unique index (its name looked up first).
_C = db.collections
_WHO = (
    sa.select(_C, db.devices.c.credential_hash)
    .select_from(
        _C.outerjoin(
            db.devices,
            sa.and_(
                db.devices.c.collection_id == _C.c.id,
                db.devices.c.id == sa.bindparam("device"),
                db.devices.c.revoked_at.is_(None),
            ),
        )
    )
    .where(
        _C.c.name
        == sa.func.coalesce(
            sa.select(_C.c.name).where(_C.c.name == sa.bindparam("name")).scalar_subquery(),
            db.DECOY_NAME,
        )
    )
)

#: The settings an operator may change after creation (``PATCH /v1/collections/{name}``).
_SETTINGS = frozenset({"open_from", "max_devices", "expected_devices", "enroll_per_minute"})
_CREATE_FIELDS = frozenset(
    {
        "name",
        "protocol",
        "first_epoch",
        "last_epoch",
        "epoch_seconds",
        "start_time",
        "epoch_window",
        "epoch_skew",
        "auth",
        "reports_per_epoch",
        "postprocess",
        "description",
    }
    | _SETTINGS
)


class Service:
    """The collection server's operations over ``engine`` (already migrated)."""

    def __init__(
        self,
        engine: Engine,
        admin_token: str,
        limits: Limits | None = None,
        attest: Callable[[str, str | None], bool] | None = None,
    ):
        if not isinstance(admin_token, str) or len(admin_token) < 16:
            raise ValueError("server: 'admin_token' must be a string of at least 16 characters.")
        self.engine = engine
        self.admin_token = admin_token
        self._admin_digest = tokens.digest(admin_token)
        self.limits = limits or Limits()
        #: The attestation hook (docs/server.md, "Sybil bounds"): called at every enrollment
        #: with the collection's name and the device's evidence; False or an exception refuses.
        self.attest = attest
        self._protocols: dict[str, tuple[FrequencyOracle, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._committer: GroupCommitter | None = None
        self._authenticator: Calls | None = None
        self._who_sql: tuple[str, list[str], dict[str, Any]] | None = None

    # ------------------------------------------------------------------ collections
    def is_admin(self, token: str | None) -> bool:
        """Whether ``token`` is the admin token (constant-time comparison)."""
        return tokens.matches_plain(token, self.admin_token)

    def create_collection(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a collection; returns it with its tokens (shown this once only).

        A device-mode collection (the default) gets an enrollment token and a read token; a
        shared-token collection (``"auth": "shared"``) an ingest token and a read token.
        """
        _only(body, _CREATE_FIELDS, "unknown field(s) {}; allowed: {}.")
        name = body.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ClientError(
                422, "'name' must be 1-64 characters of letters, digits, '_', '.', '-'."
            )
        proto = self._protocol_of(body.get("protocol"))
        first = _int_field(body, "first_epoch", 0)
        last = _int_field(body, "last_epoch", None)
        if last is not None and last < first:
            raise ClientError(422, "'last_epoch' must be at least 'first_epoch'.")
        seconds = _float_field(body, "epoch_seconds")
        start = _float_field(body, "start_time")
        if seconds is not None and seconds <= 0:
            raise ClientError(422, "'epoch_seconds' must be positive.")
        if seconds is not None and start is None:
            start = time.time()
        if seconds is None and start is not None:
            raise ClientError(422, "'start_time' needs 'epoch_seconds'.")
        skew = _count_field(body, "epoch_skew", DEFAULT_EPOCH_SKEW, 64, least=0)
        if seconds is None and body.get("epoch_skew") not in (None, DEFAULT_EPOCH_SKEW):
            raise ClientError(
                422, "'epoch_skew' needs a wall clock ('epoch_seconds'); without one the "
                "operator opens epochs ('open_from')."
            )
        top = max(1, self.limits.max_open_epochs - max(1, skew))
        window = _count_field(body, "epoch_window", DEFAULT_EPOCH_WINDOW, top)
        if seconds is not None and body.get("open_from") is not None:
            raise ClientError(
                422, "'open_from' applies without a wall clock; with 'epoch_seconds' the clock "
                "moves the window."
            )
        settings = self._settings(body, first, last, seconds)
        open_from = settings.get("open_from", first) if seconds is None else None
        auth = body.get("auth", db.AUTH_DEVICE)
        if auth not in (db.AUTH_DEVICE, db.AUTH_SHARED):
            raise ClientError(422, f"'auth' must be 'device' or 'shared'; got {auth!r}.")
        if auth == db.AUTH_SHARED:
            if body.get("reports_per_epoch") is not None:
                raise ClientError(
                    422, "'reports_per_epoch' needs device identities ('auth': 'device')."
                )
            quota = None
        else:
            quota = _count_field(body, "reports_per_epoch", DEFAULT_REPORTS_PER_EPOCH, 1_000_000)
        method = body.get("postprocess")
        if method is not None:
            method = _postprocess_name(method)
            if len(proto.estimate_shape) != 1:
                raise ClientError(
                    422,
                    f"'postprocess' applies to frequency estimates; {proto.name} estimates an "
                    f"array of shape {proto.estimate_shape}: give none.",
                )
        description = body.get("description", "")
        if not isinstance(description, str) or len(description) > 2000:
            raise ClientError(422, "'description' must be a string of at most 2000 characters.")
        read_token = tokens.new_token("read")
        # A device-mode collection has no shared ingest token: its column holds the hash of a
        # token nobody is given.
        ingest_token = tokens.new_token("ingest")
        enroll_token = tokens.new_token("enroll") if auth == db.AUTH_DEVICE else None
        spec = proto.spec()
        row = {
            "name": name,
            "protocol_spec": json.dumps(spec, sort_keys=True),
            "protocol_id": proto.wire_id,
            "fingerprint": proto.fingerprint(),
            "first_epoch": first,
            "last_epoch": last,
            "epoch_seconds": seconds,
            "start_time": start,
            "postprocess": method,
            "description": description,
            "ingest_token_hash": tokens.digest(ingest_token),
            "read_token_hash": tokens.digest(read_token),
            "created_at": time.time(),
            "auth": auth,
            "enroll_token_hash": None if enroll_token is None else tokens.digest(enroll_token),
            "reports_per_epoch": quota,
            "epoch_window": window,
            "count_shards": COUNT_SHARDS_POSTGRES if db.is_postgres(self.engine) else 1,
            "open_from": open_from,
            "epoch_skew": skew,
            "max_devices": settings.get("max_devices"),
            "expected_devices": settings.get("expected_devices"),
            "enroll_per_minute": settings.get("enroll_per_minute"),
            "device_count": 0,
        }
        with db.transaction(self.engine, write=True) as conn:
            exists = conn.execute(
                sa.select(db.collections.c.id).where(db.collections.c.name == name)
            ).first()
            if exists:
                raise ClientError(409, f"a collection named {name!r} already exists.")
            conn.execute(db.collections.insert().values(**row))
        col = self.get_collection(name)
        assert col is not None
        secrets_out = {"read_token": read_token}
        if enroll_token is None:
            secrets_out["ingest_token"] = ingest_token
        else:
            secrets_out["enroll_token"] = enroll_token
        return {**col.public(), **secrets_out}

    def _protocol_of(self, spec_in: Any) -> FrequencyOracle:
        """The protocol of a creation request, its size checked against the server's budget."""
        params = spec_in.get("params", {}) if isinstance(spec_in, dict) else None
        k_in = params.get("k") if isinstance(params, dict) else None
        if isinstance(k_in, int) and k_in > MAX_K:
            raise ClientError(422, f"'protocol': k must be at most {MAX_K:,} on this server.")
        try:
            proto = protocol_from_spec(spec_in)
        except (ValueError, TypeError) as exc:
            raise ClientError(422, f"'protocol': {exc}") from None
        if proto.comparison_only:  # its realized channel is not the one its ε describes
            raise ClientError(
                422, f"'protocol': {proto.name} is given for comparison only "
                f"({proto.comparison_only}); no collection runs it."
            )
        shards = COUNT_SHARDS_POSTGRES if db.is_postgres(self.engine) else 1
        need = self.limits.footprint(proto, shards)
        budget = self.limits.max_collection_bytes
        if need.peak_bytes > budget:
            raise ClientError(
                422,
                f"'protocol': a collection of {proto.name} with these parameters needs "
                f"{need.words()}; this server allows {budget / 2**20:,.0f} MiB per request "
                "(--max-collection-bytes). Use a smaller domain, hash pool or bucket count.",
            )
        return proto

    def _settings(
        self, body: dict[str, Any], first: int, last: int | None, seconds: float | None
    ) -> dict[str, Any]:
        """The operator settings present in ``body``, checked (a None clears a device bound
        back to the server's default)."""
        out: dict[str, Any] = {}
        if "open_from" in body:
            value = _int_field(body, "open_from", None)
            if value is None:
                raise ClientError(422, "'open_from' must be an integer epoch.")
            if seconds is not None:
                raise ClientError(
                    422, "'open_from' applies without a wall clock; with 'epoch_seconds' the "
                    "clock moves the window."
                )
            if value < first or (last is not None and value > last):
                raise ClientError(
                    422, f"'open_from' must be in [first_epoch, last_epoch] = [{first}, "
                    f"{'∞' if last is None else last}]; got {value}."
                )
            out["open_from"] = value
        bounds = {
            "max_devices": (1, 10**12),
            "expected_devices": (0, 10**12),
            "enroll_per_minute": (1, 10**9),
        }
        for name, (low, high) in bounds.items():
            if name in body:
                value = body[name]
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int)
                    or not low <= value <= high
                ):
                    raise ClientError(
                        422, f"'{name}' must be an integer in [{low}, {high}] or null; "
                        f"got {value!r}."
                    )
                out[name] = value
        return out

    def update_settings(self, col: Collection, body: Any) -> dict[str, Any]:
        """Change a collection's operator settings (``open_from``: the oldest open epoch of a
        collection without a wall clock; ``max_devices``, ``expected_devices``,
        ``enroll_per_minute``); returns the collection as :meth:`Collection.public` shows it
        with its device bounds."""
        if not body:
            raise ClientError(422, "the body must be a non-empty JSON object.")
        _only(body, _SETTINGS, "unknown or fixed field(s) {}; a collection's settings are {}.")
        changes = self._settings(body, col.first_epoch, col.last_epoch, col.epoch_seconds)
        with db.transaction(self.engine, write=True) as conn:
            conn.execute(
                db.collections.update().where(db.collections.c.id == col.id).values(**changes)
            )
        fresh = self.get_collection(col.name)
        assert fresh is not None
        return {**fresh.public(), **self.device_bounds(fresh)}

    def device_bounds(self, col: Collection) -> dict[str, Any]:
        """The collection's device bounds as they apply now (the server's defaults filled in)."""
        return {
            "devices": col.device_count,
            "max_devices": col.device_cap(self.limits),
            "expected_devices": col.expected_devices,
            "enroll_per_minute": col.enroll_rate(self.limits),
        }

    def list_collections(self) -> list[dict[str, Any]]:
        """Every collection's public description, by name."""
        with db.transaction(self.engine, write=False) as conn:
            rows = (
                conn.execute(
                    sa.select(db.collections)
                    .where(db.collections.c.name != db.DECOY_NAME)
                    .order_by("name")
                )
                .mappings()
                .all()
            )
        return [self._from_row(row).public() for row in rows]

    def get_collection(self, name: str) -> Collection | None:
        """The collection named ``name``, or None."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            return None
        with db.transaction(self.engine, write=False) as conn:
            row = (
                conn.execute(sa.select(db.collections).where(db.collections.c.name == name))
                .mappings()
                .first()
            )
        return None if row is None else self._from_row(row)

    def _from_row(self, row: Any) -> Collection:
        """The :class:`Collection` of a database row. Its protocol object is built once per
        protocol spec; the rest is read from the row every time (the epoch window and the
        device bounds change)."""
        text = row["protocol_spec"]
        with self._lock:
            known = self._protocols.get(text)
        if known is None:
            spec = json.loads(text)
            known = (protocol_from_spec(spec), spec)
            with self._lock:
                self._protocols[text] = known
        proto, spec = known
        enroll = row["enroll_token_hash"]
        return Collection(
            id=row["id"],
            name=row["name"],
            proto=proto,
            spec=spec,  # shared between requests: read only
            protocol_id=row["protocol_id"],
            fingerprint=bytes(row["fingerprint"]),
            first_epoch=row["first_epoch"],
            last_epoch=row["last_epoch"],
            epoch_seconds=row["epoch_seconds"],
            start_time=row["start_time"],
            postprocess=row["postprocess"],
            description=row["description"],
            ingest_hash=bytes(row["ingest_token_hash"]),
            read_hash=bytes(row["read_token_hash"]),
            created_at=row["created_at"],
            auth=row["auth"],
            enroll_hash=None if enroll is None else bytes(enroll),
            reports_per_epoch=row["reports_per_epoch"],
            epoch_window=row["epoch_window"],
            count_shards=int(row["count_shards"]),
            open_from=row["open_from"],
            epoch_skew=int(row["epoch_skew"]),
            max_devices=row["max_devices"],
            expected_devices=row["expected_devices"],
            enroll_per_minute=row["enroll_per_minute"],
            device_count=int(row["device_count"]),
        )

    # ------------------------------------------------------------------ who is asking
    def authenticate(self, name: str, token: str) -> Access:
        """The collection, role and device of ``token`` on collection ``name``.

        One query reads the collection (an unknown one: the decoy row, by the same index) and,
        when the token is shaped like a device credential, that device's stored hash; the
        collection is built and every comparison runs (admin, read, ingest, enroll, device),
        against :data:`tokens.ABSENT` where a hash does not exist, before anything branches
        on the result. An unknown collection and a wrong token therefore do the same work
        and get the same answer from the web layer.
        """
        presented = tokens.digest(token)
        device = tokens.device_of(token)
        wanted = name if isinstance(name, str) and NAME_RE.fullmatch(name) else db.DECOY_NAME
        params = {"name": wanted, "device": -1 if device is None else device}
        row = self._who(params)
        col = self._from_row(row)  # the decoy's too: the same work
        known = row["name"] != db.DECOY_NAME
        shared = row["auth"] == db.AUTH_SHARED
        is_admin = hmac.compare_digest(presented, self._admin_digest)
        is_read = tokens.matches_digest(presented, row["read_token_hash"])
        is_ingest = tokens.matches_digest(presented, row["ingest_token_hash"]) and shared
        is_enroll = tokens.matches_digest(presented, row["enroll_token_hash"])
        is_device = tokens.matches_digest(presented, row["credential_hash"])
        roles = (
            ("admin", is_admin),
            ("read", is_read and known),
            ("ingest", is_ingest and known),
            ("enroll", is_enroll and known),
            ("device", is_device and known),
        )
        role = next((r for r, ok in roles if ok), None)
        if not known:
            return Access(None, role)
        return Access(col, role, device if role == "device" else db.SHARED_DEVICE)

    def _who(self, params: dict[str, Any]) -> dict[str, Any]:
        """The row of :data:`_WHO`, read on a pooled driver connection with the statement
        compiled once: one SELECT, no explicit transaction around it (a single statement
        reads a consistent snapshot), none of SQLAlchemy's per-statement work. Every request
        runs it, so it is the server's most frequent query."""
        compiled = self._who_sql
        if compiled is None:
            c = _WHO.compile(dialect=self.engine.dialect)
            order = list(c.positiontup or [])
            compiled = self._who_sql = (str(c), order, dict(c.params))
        sql, order, fixed = compiled
        values = {**fixed, **params}
        driver_error = self.engine.dialect.loaded_dbapi.Error
        try:
            raw = self.engine.raw_connection()
        except (driver_error, sa.exc.DBAPIError) as exc:  # cannot connect
            raise db.DatabaseUnavailableError(str(exc)) from None
        try:
            cur = raw.cursor()
            try:
                cur.execute(sql, tuple(values[k] for k in order) if order else values)
                names = [d[0] for d in cur.description]
                found = cur.fetchone()
            finally:
                cur.close()
            raw.rollback()  # PostgreSQL began a transaction; SQLite: nothing to end
        except driver_error as exc:  # the driver's own errors
            raw.invalidate()
            raise db.DatabaseUnavailableError(str(exc)) from None
        finally:
            raw.close()  # back to the pool
        if found is None:
            raise db.DatabaseUnavailableError("the decoy collection is missing (migration 4)")
        return dict(zip(names, found, strict=True))

    def role_of(self, col: Collection, token: str | None) -> str | None:
        """'admin', 'read', 'ingest', 'enroll', 'device' or None for ``token`` on ``col``."""
        if token is None:
            return None
        return self.authenticate(col.name, token).role

    def enroll(self, col: Collection, evidence: str | None = None) -> dict[str, Any]:
        """Enroll a new device in a device-mode collection: its id and credential (shown this
        once; the server keeps only the credential's SHA-256 digest).

        Refused: by the attestation hook, when the server has one (403: ``evidence`` is what
        the device sent in ``X-Device-Attestation``); with 409 once the collection holds its
        cap of active devices; with 429 and ``Retry-After`` when the collection enrolled its
        rate of devices in the last minute. The cap and the rate are checked in the enrolling
        transaction, the collection's row locked (PostgreSQL) or the database's write lock
        held (SQLite): exact across threads and processes."""
        if col.auth != db.AUTH_DEVICE:
            raise ClientError(
                409, f"collection {col.name!r} takes a shared ingest token; devices do not enroll."
            )
        if self.attest is not None:
            try:
                admitted = bool(self.attest(col.name, evidence))
            except Exception as exc:  # the hook's refusal, whatever its kind
                raise ClientError(403, f"device attestation failed: {exc}") from None
            if not admitted:
                raise ClientError(403, "device attestation refused.")
        placeholder = tokens.digest(tokens.new_token("enroll"))
        c = db.collections
        with db.transaction(self.engine, write=True) as conn:
            query = sa.select(c.c.device_count, c.c.max_devices, c.c.enroll_per_minute).where(
                c.c.id == col.id
            )
            if db.is_postgres(self.engine):
                query = query.with_for_update()
            count, cap, rate = conn.execute(query).one()
            cap = self.limits.max_devices if cap is None else int(cap)
            rate = self.limits.enroll_per_minute if rate is None else int(rate)
            if int(count) >= cap:
                raise ClientError(
                    409,
                    f"collection {col.name!r} holds its cap of {cap:,} active devices; the "
                    "operator may raise it (max_devices) or revoke devices.",
                )
            now = time.time()
            dv = db.devices
            oldest = conn.execute(
                sa.select(dv.c.created_at)
                .where(dv.c.collection_id == col.id, dv.c.created_at > now - 60.0)
                .order_by(dv.c.created_at.desc())
                .limit(1)
                .offset(rate - 1)
            ).scalar()
            if oldest is not None:
                wait = max(1, math.ceil(oldest + 60.0 - now))
                raise ClientError(
                    429,
                    f"collection {col.name!r} enrolls at most {rate:,} devices a minute; "
                    f"retry in {wait} s.",
                    headers={"Retry-After": str(wait)},
                )
            device = conn.execute(
                dv.insert()
                .values(collection_id=col.id, credential_hash=placeholder, created_at=now)
                .returning(dv.c.id)
            ).scalar_one()
            credential = tokens.new_device_credential(device)
            conn.execute(
                dv.update()
                .where(dv.c.id == device)
                .values(credential_hash=tokens.digest(credential))
            )
            conn.execute(
                c.update().where(c.c.id == col.id).values(device_count=c.c.device_count + 1)
            )
        return {
            "collection": col.name,
            "device": int(device),
            "credential": credential,
            "reports_per_epoch": col.reports_per_epoch,
        }

    def list_devices(
        self, col: Collection, start: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """A page of the collection's devices by id (from ``start``): when each enrolled and
        was revoked, how many reports it holds and its latest epoch; with the device bounds
        and the Sybil figure (:mod:`longldp.server.sybil`). ``next_start``: the next page."""
        from longldp.server.sybil import sybil_view

        limit = min(limit or 1000, 10_000)
        dv, r = db.devices, db.reports
        q = sa.select(dv.c.id, dv.c.created_at, dv.c.revoked_at).where(
            dv.c.collection_id == col.id
        )
        if start is not None:
            q = q.where(dv.c.id >= start)
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(q.order_by(dv.c.id).limit(limit + 1)).all()
            ids = [int(row.id) for row in rows[:limit]]
            held: dict[int, tuple[int, int | None]] = {}
            if ids:
                for device, n, last in conn.execute(
                    sa.select(r.c.device_id, sa.func.count(), sa.func.max(r.c.epoch))
                    .where(r.c.collection_id == col.id, r.c.device_id.in_(ids))
                    .group_by(r.c.device_id)
                ):
                    held[int(device)] = (int(n), None if last is None else int(last))
        bounds = self.device_bounds(col)
        return {
            "collection": col.name,
            **bounds,
            "devices_page": [
                {
                    "device": int(row.id),
                    "enrolled_at": row.created_at,
                    "revoked_at": row.revoked_at,
                    "reports": held.get(int(row.id), (0, None))[0],
                    "last_epoch": held.get(int(row.id), (0, None))[1],
                }
                for row in rows[:limit]
            ],
            "next_start": int(rows[limit].id) if len(rows) > limit else None,
            "sybil": sybil_view(col.proto, col.auth, bounds, col.reports_per_epoch),
        }

    def revoke_device(self, col: Collection, device: int, purge: bool = False) -> dict[str, Any]:
        """Revoke one device: its credential stops working at once (a request it has in
        flight is refused under the device's lock). With ``purge``, its reports in epochs not
        closed are removed too and their epochs' counts lowered, in the same transaction
        (locks in the ingest order: the device, the epochs' count rows, the reports)."""
        dv, c, r = db.devices, db.collections, db.reports
        postgres = db.is_postgres(self.engine)
        removed = 0
        with db.transaction(self.engine, write=True) as conn:
            query = sa.select(dv.c.revoked_at).where(
                dv.c.id == device, dv.c.collection_id == col.id
            )
            if postgres:
                query = query.with_for_update()
            row = conn.execute(query).first()
            if row is None:
                raise ClientError(404, f"collection {col.name!r} has no device {device}.")
            if row.revoked_at is None:
                conn.execute(dv.update().where(dv.c.id == device).values(revoked_at=time.time()))
                conn.execute(
                    c.update().where(c.c.id == col.id).values(device_count=c.c.device_count - 1)
                )
            if purge:
                mine = sa.and_(r.c.collection_id == col.id, r.c.device_id == device)
                epochs = sorted(
                    int(e) for e in conn.execute(sa.select(r.c.epoch).where(mine).distinct())
                    .scalars()
                )
                for e in epochs:
                    removed += self._purge_epoch(conn, col, device, e, postgres)
        return {"device": device, "revoked": True, "reports_removed": removed}

    def _purge_epoch(self, conn: Any, col: Collection, device: int, epoch: int, postgres: bool):  # type: ignore[no-untyped-def]
        """Remove ``device``'s reports of one epoch unless it is closed; their count."""
        r, ec = db.reports, db.epoch_counts
        query = (
            sa.select(ec.c.shard, ec.c.n, ec.c.support, ec.c.closed)
            .where(ec.c.collection_id == col.id, ec.c.epoch == epoch)
            .order_by(ec.c.shard)
        )
        shards = conn.execute(query.with_for_update() if postgres else query).all()
        if not shards or any(s.closed for s in shards):
            return 0
        mine = sa.and_(r.c.collection_id == col.id, r.c.device_id == device, r.c.epoch == epoch)
        wires = conn.execute(sa.select(r.c.wire).where(mine)).scalars().all()
        if not wires:
            return 0
        rows = np.frombuffer(b"".join(wires), dtype=np.uint8).reshape(len(wires), -1)
        support = codec.support_of_rows(col.proto, rows)
        conn.execute(r.delete().where(mine))
        # Lower the counts: n from the shards in order (none below 0, so that "an epoch has
        # reports" stays "one of its rows has n > 0"), the support from the first one (only
        # an epoch's sums are ever read).
        left = len(wires)
        shape = col.proto.support_shape
        kind = codec.support_dtype(col.proto)  # int64 counts, or float64 sums of a numeric mean
        for j, s in enumerate(shards):
            take = min(int(s.n), left)
            left -= take
            new = np.frombuffer(s.support, dtype=kind).reshape(shape).astype(kind.newbyteorder("="))
            if j == 0:
                new = new - support
            if take or j == 0:
                conn.execute(
                    ec.update()
                    .where(ec.c.collection_id == col.id, ec.c.epoch == epoch, ec.c.shard == s.shard)
                    .values(n=int(s.n) - take, support=new.astype(kind).tobytes())
                )
        assert left == 0, "an epoch's counts held fewer reports than were stored"
        return len(wires)

    # ------------------------------------------------------------------ ingest
    def parse_binary(self, col: Collection, data: bytes) -> Batch:
        """Split and check a binary batch; ClientError naming the first bad item."""
        if not data:
            raise ClientError(422, "the batch is empty.")
        n_items = -(-len(data) // col.record_size)
        if n_items > self.limits.max_batch:
            raise ClientError(
                413, f"the batch has {n_items} records; at most {self.limits.max_batch} allowed."
            )
        try:
            ids, epochs, rows, records = codec.split_records(col.proto, data)
        except codec.BadItemError as exc:
            raise ClientError(422, f"item {exc.index}: {exc.message}", exc.index) from None
        return Batch(ids, epochs, rows, records, [None] * len(epochs))

    def parse_json(self, col: Collection, body: Any) -> Batch:
        """Validate a JSON batch {"reports": [{"id", "epoch", "report", "cohort"?}]}."""
        items = body.get("reports") if isinstance(body, dict) else None
        if isinstance(items, list) and not items:
            raise ClientError(422, "'reports' must be a non-empty list.")
        if isinstance(items, list) and len(items) > self.limits.max_batch:
            raise ClientError(
                413, f"the batch has {len(items)} items; at most {self.limits.max_batch} allowed."
            )
        try:
            data, cohorts = codec.json_records(col.proto, body)
        except codec.BadItemError as exc:
            item = exc.index if exc.index >= 0 else None
            prefix = f"item {exc.index}: " if item is not None else ""
            raise ClientError(422, prefix + exc.message, item) from None
        batch = self.parse_binary(col, data)
        return Batch(batch.ids, batch.epochs, batch.rows, batch.records, cohorts)

    def ingest(
        self, col: Collection, batch: Batch, device: int = db.SHARED_DEVICE
    ) -> dict[str, int]:
        """Store a checked batch of ``device`` (0: the shared token) in one transaction;
        returns counts of new and repeated ids (:func:`longldp.server.ingest.store`)."""
        return ingest.store(self.engine, col, batch, device, self.limits)

    def json_body_limit(self, col: Collection) -> int:
        """The longest JSON body an ingest on ``col`` may have: ``max_batch`` of its longest
        items (:func:`sizing.json_item_bytes`), 1 KiB of envelope, at most ``max_body_bytes``.
        A longer one is refused by its declared length (413) before it is read."""
        per_item = sizing.json_item_bytes(col.proto)
        return min(self.limits.max_body_bytes, 1024 + self.limits.max_batch * per_item)

    def ingest_bytes(self, col: Collection, body_bytes: int, json_body: bool) -> int:
        """The admission ticket of an ingest of ``body_bytes`` on ``col``."""
        return sizing.ingest_request_bytes(
            col.proto,
            body_bytes,
            max_batch=self.limits.max_batch,
            max_epochs_per_request=self.limits.max_epochs_per_request,
            json_body=json_body,
        )

    def export_bytes(self, col: Collection) -> int:
        """The admission ticket of a streamed export: one page of rows (their Python objects,
        the Arrow arrays and the Parquet writer's buffers), whatever the epoch holds."""
        per_row = 4 * (col.proto.wire_size + 16) + 400
        return sizing.REQUEST_OVERHEAD + EXPORT_PAGE_ROWS * per_row

    def answer_bytes(self, col: Collection, dashboard: bool = False) -> int:
        """The admission ticket of an estimate or series page on ``col`` (an estimate's
        footprint, :func:`sizing.footprint`) or of its dashboard (plus the numbers it keeps
        over its epochs: four per value, 20 answers' worth)."""
        need = self.limits.footprint(col.proto, col.count_shards).estimate_bytes
        if dashboard:
            need += 4 * sizing.CELL * 20 * self.limits.max_answer_values
        return need

    def job(self, col: Collection, device: int, kind: str, data: bytes) -> ingest.Job:
        """Parse and check an ingest body (binary or JSON) into a job (no database)."""
        if kind == "application/json":
            try:
                body = json.loads(data)
            except (ValueError, RecursionError):
                raise ClientError(422, "the body is not valid JSON.") from None
            batch = self.parse_json(col, body)
        else:
            batch = self.parse_binary(col, data)
        return ingest.prepare(col, batch, device, self.limits)

    def store_job(self, job: ingest.Job) -> dict[str, int]:
        """Store one job in a transaction of its own (:func:`ingest.run_group`)."""
        (result,) = ingest.run_group(self.engine, [job])
        if isinstance(result, ClientError):
            raise result
        return result

    @property
    def committer(self) -> GroupCommitter:
        """The process's group committer (:mod:`longldp.server.group`), started on first use."""
        with self._lock:
            if self._committer is None:
                self._committer = GroupCommitter(self.engine)
            return self._committer

    @property
    def authenticator(self) -> Calls:
        """:meth:`authenticate` on the process's authentication threads (one on SQLite, two on
        PostgreSQL, whose queries wait on the network): every request's first query, handed
        off in batches (:class:`longldp.server.group.Calls`), started on first use."""
        with self._lock:
            if self._authenticator is None:
                threads = 2 if db.is_postgres(self.engine) else 1
                self._authenticator = Calls(self.authenticate, threads, name="longldp-auth")
            return self._authenticator

    def close(self) -> None:
        """Stop the group committer (after its queued jobs) and the authentication threads."""
        with self._lock:
            committer, self._committer = self._committer, None
            authenticator, self._authenticator = self._authenticator, None
        for batches in (committer, authenticator):
            if batches is not None:
                batches.close()

    def close_epoch(self, col: Collection, epoch: int) -> dict[str, Any]:
        """Close an epoch: later reports for it are refused (its estimate no longer moves).

        Every count row (shard) of the epoch is created if missing and flagged, so an ingest
        that holds one of them finishes first, and any later one sees the flag."""
        ec = db.epoch_counts
        zeros = np.zeros(col.proto.support_shape, dtype=codec.support_dtype(col.proto)).tobytes()
        rows = [
            {
                "collection_id": col.id,
                "epoch": epoch,
                "shard": s,
                "n": 0,
                "support": zeros,
                "closed": False,
            }
            for s in range(col.count_shards)
        ]
        with db.transaction(self.engine, write=True) as conn:
            conn.execute(ingest.insert_ignore(self.engine, ec), rows)
            conn.execute(
                ec.update()
                .where(ec.c.collection_id == col.id, ec.c.epoch == epoch)
                .values(closed=True)
            )
        return {"epoch": epoch, "closed": True}

    # ------------------------------------------------------------------ queries
    def epochs(
        self, col: Collection, start: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """A page of the collection's epochs, oldest first: number of reports, closed, open."""
        ec = db.epoch_counts
        limit = min(limit or 1000, 10_000)
        closed = sa.func.max(sa.case((ec.c.closed, 1), else_=0))
        q = (
            sa.select(ec.c.epoch, sa.func.sum(ec.c.n), closed)
            .where(ec.c.collection_id == col.id)
            .group_by(ec.c.epoch)
        )
        if start is not None:
            q = q.where(ec.c.epoch >= start)
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(q.order_by(ec.c.epoch).limit(limit + 1)).all()
        low, high = col.open_range()
        out = [
            {
                "epoch": int(e),
                "n": int(n),
                "closed": bool(c),
                "open": not c and low <= int(e) <= high,
            }
            for e, n, c in rows[:limit]
        ]
        return {
            "collection": col.name,
            "epochs": out,
            "next_start": int(rows[limit][0]) if len(rows) > limit else None,
            "open_epochs": [low, high] if low <= high else None,
        }

    # ------------------------------------------------------------------ plans and the ledger
    def plan(self, col: Collection, epoch: int) -> dict[str, Any]:
        """What a device needs at ``epoch`` (docs/server.md, "Plans"): ``status`` "report" with
        the ``plan`` it reports with (None: the protocol plans nothing), "none" (nothing is
        reported at this epoch) or "pending" (the plan waits for the server's decision on an
        earlier epoch, taken when that epoch is closed: THRESH's update after its votes)."""
        offset = epoch - col.first_epoch
        if offset < 0 or (col.last_epoch is not None and epoch > col.last_epoch):
            status, plan = "none", None
        else:
            try:
                status, plan = col.proto.server_plan(offset, lambda j: self._closed(col, j))
            except ValueError as err:  # a planned method whose decision step is not built
                raise ClientError(422, str(err)) from None
        return {"collection": col.name, "epoch": epoch, "status": status, "plan": plan}

    def _served_plan(self, col: Collection, epoch: int) -> dict[str, Any] | None:
        """The plan served at ``epoch``, or None (no plan, or none the server serves)."""
        try:
            return self.plan(col, epoch)["plan"]
        except ClientError:
            return None

    def _closed(self, col: Collection, offset: int) -> NDArray[np.int64] | None:
        """The support counts of epoch ``first_epoch + offset`` once it is closed, else None."""
        epoch = col.first_epoch + offset
        ec = db.epoch_counts
        with db.transaction(self.engine, write=False) as conn:
            closed = conn.execute(
                sa.select(sa.func.max(sa.case((ec.c.closed, 1), else_=0))).where(
                    ec.c.collection_id == col.id, ec.c.epoch == epoch
                )
            ).scalar()
            if not closed:
                return None
            got = _summed(conn, col, [epoch])
        return got[epoch][1]

    def ledger(self, col: Collection) -> dict[str, Any]:
        """What the collection's devices spent (docs/math.md §19.6), from their stored reports
        and the plans served: per device, the figure of the protocol's accounting (the worst
        window for a w-event protocol) and over the whole horizon, summarized as median, 99th
        percentile and maximum over the devices (``status`` "ok"); "shared" when reports are
        not bound to devices, "too-many" past :data:`LEDGER_REPORTS` reports, "not-offered"
        when only the devices know it (a memo chain's distinct memos)."""
        out: dict[str, Any] = {
            "collection": col.name,
            "rule": col.proto.accounting.rule,
            "status": "ok",
            "devices": 0,
            "spent": None,
            "lifetime": None,
            "note": "",
        }
        if col.auth != db.AUTH_DEVICE:
            out["status"] = "shared"
            out["note"] = (
                "Reports come under one shared token: the server cannot tell devices apart, "
                "so it cannot say what each spent (each device's client knows its own)."
            )
            return out
        r = db.reports
        mine = r.c.collection_id == col.id
        with db.transaction(self.engine, write=False) as conn:
            total = int(conn.execute(sa.select(sa.func.count()).where(mine)).scalar() or 0)
            if total > LEDGER_REPORTS:
                out["status"] = "too-many"
                out["note"] = (
                    f"{total:,} reports: the ledger is computed up to {LEDGER_REPORTS:,} "
                    "(each device's client keeps its own spending)."
                )
                return out
            rows = conn.execute(sa.select(r.c.device_id, r.c.epoch, r.c.wire).where(mine)).all()
        if not rows:
            out["note"] = "No reports yet."
            return out
        owners = np.array([int(d) for d, _, _ in rows], dtype=np.int64)
        epochs = np.array([int(e) for _, e, _ in rows], dtype=np.int64)
        records = col.proto.decode_reports(b"".join(bytes(w) for _, _, w in rows))
        plans = functools.lru_cache(maxsize=None)(lambda e: self._served_plan(col, e))
        try:
            devices, spent, lifetime = col.proto.reports_spent(owners, epochs, records, plans)
        except ValueError as err:
            out["status"] = "not-offered"
            out["note"] = str(err)
            return out
        summary = ledger_summary(spent, lifetime)
        out |= {"devices": int(devices.size), **summary}
        out["note"] = LEDGER_NOTES.get(out["rule"], "")
        return out

    def counts(self, col: Collection, epoch: int) -> tuple[int, NDArray[np.int64]]:
        """(n, support counts) of one epoch (the sums over its shards); (0, zeros) if it has
        no reports."""
        with db.transaction(self.engine, write=False) as conn:
            got = _summed(conn, col, [epoch])
        if epoch not in got:
            return 0, np.zeros(col.proto.support_shape, dtype=codec.support_dtype(col.proto))
        return got[epoch]

    def value_window(self, col: Collection, offset: int | None, count: int | None) -> slice:
        """The values [offset, offset + count) an answer carries, capped by
        ``max_answer_values`` numbers (422 if ``offset`` is past the end). Values index the
        estimate's last axis: RAPPOR's (m, k) Bloom shares carry m numbers per bit."""
        total, per_value = value_axis(col.proto)
        offset = 0 if offset is None else offset
        if not 0 <= offset < total:
            raise ClientError(422, f"'offset' must be in [0, {total}); got {offset}.")
        cap = min(total - offset, max(1, self.limits.max_answer_values // per_value))
        count = cap if count is None else min(count, cap)
        if count < 1:
            raise ClientError(422, "'count' must be at least 1.")
        return slice(offset, offset + count)

    def estimate(
        self,
        col: Collection,
        epoch: int,
        postprocess: str | None,
        offset: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """One epoch's estimates for the values [offset, offset + count) (all that fit the
        answer cap by default); ``"values"`` says which, of how many."""
        window = self.value_window(col, offset, count)
        n, support = self.counts(col, epoch)
        if n == 0:
            raise ClientError(404, f"epoch {epoch} has no reports.")
        payload = estimate_payload(col.proto, support, n, postprocess, window)
        return {"epoch": epoch, **payload, "values": _window_info(col, window)}

    def discovered(self, col: Collection, epoch: int) -> dict[str, Any]:
        """The items one epoch's reports reveal, for a protocol whose estimand is
        ``discovered-items`` (PEM): the server's rounds run on the epoch's support
        (``proto.discover``), the items found with frequencies, standard errors and 95%
        intervals, and each round's reports, candidates, threshold and kept."""
        if col.proto.estimand is not Estimand.DISCOVERED_ITEMS:
            raise ClientError(
                422,
                f"{col.proto.name} estimates {col.proto.estimand}, not discovered items; use "
                "the estimate endpoint.",
            )
        n, support = self.counts(col, epoch)
        if n == 0:
            raise ClientError(404, f"epoch {epoch} has no reports.")
        return {"epoch": epoch, "n": n, **col.proto.discover(support, n).as_dict()}

    def series(
        self,
        col: Collection,
        postprocess: str | None,
        start: int | None,
        stop: int | None,
        limit: int | None = None,
        offset: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """A page of the estimates of every epoch with reports in [start, stop]: at most
        ``limit`` epochs and as many as keep epochs × values within ``max_answer_values``;
        ``next_start`` is the epoch the next page starts at (None on the last page)."""
        window = self.value_window(col, offset, count)
        numbers = (window.stop - window.start) * value_axis(col.proto)[1]
        per_page = max(1, min(1000, self.limits.max_answer_values // numbers))
        limit = per_page if limit is None else max(1, min(limit, per_page))
        ec = db.epoch_counts
        q = sa.select(ec.c.epoch).where(ec.c.collection_id == col.id, ec.c.n > 0)
        if start is not None:
            q = q.where(ec.c.epoch >= start)
        if stop is not None:
            q = q.where(ec.c.epoch <= stop)
        with db.transaction(self.engine, write=False) as conn:
            page = conn.execute(q.group_by(ec.c.epoch).order_by(ec.c.epoch).limit(limit + 1))
            page = [int(e) for e in page.scalars()]
            counts = _summed(conn, col, page[:limit])
        epochs = [
            {
                "epoch": e,
                **estimate_payload(col.proto, counts[e][1], counts[e][0], postprocess, window),
            }
            for e in page[:limit]
        ]
        return {
            "collection": col.name,
            "postprocess": postprocess,
            "epochs": epochs,
            "values": _window_info(col, window),
            "limit": limit,
            "next_start": page[limit] if len(page) > limit else None,
        }

    def dashboard_view(self, col: Collection, postprocess: str | None) -> dict[str, Any]:
        """What the dashboard draws, bounded: the latest :func:`dashboard.epochs_shown`
        epochs with reports; over them, the estimates and intervals of the positions with the
        largest mean estimate (chart), and the latest epoch's largest estimates (table). A
        position is a value, or a (cohort, bit) of RAPPOR's (m, k) Bloom shares; one with no
        number (an empty cohort) is never chosen."""
        from longldp.server import dashboard
        from longldp.server.sybil import sybil_view

        proto = col.proto
        size = math.prod(proto.estimate_shape)
        shown = dashboard.epochs_shown(size, self.limits.max_answer_values)
        ec = db.epoch_counts
        mine = sa.and_(ec.c.collection_id == col.id, ec.c.n > 0)
        with db.transaction(self.engine, write=False) as conn:
            total_epochs, total_reports, min_n = _epoch_totals(conn, col)
            latest = conn.execute(
                sa.select(ec.c.epoch)
                .where(mine)
                .group_by(ec.c.epoch)
                .order_by(ec.c.epoch.desc())
                .limit(shown)
            ).scalars()
            epochs = sorted(int(e) for e in latest)
            counts = _summed(conn, col, epochs)
        view: dict[str, Any] = {
            "total_epochs": int(total_epochs),
            "total_reports": int(total_reports),
            "min_epoch_reports": min_n,
            "central": self._central(col, min_n, total_epochs),
            "sybil": sybil_view(
                col.proto, col.auth, self.device_bounds(col), col.reports_per_epoch
            ),
            "estimand": str(proto.estimand),
            "ledger": self.ledger(col) if (proto.planned or proto.history) else None,
            "chart": [],
            "chart_values": [],
            "chart_labels": [],
            "latest": None,
        }
        if not epochs:
            return view
        flat = {
            e: _flat(estimate_of(proto, counts[e][1], counts[e][0], postprocess)) for e in epochs
        }
        est = np.stack([flat[e]["estimate"] for e in epochs])
        with np.errstate(invalid="ignore"):
            mean = np.where(np.all(np.isfinite(est), axis=0), est.mean(axis=0), -np.inf)
        top = [int(v) for v in np.argsort(-mean, kind="stable")[: dashboard.TOP_CHART]]
        top = [v for v in top if np.isfinite(mean[v])]
        names = proto.estimate_labels()

        def label(v: int) -> str:
            if names:
                return names[v]
            return dashboard.position_label(proto.estimate_shape, v, proto.estimate_axes)

        view["chart_values"] = top
        view["chart_labels"] = [label(v) for v in top]
        view["chart"] = [{"epoch": e, "n": counts[e][0], **_pick(flat[e], top)} for e in epochs]
        last = epochs[-1]
        if proto.estimand is Estimand.DISCOVERED_ITEMS:  # the items the rounds found
            found = proto.discover(counts[last][1], counts[last][0]).as_dict()
            view["discovered"] = {"epoch": last, **found}
        now = flat[last]["estimate"]
        best = np.argsort(-np.nan_to_num(now, nan=-np.inf), kind="stable")[: dashboard.TOP_TABLE]
        best = [int(v) for v in best if np.isfinite(now[v])]
        view["latest"] = {
            "epoch": last,
            "values": best,
            "labels": [label(v) for v in best],
            **_pick(flat[last], best),
        }
        return view

    def central_privacy(self, col: Collection) -> dict[str, Any]:
        """The collection's central (shuffled) privacy at its smallest epoch's report count
        and its number of epochs with reports (:func:`longldp.server.central.central_privacy`)."""
        with db.transaction(self.engine, write=False) as conn:
            epochs, reports, min_n = _epoch_totals(conn, col)
        return {
            "collection": col.name,
            "total_reports": reports,
            **self._central(col, min_n, epochs),
        }

    @staticmethod
    def _central(col: Collection, min_n: int | None, epochs: int) -> dict[str, Any]:
        return central.central_privacy(col.proto, min_n, epochs, col.auth, col.reports_per_epoch)

    def recount(self, col: Collection, epoch: int) -> tuple[int, NDArray[np.int64]]:
        """(n, support) recomputed from the stored reports of an epoch (for audits and tests)."""
        r = db.reports
        with db.transaction(self.engine, write=False) as conn:
            wires = (
                conn.execute(
                    sa.select(r.c.wire).where(r.c.collection_id == col.id, r.c.epoch == epoch)
                )
                .scalars()
                .all()
            )
        if not wires:
            return 0, np.zeros(col.proto.support_shape, dtype=codec.support_dtype(col.proto))
        rows = np.frombuffer(b"".join(wires), dtype=np.uint8).reshape(len(wires), -1)
        return len(wires), codec.support_of_rows(col.proto, rows)

    def export_parquet(self, col: Collection, epoch: int, devices: bool = False) -> bytes:
        """One epoch's reports as a report archive in memory (:meth:`export_chunks` joined)."""
        return b"".join(self.export_chunks(col, epoch, devices))

    def export_chunks(
        self, col: Collection, epoch: int, devices: bool = False
    ) -> Iterator[bytes]:
        """One epoch's reports as a report archive (``docs/scale-out.md`` §1), ordered by
        device and report id, written as it is read: a row group of at most
        :data:`EXPORT_PAGE_ROWS` reports at a time, each page read in a short transaction of
        its own after the last key of the previous one (no snapshot is held while a client
        reads), so the memory of an export does not grow with the epoch. With ``devices``, an
        extra column ``device`` (uint64, 0 for the shared token) links each report to the
        device that sent it. An epoch still open may gain reports during its export; a page
        holds those stored when it is read."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from longldp.archive import layout

        r = db.reports
        schema = layout.archive_schema(col.proto, col.name)
        if devices:
            schema = schema.append(pa.field("device", pa.uint64(), nullable=False))
        sink = _Chunks()
        writer = pq.ParquetWriter(sink, schema, **layout.WRITE_OPTIONS)
        after: tuple[int, bytes] | None = None
        written = False
        while True:
            q = sa.select(r.c.device_id, r.c.report_id, r.c.cohort, r.c.wire).where(
                r.c.collection_id == col.id, r.c.epoch == epoch
            )
            if after is not None:
                q = q.where(sa.tuple_(r.c.device_id, r.c.report_id) > sa.tuple_(*after))
            with db.transaction(self.engine, write=False) as conn:
                rows = conn.execute(
                    q.order_by(r.c.device_id, r.c.report_id).limit(EXPORT_PAGE_ROWS)
                ).all()
            if rows or not written:
                writer.write_table(_export_table(col, schema, epoch, rows, devices))
                written = True
                yield from sink.drain()
            if len(rows) < EXPORT_PAGE_ROWS:
                break
            after = (int(rows[-1].device_id), bytes(rows[-1].report_id))
        writer.close()
        yield from sink.drain()

    def device_history(self, col: Collection, device: int) -> list[dict[str, Any]]:
        """Every stored report of one device, by epoch then report id: what a longitudinal
        defence reads (docs/server.md, "Device identities")."""
        r = db.reports
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(
                sa.select(r.c.epoch, r.c.report_id, r.c.cohort, r.c.wire)
                .where(r.c.collection_id == col.id, r.c.device_id == device)
                .order_by(r.c.epoch, r.c.report_id)
            ).all()
        return [
            {
                "epoch": int(row.epoch),
                "id": bytes(row.report_id),
                "cohort": row.cohort,
                "report": bytes(row.wire),
            }
            for row in rows
        ]


def _epoch_totals(conn: Any, col: Collection) -> tuple[int, int, int | None]:
    """(epochs with reports, reports, the smallest number of reports in one epoch; None when
    there are none), each epoch's count rows summed."""
    ec = db.epoch_counts
    per_epoch = (
        sa.select(sa.func.sum(ec.c.n).label("n"))
        .where(ec.c.collection_id == col.id, ec.c.n > 0)
        .group_by(ec.c.epoch)
        .subquery()
    )
    epochs, reports, smallest = conn.execute(
        sa.select(
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(per_epoch.c.n), 0),
            sa.func.min(per_epoch.c.n),
        )
    ).one()
    return int(epochs), int(reports), None if smallest is None else int(smallest)


def _summed(conn: Any, col: Collection, epochs: list[int]) -> dict[int, tuple[int, NDArray]]:
    """{epoch: (n, support)} of the epochs among ``epochs`` with count rows: the sums over
    each epoch's shards."""
    if not epochs:
        return {}
    ec = db.epoch_counts
    shape = col.proto.support_shape
    out: dict[int, tuple[int, NDArray]] = {}
    rows = conn.execute(
        sa.select(ec.c.epoch, ec.c.n, ec.c.support).where(
            ec.c.collection_id == col.id, ec.c.epoch.in_(epochs)
        )
    )
    for e, n, blob in rows:
        kind = codec.support_dtype(col.proto)
        support = np.frombuffer(blob, dtype=kind).reshape(shape).astype(kind.newbyteorder("="))
        have = out.get(int(e))
        out[int(e)] = (int(n), support) if have is None else (have[0] + n, have[1] + support)
    return out


#: Most reports a collection's ledger is computed from, on request (it decodes them all).
LEDGER_REPORTS = 1_000_000

#: What each accounting's ledger figure is, in words (docs/math.md §19.6).
LEDGER_NOTES = {
    "per-window": (
        "Each device's most ε spent in any window of w consecutive epochs (the w-event "
        "guarantee caps it at eps_window), and its total over the horizon, from the plans' "
        "budgets of the epochs it reported in."
    ),
    "per-change": (
        "An upper bound of each device's ε: every report counted at its context's ε (the server "
        "cannot tell a real vote or a non-zero node from the default, which costs nothing), "
        "capped by the protocol's counters; the device's client knows the exact figure."
    ),
    "per-report": "Each device's reports times the ε of one report (sequential composition).",
}


def ledger_summary(spent: NDArray, lifetime: NDArray) -> dict[str, dict[str, float]]:
    """Median, 99th percentile and maximum of the devices' figures (JSON-ready)."""

    def stats(arr: NDArray) -> dict[str, float]:
        a = np.asarray(arr, dtype=np.float64)
        return {
            "median": float(np.median(a)),
            "p99": float(np.quantile(a, 0.99)),
            "max": float(np.max(a)),
        }

    return {"spent": stats(spent), "lifetime": stats(lifetime)}


def value_axis(proto: FrequencyOracle) -> tuple[int, int]:
    """(values on the estimate's last axis, numbers per value: the product of its other axes;
    1 for a frequency vector, m cohorts for RAPPOR's (m, k) Bloom shares)."""
    shape = tuple(proto.estimate_shape)
    return int(shape[-1]), math.prod(shape[:-1])


def _window_info(col: Collection, window: slice) -> dict[str, Any]:
    total = value_axis(col.proto)[0]
    return {
        "offset": window.start,
        "count": window.stop - window.start,
        "total": total,
        "truncated": window.stop - window.start < total,
    }


def estimate_of(
    proto: FrequencyOracle, support: NDArray[np.int64], n: int, postprocess: str | None
) -> Estimate:
    """:meth:`FrequencyOracle.estimate_with_se` at the 95% level; a method that does not apply
    is the client's error (422)."""
    try:
        return proto.estimate_with_se(support, n, postprocess, level=0.95)
    except ValueError as exc:
        raise ClientError(422, f"post-processing {postprocess!r} does not apply: {exc}") from None


def estimate_payload(
    proto: FrequencyOracle,
    support: NDArray[np.int64],
    n: int,
    postprocess: str | None,
    values: slice | NDArray[np.int64] = slice(None),
) -> dict[str, Any]:
    """Estimates of one epoch with standard errors and 95% normal intervals: the protocol's
    one estimate-with-SE function (:meth:`FrequencyOracle.estimate_with_se`, docs/math.md
    §1.5), as JSON (nested lists for RAPPOR's (m, k) Bloom shares; an empty cohort's NaN as
    null). ``raw`` is the unbiased estimate, ``estimate`` the same or its post-processing, and
    the interval raw ± 1.96·SE is stated for the unbiased estimate (docs/server.md). Only the
    ``values`` of each array's last axis are returned (a slice or indices: the server's answer
    cap); :func:`estimate_of` gives the whole :class:`~longldp.protocols.Estimate`.
    """
    est = estimate_of(proto, support, n, postprocess)
    picked = dataclasses.replace(
        est,
        **{f: getattr(est, f)[..., values] for f in ("estimate", "raw", "se", "lower", "upper")},
    )
    out = picked.as_dict()
    del out["level"]
    return out


_SHOWN = ("estimate", "se", "lower", "upper")


def _flat(est: Estimate) -> dict[str, NDArray[np.float64]]:
    """The shown arrays of an estimate, flattened (row-major positions)."""
    return {f: np.asarray(getattr(est, f), dtype=np.float64).ravel() for f in _SHOWN}


def _pick(flat: dict[str, NDArray[np.float64]], positions: list[int]) -> dict[str, list[float]]:
    return {f: [float(flat[f][v]) for v in positions] for f in _SHOWN}


def _postprocess_name(method: Any) -> str:
    if not isinstance(method, str):
        raise ClientError(422, f"'postprocess' must be one of {', '.join(pp.METHODS)} or none.")
    key = method.strip().lower().replace("_", "-")
    if key not in pp.METHODS:
        raise ClientError(
            422, f"'postprocess' must be one of {', '.join(pp.METHODS)} or none; got {method!r}."
        )
    return key


def resolve_postprocess(col: Collection, query: str | None) -> str | None:
    """The method of a query: 'none' for raw, a method name, or the collection's default."""
    if query is None:
        return col.postprocess
    if query.strip().lower() in ("none", "raw", ""):
        return None
    return _postprocess_name(query)


def _int_field(body: dict, name: str, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_EPOCH:
        raise ClientError(422, f"'{name}' must be an integer epoch in [0, {MAX_EPOCH}].")
    return value


def _float_field(body: dict, name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ClientError(422, f"'{name}' must be a finite number.")
    return float(value)


def _count_field(body: dict, name: str, default: int, top: int, least: int = 1) -> int:
    value = body.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= top:
        raise ClientError(
            422, f"'{name}' must be an integer in [{least}, {top}]; got {value!r}."
        )
    return value


def _only(body: Any, allowed: frozenset[str], message: str) -> None:
    """422 unless ``body`` is a JSON object whose fields are all in ``allowed``; ``message``
    has two slots: the unknown fields, the allowed ones."""
    if not isinstance(body, dict):
        raise ClientError(422, "the body must be a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ClientError(422, message.format(", ".join(unknown), ", ".join(sorted(allowed))))


def _range_or_none(low: int, high: int) -> list[int] | None:
    return [low, high] if low <= high else None


#: Reports per row group (and per database page) of a streamed export.
EXPORT_PAGE_ROWS = 50_000


class _Chunks(io.RawIOBase):
    """A write-only file that hands out what was written since the last :meth:`drain`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.pos = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.parts.append(chunk)
        self.pos += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.pos

    def drain(self) -> list[bytes]:
        out, self.parts = self.parts, []
        return out


def _export_table(col: Collection, schema: Any, epoch: int, rows: list[Any], devices: bool):  # type: ignore[no-untyped-def]
    """The Arrow table of one page of an export."""
    import pyarrow as pa

    from longldp.archive import layout

    n = len(rows)
    ids = np.frombuffer(b"".join(bytes(row.report_id) for row in rows), np.uint8)
    wires = np.frombuffer(b"".join(bytes(row.wire) for row in rows), np.uint8)
    cohorts = [row.cohort for row in rows]
    table = layout.report_table(
        col.proto,
        layout.archive_schema(col.proto, col.name),
        epoch,
        ids.reshape(n, 16),
        wires.reshape(n, col.proto.wire_size),
        None if all(c is None for c in cohorts) else cohorts,
    )
    if devices:
        column = pa.array(np.array([row.device_id for row in rows], dtype=np.uint64))
        table = table.append_column(pa.field("device", pa.uint64(), nullable=False), column)
    return table.cast(schema)
