"""The ingest transaction of the collection server: a checked batch is stored all or nothing,
each report counted exactly once, whatever the retries, replays and concurrent requests.

What :func:`store` checks, in order, and how it answers (docs/server.md, "Ingest"):

1. inside the batch, a report id repeated with a different epoch, report or cohort: 409;
2. more distinct epochs than ``Limits.max_epochs_per_request``: 413 (a client halves its
   batch on 413);
3. in one transaction, with the locks taken in one global order (the device's row, the new
   reports in report-id order, one count row of each touched epoch in epoch order), so that
   concurrent transactions wait for one another and never deadlock: a report id this device
   already stored with another epoch, report or cohort: 409 (one stored with the same ones
   is a duplicate, acknowledged again whatever happened since, so a retry gets the answer a
   lost one had); then, for the new reports only, an epoch outside the collection's open
   range (:meth:`~longldp.server.service.Collection.open_range`): 422; a closed epoch: 409;
   more reports of one device in one epoch than the collection's quota: 409;
4. the new reports are inserted and the support counts of their epochs updated in the same
   transaction, which commits before the answer is sent.

Report ids are scoped to the device: the key is (collection, device, report id), so nobody can
take another device's ids. Reports sent with a shared ingest token all belong to device 0.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from numpy.typing import NDArray
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from longldp.server import _codec as codec
from longldp.server import db
from longldp.server.errors import ClientError

if TYPE_CHECKING:
    from longldp.server.service import Batch, Collection, Limits

#: Ids looked up per query on SQLite (its limit on bound parameters is 32,766).
SQLITE_IN_CHUNK = 5000
#: The row insert of the SQLite path (also what benchmarks/bench_service.py times raw).
SQLITE_INSERT = (
    "INSERT INTO reports (collection_id, device_id, report_id, epoch, cohort, wire) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
#: PostgreSQL errors after which the whole transaction is run again: a deadlock or a
#: serialization failure (neither should happen with the lock order above; this is a net).
RETRY_SQLSTATES = frozenset({"40P01", "40001"})
RETRIES = 3


def insert_ignore(engine: Engine, table: sa.Table) -> Any:
    """``INSERT … ON CONFLICT DO NOTHING`` of ``table`` in the engine's dialect."""
    return (pg_insert if db.is_postgres(engine) else sqlite_insert)(table).on_conflict_do_nothing()


# The statements of the hot path, built once (building a statement costs more than running it
# for a small batch); their parameters are bind parameters.
_ec, _r, _dv, _p = db.epoch_counts, db.reports, db.devices, sa.bindparam
_LOCK_DEVICE = sa.select(_dv.c.id).where(_dv.c.id == _p("device")).with_for_update()
_NEWEST = sa.select(sa.func.max(_ec.c.epoch)).where(_ec.c.collection_id == _p("cid"), _ec.c.n > 0)
_CLOSED = sa.select(_ec.c.epoch).where(
    _ec.c.collection_id == _p("cid"), _ec.c.epoch.in_(_p("epochs", expanding=True)), _ec.c.closed
)
_STATE = (
    sa.select(_ec.c.epoch, _ec.c.n, _ec.c.support, _ec.c.closed)
    .where(
        _ec.c.collection_id == _p("cid"),
        _ec.c.epoch.in_(_p("epochs", expanding=True)),
        _ec.c.shard == _p("shard"),
    )
    .order_by(_ec.c.epoch)
)
_STATE_LOCKED = _STATE.with_for_update()
_UPDATE_COUNTS = (
    _ec.update()
    .where(_ec.c.collection_id == _p("cid"), _ec.c.epoch == _p("at"), _ec.c.shard == _p("row"))
    .values(n=_p("new_n"), support=_p("new_support"))
)
_HELD = (
    sa.select(_r.c.epoch, sa.func.count())
    .where(
        _r.c.collection_id == _p("cid"),
        _r.c.device_id == _p("device"),
        _r.c.epoch.in_(_p("epochs", expanding=True)),
    )
    .group_by(_r.c.epoch)
)
_NEW_EPOCHS = {
    "postgresql": pg_insert(_ec).on_conflict_do_nothing(),
    "sqlite": sqlite_insert(_ec).on_conflict_do_nothing(),
}
#: The row insert of the PostgreSQL path: the batch as four arrays sent in binary format, one
#: statement whatever the batch size, rows inserted in the arrays' order (report-id order: the
#: lock order). It answers one row: NULL when every row was new, else the ids inserted
#: (possibly none). A multi-row VALUES list would be a new SQL text of 6 parameters per row,
#: which the driver parses on every call, and a RETURNING row per report would be fetched one
#: by one: together most of the server's CPU time at 1,000 reports a request (measured by
#: benchmarks/bench_service.py's profile).
PG_INSERT = (
    "WITH new AS (INSERT INTO reports (collection_id, device_id, report_id, epoch, cohort, wire) "
    "SELECT %(cid)s, %(device)s, r.id, r.epoch, r.cohort, r.wire FROM unnest("
    "%(ids)b::bytea[], %(epochs)b::bigint[], %(cohorts)b::integer[], %(wires)b::bytea[]) "
    "WITH ORDINALITY AS r(id, epoch, cohort, wire, at) ORDER BY r.at "
    "ON CONFLICT DO NOTHING RETURNING report_id) "
    "SELECT CASE WHEN count(*) = %(n)s THEN NULL "
    "ELSE coalesce(array_agg(report_id), '{}'::bytea[]) END FROM new"
)
#: The stored reports among a list of ids (PostgreSQL): one array parameter, a constant text.
PG_STORED = (
    "SELECT report_id, epoch, wire, cohort FROM reports WHERE collection_id = %(cid)s AND "
    "device_id = %(device)s AND report_id = ANY(%(ids)b::bytea[])"
)


