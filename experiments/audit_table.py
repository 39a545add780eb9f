"""The audit table, the lifetime curve, the ASR table and plot, and the re-identification
table of docs/guide/privacy-audit.md (docs/audit.md §5, §11, §12).

- ``table``: every registered protocol (the registry iterated; L-GRR's published calibration
  after L-GRR) at two settings, each audited the way its traits allow (:func:`audit_plan`):
  the claimed ε1 and ε∞, the exact ε of one report and of round 1 from the enumerated channel,
  the one-report lower bound and the lifetime lower bounds at τ ∈ {1, 10, 100, 1000} (one
  client holding one value), each beside its claim and the exact ε of τ reports. The
  likelihood game where it applies (``game_refusal``); the black-box audit of the wire reports
  where the game refuses a report kind (a continuous report, binned through its bytes; an
  enumerated report that is memoized); a line under the table, with the audit's own reason, for
  a protocol no per-value audit describes (a history-dependent mechanism) or that the setting
  is outside of (the constructor's reason). A planned mechanism is audited as its devices run
  it, under its example plan.
- ``curve``: the lifetime bound against τ for a few protocols and the stateless control;
- ``asr``: the attacker success rate of every registered protocol (the registry iterated) at
  τ = 1, 10, 100 at the same two settings, exact or simulated (``asr.md``, ``asr.json``; a
  line for a protocol the ASR's client model refuses, ``asr_refusal``), and ASR against τ for
  memoized and stateless clients (``asr.png``);
- ``reid``: top-1 and top-10 re-identification rates on Adult (the whole bundled population as
  the attacker's background knowledge) for SMP, SPL and ALLOMFREE after 1, 5 and 20 collections
  (``reidentify.md``, ``reidentify.json``).

    python experiments/audit_table.py [--part table|curve|asr|reid|all]
        [--out experiments/results/audit]

A newly registered protocol needs no edit here: re-run ``--part table`` and ``--part asr``
(``tests/test_audit_tables.py`` fails while the guide's tables leave a registered protocol
out). Seeds are fixed (one stream per row label, setting and τ). Times on two shared cores are
in docs/guide/privacy-audit.md; ``reid`` takes about ten minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

import longldp as ll
from longldp.audit import (
    audit_game,
    audit_lifetime,
    audit_protocol,
    audit_randomizer,
    claimed_epsilon,
    exact_epsilons,
    exact_lifetime_epsilon,
)
from longldp.audit.asr import asr_refusal, attacker_success, memo_asr
from longldp.audit.game import game_refusal
from longldp.audit.randomizers import protocol_lifetime, protocol_randomizer

#: (label, ε∞, ε1, RAPPOR's parameters) of the two settings; k = 8 throughout.
SETTINGS = (
    ("A", 2.0, 0.8, {"h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75}),
    ("B", 1.0, 0.5, {"h": 1, "m": 4, "f": 0.25, "p": 0.25, "q": 0.75}),
)
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "audit"
#: The page that shows the tables, between ``<!-- BEGIN generated: NAME -->`` and
#: ``<!-- END generated: NAME -->`` markers (``audit table``, ``asr table``).
GUIDE = ROOT / "docs" / "guide" / "privacy-audit.md"
K = 8
TAUS = (1, 10, 100, 1000)
CURVE_TAUS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
#: Buckets a dBitFlipPM-type report samples (the kind of sampled buckets' ``d``).
SAMPLED_BUCKETS = 2
#: Confidence of every bound (the game's α = 0.01).
CONFIDENCE = 0.99


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered protocol at one setting: its row label, the protocol (None when the
    setting is outside its parameters), the mechanism its devices run (a planned one: the
    round of its example plan), how it is audited and, when it is not, why."""

    label: str
    proto: Any
    audited: Any = None
    audit: str = "refused"
    reason: str | None = None


def setting_params(cls: type, eps_perm: float, eps_1: float, rappor: dict) -> dict[str, Any]:
    """A registered class's constructor parameters at one setting, from its traits: the
    class's own listing setting (``setting_params``: chains at ε∞ and ε1, one-shot mechanisms
    at ε = ε1, a mechanism's single budget of its own at ε∞, other required parameters at test
    values) with its input domain's audit parameters (``Domain.audit_params``: the listing's,
    unless a domain's listing is too large to audit), the setting's RAPPOR parameters for a
    class whose budget is RAPPOR's (f, p, q), and ``SAMPLED_BUCKETS`` for a report that
    samples buckets."""
    params = cls.setting_params(K, eps_perm, eps_1, eps_1)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    params |= {n: v for n, v in cls.input_domain.audit_params(K).items() if n in fields}
    if set(cls.budget_params) <= set(rappor):
        params |= {name: v for name, v in rappor.items() if name in fields}
    if cls.report_kind == "sampled-bits":
        params["d"] = SAMPLED_BUCKETS
    return params


