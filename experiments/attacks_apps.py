"""Application attacks study (docs/attacks.md §10): RAPPOR on the Seattle pet names, the
set-valued miners on the bundled item sets, FELIP range answers on Adult.

Run: ``.venv/bin/python experiments/attacks_apps.py [--out experiments/results/attacks]``
(about 10 minutes on two shared cores). Writes ``apps.json`` (every repetition) and
``apps.md`` (the tables of the "Poisoning attacks" study in docs/guide/studies.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.apps.felip.data import felip_table
from longldp.apps.felip.queries import generate_workload
from longldp.apps.gfim import GFIM
from longldp.apps.setvalued import (
    SVIM,
    SVSM,
    LDPMiner,
    LDPMinerParams,
    SVIMParams,
    SVSMParams,
    make_spec,
)
from longldp.attacks import apps
from longldp.data import SetData, load, seattle_pet_names

BETAS = (0.001, 0.01, 0.05, 0.1)
SEED = 20261127


def rappor_study(reps: int) -> list[dict]:
    """n = 10⁶ clients bootstrapped from the pet names; the paper's RAPPOR parameters; the
    decoder runs against the 300 most common names plus the two targets (BH, α = 5%)."""
    names, counts = seattle_pet_names()
    names = list(names)
    w = counts / counts.sum()
    proto = ll.protocols.RAPPOR(k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    absent, rare = "Zorglub", names[1000]
    cands = list(dict.fromkeys([*names[:300], absent, rare]))
    out = []
    rng = np.random.default_rng(SEED)
    for rep in range(reps):
        c = rng.multinomial(10**6, w)
        for target in (absent, rare):
            for attack in ("MGA", "RIA"):
                for beta in BETAS:
                    res = apps.promote_string(
                        proto, names, c, target, beta, attack=attack, candidates=cands,
                        rng=rng.integers(2**63), selection="lasso-sigma",
                    )  # fmt: skip
                    genuine = np.array([x != target for x in cands])
                    out.append({
                        "rep": rep, "target": "absent" if target == absent else "rank-1000",
                        "true_clients": int(c[names.index(target)]) if target in names else 0,
                        "attack": attack, "beta": beta, "m": res.m,
                        "p_before": res.p_value_before, "p_after": res.p_value_after,
                        "detected_before": res.detected_before,
                        "detected_after": res.detected_after,
                        "estimate_after": res.estimate_after,
                        "genuine_detected_before": int(res.before.detected[genuine].sum()),
                        "genuine_detected_after": int(res.after.detected[genuine].sum()),
                    })  # fmt: skip
    return out


def _bootstrap(data: SetData, n: int, rng: np.random.Generator) -> SetData:
    rows = rng.integers(0, data.n, n)
    return SetData.from_lists([data.row(int(u)) for u in rows], data.domain, data.name)


def setvalued_study(reps: int) -> list[dict]:
    """Top-10 of SVIM, SVSM (itemsets), LDPMiner (L-OSUE) and GFIM (L-SH) at ε∞ = 2, α = 0.5,
    τ = 3, on 50,000 users bootstrapped from the bundled flights item sets and from the BMS-POS
    stand-in; targets: the items ranked 31–33 (mid-frequency)."""
    rng = np.random.default_rng(SEED + 1)
    sources = {
        "flights": load("flights"),
        "bms-pos-standin": load("bms-pos-standin"),
    }
    out = []
    for label, raw in sources.items():
        data = _bootstrap(raw, 50_000, rng)
        freq = np.bincount(data.items, minlength=data.domain.size) / data.n
        order = np.argsort(-freq, kind="stable")
        targets = order[30:33]
        chain = make_spec("L-OSUE", eps_perm=2.0, alpha=0.5)
        miners = {
            "SVIM": (SVIM(10, chain, SVIMParams(), "reestimate", "norm-sub"), False),
            "SVSM": (SVSM(10, chain, SVSMParams(), "reestimate", "norm-sub"), True),
            "LDPMiner": (LDPMiner(10, chain, LDPMinerParams(), "reestimate", "norm-sub"), False),
            "GFIM": (GFIM(10, make_spec("L-SH", eps_perm=2.0, alpha=0.5)), False),
        }
        for name, (miner, itemset) in miners.items():
            for beta in (0.01, 0.05, 0.1):
                for rep in range(reps):
                    start = time.perf_counter()
                    res = apps.promote_items(
                        data, miner, targets, beta, tau=3, rng=rng.integers(2**63),
                        itemset=itemset,
                    )  # fmt: skip
                    out.append({
                        "data": label, "miner": name, "beta": beta, "rep": rep, "m": res.m,
                        "targets": targets.tolist(),
                        "target_freq": [float(freq[t]) for t in targets],
                        "kth_freq": float(freq[order[9]]),
                        "in_topk_before": float(res.in_topk_before.mean()),
                        "in_topk_after": float(res.in_topk_after.mean()),
                        "seconds": time.perf_counter() - start,
                    })  # fmt: skip
    return out


def felip_study(reps: int) -> list[dict]:
    """FELIP (OLOLOHA, ε∞ = 2, α = 0.5, τ = 3) on Adult; the first 5 queries of a λ = 2
    workload; fake rows at the middle of each query's box."""
    table = felip_table("adult")
    workload = generate_workload(table, lam=2, n_queries=5, seed=1)
    out = []
    rng = np.random.default_rng(SEED + 2)
    for q in range(5):
        for beta in (0.01, 0.05, 0.1):
            for rep in range(reps):
                r = apps.shift_range(
                    table, workload, q, beta, oracle="OLOLOHA", eps=2.0, alpha=0.5, tau=3,
                    rng=rng.integers(2**63),
                )  # fmt: skip
                out.append({
                    "query": workload.queries[q].describe(workload.schema), "beta": beta,
                    "rep": rep, "truth": float(r.truth_before.mean()),
                    "estimate": float(r.before.mean()), "shift": r.shift,
                    "truth_shift": r.truth_shift, "linear_prediction": r.linear_prediction,
                })  # fmt: skip
    return out


