"""The RAPPOR paper's studies ([ERL14] §5) and a real-string and a longitudinal study.

Each function runs at count level (the exact engine of :meth:`RAPPOR.sample_counts`, or the
per-client population path with memos where the budget per client matters) and returns plain
dicts/lists for the experiment scripts to save and plot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from longldp import privacy
from longldp.apps.rappor.decode import decode
from longldp.protocols.rappor import RAPPOR, RapporOneHotOneTime, candidate_map

CORRECTIONS = ("bonferroni", "bh", "none")


# ---------------------------------------------------------------------- study 1 (§5.1)
def basic_one_time(ns: Sequence[int], seed: int = 0, k: int = 100) -> list[dict]:
    """Basic one-time RAPPOR (one-hot, f = 0, p = 0.5, q = 0.75, ε = ln 3) on a rounded
    Normal(50, 10) clipped to 0..k−1: true and estimated histograms per N."""
    proto = RapporOneHotOneTime(k=k, f=0.0, p=0.5, q=0.75)
    rng = np.random.default_rng(seed)
    out = []
    for n in ns:
        values = np.clip(np.rint(rng.normal(50, 10, size=n)), 0, k - 1).astype(np.int64)
        truth = np.bincount(values, minlength=k)
        est = proto.estimate(proto.sample_support(truth, n, rng), n) * n
        err = est - truth
        out.append(
            {
                "n": n,
                "truth": truth.tolist(),
                "estimate": est.tolist(),
                "l1_over_n": float(np.abs(err).sum() / n),
                "tv": float(np.abs(err).sum() / (2 * n)),
                "max_abs_error": float(np.abs(err).max()),
                "null_sd": float(math.sqrt(proto.P0 * (1 - proto.P0) * n) / (proto.P1 - proto.P0)),
                "peak": float(truth.max()),
                "eps": proto.eps_1,
            }
        )
    return out


# ---------------------------------------------------------------------- study 2 (§5.2)
def paper_population(n: int = 10**6, M: int = 100) -> tuple[list[str], np.ndarray]:
    """v1..vM with P ∝ e^(−i/20) (google/rappor's ``exp`` generator), plus M absent ones."""
    w = np.exp(-np.arange(1, M + 1) / 20)
    return [f"v{i}" for i in range(1, 2 * M + 1)], w / w.sum()


def paper_52(reps: int = 50, seed: int = 0, n: int = 10**6) -> dict:
    """§5.2: N = 10⁶, k = 128, h = 2, m = 16, f = 0.5, p = 0.5, q = 0.75, 200 candidates.
    Per repetition: detections and false positives under each correction, and the SEs."""
    proto = RAPPOR(k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    cands, w = paper_population(n)
    idx = candidate_map(cands, proto.h, proto.k, proto.m)
    rng = np.random.default_rng(seed)
    runs = []
    t0 = time.perf_counter()
    for r in range(reps):
        counts = rng.multinomial(n, w)
        C = proto.sample_counts(cands[:100], counts, rng, bloom_map=idx[:100])
        res = decode(proto, C, cands, bloom_map=idx, correction="none")
        row: dict = {"rep": r}
        freq = counts / n
        for corr in CORRECTIONS:
            det = res.corrected(corr, 0.05).detected
            missed = freq[~det[:100]]
            row[corr] = {
                "detected": int(det[:100].sum()),
                "false_positives": int(det[100:].sum()),
                "largest_missed_freq": float(missed.max()) if missed.size else 0.0,
                "smallest_found_freq": float(freq[det[:100]].min()) if det[:100].any() else 1.0,
            }
        row["se_min"] = float(np.nanmin(res.std_error))
        row["se_max"] = float(np.nanmax(res.std_error))
        top = np.argsort(-res.estimate)[:50]
        refit = decode(proto, C, [cands[i] for i in top], bloom_map=idx[top], correction="bh")
        row["se_top50_min"] = float(np.nanmin(refit.std_error))
        row["se_top50_max"] = float(np.nanmax(refit.std_error))
        row["v1_estimate"], row["v1_true"] = float(res.estimate[0]), int(counts[0])
        runs.append(row)
    seconds = (time.perf_counter() - t0) / reps
    qs, ps = proto.effective
    summary = {
        corr: {
            "detected_mean": float(np.mean([r[corr]["detected"] for r in runs])),
            "detected_sd": float(np.std([r[corr]["detected"] for r in runs], ddof=1)),
            "fp_mean": float(np.mean([r[corr]["false_positives"] for r in runs])),
            "fp_max": int(np.max([r[corr]["false_positives"] for r in runs])),
            "largest_missed_freq_max": float(
                np.max([r[corr]["largest_missed_freq"] for r in runs])
            ),
        }
        for corr in CORRECTIONS
    }
    summary["expected_se"] = math.sqrt(ps * (1 - ps) * n) / ((qs - ps) * math.sqrt(proto.h))
    summary["se_all_range"] = [
        float(np.min([r["se_min"] for r in runs])),
        float(np.max([r["se_max"] for r in runs])),
    ]
    summary["se_top50_range"] = [
        float(np.min([r["se_top50_min"] for r in runs])),
        float(np.max([r["se_top50_max"] for r in runs])),
    ]
    summary["seconds_per_repetition"] = seconds
    summary["paper"] = {"detected": 47, "false_positives": 2, "se_table1": [2801, 2855]}
    return {"runs": runs, "summary": summary, "eps_1": proto.eps_1, "eps_inf": proto.eps_perm}


# ---------------------------------------------------------------------- study 3 (real strings)
def real_strings(
    names: Sequence[str],
    weights: np.ndarray,
    grid: Sequence[tuple[int, int, int]],
    n: int = 10**6,
    reps: int = 2,
    seed: int = 0,
    top: int = 50,
    selection: str = "lasso-sigma",
    f: float = 0.5,
    p: float = 0.5,
    q: float = 0.75,
) -> list[dict]:
    """Bootstrap n clients from the real names, decode against the whole dictionary (BH 5%):
    recall of the true top ``top`` and the false-discovery proportion, per (k, h, m)."""
    probs = np.asarray(weights, dtype=np.float64)
    probs = probs / probs.sum()
    out = []
    rng = np.random.default_rng(seed)
    for k, h, m in grid:
        proto = RAPPOR(k=k, h=h, m=m, f=f, p=p, q=q)
        idx = candidate_map(names, h, k, m)
        for r in range(reps):
            counts = rng.multinomial(n, probs)
            present = np.flatnonzero(counts)
            C = proto.sample_counts(
                [names[i] for i in present], counts[present], rng, bloom_map=idx[present]
            )
            t0 = time.perf_counter()
            res = decode(proto, C, names, bloom_map=idx, correction="bh", selection=selection)
            secs = time.perf_counter() - t0
            det = res.detected
            true_top = np.argsort(-counts, kind="stable")[:top]
            false = det & (counts == 0)
            out.append(
                {
                    "k": k,
                    "h": h,
                    "m": m,
                    "rep": r,
                    "n": n,
                    "candidates": len(names),
                    "detected": int(det.sum()),
                    "recall_top": float(det[true_top].mean()),
                    "false_discoveries": int(false.sum()),
                    "fdp": float(false.sum() / max(det.sum(), 1)),
                    "kept_by_lasso": int(res.summary["kept"]),
                    "decode_seconds": secs,
                    "eps_1": proto.eps_1,
                    "eps_inf": proto.eps_perm,
                }
            )
    return out


# ---------------------------------------------------------------------- study 4 (longitudinal)
def longitudinal(
    n: int = 200_000,
    tau: int = 20,
    change: float = 0.05,
    seed: int = 0,
) -> dict:
    """The same clients report τ times (§5.2 parameters and population); at each collection a
    share ``change`` of them draw a new value. Per collection: BH decoding; per client: the
    spent budget of its accounting, min(t·ε1, d·ε∞) with d distinct PRRs (``proto.accounting``,
    the one rule of docs/math.md §4), against τ fresh reports' τ·ε1."""
    proto = RAPPOR(k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    cands, w = paper_population(n)
    idx = candidate_map(cands, proto.h, proto.k, proto.m)
    rng = np.random.default_rng(seed)
    values = rng.choice(100, size=n, p=w)
    memo = proto.new_memo(n)
    per_t = []
    names = np.array(cands[:100], dtype=object)
    for t in range(tau):
        if t:
            movers = rng.random(n) < change
            values[movers] = rng.choice(100, size=int(movers.sum()), p=w)
        C = proto.perturb_support(names[values], memo, rng)
        res = decode(proto, C, cands, bloom_map=idx, correction="bh")
        det = res.detected
        truth = np.bincount(values, minlength=100)
        per_t.append(
            {
                "t": t + 1,
                "detected": int(det[:100].sum()),
                "false_positives": int(det[100:].sum()),
                "v1_estimate": float(res.estimate[0]),
                "v1_true": int(truth[0]),
                "v1_se": float(res.std_error[0]),
            }
        )
    spent = proto.spent_budget(memo)
    d = spent["memos"]
    accounting = proto.accounting  # per memo: min(t·ε1, d·ε∞)
    fresh = accounting.worst_case(tau)  # τ reports that memoize nothing: τ·ε1
    hist = np.bincount(d)
    return {
        "per_collection": per_t,
        "eps_1": proto.eps_1,
        "eps_inf": proto.eps_perm,
        "distinct_prrs_histogram": hist.tolist(),
        "spent_max": float(spent["epsilon"].max()),
        "spent_mean": float(spent["epsilon"].mean()),
        "bound_holds": bool(np.all(spent["epsilon"] <= fresh * (1 + 1e-12))),
        "share_capped_by_prr": float(np.mean(accounting.spent(tau, d) < fresh)),
        "tau_eps_1": tau * proto.eps_1,
        "composition_check": privacy.spent_budget(tau, 1, proto.eps_1, proto.eps_perm).epsilon,
    }
