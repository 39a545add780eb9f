"""The ingest transaction of the collection server: checked batches are stored all or nothing,
each report counted exactly once, whatever the retries, replays and concurrent requests; and
several requests may share one transaction (group commit, :mod:`longldp.server.group`).

A *job* is one request's batch from one device (device 0: the shared ingest token).
:func:`prepare` checks what needs no database: a report id repeated inside the batch with a
different epoch, report or cohort (409) and more distinct epochs than
``Limits.max_epochs_per_request`` (413; a client halves its batch on 413). :func:`run_group`
then stores one or more jobs in ONE transaction and gives each its own answer (docs/server.md,
"Ingest"):

1. the jobs' devices are locked (PostgreSQL: ``FOR UPDATE``, in device order) and checked
   still enrolled (a device revoked meanwhile: 401);
2. a report id the device already stored with another epoch, report or cohort: 409 (one
   stored with the same ones is a duplicate, acknowledged again whatever happened since, so a
   retry gets the answer a lost one had); then, for the new reports only, an epoch the
   collection has not opened yet (a device ahead of its clock; 425 with ``Retry-After``) or
   will never open again (422, :meth:`~longldp.server.service.Collection.open_range`);
3. one count row (shard) of each epoch the new reports touch is locked, in (collection,
   epoch) order, so its ``closed`` flag cannot change under the transaction: a closed epoch:
   409; more reports of one device in one epoch than the collection's quota: 409;
4. the new reports are inserted (in (collection, device, report id) order) and the count rows
   updated, once per row for the whole group; the answers are sent after the commit.

Every transaction takes its locks in this one order (devices, count rows, reports), so
concurrent transactions, grouped or not, in one process or several, wait for one another and
never deadlock. A group holds jobs of distinct devices only, and never the shared token's
(whose concurrent batches may race for the same ids): their checks are independent, and no
job's refusal can depend on another's rows.

Report ids are scoped to the device: the key is (collection, device, report id), so nobody can
take another device's ids.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
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
#: The answer to a credential revoked while its request waited (the web layer's wording).
REVOKED = "invalid token, or no such collection."


def insert_ignore(engine: Engine, table: sa.Table) -> Any:
    """``INSERT … ON CONFLICT DO NOTHING`` of ``table`` in the engine's dialect."""
    return (pg_insert if db.is_postgres(engine) else sqlite_insert)(table).on_conflict_do_nothing()


# The statements of the hot path, built once (building a statement costs more than running it
# for a small batch); their parameters are bind parameters.
_ec, _r, _dv, _p = db.epoch_counts, db.reports, db.devices, sa.bindparam
_DEVICES = (
    sa.select(_dv.c.id, _dv.c.revoked_at)
    .where(_dv.c.id.in_(_p("ids", expanding=True)))
    .order_by(_dv.c.id)
)
_DEVICES_LOCKED = _DEVICES.with_for_update()
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
    sa.select(_r.c.device_id, _r.c.epoch, sa.func.count())
    .where(
        _r.c.collection_id == _p("cid"),
        _r.c.device_id.in_(_p("devices", expanding=True)),
        _r.c.epoch.in_(_p("epochs", expanding=True)),
    )
    .group_by(_r.c.device_id, _r.c.epoch)
)
_NEW_EPOCHS = {
    "postgresql": pg_insert(_ec).on_conflict_do_nothing(),
    "sqlite": sqlite_insert(_ec).on_conflict_do_nothing(),
}
#: The row insert of the PostgreSQL path: the rows as six arrays sent in binary format, one
#: statement whatever their number, inserted in the arrays' order (the lock order). It answers
#: one row: NULL when every row was new, else the ids inserted (possibly none). A multi-row
#: VALUES list would be a new SQL text of 6 parameters per row, which the driver parses on
#: every call, and a RETURNING row per report would be fetched one by one: together most of
#: the server's CPU time at 1,000 reports a request (benchmarks/bench_service.py's profile).
PG_INSERT = (
    "WITH new AS (INSERT INTO reports (collection_id, device_id, report_id, epoch, cohort, wire) "
    "SELECT r.cid, r.device, r.id, r.epoch, r.cohort, r.wire FROM unnest("
    "%(cids)b::integer[], %(devices)b::bigint[], %(ids)b::bytea[], %(epochs)b::bigint[], "
    "%(cohorts)b::integer[], %(wires)b::bytea[]) "
    "WITH ORDINALITY AS r(cid, device, id, epoch, cohort, wire, at) ORDER BY r.at "
    "ON CONFLICT DO NOTHING RETURNING report_id) "
    "SELECT CASE WHEN count(*) = %(n)s THEN NULL "
    "ELSE coalesce(array_agg(report_id), '{}'::bytea[]) END FROM new"
)
#: The stored reports among a list of ids (PostgreSQL): one array parameter, a constant text.
PG_STORED = (
    "SELECT report_id, epoch, wire, cohort FROM reports WHERE collection_id = %(cid)s AND "
    "device_id = %(device)s AND report_id = ANY(%(ids)b::bytea[])"
)


