"""Storage of the collection server: schema, versioned migrations, engines (SQLAlchemy Core).

Two back ends share one schema: an embedded SQLite file in WAL mode (the default) and
PostgreSQL (``postgresql://…``, driven by psycopg 3). Every write transaction of the server
takes its locks up front, in one global order, so that concurrent requests never deadlock and
never lose an update:

- SQLite: ``BEGIN IMMEDIATE`` (one writer at a time, readers keep reading the WAL);
  ``synchronous=FULL``, so a committed transaction survives a crash of the process or of the
  machine;
- PostgreSQL: the uploading device's row (``FOR UPDATE``), then the reports inserted in
  report-id order, then one count row (shard) of each epoch the batch touches (``FOR UPDATE``,
  in epoch order). Two transactions therefore meet their common locks in the same order: one
  waits for the other, neither waits for a lock the other is about to take.

Tables (see docs/server.md):

``schema_migrations``  one row per applied migration (version, time);
``collections``        one row per collection: protocol spec and fingerprint, epoch policy
                       (window), ingest mode (per-device credentials or a shared token), the
                       per-device quota, SHA-256 hashes of its tokens;
``devices``            one row per enrolled device: its collection, the SHA-256 hash of its
                       credential, when it enrolled;
``reports``            every accepted report, keyed by (collection, device, report id), with its
                       epoch, optional cohort and wire bytes (header included); device 0 is the
                       shared ingest token;
``epoch_counts``       per collection, epoch and shard: number of reports n, support counts
                       (int64, little-endian, the protocol's support shape), closed flag; an
                       epoch's counts are the sums over its shards (PostgreSQL collections
                       have several, so that concurrent transactions do not wait for one
                       row; SQLite ones one).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

metadata = sa.MetaData()

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)

#: Ingest modes of a collection: every device enrolls and holds its own credential, or
#: every device shares one ingest token (the only mode before schema version 3).
AUTH_DEVICE, AUTH_SHARED = "device", "shared"

collections = sa.Table(
    "collections",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("protocol_spec", sa.Text, nullable=False),
    sa.Column("protocol_id", sa.Integer, nullable=False),
    sa.Column("fingerprint", sa.LargeBinary, nullable=False),
    sa.Column("first_epoch", sa.BigInteger, nullable=False),
    sa.Column("last_epoch", sa.BigInteger, nullable=True),
    sa.Column("epoch_seconds", sa.Float, nullable=True),
    sa.Column("start_time", sa.Float, nullable=True),
    sa.Column("postprocess", sa.String(32), nullable=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("ingest_token_hash", sa.LargeBinary, nullable=False),
    sa.Column("read_token_hash", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # Version 3: the ingest mode, the enrollment token, the per-device quota, the epoch window.
    sa.Column("auth", sa.String(16), nullable=False, server_default=AUTH_SHARED),
    sa.Column("enroll_token_hash", sa.LargeBinary, nullable=True),
    sa.Column("reports_per_epoch", sa.Integer, nullable=True),
    sa.Column("epoch_window", sa.BigInteger, nullable=True),
    sa.Column("count_shards", sa.Integer, nullable=False, server_default="1"),
    # Version 4: who moves the epoch window (the wall clock, else the operator's open_from),
    # the accepted clock skew, and the bounds on devices (cap, enrollment rate, the expected
    # population the page's Sybil figure compares with, the count of active devices).
    sa.Column("open_from", sa.BigInteger, nullable=True),
    sa.Column("epoch_skew", sa.Integer, nullable=False, server_default="1"),
    sa.Column("max_devices", sa.BigInteger, nullable=True),
    sa.Column("expected_devices", sa.BigInteger, nullable=True),
    sa.Column("enroll_per_minute", sa.Integer, nullable=True),
    sa.Column("device_count", sa.BigInteger, nullable=False, server_default="0"),
)

devices = sa.Table(
    "devices",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), nullable=False),
    sa.Column("credential_hash", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # Version 4: when the operator revoked the device (its credential no longer works).
    sa.Column("revoked_at", sa.Float, nullable=True),
)

#: The device id of reports sent with a collection's shared ingest token.
SHARED_DEVICE = 0

reports = sa.Table(
    "reports",
    metadata,
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), primary_key=True),
    sa.Column("device_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("report_id", sa.LargeBinary, primary_key=True),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("cohort", sa.Integer, nullable=True),
    sa.Column("wire", sa.LargeBinary, nullable=False),
)

epoch_counts = sa.Table(
    "epoch_counts",
    metadata,
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), primary_key=True),
    sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
    # Version 3: an epoch's counts are split over the collection's `count_shards` rows, which
    # concurrent transactions update independently; an epoch's n and support are their sums.
    sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("support", sa.LargeBinary, nullable=False),
    sa.Column("closed", sa.Boolean, nullable=False, default=False),
)

#: Index added by migration 2 (rebuilt by 3): the export and the recount read one epoch.
reports_by_epoch = sa.Index("ix_reports_epoch", reports.c.collection_id, reports.c.epoch)
#: Index added by migration 3: a device's reports per epoch (quota) and its history.
reports_by_device = sa.Index(
    "ix_reports_device", reports.c.collection_id, reports.c.device_id, reports.c.epoch
)
devices_by_collection = sa.Index("ix_devices_collection", devices.c.collection_id)
#: Index added by migration 4: a collection's enrollments by time (the enrollment rate limit).
devices_by_time = sa.Index("ix_devices_created", devices.c.collection_id, devices.c.created_at)

# ---------------------------------------------------------------------- frozen old schemas
# A migration creates the tables of its own version, never today's: these copies are frozen.
_v1 = sa.MetaData()
_collections_v1 = sa.Table(
    "collections",
    _v1,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("protocol_spec", sa.Text, nullable=False),
    sa.Column("protocol_id", sa.Integer, nullable=False),
    sa.Column("fingerprint", sa.LargeBinary, nullable=False),
    sa.Column("first_epoch", sa.BigInteger, nullable=False),
    sa.Column("last_epoch", sa.BigInteger, nullable=True),
    sa.Column("epoch_seconds", sa.Float, nullable=True),
    sa.Column("start_time", sa.Float, nullable=True),
    sa.Column("postprocess", sa.String(32), nullable=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("ingest_token_hash", sa.LargeBinary, nullable=False),
    sa.Column("read_token_hash", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
_reports_v1 = sa.Table(
    "reports",
    _v1,
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), primary_key=True),
    sa.Column("report_id", sa.LargeBinary, primary_key=True),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("cohort", sa.Integer, nullable=True),
    sa.Column("wire", sa.LargeBinary, nullable=False),
)
_epoch_counts_v1 = sa.Table(
    "epoch_counts",
    _v1,
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), primary_key=True),
    sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("support", sa.LargeBinary, nullable=False),
    sa.Column("closed", sa.Boolean, nullable=False, default=False),
)
_epoch_counts_v3 = sa.Table(
    "epoch_counts_v3",
    sa.MetaData(),
    sa.Column("collection_id", sa.Integer, primary_key=True),
    sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("support", sa.LargeBinary, nullable=False),
    sa.Column("closed", sa.Boolean, nullable=False, default=False),
)
_reports_v3 = sa.Table(
    "reports_v3",
    sa.MetaData(),
    sa.Column("collection_id", sa.Integer, primary_key=True),
    sa.Column("device_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("report_id", sa.LargeBinary, primary_key=True),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("cohort", sa.Integer, nullable=True),
    sa.Column("wire", sa.LargeBinary, nullable=False),
)

_devices_v3 = sa.Table(
    "devices",
    _v1,  # beside the frozen collections table its foreign key names
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), nullable=False),
    sa.Column("credential_hash", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

#: The decoy collection (migration 4): a row no request can name (names have 1–64
#: characters), read in place of an unknown collection so that authentication does the same
#: work whether the collection exists or not. Its token digests are of secrets nobody holds.
DECOY_NAME = ""
_DECOY_SPEC = '{"name": "GRR", "params": {"eps": 1.0, "k": 2}}'

#: Epoch window given by migration 3 to the collections created before it (they had none).
LEGACY_EPOCH_WINDOW = 32


def _migration_1(conn: Connection) -> None:
    """Tables: collections, reports, epoch_counts."""
    for table in (_collections_v1, _reports_v1, _epoch_counts_v1):
        conn.execute(sa.schema.CreateTable(table))  # the table alone, not its later indexes


def _migration_2(conn: Connection) -> None:
    """Index on reports (collection, epoch) for per-epoch export and recount."""
    conn.execute(sa.text("CREATE INDEX ix_reports_epoch ON reports (collection_id, epoch)"))


def _migration_3(conn: Connection) -> None:
    """Device identities: the devices table; reports keyed by (collection, device, report id)
    with the old reports under device 0 (the shared token); collections gain their ingest mode
    (existing ones: shared), enrollment token, per-device quota and epoch window (existing
    ones: :data:`LEGACY_EPOCH_WINDOW`); epoch counts split over shards (existing: one)."""
    add = "ALTER TABLE collections ADD COLUMN"
    conn.execute(sa.text(f"{add} auth VARCHAR(16) NOT NULL DEFAULT '{AUTH_SHARED}'"))
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    conn.execute(sa.text(f"{add} enroll_token_hash {blob}"))
    conn.execute(sa.text(f"{add} reports_per_epoch INTEGER"))
    conn.execute(sa.text(f"{add} epoch_window BIGINT"))
    conn.execute(sa.text(f"UPDATE collections SET epoch_window = {LEGACY_EPOCH_WINDOW}"))
    conn.execute(sa.schema.CreateTable(_devices_v3))
    conn.execute(sa.schema.CreateIndex(devices_by_collection))
    # The primary key changes: rebuild the table (SQLite cannot alter a primary key).
    conn.execute(sa.schema.CreateTable(_reports_v3))
    conn.execute(
        sa.text(
            "INSERT INTO reports_v3 (collection_id, device_id, report_id, epoch, cohort, wire) "
            f"SELECT collection_id, {SHARED_DEVICE}, report_id, epoch, cohort, wire FROM reports"
        )
    )
    conn.execute(sa.text("DROP TABLE reports"))  # drops ix_reports_epoch with it
    conn.execute(sa.text("ALTER TABLE reports_v3 RENAME TO reports"))
    conn.execute(sa.schema.CreateIndex(reports_by_epoch))
    conn.execute(sa.schema.CreateIndex(reports_by_device))
    # Counts split over shards: existing ones become shard 0 of one (count_shards = 1).
    conn.execute(sa.text(f"{add} count_shards INTEGER NOT NULL DEFAULT 1"))
    conn.execute(sa.schema.CreateTable(_epoch_counts_v3))
    conn.execute(
        sa.text(
            "INSERT INTO epoch_counts_v3 (collection_id, epoch, shard, n, support, closed) "
            "SELECT collection_id, epoch, 0, n, support, closed FROM epoch_counts"
        )
    )
    conn.execute(sa.text("DROP TABLE epoch_counts"))
    conn.execute(sa.text("ALTER TABLE epoch_counts_v3 RENAME TO epoch_counts"))


def _migration_4(conn: Connection) -> None:
    """Epoch windows no device can move, and bounds on devices.

    Collections gain ``open_from`` (without a wall clock, the oldest open epoch, moved only by
    the operator; existing ones start half a window behind their newest epoch with reports,
    so the epochs around it stay open), ``epoch_skew`` (future epochs accepted with a wall
    clock: 1), the device cap, expected population and enrollment rate (NULL: the server's
    defaults) and the count of active devices; devices gain ``revoked_at``; an index serves
    the enrollment rate (enrollments of a collection by time); the decoy collection
    (:data:`DECOY_NAME`) is inserted."""
    add = "ALTER TABLE collections ADD COLUMN"
    conn.execute(sa.text(f"{add} open_from BIGINT"))
    conn.execute(sa.text(f"{add} epoch_skew INTEGER NOT NULL DEFAULT 1"))
    conn.execute(sa.text(f"{add} max_devices BIGINT"))
    conn.execute(sa.text(f"{add} expected_devices BIGINT"))
    conn.execute(sa.text(f"{add} enroll_per_minute INTEGER"))
    conn.execute(sa.text(f"{add} device_count BIGINT NOT NULL DEFAULT 0"))
    conn.execute(sa.text("ALTER TABLE devices ADD COLUMN revoked_at FLOAT"))
    conn.execute(sa.schema.CreateIndex(devices_by_time))
    import hashlib
    import secrets

    def nobody() -> bytes:
        return hashlib.sha256(secrets.token_bytes(32)).digest()

    conn.execute(
        sa.text(
            "INSERT INTO collections (name, protocol_spec, protocol_id, fingerprint, "
            "first_epoch, description, ingest_token_hash, read_token_hash, created_at, auth, "
            "enroll_token_hash, epoch_window, open_from) VALUES (:name, :spec, 1, :fp, 0, "
            "'decoy: read in place of unknown collections', :h1, :h2, 0, 'device', :h3, 8, 0)"
        ),
        {
            "name": DECOY_NAME,
            "spec": _DECOY_SPEC,
            "fp": bytes(8),
            "h1": nobody(),
            "h2": nobody(),
            "h3": nobody(),
        },
    )
    conn.execute(
        sa.text(
            "UPDATE collections SET device_count = (SELECT count(*) FROM devices "
            "WHERE devices.collection_id = collections.id)"
        )
    )
    newest = (
        "(SELECT max(epoch) FROM epoch_counts WHERE epoch_counts.collection_id = "
        "collections.id AND epoch_counts.n > 0)"
    )
    # Without a wall clock the window used to follow the newest epoch with reports.
    conn.execute(
        sa.text(
            "UPDATE collections SET open_from = CASE WHEN "
            f"{newest} IS NULL THEN first_epoch "
            f"WHEN {newest} - epoch_window / 2 < first_epoch THEN first_epoch "
            f"ELSE {newest} - epoch_window / 2 END WHERE epoch_seconds IS NULL"
        )
    )


#: Every migration in order; a database records the highest version applied.
MIGRATIONS: tuple[tuple[int, Callable[[Connection], None]], ...] = (
    (1, _migration_1),
    (2, _migration_2),
    (3, _migration_3),
    (4, _migration_4),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class DatabaseUnavailableError(RuntimeError):
    """The database cannot be reached or is busy; the request may be retried later."""


def is_postgres(engine: Engine) -> bool:
    """True for a PostgreSQL engine."""
    return engine.dialect.name == "postgresql"


def normalize_url(url: str) -> str:
    """A SQLAlchemy URL from what a user types: a path means SQLite; postgresql:// means psycopg 3.

    ``collect.db`` → ``sqlite:///collect.db``; ``postgresql://u@h/db`` →
    ``postgresql+psycopg://u@h/db``.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("server: 'db' must be a SQLite file path or a database URL; got empty.")
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith(("sqlite://", "postgresql+psycopg://")):
        return url
    if "://" in url:
        raise ValueError(
            f"server: 'db' must be a SQLite path, sqlite:///… or postgresql://…; got {url!r}."
        )
    return f"sqlite:///{url}"