def store(
    engine: Engine, col: Collection, batch: Batch, device: int, limits: Limits
) -> dict[str, int]:
    """Store ``batch`` of ``device`` in collection ``col``; {"received", "new", "duplicates"}.

    Raises :class:`~longldp.server.service.ClientError` for a batch refused (nothing stored).
    """
    keep = distinct_items(batch)
    epochs = np.unique(batch.epochs)
    if epochs.size > limits.max_epochs_per_request:
        raise ClientError(
            413,
            f"the batch names {epochs.size} distinct epochs; at most "
            f"{limits.max_epochs_per_request} per request.",
        )
    for attempt in range(RETRIES):
        try:
            with db.transaction(engine, write=True) as conn:
                new = _store(conn, engine, col, batch, device, keep)
            break
        except sa.exc.DBAPIError as exc:
            code = getattr(exc.orig, "sqlstate", None)
            if code not in RETRY_SQLSTATES or attempt == RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    n = len(batch)
    return {"received": n, "new": new, "duplicates": n - new}


def distinct_items(batch: Batch) -> NDArray[np.int64]:
    """Indices of the first item of each distinct report id, in report-id order (the order
    reports are inserted in); 409 for a repeated id with a different epoch, report or cohort."""
    n = len(batch)
    key = np.ascontiguousarray(batch.ids).view("V16").ravel()
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if first.size < n:
        origin = first[inverse.ravel()]
        again = np.flatnonzero(origin != np.arange(n))
        j = origin[again]
        cohorts = np.array([-1 if c is None else c for c in batch.cohorts], dtype=np.int64)
        differs = (
            (batch.epochs[again] != batch.epochs[j])
            | (batch.rows[again] != batch.rows[j]).any(axis=1)
            | (cohorts[again] != cohorts[j])
        )
        if differs.any():
            i = int(again[differs].min())
            first_i = int(origin[i])
            raise ClientError(
                409, f"item {i}: report id repeats item {first_i} with a different report.", i
            )
    return first.astype(np.int64)


def _store(
    conn: Connection,
    engine: Engine,
    col: Collection,
    batch: Batch,
    device: int,
    keep: NDArray[np.int64],
) -> int:
    """The transaction's body; returns the number of new reports.

    The usual batch is all new: it is checked as such with reads only (window, closed epochs,
    quota) and inserted directly. Anything else (a repeated id, a refused item) takes the
    careful path: look up which ids are stored, then check and insert only the new reports,
    so that stored duplicates are acknowledged whatever happened since they were stored.
    """
    postgres = db.is_postgres(engine)
    if postgres and device != db.SHARED_DEVICE:
        # First lock: the device. Its requests run one at a time (its quota and its ids).
        conn.execute(_LOCK_DEVICE, {"device": device})
    rows = _RowBytes(batch)
    newest = conn.execute(_NEWEST, {"cid": col.id}).scalar()
    newest = None if newest is None else int(newest)
    if _acceptable(conn, col, batch, device, keep, newest):
        inserted = _insert(conn, engine, col, batch, device, keep, rows, optimistic=True)
        if inserted is not None:
            if inserted.size < keep.size:  # PostgreSQL: some ids were stored already
                lost = np.setdiff1d(keep, inserted)
                ids = [rows.ids[i] for i in lost]
                _check_repeats(batch, lost, ids, _stored(conn, postgres, col, device, ids))
            return _count(conn, engine, col, batch, inserted)
    # The careful path.
    ids = [rows.ids[i] for i in keep]
    fresh = _check_repeats(batch, keep, ids, _stored(conn, postgres, col, device, ids))
    if not fresh.size:
        return 0
    in_order = np.sort(fresh)
    _check_open(col, batch.epochs, in_order, newest)
    _check_closed(conn, col, batch, in_order)
    if col.reports_per_epoch is not None:
        _check_quota(conn, col, batch, device, fresh)
    inserted = _insert(conn, engine, col, batch, device, fresh, rows, optimistic=False)
    assert inserted is not None
    if inserted.size < fresh.size:  # PostgreSQL, shared token: a concurrent batch won the race
        lost = np.setdiff1d(fresh, inserted)
        ids = [rows.ids[i] for i in lost]
        _check_repeats(batch, lost, ids, _stored(conn, postgres, col, device, ids))
    return _count(conn, engine, col, batch, inserted)


