"""Benchmark: shuffle accounting at n = 10⁶, and the MLE post-processing at k = 1,000.

1. The numerical clone bound ([FMT21] Theorem 3.2; docs/math.md §17.2) at n = 10⁶, δ = 10⁻⁶:
   ``longldp.shuffle.clones_epsilon`` (one vectorized pass over the clone counts per
   evaluation, a safeguarded Newton search) against a straightforward implementation measured
   in the same run: the same exact sum of (17.3), but one scalar SciPy cdf/pmf call per clone
   count in a Python loop, inside a plain bisection over ε (``--bisections`` steps).
   Target: under 2 s at n = 10⁶.
2. Maximum likelihood (``longldp.postprocess.mle``, docs/math.md §5.3) at k = 1,000 against
   IBU (EM; ``postprocess.ibu`` with its defaults: at most 10,000 iterations) on the same GRR
   estimates, with the log-likelihood per report the MLE gains over IBU's last iterate, and
   the composite MLE on OUE estimates. Target: under 1 s. A run takes about a minute, nearly
   all of it the straightforward clone bound.

Prints a Markdown table and writes it, with JSON, under ``benchmarks/results/``; never fails on
a miss (timings on a shared machine vary).

    python benchmarks/bench_shuffle.py [--eps0 0.8,2,4] [--baseline-eps0 2] [--bisections 24]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
from scipy import stats

import longldp as ll
from longldp import postprocess as pp
from longldp import shuffle as sh

N, DELTA, K = 1_000_000, 1e-6, 1000


def straightforward_epsilon(eps0: float, n: int, delta: float, bisections: int) -> float:
    """The clone bound without vectorization: a Python loop over the clone counts c, one
    scalar SciPy call per quantity, and bisection over ε (returns the bracket's upper end)."""
    p = math.exp(-eps0)
    alpha = math.exp(eps0) / (math.exp(eps0) + 1)
    lo_c = int(stats.binom.ppf(1e-12, n - 1, p))
    hi_c = int(stats.binom.ppf(1 - 1e-12, n - 1, p))
    tail = float(stats.binom.cdf(lo_c - 1, n - 1, p) + stats.binom.sf(hi_c, n - 1, p))

    def delta_of(eps: float) -> float:
        R = (math.exp(eps + eps0) - 1) / (math.exp(eps0) - math.exp(eps))
        total = tail
        for c in range(lo_c, hi_c + 1):
            kappa = math.floor((c + 1) / (1 + R))
            b = stats.binom.pmf(kappa, c, 0.5)
            F = stats.binom.cdf(kappa - 1, c, 0.5)
            h = (alpha - math.exp(eps) * (1 - alpha)) * b - math.expm1(eps) * F
            total += stats.binom.pmf(c, n - 1, p) * max(h, 0.0)
        return total

    lo, hi = 0.0, eps0
    for _ in range(bisections):
        mid = 0.5 * (lo + hi)
        if delta_of(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps0", default="0.8,2,4")
    parser.add_argument("--baseline-eps0", type=float, default=2.0)
    parser.add_argument("--bisections", type=int, default=24)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/shuffle.md"))
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# Shuffle accounting and MLE (benchmarks/bench_shuffle.py)",
        "",
        f"Load average at start: {load:.1f} (2 cores shared).",
        "",
        f"## Numerical clone bound, n = {N:,}, δ = {DELTA:g}",
        "",
        "| ε0 | ε (longldp) | time | δ evaluations |",
        "|---:|---:|---:|---:|",
    ]
    record: dict = {"n": N, "delta": DELTA, "bound": [], "mle": []}
    for eps0 in [float(x) for x in args.eps0.split(",")]:
        sh._clones_epsilon.cache_clear()
        seconds, eps = _timed(lambda e=eps0: sh.clones_epsilon(e, N, DELTA))
        curve = sh._CloneCurve(eps0, N, sh.TAIL_FRACTION * DELTA)
        sh._search(curve, DELTA, 0.0, eps0, curve(0.0))
        lines.append(f"| {eps0:g} | {eps:.6g} | {seconds:.3f} s | {curve.evaluations} |")
        record["bound"].append({"eps0": eps0, "eps": eps, "seconds": seconds})
    b0 = args.baseline_eps0
    sh._clones_epsilon.cache_clear()
    fast_s, fast = _timed(lambda: sh.clones_epsilon(b0, N, DELTA))
    slow_s, slow = _timed(lambda: straightforward_epsilon(b0, N, DELTA, args.bisections))
    lines += [
        "",
        f"Straightforward implementation at ε0 = {b0:g} ({args.bisections} bisections, one "
        f"scalar SciPy call per clone count): {slow_s:.1f} s, ε = {slow:.6g}; longldp "
        f"{fast_s:.3f} s, ε = {fast:.6g}: **{slow_s / fast_s:.0f}×** faster, "
        f"|Δε| = {abs(slow - fast):.1e} (the bisection's resolution is "
        f"{b0 / 2**args.bisections:.1e}).",
    ]
    record["baseline"] = {
        "eps0": b0,
        "straightforward_seconds": slow_s,
        "straightforward_eps": slow,
        "longldp_seconds": fast_s,
        "longldp_eps": fast,
    }

    rng = np.random.default_rng(2026)
    truth = rng.dirichlet(np.full(K, 0.5))
    counts = rng.multinomial(N, truth)
    lines += [
        "",
        f"## Maximum likelihood at k = {K:,} (n = {N:,})",
        "",
        "| channel | mle | IBU (EM) | speed-up | max abs(mle − IBU) | log-lik. gain | "
        "max abs(mle − truth) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, params in (("GRR", {"eps": 1.0}), ("OUE", {"eps": 1.0})):
        proto = ll.protocol(name, k=K, **params)
        raw = proto.estimate(proto.sample_support(counts, N, rng), N)
        ch = pp.ChannelInfo(P1=proto.P1, P0=proto.P0, n=N, grr_type=name == "GRR")
        mle_s, mle = _timed(lambda r=raw, c=ch: pp.mle(r, 1.0, c))
        err = float(np.abs(mle - counts / N).max())
        if ch.grr_type:
            ibu_s, ibu = _timed(lambda r=raw, c=ch: pp.ibu(r, 1.0, c))
            gap = float(np.abs(mle - ibu).max())
            # Multinomial log-likelihood per report (docs/math.md §5.3): MLE minus IBU's.
            obs = ch.P0 + raw * (ch.P1 - ch.P0)
            obs /= obs.sum()
            gain = float(
                obs
                @ (np.log(ch.P0 + (ch.P1 - ch.P0) * mle) - np.log(ch.P0 + (ch.P1 - ch.P0) * ibu))
            )
            lines.append(
                f"| {name} ε = 1 | {mle_s * 1e3:.2f} ms | {ibu_s:.2f} s | "
                f"{ibu_s / mle_s:,.0f}× | {gap:.1e} | {gain:.1e} | {err:.1e} |"
            )
            record["mle"].append(
                {
                    "channel": name,
                    "mle_seconds": mle_s,
                    "ibu_seconds": ibu_s,
                    "gap": gap,
                    "loglik_gain_per_report": gain,
                }
            )
        else:
            lines.append(
                f"| {name} ε = 1 (composite) | {mle_s * 1e3:.2f} ms | - | - | - | - | {err:.1e} |"
            )
            record["mle"].append({"channel": name, "mle_seconds": mle_s})
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
