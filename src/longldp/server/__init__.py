"""Collection server: enrolls devices, receives wire-format reports from them, stores them in
SQLite or PostgreSQL, serves estimates, series, Parquet exports and a dashboard
(docs/server.md).

The top layer of longldp, with the CLI and the device client: it imports the protocols and
post-processing, never the other way round. Needs the optional extra ``server``
(``pip install 'longldp[server]'``: FastAPI, uvicorn, SQLAlchemy, psycopg, pyarrow).

>>> from longldp.server import build_app                       # doctest: +SKIP
>>> app = build_app("collect.db", admin_token="a-long-random-admin-secret")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from longldp.server.db import SCHEMA_VERSION, make_engine, migrate, normalize_url
from longldp.server.errors import ClientError
from longldp.server.service import Limits, Service, estimate_payload

#: Environment variable read for the admin token when none is given.
ADMIN_TOKEN_ENV = "LONGLDP_ADMIN_TOKEN"
#: Environment variable through which ``serve`` hands the database and limits to its workers.
SERVER_CONFIG_ENV = "LONGLDP_SERVER_CONFIG"


def build_app(  # type: ignore[no-untyped-def]
    db: str,
    admin_token: str,
    limits: Limits | None = None,
    attest: str | Callable[[str, str | None], bool] | None = None,
    *,
    cors_origins: Any = (),
):
    """Migrate the database at ``db`` (path or URL) and return the FastAPI application.

    ``attest`` is the attestation hook (docs/server.md, "Sybil bounds"): a callable, or its
    ``"module:function"`` name, called at every enrollment. ``cors_origins``: the browser
    origins allowed to call the API from their pages (CORS with preflight, `check_origins`);
    none by default (same origin only, docs/server.md).
    """
    from longldp.server.app import create_app

    hook = load_hook(attest) if isinstance(attest, str) else attest
    origins = check_origins("build_app", cors_origins)
    engine = make_engine(db)
    migrate(engine)
    return create_app(Service(engine, admin_token, limits, hook), cors_origins=origins)


def load_hook(spec: str) -> Callable[[str, str | None], bool]:
    """The function named ``"module:function"`` (``ValueError`` if it cannot be imported)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"serve: 'attest' must be 'module:function'; got {spec!r}.")
    try:
        hook = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"serve: attestation hook {spec!r} cannot be loaded: {exc}.") from None
    if not callable(hook):
        raise ValueError(f"serve: attestation hook {spec!r} is not callable.")
    return hook


def app_from_environment():  # type: ignore[no-untyped-def]
    """The application of one worker process of ``serve(workers=N)``: database, limits,
    allowed origins and hook from ``$LONGLDP_SERVER_CONFIG`` (JSON), admin token from
    ``$LONGLDP_ADMIN_TOKEN``. The worker exits when its supervisor dies (:func:`watch_parent`)."""
    config = json.loads(os.environ[SERVER_CONFIG_ENV])
    watch_parent(config.get("supervisor"))
    return build_app(
        config["db"],
        os.environ[ADMIN_TOKEN_ENV],
        Limits(**config["limits"]),
        config["attest"],
        cors_origins=tuple(config.get("cors_origins", ())),
    )


#: An allowed origin: scheme, host and optional port, nothing after (what a browser sends).
_ORIGIN = re.compile(r"^(?i:https?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")


def check_origins(owner: str, origins: Any) -> tuple[str, ...]:
    """The allowed browser origins, each ``http(s)://host[:port]`` (as a browser's ``Origin``
    header reads: no path, no trailing slash) or ``*`` (any page); a `ValueError` otherwise.

    ``*`` lets any web page call the API with a token it holds; the tokens are bearer tokens in
    a header (no cookies), so the server sends no credentials mode. List the sites instead
    when they are known.
    """
    if isinstance(origins, str):
        origins = (origins,)
    out: list[str] = []
    for origin in origins or ():
        text = origin.strip() if isinstance(origin, str) else origin
        if not isinstance(text, str) or not (text == "*" or _ORIGIN.match(text)):
            raise ValueError(
                f"{owner}: 'cors_origins' must be origins like https://app.example.org or "
                f"http://127.0.0.1:8080 (scheme, host and port; no path, no trailing slash), "
                f"or *; got {origin!r}."
            )
        scheme, _, rest = text.partition("://")
        out.append("*" if text == "*" else f"{scheme.lower()}://{rest.lower()}")
    return tuple(dict.fromkeys(out))


#: Seconds between two checks that a worker's supervisor is alive, and the grace a worker
#: whose supervisor died has to finish its requests before it exits anyway.
PARENT_POLL_S = 0.5
ORPHAN_GRACE_S = 10.0


def watch_parent(supervisor: int | None) -> None:
    """Exit this worker process when its supervisor (process ``supervisor``, the parent that
    started it) dies, e.g. killed with SIGKILL, which it cannot forward: the worker would
    otherwise keep serving on the shared socket with nobody to stop it, and hold the port
    against a restart. A daemon thread polls the parent's id; once the worker is orphaned it
    asks itself to stop (SIGTERM: uvicorn finishes the requests in flight) and, after
    :data:`ORPHAN_GRACE_S`, exits for good."""
    if supervisor is None:
        return

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(PARENT_POLL_S)
        print("longldp serve: the supervisor is gone; this worker stops.", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE_S)
        os._exit(0)

    threading.Thread(target=watch, name="longldp-parent-watch", daemon=True).start()


