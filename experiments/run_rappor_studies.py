"""Run the RAPPOR studies and write results, plots and a summary to experiments/results/rappor.

    nice -n 10 env PYTHONPATH=src python experiments/run_rappor_studies.py \
        [--config experiments/rappor/studies.toml] [--out experiments/results/rappor] [--only 1,2]
"""

from __future__ import annotations

import argparse
import json
import time
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from longldp.apps.rappor import studies
from longldp.data import seattle_pet_names

ROOT = Path(__file__).resolve().parent


def study1(cfg: dict, seed: int, out: Path) -> dict:
    rows = studies.basic_one_time(cfg["ns"], seed=seed)
    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.2), sharex=True)
    for ax, r in zip(np.atleast_1d(axes), rows, strict=True):
        x = np.arange(len(r["truth"]))
        ax.bar(x, r["truth"], color="0.8", label="true")
        ax.plot(x, r["estimate"], ".", ms=3, color="C0", label="estimate")
        ax.axhline(2 * r["null_sd"], color="C3", lw=0.8, ls="--", label="2 null sd")
        ax.set_title(f"N = {r['n']:,}  (TV {r['tv']:.3f})")
        ax.set_xlabel("value")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.suptitle("Basic one-time RAPPOR, ε = ln 3 (paper §5.1)")
    fig.tight_layout()
    fig.savefig(out / "study1_basic_one_time.png", dpi=120)
    plt.close(fig)
    return {"rows": rows}


def study2(cfg: dict, seed: int, out: Path) -> dict:
    res = studies.paper_52(reps=cfg["reps"], seed=seed, n=cfg["n"])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, corr in enumerate(studies.CORRECTIONS):
        det = [r[corr]["detected"] for r in res["runs"]]
        fp = [r[corr]["false_positives"] for r in res["runs"]]
        ax.scatter(np.array(det) + 0.15 * i, fp, s=12, label=corr, alpha=0.7)
    ax.scatter([47], [2], marker="*", s=150, color="k", label="paper (47, 2)")
    ax.set_xlabel("true strings detected (of 100)")
    ax.set_ylabel("false positives (of 100)")
    ax.set_title(f"§5.2, {cfg['reps']} repetitions, N = {cfg['n']:,}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "study2_paper52.png", dpi=120)
    plt.close(fig)
    return res


def study3(cfg: dict, seed: int, out: Path) -> dict:
    names, counts = seattle_pet_names()
    rows = []
    for n in cfg["ns"]:
        rows += studies.real_strings(
            names,
            counts,
            [tuple(g) for g in cfg["grid"]],
            n=n,
            reps=cfg["reps"],
            seed=seed,
            selection=cfg["selection"],
        )
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = [f"{k},{h},{m}" for k, h, m in cfg["grid"]]
    for j, n in enumerate(cfg["ns"]):
        rec = [
            np.mean(
                [
                    r["recall_top"]
                    for r in rows
                    if r["n"] == n and (r["k"], r["h"], r["m"]) == tuple(g)
                ]
            )
            for g in cfg["grid"]
        ]
        fdp = [
            np.mean(
                [r["fdp"] for r in rows if r["n"] == n and (r["k"], r["h"], r["m"]) == tuple(g)]
            )
            for g in cfg["grid"]
        ]
        x = np.arange(len(labels)) + 0.35 * j
        axes[0].bar(x, rec, width=0.35, label=f"N = {n:,}")
        axes[1].bar(x, fdp, width=0.35, label=f"N = {n:,}")
    for ax, t in zip(
        axes, ("recall of the true top 50", "false-discovery proportion"), strict=True
    ):
        ax.set_xticks(np.arange(len(labels)) + 0.175, labels, fontsize=8)
        ax.set_xlabel("(k, h, m)")
        ax.set_title(t)
        ax.legend(fontsize=7)
    axes[1].axhline(0.05, color="k", lw=0.8, ls="--")
    fig.suptitle(f"Seattle pet names: {len(names):,} candidates, BH 5%")
    fig.tight_layout()
    fig.savefig(out / "study3_real_strings.png", dpi=120)
    plt.close(fig)
    return {"rows": rows, "names": len(names), "pets": int(counts.sum())}


def study4(cfg: dict, seed: int, out: Path) -> dict:
    res = studies.longitudinal(n=cfg["n"], tau=cfg["tau"], change=cfg["change"], seed=seed)
    pc = res["per_collection"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    t = [r["t"] for r in pc]
    axes[0].plot(t, [r["detected"] for r in pc], "o-", label="true detected")
    axes[0].plot(t, [r["false_positives"] for r in pc], "s-", label="false positives")
    axes[0].set_xlabel("collection")
    axes[0].legend(fontsize=7)
    axes[0].set_title("per-collection decoding (BH 5%)")
    est = np.array([r["v1_estimate"] for r in pc])
    se = np.array([r["v1_se"] for r in pc])
    axes[1].errorbar(t, est, yerr=1.96 * se, fmt="o", ms=3, label="v1 estimate ± 1.96 SE")
    axes[1].plot(t, [r["v1_true"] for r in pc], "x", color="C3", label="v1 true")
    axes[1].set_xlabel("collection")
    axes[1].legend(fontsize=7)
    axes[1].set_title("the PRR is permanent: errors persist")
    fig.tight_layout()
    fig.savefig(out / "study4_longitudinal.png", dpi=120)
    plt.close(fig)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "rappor" / "studies.toml")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "rappor")
    ap.add_argument("--only", default="1,2,3,4")
    args = ap.parse_args()
    cfg = tomllib.loads(args.config.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {
        "1": ("study1_basic_one_time", study1, "basic_one_time"),
        "2": ("study2_paper52", study2, "paper_52"),
        "3": ("study3_real_strings", study3, "real_strings"),
        "4": ("study4_longitudinal", study4, "longitudinal"),
    }
    for key in args.only.split(","):
        name, fn, section = runs[key]
        t0 = time.perf_counter()
        res = fn(cfg[section], cfg["seed"], args.out)
        res["seconds"] = time.perf_counter() - t0
        res["config"] = cfg[section]
        (args.out / f"{name}.json").write_text(json.dumps(res, indent=1) + "\n")
        print(f"{name}: {res['seconds']:.1f} s")


if __name__ == "__main__":
    main()
