"""What the collection server does, without HTTP: collections, idempotent ingest, estimates,
series and export over one SQLAlchemy engine.

Every method is synchronous and safe to call from many threads at once; the web layer
(:mod:`longldp.server.app`) runs them in a thread pool. Errors a client can fix raise
:class:`ClientError` (with an HTTP status and, for a batch, the index of the first bad item);
an unreachable or busy database raises :class:`~longldp.server.db.DatabaseUnavailableError`.
"""

from __future__ import annotations

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
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from longldp import postprocess as pp
from longldp.protocols import FrequencyOracle, protocol_from_spec
from longldp.server import _codec as codec
from longldp.server import db, tokens

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_EPOCH = 2**32 - 1
#: Largest domain a collection may have (support counts are stored per epoch).
MAX_K = 1 << 20
#: Ids looked up per query on SQLite (its limit on bound parameters is 32,766).
SQLITE_IN_CHUNK = 5000
#: The row insert of the SQLite path (also what benchmarks/bench_service.py times raw).
SQLITE_INSERT = (
    "INSERT INTO reports (collection_id, report_id, epoch, cohort, wire) VALUES (?, ?, ?, ?, ?)"
)


class ClientError(ValueError):
    """A request the client can fix: HTTP ``status``, a message, optionally the bad item."""

    def __init__(self, status: int, message: str, item: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.item = item


@dataclass(frozen=True)
class Limits:
    """Bounds on one ingest request."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_batch: int = 10_000


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
    record_size: int = field(init=False)

    def __post_init__(self) -> None:
        self.record_size = codec.ID_BYTES + codec.EPOCH_BYTES + codec.report_size(self.proto)

    def current_epoch(self, now: float | None = None) -> int | None:
        """The epoch of wall-clock time ``now`` when the collection has an epoch length."""
        if self.epoch_seconds is None or self.start_time is None:
            return None
        now = time.time() if now is None else now
        return self.first_epoch + math.floor((now - self.start_time) / self.epoch_seconds)

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
            "postprocess": self.postprocess,
            "description": self.description,
            "privacy": privacy_summary(self.proto),
            "created_at": self.created_at,
        }


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


class Service:
    """The collection server's operations over ``engine`` (already migrated)."""

    def __init__(self, engine: Engine, admin_token: str, limits: Limits | None = None):
        if not isinstance(admin_token, str) or len(admin_token) < 16:
            raise ValueError("server: 'admin_token' must be a string of at least 16 characters.")
        self.engine = engine
        self.admin_token = admin_token
        self.limits = limits or Limits()
        self._cache: dict[str, Collection] = {}
        self._lock = threading.Lock()
        self._insert = pg_insert if db.is_postgres(engine) else sqlite_insert

    # ------------------------------------------------------------------ collections
    def is_admin(self, token: str | None) -> bool:
        return tokens.matches_plain(token, self.admin_token)

    def create_collection(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a collection; returns it with its two tokens (shown this once only)."""
        if not isinstance(body, dict):
            raise ClientError(422, "the body must be a JSON object.")
        allowed = {
            "name",
            "protocol",
            "first_epoch",
            "last_epoch",
            "epoch_seconds",
            "start_time",
            "postprocess",
            "description",
        }
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise ClientError(
                422,
                f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}.",
            )
        name = body.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ClientError(
                422, "'name' must be 1-64 characters of letters, digits, '_', '.', '-'."
            )
        spec_in = body.get("protocol")
        k_in = spec_in.get("params", {}).get("k") if isinstance(spec_in, dict) else None
        if isinstance(spec_in, dict) and not isinstance(spec_in.get("params", {}), dict):
            k_in = None
        if isinstance(k_in, int) and k_in > MAX_K:
            raise ClientError(422, f"'protocol': k must be at most {MAX_K:,} on this server.")
        try:
            proto = protocol_from_spec(spec_in)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            raise ClientError(422, f"'protocol': {exc}") from None
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
        ingest_token, read_token = tokens.new_token("ingest"), tokens.new_token("read")
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
        return {**col.public(), "ingest_token": ingest_token, "read_token": read_token}

    def list_collections(self) -> list[dict[str, Any]]:
        with db.transaction(self.engine, write=False) as conn:
            names = conn.execute(sa.select(db.collections.c.name).order_by("name")).scalars()
            names = list(names)
        return [c.public() for n in names if (c := self.get_collection(n)) is not None]

    def get_collection(self, name: str) -> Collection | None:
        """The collection named ``name`` (cached: collections never change once created)."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            return None
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None:
            return hit
        with db.transaction(self.engine, write=False) as conn:
            row = (
                conn.execute(sa.select(db.collections).where(db.collections.c.name == name))
                .mappings()
                .first()
            )
        if row is None:
            return None
        spec = json.loads(row["protocol_spec"])
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
        )
        with self._lock:
            self._cache[name] = col
        return col

    def role_of(self, col: Collection, token: str | None) -> str | None:
        """'admin', 'ingest', 'read' or None for ``token`` on collection ``col``."""
        if token is None:
            return None
        if self.is_admin(token):
            return "admin"
        if tokens.matches(token, col.ingest_hash):
            return "ingest"
        if tokens.matches(token, col.read_hash):
            return "read"
        return None

    # ------------------------------------------------------------------ ingest
    def parse_binary(
        self, col: Collection, data: bytes
    ) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8], list[int | None]]:
        """Split a binary batch into (ids, epochs, report rows, cohorts); ClientError if bad."""
        if not data:
            raise ClientError(422, "the batch is empty.")
        n_items = -(-len(data) // col.record_size)
        if n_items > self.limits.max_batch:
            raise ClientError(
                413, f"the batch has {n_items} records; at most {self.limits.max_batch} allowed."
            )
        try:
            ids, epochs, rows = codec.split_records(col.proto, data)
        except codec.BadItemError as exc:
            raise ClientError(422, f"item {exc.index}: {exc.message}", exc.index) from None
        return ids, epochs, rows, [None] * len(epochs)

    def parse_json(
        self, col: Collection, body: Any
    ) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8], list[int | None]]:
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
        ids, epochs, rows, _ = self.parse_binary(col, data)
        return ids, epochs, rows, cohorts

    def ingest(
        self,
        col: Collection,
        ids: NDArray[np.uint8],
        epochs: NDArray[np.int64],
        rows: NDArray[np.uint8],
        cohorts: list[int | None],
    ) -> dict[str, int]:
        """Store a validated batch in one transaction; returns counts of new and repeated ids.

        All or nothing: an item in a closed or unknown epoch, or reusing a stored report id with
        other bytes, rejects the whole batch. Repeated ids with identical bytes are acknowledged
        and counted once. The support counts of every touched epoch are updated in the same
        transaction, whose commit precedes the answer.
        """
        n = len(epochs)
        id_blob, width = ids.tobytes(), rows.shape[1]
        wire_blob = rows.tobytes()
        id_list = [id_blob[16 * i : 16 * i + 16] for i in range(n)]
        wires = [wire_blob[width * i : width * (i + 1)] for i in range(n)]
        first_of: dict[bytes, int] = {}
        keep: list[int] = []
        for i, rid in enumerate(id_list):
            j = first_of.get(rid)
            if j is None:
                first_of[rid] = i
                keep.append(i)
            elif epochs[j] != epochs[i] or wires[j] != wires[i]:
                raise ClientError(
                    409, f"item {i}: report id repeats item {j} with a different report.", i
                )
        self._check_epochs(col, epochs)
        uniq_epochs = sorted({int(e) for e in epochs})
        shape = col.proto.support_shape
        zeros = np.zeros(shape, dtype="<i8").tobytes()
        ec = db.epoch_counts
        with db.transaction(self.engine, write=True) as conn:
            conn.execute(
                self._insert(ec).on_conflict_do_nothing(),
                [
                    {"collection_id": col.id, "epoch": e, "n": 0, "support": zeros, "closed": False}
                    for e in uniq_epochs
                ],
            )
            query = (
                sa.select(ec.c.epoch, ec.c.n, ec.c.support, ec.c.closed)
                .where(ec.c.collection_id == col.id, ec.c.epoch.in_(uniq_epochs))
                .order_by(ec.c.epoch)
            )
            if db.is_postgres(self.engine):
                query = query.with_for_update()
            state = {int(r.epoch): r for r in conn.execute(query)}
            closed = [e for e in uniq_epochs if state[e].closed]
            if closed:
                i = int(np.flatnonzero(np.isin(epochs, closed))[0])
                raise ClientError(409, f"item {i}: epoch {int(epochs[i])} is closed.", i)
            inserted = self._insert_reports(conn, col, keep, id_list, epochs, cohorts, wires)
            new = [i for i in keep if id_list[i] in inserted]
            if len(new) < len(keep):
                self._check_repeats(
                    conn,
                    col,
                    [i for i in keep if id_list[i] not in inserted],
                    id_list,
                    epochs,
                    wires,
                )
            new_idx = np.asarray(new, dtype=np.int64)
            for e in uniq_epochs:
                mine = new_idx[epochs[new_idx] == e] if new_idx.size else new_idx
                if not mine.size:
                    continue
                add = codec.support_of_rows(col.proto, rows[mine])
                old = np.frombuffer(state[e].support, dtype="<i8").reshape(shape)
                conn.execute(
                    ec.update()
                    .where(ec.c.collection_id == col.id, ec.c.epoch == e)
                    .values(
                        n=state[e].n + int(mine.size), support=(old + add).astype("<i8").tobytes()
                    )
                )
        return {"received": n, "new": len(new), "duplicates": n - len(new)}

    def _insert_reports(self, conn, col, keep, id_list, epochs, cohorts, wires) -> set[bytes]:  # type: ignore[no-untyped-def]
        """Insert the reports ``keep`` unless their id is stored; return the ids inserted.

        PostgreSQL: ``INSERT … ON CONFLICT DO NOTHING RETURNING`` says which rows are new even
        against concurrent transactions. SQLite: the transaction holds the database's write
        lock (``BEGIN IMMEDIATE``), so the ids stored are read first and only the others are
        inserted, with the driver's ``executemany`` (the statement the benchmark's raw rate
        uses).
        """
        if db.is_postgres(self.engine):
            stmt = (
                self._insert(db.reports).on_conflict_do_nothing().returning(db.reports.c.report_id)
            )
            rows = [
                {
                    "collection_id": col.id,
                    "report_id": id_list[i],
                    "epoch": int(epochs[i]),
                    "cohort": cohorts[i],
                    "wire": wires[i],
                }
                for i in keep
            ]
            return {bytes(r) for r in conn.execute(stmt, rows).scalars()}
        ids = [id_list[i] for i in keep]
        stored: set[bytes] = set()
        for s in range(0, len(ids), SQLITE_IN_CHUNK):
            part = ids[s : s + SQLITE_IN_CHUNK]
            marks = ",".join("?" * len(part))
            stored.update(
                bytes(r[0])
                for r in conn.exec_driver_sql(
                    "SELECT report_id FROM reports WHERE collection_id = ? AND report_id IN "
                    f"({marks})",
                    (col.id, *part),
                )
            )
        fresh = [i for i in keep if id_list[i] not in stored]
        if fresh:
            conn.exec_driver_sql(
                SQLITE_INSERT,
                [(col.id, id_list[i], int(epochs[i]), cohorts[i], wires[i]) for i in fresh],
            )
        return {id_list[i] for i in fresh}

    def _check_epochs(self, col: Collection, epochs: NDArray[np.int64]) -> None:
        low = epochs < col.first_epoch
        high = (
            epochs > col.last_epoch if col.last_epoch is not None else np.zeros(len(epochs), bool)
        )
        current = col.current_epoch()
        future = epochs > current if current is not None else np.zeros(len(epochs), bool)
        bad = np.flatnonzero(low | high | future)
        if bad.size:
            i = int(bad[0])
            hi = col.last_epoch if current is None else current
            if col.last_epoch is not None and current is not None:
                hi = min(col.last_epoch, current)
            rng = f"[{col.first_epoch}, {hi if hi is not None else 'no limit'}]"
            raise ClientError(
                422, f"item {i}: epoch {int(epochs[i])} is not open; open epochs are {rng}.", i
            )

    def _check_repeats(self, conn, col, idx, id_list, epochs, wires) -> None:  # type: ignore[no-untyped-def]
        r = db.reports
        stored = {
            bytes(row.report_id): (int(row.epoch), bytes(row.wire))
            for row in conn.execute(
                sa.select(r.c.report_id, r.c.epoch, r.c.wire).where(
                    r.c.collection_id == col.id, r.c.report_id.in_([id_list[i] for i in idx])
                )
            )
        }
        for i in idx:
            if stored.get(id_list[i]) != (int(epochs[i]), wires[i]):
                raise ClientError(
                    409, f"item {i}: report id already stored with a different report.", i
                )

    def close_epoch(self, col: Collection, epoch: int) -> dict[str, Any]:
        """Close an epoch: later reports for it are refused (its estimate no longer moves)."""
        ec = db.epoch_counts
        zeros = np.zeros(col.proto.support_shape, dtype="<i8").tobytes()
        with db.transaction(self.engine, write=True) as conn:
            conn.execute(
                self._insert(ec).on_conflict_do_nothing(),
                [
                    {
                        "collection_id": col.id,
                        "epoch": epoch,
                        "n": 0,
                        "support": zeros,
                        "closed": False,
                    }
                ],
            )
            conn.execute(
                ec.update()
                .where(ec.c.collection_id == col.id, ec.c.epoch == epoch)
                .values(closed=True)
            )
        return {"epoch": epoch, "closed": True}

    # ------------------------------------------------------------------ queries
    def epochs(self, col: Collection) -> list[dict[str, Any]]:
        ec = db.epoch_counts
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(
                sa.select(ec.c.epoch, ec.c.n, ec.c.closed)
                .where(ec.c.collection_id == col.id)
                .order_by(ec.c.epoch)
            ).all()
        return [{"epoch": int(r.epoch), "n": int(r.n), "closed": bool(r.closed)} for r in rows]

    def counts(self, col: Collection, epoch: int) -> tuple[int, NDArray[np.int64]]:
        """(n, support counts) of one epoch; (0, zeros) if it has no reports."""
        ec = db.epoch_counts
        with db.transaction(self.engine, write=False) as conn:
            row = conn.execute(
                sa.select(ec.c.n, ec.c.support).where(
                    ec.c.collection_id == col.id, ec.c.epoch == epoch
                )
            ).first()
        if row is None:
            return 0, np.zeros(col.proto.support_shape, dtype=np.int64)
        support = np.frombuffer(row.support, dtype="<i8").reshape(col.proto.support_shape)
        return int(row.n), support.astype(np.int64)

    def estimate(self, col: Collection, epoch: int, postprocess: str | None) -> dict[str, Any]:
        n, support = self.counts(col, epoch)
        if n == 0:
            raise ClientError(404, f"epoch {epoch} has no reports.")
        return {"epoch": epoch, **estimate_payload(col.proto, support, n, postprocess)}

    def series(
        self, col: Collection, postprocess: str | None, start: int | None, stop: int | None
    ) -> list[dict[str, Any]]:
        ec = db.epoch_counts
        q = sa.select(ec.c.epoch, ec.c.n, ec.c.support).where(
            ec.c.collection_id == col.id, ec.c.n > 0
        )
        if start is not None:
            q = q.where(ec.c.epoch >= start)
        if stop is not None:
            q = q.where(ec.c.epoch <= stop)
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(q.order_by(ec.c.epoch)).all()
        shape = col.proto.support_shape
        return [
            {
                "epoch": int(r.epoch),
                **estimate_payload(
                    col.proto,
                    np.frombuffer(r.support, dtype="<i8").reshape(shape).astype(np.int64),
                    int(r.n),
                    postprocess,
                ),
            }
            for r in rows
        ]

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

    def export_parquet(self, col: Collection, epoch: int) -> bytes:
        """One epoch's reports as a report archive (``docs/scale-out.md`` §1), by report id."""
        from longldp.archive import archive_bytes

        r = db.reports
        with db.transaction(self.engine, write=False) as conn:
            rows = conn.execute(
                sa.select(r.c.report_id, r.c.cohort, r.c.wire)
                .where(r.c.collection_id == col.id, r.c.epoch == epoch)
                .order_by(r.c.report_id)
            ).all()
        n = len(rows)
        ids = np.frombuffer(b"".join(bytes(row.report_id) for row in rows), np.uint8)
        wires = np.frombuffer(b"".join(bytes(row.wire) for row in rows), np.uint8)
        cohorts = [row.cohort for row in rows]
        return archive_bytes(
            col.proto,
            col.name,
            epoch,
            ids.reshape(n, 16),
            wires.reshape(n, col.proto.wire_size),
            None if all(c is None for c in cohorts) else cohorts,
        )

def estimate_payload(
    proto: FrequencyOracle, support: NDArray[np.int64], n: int, postprocess: str | None
) -> dict[str, Any]:
    """Estimates of one epoch with standard errors and 95% normal intervals: the protocol's
    one estimate-with-SE function (:meth:`FrequencyOracle.estimate_with_se`, docs/math.md
    §1.5), as JSON (nested lists for RAPPOR's (m, k) Bloom shares; an empty cohort's NaN as
    null). ``raw`` is the unbiased estimate, ``estimate`` the same or its post-processing, and
    the interval raw ± 1.96·SE is stated for the unbiased estimate (docs/server.md).
    """
    try:
        out = proto.estimate_with_se(support, n, postprocess, level=0.95).as_dict()
    except ValueError as exc:
        raise ClientError(422, f"post-processing {postprocess!r} does not apply: {exc}") from None
    del out["level"]
    return out


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
