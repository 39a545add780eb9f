"""The ``changing`` kind: data that changes, utility against what users really spent (math §19).

Every family side by side on the same streams: the LDP-IDS methods (w-event), THRESH,
CHANGES-TREE and DDRM (change-based) and the memoizing chains of the registry (L-GRR, L-OSUE,
LOLOHA, dBitFlipPM, …) or one-shot oracles. One cell = one (stream, repetition, protocol):
the stream is drawn once per (stream, repetition) and shared by every protocol; the protocol
runs per user over it, and the row holds

- utility: ``mse_avg`` (MSE of the frequencies, averaged over the epochs, math §6.2),
  ``mse_tail`` (over the last quarter of the epochs) and ``delay``: the mean number of epochs
  after each large change of the truth (an epoch whose true L1 change is at least half of the
  largest one) until the estimate's L1 error is back under twice its median over the (up to
  16) epochs before that change (NaN when the truth never changes; τ − t when it never comes
  back);
- spent privacy from the ledger (`longldp.privacy.ledger`): median, 99th percentile and maximum
  of each user's figure (``spent_*``: the protocol's own rule) and over the whole horizon
  (``lifetime_*``), with the ``rule`` (docs/math.md §19.6 says what each compares).

Study keys (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    streams = [
      {label = "steady-0.05", source = "synthetic", n = 5000, k = 8, tau = 64,
       rate = 0.05, pattern = "steady", period = 16},
      {label = "industry", source = "wage-panel", attribute = "industry"},
      {label = "Sin", source = "ldp-ids", curve = "Sin", n = 5000, tau = 128},
    ]
    protocols = [
      {name = "LBD", eps_window = 1.0, w = 10},
      {name = "L-GRR", eps_perm = 2.0, eps_1 = 0.8},
      {name = "CHANGES-TREE", eps_node = 0.5, eps_0 = 1.0, label = "tree"},
      {name = "THRESH", eps = 2.0, max_votes = 8, max_updates = 8},
      {name = "DDRM", eps = 1.0},
    ]

A protocol entry is ``name`` (a registry protocol, or THRESH, CHANGES-TREE, DDRM, whose
kernels run directly), an optional ``label`` and the protocol's parameters. Random streams
(`longldp.experiments.seeding`): stream s of repetition r ``(0, s, r)``; the protocol's
randomness ``(2, s, r, p)``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

import longldp as ll
from longldp.data import binary_stream, changing_stream, ldp_ids_curve, load_panel
from longldp.data.streams import PATTERNS
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, StudyKind
from longldp.privacy import ledger
from longldp.protocols.streams import changes_tree, ddrm, thresh
from longldp.simulate import simulate

__all__ = ["KERNELS", "KIND", "run_cell", "stream_values", "tracking_delay"]

SOURCES = ("synthetic", "wage-panel", "ldp-ids")
#: The change-based mechanisms run by their kernels (not registered protocols yet).
KERNELS = ("THRESH", "CHANGES-TREE", "DDRM")

STREAM_KEYS = (
    sc.Key("label", sc.string, required=True),
    sc.Key("source", sc.choice(SOURCES), default="synthetic"),
    sc.Key("n", sc.integer(1), default=5000),
    sc.Key("k", sc.integer(2), default=8),
    sc.Key("tau", sc.integer(2), default=64),
    sc.Key("rate", sc.number(0.0, inclusive=True), default=0.05),
    sc.Key("pattern", sc.choice(PATTERNS), default="steady"),
    sc.Key("period", sc.integer(1), default=16),
    sc.Key("attribute", sc.string, default="industry"),
    sc.Key("curve", sc.choice(("Sin", "Log", "LNS")), default="Sin"),
)

KEYS: tuple[sc.Key, ...] = (base.entries_key("streams"), base.entries_key("protocols"))


def _protocol(where: str, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict) or "name" not in table:
        raise ValueError(f"{where}: a protocol entry needs 'name'; got {table!r:.120}.")
    params = {k: v for k, v in table.items() if k not in ("name", "label")}
    for key, value in params.items():
        base.option_value(where, key, value)
    name = str(table["name"])
    label = str(table.get("label", name))
    if name.upper() not in KERNELS:
        ll.protocol(name, k=4, **params)  # refuses a bad entry now, with the protocol's message
    return {"name": name, "label": label, "params": params}


def parse(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Check every stream and protocol entry (labels unique)."""
    streams = [
        sc.check_table(f"{where}: streams[{i}]", t, STREAM_KEYS)
        for i, t in enumerate(values["streams"])
    ]
    for i, s in enumerate(streams):
        if s["rate"] > 1:
            raise sc.fail(f"{where}: streams[{i}]", "rate", "a share in [0, 1]", s["rate"])
    protocols = [
        _protocol(f"{where}: protocols[{i}]", t) for i, t in enumerate(values["protocols"])
    ]
    for what, items in (("streams", streams), ("protocols", protocols)):
        labels = [x["label"] for x in items]
        if len(set(labels)) != len(labels):
            raise sc.fail(where, what, "entries with distinct labels", labels)
    return {"streams": streams, "protocols": protocols}


def cells(study: Any) -> list[Cell]:
    """One cell per (stream, repetition, protocol), in that order."""
    spec = study.spec
    out = []
    for s, stream in enumerate(spec["streams"]):
        for rep in range(study.repetitions):
            for p, proto in enumerate(spec["protocols"]):
                out.append(
                    Cell(
                        "changing",
                        study.seed,
                        (seeding.CELL, s, rep, p),
                        {
                            "stream": stream,
                            "protocol": proto,
                            "rep": rep,
                            "data_key": [seeding.DATA, s, rep],
                        },
                        len(out),
                    )
                )
    return out


