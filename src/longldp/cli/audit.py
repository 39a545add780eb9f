"""``longldp audit PROTOCOL``: prove a protocol's privacy claims from outside (docs/audit.md)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer
from rich.table import Table

from longldp.cli._common import check_memory, client_memory, console, parse_assignments

CONTROLS = ("none", "stateless", "misencoded")

# Help panels of `longldp audit --help` (one screen each at 80 columns).
_P = "Protocol"
_G = "Games and claims"
_B = "Black-box audits (--exec, --blackbox)"


#: Parameters with an option of their own (``--k``, ``--eps``, …), refused in ``--param``.
OWN_OPTIONS = ("k", "eps", "eps_perm", "eps_1")


def _parse_params(items: list[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` words (the one parser, ``_common.parse_assignments``)."""
    return parse_assignments(items, "'--param'", reserved=OWN_OPTIONS)


def _taus(text: str) -> list[int]:
    try:
        taus = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"'--taus' must be comma-separated integers; got {text!r}.") from None
    if any(t < 1 for t in taus):
        raise ValueError(f"'--taus' must be integers >= 1; got {text!r}.")
    return taus


def audit_cmd(
    protocol: Annotated[
        str | None,
        typer.Argument(help="Protocol name (see `longldp protocols`); omit with --exec."),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            help="Domain size (small: the exact audit enumerates). Default 8; required with "
            "--exec.",
            rich_help_panel=_P,
        ),
    ] = None,
    eps: Annotated[
        float | None, typer.Option(help="ε of a one-shot oracle.", rich_help_panel=_P)
    ] = None,
    eps_perm: Annotated[float | None, typer.Option(help="ε∞ of a chain.", rich_help_panel=_P)] = (
        None
    ),
    eps_1: Annotated[float | None, typer.Option(help="ε1 of a chain.", rich_help_panel=_P)] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=VALUE",
            help="Another protocol parameter, repeatable: calibration=paper, d=2, h=2, m=4, "
            "f=0.5, p=0.5, q=0.75, …",
            rich_help_panel=_P,
        ),
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option(
            help="Trials per input of the one-report game. Default 1,000,000 (100,000 with "
            "--exec or --blackbox).",
            rich_help_panel=_G,
        ),
    ] = None,
    taus: Annotated[
        str, typer.Option(help="Lifetime lengths τ, comma-separated.", rich_help_panel=_G)
    ] = "10,100",
    lifetime_trials: Annotated[
        int, typer.Option(help="Trials per input and τ.", rich_help_panel=_G)
    ] = 20_000,
    pattern: Annotated[
        str, typer.Option(help="one-value, alternating or both.", rich_help_panel=_G)
    ] = "one-value",
    attack: Annotated[
        str,
        typer.Option(help="lr (likelihood ratio) or majority (memo vote).", rich_help_panel=_G),
    ] = "lr",
    alpha: Annotated[
        float | None,
        typer.Option(
            help="1 − confidence of the bounds. Default 0.01 (0.05 black-box).",
            rich_help_panel=_G,
        ),
    ] = None,
    claim_eps_1: Annotated[
        float | None,
        typer.Option(help="Audit against this ε1 instead of the protocol's.", rich_help_panel=_G),
    ] = None,
    claim_eps_perm: Annotated[
        float | None,
        typer.Option(help="Audit against this ε∞ instead of the protocol's.", rich_help_panel=_G),
    ] = None,
    control: Annotated[
        str,
        typer.Option(
            help="Positive control: none, stateless (memo redrawn at every report) or "
            "misencoded (unary true bit 1 w.p. p + (1 − p)q).",
            rich_help_panel=_G,
        ),
    ] = "none",
    upper: Annotated[
        bool,
        typer.Option(
            "--upper", help="Also bound ε from above (estimated channel).", rich_help_panel=_G
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Seed (default: fresh entropy).")] = None,
    secure: Annotated[
        bool, typer.Option("--secure", help="Clients draw from os.urandom, as devices do.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    exec_command: Annotated[
        str | None,
        typer.Option(
            "--exec",
            metavar="CMD",
            help="Audit an external client: CMD reads '<client> <value>' lines and writes one "
            "hex report per line (docs/audit.md §9). Needs --k and --claim.",
            rich_help_panel=_B,
        ),
    ] = None,
    claim: Annotated[
        float | None,
        typer.Option(help="--exec: the ε claimed (for τ reports with --tau).", rich_help_panel=_B),
    ] = None,
    tau: Annotated[
        int,
        typer.Option(help="--exec: reports per client (lifetime when > 1).", rich_help_panel=_B),
    ] = 1,
    inputs: Annotated[
        str | None,
        typer.Option(
            help="Inputs to compare, comma-separated. Default: all when k ≤ 16.",
            rich_help_panel=_B,
        ),
    ] = None,
    blackbox: Annotated[
        bool,
        typer.Option(
            "--blackbox",
            help="Audit PROTOCOL's own client as a black box.",
            rich_help_panel=_B,
        ),
    ] = False,
    no_classifier: Annotated[
        bool,
        typer.Option(
            "--no-classifier",
            help="Leave out the classifier tests (scikit-learn).",
            rich_help_panel=_B,
        ),
    ] = False,
) -> None:
    """Audit PROTOCOL: exact ε from its enumerated channel, and black-box lower bounds on ε
    from the distinguishing game (one report, and τ reports of one client). With --exec, audit
    any client program as a black box against --claim; with --blackbox, audit PROTOCOL's own
    client that way.

    Exit code 1 when a claim is refuted (an exact ε or a lower bound above its claim).
    """
    import numpy as np

    from longldp import audit

    if seed is not None and seed < 0:
        raise ValueError(f"'--seed' must be an integer >= 0; got {seed}.")
    for option, value in (
        ("--claim-eps-1", claim_eps_1),
        ("--claim-eps-perm", claim_eps_perm),
        ("--claim", claim),
    ):
        if value is not None and not 0 < value < float("inf"):
            raise ValueError(f"'{option}' must be a finite number > 0; got {value:g}.")
    if exec_command is not None or blackbox:
        _blackbox(
            protocol,
            exec_command,
            k,
            eps,
            eps_perm,
            eps_1,
            param,
            trials,
            taus,
            pattern,
            alpha,
            claim,
            tau,
            inputs,
            not no_classifier,
            seed,
            as_json,
        )
        return
    if protocol is None:
        raise ValueError("audit: give a PROTOCOL, or --exec CMD with --k and --claim.")
    trials = 1_000_000 if trials is None else trials
    alpha = 0.01 if alpha is None else alpha
    if control not in CONTROLS:
        raise ValueError(f"'--control' must be one of {', '.join(CONTROLS)}; got {control!r}.")
    patterns = ["one-value", "alternating"] if pattern == "both" else [pattern]
    proto = _protocol(protocol, k, eps, eps_perm, eps_1, param)
    audit.game.require_game(proto)  # numbers: refused in one line, --blackbox suggested
    if control == "misencoded":
        proto = audit.misencoded_unary(proto)
    rng: Any = "secure" if secure else np.random.default_rng(seed)
    tau_list = _taus(taus)
    _check_audit_memory(proto, trials, tau_list, lifetime_trials, len(patterns) > 1)
    report = audit.audit_protocol(
        proto,
        trials=trials,
        taus=tau_list,
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


def _protocol(
    protocol: str,
    k: int | None,
    eps: float | None,
    eps_perm: float | None,
    eps_1: float | None,
    param: list[str] | None,
) -> Any:
    """The protocol the options describe: k (default 8) unless the class takes none
    (RAPPOR-boolean: one bit), the budget options, then the NAME=VALUE parameters."""
    import longldp as ll

    params: dict[str, Any] = {"k": 8 if k is None else k, **_parse_params(param or [])}
    for name, value in (("eps", eps), ("eps_perm", eps_perm), ("eps_1", eps_1)):
        if value is not None:
            params[name] = value
    fields = dataclasses.fields(ll.get_protocol_class(protocol))
    if not any(f.name == "k" and f.init for f in fields):
        del params["k"]  # a protocol without k (RAPPOR-boolean: one bit)
    return ll.protocol(protocol, **params)


def _check_audit_memory(
    proto: Any, trials: int, taus: list[int], lifetime_trials: int, alternating: bool
) -> None:
    """Refuse up front a game that would not fit in memory (`longldp.cli._common.check_memory`).

    What a game holds at once (`longldp.audit.game`): two scores per client and world with
    their sorted copies (32 bytes per trial); for one chunk of clients, their memos and reports
    (measured per client) and the per-client tallies (4 bytes per report symbol, one tally per
    pair of values, two for the alternating pattern); the τ values of the sequences.
    """
    from longldp.audit.game import CHUNK

    width = proto.report_kind.width(proto)  # what the game tallies per report
    fixed, per_client = client_memory(proto)
    games = [(trials, 1, "--trials"), *((lifetime_trials, t, "--taus") for t in taus)]
    for clients, tau, option in games:
        chunk = min(CHUNK, clients)
        tallies = (2 if alternating and tau > 1 else 1) * 4 * width
        need = 32 * clients + fixed + chunk * (per_client + tallies + proto.k) + 100 * tau
        check_memory(
            need,
            f"the audit game with {clients:,} clients per world, τ = {tau:,} and k = {proto.k:,}",
            f"lower {option}"
            + (" or --k." if option == "--trials" else ", --lifetime-trials or --k."),
        )


def _ints(text: str | None, name: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"'{name}' must be comma-separated integers; got {text!r}.") from None


def _blackbox(
    protocol: str | None,
    command: str | None,
    k: int | None,
    eps: float | None,
    eps_perm: float | None,
    eps_1: float | None,
    param: list[str] | None,
    trials: int | None,
    taus: str,
    pattern: str,
    alpha: float | None,
    claim: float | None,
    tau: int,
    inputs: str | None,
    classifier: bool,
    seed: int | None,
    as_json: bool,
) -> None:
    """Black-box audits through audit_randomizer / audit_lifetime (docs/audit.md §7–§9)."""
    import numpy as np

    from longldp.audit import blackbox as bb
    from longldp.audit import claimed_epsilon, exec_client, randomizers

    confidence = 1.0 - (0.05 if alpha is None else alpha)
    trials = 100_000 if trials is None else trials
    chosen = _ints(inputs, "--inputs")
    gen = np.random.default_rng(seed)
    common = {"confidence": confidence, "classifier": classifier, "rng": gen}
    results = []
    if command is not None:
        if protocol is not None:
            raise ValueError("audit: give either a PROTOCOL or --exec, not both.")
        if k is None:
            raise ValueError(
                "audit --exec: '--k' (the client's domain size: inputs 0 … k − 1) is required."
            )
        if claim is None:
            raise ValueError("audit --exec: '--claim' (the ε the client claims) is required.")
        if tau < 1:
            raise ValueError(f"audit --exec: '--tau' must be an integer >= 1; got {tau}.")
        if pattern not in ("one-value", "alternating"):
            raise ValueError(
                f"audit --exec: '--pattern' must be one-value or alternating; got {pattern!r}."
            )
        if tau == 1:
            fn = exec_client.exec_randomizer(command, k)
            results.append(
                bb.audit_randomizer(fn, k=k, claim=claim, trials=trials, inputs=chosen, **common)
            )
        else:
            run = exec_client.exec_lifetime(command, k)
            results.append(
                bb.audit_lifetime(
                    run,
                    k=k,
                    claim=claim,
                    tau=tau,
                    trials=trials,
                    pattern=pattern,
                    inputs=chosen,
                    **common,
                )
            )
        label = command
    else:
        if protocol is None:
            raise ValueError("audit --blackbox: give the PROTOCOL to audit.")
        proto = _protocol(protocol, k, eps, eps_perm, eps_1, param)
        domain = randomizers.audit_domain(proto)
        one = proto.single_report_epsilon() if claim is None else claim
        results.append(
            bb.audit_randomizer(
                randomizers.protocol_randomizer(proto),
                k=domain,
                claim=one,
                trials=trials,
                inputs=chosen,
                **common,
            )
        )
        patterns = ["one-value", "alternating"] if pattern == "both" else [pattern]
        for pat in patterns:
            for t in _taus(taus):
                if t < 2:
                    continue
                results.append(
                    bb.audit_lifetime(
                        randomizers.protocol_lifetime(proto),
                        k=domain,
                        claim=claimed_epsilon(proto, t, pat),
                        tau=t,
                        trials=max(20, trials // 5),
                        pattern=pat,
                        **common,
                    )
                )
        label = proto.name
    if as_json:
        from dataclasses import asdict

        out = [asdict(r) | {"violates": r.violates} for r in results]
        typer.echo(json.dumps({"randomizer": label, "audits": out}, indent=2, default=str))
    else:
        _print_blackbox(label, results)
    if any(r.violates for r in results):
        raise typer.Exit(1)


def _print_blackbox(label: str, results: list) -> None:
    table = Table(title=f"Black-box audit of {label}")
    for col in ("audit", "τ", "claim", "lower bound", "inputs", "test", "TP / FP", "trials"):
        table.add_column(col, justify="left" if col in ("audit", "test") else "right")
    for res in results:
        flag = " [red]VIOLATION[/red]" if res.violates else ""
        kind = "one report" if res.tau == 1 else f"lifetime, {res.pattern}"
        table.add_row(
            kind,
            str(res.tau),
            f"{res.claim:.4g}",
            f"{res.lower:.4g}{flag}",
            f"{res.pair[0]} vs {res.pair[1]}",
            f"{res.family}: {res.test}",
            f"{res.tp:,} / {res.fp:,} of {res.n0:,}",
            f"{res.trials:,}",
        )
    out = console()
    out.print(table)
    first = results[0]
    out.print(
        f"Each lower bound holds with confidence {first.confidence:.0%}: tests chosen on a "
        f"search half, counted on the held-out half, {first.tests_evaluated} held-out tests "
        "(Bonferroni)."
    )
    refuted = [r for r in results if r.violates]
    for r in refuted:
        out.print(
            f"[red]refuted:[/red] τ = {r.tau}: lower bound {r.lower:.4g} > claim {r.claim:.4g}"
        )
    if not refuted:
        out.print("No claim refuted.")


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
