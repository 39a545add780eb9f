"""``longldp serve``: run the collection server (docs/server.md).

Everything that can be wrong with the command line is checked before the server starts, and
refused with one ``error:`` line: the log level, the address (a host name that does not
resolve, an address that is not this machine's, a port in use or not allowed), and the
database (a folder, a file in a missing folder, a file that is not a database, a PostgreSQL
server that cannot be reached or refuses the login).
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Annotated

import typer

#: uvicorn's log levels (``uvicorn.config.LOG_LEVELS``).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def serve_cmd(
    db: Annotated[
        str,
        typer.Option(help="SQLite file path (WAL mode) or postgresql://user@host:port/dbname."),
    ] = "longldp.db",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    admin_token: Annotated[
        str | None,
        typer.Option(
            help="Admin token (creates collections). Default: $LONGLDP_ADMIN_TOKEN, else a "
            "random one printed once."
        ),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest ingest body.")] = 16 * 1024 * 1024,
    max_batch: Annotated[int, typer.Option(help="Most reports in one ingest request.")] = 10_000,
    max_epochs_per_request: Annotated[
        int, typer.Option(help="Most distinct epochs in one ingest request.")
    ] = 8,
    max_open_epochs: Annotated[
        int, typer.Option(help="Most epochs a collection keeps open (bounds its epoch window).")
    ] = 64,
    max_collection_bytes: Annotated[
        int,
        typer.Option(help="Memory one request on a collection may need; checked at creation."),
    ] = 512 * 1024 * 1024,
    max_answer_values: Annotated[
        int, typer.Option(help="Most values (epochs × values) in one query answer.")
    ] = 100_000,
    max_inflight_bytes: Annotated[
        int,
        typer.Option(
            help="Memory all requests in flight may hold (else 503 with Retry-After); at "
            "least --max-collection-bytes."
        ),
    ] = 1024 * 1024 * 1024,
    max_devices: Annotated[
        int, typer.Option(help="Default cap of active devices per device-mode collection.")
    ] = 1_000_000,
    enroll_per_minute: Annotated[
        int, typer.Option(help="Default enrollments a minute per collection (else 429).")
    ] = 600,
    max_connections: Annotated[
        int, typer.Option(help="Most connections and requests at once (else 503).")
    ] = 1000,
    attest: Annotated[
        str | None,
        typer.Option(
            help="Attestation hook 'module:function', called at every enrollment with the "
            "collection's name and the X-Device-Attestation header; False refuses (403)."
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Server processes sharing the port (PostgreSQL or SQLite).")
    ] = 1,
    header_timeout: Annotated[
        float, typer.Option(help="Seconds a connection has to send a request's headers.")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(help="Seconds a request has to send its whole body.")
    ] = 60.0,
    keep_alive_timeout: Annotated[
        int, typer.Option(help="Seconds an idle keep-alive connection stays open.")
    ] = 5,
    write_timeout: Annotated[
        float,
        typer.Option(help="Seconds a client may leave its answer unread before it is dropped."),
    ] = 30.0,
    tls_cert: Annotated[
        str | None, typer.Option(help="PEM certificate: serve HTTPS (with --tls-key).")
    ] = None,
    tls_key: Annotated[str | None, typer.Option(help="PEM private key of --tls-cert.")] = None,
    log_level: Annotated[
        str, typer.Option(help=f"uvicorn log level: {', '.join(LOG_LEVELS)}.")
    ] = "warning",
    cors_origins: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            metavar="ORIGIN",
            help="Let pages of this origin (https://host[:port], or * for any) call the API "
            "from a browser: CORS with preflight. Repeatable. Default: same origin only.",
        ),
    ] = None,
) -> None:
    """Collect reports from devices into SQLite or PostgreSQL; serve estimates and a dashboard.

    Needs the optional extra named server (FastAPI, uvicorn, SQLAlchemy, psycopg).
    """
    try:
        from sqlalchemy.exc import SQLAlchemyError

        from longldp.server import Limits, check_origins, serve
    except ImportError as exc:
        raise ValueError(
            f"the server needs the optional extra 'server' (pip install 'longldp[server]'): {exc}"
        ) from None
    if log_level.lower() not in LOG_LEVELS:
        raise ValueError(
            f"'--log-level' must be one of {', '.join(LOG_LEVELS)}; got {log_level!r}."
        )
    check_origins("serve", cors_origins or ())  # before the address and the database
    check_listen_address(host, port)
    check_sqlite_path(db)
    limits = Limits(
        max_body_bytes=max_body_bytes,
        max_batch=max_batch,
        max_epochs_per_request=max_epochs_per_request,
        max_open_epochs=max_open_epochs,
        max_collection_bytes=max_collection_bytes,
        max_answer_values=max_answer_values,
        max_inflight_bytes=max_inflight_bytes,
        max_devices=max_devices,
        enroll_per_minute=enroll_per_minute,
    )
    try:
        serve(
            db=db,
            host=host,
            port=port,
            admin_token=admin_token,
            limits=limits,
            workers=workers,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            keep_alive_timeout=keep_alive_timeout,
            write_timeout=write_timeout,
            max_connections=max_connections,
            attest=attest,
            tls_cert=tls_cert,
            tls_key=tls_key,
            log_level=log_level.lower(),
            cors_origins=tuple(cors_origins or ()),
        )
    except SQLAlchemyError as err:
        raise ValueError(f"--db {_shown_db(db)}: {_database_reason(err)}") from None


def check_listen_address(host: str, port: int) -> None:
    """Refuse a port out of range, a host that does not resolve or is not this machine's, and
    a port already in use, by binding a socket the way uvicorn will (then closing it)."""
    if not 0 < port < 65536:
        raise ValueError(f"'--port' must be in [1, 65535]; got {port}.")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ValueError(
            f"'--host' {host!r} is not an address or a known host ({reason})."
        ) from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise ValueError(
                    f"'--port' {port} is already in use on {host}; stop what listens there "
                    "or choose another port."
                ) from None
            if err.errno == errno.EADDRNOTAVAIL:
                raise ValueError(f"'--host' {host!r} is not an address of this machine.") from None
            if err.errno == errno.EACCES:
                raise ValueError(
                    f"'--port' {port}: permission denied (ports below 1024 need privileges)."
                ) from None
            raise ValueError(f"cannot listen on {host}:{port}: {err.strerror}.") from None


def check_sqlite_path(db: str) -> None:
    """A SQLite path (not a URL) must be a file, or a new file in an existing folder."""
    if "://" in db:
        return
    path = Path(db)
    if path.is_dir():
        raise ValueError(f"--db {db!r} is a folder; give a SQLite file or postgresql://...")
    if not path.parent.is_dir():
        raise ValueError(
            f"--db {db!r}: the folder {str(path.parent)!r} does not exist; create it first."
        )


def _shown_db(db: str) -> str:
    """The database as the user gave it, with any password hidden."""
    if "://" not in db:
        return repr(db)
    try:
        from sqlalchemy.engine import make_url

        return make_url(db).render_as_string(hide_password=True)
    except Exception:  # not even a URL: show the scheme only
        return db.split("://", 1)[0] + "://..."


def _database_reason(err: Exception) -> str:
    """The driver's own first line (``file is not a database``, ``connection refused``)."""
    orig = getattr(err, "orig", None) or err
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return (lines[0] if lines else type(orig).__name__).rstrip(".") + "."


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
