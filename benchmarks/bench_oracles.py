"""One collection of frequency estimates: longldp against multi-freq-ldpy and pure-ldp.

Run with ``python benchmarks/bench_oracles.py [--repeats N] [--out PATH]`` after
``pip install -e '.[dev,bench]'`` (``make bench`` does both). This script installs nothing.

One *collection* is: every one of n users perturbs its value once, the server aggregates the
reports and estimates the k frequencies. It is timed, on the same data, for

- longldp's per-user path: ``new_memo`` + ``perturb`` (one timestamp) + ``aggregator().add`` +
  ``estimate`` (vectorized over users);
- longldp's count-level path: ``sample_support`` + ``estimate`` (O(k), no reports);
- multi-freq-ldpy's longitudinal clients (``long_freq_est``), called once per user in a Python
  loop, then its ``*_Aggregator_MI``;
- pure-ldp's clients and servers, per user. pure-ldp has no longitudinal protocol: its nearest
  one-shot oracle at ε = ε1 stands in (DE for L-GRR, SUE for L-SUE, OUE for L-OSUE, OLH for
  OLOLOHA).

Peer paths projected to take longer than ``--max-full-seconds`` are timed on a slice of users
and extrapolated linearly; every peer path is timed on two slice sizes so that the per-user cost
can be seen to be constant. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as metadata
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import longldp as ll

N_USERS = 45_222
K = 74
EPS_PERM = 2.0
EPS_1 = 0.8
SEED = 20_240_601
ZIPF_S = 1.0
#: Sanity of an estimate: mean squared error over the k values / mean exact variance. About 1
#: for an unbiased estimator (sd ≈ sqrt(2/k) ≈ 0.16); at most about 1 after clip-and-renormalize.
MSE_RATIO_RANGE = (0.4, 2.0)
#: Users run through each peer once before timing (numba compiles its clients on first call).
WARMUP_USERS = 50

ROOT = Path(__file__).resolve().parent
DEFAULT_OUT = ROOT / "results" / "oracles.md"

PER_USER_TARGET = 3.0
AGGREGATION_TARGET = 100.0
COUNT_LEVEL_TARGET = 1000.0


# ---------------------------------------------------------------------------------- records


@dataclass
class Row:
    """Seconds for one collection by one implementation of one protocol."""

    protocol: str
    impl: str
    path: str
    seconds: float | None = None
    client_seconds: float | None = None
    server_seconds: float | None = None
    users_timed: int = 0
    runs: int = 0
    extrapolated: bool = False
    us_per_user: dict[str, float] = field(default_factory=dict)
    max_abs_err: float | None = None
    mse_ratio: float | None = None
    sane: bool | None = None
    error: str | None = None
    note: str = ""


@dataclass
class Ratio:
    """A speed-up of a longldp path over a peer path, checked against a target."""

    comparison: str
    longldp_seconds: float | None
    peer_seconds: float | None
    target: float | None
    speedup: float | None = None
    status: str = ""


@dataclass
class Spec:
    """A shared protocol: its longldp object and the matching peer entry points."""

    label: str
    proto: Any
    #: longldp one-shot twin of the pure-ldp stand-in (for its sanity bound).
    oneshot: Any
    mfl: str | None
    pure: str | None
    #: longldp twin of the multi-freq-ldpy protocol (for its sanity bound); default ``proto``.
    mfl_twin: Any = None


# ---------------------------------------------------------------------------------- data


def load_values(n: int, seed: int) -> tuple[np.ndarray, str]:
    """The users' values: Adult ``age`` if ``longldp.data`` has a loader, else seeded Zipf."""
    reason = "no loader found in longldp.data"
    try:
        data = importlib.import_module("longldp.data")
        loader = next(
            (
                getattr(data, nm)
                for nm in ("load", "load_dataset")
                if callable(getattr(data, nm, None))
            ),
            None,
        )
        if loader is not None:
            ages = np.asarray(loader("adult")["age"], dtype=np.int64)
            if ages.ndim == 1 and ages.size >= n and ages.min() >= 0 and ages.max() < K:
                note = f"Adult `age` via longldp.data.{loader.__name__}('adult')"
                return ages[:n], note + ("" if ages.size == n else f", first {n} rows")
            reason = f"Adult age from the loader has shape {ages.shape} / range outside [0, {K})"
    except Exception as exc:
        reason = f"longldp.data loader failed: {type(exc).__name__}: {exc}"
    p = np.arange(1, K + 1, dtype=np.float64) ** -ZIPF_S
    p /= p.sum()
    counts = np.floor(p * n).astype(np.int64)
    counts[np.argsort(-(p * n - counts), kind="stable")[: n - counts.sum()]] += 1
    values = np.random.default_rng(seed).permutation(np.repeat(np.arange(K), counts))
    return values, (
        f"synthetic Zipf(s={ZIPF_S}) over [0, {K}): p(v) ∝ 1/(v+1)^{ZIPF_S}, counts = n·p rounded "
        f"by largest remainder, users shuffled with seed {seed} ({reason})"
    )


