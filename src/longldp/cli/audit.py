"""``longldp audit PROTOCOL``: prove a protocol's privacy claims from outside (docs/audit.md)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer
from rich.table import Table

from longldp.cli._common import console

CONTROLS = ("none", "stateless", "misencoded")


def _parse_params(items: list[str]) -> dict[str, Any]:
    """``name=value`` pairs; values parsed as int, float, bool or None when they look like one."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"'--param' must be NAME=VALUE; got {item!r}.")
        name, raw = item.split("=", 1)
        value: Any = raw
        low = raw.lower()
        if low in ("true", "false"):
            value = low == "true"
        elif low == "none":
            value = None
        else:
            for cast in (int, float):
                try:
                    value = cast(raw)
                    break
                except ValueError:
                    continue
        out[name.strip().replace("-", "_")] = value
    return out


def _taus(text: str) -> list[int]:
    try:
        taus = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"'--taus' must be comma-separated integers; got {text!r}.") from None
    if any(t < 1 for t in taus):
        raise ValueError(f"'--taus' must be integers >= 1; got {text!r}.")
    return taus


def audit_cmd(
    protocol: Annotated[str, typer.Argument(help="Protocol name (see `longldp protocols`).")],
    k: Annotated[int, typer.Option(help="Domain size (small: the exact audit enumerates).")] = 8,
    eps: Annotated[float | None, typer.Option(help="ε of a one-shot oracle.")] = None,
    eps_perm: Annotated[float | None, typer.Option(help="ε∞ of a chain.")] = None,
    eps_1: Annotated[float | None, typer.Option(help="ε1 of a chain.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="Other protocol parameter NAME=VALUE (repeatable): calibration=paper, "
            "d=2, h=2, m=4, f=0.5, p=0.5, q=0.75, …"
        ),
    ] = None,
    trials: Annotated[
        int, typer.Option(help="Trials per world of the one-report game.")
    ] = 1_000_000,
    taus: Annotated[str, typer.Option(help="Lifetime lengths τ, comma-separated.")] = "10,100",
    lifetime_trials: Annotated[int, typer.Option(help="Trials per world and τ.")] = 20_000,
    pattern: Annotated[
        str, typer.Option(help="Lifetime pattern: one-value, alternating or both.")
    ] = "one-value",
    attack: Annotated[
        str, typer.Option(help="lr (likelihood ratio) or majority (memo vote).")
    ] = "lr",
    alpha: Annotated[float, typer.Option(help="1 − confidence of the bounds.")] = 0.01,
    claim_eps_1: Annotated[
        float | None, typer.Option(help="Audit against this ε1 instead of the protocol's own.")
    ] = None,
    claim_eps_perm: Annotated[
        float | None, typer.Option(help="Audit against this ε∞ instead of the protocol's own.")
    ] = None,
    control: Annotated[
        str,
        typer.Option(
            help="Positive control: none, stateless (memo redrawn every report) or "
            "misencoded (unary true bit 1 w.p. p + (1 − p)q)."
        ),
    ] = "none",
    upper: Annotated[
        bool, typer.Option(help="Also bound ε from above from the estimated channel.")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Seed (default: fresh entropy).")] = None,
    secure: Annotated[
        bool, typer.Option(help="Clients draw from os.urandom, as devices do.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Audit PROTOCOL: exact ε from its enumerated channel, and black-box lower bounds on ε
    from the distinguishing game (one report, and τ reports of one client).

    Exit code 1 when a claim is refuted (an exact ε or a lower bound above its claim).
    """
    import numpy as np

    import longldp as ll
    from longldp import audit

    if control not in CONTROLS:
        raise ValueError(f"'--control' must be one of {', '.join(CONTROLS)}; got {control!r}.")
    patterns = ["one-value", "alternating"] if pattern == "both" else [pattern]
    params: dict[str, Any] = {"k": k, **_parse_params(param or [])}
    for name, value in (("eps", eps), ("eps_perm", eps_perm), ("eps_1", eps_1)):
        if value is not None:
            params[name] = value
    fields = dataclasses.fields(ll.get_protocol_class(protocol))
    if not any(f.name == "k" and f.init for f in fields):
        del params["k"]  # a protocol without k (RAPPOR-boolean: one bit)
    proto = ll.protocol(protocol, **params)
    if control == "misencoded":
        proto = audit.misencoded_unary(proto)
    rng: Any = "secure" if secure else np.random.default_rng(seed)
    report = audit.audit_protocol(
        proto,
        trials=trials,
        taus=_taus(taus),
        lifetime_trials=lifetime_trials,
        patterns=patterns,
        attack=attack,
        alpha=alpha,
        eps_1=claim_eps_1,
        eps_perm=claim_eps_perm,
        clients="stateless" if control == "stateless" else "population",
        rng=rng,
    )
    bounds = None
    if upper:
        bounds = audit.channel_bounds(
            proto, max(10, trials // proto.k), alpha=alpha, claim=report.eps_1, rng=rng
        )
    if as_json:
        typer.echo(json.dumps(_as_dict(report, bounds), indent=2))
    else:
        _print(report, bounds)
        if control == "misencoded":
            console().print(
                "The exact column audits the declared parameters; the misencoded client breaks "
                "them in its code, which only the black-box game sees."
            )
    if report.violations:
        raise typer.Exit(1)


def _as_dict(report: Any, bounds: Any) -> dict:
    from dataclasses import asdict

    out = asdict(report)
    out["violations"] = report.violations
    out["loose"] = report.loose
    if bounds is not None:
        out["upper"] = asdict(bounds)
    return out


def _print(report: Any, bounds: Any) -> None:
    one = report.one_report
    title = f"{report.protocol}: claimed ε1 = {report.eps_1:.4g}"
    if report.eps_perm is not None:
        title += f", ε∞ = {report.eps_perm:.4g}"
    if report.exact_single is None:
        title += "; channel too large to enumerate"
    else:
        title += f"; exact one report {report.exact_single:.4g}"
        if report.eps_perm is not None:
            title += f", round 1 {report.exact_first_round:.4g}"
    table = Table(title=title)
    for col in ("game", "τ", "claim", "exact", "lower bound", "estimate", "TP / FP", "trials"):
        table.add_column(col, justify="left" if col == "game" else "right")
    rows = [("one report", one, report.exact_single)]
    rows += [(f"lifetime, {r.pattern}", r.audit, r.exact) for r in report.lifetime]
    for label, res, exact in rows:
        flag = " [red]VIOLATION[/red]" if res.violates else ""
        table.add_row(
            label,
            str(res.tau),
            f"{res.claim:.4g}",
            "-" if exact is None else f"{exact:.4g}",
            f"{res.lower:.4g}{flag}",
            f"{res.estimate:.4g}",
            f"{res.tp:,} / {res.fp:,}",
            f"{res.trials:,}",
        )
    out = console()
    out.print(table)
    out.print(
        f"Lower bounds hold with confidence {1 - one.alpha:.2%} (Clopper–Pearson, attack "
        f"{one.attack}, clients {one.clients})."
    )
    if bounds is not None:
        out.print(
            f"Upper bound from the estimated channel ({bounds.trials:,} trials per input): "
            f"ε ≤ {bounds.upper:.4g}" + (" < claim: the claim is loose." if bounds.loose else ".")
        )
    if report.loose:
        out.print(
            f"The exact channel gives {report.exact_single:.4g} < the claimed ε1 "
            f"{report.eps_1:.4g}: the protocol is more private than it claims (utility is lost)."
        )
    if report.violations:
        for line in report.violations:
            out.print(f"[red]refuted:[/red] {line}")
    else:
        out.print("No claim refuted.")


def register(app: typer.Typer) -> None:
    app.command("audit")(audit_cmd)
