"""The ``gfim`` kind: GFIM and LDPMiner-SH on set-valued data, one-shot or longitudinal.

One cell runs one method (`longldp.apps.gfim`) over every timestamp of one dataset for one
(repetition, k, method, ε or ε∞, α) and scores it against the exact ground truth: precision
and the median relative error RE of the true top-k (thesis §4.2), both read ways (``re``: the
method's estimate of every true top-k item; ``re_zero``: 0 for items not output, as in the
thesis's figures), averaged over τ, with the per-timestamp values kept as lists.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 1                             # default τ of the datasets
    engine = "count-level"              # or "per-user" (memos and budgets), "reports"
    k = [30]                            # output sizes
    k_max_factor = 2                    # k_max = factor·k (the thesis: 2)
    eps_perm = [2.0]                    # ε of one-shot methods, ε∞ of chains
    alpha = [0.5]                       # ε1 = α·ε∞ (chains only)
    datasets = [
      {source = "laplace", n = 50000, seed = 1},   # thesis synthetic: d = 1000, 50 items/user
      {source = "normal", n = 500000, seed = 2},
      {source = "census-income"},                   # bundled Census-Income, attribute=value
      {source = "laplace", n = 50000, tau = 20, change_share = 0.1},   # longitudinal
    ]
    methods = [
      {app = "gfim", label = "GFIM (thesis)", combine = "thesis"},
      {app = "gfim", label = "GFIM ivw, L2=min", phase2_pad = "min"},
      {app = "ldpminer-sh", label = "LDPMiner-SH"},
      {app = "gfim", label = "GFIM L-SH", protocol = "L-SH"},
    ]

A method entry: ``app`` (``"gfim"`` or ``"ldpminer-sh"``), ``label``, ``protocol`` (default
``"SH"``; any one-shot name or memoizing chain of the registry), and for GFIM the options of
`longldp.apps.gfim.GFIMParams` (``combine``, ``phase2_pad`` — ``"kmax"``, ``"min"`` or an
integer —, ``output``, ``phase2_codes``, ``ell``); for LDPMiner-SH ``output`` (``"phase2"``
or ``"thesis"``) and ``phase2_pad`` (``"candidates"`` or ``"L"``).

A dataset entry: ``source`` (``"laplace"``, ``"normal"`` or ``"census-income"``), ``n`` (users
of a synthetic population; for Census-Income the first n persons), ``seed`` (of the synthetic
population: the data is fixed across repetitions, as in the thesis, and only the mechanism's
randomness changes), ``tau`` and ``change_share`` (the share of users who swap sets at every
timestamp, `longldp.apps.gfim.changing_population`), ``label``.

Random streams (`longldp.experiments.seeding`): the dataset's timeline ``(1, d)``; the
mechanism of a cell ``(2, d, r, k, m, e, a)``.
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp.apps import gfim as gf
from longldp.apps.setvalued.ldpminer import LDPMinerParams
from longldp.apps.setvalued.metrics import SetValuedTruth, setvalued_truth
from longldp.apps.setvalued.oracle import OracleSpec
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, StudyKind
from longldp.simulate import ENGINES

__all__ = ["KIND", "GFIMDatasetSpec", "GFIMMethodSpec", "GFIMStudySpec", "run_cell"]

SOURCES = ("laplace", "normal", "census-income")
APPS = ("gfim", "ldpminer-sh")


@dataclass(frozen=True)
class GFIMDatasetSpec:
    """A checked dataset entry (see the module docstring)."""

    source: str
    label: str
    tau: int
    n: int | None = None
    seed: int = 0
    change_share: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return base.plain(self)


@dataclass(frozen=True)
class GFIMMethodSpec:
    """A checked method entry: the app, its oracle and its options."""

    app: str
    label: str
    protocol: str
    longitudinal: bool
    options: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return base.plain(self)


@dataclass(frozen=True, kw_only=True)
class GFIMStudySpec(GridSpec):
    """The checked keys of a GFIM study."""

    methods: tuple[GFIMMethodSpec, ...]
    k: tuple[int, ...]
    k_max_factor: int


def _int_list(where: str, name: str, value: Any) -> tuple[int, ...]:
    allowed = "a non-empty list of distinct integers >= 1"
    if not isinstance(value, list) or not value:
        raise sc.fail(where, name, allowed, value)
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in value):
        raise sc.fail(where, name, allowed, value)
    if len(set(value)) != len(value):
        raise sc.fail(where, name, allowed, value)
    return tuple(int(x) for x in value)


def _pad(where: str, name: str, value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise sc.fail(where, name, "'kmax', 'min', 'candidates', 'L' or an integer >= 1", value)
    return value


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(default=1),
    base.engine_key(ENGINES, "count-level"),
    sc.Key("k", _int_list, required=True),
    sc.Key("k_max_factor", sc.integer(1), default=2),
    base.EPS_PERM,
    base.alpha_key(),
    base.entries_key("datasets"),
    base.entries_key("methods"),
)


def parse_dataset(where: str, table: Any, default_tau: int) -> GFIMDatasetSpec:
    """Check one dataset entry."""
    keys = [
        sc.Key("source", sc.choice(SOURCES), required=True),
        sc.Key("label", sc.string),
        sc.Key("tau", sc.integer(1)),
        sc.Key("n", sc.integer(2)),
        sc.Key("seed", sc.integer(0), default=0),
        sc.Key("change_share", sc.number(0.0, inclusive=True), default=0.0),
    ]
    v = sc.check_table(where, table, keys)
    if v["change_share"] > 1:
        raise sc.fail(where, "change_share", "a share in [0, 1]", v["change_share"])
    if v["source"] != "census-income" and v["n"] is None:
        raise ValueError(f"{where}: missing key 'n' (users of the synthetic population).")
    label = v["label"] or f"{v['source']}" + (f"-{v['n']}" if v["n"] else "")
    tau = v["tau"] if v["tau"] is not None else default_tau
    return GFIMDatasetSpec(v["source"], label, tau, v["n"], v["seed"], v["change_share"])


_GFIM_OPTIONS = ("combine", "phase2_pad", "output", "phase2_codes", "ell")
_MINER_OPTIONS = ("output", "phase2_pad")


def parse_method(where: str, table: Any) -> GFIMMethodSpec:
    """Check one method entry (and its options, by building the app once)."""
    keys = [
        sc.Key("app", sc.choice(APPS), required=True),
        sc.Key("label", sc.string),
        sc.Key("protocol", sc.string, default="SH"),
        sc.Key("combine", sc.string),
        sc.Key("phase2_pad", _pad),
        sc.Key("output", sc.string),
        sc.Key("phase2_codes", sc.string),
        sc.Key("ell", sc.integer(1)),
    ]
    v = sc.check_table(where, table, keys)
    allowed = _GFIM_OPTIONS if v["app"] == "gfim" else _MINER_OPTIONS
    options = {o: v[o] for o in _GFIM_OPTIONS if v[o] is not None}
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise ValueError(f"{where}: {v['app']} takes no option(s) {bad}; allowed: {allowed}.")
    try:
        from longldp.protocols import get_protocol_class

        cls = get_protocol_class(v["protocol"])
        name, longitudinal = cls.name, bool(cls.longitudinal)
        spec = GFIMMethodSpec(v["app"], v["label"] or v["app"], name, longitudinal, options)
        _build(spec.as_json(), 4, 2, 2.0, 0.5 if longitudinal else None)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return spec


def parse(values: dict[str, Any], where: str) -> GFIMStudySpec:
    """Turn the checked top-level values into a `GFIMStudySpec`."""
    datasets, methods = base.parse_grid(where, values, parse_dataset, "methods", parse_method)
    if values["alpha"] is None and any(m.longitudinal for m in methods):
        raise ValueError(f"{where}: missing key 'alpha' (ε1 = α·ε∞ of the chains).")
    return GFIMStudySpec(
        methods=methods,
        k=values["k"],
        k_max_factor=values["k_max_factor"],
        **base.grid_values(values, datasets),
    )


def _build(method: dict[str, Any], k: int, k_max_factor: int, eps: float, alpha: float | None):
    """The app of a method at one point of the grid."""
    opts = dict(method["options"])
    if method["longitudinal"]:
        assert alpha is not None
        oracle = OracleSpec(method["protocol"], eps_perm=eps, eps_1=base.eps_1_at(eps, alpha))
    else:
        oracle = OracleSpec(method["protocol"], eps=eps)
    if method["app"] == "gfim":
        params = gf.GFIMParams(k_max=k_max_factor * k, **opts)
        return gf.GFIM(k, oracle, params)
    output = opts.pop("output", "phase2")
    miner = LDPMinerParams(candidate_factor=k_max_factor, **opts)
    return gf.LDPMinerSH(k, oracle, miner, output)


def cells(study: Any) -> list[Cell]:
    """Every cell, in table order: dataset, repetition, k, method, ε∞, α."""
    spec: GFIMStudySpec = study.spec

    def params(v: Any, at: Any) -> dict[str, Any]:
        eps, alpha = v["eps_perm"], v["alpha"]
        return {
            "dataset": v["dataset"].as_json(),
            "data_key": [seeding.PERMUTATION, at["dataset"]],
            "method": v["method"].as_json(),
            "k": v["k"],
            "k_max_factor": spec.k_max_factor,
            "eps_perm": eps,
            "alpha": alpha,
            "eps_1": base.eps_1_at(eps, alpha),
            "rep": v["rep"],
            "engine": spec.engine,
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "rep": range(study.repetitions),
        "k": spec.k,
        **base.budget_axes("method", spec.methods, spec, lambda m: m.longitudinal),
    }
    return base.grid(study, "gfim", axes, params)


@functools.lru_cache(maxsize=2)
def load_data(dataset: str, entropy: int, data_key: tuple[int, ...]) -> tuple[Any, SetValuedTruth]:
    """The data of a dataset entry over its τ timestamps and its truth, cached per process."""
    spec = json.loads(dataset)
    gen = seeding.generator(entropy, data_key)
    if spec["source"] == "census-income":
        sets = gf.census_sets()
        if spec["n"] is not None and spec["n"] < sets.n:
            sets = sets.take(np.arange(spec["n"]))
    else:
        sets = gf.synthetic_sets(spec["n"], spec["source"], rng=spec["seed"])
    truth = setvalued_truth(sets)
    if spec["tau"] == 1:
        return sets, truth
    timeline = gf.changing_population(sets, spec["tau"], spec["change_share"], gen)
    return timeline, SetValuedTruth(truth.timestamps * spec["tau"])


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """The row of one GFIM cell (a pure function of the cell)."""
    prm = cell.params
    ds, method = prm["dataset"], prm["method"]
    row = {
        "dataset": ds["label"],
        "tau": ds["tau"],
        "change_share": ds["change_share"],
        "app": method["app"],
        "method": method["label"],
        "protocol": method["protocol"],
        "options": json.dumps(method["options"], sort_keys=True),
        "longitudinal": method["longitudinal"],
        "k": prm["k"],
        "k_max": prm["k_max_factor"] * prm["k"],
        "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"],
        "eps_1": prm["eps_1"],
        "engine": prm["engine"],
        "rep": prm["rep"],
    }
    data, truth = load_data(json.dumps(ds, sort_keys=True), cell.entropy, tuple(prm["data_key"]))
    app = _build(method, prm["k"], prm["k_max_factor"], prm["eps_perm"], prm["alpha"])
    start = time.perf_counter()
    res = app.run(data, rng=seeding.generator(cell.entropy, cell.spawn_key), engine=prm["engine"])
    seconds = time.perf_counter() - start
    scores = gf.evaluate(res, truth)
    zero = gf.evaluate(res, truth, missing="zero")
    n_items = int(res.params["n_items"])
    eps_spent = res.budget.get("epsilon")
    memos = res.budget.get("memos")
    rec = res.params
    out = row | {
        "n": int(rec["n"]),
        "n_items": n_items,
        "status": "ok",
        "precision": scores["precision_avg"],
        "re": scores["re_avg"],
        "re_zero": zero["re_avg"],
        "precision_t": [float(x) for x in scores["precision"]],
        "re_t": [float(x) for x in scores["re"]],
        "ell": int(rec.get("ell", rec.get("L", 0))),
        "L2": int(res.estimates[0]["L2"]),
        "w": float(res.estimates[0]["w"]),
        "combine": rec.get("combine", method["options"].get("output", "phase2")),
        "eps_spent_max": None if eps_spent is None else float(np.max(eps_spent)),
        "memos_max": None if memos is None else int(np.max(memos)),
        "params": json.dumps(rec, sort_keys=True, default=str),
        "runtime_s": seconds,
    }
    if out["eps_spent_max"] is not None and not math.isfinite(out["eps_spent_max"]):
        out["eps_spent_max"] = None
    return [out]


COLUMNS = base.columns(
    "dataset:str n:int n_items:int tau:int change_share:float app:str method:str protocol:str "
    "options:str longitudinal:bool k:int k_max:int eps_perm:float alpha:float eps_1:float "
    "engine:str rep:int precision:float re:float re_zero:float precision_t:[float] "
    "re_t:[float] ell:int L2:int w:float combine:str eps_spent_max:float memos_max:int "
    "params:str"
)

KIND = StudyKind(
    "gfim", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "method", "k", "alpha"),
    pivot="eps_perm",
    metric="precision",
    plot={"x": "eps_perm", "y": "precision", "figure_by": ("alpha",),
          "panel_by": ("dataset", "k"), "line_by": "method", "log_y": False},
    linear_metrics=("re", "re_zero"),
)  # fmt: skip