def freqs(values: np.ndarray) -> np.ndarray:
    return np.bincount(values, minlength=K) / values.size


# ---------------------------------------------------------------------------------- timing


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median_of(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    times, out = [], None
    for _ in range(repeats):
        t, out = timed(fn)
        times.append(t)
    return statistics.median(times), times, out


def per_call(fn: Callable[[], Any], repeats: int, min_seconds: float = 0.2) -> float:
    """Median over ``repeats`` of the mean time of one call, in loops of >= ``min_seconds``."""

    def loop(number: int) -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - t0

    number = 1
    while loop(number) < min_seconds:
        number *= 4
    return statistics.median(loop(number) / number for _ in range(repeats))


def check_estimate(
    row: Row, est: np.ndarray, truth: np.ndarray, twin: Any, n: int, unbiased: bool = True
) -> None:
    """Max abs error, and MSE / exact variance (``twin.variance``) within MSE_RATIO_RANGE
    (post-processed estimators are only held to the upper end)."""
    err = np.asarray(est, dtype=np.float64) - truth
    row.max_abs_err = float(np.max(np.abs(err)))
    row.mse_ratio = float(np.mean(err**2) / np.mean(twin.variance(n, truth)))
    low, high = MSE_RATIO_RANGE
    row.sane = bool(
        np.isfinite(row.mse_ratio) and (low if unbiased else 0.0) <= row.mse_ratio <= high
    )


def describe_failure(exc: BaseException) -> str:
    """Exception type, message and the innermost frame in a peer package."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = next(
        (
            f
            for f in reversed(frames)
            if "multi_freq_ldpy" in f.filename or "pure_ldp" in f.filename
        ),
        frames[-1] if frames else None,
    )
    loc = ""
    if where is not None:
        parts = Path(where.filename).parts
        tail = "/".join(parts[-3:])
        loc = f" at {tail}:{where.lineno} (`{(where.line or '').strip()[:90]}`)"
    return f"{type(exc).__name__}: {exc}{loc}"


# ---------------------------------------------------------------------------------- longldp


def bench_longldp(
    spec: Spec, values: np.ndarray, repeats: int, seed: int
) -> tuple[Row, Row, Row | None]:
    proto, n = spec.proto, values.size
    truth = freqs(values)
    rng = np.random.default_rng(seed)

    def collect() -> tuple[float, float, np.ndarray, np.ndarray]:
        t_client, reports = timed(lambda: proto.perturb(values, proto.new_memo(n), rng))

        def serve() -> np.ndarray:
            agg = proto.aggregator()
            agg.add(reports)
            return agg.estimate()

        t_server, est = timed(serve)
        return t_client, t_server, est, reports

    collect()  # untimed warm-up (first-touch allocations), as the peers get theirs
    runs = [collect() for _ in range(repeats)]
    totals = [c + s for c, s, _, _ in runs]
    per_user = Row(
        spec.label,
        f"longldp {ll.__version__}",
        "per-user",
        seconds=statistics.median(totals),
        client_seconds=statistics.median(r[0] for r in runs),
        server_seconds=statistics.median(r[1] for r in runs),
        users_timed=n,
        runs=repeats,
        note="client: new_memo + perturb; server: aggregator().add + estimate(); 1 warm-up run",
    )
    per_user.us_per_user[str(n)] = per_user.seconds / n * 1e6
    check_estimate(per_user, runs[-1][2], truth, proto, n)

    true_counts = np.bincount(values, minlength=K)
    est = proto.estimate(proto.sample_support(true_counts, n, rng), n)
    secs = per_call(lambda: proto.estimate(proto.sample_support(true_counts, n, rng), n), repeats)
    count = Row(
        spec.label,
        f"longldp {ll.__version__}",
        "count-level",
        seconds=secs,
        users_timed=n,
        runs=repeats,
        note="sample_support + estimate (per-call median)",
    )
    check_estimate(count, est, truth, proto, n)

    agg_row = None
    if hasattr(proto, "g"):
        reports = runs[-1][3]
        secs, _, support = median_of(lambda: proto.support_counts(reports), repeats)
        agg_row = Row(
            spec.label,
            f"longldp {ll.__version__}",
            "aggregation",
            seconds=secs,
            server_seconds=secs,
            users_timed=n,
            runs=repeats,
            note=f"support_counts on n reports (per-user hash functions, g = {proto.g})",
        )
        check_estimate(agg_row, proto.estimate(support, n), truth, proto, n)
    return per_user, count, agg_row


# ---------------------------------------------------------------------------------- peers

#: A peer protocol: (client over a list of ints -> reports, server(reports, n) -> frequencies).
PeerFns = tuple[Callable[[list[int]], list], Callable[[list, int], np.ndarray]]


def mfl_peer(name: str) -> PeerFns:
    """multi-freq-ldpy's longitudinal client and MI aggregator, as its tutorials use them."""
    mod = importlib.import_module(f"multi_freq_ldpy.long_freq_est.{name}")
    k, ep, e1 = K, EPS_PERM, EPS_1
    if name == "L_GRR":
        client_fn = mod.L_GRR_Client

        def server(reports: list, n: int) -> np.ndarray:
            return mod.L_GRR_Aggregator_MI(reports, k, ep, e1)

    elif name in ("L_SUE", "L_OSUE"):
        client_fn = getattr(mod, f"{name}_Client")
        agg = getattr(mod, f"{name}_Aggregator_MI")

        def server(reports: list, n: int) -> np.ndarray:
            return agg(reports, ep, e1)

    elif name == "L_LH":

        def client_fn(v: int, k: int, ep: float, e1: float) -> Any:
            return mod.L_LH_Client(v, k, ep, e1, optimal=True)

        def server(reports: list, n: int) -> np.ndarray:
            # Its g is not exposed; the largest reported bucket tells it (recorded in the note).
            server.info = f"its L-OLH used g = {max(r[0] for r in reports) + 1}"  # type: ignore[attr-defined]
            return mod.L_LH_Aggregator_MI(reports, k, ep, e1, optimal=True)

    else:
        raise ValueError(f"unknown multi-freq-ldpy protocol {name!r}")

    def client(vals: list[int]) -> list:
        return [client_fn(v, k, ep, e1) for v in vals]

    return client, server


def pure_peer(name: str) -> PeerFns:
    """pure-ldp's one-shot client/server at ε1; identity index_mapper (its default is x - 1)."""
    fo = importlib.import_module("pure_ldp.frequency_oracles")
    k, eps = K, EPS_1

    def identity(x: int) -> int:
        return x

    def make() -> tuple[Any, Any]:
        if name == "DE":
            return fo.DEClient(eps, k, index_mapper=identity), fo.DEServer(
                eps, k, index_mapper=identity
            )
        if name in ("SUE", "OUE"):
            oue = name == "OUE"
            return fo.UEClient(eps, k, use_oue=oue, index_mapper=identity), fo.UEServer(
                eps, k, use_oue=oue, index_mapper=identity
            )
        if name == "OLH":
            return fo.LHClient(eps, k, use_olh=True, index_mapper=identity), fo.LHServer(
                eps, k, use_olh=True, index_mapper=identity
            )
        raise ValueError(f"unknown pure-ldp oracle {name!r}")

    pair: dict[str, Any] = {}

    def client(vals: list[int]) -> list:
        pair["client"], pair["server"] = make()
        c = pair["client"]
        return [c.privatise(v) for v in vals]

    def server(reports: list, n: int) -> np.ndarray:
        s = pair["server"]
        s.reset()
        s.aggregate_all(reports)
        return np.asarray(s.estimate_all(range(k), suppress_warnings=True), dtype=np.float64) / n

    return client, server


def bench_peer(
    label: str,
    impl: str,
    fns: PeerFns,
    values: np.ndarray,
    twin: Any,
    repeats: int,
    slices: Sequence[int],
    max_full: float,
    seed: int,
    note: str,
    unbiased: bool,
) -> Row:
    row = Row(label, impl, "per-user", note=note)
    n = values.size
    vals = values.tolist()
    client, server = fns
    random.seed(seed)
    np.random.seed(seed)  # the peers draw from the global generators

    def run(m: int) -> tuple[float, float, np.ndarray]:
        t_c, reports = timed(lambda: client(vals[:m]))
        t_s, est = timed(lambda: server(reports, m))
        return t_c, t_s, est

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_c, t_s, _ = run(min(WARMUP_USERS, n))
            row.note += f"; first {min(WARMUP_USERS, n)} users (warm-up/JIT) {t_c + t_s:.2f} s"
            sliced: list[tuple[int, float, float, np.ndarray]] = []
            for m in sorted({s for s in slices if s < n}):
                t_c, t_s, est = run(m)
                sliced.append((m, t_c, t_s, est))
                row.us_per_user[str(m)] = (t_c + t_s) / m * 1e6
            projected = (sliced[-1][1] + sliced[-1][2]) / sliced[-1][0] * n if sliced else 0.0
            if projected <= max_full:
                reps = max(1, min(repeats, int(max_full // max(projected, 1e-9))))
                runs = [run(n) for _ in range(reps)]
                row.client_seconds = statistics.median(r[0] for r in runs)
                row.server_seconds = statistics.median(r[1] for r in runs)
                row.seconds = statistics.median(r[0] + r[1] for r in runs)
                row.users_timed, row.runs = n, reps
                row.us_per_user[str(n)] = row.seconds / n * 1e6
                check_estimate(row, runs[-1][2], freqs(values), twin, n, unbiased)
            else:
                m, t_c, t_s, est = sliced[-1]
                row.client_seconds, row.server_seconds = t_c * n / m, t_s * n / m
                row.seconds = row.client_seconds + row.server_seconds
                row.users_timed, row.runs, row.extrapolated = m, 1, True
                check_estimate(row, est, freqs(values[:m]), twin, m, unbiased)
    except Exception as exc:
        row.error = describe_failure(exc)
        print(f"!! {impl} / {label}: failed: {row.error}", file=sys.stderr)
    if getattr(server, "info", None):
        row.note += f"; {server.info}"  # type: ignore[attr-defined]
    return row


# ---------------------------------------------------------------------------------- report


def ratio(comparison: str, ours: Row | None, peer: Row | None, target: float | None) -> Ratio:
    r = Ratio(
        comparison,
        ours.seconds if ours else None,
        peer.seconds if peer else None,
        target,
    )
    if peer is None or peer.error or peer.seconds is None:
        r.status = (
            f"n/a: peer failed ({peer.error.split(':')[0]})" if peer and peer.error else "n/a"
        )
        return r
    if ours is None or ours.seconds is None:
        r.status = "n/a"
        return r
    r.speedup = peer.seconds / ours.seconds
    if target is not None:
        r.status = "met" if r.speedup >= target else "NOT met"
    if peer.extrapolated:
        r.status = (r.status + " (peer extrapolated)").strip()
    return r


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        if dist == "longldp":
            return f"{ll.__version__} (from {Path(ll.__file__).parent}, not pip-installed)"
        return "not installed"


def cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "versions": {
            d: version(d)
            for d in (
                "numpy",
                "scipy",
                "longldp",
                "multi-freq-ldpy",
                "pure-ldp",
                "xxhash",
                "numba",
                "scikit-learn",
                "statsmodels",
            )
        },
        "env_vars": {
            v: os.environ.get(v)
            for v in (
                "OPENBLAS_CORETYPE",
                "OPENBLAS_L2_SIZE",
                "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS",
                "MKL_NUM_THREADS",
            )
        },
        "git_commit": _git_commit(),
        "load_average_1_5_15_min": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    try:
        from threadpoolctl import threadpool_info

        env["threadpools"] = threadpool_info()
    except ImportError:
        env["threadpools"] = "threadpoolctl not installed; numpy build BLAS below"
    try:
        cfg = np.show_config(mode="dicts")
        env["numpy_blas"] = cfg.get("Build Dependencies", {}).get("blas")
    except Exception as exc:
        env["numpy_blas"] = f"unavailable: {exc}"
    return env


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def fmt_s(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.2f} ms"
    return f"{x * 1e6:.1f} µs"


def fmt_x(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}×" if x >= 100 else f"{x:.1f}×"


def render(meta: dict[str, Any], rows: list[Row], ratios: list[Ratio], env: dict) -> str:
    out = [
        "# Frequency-oracle benchmark: longldp vs multi-freq-ldpy and pure-ldp",
        "",
        f"One collection (every user perturbs once, then aggregate and estimate), n = "
        f"{meta['n']:,} users, k = {meta['k']}, ε∞ = {meta['eps_perm']}, ε1 = {meta['eps_1']} "
        f"(α = {meta['alpha']:.2f}). Data: {meta['data']}. {meta['timestamp']}; "
        f"{meta['benchmark_seconds']:g} s in all; load average at start "
        f"{', '.join(f'{x:.2f}' for x in meta['load_average_at_start'] or ())} "
        f"on {os.cpu_count()} CPUs (other processes slow the timings).",
        "",
        f"- Fast paths: median of {meta['repeats']} runs (`time.perf_counter`). Peer paths "
        f"projected above {meta['max_full_seconds']:g} s are timed on a slice of users and "
        "extrapolated linearly to n (marked *extrap.*); every peer path is also timed on slices "
        f"of {', '.join(f'{s:,}' for s in meta['slices'])} users: equal µs/user means linear cost.",
        "- pure-ldp has **no longitudinal protocols**: its nearest one-shot oracle at ε = ε1 "
        "stands in (DE for L-GRR, SUE for L-SUE, OUE for L-OSUE, OLH for OLOLOHA).",
        "- multi-freq-ldpy clients do not memoize; one timestamp is one collection, so that does "
        "not change the timing. Its numba-jitted clients are warmed up before timing (the "
        "first-call JIT cost is in the note).",
        '- L-GRR and OLOLOHA run with `calibration="paper"` (the peers\' p2 formula) and '
        '`"exact"` (longldp\'s default); the cost is the same.',
        "- Sanity: max |f̂ − f| over the k values, and MSE / Var = mean (f̂ − f)² over mean exact "
        "variance of the protocol (for pure-ldp, of longldp's one-shot oracle at ε1) at the "
        f"number of users timed: ≈ 1 for unbiased estimates (sane: {MSE_RATIO_RANGE[0]:g} to "
        f"{MSE_RATIO_RANGE[1]:g}), ≤ 1 after clip-and-renormalize (multi-freq-ldpy's MI "
        "aggregators do that; held to the upper end only).",
        "",
        "## Seconds per collection",
        "",
        "| protocol | implementation | path | s / collection | client | server | users timed "
        "| µs/user by users timed | max abs err / MSE÷Var | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.error:
            out.append(
                f"| {r.protocol} | {r.impl} | {r.path} | **failed** | | | | | | {cell(r.error)} |"
            )
            continue
        per_user = ", ".join(f"{int(m):,}: {us:.2f}" for m, us in r.us_per_user.items())
        err = "—"
        if r.max_abs_err is not None:
            err = f"{r.max_abs_err:.4f} / {r.mse_ratio:.2f}{'' if r.sane else ' **INSANE**'}"
        timed_users = f"{r.users_timed:,} ×{r.runs}" + (" *extrap.*" if r.extrapolated else "")
        out.append(
            f"| {r.protocol} | {r.impl} | {r.path} | {fmt_s(r.seconds)} "
            f"| {fmt_s(r.client_seconds)} | {fmt_s(r.server_seconds)} | {timed_users} "
            f"| {per_user} | {err} | {cell(r.note)} |"
        )
    out += [
        "",
        "## Speed-ups and targets",
        "",
        "| comparison | longldp | peer | speed-up | target | status |",
        "|---|---|---|---|---|---|",
    ]
    for q in ratios:
        tgt = f"≥ {q.target:,.0f}×" if q.target else "—"
        out.append(
            f"| {cell(q.comparison)} | {fmt_s(q.longldp_seconds)} | {fmt_s(q.peer_seconds)} "
            f"| {fmt_x(q.speedup)} | {tgt} | {cell(q.status)} |"
        )
    failures: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r.error:
            failures.setdefault((r.impl, r.error), []).append(r.protocol)
    out += ["", "## Peer failures", ""]
    out += [
        f"- {impl} ({', '.join(protocols)}): {error}"
        for (impl, error), protocols in failures.items()
    ] or ["- none"]
    out += ["", "## Environment", ""]
    for key, val in env.items():
        if key == "threadpools" and isinstance(val, list):
            for pool in val:
                out.append(
                    f"- threadpool: {pool.get('internal_api')} {pool.get('version')} "
                    f"num_threads={pool.get('num_threads')} "
                    f"architecture={pool.get('architecture')} ({pool.get('filepath')})"
                )
        else:
            out.append(f"- {key}: {json.dumps(val, default=str)}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------- main


def build_specs() -> list[Spec]:
    def lp(name: str, **kw: Any) -> Any:
        return ll.protocol(name, k=K, eps_perm=EPS_PERM, eps_1=EPS_1, **kw)

    def one(name: str) -> Any:
        return ll.protocol(name, k=K, eps=EPS_1)

    # multi-freq-ldpy's L-OLH picks g by its own closed form (it may differ from longldp's
    # integer argmin): bound its error by the larger V* of g = 2 and longldp's optimal g.
    lh_twin = max(
        (lp("BiLOLOHA", calibration="paper"), lp("OLOLOHA", calibration="paper")),
        key=lambda p: p.approx_variance(N_USERS),
    )

    return [
        Spec("L-GRR (paper)", lp("L-GRR", calibration="paper"), one("GRR"), "L_GRR", "DE"),
        Spec("L-GRR (exact)", lp("L-GRR", calibration="exact"), one("GRR"), "L_GRR", "DE"),
        Spec("L-SUE", lp("L-SUE"), one("SUE"), "L_SUE", "SUE"),
        Spec("L-OSUE", lp("L-OSUE"), one("OUE"), "L_OSUE", "OUE"),
        Spec(
            "OLOLOHA (paper)",
            lp("OLOLOHA", calibration="paper"),
            one("OLH"),
            "L_LH",
            "OLH",
            lh_twin,
        ),
        Spec(
            "OLOLOHA (exact)",
            lp("OLOLOHA", calibration="exact"),
            one("OLH"),
            "L_LH",
            "OLH",
            lh_twin,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per fast path (median)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown output (.json beside)")
    ap.add_argument("--n", type=int, default=N_USERS, help="number of users")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument(
        "--slices", default="5000,10000", help="slice sizes for the linearity check (comma list)"
    )
    ap.add_argument(
        "--max-full-seconds",
        type=float,
        default=10.0,
        help="time a peer path on all n users only if projected below this; else extrapolate",
    )
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.n < 2:
        ap.error("--repeats must be >= 1 and --n >= 2")
    slices = [int(s) for s in args.slices.split(",") if s.strip()]

    values, data_note = load_values(args.n, args.seed)
    n = values.size
    specs = build_specs()
    mfl_version, pure_version = version("multi-freq-ldpy"), version("pure-ldp")
    print(f"n={n:,} k={K} eps_perm={EPS_PERM} eps_1={EPS_1}; data: {data_note}", file=sys.stderr)

    rows: list[Row] = []
    ratios: list[Ratio] = []
    peer_cache: dict[tuple[str, str], Row] = {}
    load_at_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    t_start = time.perf_counter()
    for spec in specs:
        print(f"-- {spec.label}", file=sys.stderr)
        per_user, count, agg = bench_longldp(spec, values, args.repeats, args.seed)
        rows += [per_user, count] + ([agg] if agg else [])
        peers: list[tuple[str, Row]] = []
        for impl, key, fns_of, twin, note, unbiased in (
            (
                f"multi-freq-ldpy {mfl_version}",
                spec.mfl,
                mfl_peer,
                spec.mfl_twin or spec.proto,
                f"{spec.mfl}_Client per user + {spec.mfl}_Aggregator_MI",
                False,
            ),
            (
                f"pure-ldp {pure_version}",
                spec.pure,
                pure_peer,
                spec.oneshot,
                f"one-shot {spec.pure} at ε={EPS_1} (not longitudinal); privatise per user + "
                "aggregate_all + estimate_all",
                True,
            ),
        ):
            if key is None:
                continue
            cache_key = (impl, key)
            if cache_key not in peer_cache:
                try:
                    fns = fns_of(key)
                except Exception as exc:
                    failed = Row(spec.label, impl, "per-user", note=note)
                    failed.error = describe_failure(exc)
                    print(f"!! {impl} / {spec.label}: failed: {failed.error}", file=sys.stderr)
                    peer_cache[cache_key] = failed
                else:
                    peer_cache[cache_key] = bench_peer(
                        spec.label,
                        impl,
                        fns,
                        values,
                        twin,
                        args.repeats,
                        slices,
                        args.max_full_seconds,
                        args.seed,
                        note,
                        unbiased,
                    )
                rows.append(peer_cache[cache_key])
            else:
                shared = peer_cache[cache_key]
                rows.append(
                    Row(**{**asdict(shared), "protocol": spec.label, "note": "same run as above"})
                )
            peers.append((impl, peer_cache[cache_key]))
        for impl, peer in peers:
            is_mfl = impl.startswith("multi-freq-ldpy")
            ratios.append(
                ratio(
                    f"{spec.label}: per-user vs {impl}",
                    per_user,
                    peer,
                    PER_USER_TARGET if is_mfl else None,
                )
            )
        if agg is not None:
            for impl, peer in peers:
                peer_agg = None
                if peer.error is None and peer.server_seconds is not None:
                    peer_agg = Row(
                        **{**asdict(peer), "seconds": peer.server_seconds, "path": "aggregation"}
                    )
                ratios.append(
                    ratio(
                        f"{spec.label}: aggregation (support_counts) vs {impl} per-user hashing",
                        agg,
                        peer_agg if peer_agg else peer,
                        AGGREGATION_TARGET,
                    )
                )
        for impl, peer in peers:
            ratios.append(
                ratio(f"{spec.label}: count-level vs {impl}", count, peer, COUNT_LEVEL_TARGET)
            )
    elapsed = time.perf_counter() - t_start

    meta = {
        "n": n,
        "k": K,
        "eps_perm": EPS_PERM,
        "eps_1": EPS_1,
        "alpha": EPS_1 / EPS_PERM,
        "data": data_note,
        "seed": args.seed,
        "repeats": args.repeats,
        "slices": slices,
        "max_full_seconds": args.max_full_seconds,
        "mse_ratio_range": MSE_RATIO_RANGE,
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "benchmark_seconds": round(elapsed, 1),
        "load_average_at_start": load_at_start,
        "g": {s.label: getattr(s.proto, "g", None) for s in specs},
    }
    env = environment()
    text = render(meta, rows, ratios, env)
    print(text)
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    payload = {
        "meta": meta,
        "rows": [asdict(r) for r in rows],
        "ratios": [asdict(q) for q in ratios],
        "environment": env,
    }
    out.with_suffix(".json").write_text(
        json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8"
    )
    print(f"wrote {out} and {out.with_suffix('.json')} in {elapsed:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