def protocols(
    eps_perm: float, eps_1: float, rappor: dict, extras: bool = True
) -> list[tuple[str, Any]]:
    """Every registered protocol at one setting, in registry order, as (label, protocol or the
    constructor's reason when the setting is outside its parameters), and (``extras``) L-GRR's
    published calibration after L-GRR."""
    out: list[tuple[str, Any]] = []
    for info in ll.list_protocols():
        cls = ll.get_protocol_class(info.name)
        try:
            proto = ll.protocol(info.name, **setting_params(cls, eps_perm, eps_1, rappor))
        except ValueError as err:  # e.g. ε1/ε∞ beyond the chain's largest α
            out.append((info.name, str(err)))
            continue
        out.append((proto.name, proto))
        if extras and info.name == "L-GRR":
            paper = ll.protocol("L-GRR", k=K, eps_perm=eps_perm, eps_1=eps_1, calibration="paper")
            out.append(("L-GRR (paper)", paper))
    return out


def device_mechanism(proto: Any) -> tuple[Any, str | None]:
    """(the mechanism a device runs, the reason when there is no single one).

    A planned mechanism's devices report under the server's plan of each epoch: the table
    audits the mechanism of its example plan (``for_round(example_plan(t))``, a plan valid at
    every epoch), provided that plan is the same at every epoch the table plays (else a
    client's reports follow no one law). Everything else is its own mechanism."""
    if not proto.planned or proto.history is not None:
        return proto, None
    plans = [proto.example_plan(t) for t in range(max(TAUS))]
    if any(plan != plans[0] for plan in plans):
        return proto, f"{proto.name}: its example plan changes between epochs (no one law)."
    return proto.for_round(plans[0]), None


def audit_plan(label: str, proto: Any) -> Entry:
    """How the table audits one protocol, read from the traits the audits refuse by: the
    mechanism its devices run (:func:`device_mechanism`), by the likelihood game where it
    applies (``game_refusal`` is None), otherwise by the black-box audit of the wire reports,
    unless the reason is the client's own history (the per-value client of both audits does not
    describe it) or no single mechanism."""
    if isinstance(proto, str):
        return Entry(label, None, reason=proto)
    audited, why = device_mechanism(proto)
    if why is not None:
        return Entry(label, proto, reason=why)
    if audited is not proto:
        label = f"{label} (example plan)"
    why = game_refusal(audited)
    if why is None:
        return Entry(label, proto, audited, "game")
    if audited.history is None:
        return Entry(label, proto, audited, "black box", why)
    return Entry(label, proto, reason=why)


def entries(eps_perm: float, eps_1: float, rappor: dict) -> list[Entry]:
    return [audit_plan(label, proto) for label, proto in protocols(eps_perm, eps_1, rappor)]


def with_block(page: str, name: str, text: str) -> str:
    """``page`` with its generated block ``name`` replaced by ``text``."""
    begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
    if page.count(begin) != 1 or page.count(end) != 1:
        raise ValueError(f"the page must hold the markers {begin!r} and {end!r} once each.")
    head, rest = page.split(begin)
    return head + begin + "\n\n" + text.strip("\n") + "\n\n" + end + rest.split(end)[1]


def show(out: Path, name: str, block: str) -> None:
    """Write the results file ``name`` under ``out``, and into the guide's ``block`` when
    ``out`` is the committed results folder."""
    text = (out / name).read_text(encoding="utf-8")
    if out.resolve() == RESULTS.resolve():
        GUIDE.write_text(with_block(GUIDE.read_text(encoding="utf-8"), block, text))
        print(f"updated the {block} of {GUIDE.relative_to(ROOT)}")


def _seed(label: str, *extra: int) -> np.random.Generator:
    """A row's own random stream, named by its label (not its place in the registry), so that
    registering a protocol does not move the other rows' numbers."""
    return np.random.default_rng([zlib.crc32(label.encode()), *extra])


