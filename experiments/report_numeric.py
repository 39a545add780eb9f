"""Summaries of the numeric and mixed studies (docs/numeric.md), from their Parquet tables only.

Writes ``experiments/results/numeric/summary.md`` (and ``mixed/summary.md`` when that table
exists):

1. one-shot: n·MSE of the mean in u units (u = 2(x − lo)/(hi − lo) − 1, so
   n·MSE_u = 4·n·squared error/(hi − lo)²), averaged over attributes and repetitions, beside the
   same average of the exact variance at the data (math (20.2)) and the worst case of math §20.7
   (the setting of Wang et al. 2019's figure of mean-estimation MSE against ε);
2. SW's W1 (in units of the range) and the squared error of its EMS mean against its unbiased
   mean;
3. over time: the time-averaged mean's n·MSE_u and the ε users spent, per form and regime.

Usage::

    python experiments/report_numeric.py [--results experiments/results]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy import stats

from longldp.privacy import numeric as nm


def _mean(xs: list[float]) -> float:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if vals else float("nan")


def _consistency(pairs: list[tuple[list[float], list[float]]]) -> str:
    """How many cells' Σ squared errors / Σ exact variances lie in the central 99% of χ²_m/m
    (m squared errors of nearly normal estimates, each error²/variance ~ χ²₁)."""
    inside = 0
    for errs, exps in pairs:
        m = len(errs)
        ratio = sum(errs) / sum(exps)
        lo, hi = stats.chi2.ppf([0.005, 0.995], m) / m
        inside += lo <= ratio <= hi
    return (f"Σ measured / Σ exact per cell: {inside} of {len(pairs)} cells inside the central 99% "
            f"of χ²_m/m (m = the cell's squared errors, attributes × repetitions)")  # fmt: skip


def one_shot(rows: list[dict]) -> list[str]:
    cells: dict[tuple[str, float], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["family"] != "one-shot" or r["status"] != "ok":
            continue
        c = cells[(r["mechanism"], r["eps"])]
        width2 = (r["hi"] - r["lo"]) ** 2
        c["mse"].append(4 * r["n"] * r["sq_error"] / width2)
        c["exp"].append(4 * r["n"] * r["expected_variance"] / width2)
        if r["w1"] is not None:
            c["w1"].append(r["w1"] / (r["hi"] - r["lo"]))
            c["ems"].append(4 * r["n"] * r["ems_sq_error"] / width2)
    mechs = sorted({m for m, _ in cells}, key=["Laplace", "Duchi", "PM", "HM", "SW"].index)
    epss = sorted({e for _, e in cells})
    out = ["## One-shot: n·MSE of the mean (u units), measured / exact at the data / worst case",
           "", "| ε | " + " | ".join(mechs) + " | best exact at the data | best worst case |",
           "|---|" + "---|" * (len(mechs) + 2)]  # fmt: skip
    pairs = []
    for e in epss:
        parts, best, best_worst = [], (np.inf, ""), (np.inf, "")
        for m in mechs:
            c = cells[(m, e)]
            worst = nm.unit_variance(m, e).worst()
            exact = _mean(c["exp"])
            parts.append(f"{_mean(c['mse']):.3g} / {exact:.3g} / {worst:.3g}")
            best, best_worst = min(best, (exact, m)), min(best_worst, (worst, m))
            pairs.append((c["mse"], c["exp"]))
        out.append(f"| {e:g} | " + " | ".join(parts) + f" | {best[1]} | {best_worst[1]} |")
    out += ["", _consistency(pairs) + "."]
    out += ["", "## SW: W1 of the EMS distribution (÷ range) and n·MSE_u of its EMS mean", "",
            "| ε | W1 | EMS mean | unbiased mean (20.12) |", "|---|---|---|---|"]  # fmt: skip
    for e in epss:
        c = cells.get(("SW", e))
        if c:
            out.append(f"| {e:g} | {_mean(c['w1']):.4f} | {_mean(c['ems']):.3g} | "
                       f"{_mean(c['mse']):.3g} |")  # fmt: skip
    return out


def over_time(rows: list[dict]) -> list[str]:
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["family"] != "over-time" or r["status"] != "ok" or r["status_note"]:
            continue
        key = (r["mechanism"], r["alpha"], r["regime"], r["tau"])
        width2 = (r["hi"] - r["lo"]) ** 2
        cells[key]["avg"].append(4 * r["n"] * r["mse_time_average"] / width2)
        if r["expected_time_average"] is not None:
            cells[key]["exp"].append(4 * r["n"] * r["expected_time_average"] / width2)
        cells[key]["spent"].append(r["max_spent_epsilon"])
    out = ["", "## Over time (ε∞ = 4): n·MSE_u of the time-averaged mean, measured / exact "
           "(static values), and the most ε a user spent", "",
           "| form | α | regime | τ | n·MSE_u | exact | max spent ε |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    pairs = []
    for key in sorted(cells, key=lambda k: (k[1], k[2], k[0], k[3])):
        c = cells[key]
        out.append(f"| {key[0]} | {key[1]:g} | {key[2]} | {key[3]} | {_mean(c['avg']):.3g} | "
                   f"{_mean(c['exp']):.3g} | {max(c['spent']):.3g} |")  # fmt: skip
        if c["exp"]:
            pairs.append((c["avg"], c["exp"]))
    out += ["", _consistency(pairs) + " (static values)."]
    return out


def mixed(rows: list[dict]) -> list[str]:
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["status"] != "ok":
            continue
        budget = (
            f"ε = {r['eps']:g}"
            if r["eps"] is not None
            else f"ε∞ = {r['eps_perm']:g}, τ = {r['tau']}"
        )
        c = cells[(r["dataset"], budget, r["method"])]
        c["num"].append(r["numeric_error"])
        c["cat"].append(r["categorical_error"])
        c["exp_num"].append(r["expected_numeric_error"])
        c["exp_cat"].append(r["expected_categorical_error"])
        c["mech"].append(r["mechanisms"])
    out = ["# Mixed study: mean error per attribute kind (numeric ÷ range², categorical MSE_avg), "
           "measured / expected", "", "| dataset | budget | method | numeric | categorical | "
           "mechanisms |", "|---|---|---|---|---|---|"]  # fmt: skip
    for (ds, budget, method), c in sorted(cells.items()):
        out.append(f"| {ds} | {budget} | {method} | {_mean(c['num']):.3g} / "
                   f"{_mean(c['exp_num']):.3g} | {_mean(c['cat']):.3g} / {_mean(c['exp_cat']):.3g} "
                   f"| {c['mech'][0]} |")  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args()
    table = args.results / "numeric" / "results.parquet"
    if table.exists():
        rows = pq.read_table(table).to_pylist()
        text = ["# Numeric study (experiments/numeric.toml)", "", *one_shot(rows), *over_time(rows)]
        (args.results / "numeric" / "summary.md").write_text("\n".join(text) + "\n")
        print("\n".join(text))
    table = args.results / "mixed" / "results.parquet"
    if table.exists():
        text = mixed(pq.read_table(table).to_pylist())
        (args.results / "mixed" / "summary.md").write_text("\n".join(text) + "\n")
        print("\n".join(text))


if __name__ == "__main__":
    main()
