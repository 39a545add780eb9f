"""The ``numeric`` kind: numeric mechanisms on real numeric attributes (docs/math.md §20,
docs/numeric.md).

Two families of cells:

- **one-shot**: every mechanism of ``mechanisms`` at every ε of ``eps``, once per attribute and
  repetition: the squared error of the mean against the exact variance (20.2) at the data
  (``expected_variance``); for SW, the Wasserstein distance W1 of its EMS distribution over
  ``buckets`` buckets and the squared error of the EMS mean (biased), besides its unbiased mean
  (20.12);
- **over time**: every two-round form of ``chains`` at every (ε∞, α) and τ of ``tau``, and the
  one-shot HM at ε1 every epoch as the baseline, on values that never change (``static``: the
  memo's best case, where (20.21) gives ``expected_time_average``) or that are permuted among
  the users every epoch (``permuted``, math §6.1: every value changes every epoch); the mean
  squared error of the per-epoch means, that of the time-averaged mean, and what the users
  spent (median, maximum of min(t·ε1, m·ε∞), or t·ε1 for the baseline).

Study keys (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    attributes = ["adult:age", "census-income:weeks_worked_in_year"]   # dataset:attribute
    n = 0                         # users per attribute (0: all; else the first n rows)
    mechanisms = ["Laplace", "Duchi", "PM", "HM", "SW"]
    eps = [0.5, 1.0, 2.0, 4.0]
    buckets = 256                 # SW's d = d_out
    chains = ["L-1BitMean", "L-PM", "L-HM"]   # optional (then eps_perm, alpha, tau too)
    eps_perm = [2.0, 4.0]
    alpha = [0.2, 0.4]
    tau = [1, 10]
    regimes = ["static", "permuted"]

Random streams: the permutations of attribute a in repetition r ``(1, a, r)`` (shared by the
cells of that repetition), a cell's own randomness its spawn key.
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
from longldp.privacy import numeric as nm

__all__ = ["KIND", "NumericSpec", "run_cell"]

ONE_SHOT = ("Laplace", "Duchi", "PM", "HM", "SW", "1BitMean")
CHAINS = ("L-1BitMean", "L-PM", "L-HM")
REGIMES = ("static", "permuted")
#: The one-shot mechanism every over-time configuration is compared with, at ε1 each epoch.
BASELINE = "HM"


@dataclass(frozen=True)
class NumericSpec:
    """The checked keys of a numeric study."""

    attributes: tuple[tuple[str, str], ...]
    n: int
    mechanisms: tuple[str, ...]
    eps: tuple[float, ...]
    buckets: int
    chains: tuple[str, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...]
    tau: tuple[int, ...]
    regimes: tuple[str, ...]


def _int_list(where: str, name: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise sc.fail(where, name, "a non-empty list of integers >= 1", value)
    return tuple(sc.integer(1)(where, name, v) for v in value)


def _attributes(where: str, name: str, value: Any) -> tuple[tuple[str, str], ...]:
    from longldp.data.numeric import numeric_attributes

    names = sc.string_list()(where, name, value)
    known = {f"{a.dataset}:{a.name}" for a in numeric_attributes()}
    out = []
    for item in names:
        if item not in known:
            raise sc.fail(where, name, "'dataset:attribute' of longldp.data.numeric "
                          f"({', '.join(sorted(known))})", item)  # fmt: skip
        ds, attr = item.split(":", 1)
        out.append((ds, attr))
    return tuple(out)


KEYS: tuple[sc.Key, ...] = (
    sc.Key("attributes", _attributes, required=True),
    sc.Key("n", sc.integer(0), default=0),
    sc.Key("mechanisms", sc.string_list(ONE_SHOT), default=("Laplace", "Duchi", "PM", "HM")),
    sc.Key("eps", sc.number_list(upper=privacy.EPS_MAX), default=(0.5, 1.0, 2.0, 4.0)),
    sc.Key("buckets", sc.integer(2), default=256),
    sc.Key("chains", sc.string_list(CHAINS), default=()),
    sc.Key("eps_perm", sc.number_list(upper=privacy.EPS_MAX), default=(2.0,)),
    sc.Key("alpha", sc.number_list(upper=1.0), default=(0.4,)),
    sc.Key("tau", _int_list, default=(1,)),
    sc.Key("regimes", sc.string_list(REGIMES), default=("static",)),
)


def parse(values: dict[str, Any], where: str) -> NumericSpec:
    """The checked values as a `NumericSpec`."""
    return NumericSpec(**{k.name: values[k.name] for k in KEYS})


def cells(study: Any) -> list[Cell]:
    """Every cell, in table order: the one-shot grid, then the over-time grid."""
    spec: NumericSpec = study.spec
    out: list[Cell] = []

    def add(params: dict[str, Any], key: tuple[int, ...]) -> None:
        out.append(Cell("numeric", study.seed, (seeding.CELL, *key), params, len(out)))

    for a, (ds, attr) in enumerate(spec.attributes):
        for rep in range(study.repetitions):
            common = {"dataset": ds, "attribute": attr, "n": spec.n, "rep": rep,
                      "buckets": spec.buckets}  # fmt: skip
            for m, mech in enumerate(spec.mechanisms):
                for e, eps in enumerate(spec.eps):
                    add({**common, "family": "one-shot", "mechanism": mech, "eps": eps},
                        (0, a, rep, m, e))  # fmt: skip
            for c, chain in enumerate((*spec.chains, BASELINE) if spec.chains else ()):
                for e, eps_perm in enumerate(spec.eps_perm):
                    for al, alpha in enumerate(spec.alpha):
                        for t, tau in enumerate(spec.tau):
                            for g, regime in enumerate(spec.regimes):
                                add({**common, "family": "over-time", "mechanism": chain,
                                     "eps_perm": eps_perm, "alpha": alpha, "tau": tau,
                                     "regime": regime,
                                     "permutation_key": [seeding.PERMUTATION, a, rep]},
                                    (1, a, rep, c, e, al, t, g))  # fmt: skip
    return out


def _values(ds: str, attr: str, n: int) -> tuple[np.ndarray, float, float]:
    from longldp.data.numeric import numeric_range, numeric_values

    x = numeric_values(ds, attr)
    lo, hi = numeric_range(ds, attr)
    return (x[:n] if n else x), lo, hi


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """The row of one cell (a pure function of the cell)."""
    import longldp as ll

    p = cell.params
    x, lo, hi = _values(p["dataset"], p["attribute"], p["n"])
    row: dict[str, Any] = {
        "dataset": p["dataset"], "attribute": p["attribute"], "n": int(x.size), "lo": lo,
        "hi": hi, "family": p["family"], "mechanism": p["mechanism"], "rep": p["rep"],
        "eps": None, "eps_perm": None, "alpha": None, "eps_1": None, "tau": 1, "regime": None,
        "sq_error": None, "normalized_sq_error": None, "expected_variance": None,
        "w1": None, "ems_sq_error": None, "mse_per_epoch": None, "mse_time_average": None,
        "expected_time_average": None, "median_spent_epsilon": None,
        "max_spent_epsilon": None, "status_note": None,
    }  # fmt: skip
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    start = time.perf_counter()
    width2 = (hi - lo) ** 2
    truth = float(x.mean())
    if p["family"] == "one-shot":
        eps = p["eps"]
        row["eps"] = eps
        if p["mechanism"] == "SW":
            _sw_row(row, x, lo, hi, eps, p["buckets"], rng)
        else:
            proto = ll.protocol(p["mechanism"], eps=eps, lo=lo, hi=hi)
            est = float(proto.estimate(proto.support_counts(proto.perturb(x, rng=rng)), x.size)[0])
            row["sq_error"] = (est - truth) ** 2
            row["expected_variance"] = proto.variance(x.size, x)
        row["max_spent_epsilon"] = row["median_spent_epsilon"] = eps
    else:
        _over_time_row(row, p, x, lo, hi, cell, rng)
    if row["sq_error"] is not None:
        row["normalized_sq_error"] = row["sq_error"] / width2
    row["seconds"] = time.perf_counter() - start
    return [row]


def _sw_row(row: dict, x: np.ndarray, lo: float, hi: float, eps: float, d: int, rng: Any) -> None:
    import longldp as ll
    from longldp.protocols.numeric import oneshot, sw

    proto = ll.protocol("SW", eps=eps, lo=lo, hi=hi, d=d, d_out=d)
    reports = proto.perturb(x, rng=rng)
    u_hat = oneshot.KERNELS["SW"].debias(reports, eps)  # the unbiased mean (20.12)
    est = float(proto.declared.mean_from_u(u_hat.mean()))
    truth = float(x.mean())
    row["sq_error"] = (est - truth) ** 2
    var = nm.sw_variance(eps)
    u = 2 * proto._unit(x) - 1
    row["expected_variance"] = float(proto.declared.variance_from_u(
        var.of_mean(x.size, u.mean(), np.mean(u * u))))  # fmt: skip
    theta = proto.estimate(proto.support_counts(reports), x.size)
    row["w1"] = sw.wasserstein(theta, proto.true_distribution(x)) * (hi - lo)
    row["ems_sq_error"] = (proto.distribution_mean(theta) - truth) ** 2


def _over_time_row(
    row: dict, p: dict, x: np.ndarray, lo: float, hi: float, cell: Cell, rng: Any
) -> None:
    import longldp as ll

    eps_perm, alpha, tau = p["eps_perm"], p["alpha"], p["tau"]
    eps_1 = alpha * eps_perm
    row |= {"eps_perm": eps_perm, "alpha": alpha, "eps_1": eps_1, "tau": tau,
            "regime": p["regime"]}  # fmt: skip
    baseline = p["mechanism"] == BASELINE
    if baseline:
        proto = ll.protocol(BASELINE, eps=eps_1, lo=lo, hi=hi)
    else:
        memo_mech = {"L-1BitMean": "Duchi", "L-PM": "PM", "L-HM": "HM"}[p["mechanism"]]
        if not nm.eps_1_allowed(memo_mech, eps_perm, eps_1):
            row["status_note"] = "skipped: ε1 beyond the memo's maximum (math (20.18))"
            return
        proto = ll.protocol(p["mechanism"], eps_perm=eps_perm, eps_1=eps_1, lo=lo, hi=hi)
    perm_rng = seeding.generator(cell.entropy, tuple(p["permutation_key"]))
    memo = proto.new_memo(x.size)
    ests, truths = [], []
    for t in range(tau):
        vals = x if p["regime"] == "static" or t == 0 else x[perm_rng.permutation(x.size)]
        support = proto.support_counts(proto.perturb(vals, memo, rng))
        ests.append(float(proto.estimate(support, x.size)[0]))
        truths.append(float(vals.mean()))
    ests_a, truths_a = np.array(ests), np.array(truths)
    row["mse_per_epoch"] = float(np.mean((ests_a - truths_a) ** 2))
    row["mse_time_average"] = float((ests_a.mean() - truths_a.mean()) ** 2)
    row["sq_error"] = float((ests_a[-1] - truths_a[-1]) ** 2)
    if p["regime"] == "static":
        if baseline:
            row["expected_time_average"] = proto.variance(x.size, x) / tau
        else:
            row["expected_time_average"] = proto.time_average_variance(x.size, x, tau)
    spent = proto.spent_budget(memo)["epsilon"]
    row["median_spent_epsilon"] = float(np.median(spent))
    row["max_spent_epsilon"] = float(np.max(spent))


COLUMNS = base.columns(
    "dataset:str attribute:str n:int lo:float hi:float family:str mechanism:str rep:int "
    "eps:float eps_perm:float alpha:float eps_1:float tau:int regime:str sq_error:float "
    "normalized_sq_error:float expected_variance:float w1:float ems_sq_error:float "
    "mse_per_epoch:float mse_time_average:float expected_time_average:float "
    "median_spent_epsilon:float max_spent_epsilon:float seconds:float status_note:str"
)

KIND = StudyKind(
    "numeric", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "attribute", "family", "mechanism", "tau", "regime", "alpha"),
    pivot="eps", metric="normalized_sq_error",
    plot={"x": "eps", "y": "normalized_sq_error", "figure_by": ("family",),
          "panel_by": ("dataset", "attribute"), "line_by": "mechanism", "log_y": True},
)  # fmt: skip
