"""FELIP: multi-dimensional range and point queries under (longitudinal) LDP.

FELIP (Costa Filho and Machado, EDBT 2023; summarised in seed 002 §7.1) answers conjunctive
queries over d attributes from a 1-D grid per numerical attribute and a 2-D grid per pair. The
paper is not public; this module follows the reconstruction in docs/math.md §8,
which draws on HDG (Yang et al., PVLDB 14(3), 2020) and the public implementation
``bdreasch/mdc`` ([C]). See ``docs/felip.md`` for the method, decisions and parameters.

Pieces (each in its own module):

- :mod:`~longldp.apps.felip.grids`: attributes, cells of unequal width, the grid set, the
  partition of the users into one group per grid (math §8.2–§8.3);
- :mod:`~longldp.apps.felip.sizing`: grid sizes from the query selectivity and the oracle of
  each grid (math §8.4–§8.5, §8.11);
- :mod:`~longldp.apps.felip.estimate`: non-negativity, consistency, response matrices and
  query answers (math §8.6–§8.9);
- :mod:`~longldp.apps.felip.queries`: query validation, the workload, MSE_avg (math §8.12);
- :mod:`~longldp.apps.felip.data`: the study's datasets (12 or 6 numerical attributes).

Longitudinally (math §8.11) the grid set, the sizes, each user's group and each client's memo stay
fixed over all timestamps: a user maps its values at time t to a cell of its grid and reports it
through the grid's oracle (round 1 memoized per cell, round 2 fresh), and the server runs the
whole estimation on that timestamp's reports alone.

Engines (design §4): the users are a :class:`longldp.simulate.Population` with one reporting
group per grid. ``"count-level"`` draws each grid's support counts from its cell histogram
(``sample_support``; exact per timestamp, no memo correlation over time); ``"per-user"`` keeps a
memo per user and grid across timestamps (``perturb_support``; exact jointly over time, and it
reports each user's spent budget); ``"reports"`` is the per-user engine with every report
materialized and aggregated by the server (``perturb`` + ``support_counts``: the real client
path, slower).

The server's estimation runs on batches of timestamps at once
(:func:`~longldp.apps.felip.estimate.fit_model`), each timestamp exactly as on its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.apps.felip.estimate import (
    EstimationOptions,
    FelipModel,
    QueryBatch,
    fit_model,
    prepare_queries,
)
from longldp.apps.felip.grids import (
    OWNER,
    FelipLayout,
    FelipSchema,
    Grid,
    balanced_groups,
    group_sizes,
)
from longldp.apps.felip.queries import (
    DEFAULT_SELECTIVITY,
    Query,
    Workload,
    mse_avg,
    mse_per_timestamp,
    true_answers,
)
from longldp.apps.felip.sizing import (
    ALPHA1,
    ALPHA2,
    GridSizes,
    OracleSpec,
    choose_sizes,
    oracle_spec,
)
from longldp.data import LongitudinalTable, Table, to_longitudinal
from longldp.protocols import FrequencyOracle
from longldp.simulate import Population

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class FelipPlan:
    """Everything fixed before the first report: grids, sizes, oracles (math §8.2–§8.5, §8.11).

    Build it with :func:`plan_felip`.

    Attributes
    ----------
    schema : FelipSchema
    n : int
        Number of users the sizes were chosen for.
    spec : OracleSpec
        Candidate oracle(s) and budget.
    sizes : GridSizes
        g1, g2 and the per-grid optima behind them.
    layout : FelipLayout
        The grid set.
    protocols : tuple of FrequencyOracle
        The oracle of each grid, over its k_G cells.
    selectivity : tuple of float
        r_a used for sizing.
    size_rule, unify : str
        The sizing options used.
    """

    schema: FelipSchema
    n: int
    spec: OracleSpec
    sizes: GridSizes
    layout: FelipLayout
    protocols: tuple[FrequencyOracle, ...]
    selectivity: tuple[float, ...]
    size_rule: str
    unify: str

    @property
    def grids(self) -> tuple[Grid, ...]:
        return self.layout.grids

    @property
    def m(self) -> int:
        """Number of grids (= user groups)."""
        return self.layout.m

    def group_sizes(self) -> NDArray[np.int64]:
        """n_G of the balanced partition: ⌊n/m⌋ or ⌊n/m⌋ + 1 users per grid."""
        return group_sizes(self.n, self.m)

    def assign(self, rng: Any) -> NDArray[np.int64]:
        """Each user's grid, drawn once for the whole run (math §8.2.2, §8.11)."""
        return balanced_groups(self.n, self.m, rng)

    def grid_variances(self, sizes: ArrayLike | None = None) -> FloatArray:
        """Per-cell variance of each grid's counts, n²·V*(n_G) = n²·u_G/n_G (for the weights)."""
        ng = self.group_sizes() if sizes is None else np.asarray(sizes)
        unit = np.array([p.approx_variance(1) for p in self.protocols])
        return float(self.n) ** 2 * unit / ng

    def raw_counts(
        self, supports: Sequence[ArrayLike], sizes: ArrayLike | None = None
    ) -> FloatArray:
        """Unbiased cell counts of every grid from its support counts (math §8.6).

        Grid G's oracle estimates the frequencies of its n_G reporters, f̂_G (math §1.1), scaled
        to counts over all users: ĉ_G = f̂_G·n. ``supports[G]`` may carry leading batch axes
        (independent repetitions); the result then has them too, shape (..., Σ k_G).
        """
        ng = self.group_sizes() if sizes is None else np.asarray(sizes)
        if len(supports) != self.m:
            raise ValueError(f"{OWNER}: 'supports' needs one support vector per grid ({self.m}).")
        parts = [
            p.estimate(s, int(k)) * self.n
            for p, s, k in zip(self.protocols, supports, ng, strict=True)
        ]
        return np.concatenate(parts, axis=-1)

    def estimate(
        self,
        supports: Sequence[ArrayLike],
        sizes: ArrayLike | None = None,
        options: EstimationOptions | None = None,
    ) -> FelipModel:
        """The server's whole pipeline on one timestamp's support counts (math §8.6–§8.8).

        ``supports[G]`` is what grid G's aggregator accumulated (``Aggregator.support_counts``)
        and ``sizes[G]`` its number of reports; with a leading batch axis on every support, a
        batch of timestamps is estimated at once.
        """
        ng = self.group_sizes() if sizes is None else np.asarray(sizes)
        raw = self.raw_counts(supports, ng)
        return fit_model(self.layout, raw, self.n, self.grid_variances(ng), options)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary: sizes and the oracle of every grid."""
        return {
            "n": self.n,
            "m": self.m,
            "oracle": list(self.spec.candidates),
            "eps": self.spec.eps,
            "eps_1": self.spec.eps_1,
            "size_rule": self.size_rule,
            "unify": self.unify,
            "selectivity": list(self.selectivity),
            "g1": list(self.layout.g1),
            "g2": list(self.layout.g2),
            "grids": [
                {
                    "attributes": [self.schema.names[a] for a in g.attributes],
                    "shape": list(g.shape),
                    "oracle": p.name,
                    **({"g": int(p.g)} if hasattr(p, "g") else {}),
                }
                for g, p in zip(self.grids, self.protocols, strict=True)
            ],
        }


def plan_felip(
    schema: FelipSchema,
    n: int,
    oracle: str | Sequence[str] = "adaptive",
    eps: float = 1.0,
    *,
    eps_1: float | None = None,
    alpha: float | None = None,
    calibration: str = "exact",
    selectivity: float | Sequence[float] | None = None,
    size_rule: str = "error",
    unify: str = "code",
    alpha1: float = ALPHA1,
    alpha2: float = ALPHA2,
) -> FelipPlan:
    """Choose grid sizes and per-grid oracles for n users (math §8.4–§8.5, §8.11).

    Parameters
    ----------
    schema : FelipSchema
    n : int
        Number of users (at least the number of grids).
    oracle : str or sequence of str, default="adaptive"
        ``"adaptive"`` (one-shot GRR or OUE per grid, FELIP's rule), a registry name (one-shot
        ``"OUE"``, ``"GRR"``, ... or a chain ``"L-OSUE"``, ``"OLOLOHA"``, ``"BiLOLOHA"``,
        ``"L-GRR"``), ``"adaptive-longitudinal"`` (L-GRR or L-OSUE per grid) or candidates.
    eps : float, default=1.0
        ε of a one-shot oracle, ε∞ of a chain.
    eps_1, alpha : float, optional
        Chains: ε1, or α = ε1/ε∞ (seed 002 uses α = 0.1).
    calibration : {"exact", "paper"}, default="exact"
        L-GRR / LOLOHA round-2 calibration (math §3.2).
    selectivity : float or sequence of float, optional
        r_a per attribute (math §8.10.1 [R]: the workload's); default [C]'s 12-attribute list
        reused cyclically (:data:`~longldp.apps.felip.queries.DEFAULT_SELECTIVITY`).
    size_rule : {"error", "variance"}, default="error"
        How the sizing picks among candidate oracles (math §8.4; "variance" is [C]'s rule).
    unify : {"code", "mean"}, default="code"
        g2 per attribute from its pair sizes (math §8.10.2; "code" reproduces [C]).
    alpha1, alpha2 : float, default=0.7, 0.03
        HDG's non-uniformity constants.

    Returns
    -------
    FelipPlan

    Examples
    --------
    >>> from longldp.apps.felip.grids import Attribute, FelipSchema
    >>> s = FelipSchema(tuple(Attribute(f"x{i}", 50) for i in range(6)))
    >>> p = plan_felip(s, 10**6, "adaptive", 1.0, selectivity=0.5)
    >>> p.sizes.pairs[(0, 1)].sizes, p.sizes.one_d[0].sizes, p.m
    ((4, 4), (29,), 21)
    """
    spec = oracle_spec(oracle, eps, eps_1, alpha, calibration)
    if selectivity is None:
        sel = tuple(DEFAULT_SELECTIVITY[a % len(DEFAULT_SELECTIVITY)] for a in range(schema.d))
    elif isinstance(selectivity, (Sequence, np.ndarray)):
        sel = tuple(float(s) for s in selectivity)
    else:
        sel = (float(selectivity),) * schema.d
    sizes = choose_sizes(
        schema, n, spec, sel, size_rule=size_rule, unify=unify, alpha1=alpha1, alpha2=alpha2
    )
    layout = FelipLayout(schema, sizes.g1, sizes.g2)
    protocols = tuple(spec.build(spec.choose(g.k), g.k) for g in layout.grids)
    return FelipPlan(schema, int(n), spec, sizes, layout, protocols, sel, size_rule, unify)


# ---------------------------------------------------------------------------------- simulation


@dataclass(frozen=True, eq=False)
class FelipResult:
    """What one FELIP run produced (one repetition of one study cell).

    Attributes
    ----------
    plan : FelipPlan
    queries : tuple of Query
    answers : numpy.ndarray, shape (τ, |Q|)
        Estimated answers as fractions of n.
    truth : numpy.ndarray, shape (τ, |Q|)
        True answers as fractions of n.
    groups : numpy.ndarray of int64, shape (n,)
        The grid of every user (fixed over time).
    rounds : numpy.ndarray of int64, shape (τ,)
        Consistency rounds run at each timestamp.
    spent : dict of str to numpy.ndarray or None
        Per user ``reports``, distinct ``memos`` and the ``epsilon`` bound min(t·ε1, memos·ε∞)
        (math §4; :meth:`longldp.simulate.Population.budget`). ``memos`` and ``epsilon`` are
        None under the count-level engine for chains, which draws no memo.
    engine : str
    models : tuple of FelipModel or None
        Each timestamp's model when ``keep_models=True``.
    """

    plan: FelipPlan
    queries: tuple[Query, ...]
    answers: FloatArray
    truth: FloatArray
    groups: NDArray[np.int64]
    rounds: NDArray[np.int64]
    spent: dict[str, NDArray | None]
    engine: str
    models: tuple[FelipModel, ...] | None = None

    @property
    def tau(self) -> int:
        return int(self.answers.shape[0])

    @property
    def mse_per_timestamp(self) -> FloatArray:
        """MSE_t over the queries, fraction units (math §8.12)."""
        return mse_per_timestamp(self.answers, self.truth)

    @property
    def mse_avg(self) -> float:
        """MSE_avg: the mean of MSE_t over the τ timestamps (seed 002 eq. 1)."""
        return mse_avg(self.answers, self.truth)

    def rows(self) -> list[dict[str, Any]]:
        """One record per timestamp (t, mse, rounds): what a study table stores."""
        return [
            {"t": t, "mse": float(v), "rounds": int(r)}
            for t, (v, r) in enumerate(zip(self.mse_per_timestamp, self.rounds, strict=True))
        ]


def _timestamps(plan: FelipPlan, data: Any) -> tuple[int, int, Any]:
    """(τ, n, (base, accessor)), accessor(t) -> (cells (n', m), rows (n,), matrix or None).

    ``base`` is the matrix whose true answers hold at every t (None: compute them per t).
    """
    schema, layout = plan.schema, plan.layout
    if isinstance(data, LongitudinalTable):
        x = schema.matrix(data.base)
        cells = layout.cells(x)
        perm = data.perm
        return int(perm.shape[0]), x.shape[0], (x, lambda t: (cells, perm[t], None))
    if isinstance(data, Table):
        x = schema.matrix(data)
        cells = layout.cells(x)
        ident = np.arange(x.shape[0])
        return 1, x.shape[0], (x, lambda t: (cells, ident, None))
    arr = np.asarray(data)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[2] != schema.d:
        raise ValueError(
            f"{OWNER}: 'data' must be a Table, a LongitudinalTable or an array of shape "
            f"(tau, n, {schema.d}) or (n, {schema.d}); got shape {np.shape(data)}."
        )
    for a, dom in enumerate(schema.domains):
        check.domain_values(OWNER, arr[:, :, a], dom, f"data (attribute {schema.names[a]!r})")
    ident = np.arange(arr.shape[1])
    return int(arr.shape[0]), arr.shape[1], (None, lambda t: (layout.cells(arr[t]), ident, arr[t]))


def simulate_felip(
    plan: FelipPlan,
    data: Table | LongitudinalTable | ArrayLike,
    queries: Sequence[Query] | Workload,
    rng: Any,
    *,
    engine: str = "count-level",
    groups: ArrayLike | None = None,
    options: EstimationOptions | None = None,
    keep_models: bool = False,
) -> FelipResult:
    """Run a FELIP collection over every timestamp of ``data`` and answer the queries.

    Parameters
    ----------
    plan : FelipPlan
        From :func:`plan_felip` with ``n`` = the number of users of ``data``.
    data : Table, LongitudinalTable or array_like
        One timestamp (a Table or an (n, d) code matrix), a LongitudinalTable (rows permuted
        between timestamps; the true answers are computed once), or a (τ, n, d) array.
    queries : sequence of Query or Workload
    rng : numpy.random.Generator or seed
        Randomness of the reports (and of the partition when ``groups`` is None).
    engine : {"count-level", "per-user", "reports"}, default="count-level"
    groups : array_like of int, shape (n,), optional
        Each user's grid; default :meth:`FelipPlan.assign`.
    options : EstimationOptions, optional
    keep_models : bool, default=False
        Keep every timestamp's :class:`FelipModel` in the result.

    Returns
    -------
    FelipResult
    """
    gen = np.random.default_rng(rng)
    population = Population(plan.n, engine, OWNER)
    opts = options or EstimationOptions()
    if isinstance(queries, Workload) and queries.schema != plan.schema:
        raise ValueError(f"{OWNER}: the workload's attributes differ from the plan's schema.")
    qs = tuple(queries.queries) if isinstance(queries, Workload) else tuple(queries)
    batch: QueryBatch = prepare_queries(plan.layout, qs)
    tau, n_data, (base, at) = _timestamps(plan, data)
    n, m, layout = plan.n, plan.m, plan.layout
    if n_data != n:
        raise ValueError(f"{OWNER}: the plan is for n = {n} users; the data has {n_data}.")
    group = _groups(plan, groups, gen)
    members = [np.flatnonzero(group == g) for g in range(m)]
    for g, proto in enumerate(plan.protocols):  # one reporting group per grid, fixed for good
        population.group(proto, members[g], f"grid {g}")
    sizes = np.array([u.size for u in members])
    variances = plan.grid_variances(sizes)
    truth = np.empty((tau, len(qs)))
    fixed_truth = None if base is None else true_answers(base, qs) / n

    def cells_at_each_timestamp() -> Iterator[list[NDArray[np.int64]]]:
        for t in range(tau):
            cells, rows, matrix = at(t)
            # the cell each user reports at t: row rows[u] of the cell table, column group[u]
            mine = cells.ravel()[rows.astype(np.int64) * m + group].astype(np.int64)
            truth[t] = fixed_truth if fixed_truth is not None else true_answers(matrix, qs) / n
            yield [mine[who] for who in members]

    # 1. the reports of every timestamp, the engine's way (design §4)
    raw = plan.raw_counts(population.run(cells_at_each_timestamp(), gen), sizes)
    # 2. the server's estimation of each timestamp alone, in batches of timestamps
    answers = np.empty((tau, len(qs)))
    rounds = np.empty(tau, dtype=np.int64)
    models: list[FelipModel] = []
    width = layout.total_cells + layout.response_index["grid"].size + 8 * len(qs)
    step = max(1, min(tau, (1 << 20) // width))
    for lo in range(0, tau, step):
        chunk = slice(lo, min(tau, lo + step))
        model = fit_model(layout, raw[chunk], n, variances, opts)
        answers[chunk] = model.answer(batch) / n
        rounds[chunk] = model.rounds
        if keep_models:
            models.extend(model.at(i) for i in range(model.batch))
    return FelipResult(
        plan,
        qs,
        answers,
        truth,
        group,
        rounds,
        population.budget(),
        population.engine,
        tuple(models) if keep_models else None,
    )


def _groups(
    plan: FelipPlan, groups: ArrayLike | None, gen: np.random.Generator
) -> NDArray[np.int64]:
    if groups is None:
        return plan.assign(gen)
    g = check.domain_values(OWNER, groups, plan.m, "groups")
    if g.shape != (plan.n,):
        raise ValueError(f"{OWNER}: 'groups' must have one grid per user, shape ({plan.n},).")
    empty = np.flatnonzero(np.bincount(g, minlength=plan.m) == 0)
    if empty.size:
        raise ValueError(f"{OWNER}: 'groups' leaves grid {int(empty[0])} without users.")
    return g


def run_felip(
    table: Table,
    workload: Workload,
    oracle: str | Sequence[str],
    eps: float,
    *,
    eps_1: float | None = None,
    alpha: float | None = None,
    tau: int = 1,
    rng: Any = None,
    engine: str = "count-level",
    calibration: str = "exact",
    size_rule: str = "error",
    unify: str = "code",
    options: EstimationOptions | None = None,
) -> FelipResult:
    """One study cell: (dataset, oracle, ε, repetition) → per-timestamp MSE of the workload.

    Interpolates ``table`` to τ timestamps by permuting whole rows (timestamp 0 the original;
    the joint distribution and the true answers are the same at every t, math §8.12 [R]), plans
    FELIP for its n users with the workload's selectivities, draws the partition once and runs
    the collection. Independent streams for the permutations, the partition and the reports are
    spawned from ``rng``, so a cell is a pure function of its seed.

    Parameters
    ----------
    table : Table
        Timestamp 0 with the workload's attributes (e.g. from
        :func:`~longldp.apps.felip.data.felip_table`).
    workload : Workload
        Generated once per study (:func:`~longldp.apps.felip.queries.generate_workload`).
    oracle, eps, eps_1, alpha, calibration, size_rule, unify
        As in :func:`plan_felip`.
    tau : int, default=1
    rng : numpy.random.Generator, SeedSequence or int
    engine : {"count-level", "per-user", "reports"}, default="count-level"
    options : EstimationOptions, optional

    Returns
    -------
    FelipResult
        ``mse_per_timestamp`` and ``mse_avg`` are the study's metric.
    """
    gen = np.random.default_rng(rng)
    data_rng, assign_rng, report_rng = gen.spawn(3)
    schema = workload.schema
    plan = plan_felip(
        schema,
        table.n,
        oracle,
        eps,
        eps_1=eps_1,
        alpha=alpha,
        calibration=calibration,
        selectivity=workload.selectivity,
        size_rule=size_rule,
        unify=unify,
    )
    data = to_longitudinal(table.select(schema.names), tau, data_rng)
    return simulate_felip(
        plan,
        data,
        workload,
        report_rng,
        engine=engine,
        groups=plan.assign(assign_rng),
        options=options,
    )


__all__ = [
    "FelipPlan",
    "FelipResult",
    "plan_felip",
    "run_felip",
    "simulate_felip",
]
