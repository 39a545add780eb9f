"""``longldp serve``: run the collection server (docs/server.md)."""

from __future__ import annotations

from typing import Annotated

import typer


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
    tls_cert: Annotated[
        str | None, typer.Option(help="PEM certificate: serve HTTPS (with --tls-key).")
    ] = None,
    tls_key: Annotated[str | None, typer.Option(help="PEM private key of --tls-cert.")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Collect reports from devices into SQLite or PostgreSQL; serve estimates and a dashboard.

    Needs the optional extra named server (FastAPI, uvicorn, SQLAlchemy, psycopg).
    """
    try:
        from longldp.server import Limits, serve
    except ImportError as exc:
        raise ValueError(
            f"the server needs the optional extra 'server' (pip install 'longldp[server]'): {exc}"
        ) from None
    limits = Limits(
        max_body_bytes=max_body_bytes,
        max_batch=max_batch,
        max_epochs_per_request=max_epochs_per_request,
        max_open_epochs=max_open_epochs,
        max_collection_bytes=max_collection_bytes,
        max_answer_values=max_answer_values,
    )
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
        tls_cert=tls_cert,
        tls_key=tls_key,
        log_level=log_level,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
