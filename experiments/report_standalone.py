"""Summarize Study 1 (experiments/standalone.toml) into Markdown tables.

Usage: python experiments/report_standalone.py RESULTS.parquet [PER_USER.parquet] > summary.md

Everything printed is computed from the results tables: the mean MSE_avg per cell over the
repetitions, the best protocol per setting, what the exact L-GRR calibration changes, what
Algorithm 1 changes, what maximum likelihood changes (when the table has ``mle`` rows), and
(with a second table) count-level against per-user engines.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow.parquet as pq
from scipy.stats import t as t_dist


def load(path: str):
    t = pq.read_table(path)
    cols = [
        "dataset",
        "attribute",
        "protocol",
        "eps_perm",
        "alpha",
        "postprocess",
        "mse_avg",
        "status",
        "rep",
    ]
    data = {c: t.column(c).to_pylist() for c in cols}
    rows = [dict(zip(cols, vals, strict=True)) for vals in zip(*data.values(), strict=True)]
    return [r for r in rows if r["status"] == "ok"]


def means(rows):
    out: dict[tuple, list[float]] = {}
    for r in rows:
        alpha = r["alpha"] if r["alpha"] is not None else "-"
        key = (r["dataset"], r["attribute"], r["protocol"], r["eps_perm"], alpha, r["postprocess"])
        out.setdefault(key, []).append(r["mse_avg"])
    return {
        k: (float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v))), len(v))
        for k, v in out.items()
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Summarize Study 1 (experiments/standalone.toml) into Markdown tables "
        "on standard output.",
    )
    parser.add_argument("results", help="results.parquet of the count-level study")
    parser.add_argument(
        "per_user",
        nargs="?",
        help="results of the per-user engine on Adult (adds the engines' comparison)",
    )
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    rows = load(args.results)
    m = means(rows)
    attrs = sorted({(k[0], k[1]) for k in m})
    eps = sorted({k[3] for k in m})
    alphas = sorted({k[4] for k in m if k[4] != "-"})
    print("## Best protocol (lowest mean MSE_avg, no post-processing)\n")
    print("| dataset · attribute | α | " + " | ".join(f"ε∞={e:g}" for e in eps) + " |")
    print("|---|---|" + "---|" * len(eps))
    for d, a in attrs:
        for al in alphas:
            cells = []
            for e in eps:
                cand = {
                    k[2]: v[0]
                    for k, v in m.items()
                    if k[:2] == (d, a)
                    and k[3] == e
                    and k[5] == "none"
                    and (k[4] == al or k[4] == "-")
                }
                best = min(cand, key=cand.get)
                cells.append(best)
            print(f"| {d} · {a} | {al:g} | " + " | ".join(cells) + " |")
    print("\n## L-GRR: paper calibration over exact calibration (ratio of mean MSE_avg)\n")
    print("| dataset · attribute | k | α | " + " | ".join(f"ε∞={e:g}" for e in eps) + " |")
    print("|---|---|---|" + "---|" * len(eps))
    ks = {(r["dataset"], r["attribute"]): None for r in rows}
    t = pq.read_table(args.results, columns=["dataset", "attribute", "k"]).to_pylist()
    for r in t:
        ks[(r["dataset"], r["attribute"])] = r["k"]
    for d, a in attrs:
        for al in alphas:
            ratios = [
                m[(d, a, "L-GRR (paper)", e, al, "none")][0] / m[(d, a, "L-GRR", e, al, "none")][0]
                for e in eps
            ]
            cells = " | ".join(f"{x:.3g}" for x in ratios)
            print(f"| {d} · {a} | {ks[(d, a)]} | {al:g} | {cells} |")
    print(
        "\n## Algorithm 1 (seed [002]) over no post-processing (ratio of mean MSE_avg), α = 0.4\n"
    )
    protos = sorted({k[2] for k in m})
    print("| dataset · attribute | protocol | " + " | ".join(f"ε∞={e:g}" for e in eps) + " |")
    print("|---|---|" + "---|" * len(eps))
    for d, a in attrs:
        for p in protos:
            al = "-" if p == "1BitFlipPM" else 0.4
            vals = [
                m[(d, a, p, e, al, "algorithm-1")][0] / m[(d, a, p, e, al, "none")][0] for e in eps
            ]
            print(f"| {d} · {a} | {p} | " + " | ".join(f"{x:.2g}" for x in vals) + " |")
    if any(k[5] == "mle" for k in m):
        print(
            "\n## Maximum likelihood (mle, docs/math.md §5.3) over no post-processing "
            "(ratio of mean MSE_avg), α = 0.4\n"
        )
        print("| dataset · attribute | protocol | " + " | ".join(f"ε∞={e:g}" for e in eps) + " |")
        print("|---|---|" + "---|" * len(eps))
        for d, a in attrs:
            for p in protos:
                al = "-" if p == "1BitFlipPM" else 0.4
                vals = [m[(d, a, p, e, al, "mle")][0] / m[(d, a, p, e, al, "none")][0] for e in eps]
                print(f"| {d} · {a} | {p} | " + " | ".join(f"{x:.2g}" for x in vals) + " |")
        settings = sorted({k[:5] for k in m if k[5] == "mle"}, key=str)
        print(f"\nOver all {len(settings)} settings (every α), ratios of mean MSE_avg:\n")
        for top, bottom in (("mle", "algorithm-1"), ("mle", "none"), ("algorithm-1", "none")):
            r = np.array([m[(*k, top)][0] / m[(*k, bottom)][0] for k in settings])
            print(
                f"- {top} / {bottom}: {r.min():.3g}–{r.max():.3g}, median {np.median(r):.3g}, "
                f"below 1 in {np.mean(r < 1):.0%} of the settings"
            )
    if args.per_user is not None:
        pu = means(load(args.per_user))
        print("\n## Engines: per-user over count-level mean MSE_avg (Adult, no post-processing)\n")
        print(
            "Each ratio with its 95% interval from both engines' standard errors (t quantile with "
            "the smaller run's degrees of freedom: the per-user run has 3 repetitions).\n"
        )
        ratios, outside = [], 0
        for key, (mu, se, n_pu) in pu.items():
            if key[5] != "none" or key not in m:
                continue
            mc, sc, n_cl = m[key]
            r = mu / mc
            se_r = r * np.sqrt((se / mu) ** 2 + (sc / mc) ** 2)
            ratios.append(r)
            # t quantile: the per-user standard errors come from only a few repetitions
            outside += abs(r - 1) > t_dist.ppf(0.975, min(n_pu, n_cl) - 1) * se_r
        lo, hi = np.percentile(ratios, 5), np.percentile(ratios, 95)
        print(
            f"- cells compared: {len(ratios)}; median ratio {np.median(ratios):.3f}; "
            f"5th-95th percentile {lo:.3f}-{hi:.3f}; "
            f"cells whose 95% interval excludes 1: {outside} ({outside / len(ratios):.0%})."
        )


if __name__ == "__main__":
    main()