#: SQLite: WAL pages between automatic checkpoints (4 KiB each: a 40 MiB WAL at most between
#: two checkpoints, unless readers hold it longer) and the size the WAL file is cut back to.
WAL_CHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT = 64 * 2**20
#: SQLite: page cache per connection (KiB; SQLite's default is 2 MiB). The pool hands out the
#: most recently used connection first, so one or two connections keep a warm cache.
PAGE_CACHE_KIB = 16 * 1024


def make_engine(url: str, *, busy_timeout_s: float = 10.0) -> Engine:
    """An engine for ``url`` (see :func:`normalize_url`), tuned for the server's transactions."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
            pool_use_lifo=True,
            pool_size=8,
            max_overflow=8,
        )

        @sa.event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            # Transactions are issued by hand below (BEGIN IMMEDIATE), not by the driver.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            # Checkpoint (copy the WAL into the database file) every WAL_CHECKPOINT_PAGES pages
            # rather than SQLite's 1,000: a request rewrites up to one index page per report
            # (random report ids), so the default checkpointed every request or two, copying
            # the same pages again and again; the WAL file is cut back after a checkpoint.
            cur.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            cur.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

        return engine
    # The process id in application_name tells a DBA (and the multi-process test) which
    # server process holds a connection (pg_stat_activity).
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=8,
        connect_args={"connect_timeout": 5, "application_name": f"longldp-server-{os.getpid()}"},
    )


#: Per SQLite engine, a mutex its write transactions take before ``BEGIN IMMEDIATE``.
_SQLITE_WRITERS: weakref.WeakKeyDictionary[Engine, threading.Lock] = weakref.WeakKeyDictionary()
_SQLITE_WRITERS_LOCK = threading.Lock()


def _writer_lock(engine: Engine) -> threading.Lock | contextlib.nullcontext[None]:
    """The mutex of ``engine``'s writers (SQLite), or a no-op (PostgreSQL).

    SQLite lets one writer in at a time; a writer that finds the lock taken sleeps and polls
    (its busy handler: 1, 2, 5, … up to 100 ms), so threads of one process that write at once
    waste most of their time asleep. Queuing them on a mutex first hands the lock over as soon
    as it is free; writers of other processes still meet at ``BEGIN IMMEDIATE``.
    """
    if engine.dialect.name != "sqlite":
        return contextlib.nullcontext()
    with _SQLITE_WRITERS_LOCK:
        return _SQLITE_WRITERS.setdefault(engine, threading.Lock())


@contextmanager
def transaction(engine: Engine, *, write: bool) -> Iterator[Connection]:
    """One transaction; ``write=True`` takes SQLite's write lock at BEGIN. Commits on exit."""
    with _writer_lock(engine) if write else contextlib.nullcontext(), engine.connect() as conn:
        conn.info["write"] = write
        try:
            with conn.begin():
                yield conn
        finally:
            conn.info["write"] = False


def schema_version(conn: Connection) -> int:
    """Highest migration applied (0 for an empty database)."""
    if not sa.inspect(conn).has_table("schema_migrations"):
        return 0
    return int(conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar() or 0)


def migrate(engine: Engine, *, target: int = SCHEMA_VERSION) -> int:
    """Apply the missing migrations up to ``target`` in one transaction; return the version.

    A database written by a newer release (a version above the ones known here) is refused
    with ``ValueError`` rather than used.
    """
    with transaction(engine, write=True) as conn:
        if is_postgres(engine):
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(4242001)")
        if not sa.inspect(conn).has_table("schema_migrations"):
            conn.execute(sa.schema.CreateTable(schema_migrations))
        current = schema_version(conn)
        if current > SCHEMA_VERSION:
            raise ValueError(
                f"server: the database has schema version {current}; this release knows up to "
                f"{SCHEMA_VERSION}. Upgrade longldp to use it."
            )
        for version, step in MIGRATIONS:
            if current < version <= target:
                step(conn)
                conn.execute(
                    schema_migrations.insert().values(version=version, applied_at=time.time())
                )
                current = version
        return current
