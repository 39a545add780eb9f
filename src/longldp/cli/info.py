"""``longldp protocols`` and ``longldp datasets``: what the package offers."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

import longldp as ll
from longldp.cli._common import console
from longldp.protocols import get_protocol_class


def protocols_cmd(
    k: Annotated[int, typer.Option(help="Domain size.")] = 74,
    eps_perm: Annotated[float, typer.Option(help="ε∞ (one-shot oracles: ε).")] = 2.0,
    alpha: Annotated[float, typer.Option(help="α = ε1/ε∞ for the chains, in (0, 1).")] = 0.4,
    n: Annotated[int, typer.Option(help="Users, for V* and the shuffled figures.")] = 45_222,
    epochs: Annotated[
        int, typer.Option(help="Epochs τ of a collection, for its shuffled central ε.")
    ] = 100,
    delta: Annotated[float, typer.Option(help="δ of the shuffled central figures.")] = 1e-6,
) -> None:
    """Print every protocol with its estimand, privacy parameters and accuracy at a setting.

    Each row: what persists per device, the chain's probabilities, ε of one report and of a
    memo, a one-number accuracy figure (V* of a frequency oracle, the worst-case variance of a
    mean; numeric mechanisms on [0, 1]), and the central ε when each epoch's n reports are
    shuffled (per epoch, and for a collection of τ epochs whose values never change, by the
    routes valid for what persists; docs/math.md §17, `longldp privacy` for details; "-" where
    no route is offered: planned budgets, history-dependent reports).

    A protocol that cannot reach the setting (e.g. L-OUE at a large α) shows why in its row;
    a setting that no protocol accepts (k = 1, n = 0, ...) is refused.
    """
    if k < 2:  # every categorical row needs two values (numeric rows ignore k)
        raise ValueError(f"'--k' must be an integer >= 2; got {k}.")
    if n < 1:
        raise ValueError(f"'--n' must be an integer >= 1; got {n}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"'alpha' (= ε1/ε∞) must be in (0, 1); got {alpha:g}.")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"'delta' must be in (0, 1); got {delta:g}.")
    if epochs < 1:
        raise ValueError(f"'epochs' must be an integer >= 1; got {epochs}.")
    try:
        from longldp.shuffle import central_summary
    except ModuleNotFoundError:  # the shuffled figures need SciPy (extra "shuffle")
        central_summary = None
    title = f"k = {k}, ε∞ = {eps_perm:g}, α = {alpha:g}, n = {n:,}"
    if central_summary is not None:
        title += f"; shuffled: δ = {delta:g}, τ = {epochs}"
    table = Table(title=title)
    columns = ["protocol", "kind", "estimand", "persists", "g", "p1", "q1", "p2", "q2"]
    columns += ["ε one report", "ε memo", "accuracy at n"]
    if central_summary is not None:
        columns += ["ε epoch shuffled", "ε collection shuffled"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("protocol", "kind") else "right")
    errors: list[ValueError] = []
    for info in ll.list_protocols():
        cls = get_protocol_class(info.name)
        try:
            proto = ll.protocol(info.name, **cls.setting_params(k, eps_perm, alpha * eps_perm))
            accuracy = proto.accuracy_figure(n)
            # planned budgets and history-dependent reports have no proven shuffled route
            unrouted = central_summary is None or proto.planned or cls.history is not None
            central = None if unrouted else central_summary(proto, n, epochs, delta)
        except ValueError as err:
            errors.append(err)
            table.add_row(info.name, "", "", "", *[""] * 7, f"[red]{err}[/red]")
            continue
        chain = proto.chain_probabilities
        table.add_row(
            info.name,
            "longitudinal" if info.longitudinal else "one-shot",
            str(cls.estimand),
            proto.linkage.describe(short=True),
            _hash_range(proto),
            *(["-"] * 4 if chain is None else [f"{x:.4g}" for x in chain]),
            f"{proto.single_report_epsilon():.4g}",
            f"{proto.first_round_epsilon():.4g}" if info.longitudinal else "-",
            "-" if accuracy is None else f"{accuracy[0]} {accuracy[1]:.4e}",
            *_central_cells(central, central_summary is not None),
        )
    if len(errors) == len(ll.list_protocols()):
        raise errors[0]
    con = console()
    con.print(table)
    if central_summary is None:
        con.print("Shuffled central figures need SciPy: pip install 'longldp[shuffle]'.")


def datasets_cmd() -> None:
    """List the bundled datasets with their size, attributes and provenance."""
    from longldp.data import list_datasets

    table = Table(title="Bundled datasets (see DATA.md)")
    for col in ("name", "kind", "n", "attributes (domain size)", "source"):
        table.add_column(col)
    for info in list_datasets():
        shown = ", ".join(f"{a} ({d})" for a, d in info.attributes[:8])
        if len(info.attributes) > 8:
            shown += f", … ({len(info.attributes)} in all)"
        table.add_row(info.name, info.kind, f"{info.n:,}", shown, info.provenance)
    console().print(table)


def register(app: typer.Typer) -> None:
    """Add ``protocols`` and ``datasets`` to ``app``."""
    app.command("protocols")(protocols_cmd)
    app.command("datasets")(datasets_cmd)


def _hash_range(proto: Any) -> str:
    """g, the buckets of the hash family a report names ("" when it names none)."""
    family = proto.report_kind.hash_family(proto)
    return "" if family is None else str(family.range)


def _central_cells(central: Any, shown: bool) -> list[str]:
    """The two shuffled columns of a row: none when SciPy is missing, "-" when no route is
    offered (planned budgets, history-dependent reports; docs/math.md §17)."""
    if not shown:
        return []
    if central is None:
        return ["-", "-"]
    return [f"{central.per_epoch:.4g}", f"{central.collection:.4g}"]
