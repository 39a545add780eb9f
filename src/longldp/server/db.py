"""Storage of the collection server: schema, versioned migrations, engines (SQLAlchemy Core).

Two back ends share one schema: an embedded SQLite file in WAL mode (the default) and
PostgreSQL (``postgresql://…``, driven by psycopg 3). Every write transaction of the server
takes its locks up front so that concurrent requests never deadlock and never lose an update:

- SQLite: ``BEGIN IMMEDIATE`` (one writer at a time, readers keep reading the WAL);
  ``synchronous=FULL``, so a committed transaction survives a crash of the process or of the
  machine;
- PostgreSQL: the rows of the epochs a batch touches are locked ``FOR UPDATE`` in epoch order
  before any report is inserted.

Tables (see docs/server.md):

``schema_migrations``  one row per applied migration (version, time);
``collections``        one row per collection: protocol spec and fingerprint, epoch policy,
                       post-processing, SHA-256 hashes of its ingest and read tokens;
``reports``            every accepted report, keyed by (collection, report id), with its epoch,
                       optional cohort and wire bytes (header included);
``epoch_counts``       per collection and epoch: number of reports n, support counts (int64,
                       little-endian, the protocol's support shape), closed flag.
"""

from __future__ import annotations

import time
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
)

reports = sa.Table(
    "reports",
    metadata,
    sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id"), primary_key=True),
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
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("support", sa.LargeBinary, nullable=False),
    sa.Column("closed", sa.Boolean, nullable=False, default=False),
)

#: Index added by migration 2: the export and the recount read one epoch's reports.
reports_by_epoch = sa.Index("ix_reports_epoch", reports.c.collection_id, reports.c.epoch)


def _migration_1(conn: Connection) -> None:
    """Tables: collections, reports, epoch_counts."""
    for table in (collections, reports, epoch_counts):
        conn.execute(sa.schema.CreateTable(table))  # the table alone, not its later indexes


def _migration_2(conn: Connection) -> None:
    """Index on reports (collection, epoch) for per-epoch export and recount."""
    conn.execute(sa.schema.CreateIndex(reports_by_epoch))


#: Every migration in order; a database records the highest version applied.
MIGRATIONS: tuple[tuple[int, Callable[[Connection], None]], ...] = (
    (1, _migration_1),
    (2, _migration_2),
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


def make_engine(url: str, *, busy_timeout_s: float = 10.0) -> Engine:
    """An engine for ``url`` (see :func:`normalize_url`), tuned for the server's transactions."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
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
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

        return engine
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=8,
        connect_args={"connect_timeout": 5},
    )


@contextmanager
def transaction(engine: Engine, *, write: bool) -> Iterator[Connection]:
    """One transaction; ``write=True`` takes SQLite's write lock at BEGIN. Commits on exit."""
    with engine.connect() as conn:
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