@dataclass
class Job:
    """One request's batch: its collection, the device that sent it (0: the shared token) and
    the indices of its distinct items in report-id order (:func:`distinct_items`)."""

    col: Collection
    batch: Batch
    device: int
    keep: NDArray[np.int64]

    def __post_init__(self) -> None:
        self.rows = _RowBytes(self.batch)


def prepare(col: Collection, batch: Batch, device: int, limits: Limits) -> Job:
    """The job of one request, after the checks that need no database (409, 413)."""
    keep = distinct_items(batch)
    epochs = batch.epochs if len(batch) == 1 else np.unique(batch.epochs)
    if epochs.size > limits.max_epochs_per_request:
        raise ClientError(
            413,
            f"the batch names {epochs.size} distinct epochs; at most "
            f"{limits.max_epochs_per_request} per request.",
        )
    return Job(col, batch, device, keep)


def store(
    engine: Engine, col: Collection, batch: Batch, device: int, limits: Limits
) -> dict[str, int]:
    """Store ``batch`` of ``device`` in collection ``col`` in a transaction of its own;
    {"received", "new", "duplicates"}. Raises :class:`ClientError` for a batch refused
    (nothing stored)."""
    (result,) = run_group(engine, [prepare(col, batch, device, limits)])
    if isinstance(result, ClientError):
        raise result
    return result


def run_group(engine: Engine, jobs: list[Job]) -> list[dict[str, int] | ClientError]:
    """Store ``jobs`` in ONE transaction (one durable commit) and return each job's answer:
    its counts, or the :class:`ClientError` refusing it (nothing of it stored). A job whose
    refusal is found only after its rows were inserted (a race of the shared token's batches
    on PostgreSQL) is taken out and run alone. Database errors propagate (503 for all)."""
    for attempt in range(RETRIES):
        try:
            with db.transaction(engine, write=True) as conn:
                return _store_jobs(conn, engine, jobs)
        except _AloneError as exc:
            rest = run_group(engine, [j for i, j in enumerate(jobs) if i != exc.index])
            (alone,) = run_group(engine, [jobs[exc.index]])
            rest.insert(exc.index, alone)
            return rest
        except ClientError as exc:  # a late refusal of a job that ran alone
            return [exc]
        except sa.exc.DBAPIError as exc:
            code = getattr(exc.orig, "sqlstate", None)
            if code not in RETRY_SQLSTATES or attempt == RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


