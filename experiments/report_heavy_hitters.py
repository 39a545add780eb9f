"""Report of the heavy-hitter study and of the side-by-side runs with pure-ldp, from the results.

Reads ``experiments/results/heavy_hitters/results.parquet`` (experiments/heavy_hitters.toml) and
``benchmarks/results/discovery.json`` (benchmarks/bench_discovery.py); writes
``experiments/results/heavy_hitters/summary.md`` (every cell group: recall, NCR, frequency error
and time per data set, n, method and ε) and the two generated blocks of docs/heavy_hitters.md
("What the study shows" and the pure-ldp table). Every number comes from those files; nothing is
typed in.

Run: ``.venv/bin/python experiments/report_heavy_hitters.py``
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results" / "heavy_hitters" / "results.parquet"
BENCH = REPO / "benchmarks" / "results" / "discovery.json"
SKETCH = REPO / "benchmarks" / "results" / "sketch.json"
DOC = REPO / "docs" / "heavy_hitters.md"
STUDY = (
    "<!-- BEGIN generated: heavy hitters study -->",
    "<!-- END generated: heavy hitters study -->",
)
PEER = (
    "<!-- BEGIN generated: pure-ldp comparison -->",
    "<!-- END generated: pure-ldp comparison -->",
)
SPEED = (
    "<!-- BEGIN generated: sketch performance -->",
    "<!-- END generated: sketch performance -->",
)
#: The issue's targets: aggregation reports/s per core, discovery seconds, ratio to pure-ldp.
TARGET_RATE, TARGET_SECONDS, TARGET_RATIO = 10e6, 60.0, 10.0
#: Recall that counts as "found the top k" in the findings.
GOOD = 0.8
METRICS = ("recall", "ncr", "abs_error", "runtime_s")


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}" if abs(x) >= 10**-digits else f"{x:.1e}"


def _means(path: Path) -> tuple[dict, dict]:
    """(mean of each metric by (dataset, n, method, ε) over the repetitions, the axes)."""
    rows = pq.read_table(path).to_pydict()
    acc: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in range(len(rows["dataset"])):
        if rows["status"][i] != "ok":
            continue
        key = (rows["dataset"][i], rows["n"][i], rows["method"][i], rows["eps"][i])
        for m in METRICS:
            if rows[m][i] is not None:
                acc[key][m].append(float(rows[m][i]))
        acc[key]["reps"].append(1.0)
    means = {k: {m: float(np.mean(v)) if v else None for m, v in d.items()} for k, d in acc.items()}
    for k, d in acc.items():
        means[k]["cells"] = float(len(d["reps"]))
    axes = {name: list(dict.fromkeys(rows[name])) for name in ("dataset", "method")} | {
        name: sorted(set(rows[name])) for name in ("n", "eps")
    }
    axes["k"] = sorted(set(rows["k"]))
    axes["reps"] = sorted(set(rows["rep"]))
    return means, axes


def _table(means: dict, axes: dict, dataset: str, n: int, metric: str, digits: int = 2) -> str:
    head = "| method | " + " | ".join(f"ε = {e:g}" for e in axes["eps"]) + " |"
    lines = [head, "|---|" + "---|" * len(axes["eps"])]
    for method in axes["method"]:
        cells = [
            _fmt(means.get((dataset, n, method, e), {}).get(metric), digits) for e in axes["eps"]
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _first_eps(means: dict, axes: dict, dataset: str, n: int, method: str) -> float | None:
    for e in axes["eps"]:
        r = means.get((dataset, n, method, e), {}).get("recall")
        if r is not None and r >= GOOD:
            return e
    return None


def findings(means: dict, axes: dict) -> str:
    """The generated block of docs/heavy_hitters.md: the n = max tables and the findings."""
    top_n = max(axes["n"])
    k = axes["k"][0]
    out = [
        f"Mean over {len(axes['reps'])} repetitions of each cell (k = {k}, select top); the "
        f"full tables per n are in experiments/results/heavy_hitters/summary.md.",
        "",
    ]
    for ds in axes["dataset"]:
        out += [f"**{ds}, n = {top_n:,}: recall of the top {k} (NCR in the summary)**", ""]
        out += [_table(means, axes, ds, top_n, "recall"), ""]
    total = sum(v["runtime_s"] * v["cells"] for v in means.values() if v.get("runtime_s"))
    out.append(
        f"The {int(sum(v['cells'] for v in means.values()))} cells took {total / 60:.1f} "
        "minutes of one core in all (clients simulated and the servers' rounds)."
    )
    out.append("")
    out.append("Findings (computed from the tables):")
    out.append("")
    for ds in axes["dataset"]:
        reach = []
        for method in axes["method"]:
            per_n = []
            for n in axes["n"]:
                e = _first_eps(means, axes, ds, n, method)
                per_n.append(f"n = {n:,}: " + ("not reached" if e is None else f"ε = {e:g}"))
            reach.append(f"{method} ({'; '.join(per_n)})")
        out.append(f"- **{ds}**: smallest ε with recall ≥ {GOOD} — " + ", ".join(reach) + ".")
        best = {}
        for n in axes["n"]:
            score = {
                m: np.mean([means.get((ds, n, m, e), {}).get("ncr") or 0.0 for e in axes["eps"]])
                for m in axes["method"]
            }
            winner = max(score, key=lambda m: score[m])
            best[n] = f"{winner} at n = {n:,} (mean NCR over ε {score[winner]:.2f})"
        out.append(f"  Best mean NCR: {'; '.join(best.values())}.")
        errors = [
            means[(ds, top_n, m, e)]["abs_error"]
            for m in axes["method"]
            for e in axes["eps"]
            if means.get((ds, top_n, m, e), {}).get("abs_error") is not None
        ]
        times = {
            m: max(
                means[(ds, top_n, m, e)]["runtime_s"]
                for e in axes["eps"]
                if (ds, top_n, m, e) in means
            )
            for m in axes["method"]
        }
        out.append(
            f"  At n = {top_n:,} the found true items' frequencies are off by at most "
            f"{max(errors):.4f} on average (mean |f̂ − f| per cell); one simulated collection "
            "(clients and server) took at most "
            + ", ".join(f"{t:.1f} s ({m})" for m, t in times.items())
            + " on one core."
        )
    return "\n".join(out)


def summary(means: dict, axes: dict) -> str:
    """experiments/results/heavy_hitters/summary.md."""
    out = [
        "# Heavy hitters: the study's results",
        "",
        "Generated by experiments/report_heavy_hitters.py from results.parquet "
        "(experiments/heavy_hitters.toml). Means over the repetitions.",
        "",
    ]
    names = {
        "recall": "recall of the top k",
        "ncr": "NCR",
        "abs_error": "mean |f̂ − f| of the true items found",
        "runtime_s": "seconds per collection (clients and server, one core)",
    }
    for ds in axes["dataset"]:
        out += [f"## {ds}", ""]
        for n in axes["n"]:
            for metric in METRICS:
                digits = 4 if metric == "abs_error" else 2
                out += [f"**n = {n:,}, {names[metric]}**", ""]
                out += [_table(means, axes, ds, n, metric, digits), ""]
    return "\n".join(out)


def peer_table(path: Path) -> str:
    """The generated pure-ldp table of docs/heavy_hitters.md (benchmarks/results/discovery.json)."""
    res = json.loads(path.read_text())
    lines = [
        f"{res['width']}-bit Zipf values, ε = {res['eps']:g}, top k = {res['k']}, means over "
        f"{res['reps']} seeds (benchmarks/results/discovery.json):",
        "",
        "| method | n | side | recall | precision | NCR | mean abs(f̂ − f) | seconds | "
        "pure-ldp time / ours | ours at 100·n (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method, m in res["methods"].items():
        for side in ("ours", "pure_ldp"):
            v = m["mean"][side]
            ratio = f"≥ {m['min_time_ratio']:.0f}×" if side == "ours" else ""
            big = f"{m['ours_seconds_at_100n']:.2f}" if side == "ours" else ""
            lines.append(
                f"| {method} | {m['n']:,} | {side.replace('_', '-')} | {_fmt(v.get('recall'))} | "
                f"{_fmt(v.get('precision'))} | {_fmt(v.get('ncr'))} | "
                f"{_fmt(v.get('freq_error'), 4)} | {v['seconds']:.3f} | {ratio} | {big} |"
            )
    return "\n".join(lines)


def speed_block(path: Path) -> str:
    """The generated performance block of docs/heavy_hitters.md (benchmarks/results/sketch.json)
    with the issue's targets: aggregation ≥ 10 M reports/s per core, discovery over 10⁶ devices
    and 48-bit items < 60 s, each ≥ 10× pure-ldp."""
    res = json.loads(path.read_text())
    lines = [
        "| aggregation | n | m | d | reports/s | / one read of the bytes | × pure-ldp |",
        "|---|---|---|---|---|---|---|",
    ]

    def met(ok: bool) -> str:
        return "met" if ok else "not met"

    for row in res["cms"]:
        for label, rate in (
            ("CMS, reports stored by row", row["stored_by_row_reports_per_s"]),
            ("CMS, an unsorted batch", row["ours_reports_per_s"]),
        ):
            ratio = rate / row["pure_ldp_reports_per_s"]
            read = rate / row["read_limit_reports_per_s"]
            lines.append(
                f"| {label} | {row['n']:,} | {row['m']} | {row['d']} | {rate / 1e6:.1f} M | "
                f"{read:.2f} | {ratio:.0f} |"
            )
    for row in res["hcms"]:
        lines.append(
            f"| HCMS | {row['n']:,} | {row['m']} | {row['d']} | "
            f"{row['ours_reports_per_s'] / 1e6:.1f} M | {row['ratio_to_read_limit']:.2f} | "
            f"{row['ratio_to_pure_ldp']:.0f} |"
        )
    disc = res["discovery"]
    ratios = [r["ratio_to_pure_ldp"] for r in res["cms"] + res["hcms"]]
    def where(rows: list[dict], key: str) -> str:
        ok = [r["m"] for r in rows if r[key] >= TARGET_RATE]
        bad = [r["m"] for r in rows if r[key] < TARGET_RATE]
        said = [f"met at m = {', '.join(map(str, ok))}"] if ok else []
        said += [f"not at m = {', '.join(map(str, bad))}"] if bad else []
        return "; ".join(said) if ok else "not met at any m"

    lines += [
        "",
        f"Discovery (PEM, OLH rounds): {disc['n']:,} devices holding {disc['width']}-bit values, "
        f"reports simulated and all {disc['rounds']} rounds run in {disc['seconds']:.1f} s on "
        f"one core ({disc['top10_found']} of the 10 most frequent found).",
        "",
        f"Targets: aggregation ≥ {TARGET_RATE / 1e6:.0f} M reports/s per core — HCMS "
        f"{where(res['hcms'], 'ours_reports_per_s')}; CMS with its reports stored by row "
        f"{where(res['cms'], 'stored_by_row_reports_per_s')}; CMS on an unsorted batch "
        f"{where(res['cms'], 'ours_reports_per_s')}. Discovery over 10⁶ devices and 48-bit "
        f"values < {TARGET_SECONDS:.0f} s: {met(disc['seconds'] < TARGET_SECONDS)}. "
        f"≥ {TARGET_RATIO:.0f}× pure-ldp on the same reports: "
        f"{met(min(ratios) >= TARGET_RATIO)} (at least {min(ratios):.0f}×).",
    ]
    return "\n".join(lines)


def with_block(page: str, markers: tuple[str, str], block: str) -> str:
    """``page`` with the text between ``markers`` replaced by ``block``."""
    begin, end = markers
    if page.count(begin) != 1 or page.count(end) != 1:
        raise ValueError(f"the page must hold the markers {begin!r} and {end!r} once each.")
    head, rest = page.split(begin)
    return head + begin + "\n" + block.strip("\n") + "\n" + end + rest.split(end)[1]


def page(text: str) -> str:
    """docs/heavy_hitters.md's text with both generated blocks current."""
    means, axes = _means(RESULTS)
    text = with_block(text, STUDY, findings(means, axes))
    text = with_block(text, SPEED, speed_block(SKETCH))
    return with_block(text, PEER, peer_table(BENCH))


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    means, axes = _means(RESULTS)
    out = RESULTS.parent / "summary.md"
    out.write_text(summary(means, axes) + "\n")
    print("wrote", out)
    DOC.write_text(page(DOC.read_text()))
    print("updated the generated blocks of", DOC)


if __name__ == "__main__":
    main()
