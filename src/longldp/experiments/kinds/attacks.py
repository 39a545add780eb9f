"""The ``attacks`` kind: poisoning gains per protocol, budget and fake share, with defences.

For every dataset attribute, repetition, protocol, ε∞, α, fake share β, attack and longitudinal
variant, one cell draws r target items, runs the attack over τ epochs
(`longldp.attacks.run_attack`) and applies every defence of the study to the *same* run
(`longldp.attacks.defences.apply.defend`): one row per defence, with the gain of the
time-averaged estimate D(after) − D(before) summed over the targets, the closed form (G.2) for
the undefended gain, the defence's error on the genuine data alone, and the flagged shares
(docs/attacks.md §3–§8, §11).

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 20                              # epochs (each dataset may set its own)
    engine = "count-level"                # or "per-user", "reports" (needed by detect, memo)
    eps_perm = [1.0, 2.0, 4.0]            # ε∞ of the chains
    alpha = [0.5]                         # ε1 = α·ε∞; one-shot oracles run at ε = ε1
    beta = [0.001, 0.01, 0.05, 0.1]       # fake share m/(n + m)
    attacks = ["MGA", "RIA", "RPA"]
    variants = ["per-epoch", "persistent", "memo-mimic"]
    defences = ["none", "normalize", "norm-sub", "recover", "detect", "detect+recover", "memo"]
    targets = 3                           # r, drawn uniformly among the domain per repetition
    values = "stable"                     # users keep their value, or "permuted" (math §6.1)
    memo_tests = "one-value"              # or "replay" (docs/attacks.md §7.1)
    hash_trials = 100                     # S of MGA against per-user hashing
    detect_fpr = 0.01                     # itemset detection's budget of honest devices (§8.2)

``targets`` and ``hash_trials`` take one integer or a list: a list is an axis of the grid
(``targets = [3, 10]``, ``hash_trials = [100, 1000]``, after the variant axis), one integer a
fixed parameter (so a study written with one value keeps its cells' random streams).
    datasets = [{name = "zipf", n = 1000000, k = 100}, {name = "adult", attributes = ["age"]}]
    protocols = [{name = "GRR"}, {name = "L-GRR"}, ...]    # one-shot or longitudinal

One-shot oracles run at ε = ε1 = α·ε∞, the budget of one report of the chains, so every
protocol is compared per report; over τ epochs a one-shot user spends τ·ε1 and a chain user at
most ε∞ per distinct value (``eps_total``). A combination that cannot run (an unreachable α,
memo mimicry of a one-shot oracle or of RPA/RIA, a defence that does not apply to the protocol
or the engine) gives rows with ``status = "skipped"`` and the reason.

Random streams (`longldp.experiments.seeding`): synthetic data ``(0, d)``; the permutations of
attribute a of dataset d in repetition r ``(1, d, a, r)`` (``values = "permuted"``); the targets
``(3, d, a, r)``, shared by every cell of that repetition; the cell's randomness
``(2, d, a, r, p, e, l, b, x, v)``, followed by the indices of the ``targets`` and
``hash_trials`` axes when they are lists (the targets' stream is the same for every r).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp import attacks as atk
from longldp.attacks.defences import apply as dfn
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import attribute_codes, parse_dataset
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, ProtocolEntry, StudyKind
from longldp.simulate import ENGINES

__all__ = ["KIND", "AttacksSpec", "run_cell"]

#: Namespace of the targets' stream (after DATA, PERMUTATION and CELL).
TARGETS = 3
VALUES = ("stable", "permuted")
MEMO_TESTS = ("one-value", "replay")


@dataclass(frozen=True, kw_only=True)
class AttacksSpec(GridSpec):
    """The checked keys of an attacks study."""

    protocols: tuple[ProtocolEntry, ...]
    beta: tuple[float, ...]
    attacks: tuple[str, ...]
    variants: tuple[str, ...]
    defences: tuple[str, ...]
    targets: int | tuple[int, ...]
    values: str
    memo_tests: str
    hash_trials: int | tuple[int, ...]
    detect_fpr: float


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(20),
    base.engine_key(ENGINES, "count-level"),
    base.EPS_PERM,
    base.alpha_key(required=True),
    sc.Key("beta", sc.number_list(lower=0.0, upper=1.0, what="fake shares β"), required=True),
    sc.Key("attacks", sc.string_list(atk.ATTACKS), default=("MGA",)),
    sc.Key("variants", sc.string_list(atk.VARIANTS), default=("per-epoch",)),
    sc.Key("defences", sc.string_list(dfn.DEFENCES), default=("none",)),
    sc.Key("targets", sc.integer_or_list(1), default=3),
    sc.Key("values", sc.choice(VALUES), default="stable"),
    sc.Key("memo_tests", sc.choice(MEMO_TESTS), default="one-value"),
    sc.Key("hash_trials", sc.integer_or_list(1), default=atk.HASH_TRIALS),
    sc.Key("detect_fpr", sc.number(0.0), default=0.01),
    base.entries_key("datasets"),
    base.entries_key("protocols"),
)


def _protocol(where: str, table: Any) -> ProtocolEntry:
    return base.parse_protocol_entry(where, table, one_shot=True)[0]


def parse(values: dict[str, Any], where: str) -> AttacksSpec:
    """Turn the checked top-level values into an `AttacksSpec` (checks each entry)."""
    datasets, protocols = base.parse_grid(where, values, parse_dataset, "protocols", _protocol)
    largest = max(_listed(values["targets"]))
    for d in datasets:
        if min(d.domain_sizes) <= largest:
            raise sc.fail(
                where, "targets", f"fewer than the smallest domain of {d.label!r}",
                values["targets"],
            )  # fmt: skip
    if not values["detect_fpr"] < 1.0:
        raise sc.fail(where, "detect_fpr", "a number in (0, 1)", values["detect_fpr"])
    keys = ("beta", "attacks", "variants", "defences", "targets", "values", "memo_tests",
            "hash_trials", "detect_fpr")  # fmt: skip
    chosen = {k: values[k] for k in keys}
    return AttacksSpec(protocols=protocols, **chosen, **base.grid_values(values, datasets))


def _listed(value: int | tuple[int, ...]) -> tuple[int, ...]:
    return value if isinstance(value, tuple) else (value,)


def _build(entry: ProtocolEntry, k: int, eps_perm: float, eps_1: float | None) -> Any:
    """Chains at (ε∞, ε1); one-shot oracles at ε = ε1 (per-report budget)."""
    if not entry.longitudinal:
        return entry.build(k, eps_1 if eps_1 is not None else eps_perm)
    return entry.build(k, eps_perm, eps_1)


def cells(study: Any) -> list[Cell]:
    """Every cell of an attacks study, in table order (see the module docstring)."""
    spec: AttacksSpec = study.spec
    reasons = base.SkipReasons()

    def params(v: Any, at: Any) -> dict[str, Any]:
        d, a = at["dataset"], at["attribute"]
        proto: ProtocolEntry = v["protocol"]
        k = v["attribute"][1]
        eps, alpha = v["eps_perm"], v["alpha"]
        eps_1 = None if alpha is None else alpha * eps
        skip = reasons(
            (d, a, at["protocol"], at["eps_perm"], at["alpha"]), _build, proto, k, eps, eps_1
        )
        if skip is None and v["variant"] == "memo-mimic":
            if v["attack"] != "MGA":
                skip = "memo mimicry crafts a memo with MGA only"
            elif not proto.longitudinal or not proto.takes_eps_1:
                skip = f"{proto.name} has no second round to run honestly (no memo to mimic)"
        drop = ("attributes", "domain_sizes")
        return {
            "dataset": {x: y for x, y in v["dataset"].as_json().items() if x not in drop},
            "attribute": v["attribute"][0],
            "k": k,
            "protocol": proto.as_json(),
            "eps_perm": eps,
            "alpha": alpha,
            "eps_1": eps_1,
            "beta": v["beta"],
            "attack": v["attack"],
            "variant": v["variant"],
            "rep": v["rep"],
            "engine": spec.engine,
            "defences": list(spec.defences),
            "targets": v.get("targets", spec.targets),
            "values": spec.values,
            "memo_tests": spec.memo_tests,
            "hash_trials": v.get("hash_trials", spec.hash_trials),
            "detect_fpr": spec.detect_fpr,
            "data_key": [seeding.DATA, d],
            "permutation_key": [seeding.PERMUTATION, d, a, v["rep"]],
            "targets_key": [TARGETS, d, a, v["rep"]],
            "skip_reason": skip,
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "attribute": lambda v: enumerate(
            zip(v["dataset"].attributes, v["dataset"].domain_sizes, strict=True)
        ),
        "rep": range(study.repetitions),
        # one-shot oracles run at ε = α·ε∞, so they follow the α grid too
        **base.budget_axes(
            "protocol", spec.protocols, spec, lambda p: p.takes_eps_1 or not p.longitudinal
        ),
        "beta": spec.beta,
        "attack": spec.attacks,
        "variant": spec.variants,
    }
    for name in ("targets", "hash_trials"):  # a list is an axis; one value is not
        if isinstance(getattr(spec, name), tuple):
            axes[name] = getattr(spec, name)
    return base.grid(study, "attacks", axes, params)


def _population(prm: dict[str, Any], entropy: int) -> tuple[np.ndarray | None, np.ndarray]:
    """(values (τ, n) or None, counts (τ, k)) of the cell's genuine users."""
    ds = prm["dataset"]
    codes = np.asarray(attribute_codes(ds, prm["attribute"], entropy, tuple(prm["data_key"])))
    tau, k = ds["tau"], prm["k"]
    counts = np.tile(np.bincount(codes, minlength=k), (tau, 1))
    if prm["engine"] == "count-level":
        return None, counts  # every epoch has the same counts (rows are only permuted)
    if prm["values"] == "stable":
        return np.tile(codes, (tau, 1)), counts
    (values,) = base.longitudinal_codes(
        json.dumps(ds, sort_keys=True),
        (prm["attribute"],),
        entropy,
        tuple(prm["data_key"]),
        tuple(prm["permutation_key"]),
    )
    return np.asarray(values), counts


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Rows of one attacks cell: one per defence (a pure function of the cell)."""
    prm = cell.params
    ds, proto = prm["dataset"], prm["protocol"]
    row: dict[str, Any] = {
        "dataset": ds["label"], "attribute": prm["attribute"], "k": prm["k"], "n": ds["n"],
        "tau": ds["tau"], "protocol": proto["label"], "protocol_name": proto["name"],
        "longitudinal": bool(proto["longitudinal"]),
        "options": json.dumps(proto["options"], sort_keys=True), "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"], "eps_1": prm["eps_1"], "beta": prm["beta"],
        "attack": prm["attack"], "variant": prm["variant"], "engine": prm["engine"],
        "values": prm["values"], "r": prm["targets"], "rep": prm["rep"],
        "hash_trials": prm["hash_trials"],
    }  # fmt: skip
    if prm["skip_reason"] is not None:
        return base.skipped_rows(row, "defence", prm["defences"], prm["skip_reason"])
    start = time.perf_counter()
    entry = ProtocolEntry(**proto)
    oracle = _build(entry, prm["k"], prm["eps_perm"], prm["eps_1"])
    targets = seeding.generator(cell.entropy, prm["targets_key"]).choice(
        oracle.estimate_size, size=prm["targets"], replace=False
    )
    threat = atk.ThreatModel(targets=sorted(int(t) for t in targets), beta=prm["beta"])
    values, counts = _population(prm, cell.entropy)
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    try:
        run = atk.run_attack(
            oracle, threat, prm["attack"], values=values,
            counts=counts if values is None else None, variant=prm["variant"],
            engine=prm["engine"], rng=rng, hash_trials=prm["hash_trials"],
        )  # fmt: skip
    except ValueError as err:
        return base.skipped_rows(row, "defence", prm["defences"], str(err))
    truth = run.truth
    forecast = atk.expected_time_average_gain(
        oracle, prm["attack"], threat, run.n, truth, variant=prm["variant"],
        hash_trials=prm["hash_trials"],
    ).total  # fmt: skip
    tau = truth.shape[0]
    eps_report = float(oracle.single_report_epsilon())
    eps_total = (
        min(tau * eps_report, float(oracle.first_round_epsilon()))
        if oracle.longitudinal and prm["values"] == "stable"
        else tau * eps_report
    )
    row |= {"targets": threat.target_array(oracle.estimate_size).tolist(), "m": run.m,
            "eps_report": eps_report, "eps_total": eps_total}  # fmt: skip
    shared = time.perf_counter() - start
    rows = []
    for defence in prm["defences"]:
        t0 = time.perf_counter()
        try:
            dfn.check_defence(oracle, defence, prm["engine"])
            defended = dfn.defend(
                run, defence, tests=prm["memo_tests"], detect_fpr=prm["detect_fpr"]
            )
        except ValueError as err:
            rows += base.skipped_rows(row, "defence", [defence], str(err))
            continue
        rows.append({
            **row, "defence": defence, "status": "ok",
            "gain": defended.time_average_gain,
            "gain_first_epoch": float(defended.gains[0].sum()),
            "expected_gain": forecast if defence == "none" else None,
            "mse_clean": float(np.mean((defended.before - truth) ** 2)),
            "mse_attacked": float(np.mean((defended.after - truth) ** 2)),
            "flagged_fake": defended.info.get("flagged_fake"),
            "flagged_genuine": defended.info.get("flagged_genuine"),
            "runtime_s": shared + time.perf_counter() - t0,
        })  # fmt: skip
    return rows


COLUMNS = base.columns(
    "dataset:str attribute:str k:int n:int tau:int protocol:str protocol_name:str "
    "longitudinal:bool options:str eps_perm:float alpha:float eps_1:float beta:float attack:str "
    "variant:str engine:str values:str r:int rep:int hash_trials:int targets:[int] m:int "
    "eps_report:float "
    "eps_total:float defence:str gain:float gain_first_epoch:float expected_gain:float "
    "mse_clean:float mse_attacked:float flagged_fake:float flagged_genuine:float"
)

KIND = StudyKind(
    "attacks", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "protocol", "attack", "variant", "defence", "beta"),
    pivot="eps_perm", metric="gain",
    plot={"x": "beta", "y": "gain", "figure_by": ("dataset", "attack", "variant", "eps_perm"),
          "panel_by": ("defence",), "line_by": "protocol", "log_y": False},
)  # fmt: skip