def _mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def tables(result: dict) -> str:
    lines = ["## RAPPOR: promoting a string (pet names, n = 10⁶, 301 candidates, BH 5%)", "",
             "| target | attack | β | fake clients | median p-value after | detected after | "
             "genuine names detected (before → after) |", "|---|---|---|---|---|---|---|"]
    rap = result["rappor"]
    for target in ("absent", "rank-1000"):
        for attack in ("MGA", "RIA"):
            for beta in BETAS:
                rows = [r for r in rap if r["target"] == target and r["attack"] == attack
                        and r["beta"] == beta]  # fmt: skip
                lines.append(
                    f"| {target} | {attack} | {beta:g} | {rows[0]['m']:,} | "
                    f"{np.median([r['p_after'] for r in rows]):.2g} | "
                    f"{sum(r['detected_after'] for r in rows)}/{len(rows)} | "
                    f"{_mean(rows, 'genuine_detected_before'):.1f} → "
                    f"{_mean(rows, 'genuine_detected_after'):.1f} |"
                )
    lines += ["", "## Set-valued miners: targets in the top-10 (input poisoning, τ = 3)", "",
              "| data | miner | β | share of (epoch, target) in top-10 before → after | "
              "target freq. / 10th freq. |", "|---|---|---|---|---|"]
    for r0 in result["setvalued"]:
        if r0["rep"]:
            continue
        rows = [r for r in result["setvalued"] if r["data"] == r0["data"]
                and r["miner"] == r0["miner"] and r["beta"] == r0["beta"]]  # fmt: skip
        lines.append(
            f"| {r0['data']} | {r0['miner']} | {r0['beta']:g} | "
            f"{_mean(rows, 'in_topk_before'):.2f} → {_mean(rows, 'in_topk_after'):.2f} | "
            f"{np.mean(r0['target_freq']):.3f} / {r0['kth_freq']:.3f} |"
        )
    lines += ["", "## FELIP: shifting range answers (Adult, OLOLOHA ε∞ = 2, α = 0.5, τ = 3)", "",
              "| query | β | true answer | estimated shift (mean ± SE) | true shift β(1 − a) |",
              "|---|---|---|---|---|"]
    fel = result["felip"]
    for r0 in fel:
        if r0["rep"]:
            continue
        rows = [r for r in fel if r["query"] == r0["query"] and r["beta"] == r0["beta"]]
        s = np.array([r["shift"] for r in rows])
        lines.append(
            f"| {r0['query']} | {r0['beta']:g} | {r0['truth']:.3f} | {s.mean():+.4f} ± "
            f"{s.std(ddof=1) / np.sqrt(s.size):.4f} | {r0['truth_shift']:+.4f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/results/attacks"))
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    result = {
        "rappor": rappor_study(args.reps),
        "setvalued": setvalued_study(max(1, args.reps // 2)),
        "felip": felip_study(args.reps),
    }
    result["seconds"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "apps.json").write_text(json.dumps(result, indent=1))
    text = tables(result)
    (args.out / "apps.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