class _RowBytes:
    """The batch's ids and wire reports as bytes objects (made once: what the driver binds)."""

    def __init__(self, batch: Batch):
        n, width = batch.rows.shape
        id_blob = np.ascontiguousarray(batch.ids).tobytes()
        wire_blob = np.ascontiguousarray(batch.rows).tobytes()
        self.ids = [id_blob[16 * i : 16 * i + 16] for i in range(n)]
        self.wires = [wire_blob[width * i : width * (i + 1)] for i in range(n)]


def _acceptable(
    conn: Connection,
    col: Collection,
    batch: Batch,
    device: int,
    items: NDArray[np.int64],
    newest: int | None,
) -> bool:
    """Whether every one of ``items``, taken as new, passes the window, closed-epoch and quota
    checks (reads only; the careful path says which item fails and why)."""
    try:
        in_order = np.sort(items)
        _check_open(col, batch.epochs, in_order, newest)
        _check_closed(conn, col, batch, in_order)
        if col.reports_per_epoch is not None:
            _check_quota(conn, col, batch, device, items)
    except ClientError:
        return False
    return True


def _check_open(
    col: Collection, epochs: NDArray[np.int64], items: NDArray[np.int64], newest: int | None
) -> None:
    """422 naming the first of ``items`` (ascending) whose epoch is not open."""
    low, high = col.open_range(newest)
    mine = epochs[items]
    bad = items[(mine < low) | (mine > high)]
    if bad.size:
        i = int(bad[0])
        where = f"[{low}, {high}]" if low <= high else "none"
        raise ClientError(
            422, f"item {i}: epoch {int(epochs[i])} is not open; open epochs are {where}.", i
        )


def _check_closed(
    conn: Connection, col: Collection, batch: Batch, items: NDArray[np.int64]
) -> None:
    """409 naming the first of ``items`` (ascending) in a closed epoch."""
    wanted = np.unique(batch.epochs[items]).tolist()
    closed = conn.execute(_CLOSED, {"cid": col.id, "epochs": wanted}).scalars()
    bad = items[np.isin(batch.epochs[items], [int(e) for e in closed])]
    if bad.size:
        i = int(bad[0])
        raise ClientError(409, f"item {i}: epoch {int(batch.epochs[i])} is closed.", i)


def _count(
    conn: Connection, engine: Engine, col: Collection, batch: Batch, inserted: NDArray[np.int64]
) -> int:
    """Add the inserted reports to their epochs' counts; returns how many there are.

    Locks one count row (shard) of each epoch, in epoch order (after the reports: every
    transaction takes report locks before epoch locks, in id and epoch order), and checks
    again, under the lock, that none was closed since the first check (closing flags every
    shard of the epoch).
    """
    if not inserted.size:
        return 0
    shape = col.proto.support_shape
    kind = codec.support_dtype(col.proto)
    zeros = np.zeros(shape, dtype=kind).tobytes()
    wanted = np.unique(batch.epochs[inserted]).tolist()  # ascending: the lock order
    # One of the epoch's count rows, at random: concurrent transactions rarely share one.
    shard = random.randrange(col.count_shards)
    conn.execute(
        _NEW_EPOCHS[engine.dialect.name],
        [
            {
                "collection_id": col.id,
                "epoch": e,
                "shard": shard,
                "n": 0,
                "support": zeros,
                "closed": False,
            }
            for e in wanted
        ],
    )
    query = _STATE_LOCKED if db.is_postgres(engine) else _STATE
    params = {"cid": col.id, "epochs": wanted, "shard": shard}
    state = {int(row.epoch): row for row in conn.execute(query, params)}
    closed = inserted[np.isin(batch.epochs[inserted], [e for e in wanted if state[e].closed])]
    if closed.size:
        i = int(np.sort(closed)[0])
        raise ClientError(409, f"item {i}: epoch {int(batch.epochs[i])} is closed.", i)
    updates = []
    for e in wanted:
        mine = inserted[batch.epochs[inserted] == e]
        add = np.asarray(col.proto.support_counts(batch.records[mine]), dtype=kind)
        old = np.frombuffer(state[e].support, dtype=kind).reshape(shape)
        updates.append(
            {
                "cid": col.id,
                "at": e,
                "row": shard,
                "new_n": state[e].n + int(mine.size),
                "new_support": (old + add).astype(kind).tobytes(),
            }
        )
    conn.execute(_UPDATE_COUNTS, updates)
    return int(inserted.size)