def stream_values(stream: dict[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(values[τ, n], k) of one stream entry."""
    if stream["source"] == "wage-panel":
        panel = load_panel("wage-panel")
        values = panel.values(stream["attribute"])
        return values, panel.domains[stream["attribute"]].size
    if stream["source"] == "ldp-ids":
        curve = ldp_ids_curve(stream["curve"], stream["tau"], rng)
        return binary_stream(curve, stream["n"], rng), 2
    values = changing_stream(
        stream["n"],
        stream["k"],
        stream["tau"],
        stream["rate"],
        rng,
        pattern=stream["pattern"],
        period=stream["period"],
    )
    return values, stream["k"]


def tracking_delay(estimates: np.ndarray, truth: np.ndarray, before: int = 16) -> float:
    """Mean epochs after each large change of the truth until the L1 error is back under twice
    its median over the ``before`` epochs preceding the change (module docstring); NaN when the
    truth never changes."""
    err = np.abs(estimates - truth).sum(axis=1)
    change = np.r_[0.0, np.abs(np.diff(truth, axis=0)).sum(axis=1)]
    if change.max() <= 0:
        return float("nan")
    delays = []
    for t in np.flatnonzero(change >= 0.5 * change.max()):
        pre = err[max(0, t - before) : t]
        level = 2.0 * float(np.median(pre if pre.size else err))
        back = np.flatnonzero(err[t:] <= level)
        delays.append(float(back[0]) if back.size else float(len(err) - t))
    return float(np.mean(delays))


def _run(name: str, params: dict[str, Any], values: np.ndarray, k: int, rng: np.random.Generator):
    """(estimates[τ, k], Ledger, family) of one protocol over the stream."""
    traj = values.T
    upper = name.upper()
    if upper == "THRESH":
        run = thresh.run(values, k, rng=rng, **params)
        spent = run.user_spent()
        return run.estimates, _fixed("THRESH", "per-change", spent), "change-based"
    if upper == "CHANGES-TREE":
        run = changes_tree.run(values, k, rng=rng, **params)
        spent = ledger.changes_tree_spent(traj, run.eps_node, run.eps_0, run.levels)
        return run.estimates, _fixed("CHANGES-TREE", "per-change", spent), "change-based"
    if upper == "DDRM":
        run = ddrm.run(values, k, rng=rng, **params)
        spent = ledger.ddrm_spent(traj, run.items, run.eps)
        return run.estimates, _fixed("DDRM", "per-change", spent), "change-based"
    proto = ll.protocol(name, k=k, **params)
    if proto.planned:  # the LDP-IDS methods: their kernels, per user (the ledger needs who)
        run = proto.run(values, rng, engine="per-user")
        return run.estimates, ledger(proto, traj, run=run), "w-event"
    sim = simulate(proto, values, rng, engine="per-user")
    family = "memo chain" if proto.longitudinal else "one-shot"
    spent = np.asarray(sim.spent_epsilon, dtype=np.float64)
    return sim.estimates, _fixed(proto.name, proto.accounting.rule, spent), family


def _fixed(name: str, rule: str, spent: np.ndarray) -> ledger.Ledger:
    return ledger.Ledger(name, rule, spent, spent, ledger.COMPARISONS[rule])


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """One row: the protocol over the stream of its (stream, repetition)."""
    prm = cell.params
    stream, proto = prm["stream"], prm["protocol"]
    values, k = stream_values(stream, seeding.generator(cell.entropy, tuple(prm["data_key"])))
    tau, n = values.shape
    truth = np.stack([np.bincount(v, minlength=k) / n for v in values])
    row: dict[str, Any] = {
        "stream": stream["label"], "source": stream["source"], "pattern": stream["pattern"],
        "rate": float(stream["rate"]) if stream["source"] == "synthetic" else None,
        "observed_rate": float(np.mean(values[1:] != values[:-1])),
        "n": n, "k": k, "tau": tau, "protocol": proto["label"], "protocol_name": proto["name"],
        "options": json.dumps(proto["params"], sort_keys=True), "rep": prm["rep"],
    }  # fmt: skip
    start = time.perf_counter()
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    try:
        est, book, family = _run(proto["name"], dict(proto["params"]), values, k, rng)
    except ValueError as err:
        return base.skipped_rows(row, "family", [""], str(err))
    per_t = np.mean((est - truth) ** 2, axis=1)
    summary = book.summary()
    row |= {
        "family": family,
        "rule": book.rule,
        "mse_avg": float(np.mean(per_t)),
        "mse_tail": float(np.mean(per_t[-max(1, tau // 4) :])),
        "delay": tracking_delay(est, truth),
        **summary,
        "runtime_s": time.perf_counter() - start,
    }
    return [row]


COLUMNS = base.columns(
    "stream:str source:str pattern:str rate:float observed_rate:float n:int k:int tau:int "
    "protocol:str protocol_name:str options:str rep:int family:str rule:str mse_avg:float "
    "mse_tail:float delay:float spent_median:float spent_p99:float spent_max:float "
    "lifetime_median:float lifetime_p99:float lifetime_max:float"
)

KIND = StudyKind(
    "changing",
    KEYS,
    parse,
    cells,
    run_cell,
    COLUMNS,
    summary_by=("stream", "protocol"),
    pivot="protocol",
    metric="mse_avg",
)