def lifetime_claim(entry: Entry, tau: int, eps_1: float) -> float:
    """What τ reports of one client holding one value claim: min(τ·ε1, ε∞) for a memoizing
    chain and τ·ε1 for fresh reports (:func:`claimed_epsilon`, ε1 = the audited claim of one
    report); a planned mechanism, what its accounting allows over τ epochs whatever the
    trajectory (per window: ⌈τ/w⌉·ε_w, ``Accounting.worst_case``)."""
    if entry.audited is not entry.proto:
        return entry.proto.accounting.worst_case(tau)
    return claimed_epsilon(entry.proto, tau, eps_1=eps_1)


def _exact_lifetime(proto: Any, tau: int) -> float | None:
    try:
        return exact_lifetime_epsilon(proto, tau)
    except ValueError:  # the exact lifetime enumerates what it can (docs/math.md §13.2)
        return None


def _exact(proto: Any) -> Any:
    """The exact ε of one report and of round 1, when the report kind has an exact channel
    and it can be listed at these parameters (as :func:`audit_protocol` decides)."""
    if not proto.report_kind.exact:
        return None
    try:
        return exact_epsilons(proto)
    except ValueError:  # more outputs than the exact audit lists
        return None


def audit_row(entry: Entry, trials: int, lifetime_trials: dict[int, int]) -> dict:
    """One row: exact ε, the one-report bound and the lifetime bounds of ``entry.audited``."""
    proto, name = entry.audited, entry.label
    life = []
    if entry.audit == "game":
        claim_1 = proto.eps_1 if name == "L-GRR (paper)" else None  # the published claim
        one = audit_protocol(proto, trials=trials, taus=(), eps_1=claim_1, rng=_seed(name, 1))
        eps_1, eps_perm, lower_1 = one.eps_1, one.eps_perm, one.one_report.lower
        exact_single, exact_first, loose = one.exact_single, one.exact_first_round, one.loose
        violations = one.violations
        for tau in TAUS:
            claim = lifetime_claim(entry, tau, eps_1)
            res = audit_game(
                proto, lifetime_trials[tau], tau=tau, claim=claim, rng=_seed(name, tau)
            )
            life.append((tau, claim, res.lower, res.trials, res.violates))
    else:  # black box: the wire reports of the audited codes 0 and the last
        ex = _exact(proto)
        eps_1 = proto.single_report_epsilon()
        eps_perm = proto.first_round_epsilon() if proto.longitudinal else None
        exact_single = None if ex is None else ex.single
        exact_first = None if ex is None else ex.first_round
        k = proto.domain.audit_size or K  # a domain with no listed inputs: as_inputs(0..K−1)
        pair = (0, k - 1)
        common = {"confidence": CONFIDENCE, "classifier": False, "inputs": pair}
        res = audit_randomizer(
            protocol_randomizer(proto),
            k=k,
            claim=eps_1,
            trials=trials,
            rng=_seed(name, 1),
            **common,
        )
        lower_1, violations = res.lower, [res.summary()] if res.violates else []
        loose = exact_single is not None and exact_single < eps_1 - 1e-6
        for tau in TAUS:
            claim = lifetime_claim(entry, tau, eps_1)
            got = audit_lifetime(
                protocol_lifetime(proto),
                k=k,
                claim=claim,
                tau=tau,
                trials=lifetime_trials[tau],
                rng=_seed(name, tau),
                **common,
            )
            life.append((tau, claim, got.lower, lifetime_trials[tau], got.violates))
            if got.violates:
                violations.append(got.summary())
    return {
        "protocol": name,
        "audit": entry.audit,
        "params": repr(proto),
        "eps_1": eps_1,
        "eps_perm": eps_perm,
        "exact_single": exact_single,
        "exact_first_round": exact_first,
        "one_report_lower": lower_1,
        "one_report_trials": trials,
        "loose": loose,
        "violations": violations,
        "lifetime": [
            {
                "tau": tau,
                "claim": claim,
                "exact": _exact_lifetime(proto, tau),
                "lower": lower,
                "trials": n,
                "violates": bad,
            }
            for tau, claim, lower, n, bad in life
        ],
    }


def refusal_row(entry: Entry) -> dict:
    """A protocol the table does not audit: the reason, and the exact ε of one report against
    its claim where its kind has an exact channel (history-dependent mechanisms do)."""
    row: dict[str, Any] = {"protocol": entry.label, "audit": "refused", "reason": entry.reason}
    if entry.proto is not None and entry.proto.report_kind.exact:
        row["eps_1"] = entry.proto.single_report_epsilon()
        row["exact_single"] = exact_epsilons(entry.proto).single
    return row


