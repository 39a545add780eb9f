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
import hmac
import json
import math
import re
import threading
import time
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

#: A collection name, matched whole (``re.fullmatch``: ``$`` would accept a trailing newline).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_EPOCH = 2**32 - 1
#: Largest domain a collection may have (support counts are stored per epoch).
MAX_K = 1 << 20
#: Epoch window of a new collection unless it names one.
DEFAULT_EPOCH_WINDOW = 8
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
    answer computes and sends.
    """

    max_body_bytes: int = 16 * 1024 * 1024
    max_batch: int = 10_000
    max_epochs_per_request: int = 8
    max_open_epochs: int = 64
    max_collection_bytes: int = 512 * 1024 * 1024
    max_answer_values: int = 100_000

    def __post_init__(self) -> None:
        least = {
            "max_body_bytes": 1024,
            "max_batch": 1,
            "max_epochs_per_request": 1,
            "max_open_epochs": 2,
            "max_collection_bytes": 1 << 20,
            "max_answer_values": 100,
        }
        for name, low in least.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"server: '{name}' must be an integer ≥ {low}; got {value!r}.")

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
    """A collection as loaded from the database (its protocol object built once)."""

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
    record_size: int = field(init=False)

    def __post_init__(self) -> None:
        self.record_size = codec.ID_BYTES + codec.EPOCH_BYTES + codec.report_size(self.proto)

    def current_epoch(self, now: float | None = None) -> int | None:
        """The epoch of wall-clock time ``now`` when the collection has an epoch length."""
        if self.epoch_seconds is None or self.start_time is None:
            return None
        now = time.time() if now is None else now
        return self.first_epoch + math.floor((now - self.start_time) / self.epoch_seconds)

    def open_range(self, newest: int | None, now: float | None = None) -> tuple[int, int]:
        """(lowest, highest) epoch open for reports (empty when lowest > highest).

        [first_epoch, last_epoch], and within the window W: with a wall clock, the W epochs
        up to the current one; without, the epochs within W of the newest epoch with reports
        (newest − W, newest + W] (any epoch while there is none).
        """
        low, high = self.first_epoch, MAX_EPOCH if self.last_epoch is None else self.last_epoch
        current = self.current_epoch(now)
        window = self.epoch_window
        if current is not None:
            high = min(high, current)
            if window is not None:
                low = max(low, current - window + 1)
        elif window is not None and newest is not None:
            low = max(low, newest - window + 1)
            high = min(high, newest + window)
        return low, high

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
    if proto.longitudinal:
        words = (
            f"{proto.name} over {proto.k} values. Each device randomizes its value twice: a "
            f"permanent answer memoized per value (ε∞ = {eps_memo:.3g}) and a fresh one per "
            f"report (ε1 = {eps_report:.3g}). One report reveals at most ε = {eps_report:.3g}; "
            f"a device that reports t times over d distinct values reveals at most "
            f"min(t·{eps_report:.3g}, d·{eps_memo:.3g}), however long it keeps reporting."
        )
    else:
        words = (
            f"{proto.name} over {proto.k} values, one-shot: every report is randomized afresh "
            f"and reveals at most ε = {eps_report:.3g}; t reports reveal at most t·ε."
        )
    return {
        "longitudinal": bool(proto.longitudinal),
        "epsilon_per_report": eps_report,
        "epsilon_memo": eps_memo,
        "words": words,
    }


#: One query per request: the collection, and the stored hash of the device a credential names.
_WHO = (
    sa.select(db.collections, db.devices.c.credential_hash)
    .select_from(
        db.collections.outerjoin(
            db.devices,
            sa.and_(
                db.devices.c.collection_id == db.collections.c.id,
                db.devices.c.id == sa.bindparam("device"),
            ),
        )
    )
    .where(db.collections.c.name == sa.bindparam("name"))
)

_CREATE_FIELDS = frozenset(
    {
        "name",
        "protocol",
        "first_epoch",
        "last_epoch",
        "epoch_seconds",
        "start_time",
        "epoch_window",
        "auth",
        "reports_per_epoch",
        "postprocess",
        "description",
    }
)


class Service:
    """The collection server's operations over ``engine`` (already migrated)."""

    def __init__(self, engine: Engine, admin_token: str, limits: Limits | None = None):
        if not isinstance(admin_token, str) or len(admin_token) < 16:
            raise ValueError("server: 'admin_token' must be a string of at least 16 characters.")
        self.engine = engine
        self.admin_token = admin_token
        self._admin_digest = tokens.digest(admin_token)
        self.limits = limits or Limits()
        self._collections: dict[tuple[int, str], Collection] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ collections
    def is_admin(self, token: str | None) -> bool:
        """Whether ``token`` is the admin token (constant-time comparison)."""
        return tokens.matches_plain(token, self.admin_token)

    def create_collection(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a collection; returns it with its tokens (shown this once only).

        A device-mode collection (the default) gets an enrollment token and a read token; a
        shared-token collection (``"auth": "shared"``) an ingest token and a read token.
        """
        if not isinstance(body, dict):
            raise ClientError(422, "the body must be a JSON object.")
        unknown = sorted(set(body) - _CREATE_FIELDS)
        if unknown:
            raise ClientError(
                422,
                f"unknown field(s) {', '.join(unknown)}; allowed: "
                f"{', '.join(sorted(_CREATE_FIELDS))}.",
            )
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
        top = self.limits.max_open_epochs - 1
        window = _count_field(body, "epoch_window", DEFAULT_EPOCH_WINDOW, top)
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
        if not proto.report_kind.discrete:
            raise ClientError(
                422,
                f"'protocol': {proto.name}'s reports are continuous (report kind "
                f"'{proto.report_kind}'): their sums are not the integer counts this server "
                "stores.",
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

    def list_collections(self) -> list[dict[str, Any]]:
        """Every collection's public description, by name."""
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(sa.select(db.collections).order_by("name")).mappings().all()
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
        """The :class:`Collection` of a database row, built once per collection (a
        collection never changes once created; its row is still read on every request)."""
        key = (int(row["id"]), row["protocol_spec"])
        with self._lock:
            hit = self._collections.get(key)
        if hit is not None:
            return hit
        spec = json.loads(row["protocol_spec"])
        enroll = row["enroll_token_hash"]
        col = Collection(
            id=row["id"],
            name=row["name"],
            proto=protocol_from_spec(spec),
            spec=spec,
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
        )
        with self._lock:
            self._collections[key] = col
        return col

    # ------------------------------------------------------------------ who is asking
    def authenticate(self, name: str, token: str) -> Access:
        """The collection, role and device of ``token`` on collection ``name``.

        One query reads the collection and, when the token is shaped like a device credential,
        that device's stored hash; then every comparison runs (admin, read, ingest, enroll,
        device), against :data:`tokens.ABSENT` where a hash does not exist, before anything
        branches on the result. An unknown collection and a wrong token therefore do the
        same work and get the same answer from the web layer.
        """
        presented = tokens.digest(token)
        device = tokens.device_of(token)
        row = None
        if isinstance(name, str) and NAME_RE.fullmatch(name):
            params = {"name": name, "device": -1 if device is None else device}
            with db.transaction(self.engine, write=False) as conn:
                row = conn.execute(_WHO, params).mappings().first()
        get = (lambda key: row[key]) if row is not None else (lambda key: None)
        shared = get("auth") == db.AUTH_SHARED
        is_admin = hmac.compare_digest(presented, self._admin_digest)
        is_read = tokens.matches_digest(presented, get("read_token_hash"))
        is_ingest = tokens.matches_digest(presented, get("ingest_token_hash")) and shared
        is_enroll = tokens.matches_digest(presented, get("enroll_token_hash"))
        is_device = tokens.matches_digest(presented, get("credential_hash"))
        if row is None:
            return Access(None, "admin" if is_admin else None)
        col = self._from_row(row)
        for role, ok in (
            ("admin", is_admin),
            ("read", is_read),
            ("ingest", is_ingest),
            ("enroll", is_enroll),
            ("device", is_device),
        ):
            if ok:
                return Access(col, role, device if role == "device" else db.SHARED_DEVICE)
        return Access(col, None)

    def role_of(self, col: Collection, token: str | None) -> str | None:
        """'admin', 'read', 'ingest', 'enroll', 'device' or None for ``token`` on ``col``."""
        if token is None:
            return None
        return self.authenticate(col.name, token).role

    def enroll(self, col: Collection) -> dict[str, Any]:
        """Enroll a new device in a device-mode collection: its id and credential (shown this
        once; the server keeps only the credential's SHA-256 digest)."""
        if col.auth != db.AUTH_DEVICE:
            raise ClientError(
                409, f"collection {col.name!r} takes a shared ingest token; devices do not enroll."
            )
        placeholder = tokens.digest(tokens.new_token("enroll"))
        with db.transaction(self.engine, write=True) as conn:
            device = conn.execute(
                db.devices.insert()
                .values(collection_id=col.id, credential_hash=placeholder, created_at=time.time())
                .returning(db.devices.c.id)
            ).scalar_one()
            credential = tokens.new_device_credential(device)
            conn.execute(
                db.devices.update()
                .where(db.devices.c.id == device)
                .values(credential_hash=tokens.digest(credential))
            )
        return {
            "collection": col.name,
            "device": int(device),
            "credential": credential,
            "reports_per_epoch": col.reports_per_epoch,
        }

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

    def close_epoch(self, col: Collection, epoch: int) -> dict[str, Any]:
        """Close an epoch: later reports for it are refused (its estimate no longer moves).

        Every count row (shard) of the epoch is created if missing and flagged, so an ingest
        that holds one of them finishes first, and any later one sees the flag."""
        ec = db.epoch_counts
        zeros = np.zeros(col.proto.support_shape, dtype="<i8").tobytes()
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
            newest = conn.execute(
                sa.select(sa.func.max(ec.c.epoch)).where(ec.c.collection_id == col.id, ec.c.n > 0)
            ).scalar()
            rows = conn.execute(q.order_by(ec.c.epoch).limit(limit + 1)).all()
        low, high = col.open_range(None if newest is None else int(newest))
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

    def counts(self, col: Collection, epoch: int) -> tuple[int, NDArray[np.int64]]:
        """(n, support counts) of one epoch (the sums over its shards); (0, zeros) if it has
        no reports."""
        with db.transaction(self.engine, write=False) as conn:
            got = _summed(conn, col, [epoch])
        if epoch not in got:
            return 0, np.zeros(col.proto.support_shape, dtype=np.int64)
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
        view["chart_values"] = top
        view["chart_labels"] = [dashboard.position_label(proto.estimate_shape, v) for v in top]
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
            "labels": [dashboard.position_label(proto.estimate_shape, v) for v in best],
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
            return 0, np.zeros(col.proto.support_shape, dtype=np.int64)
        rows = np.frombuffer(b"".join(wires), dtype=np.uint8).reshape(len(wires), -1)
        return len(wires), codec.support_of_rows(col.proto, rows)

    def export_parquet(self, col: Collection, epoch: int, devices: bool = False) -> bytes:
        """One epoch's reports as a report archive (``docs/scale-out.md`` §1), ordered by
        device and report id; with ``devices``, an extra column ``device`` (uint64, 0 for the
        shared token) links each report to the device that sent it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from longldp.archive import layout

        r = db.reports
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(
                sa.select(r.c.device_id, r.c.report_id, r.c.cohort, r.c.wire)
                .where(r.c.collection_id == col.id, r.c.epoch == epoch)
                .order_by(r.c.device_id, r.c.report_id)
            ).all()
        n = len(rows)
        ids = np.frombuffer(b"".join(bytes(row.report_id) for row in rows), np.uint8)
        wires = np.frombuffer(b"".join(bytes(row.wire) for row in rows), np.uint8)
        cohorts = [row.cohort for row in rows]
        if not devices:
            return layout.archive_bytes(
                col.proto,
                col.name,
                epoch,
                ids.reshape(n, 16),
                wires.reshape(n, col.proto.wire_size),
                None if all(c is None for c in cohorts) else cohorts,
            )
        schema = layout.archive_schema(col.proto, col.name)
        table = layout.report_table(
            col.proto,
            schema,
            epoch,
            ids.reshape(n, 16),
            wires.reshape(n, col.proto.wire_size),
            None if all(c is None for c in cohorts) else cohorts,
        )
        column = pa.array(np.array([row.device_id for row in rows], dtype=np.uint64))
        table = table.append_column(pa.field("device", pa.uint64(), nullable=False), column)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, **layout.WRITE_OPTIONS)
        return sink.getvalue().to_pybytes()

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
        support = np.frombuffer(blob, dtype="<i8").reshape(shape).astype(np.int64)
        have = out.get(int(e))
        out[int(e)] = (int(n), support) if have is None else (have[0] + n, have[1] + support)
    return out


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


def _count_field(body: dict, name: str, default: int, top: int) -> int:
    value = body.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
        raise ClientError(422, f"'{name}' must be an integer in [1, {top}]; got {value!r}.")
    return value
