"""The ``mixed`` kind: numeric and categorical attributes of the same users collected together
(docs/math.md §20.10, `longldp.apps.mixed`).

One cell per dataset, method, budget and repetition: the collection runs over ``tau`` epochs
(values unchanged; one-shot budgets are spent every epoch, two-round forms memoize), and the
row holds, averaged over the epochs, the mean over the numeric attributes of the squared error
of the mean divided by the range² (``numeric_error``), the mean over the categorical attributes
of MSE_avg (``categorical_error``), both averaged (``error``), their analytic expectations for
one epoch ((20.23), (20.24), (7.2); one-shot budgets only) and what users spent.

Study keys (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    datasets = [{name = "lending-club", numeric = ["funded_amnt", "int_rate"],
                 categorical = ["term", "grade"], n = 0}]
    methods = ["sampling", "SPL", "SMP", "adaptive"]
    eps = [1.0, 2.0, 4.0, 8.0]        # one-shot budgets
    eps_perm = [4.0]                  # optional: budgets over time, with alpha
    alpha = [0.25]
    tau = 1
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp import privacy
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, StudyKind

__all__ = ["KIND", "MixedSpec", "run_cell"]

METHODS = ("sampling", "SPL", "SMP", "adaptive")


@dataclass(frozen=True)
class MixedSpec:
    """The checked keys of a mixed study."""

    datasets: tuple[dict[str, Any], ...]
    methods: tuple[str, ...]
    eps: tuple[float, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...]
    tau: int


def _datasets(where: str, name: str, value: Any) -> tuple[dict[str, Any], ...]:
    tables = sc.table_list(where, name, value)
    out = []
    for i, t in enumerate(tables):
        at = f"{where}, {name}[{i}]"
        keys = (
            sc.Key("name", sc.choice(("census-income", "lending-club", "adult")), required=True),
            sc.Key("numeric", sc.string_list(), required=True),
            sc.Key("categorical", sc.string_list(), required=True),
            sc.Key("n", sc.integer(0), default=0),
        )
        got = sc.check_table(at, t, keys)
        out.append({k: list(v) if isinstance(v, tuple) else v for k, v in got.items()})
    return tuple(out)


KEYS: tuple[sc.Key, ...] = (
    sc.Key("datasets", _datasets, required=True),
    sc.Key("methods", sc.string_list(METHODS), default=METHODS),
    sc.Key("eps", sc.number_list(upper=privacy.EPS_MAX), default=(1.0, 2.0, 4.0, 8.0)),
    sc.Key("eps_perm", sc.number_list(upper=privacy.EPS_MAX), default=()),
    sc.Key("alpha", sc.number_list(upper=1.0), default=(0.25,)),
    sc.Key("tau", sc.integer(1), default=1),
)


def parse(values: dict[str, Any], where: str) -> MixedSpec:
    """The checked values as a `MixedSpec`."""
    return MixedSpec(**{k.name: values[k.name] for k in KEYS})


def cells(study: Any) -> list[Cell]:
    """Every cell, in table order: one-shot budgets, then the budgets over time."""
    spec: MixedSpec = study.spec
    out: list[Cell] = []
    budgets = [{"eps": e} for e in spec.eps] + [
        {"eps_perm": e, "alpha": a} for e in spec.eps_perm for a in spec.alpha
    ]
    for d, ds in enumerate(spec.datasets):
        for m, method in enumerate(spec.methods):
            for b, budget in enumerate(budgets):
                for rep in range(study.repetitions):
                    params = {"dataset": ds, "method": method, "tau": spec.tau, "rep": rep,
                              **budget}  # fmt: skip
                    key = (seeding.CELL, d, m, b, rep)
                    out.append(Cell("mixed", study.seed, key, params, len(out)))
    return out


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """The row of one cell (a pure function of the cell)."""
    from longldp.apps.mixed import MixedCollection, NumericAttribute, mixed_table

    p = cell.params
    ds = p["dataset"]
    attrs, cols = mixed_table(ds["name"], ds["numeric"], ds["categorical"])
    if ds["n"]:
        cols = [c[: ds["n"]] for c in cols]
    over_time = "eps_perm" in p
    budget = (
        {"eps_perm": p["eps_perm"], "eps_1": p["eps_perm"] * p["alpha"]}
        if over_time
        else {"eps": p["eps"]}
    )
    start = time.perf_counter()
    mc = MixedCollection(attrs, p["method"], horizon=p["tau"], **budget)
    res = mc.collect_over_time([cols] * p["tau"], seeding.generator(cell.entropy, cell.spawn_key))
    err = res.normalized_errors().mean(axis=0)  # per attribute, over the epochs
    numeric = np.array([isinstance(a, NumericAttribute) for a in attrs])
    expected = None if over_time else mc.expected_mse(cols)
    if expected is not None:
        scale = np.array([(a.hi - a.lo) ** 2 if n else 1.0 for a, n in
                          zip(attrs, numeric, strict=True)])  # fmt: skip
        expected = expected / scale
    spent = res.spent_epsilon
    row = {
        "dataset": ds["name"], "n": res.n, "d": len(attrs), "d_numeric": int(numeric.sum()),
        "method": mc.method, "mechanisms": " ".join(pr.name for pr in mc.protos),
        "eps": p.get("eps"), "eps_perm": p.get("eps_perm"), "alpha": p.get("alpha"),
        "tau": p["tau"], "rep": p["rep"], "k_sampled": mc.k_sampled,
        "numeric_error": float(err[numeric].mean()) if numeric.any() else None,
        "categorical_error": float(err[~numeric].mean()) if (~numeric).any() else None,
        "error": float(err.mean()),
        "expected_numeric_error": (
            None if expected is None or not numeric.any() else float(expected[numeric].mean())
        ),
        "expected_categorical_error": (
            None if expected is None or numeric.all() else float(expected[~numeric].mean())
        ),
        "max_spent_epsilon": (
            float(np.max(spent)) if spent is not None else p["eps"] * p["tau"]
        ),
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    return [row]


COLUMNS = base.columns(
    "dataset:str n:int d:int d_numeric:int method:str mechanisms:str eps:float eps_perm:float "
    "alpha:float tau:int rep:int k_sampled:int numeric_error:float categorical_error:float "
    "error:float expected_numeric_error:float expected_categorical_error:float "
    "max_spent_epsilon:float seconds:float"
)

KIND = StudyKind(
    "mixed", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "method", "eps_perm", "alpha"),
    pivot="eps", metric="error",
    plot={"x": "eps", "y": "error", "figure_by": ("dataset",), "panel_by": (),
          "line_by": "method", "log_y": True},
)  # fmt: skip
