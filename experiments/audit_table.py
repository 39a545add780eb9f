"""The audit table and the lifetime curve of the README (docs/audit.md §5).

For every protocol at two settings: the claimed ε1 and ε∞, the exact ε of one report and of
round 1 from the enumerated channel, the one-report lower bound (10⁶ trials per world) and the
lifetime lower bounds at τ ∈ {1, 10, 100, 1000} (one client holding one value), each beside
the claim min(τ·ε1, ε∞) (one-shot oracles: τ·ε) and the exact ε of τ reports. Then the curve
of the lifetime bound against τ for a few protocols and the stateless positive control.

    python experiments/audit_table.py [--part table|curve|all] [--out experiments/results/audit]

Seeds are fixed (one per protocol and setting); the run takes about 15 minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.audit import audit_game, audit_protocol, claimed_epsilon, exact_lifetime_epsilon

#: (label, ε∞, ε1, RAPPOR's parameters) of the two settings; k = 8 throughout.
SETTINGS = (
    ("A", 2.0, 0.8, {"h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75}),
    ("B", 1.0, 0.5, {"h": 1, "m": 4, "f": 0.25, "p": 0.25, "q": 0.75}),
)
K = 8
TAUS = (1, 10, 100, 1000)
CURVE_TAUS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def protocols(eps_perm: float, eps_1: float, rappor: dict) -> list[tuple[str, object]]:
    """Every registered protocol at one setting (one-shot oracles at ε = ε1)."""
    chain = {"k": K, "eps_perm": eps_perm, "eps_1": eps_1}
    out: list[tuple[str, object]] = [
        (name, ll.protocol(name, k=K, eps=eps_1)) for name in ("GRR", "SUE", "OUE", "BLH", "OLH")
    ]
    out.append(("SH", ll.protocol("SH", k=K, eps=eps_1)))
    out.append(("L-GRR", ll.protocol("L-GRR", **chain)))
    out.append(("L-GRR (paper)", ll.protocol("L-GRR", **chain, calibration="paper")))
    for name in ("L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "BiLOLOHA", "OLOLOHA", "L-SH"):
        out.append((name, ll.protocol(name, **chain)))
    out.append(("dBitFlipPM (d = 2)", ll.protocol("dBitFlipPM", k=K, eps_perm=eps_perm, d=2)))
    out.append(("RAPPOR (Bloom)", ll.protocol("RAPPOR", k=K, **rappor)))
    return out


def table(out: Path, trials: int, lifetime_trials: dict[int, int]) -> None:
    rows = []
    for label, eps_perm, eps_1, rappor in SETTINGS:
        for i, (name, proto) in enumerate(protocols(eps_perm, eps_1, rappor)):
            start = time.perf_counter()
            claim_1 = eps_1 if name == "L-GRR (paper)" else None  # the published claim
            one = audit_protocol(
                proto, trials=trials, taus=(), eps_1=claim_1, rng=np.random.default_rng([i, 1])
            )
            life = []
            for tau in TAUS:
                claim = claimed_epsilon(proto, tau, eps_1=one.eps_1)
                res = audit_game(
                    proto,
                    lifetime_trials[tau],
                    tau=tau,
                    claim=claim,
                    rng=np.random.default_rng([i, tau]),
                )
                life.append(
                    {
                        "tau": tau,
                        "claim": claim,
                        "exact": exact_lifetime_epsilon(proto, tau),
                        "lower": res.lower,
                        "trials": res.trials,
                        "violates": res.violates,
                    }
                )
            rows.append(
                {
                    "setting": label,
                    "protocol": name,
                    "params": one.protocol,
                    "eps_1": one.eps_1,
                    "eps_perm": one.eps_perm,
                    "exact_single": one.exact_single,
                    "exact_first_round": one.exact_first_round,
                    "one_report_lower": one.one_report.lower,
                    "one_report_trials": trials,
                    "loose": one.loose,
                    "violations": one.violations,
                    "lifetime": life,
                }
            )
            print(f"{label} {name}: {time.perf_counter() - start:.1f} s", flush=True)
            (out / "table.json").write_text(json.dumps(rows, indent=2))
    (out / "table.md").write_text(render(rows))


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def render(rows: list[dict]) -> str:
    lines = []
    for label, eps_perm, eps_1, rappor in SETTINGS:
        lines += [
            f"Setting {label}: k = {K}, chains at ε∞ = {eps_perm:g}, ε1 = {eps_1:g}; one-shot "
            f"oracles at ε = {eps_1:g}; dBitFlipPM at ε∞ = {eps_perm:g}, d = 2; RAPPOR "
            + ", ".join(f"{k} = {v:g}" for k, v in rappor.items())
            + ". Each lifetime cell: audited lower bound / claim (exact ε of τ reports).",
            "",
            "| protocol | claimed ε1 | claimed ε∞ | exact ε1 | exact ε∞ | one-report bound | "
            + " | ".join(f"τ = {t}" for t in TAUS)
            + " |",
            "|---|---|---|---|---|---|" + "---|" * len(TAUS),
        ]
        for r in rows:
            if r["setting"] != label:
                continue
            cells = [
                f"{_f(c['lower'])} / {_f(c['claim'])} ({_f(c['exact'])})" for c in r["lifetime"]
            ]
            flag = " (loose)" if r["loose"] else ""
            lines.append(
                f"| {r['protocol']} | {_f(r['eps_1'])} | {_f(r['eps_perm'])} | "
                f"{_f(r['exact_single'])}{flag} | "
                f"{_f(r['exact_first_round'] if r['eps_perm'] is not None else None)} | "
                f"{_f(r['one_report_lower'])} | " + " | ".join(cells) + " |"
            )
        lines.append("")
    return "\n".join(lines)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("table", "curve", "all"), default="all")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/audit"))
    parser.add_argument("--trials", type=int, default=1_000_000)
    parser.add_argument("--lifetime-trials", type=int, default=10_000)
    parser.add_argument("--long-trials", type=int, default=5_000, help="Trials at τ = 1000.")
    parser.add_argument("--curve-trials", type=int, default=5_000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part in ("table", "all"):
        per_tau = {t: args.lifetime_trials for t in TAUS} | {1000: args.long_trials}
        table(args.out, args.trials, per_tau)
    if args.part in ("curve", "all"):
        curve(args.out, args.curve_trials)


if __name__ == "__main__":
    main()
