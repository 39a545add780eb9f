"""Heavy-hitter discovery side by side with pure-ldp 1.2.0 (docs/heavy_hitters.md, math §21.11).

Run with ``python benchmarks/bench_discovery.py [--quick] [--out PATH]`` (pure-ldp comes with
the ``bench`` extra). For PEM, TreeHist and SFP, both implementations get the same data (n
users holding W-bit values drawn from a Zipf law; pure-ldp sees them as W-character binary
strings over its default alphabet ["0", "1"]), the same ε, the same round structure where both
have it (PEM: start 4 and steps of 4 bits; TreeHist: levels of 2 bits, ε split in halves; SFP:
fragments of 8 bits, ε split in halves, CMS oracles) and the same seeds (NumPy's and Python's
global generators for pure-ldp, an explicit generator for ours), and keep the top k. Measured
over ``--reps`` seeds, per method and side:

- **recall** and **precision** of the k items returned against the true top k, and **NCR**
  (normalized cumulative rank, [WLJ19]: the true top-k items found, weighted k, k − 1, …, 1 by
  true rank, over the total weight);
- **frequency error**: mean |f̂ − f| over the returned items that are true items;
- **time**: the clients and the server of one collection, wall clock, and its ratio.

pure-ldp loops in Python per user (clients) and per user and candidate (its OLH server), so
its n is kept small (``--n``); ours runs the same n, then 100× that n for its own time.
pure-ldp's servers built with d = None call ``np.zeros(None)``, which NumPy 2 refuses: the
shim of benchmarks/bench_sketch.py is applied (the only change).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from longldp.apps import heavy_hitters as hh

sys.path.insert(0, str(Path(__file__).parent))
from bench_sketch import _patch_pure_ldp

OUT = Path(__file__).parent / "results" / "discovery.json"
W = 16
EPS = 6.0
K = 10


def population(n: int, seed: int) -> np.ndarray:
    """n W-bit values: a Zipf(1.5) rank mapped through a fixed random permutation of the
    domain (so that frequent values are not the small integers)."""
    rng = np.random.default_rng(seed)
    perm = np.random.default_rng(12345).permutation(1 << W)
    ranks = np.minimum(rng.zipf(1.5, n), 1 << W) - 1
    return perm[ranks].astype(np.uint64)


def truth(codes: np.ndarray) -> tuple[list[int], dict[int, float]]:
    vals, counts = np.unique(codes, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    freq = {int(v): float(c) / codes.size for v, c in zip(vals, counts, strict=True)}
    return [int(v) for v in vals[order][:K]], freq


def scores(found: list[int], est: list[float], top: list[int], freq: dict) -> dict:
    got = set(found[:K])
    weight = {v: K - r for r, v in enumerate(top)}
    hits = [v for v in found[:K] if v in freq]
    err = [abs(e - freq[v]) for v, e in zip(found[:K], est[:K], strict=False) if v in freq]
    return {
        "recall": len(got & set(top)) / K,
        "precision": len(got & set(top)) / max(1, len(got)),
        "ncr": sum(weight[v] for v in got if v in weight) / sum(weight.values()),
        "freq_error": float(np.mean(err)) if err else None,
        "true_items_returned": len(hits),
    }


def ours(method: str, codes: np.ndarray, seed: int) -> tuple[list[int], list[float], float]:
    opts = {
        "pem": {"start": 4, "step": 4},
        "treehist": {"start": 0, "step": 2},
        "sfp": {"frag_bits": 8, "hash_bits": 8, "m": 1024, "d": 64},
    }[method]
    t = time.perf_counter()
    got = hh.find(codes, EPS, method=method, codec=hh.integer_codec(W), k=K, rng=seed, **opts)
    secs = time.perf_counter() - t
    return [int(c) for c in got.codes], [float(e) for e in got.estimates], secs


def theirs(method: str, codes: np.ndarray, seed: int) -> tuple[list[int], list[float], float]:
    warnings.filterwarnings("ignore")
    random.seed(seed)
    np.random.seed(seed)
    strings = [format(int(c), f"0{W}b") for c in codes]
    t = time.perf_counter()
    if method == "pem":
        from pure_ldp.heavy_hitters.prefix_extending.pem_client import PEMClient
        from pure_ldp.heavy_hitters.prefix_extending.pem_server import PEMServer

        client, server = PEMClient(EPS, 4, W, 4), PEMServer(EPS, 4, W, 4)
    elif method == "treehist":
        from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient
        from pure_ldp.heavy_hitters.treehistogram.treehist_server import TreeHistServer

        client, server = TreeHistClient(EPS, 2, W), TreeHistServer(EPS, W, 2)
    else:
        from pure_ldp.core import generate_hash_funcs
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        from pure_ldp.heavy_hitters.apple_sfp.sfp_client import SFPClient
        from pure_ldp.heavy_hitters.apple_sfp.sfp_server import SFPServer

        # Its server calls alphabet.add(padding): with its default list alphabet it raises
        # AttributeError, so the binary alphabet is given as a set (the only way it runs).
        funcs = generate_hash_funcs(64, 1024)
        binary = {"0", "1"}
        client = SFPClient(EPS, 8, W, alphabet=binary, fo_client=CMSClient(EPS, funcs, 1024))
        server = SFPServer(EPS, 8, W, alphabet=binary, fo_server=CMSServer(EPS, 64, 1024))
    for s in strings:
        server.aggregate(client.privatise(s))
    found, est = server.find_heavy_hitters(k=K)
    secs = time.perf_counter() - t
    values = [int(str(h).replace("*", "0")[:W].ljust(W, "0"), 2) for h in found]
    return values, [float(e) / codes.size for e in est], secs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="users of the side-by-side runs")
    parser.add_argument("--reps", type=int, default=2, help="seeds per method")
    parser.add_argument(
        "--sfp-n", type=int, default=1000, help="users of SFP (pure-ldp's takes minutes)"
    )
    parser.add_argument("--quick", action="store_true", help="n = 1000, one seed")
    parser.add_argument("--methods", default="pem,treehist,sfp")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    n, reps = (1000, 1) if args.quick else (args.n, args.reps)
    _patch_pure_ldp()
    out: dict = {"n": n, "width": W, "eps": EPS, "k": K, "reps": reps, "methods": {}}
    for method in args.methods.split(","):
        rows = []
        size = min(n, args.sfp_n) if method == "sfp" else n
        for seed in range(reps):
            codes = population(size, seed)
            top, freq = truth(codes)
            a, ea, ta = ours(method, codes, seed)
            b, eb, tb = theirs(method, codes, seed)
            rows.append(
                {
                    "seed": seed,
                    "ours": {**scores(a, ea, top, freq), "seconds": ta},
                    "pure_ldp": {**scores(b, eb, top, freq), "seconds": tb},
                    "time_ratio": tb / ta,
                }
            )
            print(method, seed, json.dumps(rows[-1]), flush=True)
        big = population(100 * size, 99)
        _, _, t_big = ours(method, big, 99)
        out["methods"][method] = {
            "runs": rows,
            "mean": {
                side: {
                    key: float(np.mean([r[side][key] for r in rows if r[side][key] is not None]))
                    for key in ("recall", "precision", "ncr", "freq_error", "seconds")
                    if any(r[side][key] is not None for r in rows)
                }
                for side in ("ours", "pure_ldp")
            },
            "min_time_ratio": float(min(r["time_ratio"] for r in rows)),
            "n": size,
            "ours_seconds_at_100n": t_big,
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(
        json.dumps(
            {
                m: v["mean"] | {"min_time_ratio": v["min_time_ratio"]}
                for m, v in out["methods"].items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
