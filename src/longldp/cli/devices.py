"""``longldp devices …``: an operator's view of a collection's devices on a running server
(docs/server.md, "Sybil bounds"): list them with the collection's device bounds and what the
devices above the expected population could do to an estimate, revoke some, change the bounds.

Talks to the server over HTTP with the admin token (``--admin-token``, else
``$LONGLDP_ADMIN_TOKEN``); the standard library only, so it needs no server extras. A refusal
of the server is one ``error:`` line (exit 2) with the server's own message.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Annotated, Any

import typer
from rich.table import Table

from longldp.cli._common import console

group = typer.Typer(
    help="A collection's devices on a running server: list, revoke, bounds.",
    no_args_is_help=True,
)

Server = Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8000.")]
Collection = Annotated[str, typer.Option(help="The collection's name.")]
AdminToken = Annotated[
    str | None, typer.Option(help="The admin token (default: $LONGLDP_ADMIN_TOKEN).")
]


def _call(
    server: str, method: str, path: str, token: str | None, body: dict[str, Any] | None = None
) -> Any:
    """The JSON answer of one admin request; ``ValueError`` with the server's message."""
    token = token or os.environ.get("LONGLDP_ADMIN_TOKEN")
    if not token:
        raise ValueError("give the admin token: --admin-token or $LONGLDP_ADMIN_TOKEN.")
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        raise ValueError(f"'--server' must be http(s)://host:port; got {server!r}.")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        server.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read()).get("error", "")
        except (ValueError, AttributeError, OSError):
            message = ""
        raise ValueError(f"the server answered {err.code}: {message or err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise ValueError(f"cannot reach {server}: {getattr(err, 'reason', err)}.") from None


def _name(collection: str) -> str:
    return urllib.parse.quote(collection, safe="")


@group.command("list")
def list_cmd(
    server: Server,
    collection: Collection,
    admin_token: AdminToken = None,
    start: Annotated[int | None, typer.Option(help="First device id of the page.")] = None,
    limit: Annotated[int, typer.Option(help="Devices in the page (at most 10,000).")] = 100,
) -> None:
    """List a page of the collection's devices, its device bounds and the Sybil figure."""
    query = urllib.parse.urlencode({"limit": limit, **({} if start is None else {"start": start})})
    page = _call(server, "GET", f"/v1/collections/{_name(collection)}/devices?{query}", admin_token)
    table = Table(title=f"devices of {collection!r}")
    for column in ("device", "enrolled", "revoked", "reports", "last epoch"):
        table.add_column(column, justify="right" if column != "revoked" else "left")
    for d in page["devices_page"]:
        table.add_row(
            str(d["device"]),
            f"{d['enrolled_at']:.0f}",
            "-" if d["revoked_at"] is None else f"{d['revoked_at']:.0f}",
            str(d["reports"]),
            "-" if d["last_epoch"] is None else str(d["last_epoch"]),
        )
    out = console()
    out.print(table)
    expected = page["expected_devices"]
    out.print(
        f"active devices {page['devices']:,} (cap {page['max_devices']:,}, expected "
        f"{'undeclared' if expected is None else f'{expected:,}'}, at most "
        f"{page['enroll_per_minute']:,} enrollments a minute)"
    )
    out.print(page["sybil"]["note"], highlight=False)
    if page["next_start"] is not None:
        out.print(f"next page: --start {page['next_start']}")


@group.command("revoke")
def revoke_cmd(
    devices: Annotated[list[int], typer.Argument(help="Device ids to revoke.")],
    server: Server,
    collection: Collection,
    admin_token: AdminToken = None,
    purge: Annotated[
        bool, typer.Option(help="Also remove their reports of epochs not closed.")
    ] = False,
) -> None:
    """Revoke devices: their credentials stop working; with --purge their reports of epochs
    not closed are removed too, and the counts lowered."""
    for device in devices:
        path = f"/v1/collections/{_name(collection)}/devices/{device}"
        answer = _call(server, "DELETE", path + ("?purge=true" if purge else ""), admin_token)
        typer.echo(
            f"device {answer['device']}: revoked, {answer['reports_removed']} report(s) removed"
        )


@group.command("bounds")
def bounds_cmd(
    server: Server,
    collection: Collection,
    admin_token: AdminToken = None,
    max_devices: Annotated[int | None, typer.Option(help="Cap of active devices.")] = None,
    expected_devices: Annotated[
        int | None, typer.Option(help="The population you expect (the Sybil figure).")
    ] = None,
    enroll_per_minute: Annotated[int | None, typer.Option(help="Enrollments a minute.")] = None,
) -> None:
    """Change the collection's device bounds (only those given)."""
    body = {
        key: value
        for key, value in (
            ("max_devices", max_devices),
            ("expected_devices", expected_devices),
            ("enroll_per_minute", enroll_per_minute),
        )
        if value is not None
    }
    if not body:
        raise ValueError(
            "give at least one of --max-devices, --expected-devices, --enroll-per-minute."
        )
    answer = _call(server, "PATCH", f"/v1/collections/{_name(collection)}", admin_token, body)
    expected = answer["expected_devices"]
    typer.echo(
        f"{collection}: cap {answer['max_devices']:,}, expected "
        f"{'undeclared' if expected is None else f'{expected:,}'}, "
        f"{answer['enroll_per_minute']:,} enrollments a minute, {answer['devices']:,} active"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(group, name="devices")