def table(out: Path, trials: int, lifetime_trials: dict[int, int], bb: dict[str, Any]) -> None:
    """Every registered protocol at both settings (``bb``: the black-box rows' trials)."""
    rows = []
    for label, eps_perm, eps_1, rappor in SETTINGS:
        for entry in entries(eps_perm, eps_1, rappor):
            start = time.perf_counter()
            if entry.audit == "refused":
                row = refusal_row(entry)
            elif entry.audit == "game":
                row = audit_row(entry, trials, lifetime_trials)
            else:
                row = audit_row(entry, bb["trials"], bb["lifetime"])
            rows.append({"setting": label, **row, "seconds": time.perf_counter() - start})
            print(f"{label} {entry.label}: {rows[-1]['seconds']:.1f} s", flush=True)
            (out / "table.json").write_text(json.dumps(rows, indent=2))
    (out / "table.md").write_text(render(rows))
    show(out, "table.md", "audit table")


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def _trials(n: int) -> str:
    return f"{n:,}" if n < 1_000_000 else f"10{'⁰¹²³⁴⁵⁶⁷⁸⁹'[len(str(n)) - 1]}"


def trial_counts(rows: list[dict], audit: str) -> str:
    """The trials of the ``audit`` rows, read from the rows: one report, then a lifetime (and
    the τ at which fewer were played)."""
    got = [r for r in rows if r["audit"] == audit]
    if not got:
        return ""
    life = {c["tau"]: c["trials"] for c in got[0]["lifetime"]}
    fewer = [f"{n:,} at τ = {t}" for t, n in life.items() if n != life[TAUS[0]]]
    return (
        f"{_trials(got[0]['one_report_trials'])} trials per world for one report, "
        f"{life[TAUS[0]]:,} for a lifetime" + (f" ({', '.join(fewer)})" if fewer else "")
    )


def registered_line() -> str:
    """The first line of a generated block: how many protocols the registry holds."""
    n = len(ll.list_protocols())
    return f"{n} registered protocols, each in a row or a line under its table at both settings."


def render(rows: list[dict]) -> str:
    """The Markdown tables, one per setting, each followed by its refusal lines (everything,
    trial counts included, read from ``rows``, so ``--part render`` rewrites them from the
    committed table.json)."""
    lines = [registered_line(), ""]
    counts = "; ".join(
        f"{how}: {trial_counts(rows, audit)}"
        for audit, how in (("game", "game"), ("black box", "black box (binned)"))
        if trial_counts(rows, audit)
    )
    for label, eps_perm, eps_1, rappor in SETTINGS:
        lines += [
            f"Setting {label}: k = {K}, chains at ε∞ = {eps_perm:g}, ε1 = {eps_1:g}; one-shot "
            f"mechanisms at ε = {eps_1:g}; a mechanism's single budget of its own (ε_w of a "
            f"window, ε∞ of dBitFlipPM) at {eps_perm:g}; dBitFlipPM d = {SAMPLED_BUCKETS}; "
            "RAPPOR "
            + ", ".join(f"{k} = {v:g}" for k, v in rappor.items())
            + "; numeric mechanisms over [0, 1] (inputs: its ends). Each lifetime cell: audited "
            f"lower bound / claim (exact ε of τ reports). {counts}.",
            "",
            "| protocol | audit | claimed ε1 | claimed ε∞ | exact ε1 | exact ε∞ | one-report "
            "bound | " + " | ".join(f"τ = {t}" for t in TAUS) + " |",
            "|---|---|---|---|---|---|---|" + "---|" * len(TAUS),
        ]
        refused = []
        for r in rows:
            if r["setting"] != label:
                continue
            if r["audit"] == "refused":
                refused.append(r)
                continue
            cells = [
                f"{_f(c['lower'])} / {_f(c['claim'])} ({_f(c['exact'])})" for c in r["lifetime"]
            ]
            flag = " (loose)" if r["loose"] else ""
            how = "game" if r["audit"] == "game" else "black box (binned)"
            lines.append(
                f"| {r['protocol']} | {how} | {_f(r['eps_1'])} | {_f(r['eps_perm'])} | "
                f"{_f(r['exact_single'])}{flag} | "
                f"{_f(r['exact_first_round'] if r['eps_perm'] is not None else None)} | "
                f"{_f(r['one_report_lower'])} | " + " | ".join(cells) + " |"
            )
        lines += refusal_lines("audited", refused)
    return "\n".join(lines)


