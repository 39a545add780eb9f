"""``longldp privacy PROTOCOL [NAME=VALUE ...]``: local and shuffled central privacy of a
collection, per report, per memo, per epoch and for the whole collection (docs/math.md §17)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from longldp.cli._common import console, parse_assignments


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def privacy_cmd(
    protocol: Annotated[str, typer.Argument(help="Protocol name (see `longldp protocols`).")],
    params: Annotated[
        list[str] | None,
        typer.Argument(
            help="Protocol parameters NAME=VALUE: k=74 eps_perm=2 eps_1=0.8 (one-shot: eps=…)."
        ),
    ] = None,
    n: Annotated[
        int,
        typer.Option(
            "--n",
            help="Devices in each epoch's shuffle whose memo keys change at the same epochs as "
            "the one protected (all of them when values never change; the key is the value, or "
            "for LOLOHA, dBitFlipPM and Bloom RAPPOR its hash, bucket or cohort filter).",
        ),
    ] = 1_000_000,
    epochs: Annotated[int, typer.Option(help="Epochs τ of the collection.")] = 100,
    delta: Annotated[float, typer.Option(help="δ of the central guarantees, in (0, 1).")] = 1e-6,
    memos: Annotated[
        int, typer.Option(help="Distinct memos per device (distinct values held; 1 if fixed).")
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Privacy of PROTOCOL's collection: LDP budgets per report, per memo and per device, and
    the central (ε, δ) when each epoch's reports pass through a shuffler, per epoch and for
    the whole collection (the minimum of the routes valid for what persists per device: a hash
    seed, row, cohort or bucket map in every report links a device's epochs; docs/math.md
    §17)."""
    import longldp as ll
    from longldp.shuffle import central_summary

    if isinstance(n, bool) or n < 1:
        raise ValueError(f"'--n' must be an integer >= 1 (devices per shuffle); got {n}.")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"'--delta' must be in (0, 1); got {delta:g}.")
    if epochs < 1:
        raise ValueError(f"'--epochs' must be an integer >= 1; got {epochs}.")
    if not 1 <= memos <= epochs:
        raise ValueError(f"'--memos' must be an integer in [1, epochs = {epochs}]; got {memos}.")
    proto = ll.protocol(protocol, **parse_assignments(params or []))
    summary = central_summary(proto, n, epochs, delta, memos)
    if as_json:
        typer.echo(json.dumps(summary.as_dict(), indent=2))
        return
    con = console()
    d = f"{delta:g}"
    table = Table(
        title=f"{proto.name}: n = {n:,} devices, τ = {epochs} epochs, {memos} memo(s) per device"
        f"; persists per device: {summary.linkage}"
    )
    for col in ("scope", "ε", "δ", "what it covers"):
        table.add_column(col, justify="right" if col in ("ε", "δ") else "left")
    stateless = summary.per_memo is None
    table.add_row("per report (LDP)", _fmt(summary.per_report), "0", "one report, exact channel")
    if not stateless:
        table.add_row("per memo (LDP)", _fmt(summary.per_memo), "0", "every report of one value")
    device = "τ·ε" if stateless else "min(τ·ε1, memos·ε∞)"
    table.add_row("whole collection (LDP)", _fmt(summary.collection_local), "0", device)
    epoch_scope = "one epoch's n reports" + (", seen alone" if summary.linked_by else "")
    table.add_row("per epoch, shuffled", _fmt(summary.per_epoch), d, epoch_scope)
    if not stateless:
        table.add_row(
            "per memo, shuffled", _fmt(summary.per_memo_shuffled), d, "the n memos, shuffled"
        )
    table.add_row(
        "whole collection, shuffled", _fmt(summary.collection), d, f"route: {summary.route}"
    )
    con.print(table)
    for route in summary.routes:
        con.print(f"route {route.name}: ε = {route.epsilon:.4g} ({route.how})")
    for name, why in summary.excluded:
        con.print(f"route {name}: not valid here: {why} (docs/math.md §17.4)")
    if summary.linked_by:
        con.print(summary.linkage_words())
    con.print("The shuffled figures assume: " + "; ".join(summary.assumptions) + ".")
    con.print(
        "A server that sees which device sent a report (device credentials, report ids, "
        "addresses) is not a shuffler: toward it only the LDP rows hold (docs/math.md §17.6)."
    )


def register(app: typer.Typer) -> None:
    """Add ``privacy`` to ``app``."""
    app.command("privacy")(privacy_cmd)
