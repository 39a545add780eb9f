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
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Collect reports from devices into SQLite or PostgreSQL; serve estimates and a dashboard.

    Needs the optional extra named server (FastAPI, uvicorn, SQLAlchemy, psycopg).
    """
    try:
        from longldp.server import serve
    except ImportError as exc:
        raise ValueError(
            f"the server needs the optional extra 'server' (pip install 'longldp[server]'): {exc}"
        ) from None
    serve(
        db=db,
        host=host,
        port=port,
        admin_token=admin_token,
        max_body_bytes=max_body_bytes,
        max_batch=max_batch,
        log_level=log_level,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