def refusal_text(name: str, reason: str) -> str:
    """A refusal's reason as the tables print it (its leading "NAME: " dropped)."""
    return reason.removeprefix(f"{name}: ")


def refusal_lines(what: str, refused: list[dict]) -> list[str]:
    """One line per distinct reason under a table, naming every protocol refused for it (with
    the exact ε of one report against its claim where the row has them)."""
    groups: dict[str, list[str]] = {}
    for r in refused:
        name = f"**{r['protocol']}**"
        if r.get("exact_single") is not None:
            name += f" (exact ε of one report {_f(r['exact_single'])}, claimed {_f(r['eps_1'])})"
        groups.setdefault(refusal_text(r["protocol"], r["reason"]), []).append(name)
    lines = ["", *(f"- Not {what} here: {', '.join(n)}: {why}" for why, n in groups.items())]
    return [*lines, ""] if groups else [""]


def curve(out: Path, trials: int) -> None:
    eps_perm, eps_1 = 2.0, 0.8
    chain = {"k": K, "eps_perm": eps_perm, "eps_1": eps_1}
    cases = [
        ("L-GRR", ll.protocol("L-GRR", **chain), "population"),
        ("L-OSUE", ll.protocol("L-OSUE", **chain), "population"),
        ("OLOLOHA", ll.protocol("OLOLOHA", **chain), "population"),
        ("GRR (one-shot, ε = 0.8)", ll.protocol("GRR", k=K, eps=eps_1), "population"),
        ("L-OSUE, stateless client (control)", ll.protocol("L-OSUE", **chain), "stateless"),
    ]
    data = []
    for i, (label, proto, clients) in enumerate(cases):
        for pattern in ("one-value", "alternating"):
            pts = []
            for tau in CURVE_TAUS:
                res = audit_game(
                    proto,
                    trials,
                    tau=tau,
                    pattern=pattern,
                    clients=clients,
                    rng=np.random.default_rng([i, tau, 7]),
                )
                exact = exact_lifetime_epsilon(proto, tau, pattern == "alternating")
                pts.append({"tau": tau, "lower": res.lower, "claim": res.claim, "exact": exact})
            data.append({"label": label, "pattern": pattern, "clients": clients, "points": pts})
            print(f"curve {label} {pattern}", flush=True)
    (out / "lifetime.json").write_text(json.dumps(data, indent=2))
    plot(out, data, trials)


