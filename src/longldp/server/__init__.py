"""Collection server: receives wire-format reports from devices, stores them in SQLite or
PostgreSQL, serves estimates, series, Parquet exports and a dashboard (docs/server.md).

The top layer of longldp, with the CLI and the device client: it imports the protocols and
post-processing, never the other way round. Needs the optional extra ``server``
(``pip install 'longldp[server]'``: FastAPI, uvicorn, SQLAlchemy, psycopg, pyarrow).

>>> from longldp.server import build_app                       # doctest: +SKIP
>>> app = build_app("collect.db", admin_token="a-long-random-admin-secret")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import secrets
import sys

from longldp.server.db import SCHEMA_VERSION, make_engine, migrate, normalize_url
from longldp.server.service import ClientError, Limits, Service, estimate_payload

#: Environment variable read for the admin token when none is given.
ADMIN_TOKEN_ENV = "LONGLDP_ADMIN_TOKEN"


def build_app(db: str, admin_token: str, limits: Limits | None = None):  # type: ignore[no-untyped-def]
    """Migrate the database at ``db`` (path or URL) and return the FastAPI application."""
    from longldp.server.app import create_app

    engine = make_engine(db)
    migrate(engine)
    return create_app(Service(engine, admin_token, limits))


def serve(
    db: str = "longldp.db",
    host: str = "127.0.0.1",
    port: int = 8000,
    admin_token: str | None = None,
    max_body_bytes: int = Limits.max_body_bytes,
    max_batch: int = Limits.max_batch,
    log_level: str = "warning",
) -> None:
    """Run the server with uvicorn until interrupted (``longldp serve``).

    The admin token comes from ``admin_token``, else the environment variable
    ``LONGLDP_ADMIN_TOKEN``; if neither is set, a random one is generated and printed once.
    """
    import uvicorn

    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"serve: 'port' must be in [1, 65535]; got {port!r}.")
    if max_body_bytes < 1024 or max_batch < 1:
        raise ValueError("serve: 'max_body_bytes' must be ≥ 1024 and 'max_batch' ≥ 1.")
    if admin_token is None:
        admin_token = os.environ.get(ADMIN_TOKEN_ENV)
    generated = not admin_token
    if generated:
        admin_token = "ll_admin_" + secrets.token_urlsafe(32)
    # The database is opened (and migrated) before the token is shown: a bad --db fails alone.
    app = build_app(db, admin_token, Limits(max_body_bytes, max_batch))
    if generated:
        print(f"admin token (shown once): {admin_token}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


__all__ = [
    "ADMIN_TOKEN_ENV",
    "SCHEMA_VERSION",
    "ClientError",
    "Limits",
    "Service",
    "build_app",
    "estimate_payload",
    "make_engine",
    "migrate",
    "normalize_url",
    "serve",
]
