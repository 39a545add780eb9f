"""FELIP queries: validation, the experiment workload, exact answers and MSE_avg.

Source: docs/math.md §8.1 (queries), §8.12 (workload and metric); seed 002
§8.2 (100 three-dimensional queries, attributes "following the normal distribution"); [C]
``generate_query.py`` (how that was realised).

A query conjoins λ constraints on distinct attributes: a range ``lo <= x_a <= hi`` (inclusive)
on a numerical attribute, or a point ``x_a = v`` on any attribute (a width-1 range). Its answer
is the fraction of users who satisfy all of them.

Workload (math §8.12), generated once per study from timestamp 0 and saved with it (JSON):

- attributes: indices drawn from a normal with mean d/2 and standard deviation d/6 truncated
  to [0, d], integer part, the whole λ-tuple redrawn while it repeats an index ([C]);
  ``attribute_draw="uniform"`` draws λ distinct attributes uniformly instead;
- numerical range: w = max(1, ⌊s_a·D_a⌋), lo uniform in [0, D_a − w], hi = lo + w − 1 ([R];
  [C]'s hi = lo + w covers w + 1 values); categorical: a uniform point;
- s_a: [C]'s per-attribute list (:data:`DEFAULT_SELECTIVITY`, reused cyclically past 12
  attributes), a constant, or ``selectivity="normal"``: per query and attribute s drawn from
  N(0.5, 1/6) truncated to [1/D_a, 1] (one reading of seed 002's "dimension size followed the
  normal distribution"; the sizing then uses its mean);
- a query whose true answer is 0 is replaced by a fresh draw ([C] drops it).

MSE_t = (1/|Q|) Σ_q (â_q/n − a_q/n)², MSE_avg = mean over the τ timestamps (seed 002 eq. 1
applied to query answers, math §8.12).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import truncnorm

from longldp import _validate as check
from longldp import metrics
from longldp.apps.felip.grids import CATEGORICAL, OWNER, FelipSchema
from longldp.data import Table

#: [C]'s per-attribute selectivities for its 12-attribute datasets (exp_eps_opt.py).
DEFAULT_SELECTIVITY = (0.5, 0.4, 0.7, 0.5, 0.7, 0.8, 0.9, 0.7, 0.7, 0.9, 0.7, 0.5)
ATTRIBUTE_DRAWS = ("normal", "uniform")
FORMAT = "longldp.felip.workload/1"


@dataclass(frozen=True)
class Query:
    """λ constraints on distinct attributes, sorted by attribute index; bounds inclusive.

    Build and validate with :func:`make_query` (or :meth:`validate` against a schema).
    """

    attributes: tuple[int, ...]
    lo: tuple[int, ...]
    hi: tuple[int, ...]

    @property
    def lam(self) -> int:
        """λ, the number of constrained attributes."""
        return len(self.attributes)

    def validate(self, schema: FelipSchema) -> Query:
        """Check the query against ``schema``; ``ValueError`` names the broken constraint."""
        return make_query(
            schema, dict(zip(self.attributes, zip(self.lo, self.hi, strict=True), strict=True))
        )

    def as_json(self) -> dict[str, list[int]]:
        return {"attributes": list(self.attributes), "lo": list(self.lo), "hi": list(self.hi)}

    def describe(self, schema: FelipSchema) -> str:
        parts = []
        for a, lo, hi in zip(self.attributes, self.lo, self.hi, strict=True):
            name = schema.names[a]
            parts.append(f"{name} = {lo}" if lo == hi else f"{lo} <= {name} <= {hi}")
        return " and ".join(parts)


def make_query(schema: FelipSchema, constraints: Mapping[int | str, Any]) -> Query:
    """A validated query from ``{attribute: (lo, hi) or value}``.

    Raises ``ValueError`` naming the constraint for an unknown attribute, an empty or reversed
    range, a value outside the attribute's domain, a range on a categorical attribute, a
    repeated attribute, no constraint, or λ larger than the number of attributes.

    Examples
    --------
    >>> from longldp.apps.felip.grids import Attribute, FelipSchema
    >>> s = FelipSchema((Attribute("age", 74), Attribute("hours", 96)))
    >>> make_query(s, {"hours": (10, 40), "age": 3})
    Query(attributes=(0, 1), lo=(3, 10), hi=(3, 40))
    """
    if not isinstance(constraints, Mapping):
        raise ValueError(f"{OWNER}: a query is a mapping attribute -> (lo, hi) or value.")
    if len(constraints) > schema.d:
        raise ValueError(
            f"{OWNER}: query λ = {len(constraints)} is larger than the number of attributes "
            f"d = {schema.d}."
        )
    if not constraints:
        raise ValueError(f"{OWNER}: a query needs at least one constraint (λ >= 1).")
    rows: dict[int, tuple[int, int]] = {}
    for key, bound in constraints.items():
        a = schema.index(key)
        attr = schema.attributes[a]
        if a in rows:
            raise ValueError(f"{OWNER}: query attribute {attr.name!r} is constrained twice.")
        lo, hi = _bounds(attr.name, bound)
        if lo > hi:
            raise ValueError(
                f"{OWNER}: query range on {attr.name!r} is reversed (lo = {lo} > hi = {hi})."
            )
        for v in (lo, hi):
            if not 0 <= v < attr.domain:
                raise ValueError(
                    f"{OWNER}: query value {v} on {attr.name!r} is outside its domain "
                    f"[0, {attr.domain})."
                )
        if attr.kind == CATEGORICAL and lo != hi:
            raise ValueError(
                f"{OWNER}: query constraint on categorical {attr.name!r} must be a point; "
                f"got the range [{lo}, {hi}]."
            )
        rows[a] = (lo, hi)
    order = sorted(rows)
    return Query(tuple(order), tuple(rows[a][0] for a in order), tuple(rows[a][1] for a in order))


def _bounds(name: str, bound: Any) -> tuple[int, int]:
    def as_int(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{OWNER}: query bound on {name!r} must be an integer; got {v!r}.")
        return int(v)

    if isinstance(bound, (int, np.integer)) and not isinstance(bound, bool):
        return int(bound), int(bound)
    if isinstance(bound, (str, bytes)) or not isinstance(bound, Sequence | np.ndarray):
        raise ValueError(
            f"{OWNER}: query constraint on {name!r} must be a value or (lo, hi); got {bound!r}."
        )
    items = list(bound)
    if len(items) == 0:
        raise ValueError(f"{OWNER}: query range on {name!r} is empty (no bounds given).")
    if len(items) == 1:
        return as_int(items[0]), as_int(items[0])
    if len(items) != 2:
        raise ValueError(f"{OWNER}: query range on {name!r} must be (lo, hi); got {bound!r}.")
    return as_int(items[0]), as_int(items[1])


def true_answers(matrix: ArrayLike, queries: Sequence[Query]) -> NDArray[np.int64]:
    """Exact counts of the rows of an (n, d) code matrix that satisfy each query."""
    x = np.asarray(matrix)
    out = np.empty(len(queries), dtype=np.int64)
    for i, q in enumerate(queries):
        ok = np.ones(x.shape[0], dtype=bool)
        for a, lo, hi in zip(q.attributes, q.lo, q.hi, strict=True):
            col = x[:, a]
            ok &= (col >= lo) & (col <= hi)
        out[i] = np.count_nonzero(ok)
    return out


# ---------------------------------------------------------------------------------- workload


@dataclass(frozen=True, eq=False)
class Workload:
    """A query workload generated once per study, with the true answers it was checked on.

    Attributes
    ----------
    schema : FelipSchema
    queries : tuple of Query
    answers : numpy.ndarray of int64
        True counts on the data the workload was generated from (timestamp 0). With whole rows
        permuted between timestamps they are the true counts at every timestamp.
    n : int
        Users of that data.
    selectivity : tuple of float
        r_a per attribute: what FELIP's sizing should assume (math §8.10.1 [R]).
    lam, seed, attribute_draw, selectivity_mode, replaced, dataset
        How it was generated (``replaced``: zero-answer draws that were replaced).
    """

    schema: FelipSchema
    queries: tuple[Query, ...]
    answers: NDArray[np.int64]
    n: int
    selectivity: tuple[float, ...]
    lam: int | None = None
    seed: int | None = None
    attribute_draw: str = "normal"
    selectivity_mode: str = "list"
    replaced: int = 0
    dataset: str = ""

    @property
    def fractions(self) -> NDArray[np.float64]:
        """True answers as fractions of n."""
        return np.asarray(self.answers, dtype=np.float64) / self.n

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "dataset": self.dataset,
            "n": self.n,
            "attributes": self.schema.as_json(),
            "lam": self.lam,
            "seed": self.seed,
            "attribute_draw": self.attribute_draw,
            "selectivity_mode": self.selectivity_mode,
            "selectivity": list(self.selectivity),
            "replaced": self.replaced,
            "queries": [
                {**q.as_json(), "answer": int(a)}
                for q, a in zip(self.queries, self.answers, strict=True)
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_json(), indent=1)

    def save(self, path: str | Path) -> None:
        """Write the workload as JSON."""
        Path(path).write_text(self.to_json())

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> Workload:
        """Rebuild (and re-validate) a workload from :meth:`as_json` output or its text."""
        obj = json.loads(data) if isinstance(data, str) else dict(data)
        if obj.get("format") != FORMAT:
            raise ValueError(f"{OWNER}: not a FELIP workload (format {obj.get('format')!r}).")
        schema = FelipSchema.from_json(obj["attributes"])
        queries = tuple(
            Query(tuple(q["attributes"]), tuple(q["lo"]), tuple(q["hi"])).validate(schema)
            for q in obj["queries"]
        )
        return cls(
            schema=schema,
            queries=queries,
            answers=np.array([q["answer"] for q in obj["queries"]], dtype=np.int64),
            n=int(obj["n"]),
            selectivity=tuple(float(s) for s in obj["selectivity"]),
            lam=obj.get("lam"),
            seed=obj.get("seed"),
            attribute_draw=obj.get("attribute_draw", "normal"),
            selectivity_mode=obj.get("selectivity_mode", "list"),
            replaced=int(obj.get("replaced", 0)),
            dataset=obj.get("dataset", ""),
        )

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        """Read a workload written by :meth:`save`."""
        return cls.from_json(Path(path).read_text())


def _selectivity_list(schema: FelipSchema, selectivity: Any) -> tuple[str, tuple[float, ...]]:
    d = schema.d
    if selectivity is None:
        return "list", tuple(DEFAULT_SELECTIVITY[a % len(DEFAULT_SELECTIVITY)] for a in range(d))
    if isinstance(selectivity, str):
        if selectivity.lower() != "normal":
            raise ValueError(
                f"{OWNER}: 'selectivity' must be None, a number, a sequence or 'normal'; "
                f"got {selectivity!r}."
            )
        lo = [1.0 / dom for dom in schema.domains]
        mean = [float(truncnorm.mean((x - 0.5) * 6, 3.0, loc=0.5, scale=1 / 6)) for x in lo]
        return "normal", tuple(mean)
    values = [selectivity] * d if not isinstance(selectivity, Sequence) else list(selectivity)
    if len(values) != d:
        raise ValueError(f"{OWNER}: 'selectivity' needs one value per attribute ({d}).")
    return "list", tuple(
        check.positive_float(OWNER, f"selectivity[{a}]", v, upper=1.0 + 1e-12)
        for a, v in enumerate(values)
    )


def _draw_attributes(d: int, lam: int, how: str, gen: np.random.Generator) -> list[int]:
    if how == "uniform":
        return sorted(int(a) for a in gen.choice(d, size=lam, replace=False))
    sd = d / 6
    dist = truncnorm(-3.0, 3.0, loc=d / 2, scale=sd)  # [0, d] is mean ± 3 sd
    while True:
        draw = np.minimum(dist.rvs(size=(64, lam), random_state=gen).astype(np.int64), d - 1)
        for row in draw:
            if np.unique(row).size == lam:
                return sorted(int(a) for a in row)


def generate_workload(
    data: Table | ArrayLike,
    schema: FelipSchema | None = None,
    *,
    lam: int = 3,
    n_queries: int = 100,
    selectivity: float | Sequence[float] | str | None = None,
    attribute_draw: str = "normal",
    seed: int = 1,
    dataset: str = "",
    max_draws: int = 100_000,
) -> Workload:
    """Draw a FELIP query workload (math §8.12); see the module docstring for the procedure.

    Parameters
    ----------
    data : Table or array_like
        Timestamp 0: a Table (its columns in schema order) or an (n, d) code matrix.
    schema : FelipSchema, optional
        Default: every column of the Table, numerical.
    lam : int, default=3
        λ, attributes per query, 1 <= λ <= d.
    n_queries : int, default=100
    selectivity : float, sequence, "normal" or None, default=None
        None: [C]'s list :data:`DEFAULT_SELECTIVITY`.
    attribute_draw : {"normal", "uniform"}, default="normal"
    seed : int, default=1
        The workload's own seed ([C] uses 1), independent of the repetitions' seeds.
    dataset : str, default=""
        Recorded with the workload.
    max_draws : int, default=100000
        Give up (``ValueError``) after this many zero-answer draws.

    Returns
    -------
    Workload
    """
    if schema is None:
        if not isinstance(data, Table):
            raise ValueError(f"{OWNER}: give 'schema' when 'data' is a matrix.")
        schema = FelipSchema.from_table(data)
    x = schema.matrix(data) if isinstance(data, Table) else np.asarray(data)
    if x.ndim != 2 or x.shape[1] != schema.d or x.shape[0] < 1:
        raise ValueError(f"{OWNER}: 'data' must be an (n, {schema.d}) matrix; got {x.shape}.")
    lam = check.integer(OWNER, "lam", lam, minimum=1)
    if lam > schema.d:
        raise ValueError(
            f"{OWNER}: 'lam' (λ = {lam}) is larger than the number of attributes d = {schema.d}."
        )
    n_queries = check.integer(OWNER, "n_queries", n_queries, minimum=1)
    attribute_draw = check.choice(OWNER, "attribute_draw", attribute_draw, ATTRIBUTE_DRAWS)
    mode, sel = _selectivity_list(schema, selectivity)
    gen = np.random.default_rng(seed)
    queries: list[Query] = []
    answers: list[int] = []
    replaced = 0
    while len(queries) < n_queries:
        attrs = _draw_attributes(schema.d, lam, attribute_draw, gen)
        bounds: dict[int, tuple[int, int]] = {}
        for a in attrs:
            attr = schema.attributes[a]
            if attr.kind == CATEGORICAL:
                v = int(gen.integers(attr.domain))
                bounds[a] = (v, v)
                continue
            s = sel[a]
            if mode == "normal":
                lo_s = 1.0 / attr.domain
                s = float(truncnorm.rvs((lo_s - 0.5) * 6, 3.0, 0.5, 1 / 6, random_state=gen))
            w = max(1, math.floor(s * attr.domain))
            lo = int(gen.integers(0, attr.domain - w + 1))
            bounds[a] = (lo, lo + w - 1)
        q = make_query(schema, bounds)
        count = int(true_answers(x, [q])[0])
        if count == 0:
            replaced += 1
            if replaced > max_draws:
                raise ValueError(f"{OWNER}: {max_draws} queries in a row had answer 0.")
            continue
        queries.append(q)
        answers.append(count)
    return Workload(
        schema=schema,
        queries=tuple(queries),
        answers=np.array(answers, dtype=np.int64),
        n=int(x.shape[0]),
        selectivity=sel,
        lam=lam,
        seed=seed,
        attribute_draw=attribute_draw,
        selectivity_mode=mode,
        replaced=replaced,
        dataset=dataset,
    )


# ---------------------------------------------------------------------------------- metric


def mse_per_timestamp(estimates: ArrayLike, truth: ArrayLike) -> NDArray[np.float64]:
    """MSE_t = (1/|Q|) Σ_q (â_q − a_q)² per timestamp, answers as fractions (math §8.12).

    ``estimates`` has shape (τ, |Q|); ``truth`` (τ, |Q|) or (|Q|,) (the same at every t).
    """
    est = np.atleast_2d(np.asarray(estimates, dtype=np.float64))
    true = np.broadcast_to(np.asarray(truth, dtype=np.float64), est.shape)
    return metrics.mse_per_timestamp(est, true)


def mse_avg(estimates: ArrayLike, truth: ArrayLike) -> float:
    """MSE_avg: the mean of :func:`mse_per_timestamp` over the τ timestamps (seed 002 eq. 1)."""
    return float(np.mean(mse_per_timestamp(estimates, truth)))


__all__ = [
    "ATTRIBUTE_DRAWS",
    "DEFAULT_SELECTIVITY",
    "Query",
    "Workload",
    "generate_workload",
    "make_query",
    "mse_avg",
    "mse_per_timestamp",
    "true_answers",
]
