"""Summaries of the poisoning studies: the tables and figures of docs/guide/studies.md.

Run after the two studies and the application script::

    longldp run experiments/attacks_count.toml --out experiments/results/attacks/count
    longldp run experiments/attacks_reports.toml --out experiments/results/attacks/reports
    longldp run experiments/attacks_detect.toml --out experiments/results/attacks/detect
    python experiments/attacks_apps.py --reps 10
    python experiments/report_attacks.py [--results experiments/results/attacks]

Writes ``summary.md`` and PNG figures into the results folder; reads only the results tables.
Every number is a mean over the study's repetitions (and, for the time-averaged gain, over its
τ epochs); the closed form (G.2) is shown beside the undefended gain.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ONE_SHOT_PAIRS = (("GRR", "L-GRR"), ("OUE", "L-OSUE"), ("OLH", "OLOLOHA"), ("SH", "L-SH"))


def load(path: Path) -> list[dict]:
    return [r for r in pq.read_table(path).to_pylist() if r["status"] == "ok"]


def group(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out


def mean(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if r[key] is not None]
    return float(np.mean(vals)) if vals else float("nan")


def fmt(x: float, digits: int = 3) -> str:
    return "–" if x != x else f"{x:.{digits}f}"


def protocols_in(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["protocol"] for r in rows))


def count_tables(rows: list[dict]) -> list[str]:
    out = []
    by = group(rows, "dataset", "protocol", "attack", "variant", "defence", "beta", "eps_perm")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    protos = protocols_in(rows)
    eps = sorted({r["eps_perm"] for r in rows})
    betas = sorted({r["beta"] for r in rows})
    for ds in datasets:
        out += [
            f"#### MGA gain per protocol and budget ({ds}, β = 0.05, no defence)",
            "",
            "Gain of the time-averaged estimate summed over r = 3 targets; in brackets the "
            "closed form (G.2). One-shot oracles run at ε = ε1 = ε∞/2, the chains' budget per "
            "report.",
            "",
            "| protocol | " + " | ".join(f"ε∞ = {e:g} (ε1 = {e / 2:g})" for e in eps) + " |",
            "|---|" + "---|" * len(eps),
        ]
        for p in protos:
            cells = []
            for e in eps:
                rs = by.get((ds, p, "MGA", "per-epoch", "none", 0.05, e), [])
                cells.append(f"{fmt(mean(rs, 'gain'))} ({fmt(mean(rs, 'expected_gain'))})")
            out.append(f"| {p} | " + " | ".join(cells) + " |")
        out.append("")
    ds = datasets[0]
    out += [
        f"#### Gain against β ({ds}, ε∞ = 2, no defence)",
        "",
        "| protocol | attack | " + " | ".join(f"β = {b:g}" for b in betas) + " |",
        "|---|---|" + "---|" * len(betas),
    ]
    for p in protos:
        for attack in ("MGA", "RIA", "RPA"):
            rs = [by.get((ds, p, attack, "per-epoch", "none", b, 2.0), []) for b in betas]
            if not any(rs):
                continue
            out.append(f"| {p} | {attack} | " + " | ".join(fmt(mean(r, "gain"), 4) for r in rs)
                       + " |")  # fmt: skip
    out += [
        "",
        f"#### Memo mimicry against MGA in report space ({ds}, ε∞ = 2, β = 0.05)",
        "",
        "| chain | MGA (report space) | memo mimicry | ratio |",
        "|---|---|---|---|",
    ]
    for p in protos:
        a = by.get((ds, p, "MGA", "per-epoch", "none", 0.05, 2.0), [])
        b = by.get((ds, p, "MGA", "memo-mimic", "none", 0.05, 2.0), [])
        if a and b:
            ga, gb = mean(a, "gain"), mean(b, "gain")
            out.append(f"| {p} | {fmt(ga)} | {fmt(gb)} | {gb / ga:.2f} |")
    defences = list(dict.fromkeys(r["defence"] for r in rows))
    out += [
        "",
        f"#### Estimate-level defences ({ds}, MGA per epoch, ε∞ = 2, β = 0.05)",
        "",
        "Gain D(after) − D(before), and in brackets the defence's cost on attack-free data: "
        "MSE of D on the genuine reports over the MSE of the plain estimate.",
        "",
        "| protocol | " + " | ".join(defences) + " |",
        "|---|" + "---|" * len(defences),
    ]
    for p in protos:
        base = by.get((ds, p, "MGA", "per-epoch", "none", 0.05, 2.0), [])
        cells = []
        for d in defences:
            rs = by.get((ds, p, "MGA", "per-epoch", d, 0.05, 2.0), [])
            cost = mean(rs, "mse_clean") / mean(base, "mse_clean") if base else float("nan")
            cells.append(f"{fmt(mean(rs, 'gain'))} ({cost:.2f})")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    err = [abs(r["gain"] - r["expected_gain"]) / max(abs(r["expected_gain"]), 1e-9)
           for r in rows if r["defence"] == "none" and r["expected_gain"] is not None
           and abs(r["expected_gain"]) > 0.01]  # fmt: skip
    out += ["", f"Undefended gains against (G.2), every cell with |G| > 0.01: median relative "
            f"difference {np.median(err):.3f} over {len(err)} cells (one repetition each).", ""]
    return out


def equal_total_budget() -> list[str]:
    """Closed form (G.1) at the same *total* budget ε∞ per user over τ = 20 epochs: a chain at
    (ε∞, ε1 = ε∞/2) spends at most ε∞ (one value), a one-shot oracle must report at ε∞/τ."""
    import longldp as ll
    from longldp import attacks as atk
    from longldp.data import zipf_probabilities

    k, tau, r = 100, 20, 3
    f = zipf_probabilities(k, 1.0)
    targets = [k - 3, k - 2, k - 1]
    out = [
        f"#### MGA at the same total budget (closed form (G.1), Zipf k = {k}, r = {r} rarest "
        f"items, β = 0.05, τ = {tau})",
        "",
        "| ε∞ per user | "
        + " | ".join(f"{o} (ε = ε∞/τ) | {c} (ε1 = ε∞/2)" for o, c in ONE_SHOT_PAIRS) + " |",
        "|---|" + "---|---|" * len(ONE_SHOT_PAIRS),
    ]
    for eps in (1.0, 2.0, 4.0):
        cells = []
        for one, chain in ONE_SHOT_PAIRS:
            po = ll.protocol(one, k=k, eps=eps / tau)
            pc = ll.protocol(chain, k=k, eps_perm=eps, eps_1=eps / 2)
            go = atk.expected_gain(po, "MGA", targets, 0.05, f).total
            gc = atk.expected_gain(pc, "MGA", targets, 0.05, f).total
            cells += [f"{go:.2f}", f"{gc:.2f}"]
        out.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    return [*out, ""]


def reports_tables(rows: list[dict]) -> list[str]:
    out = []
    by = group(rows, "dataset", "protocol", "variant", "defence", "beta", "eps_perm")
    protos = protocols_in(rows)
    defences = list(dict.fromkeys(r["defence"] for r in rows))
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        for beta in sorted({r["beta"] for r in rows}):
            out += [
                f"#### MGA with stored reports ({ds}, τ = 40, ε∞ = 2, β = {beta:g})",
                "",
                "Gain per variant under each defence (devices keep their value; memo "
                "consistency and itemset detection at α = 1%); in brackets the shares of fake "
                "and of genuine devices flagged.",
                "",
                "| protocol | variant | " + " | ".join(defences) + " |",
                "|---|---|" + "---|" * len(defences),
            ]
            for p in protos:
                for v in ("per-epoch", "persistent", "memo-mimic"):
                    cells, any_ok = [], False
                    for d in defences:
                        rs = by.get((ds, p, v, d, beta, 2.0), [])
                        any_ok |= bool(rs)
                        flag = mean(rs, "flagged_fake") if rs else float("nan")
                        honest = mean(rs, "flagged_genuine") if rs else float("nan")
                        extra = f" ({flag:.2f}/{honest:.3f})" if flag == flag else ""
                        cells.append(fmt(mean(rs, "gain")) + extra if rs else "n/a")
                    if any_ok:
                        out.append(f"| {p} | {v} | " + " | ".join(cells) + " |")
            out.append("")
    return out


def detect_tables(rows: list[dict]) -> list[str]:
    """Itemset detection at r ∈ {3, 10} and MGA's hash search S ∈ {100, 1,000}."""
    ds = rows[0]["dataset"]
    by = group(rows, "protocol", "eps_1", "r", "hash_trials", "defence")
    out = [
        f"#### Itemset detection against MGA ({ds}, one epoch, β = 0.05)",
        "",
        "Gain summed over the r targets without a defence, with detection (threshold derived at "
        "a 1% budget of honest devices, docs/attacks.md §8.2) and with detection + recovery; in "
        "brackets the shares of fake and of genuine devices dropped. S is MGA's hash search "
        "(it matters to the hashing protocols only).",
        "",
        "| protocol | ε | r | S | none | detect | detect+recover |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in protocols_in(rows):
        for eps in sorted({r["eps_1"] for r in rows}):
            for r in sorted({x["r"] for x in rows}):
                for trials in sorted({x["hash_trials"] for x in rows}):
                    cells = []
                    for d in ("none", "detect", "detect+recover"):
                        rs = by.get((p, eps, r, trials, d), [])
                        text = fmt(mean(rs, "gain"))
                        if d != "none" and rs:
                            text += (f" ({mean(rs, 'flagged_fake'):.2f}/"
                                     f"{mean(rs, 'flagged_genuine'):.4f})")  # fmt: skip
                        cells.append(text)
                    out.append(f"| {p} | {eps:g} | {r} | {trials:,} | " + " | ".join(cells) + " |")
    return [*out, ""]


def best_defended(rows: list[dict]) -> list[str]:
    """The attacker's best variant against the defender's best defence, per protocol."""
    out = [
        "#### Attacker's best variant against the defender's best defence (reports study, "
        "ε∞ = 2, β = 0.1)",
        "",
        "For each protocol: the defence minimizing the largest |gain| over the variants the "
        "attacker can use (over-correction, a negative gain, counts as an error too), and that "
        "largest |gain|; one-shot oracles have no memo to check.",
        "",
        "| dataset | protocol | undefended (best variant) | best defence | max abs. gain |",
        "|---|---|---|---|---|",
    ]
    by = group(rows, "dataset", "protocol", "variant", "defence", "beta", "eps_perm")
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        for p in protocols_in(rows):
            variants = [v for v in ("per-epoch", "persistent", "memo-mimic")
                        if by.get((ds, p, v, "none", 0.1, 2.0))]  # fmt: skip
            if not variants:
                continue
            undefended = max(mean(by[(ds, p, v, "none", 0.1, 2.0)], "gain") for v in variants)
            best, best_d = np.inf, None
            for d in dict.fromkeys(r["defence"] for r in rows):
                if d == "none":
                    continue
                gains = [abs(mean(by[(ds, p, v, d, 0.1, 2.0)], "gain")) for v in variants
                         if by.get((ds, p, v, d, 0.1, 2.0))]  # fmt: skip
                if len(gains) == len(variants) and max(gains) < best:
                    best, best_d = max(gains), d
            out.append(f"| {ds} | {p} | {fmt(undefended)} | {best_d} | {fmt(best)} |")
    return [*out, ""]


def figures(count: list[dict], reports: list[dict], folder: Path) -> list[str]:
    from matplotlib.figure import Figure

    from longldp.experiments.plot import line_styles

    made = []
    ds = count[0]["dataset"]
    by = group(count, "dataset", "protocol", "attack", "variant", "defence", "beta", "eps_perm")
    betas = sorted({r["beta"] for r in count})
    defences = list(dict.fromkeys(r["defence"] for r in count))
    fig = Figure(figsize=(4 * len(defences), 3.6))
    axes = fig.subplots(1, len(defences), sharey=True)
    styles = line_styles(protocols_in(count))  # more than 10 protocols: colour alone repeats
    for ax, d in zip(np.atleast_1d(axes), defences, strict=True):
        for p in protocols_in(count):
            ys = [mean(by.get((ds, p, "MGA", "per-epoch", d, b, 2.0), []), "gain") for b in betas]
            ax.plot(betas, np.maximum(ys, 1e-4), label=p, **styles[p])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"defence: {d}")
        ax.set_xlabel("β (fake share)")
    np.atleast_1d(axes)[0].set_ylabel("gain of the time-averaged estimate")
    np.atleast_1d(axes)[-1].legend(fontsize=7)
    fig.suptitle(f"MGA, {ds}, ε∞ = 2 (ε1 = 1)")
    fig.tight_layout()
    name = "gain_vs_beta.png"
    fig.savefig(folder / name, dpi=110)
    made.append(name)

    byr = group(reports, "dataset", "protocol", "variant", "defence", "beta", "eps_perm")
    dsr = reports[0]["dataset"]
    protos = protocols_in(reports)
    variants = ("per-epoch", "persistent", "memo-mimic")
    fig = Figure(figsize=(11, 3.8))
    axes = fig.subplots(1, 3, sharey=True)
    for ax, v in zip(axes, variants, strict=True):
        x = np.arange(len(protos))
        for i, d in enumerate(("none", "detect+recover", "memo")):
            ys = [mean(byr.get((dsr, p, v, d, 0.1, 2.0), []), "gain") for p in protos]
            ax.bar(x + (i - 1) * 0.27, np.nan_to_num(ys), width=0.27, label=d)
        ax.set_xticks(x, protos, rotation=60, fontsize=7)
        ax.set_title(v)
        ax.axhline(0, color="black", lw=0.5)
    axes[0].set_ylabel("gain (β = 0.1, ε∞ = 2)")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"MGA with stored reports, {dsr}, τ = 40")
    fig.tight_layout()
    name = "reports_defences.png"
    fig.savefig(folder / name, dpi=110)
    made.append(name)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("experiments/results/attacks"))
    args = parser.parse_args()
    count = load(args.results / "count" / "results.parquet")
    reports = load(args.results / "reports" / "results.parquet")
    lines = ["# Poisoning studies: summary", "", "### Count level (`attacks_count.toml`)", ""]
    lines += count_tables(count)
    lines += equal_total_budget()
    lines += ["### Stored reports (`attacks_reports.toml`)", ""]
    lines += reports_tables(reports)
    lines += best_defended(reports)
    detect = args.results / "detect" / "results.parquet"
    if detect.exists():
        lines += ["### Itemset detection (`attacks_detect.toml`)", ""]
        lines += detect_tables(load(detect))
    apps = args.results / "apps.md"
    if apps.exists():
        lines += ["### Applications (`attacks_apps.py`)", "",
                  apps.read_text().replace("## ", "#### ")]  # fmt: skip
    made = figures(count, reports, args.results)
    lines += ["Figures: " + ", ".join(f"`{m}`" for m in made), ""]
    (args.results / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