def _stored(
    conn: Connection, postgres: bool, col: Collection, device: int, ids: list[bytes]
) -> dict[bytes, tuple[int, bytes, int | None]]:
    """(epoch, wire, cohort) of the ids among ``ids`` this device already stored."""
    out: dict[bytes, tuple[int, bytes, int | None]] = {}
    if not ids:
        return out
    if postgres:
        rows = conn.exec_driver_sql(PG_STORED, {"cid": col.id, "device": device, "ids": ids})
        return {bytes(rid): (int(epoch), bytes(wire), cohort) for rid, epoch, wire, cohort in rows}
    for s in range(0, len(ids), SQLITE_IN_CHUNK):
        part = ids[s : s + SQLITE_IN_CHUNK]
        marks = ",".join("?" * len(part))
        for rid, epoch, wire, cohort in conn.exec_driver_sql(
            "SELECT report_id, epoch, wire, cohort FROM reports WHERE collection_id = ? AND "
            f"device_id = ? AND report_id IN ({marks})",
            (col.id, device, *part),
        ):
            out[bytes(rid)] = (int(epoch), bytes(wire), cohort)
    return out


def _check_repeats(
    batch: Batch,
    items: NDArray[np.int64],
    ids: list[bytes],
    stored: dict[bytes, tuple[int, bytes, int | None]],
) -> NDArray[np.int64]:
    """The items whose id is not stored yet; 409 if a stored one differs in anything."""
    if not stored:
        return items
    fresh = []
    for i, rid in zip(items.tolist(), ids, strict=True):
        have = stored.get(rid)
        if have is None:
            fresh.append(i)
        elif have != (int(batch.epochs[i]), batch.rows[i].tobytes(), batch.cohorts[i]):
            raise ClientError(
                409, f"item {i}: report id already stored with a different report.", i
            )
    return np.asarray(fresh, dtype=np.int64)


def _check_quota(
    conn: Connection, col: Collection, batch: Batch, device: int, fresh: NDArray[np.int64]
) -> None:
    """At most ``col.reports_per_epoch`` reports of one device per epoch, stored ones included;
    409 naming the first new item past it (in batch order)."""
    quota = int(col.reports_per_epoch or 0)
    touched = np.unique(batch.epochs[fresh]).tolist()
    params = {"cid": col.id, "device": device, "epochs": touched}
    held = dict(conn.execute(_HELD, params).all())
    used = {e: int(held.get(e, 0)) for e in touched}
    for i in np.sort(fresh).tolist():
        e = int(batch.epochs[i])
        used[e] += 1
        if used[e] > quota:
            raise ClientError(
                409,
                f"item {i}: device {device} already sent {quota} report(s) in epoch {e}, its "
                f"quota per epoch.",
                i,
            )


def _insert(
    conn: Connection,
    engine: Engine,
    col: Collection,
    batch: Batch,
    device: int,
    items: NDArray[np.int64],
    rows: _RowBytes,
    *,
    optimistic: bool,
) -> NDArray[np.int64] | None:
    """Insert ``items`` (in report-id order); return the items inserted, or None when an
    optimistic insert on SQLite met a stored id (nothing is left inserted then).

    SQLite: the transaction holds the database's write lock; the driver's ``executemany``
    inside a savepoint, rolled back if an id is stored already. PostgreSQL: ``INSERT … ON
    CONFLICT DO NOTHING RETURNING`` says which rows are new even against a concurrent
    transaction of the shared token (a device's own transactions are serialized by its lock).
    """
    if not items.size:
        return items
    order = items.tolist()  # report-id order (distinct_items): the lock order
    epochs, cohorts = batch.epochs.tolist(), batch.cohorts
    if not db.is_postgres(engine):
        values = [
            (col.id, device, rows.ids[i], epochs[i], cohorts[i], rows.wires[i]) for i in order
        ]
        if not optimistic:
            conn.exec_driver_sql(SQLITE_INSERT, values)
            return items
        savepoint = conn.begin_nested()
        try:
            conn.exec_driver_sql(SQLITE_INSERT, values)
        except sa.exc.IntegrityError:
            savepoint.rollback()
            return None
        savepoint.commit()
        return items
    params = {
        "cid": col.id,
        "device": device,
        "ids": [rows.ids[i] for i in order],
        "epochs": [epochs[i] for i in order],
        "cohorts": [cohorts[i] for i in order],
        "wires": [rows.wires[i] for i in order],
        "n": len(order),
    }
    inserted = conn.exec_driver_sql(PG_INSERT, params).scalar()
    if inserted is None:
        return items
    new = {bytes(x) for x in inserted}
    return np.asarray([i for i in order if rows.ids[i] in new], dtype=np.int64)