class _AloneError(Exception):
    """Job ``index`` of a group must be refused after its rows were inserted: rerun it alone."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


_ONE = np.zeros(1, dtype=np.int64)
_ONE.setflags(write=False)


def distinct_items(batch: Batch) -> NDArray[np.int64]:
    """Indices of the first item of each distinct report id, in report-id order (the order
    reports are inserted in); 409 for a repeated id with a different epoch, report or cohort."""
    n = len(batch)
    if n == 1:  # one report (what devices send): nothing to compare
        return _ONE
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


def _ascending(items: NDArray[np.int64]) -> NDArray[np.int64]:
    """``items`` sorted (in batch order: the order refusals name items in)."""
    return items if items.size < 2 else np.sort(items)


def _epochs(epochs: NDArray[np.int64], items: NDArray[np.int64]) -> list[int]:
    """The distinct epochs of ``items``, ascending (one report: no NumPy call)."""
    if items.size == 1:
        return [int(epochs[items[0]])]
    return np.unique(epochs[items]).tolist()


class _Group:
    """The state of one group transaction: per job, its answer (once refused), the items
    taken as new and whether its stored ids were looked up."""

    def __init__(self, conn: Connection, engine: Engine, jobs: list[Job]):
        self.conn, self.engine, self.jobs = conn, engine, jobs
        self.postgres = db.is_postgres(engine)
        self.refused: list[ClientError | None] = [None] * len(jobs)
        self.fresh: list[NDArray[np.int64]] = [j.keep for j in jobs]
        self.looked_up = [False] * len(jobs)
        # (collection id, epoch) -> locked count row: (shard, n, support, closed)
        self.state: dict[tuple[int, int], tuple[int, int, bytes, bool]] = {}
        # (collection id, device, epoch) -> reports the device holds there
        self.held: dict[tuple[int, int, int], int] = {}

    def live(self) -> list[int]:
        return [i for i, e in enumerate(self.refused) if e is None]

    def look_up(self, i: int) -> None:
        """The careful path of job ``i``: which of its ids are stored (409 if one differs);
        the others are new, and must be in open epochs."""
        job = self.jobs[i]
        ids = [job.rows.ids[k] for k in job.keep]
        stored = _stored(self.conn, self.postgres, job.col, job.device, ids)
        self.looked_up[i] = True
        try:
            self.fresh[i] = _check_repeats(job.batch, job.keep, ids, stored)
            _check_open(job.col, job.batch.epochs, _ascending(self.fresh[i]))
        except ClientError as exc:
            self.refused[i] = exc

    def late_check(self, i: int) -> None:
        """Closed epochs (under the count rows' locks) and the quota, for job ``i``'s new
        items; an optimistic job that fails them is looked up first (its ids may be stored
        duplicates, which are acknowledged whatever happened since)."""
        while True:
            try:
                self._closed_and_quota(i)
                return
            except ClientError as exc:
                if self.looked_up[i]:
                    self.refused[i] = exc
                    return
                self.look_up(i)
                if self.refused[i] is not None:
                    return

    def _closed_and_quota(self, i: int) -> None:
        job = self.jobs[i]
        fresh = _ascending(self.fresh[i])
        if not fresh.size:
            return
        cid = job.col.id
        epochs = job.batch.epochs
        closed = [e for e in _epochs(epochs, fresh) if self.state[(cid, e)][3]]
        bad = fresh[np.isin(epochs[fresh], closed)] if closed else fresh[:0]
        if bad.size:
            k = int(bad[0])
            raise ClientError(409, f"item {k}: epoch {int(epochs[k])} is closed.", k)
        quota = job.col.reports_per_epoch
        if quota is None or job.device == db.SHARED_DEVICE:
            return
        used: dict[int, int] = {}
        for k in fresh.tolist():
            e = int(epochs[k])
            used[e] = used.get(e, self.held.get((cid, job.device, e), 0)) + 1
            if used[e] > quota:
                raise ClientError(
                    409,
                    f"item {k}: device {job.device} already sent {quota} report(s) in epoch "
                    f"{e}, its quota per epoch.",
                    k,
                )


def _store_jobs(conn: Connection, engine: Engine, jobs: list[Job]) -> list[Any]:
    """The group transaction's body (steps 1–4 of the module docstring)."""
    g = _Group(conn, engine, jobs)
    # 1. The devices, locked in device order, still enrolled.
    devices = sorted({j.device for j in jobs if j.device != db.SHARED_DEVICE})
    if devices:
        query = _DEVICES_LOCKED if g.postgres else _DEVICES
        rows = conn.execute(query, {"ids": devices}).all()
        active = {int(d) for d, revoked in rows if revoked is None}
        for i, job in enumerate(jobs):
            if job.device != db.SHARED_DEVICE and job.device not in active:
                g.refused[i] = ClientError(401, REVOKED)
    # 2. The window. Every item is taken as new (the usual batch), and looked up only if
    #    that fails.
    for i in g.live():
        job = jobs[i]
        try:
            _check_open(job.col, job.batch.epochs, _ascending(job.keep))
        except ClientError:
            g.look_up(i)
    # 3. The count rows of the epochs of the new items, locked; closed epochs; quotas.
    _lock_counts(g)
    _read_held(g)
    for i in g.live():
        g.late_check(i)
    # 4. Insert, then count.
    inserted = _insert_all(g)
    _update_counts(g, inserted)
    out: list[Any] = []
    for i, job in enumerate(jobs):
        if g.refused[i] is not None:
            out.append(g.refused[i])
            continue
        n, new = len(job.batch), int(inserted[i].size)
        out.append({"received": n, "new": new, "duplicates": n - new})
    return out


def _lock_counts(g: _Group) -> None:
    """Create (if missing) and lock one count row of each (collection, epoch) the live jobs'
    new items touch, in (collection, epoch) order: a random shard of each, so that concurrent
    transactions rarely share one (PostgreSQL collections have several)."""
    wanted: dict[int, set[int]] = {}
    cols: dict[int, Collection] = {}
    for i in g.live():
        job = g.jobs[i]
        if g.fresh[i].size:
            cols[job.col.id] = job.col
            wanted.setdefault(job.col.id, set()).update(_epochs(job.batch.epochs, g.fresh[i]))
    for cid in sorted(wanted):
        col = cols[cid]
        epochs = sorted(wanted[cid])
        shard = random.randrange(col.count_shards)
        zeros = np.zeros(col.proto.support_shape, dtype=codec.support_dtype(col.proto)).tobytes()
        g.conn.execute(
            _NEW_EPOCHS[g.engine.dialect.name],
            [
                {
                    "collection_id": cid,
                    "epoch": e,
                    "shard": shard,
                    "n": 0,
                    "support": zeros,
                    "closed": False,
                }
                for e in epochs
            ],
        )
        query = _STATE_LOCKED if g.postgres else _STATE
        for row in g.conn.execute(query, {"cid": cid, "epochs": epochs, "shard": shard}):
            g.state[(cid, int(row.epoch))] = (shard, int(row.n), row.support, bool(row.closed))


def _read_held(g: _Group) -> None:
    """How many reports each device with a quota already holds in the epochs of its new
    items (one query per collection)."""
    asked: dict[int, tuple[set[int], set[int]]] = {}
    for i in g.live():
        job = g.jobs[i]
        if job.col.reports_per_epoch is None or job.device == db.SHARED_DEVICE:
            continue
        devs, epochs = asked.setdefault(job.col.id, (set(), set()))
        devs.add(job.device)
        epochs.update(_epochs(job.batch.epochs, g.fresh[i]))
    for cid in sorted(asked):
        devs, epochs = asked[cid]
        if not epochs:
            continue
        params = {"cid": cid, "devices": sorted(devs), "epochs": sorted(epochs)}
        for device, epoch, count in g.conn.execute(_HELD, params):
            g.held[(cid, int(device), int(epoch))] = int(count)


def _insert_all(g: _Group) -> list[NDArray[np.int64]]:
    """Insert every live job's new items; per job, the items inserted.

    Jobs that were not looked up are inserted first as all new, inside a savepoint; if one of
    their ids is stored already (a retry), the savepoint is rolled back, those jobs are looked
    up and checked again, and what is new is inserted. The shared token's job (always alone)
    may still lose ids to a concurrent batch on PostgreSQL: those are checked as stored
    duplicates (409 if they differ)."""
    order = sorted(g.live(), key=lambda i: (g.jobs[i].col.id, g.jobs[i].device))
    optimistic = [i for i in order if not g.looked_up[i]]
    done: dict[int, NDArray[np.int64]] = {}
    if optimistic:
        savepoint = g.conn.begin_nested()
        ok = _insert(g, optimistic)
        if ok is not None:
            savepoint.commit()
            done.update(ok)
        else:
            savepoint.rollback()
            for i in optimistic:
                g.look_up(i)
                if g.refused[i] is None:
                    g.late_check(i)
    rest = [i for i in order if i not in done and g.refused[i] is None]
    if rest:
        got = _insert(g, rest, tolerate=True)
        assert got is not None
        done.update(got)
    for i in list(done):
        job = g.jobs[i]
        if done[i].size < g.fresh[i].size:
            # PostgreSQL, the shared token: a concurrent batch stored some of these ids first.
            lost = np.setdiff1d(g.fresh[i], done[i])
            ids = [job.rows.ids[k] for k in lost]
            stored = _stored(g.conn, g.postgres, job.col, job.device, ids)
            try:
                _check_repeats(job.batch, lost, ids, stored)
            except ClientError as exc:
                if len(g.jobs) == 1:
                    raise
                raise _AloneError(i) from exc
    empty = np.zeros(0, dtype=np.int64)
    return [done.get(i, empty) if g.refused[i] is None else empty for i in range(len(g.jobs))]


def _insert(
    g: _Group, jobs: list[int], tolerate: bool = False
) -> dict[int, NDArray[np.int64]] | None:
    """Insert the new items of ``jobs`` (in (collection, device, report id) order); per job
    the items inserted, or None when one id was stored already and ``tolerate`` is false
    (SQLite: the statement fails; PostgreSQL: it skips the row)."""
    entries = [(i, k) for i in jobs for k in g.fresh[i].tolist()]  # fresh: report-id order
    if not entries:
        return {i: np.zeros(0, np.int64) for i in jobs}
    conn = g.conn
    if not g.postgres:
        values = []
        for i, k in entries:
            job = g.jobs[i]
            values.append(
                (
                    job.col.id,
                    job.device,
                    job.rows.ids[k],
                    int(job.batch.epochs[k]),
                    job.batch.cohorts[k],
                    job.rows.wires[k],
                )
            )
        try:
            conn.exec_driver_sql(SQLITE_INSERT, values)
        except sa.exc.IntegrityError:
            if tolerate:
                raise
            return None
        return {i: g.fresh[i] for i in jobs}
    params: dict[str, Any] = {
        "cids": [],
        "devices": [],
        "ids": [],
        "epochs": [],
        "cohorts": [],
        "wires": [],
        "n": len(entries),
    }
    for i, k in entries:
        job = g.jobs[i]
        params["cids"].append(job.col.id)
        params["devices"].append(job.device)
        params["ids"].append(job.rows.ids[k])
        params["epochs"].append(int(job.batch.epochs[k]))
        params["cohorts"].append(job.batch.cohorts[k])
        params["wires"].append(job.rows.wires[k])
    inserted = conn.exec_driver_sql(PG_INSERT, params).scalar()
    if inserted is None:
        return {i: g.fresh[i] for i in jobs}
    if not tolerate:
        return None
    # Only the shared token's job, alone, may meet a concurrent insert here.
    new = {bytes(x) for x in inserted}
    return {
        i: np.asarray([k for k in g.fresh[i].tolist() if g.jobs[i].rows.ids[k] in new], np.int64)
        for i in jobs
    }


def _update_counts(g: _Group, inserted: list[NDArray[np.int64]]) -> None:
    """Add the inserted reports to their epochs' locked count rows: the support of each
    (collection, epoch) counted once over every job's reports (vectorized over the group),
    one update per row."""
    parts: dict[tuple[int, int], list[Any]] = {}
    cols: dict[int, Collection] = {}
    for i, job in enumerate(g.jobs):
        items = inserted[i]
        if not items.size:
            continue
        cols[job.col.id] = job.col
        if items.size == 1:
            e = int(job.batch.epochs[items[0]])
            parts.setdefault((job.col.id, e), []).append(job.batch.records[items])
            continue
        epochs = job.batch.epochs[items]
        for e in np.unique(epochs).tolist():
            parts.setdefault((job.col.id, e), []).append(job.batch.records[items[epochs == e]])
    if not parts:
        return
    updates = []
    for (cid, e), records in sorted(parts.items(), key=lambda kv: kv[0]):
        proto = cols[cid].proto
        mine = records[0] if len(records) == 1 else np.concatenate(records)
        kind = codec.support_dtype(proto)  # int64 counts, or float64 sums of a numeric mean
        add = np.asarray(proto.support_counts(mine), dtype=kind)
        shard, n, support, _ = g.state[(cid, e)]
        old = np.frombuffer(support, dtype=kind).reshape(proto.support_shape)
        updates.append(
            {
                "cid": cid,
                "at": e,
                "row": shard,
                "new_n": n + len(mine),
                "new_support": (old + add).astype(kind).tobytes(),
            }
        )
    g.conn.execute(_UPDATE_COUNTS, updates)


class _RowBytes:
    """The batch's ids and wire reports as bytes objects (made once: what the driver binds)."""

    def __init__(self, batch: Batch):
        n, width = batch.rows.shape
        id_blob = np.ascontiguousarray(batch.ids).tobytes()
        wire_blob = np.ascontiguousarray(batch.rows).tobytes()
        self.ids = [id_blob[16 * i : 16 * i + 16] for i in range(n)]
        self.wires = [wire_blob[width * i : width * (i + 1)] for i in range(n)]


def _check_open(col: Collection, epochs: NDArray[np.int64], items: NDArray[np.int64]) -> None:
    """Refuse the first of ``items`` (ascending) whose epoch is not open: 425 with
    ``Retry-After`` when it opens later (the device's clock runs ahead of the collection's;
    the client keeps the report), 422 when it never will."""
    low, high = col.open_range()
    if items.size == 1:  # one report: no array work
        bad = items if not low <= epochs[items[0]] <= high else items[:0]
    else:
        mine = epochs[items]
        bad = items[(mine < low) | (mine > high)]
    if bad.size:
        i = int(bad[0])
        e = int(epochs[i])
        where = f"[{low}, {high}]" if low <= high else "none"
        later = col.opens_later(e)
        if later is not None:
            raise ClientError(
                425,
                f"item {i}: epoch {e} is not open yet; open epochs are {where}. Keep the "
                "report and send it again later.",
                i,
                headers={"Retry-After": str(int(np.ceil(later)))},
            )
        raise ClientError(422, f"item {i}: epoch {e} is not open; open epochs are {where}.", i)


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
    """The items whose id is not stored yet (in the order of ``items``); 409 if a stored one
    differs in anything."""
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