def serve(
    db: str = "longldp.db",
    host: str = "127.0.0.1",
    port: int = 8000,
    admin_token: str | None = None,
    limits: Limits | None = None,
    *,
    workers: int = 1,
    header_timeout: float = 10.0,
    body_timeout: float = 60.0,
    keep_alive_timeout: int = 5,
    write_timeout: float = 30.0,
    max_connections: int = 1000,
    attest: str | None = None,
    cors_origins: Any = (),
    tls_cert: str | None = None,
    tls_key: str | None = None,
    log_level: str = "warning",
) -> None:
    """Run the server with uvicorn until interrupted (``longldp serve``).

    The admin token comes from ``admin_token``, else the environment variable
    ``LONGLDP_ADMIN_TOKEN``; if neither is set, a random one is generated and printed once.
    ``workers`` > 1 runs that many server processes on one listening socket (each with its own
    connections to the database; docs/server.md, "More than one process"); each exits when the
    supervisor dies. The timeouts bound how long a connection may take to send its headers and
    its body, stay idle between requests, and leave its answer unread
    (:mod:`longldp.server.timeouts`); ``max_connections`` bounds the connections and requests
    at once (more are answered 503). ``attest`` names the attestation hook
    (``"module:function"``). ``tls_cert`` and ``tls_key`` (PEM files) serve HTTPS directly;
    behind a TLS-terminating reverse proxy, leave them unset. ``cors_origins`` lists the
    browser origins whose pages may call the API (`check_origins`).
    """
    import uvicorn

    from longldp.server.timeouts import GuardedH11Protocol

    _check_serve_args(
        port, workers, header_timeout, body_timeout, keep_alive_timeout, write_timeout
    )
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or not (
        1 <= max_connections <= 1_000_000
    ):
        raise ValueError(
            f"serve: 'max_connections' must be an integer in [1, 1000000]; got "
            f"{max_connections!r}."
        )
    if attest is not None:
        load_hook(attest)  # refused now, with one error line, rather than in every worker
    origins = check_origins("serve", cors_origins)
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("serve: 'tls_cert' and 'tls_key' go together; got only one.")
    for path in (tls_cert, tls_key):
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"serve: TLS file {path!r} does not exist.")
    if admin_token is None:
        admin_token = os.environ.get(ADMIN_TOKEN_ENV)
    generated = not admin_token
    if generated:
        admin_token = "ll_admin_" + secrets.token_urlsafe(32)
    limits = limits or Limits()
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": False,
        "http": GuardedH11Protocol,
        "timeout_keep_alive": keep_alive_timeout,
        "ssl_certfile": tls_cert,
        "ssl_keyfile": tls_key,
        "lifespan": "off",
        "limit_concurrency": max_connections,
        # Client addresses are used for nothing (docs/server.md): no X-Forwarded-For rewriting
        # on every request, and no "server: uvicorn" header on every answer.
        "proxy_headers": False,
        "server_header": False,
    }
    # The database is opened (and migrated) before the token is shown: a bad --db fails alone.
    if workers == 1:
        app = build_app(db, admin_token, limits, attest, cors_origins=origins)
        config = uvicorn.Config(app, **options)
    else:
        engine = make_engine(db)
        migrate(engine)  # once, before the workers start
        engine.dispose()
    if generated:
        print(f"admin token (shown once): {admin_token}", file=sys.stderr, flush=True)
    if workers > 1:
        os.environ[ADMIN_TOKEN_ENV] = admin_token
        os.environ[SERVER_CONFIG_ENV] = json.dumps(
            {
                "db": db,
                "limits": dataclasses.asdict(limits),
                "attest": attest,
                "cors_origins": list(origins),
                "supervisor": os.getpid(),
            }
        )
        config = uvicorn.Config(
            "longldp.server:app_from_environment", factory=True, workers=workers, **options
        )
    # Read by GuardedH11Protocol in every worker (the config object is what workers receive).
    config.header_timeout = header_timeout  # type: ignore[attr-defined]
    config.body_timeout = body_timeout  # type: ignore[attr-defined]
    config.write_timeout = write_timeout  # type: ignore[attr-defined]
    if workers == 1:
        uvicorn.Server(config).run()
        return
    from uvicorn.supervisors import Multiprocess

    sock = config.bind_socket()
    Multiprocess(config, sockets=[sock]).run()


def _check_serve_args(
    port: Any,
    workers: Any,
    header_timeout: Any,
    body_timeout: Any,
    keep_alive: Any,
    write_timeout: Any = 30.0,
) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"serve: 'port' must be in [1, 65535]; got {port!r}.")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        raise ValueError(f"serve: 'workers' must be an integer in [1, 64]; got {workers!r}.")
    for name, value in (
        ("header_timeout", header_timeout),
        ("body_timeout", body_timeout),
        ("keep_alive_timeout", keep_alive),
        ("write_timeout", write_timeout),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"serve: '{name}' must be a positive number; got {value!r}.")


__all__ = [
    "ADMIN_TOKEN_ENV",
    "SCHEMA_VERSION",
    "ClientError",
    "Limits",
    "Service",
    "app_from_environment",
    "build_app",
    "estimate_payload",
    "make_engine",
    "migrate",
    "normalize_url",
    "serve",
]
