"""RAPPOR decoding: longldp against pure-ldp's RAPPOR server, ratios measured in one run.

Run with ``python benchmarks/bench_rappor.py [--out PATH]`` after
``pip install -e '.[dev,bench,rappor]'``. This script installs nothing.

Three measurements, all on counts drawn by the exact count-level engine:

1. decoding 10⁶ reports (k = 128, h = 2, m = 64) against 10,000 candidates (the LASSO path),
   with the default seeded-CV selection and with the one-fit noise-derived penalty;
2. longldp against pure-ldp 1.2.0's ``RAPPORServer`` decoding *the same counts* against 1,000
   candidates. pure-ldp's RAPPOR has no IRR (it debiases with f only), so the counts are drawn
   with p = 0, q = 1 (the IRR is the identity; the PRR with f = 0.5 is the only noise), and its
   hash functions are replaced by longldp's Bloom positions so that both read the same map.
   pure-ldp returns estimates without significance; its recall is measured on its top D
   estimates, D = the number longldp detects at BH 5%, i.e. at the same number of
   discoveries (so pure-ldp is even handed the right threshold);
3. one repetition of the paper's §5.2 (count-level, 10⁶ reports, 200 candidates).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from longldp.apps.rappor import decode
from longldp.apps.rappor.studies import paper_population
from longldp.protocols.rappor import RAPPOR, candidate_map

OUT = Path(__file__).resolve().parent / "results" / "rappor.json"


def timed(fn, repeats: int = 1):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def population(M: int, present: int = 100) -> tuple[list[str], np.ndarray]:
    w = np.exp(-np.arange(1, present + 1) / 20)
    return [f"v{i}" for i in range(1, M + 1)], w / w.sum()


def bench_10k(seed: int) -> dict:
    proto = RAPPOR(k=128, h=2, m=64, f=0.5, p=0.5, q=0.75)
    cands, w = population(10_000)
    t_map, idx = timed(lambda: candidate_map(cands, 2, 128, 64))
    rng = np.random.default_rng(seed)
    C = proto.sample_counts(cands[:100], rng.multinomial(10**6, w), rng, bloom_map=idx[:100])
    out = {"map_seconds": t_map}
    for sel in ("lasso-cv", "lasso-sigma"):
        t, res = timed(lambda s=sel: decode(proto, C, cands, bloom_map=idx, selection=s))
        out[sel] = {
            "seconds": t,
            "detected_true": int(res.detected[:100].sum()),
            "false_discoveries": int(res.detected[100:].sum()),
            "kept_by_lasso": int(res.summary["kept"]),
        }
    return out


def bench_vs_pure_ldp(seed: int) -> dict:
    from pure_ldp.frequency_oracles.rappor import RAPPORServer

    k, h, m, M = 128, 2, 64, 1000
    proto = RAPPOR(k=k, h=h, m=m, f=0.5, p=0.0, q=1.0)
    cands, w = population(M)
    idx = candidate_map(cands, h, k, m)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(10**6, w)
    C = proto.sample_counts(cands[:100], counts, rng, bloom_map=idx[:100])

    t_ours, res = timed(lambda: decode(proto, C, cands, bloom_map=idx, correction="bh"), 3)
    det = res.detected
    D = int(det.sum())

    def pure() -> np.ndarray:
        server = RAPPORServer(f=0.5, m=k, k=h, d=M, num_of_cohorts=m)
        server.hash_family = [
            [lambda s, j=j, t=t: int(idx[int(s), j, t]) for t in range(h)] for j in range(m)
        ]
        server.bloom_filters = [C[j, 1:].astype(np.float64) for j in range(m)]
        server.cohort_count = C[:, 0].astype(np.float64)
        server.n = int(C[:, 0].sum())
        server._update_estimates()  # builds X (Python loop) and fits the non-negative ridge
        return np.asarray(server.estimated_data, dtype=np.float64)

    t_pure, est = timed(pure)
    top = np.argsort(-est, kind="stable")[:D]
    pure_tp = int(np.sum(top < 100))
    return {
        "candidates": M,
        "longldp_seconds": t_ours,
        "pure_ldp_seconds": t_pure,
        "speedup": t_pure / t_ours,
        "longldp_detected": D,
        "longldp_recall": float(det[:100].mean()),
        "longldp_fdp": float(det[100:].sum() / max(D, 1)),
        "pure_ldp_recall_at_same_D": pure_tp / 100,
        "pure_ldp_fdp_at_same_D": float((D - pure_tp) / max(D, 1)),
        "pure_ldp_v1_estimate": float(est[0]),
        "longldp_v1_estimate": float(res.estimate[0]),
        "v1_true": int(counts[0]),
    }


def bench_52(seed: int) -> dict:
    proto = RAPPOR(k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    cands, w = paper_population()
    idx = candidate_map(cands, 2, 128, 16)
    rng = np.random.default_rng(seed)

    def one() -> int:
        C = proto.sample_counts(cands[:100], rng.multinomial(10**6, w), rng, bloom_map=idx[:100])
        return int(decode(proto, C, cands, bloom_map=idx).detected.sum())

    t, _ = timed(one, 5)
    return {"seconds_per_repetition": t}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    result: dict = {
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(),
            "versions": {
                d: metadata.version(d) for d in ("numpy", "scipy", "scikit-learn", "pure-ldp")
            },
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name, fn in (
        ("paper_52_repetition", bench_52),
        ("vs_pure_ldp_1k_candidates", bench_vs_pure_ldp),
        ("decode_10k_candidates", bench_10k),
    ):
        t0 = time.perf_counter()
        result[name] = fn(args.seed)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    result["environment"]["load_average_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