def plot(out: Path, data: list[dict], trials: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, pattern in zip(axes, ("one-value", "alternating"), strict=True):
        for j, series in enumerate(s for s in data if s["pattern"] == pattern):
            taus = [p["tau"] for p in series["points"]]
            color = f"C{j}"
            ax.plot(
                taus,
                [p["lower"] for p in series["points"]],
                "o-",
                color=color,
                label=f"{series['label']}: audited bound",
            )
            if series["clients"] == "population":
                ax.plot(taus, [p["exact"] for p in series["points"]], ":", color=color)
        first = next(s for s in data if s["pattern"] == pattern)
        ax.plot(
            [p["tau"] for p in first["points"]],
            [p["claim"] for p in first["points"]],
            "k--",
            label="claim min(τ·ε1, m·ε∞)",
        )
        ax.set_xscale("log")
        ax.set_ylim(0, 8)
        ax.set_xlabel("τ (reports of one client)")
        ax.set_title(
            "one value for τ reports (m = 1)"
            if pattern == "one-value"
            else "alternating a, b, a, … (m = 2)"
        )
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ε (99% lower bound; dotted: exact)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Lifetime audit, k = {K}, ε∞ = 2, ε1 = 0.8, {trials:,} clients per world and τ")
    fig.tight_layout()
    fig.savefig(out / "lifetime.png", dpi=120)


ASR_TAUS = (1, 10, 100)
ASR_CURVE_TAUS = (1, 2, 5, 10, 20, 50, 100, 200)


def _asr_cell(res) -> str:
    if res.method == "exact":
        return f"{res.asr:.3f}"
    return f"{res.asr:.3f} ± {(res.high - res.low) / 2:.3f}"


def asr_refusals(eps_perm: float, eps_1: float, rappor: dict) -> dict[str, str | None]:
    """Per registered protocol at one setting, why the ASR table does not measure it (the
    constructor's reason, no single mechanism, or ``asr_refusal``), or None."""
    out: dict[str, str | None] = {}
    for name, proto in protocols(eps_perm, eps_1, rappor, extras=False):
        why = proto if isinstance(proto, str) else None
        if why is None:
            audited, why = device_mechanism(proto)
            why = asr_refusal(audited) if why is None else why
        out[name] = why
    return out


def asr(out: Path, trials: int) -> None:
    """ASR of every registered protocol at τ = 1, 10, 100 (uniform prior), a line for each the
    ASR's client model refuses (``asr_refusal``) or the setting is outside of, and the curve."""
    rows = []
    for label, eps_perm, eps_1, rappor in SETTINGS:
        refusals = asr_refusals(eps_perm, eps_1, rappor)
        for name, proto in protocols(eps_perm, eps_1, rappor, extras=False):
            if refusals[name] is not None:
                rows.append({"setting": label, "protocol": name, "reason": refusals[name]})
                continue
            audited, _ = device_mechanism(proto)
            if audited is not proto:
                name = f"{name} (example plan)"
            start = time.perf_counter()
            cells = [
                attacker_success(audited, tau, trials=trials, rng=_seed(name, tau))
                for tau in ASR_TAUS
            ]
            stateless = None
            if audited.longitudinal:
                stateless = attacker_success(
                    audited, 100, stateless=True, trials=trials, rng=_seed(name, 9)
                )
            rows.append(
                {
                    "setting": label,
                    "protocol": name,
                    "params": repr(audited),
                    "cells": [dataclasses.asdict(c) for c in cells],
                    "memo_limit": memo_asr(audited) if audited.longitudinal else None,
                    "stateless_100": None if stateless is None else dataclasses.asdict(stateless),
                    "text": [_asr_cell(c) for c in cells],
                    "stateless_text": "–" if stateless is None else _asr_cell(stateless),
                    "seconds": time.perf_counter() - start,
                }
            )
            print(f"ASR {label} {name}: {rows[-1]['seconds']:.1f} s", flush=True)
    (out / "asr.json").write_text(json.dumps(rows, indent=2, default=str))
    (out / "asr.md").write_text(render_asr(rows))
    show(out, "asr.md", "asr table")
    asr_curve(out, trials)


def render_asr(rows: list[dict]) -> str:
    """The ASR tables, one per setting, each followed by its refusal lines (read from
    ``rows``, as :func:`render`)."""
    trials = max(c["trials"] for r in rows if "cells" in r for c in r["cells"])
    lines = [registered_line(), ""]
    for label, eps_perm, eps_1, rappor in SETTINGS:
        lines += [
            f"Setting {label}: k = {K}, chains at ε∞ = {eps_perm:g}, ε1 = {eps_1:g}; one-shot "
            f"mechanisms at ε = {eps_1:g}; a single budget of its own at {eps_perm:g}; "
            f"dBitFlipPM d = {SAMPLED_BUCKETS}; RAPPOR "
            + ", ".join(f"{k} = {v:g}" for k, v in rappor.items())
            + "; numeric mechanisms over [0, 1], the attacker choosing between its ends. "
            "Uniform prior (guessing: its column); exact values plain, simulated ones ± the "
            f"half-width of a 99.9% Wilson interval ({trials:,} clients).",
            "",
            "| protocol | guessing | τ = 1 | τ = 10 | τ = 100 | memo alone (τ → ∞) | "
            "stateless client, τ = 100 |",
            "|---|---|---|---|---|---|---|",
        ]
        refused = []
        for r in rows:
            if r["setting"] != label:
                continue
            if "reason" in r:
                refused.append(r)
                continue
            limit = "–" if r["memo_limit"] is None else f"{r['memo_limit']:.3f}"
            if r["memo_limit"] is None and r["stateless_100"] is not None:
                limit = "(simulated only)"
            lines.append(
                f"| {r['protocol']} | {r['cells'][0]['baseline']:.3f} | "
                + " | ".join(r["text"])
                + f" | {limit} | {r['stateless_text']} |"
            )
        lines += refusal_lines("measured", refused)
    return "\n".join(lines)


def asr_curve(out: Path, trials: int) -> None:
    """ASR against τ at setting A: memoized clients saturate, stateless ones climb to 1."""
    _, eps_perm, eps_1, _ = SETTINGS[0]
    chain = {"k": K, "eps_perm": eps_perm, "eps_1": eps_1}
    cases = [
        ("L-GRR", ll.protocol("L-GRR", **chain)),
        ("L-OSUE", ll.protocol("L-OSUE", **chain)),
        ("OLOLOHA", ll.protocol("OLOLOHA", **chain)),
        ("dBitFlipPM (d = 2)", ll.protocol("dBitFlipPM", k=K, eps_perm=eps_perm, d=2)),
    ]
    data = []
    for i, (name, proto) in enumerate(cases):
        for stateless in (False, True):
            pts = []
            for tau in ASR_CURVE_TAUS:
                res = attacker_success(
                    proto,
                    tau,
                    stateless=stateless,
                    trials=trials,
                    rng=np.random.default_rng([i, tau, int(stateless)]),
                )
                pts.append(
                    {
                        "tau": tau,
                        "asr": res.asr,
                        "low": res.low,
                        "high": res.high,
                        "method": res.method,
                    }
                )
            data.append(
                {
                    "label": name,
                    "stateless": stateless,
                    "points": pts,
                    "memo_limit": memo_asr(proto),
                }
            )
            print(f"ASR curve {name} stateless={stateless}", flush=True)
    grr = ll.protocol("GRR", k=K, eps=eps_1)
    pts = [
        {
            "tau": t,
            "asr": attacker_success(grr, t).asr,
            "low": None,
            "high": None,
            "method": "exact",
        }
        for t in ASR_CURVE_TAUS
    ]
    data.append(
        {
            "label": f"GRR (one-shot, ε = {eps_1:g})",
            "stateless": True,
            "points": pts,
            "memo_limit": None,
        }
    )
    (out / "asr_curve.json").write_text(json.dumps(data, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6))
    for j, (name, _) in enumerate(cases):
        color = f"C{j}"
        for series in (s for s in data if s["label"] == name):
            taus = [p["tau"] for p in series["points"]]
            style = "s--" if series["stateless"] else "o-"
            kind = "stateless client" if series["stateless"] else "memoized"
            ax.plot(
                taus,
                [p["asr"] for p in series["points"]],
                style,
                color=color,
                ms=4,
                label=f"{name}, {kind}",
            )
            lows = [p["low"] for p in series["points"]]
            if any(p["method"] == "simulated" for p in series["points"]):
                ax.fill_between(
                    taus, lows, [p["high"] for p in series["points"]], color=color, alpha=0.15
                )
            if series["memo_limit"] is not None and not series["stateless"]:
                ax.axhline(series["memo_limit"], color=color, ls=":", lw=1)
    last = data[-1]
    ax.plot(
        [p["tau"] for p in last["points"]],
        [p["asr"] for p in last["points"]],
        "k^-.",
        ms=4,
        label=last["label"],
    )
    ax.axhline(1 / K, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("τ (reports of one client holding one value)")
    ax.set_ylabel("attacker success rate (uniform prior)")
    ax.set_title(
        f"ASR against τ, k = {K}, ε∞ = {eps_perm:g}, ε1 = {eps_1:g} (dotted: the memo alone; "
        "grey: guessing)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "asr.png", dpi=120)


#: The Adult attributes of the re-identification table (education-num repeats education,
#: capital gain and loss are almost always 0).
REID_COLUMNS = (
    "age",
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "hours-per-week",
    "native-country",
    "salary",
)
REID_SURVEYS = (1, 5, 20)
REID_BUDGETS = ((2.0, 1.0), (8.0, 4.0))


def reid(out: Path, targets: int) -> None:
    """Top-1 / top-10 re-identification on Adult for SMP, SPL and ALLOMFREE."""
    from longldp import data as datasets
    from longldp.apps.multidim import MultidimCollection
    from longldp.audit.reidentify import reidentify

    table = datasets.load("adult")
    idx = [table.attributes.index(c) for c in REID_COLUMNS]
    profiles = table.to_matrix()[:, idx]
    ks = [table.domain_sizes[i] for i in idx]
    configs = [
        ("SMP", "L-GRR"),
        ("SMP", "L-OSUE"),
        ("SMP", "OLOLOHA"),
        ("ALLOMFREE", None),
        ("SPL", "L-GRR"),
        ("SPL", "L-OSUE"),
        ("SPL", "OLOLOHA"),
    ]
    rows = []
    for eps_perm, eps_1 in REID_BUDGETS:
        for c, (solution, chain) in enumerate(configs):
            col = MultidimCollection(
                ks, solution, eps_perm=eps_perm, eps_1=eps_1, chain=chain, calibration="exact"
            )
            for s_count in REID_SURVEYS:
                start = time.perf_counter()
                res = reidentify(
                    profiles,
                    col,
                    s_count,
                    targets=targets,
                    rng=np.random.default_rng([c, s_count, int(eps_perm)]),
                )
                rows.append(
                    {
                        "eps_perm": eps_perm,
                        "eps_1": eps_1,
                        "solution": solution,
                        "chain": chain or "L-GRR/L-OSUE",
                        **dataclasses.asdict(res),
                    }
                )
                print(
                    f"reid {solution} {chain} ε∞={eps_perm:g} S={s_count}: "
                    f"{res.rates} ({time.perf_counter() - start:.1f} s)",
                    flush=True,
                )
                (out / "reidentify.json").write_text(json.dumps(rows, indent=2))
    ceiling = rows[0]["ceiling"]
    lines = [
        f"Adult, {profiles.shape[0]:,} profiles of {len(REID_COLUMNS)} attributes ("
        + ", ".join(REID_COLUMNS)
        + f") known to the attacker; {targets:,} targets; memos kept across collections; "
        f"L-GRR and OLOLOHA at the exact calibration. Top-1 / top-10 rates (chance "
        f"{1 / profiles.shape[0]:.1e} / {10 / profiles.shape[0]:.1e}; an attacker knowing every "
        f"value exactly: {ceiling[0]:.2f} / {ceiling[1]:.2f}, duplicate profiles tie).",
        "",
        "| ε∞, ε1 | solution | chain | "
        + " | ".join(f"{s} collection{'s' if s > 1 else ''}" for s in REID_SURVEYS)
        + " |",
        "|---|---|---|" + "---|" * len(REID_SURVEYS),
    ]
    for eps_perm, eps_1 in REID_BUDGETS:
        for solution, chain in configs:
            cells = [
                f"{r['rates'][0]:.3f} / {r['rates'][1]:.3f}"
                for r in rows
                if r["eps_perm"] == eps_perm
                and r["solution"] == solution
                and r["chain"] == (chain or "L-GRR/L-OSUE")
            ]
            lines.append(
                f"| {eps_perm:g}, {eps_1:g} | {solution} | {chain or 'L-GRR/L-OSUE'} | "
                + " | ".join(cells)
                + " |"
            )
    (out / "reidentify.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=("table", "curve", "asr", "reid", "all", "render"), default="all"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--lifetime-trials", type=int, default=10_000)
    parser.add_argument("--long-trials", type=int, default=5_000, help="Trials at τ = 1000.")
    parser.add_argument(
        "--blackbox-trials", type=int, default=1_000_000, help="Black-box rows, one report."
    )
    parser.add_argument(
        "--blackbox-lifetime-trials", type=int, default=10_000, help="Black-box rows, τ > 1."
    )
    parser.add_argument(
        "--blackbox-long-trials", type=int, default=2_000, help="Black-box rows at τ = 1000."
    )
    parser.add_argument("--curve-trials", type=int, default=5_000)
    parser.add_argument("--asr-trials", type=int, default=20_000)
    parser.add_argument("--reid-targets", type=int, default=1_000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part in ("table", "all"):
        per_tau = {t: args.lifetime_trials for t in TAUS} | {1000: args.long_trials}
        bb_tau = {t: args.blackbox_lifetime_trials for t in TAUS}
        bb = {
            "trials": args.blackbox_trials,
            "lifetime": bb_tau | {1000: args.blackbox_long_trials},
        }
        table(args.out, args.trials, per_tau, bb)
    if args.part in ("curve", "all"):
        curve(args.out, args.curve_trials)
    if args.part in ("asr", "all"):
        asr(args.out, args.asr_trials)
    if args.part in ("reid", "all"):
        reid(args.out, args.reid_targets)
    if args.part == "render":  # the two tables again from their JSON (a change of wording)
        (args.out / "table.md").write_text(
            render(json.loads((args.out / "table.json").read_text()))
        )
        show(args.out, "table.md", "audit table")
        (args.out / "asr.md").write_text(
            render_asr(json.loads((args.out / "asr.json").read_text()))
        )
        show(args.out, "asr.md", "asr table")


if __name__ == "__main__":
    main()
