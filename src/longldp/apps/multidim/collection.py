"""Multidimensional longitudinal frequency estimation: SMP, SPL and ALLOMFREE ([004]).

Every user holds one value per attribute, ``values[τ, n, d]`` with attribute j over [0, k_j),
and reports over τ timestamps through a two-round memoizing chain. Three solutions:

- **SMP** ([004] §3, eq. 8 with r = 1): every user reports *one* attribute, chosen once and kept
  forever, with the whole budget (ε∞, ε1). Attribute j is estimated from its n_j ≈ n/d
  reporters only: f̂_j = estimate(support_j, n_j).
- **SPL** ([004] §3, eq. 7): every user reports every attribute, each with (ε∞/d, ε1/d) and its
  own memo; f̂_j = estimate(support_j, n).
- **ALLOMFREE** ([004] §4.5, Algorithm 1): SMP where attribute j uses L-GRR when its V*
  ([004] eq. 11) is not larger than L-OSUE's, else L-OSUE.

Users are assigned to attributes by an exactly balanced random partition (shuffle, then deal
into d groups whose sizes differ by at most one), as the paper's experiment code does
(``np.array_split`` of the shuffled users); [004] eq. 8 is the variance at exactly n/d users
per attribute. An iid uniform choice would make n_j ~ Binomial(n, 1/d) and add variance
(E[1/n_j] > d/n) that the paper's formulas do not contain.

References: [004] Arcolezi, Couchot, Al Bouna, Xiao, "Improving the utility of locally
differentially private protocols for longitudinal and multidimensional frequency estimates"
(arXiv:2111.04636), §3 (SMP/SPL), §4.1 eq. 9–11 (estimator, V*), §4.2 eq. 13 (L-GRR), §4.3
eq. 15 (L-OSUE), §4.5 Algorithm 1 (ALLOMFREE), §5.1 (MSE_avg). See docs/multidim.md.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import metrics, privacy
from longldp import postprocess as pp
from longldp.protocols import FrequencyOracle, get_protocol_class, list_protocols
from longldp.simulate import Population

OWNER = "multidim"
#: The three solutions of [004] §3 and §4.5.
SOLUTIONS = ("SMP", "SPL", "ALLOMFREE")
#: ALLOMFREE's candidates, in tie-breaking order ([004] §4.5: L-GRR when V*_L-GRR <= V*_L-OSUE).
ALLOMFREE_CANDIDATES = ("L-GRR", "L-OSUE")
#: L-GRR calibration used by [004] (its eq. 13, the notebook's ``param_L_GRR``).
PAPER_CALIBRATION = "paper"

FloatArray = NDArray[np.float64]


# ---------------------------------------------------------------------------------- protocols


def build_protocol(
    chain: str,
    k: int,
    eps_perm: float,
    eps_1: float | None,
    calibration: str = PAPER_CALIBRATION,
) -> FrequencyOracle:
    """One attribute's longitudinal protocol from the registry.

    Parameters
    ----------
    chain : str
        A longitudinal registry name (``"L-GRR"``, ``"L-OSUE"``, ``"OLOLOHA"``, ...).
    k : int
        The attribute's domain size.
    eps_perm, eps_1 : float
        ε∞ and ε1 of this attribute; ``eps_1`` is None for chains without a second round
        (dBitFlipPM).
    calibration : {"paper", "exact"}, default="paper"
        Passed to the chains that take one (L-GRR, BiLOLOHA, OLOLOHA), ignored by the others.

    Returns
    -------
    FrequencyOracle
    """
    cls = _chain_class(chain, "chain")
    budget = privacy.Budget.at_level(eps_perm, eps_1, cls.budget_params)
    params: dict[str, Any] = {"k": k, **budget.parameters(cls.name, cls.budget_params)}
    init = _init_fields(cls)
    if "calibration" in init:
        params["calibration"] = calibration
    return cls(**params)


def allomfree_vstar(
    k: int,
    eps_perm: float,
    eps_1: float | None,
    n: int = 1,
    calibration: str = PAPER_CALIBRATION,
    candidates: Sequence[str] = ALLOMFREE_CANDIDATES,
) -> dict[str, float]:
    """V* ([004] eq. 11) of each ALLOMFREE candidate for one attribute.

    V* = P0(1 − P0) / (n (P1 − P0)²) with P1 − P0 = (p1 − q1)(p2 − q2). Every candidate's V*
    is proportional to 1/n, so the comparison does not depend on n: the paper's code compares
    at n = 1, and comparing at the n/d users an attribute gets under SMP gives the same choice.

    Parameters
    ----------
    k : int
        Domain size of the attribute.
    eps_perm, eps_1 : float
        ε∞ and ε1 (0 < ε1 < ε∞); ``eps_1`` is None only for one-round candidates.
    n : int, default=1
        Number of users the V* refers to.
    calibration : {"paper", "exact"}, default="paper"
        L-GRR's round-2 calibration (docs/math.md §3.2); [004] used ``"paper"`` (its eq. 13).
    candidates : sequence of str, default=("L-GRR", "L-OSUE")

    Returns
    -------
    dict
        Canonical protocol name → V*, in the order of ``candidates``.
    """
    n = check.integer(OWNER, "n", n, minimum=1)
    out: dict[str, float] = {}
    for name in _candidate_names(candidates):
        proto = build_protocol(name, k, eps_perm, eps_1, calibration)
        out[proto.name] = proto.approx_variance(n)
    return out


def allomfree_protocol(
    k: int,
    eps_perm: float,
    eps_1: float | None,
    calibration: str = PAPER_CALIBRATION,
    candidates: Sequence[str] = ALLOMFREE_CANDIDATES,
) -> FrequencyOracle:
    """ALLOMFREE's local randomizer for an attribute of domain size k ([004] §4.5, Alg. 1).

    The candidate with the smallest V* ([004] eq. 11); ties go to the earlier candidate, so with
    the default pair L-GRR is chosen when V*_L-GRR <= V*_L-OSUE, as in the paper.

    Parameters
    ----------
    k : int
        Domain size of the attribute.
    eps_perm, eps_1 : float
        ε∞ and ε1 (0 < ε1 < ε∞); ``eps_1`` is None only for one-round candidates.
    calibration : {"paper", "exact"}, default="paper"
        L-GRR's calibration (docs/math.md §3.2). With ``"paper"`` a report of L-GRR at k > 2 is more
        private than ε1, which raises its V* and moves the L-GRR/L-OSUE crossover to smaller k.
    candidates : sequence of str, default=("L-GRR", "L-OSUE")

    Returns
    -------
    FrequencyOracle
    """
    protos = [
        build_protocol(name, k, eps_perm, eps_1, calibration)
        for name in _candidate_names(candidates)
    ]
    vstars = [p.approx_variance(1) for p in protos]
    return protos[int(np.argmin(vstars))]  # argmin returns the first minimum: ties → earlier


# ---------------------------------------------------------------------------------- metric


def mse_multidim_per_timestamp(
    estimates: Sequence[ArrayLike], truth: Sequence[ArrayLike]
) -> FloatArray:
    """(1/d) Σ_j (1/k_j) Σ_v (f̂_j(v)_t − f_j(v)_t)² for every timestamp t.

    The per-attribute MSE averaged over the d attributes ([004] §5.1, MSE_avg), each attribute
    weighted equally whatever its domain size.

    Parameters
    ----------
    estimates, truth : sequence of array_like
        One array per attribute, shape (τ, k_j) (or (k_j,) for τ = 1); the same τ for all.

    Returns
    -------
    numpy.ndarray of float64, shape (τ,)
    """
    est, true = list(estimates), list(truth)
    if not est or len(est) != len(true):
        raise ValueError(
            f"{OWNER}: 'estimates' and 'truth' must be non-empty sequences with one array per "
            f"attribute; got {len(est)} and {len(true)}."
        )
    per_attribute = [metrics.mse_per_timestamp(e, t) for e, t in zip(est, true, strict=True)]
    taus = {m.shape for m in per_attribute}
    if len(taus) != 1:
        raise ValueError(
            f"{OWNER}: every attribute must have the same number of timestamps; got {taus}."
        )
    return np.mean(np.stack(per_attribute), axis=0)


def mse_avg_multidim(estimates: Sequence[ArrayLike], truth: Sequence[ArrayLike]) -> float:
    """MSE_avg = (1/τ) Σ_t (1/d) Σ_j (1/k_j) Σ_v (f̂_j(v)_t − f_j(v)_t)²  ([004] §5.1).

    [004] reports one collection (τ = 1): for each attribute the mean over its k_j values of
    the squared error of the estimate against the *whole population's* frequency, then the mean
    over the d attributes (its code: ``np.mean`` over attributes of sklearn's
    ``mean_squared_error(real, est)``, with ``est`` clipped at 0 and renormalized, i.e.
    ``postprocess="norm-mul"``). Over τ timestamps we average those per-timestamp values, as the
    longitudinal MSE_avg of [002] eq. 1 does.

    Parameters
    ----------
    estimates, truth : sequence of array_like
        One array per attribute, shape (τ, k_j) or (k_j,).

    Returns
    -------
    float
    """
    return float(np.mean(mse_multidim_per_timestamp(estimates, truth)))


# ---------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class MultidimResult:
    """What one multidimensional collection produced.

    Attributes
    ----------
    solution : str
        ``"SMP"``, ``"SPL"`` or ``"ALLOMFREE"``.
    protocols : tuple of FrequencyOracle
        The protocol of each attribute (SPL: at ε∞/d, ε1/d).
    estimates : tuple of numpy.ndarray
        Per attribute, shape (τ, K_j): the (post-processed) frequency estimates. K_j = k_j
        (dBitFlipPM: its number of buckets).
    truth : tuple of numpy.ndarray
        Per attribute, shape (τ, K_j): frequencies over the whole population, what [004] §5.1
        compares against (so SMP's error includes its sampling error).
    reporter_truth : tuple of numpy.ndarray
        Per attribute, shape (τ, K_j): frequencies over the attribute's reporters only, what
        f̂_j estimates without bias given the assignment (SPL: equal to ``truth``).
    reporters : numpy.ndarray of int64, shape (d,)
        n_j, the number of users who report attribute j.
    assignment : numpy.ndarray of int64, shape (n,), or None
        SMP/ALLOMFREE: the attribute each user reports, fixed for all timestamps. SPL: None.
    reports : numpy.ndarray of int64, shape (n, d)
        Reports each user sent per attribute (0 for an attribute she does not report).
    spent_by_attribute : numpy.ndarray of float64, shape (n, d), or None
        Per user and attribute, the ε bound min(t·ε1_j, m·ε∞_j) of docs/math.md §4 (ε1_j: the exact
        single-report ε of the attribute's protocol; m: its distinct memos). None for
        count-level, which draws no memo (:meth:`longldp.simulate.Population.budget_by_group`).
    """

    solution: str
    protocols: tuple[FrequencyOracle, ...]
    estimates: tuple[FloatArray, ...]
    truth: tuple[FloatArray, ...]
    reporter_truth: tuple[FloatArray, ...]
    reporters: NDArray[np.int64]
    assignment: NDArray[np.int64] | None
    reports: NDArray[np.int64]
    spent_by_attribute: FloatArray | None

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.estimates)

    @property
    def tau(self) -> int:
        """Number of timestamps."""
        return int(self.estimates[0].shape[0])

    @property
    def spent_epsilon(self) -> FloatArray | None:
        """Each user's total ε bound: Σ_j over attributes (sequential composition), or None.

        SMP/ALLOMFREE: the bound of the one attribute the user reports (at most m·ε∞ for m
        distinct values held). SPL: Σ_j min(t·ε1_j, m_j·ε∞/d), which is at most ε∞ when the
        user's values never change (m_j = 1) and at most t·ε1 in any case.
        """
        if self.spent_by_attribute is None:
            return None
        return self.spent_by_attribute.sum(axis=1)

    @property
    def mse_per_timestamp(self) -> FloatArray:
        """:func:`mse_multidim_per_timestamp` of the estimates against ``truth``, shape (τ,)."""
        return mse_multidim_per_timestamp(self.estimates, self.truth)

    @property
    def mse_avg(self) -> float:
        """:func:`mse_avg_multidim` of the estimates against ``truth`` ([004] §5.1)."""
        return mse_avg_multidim(self.estimates, self.truth)

    @property
    def mse_per_attribute(self) -> FloatArray:
        """(1/τ) Σ_t (1/k_j) Σ_v (f̂_j(v)_t − f_j(v)_t)² for each attribute, shape (d,)."""
        return np.array(
            [metrics.mse_avg(e, t) for e, t in zip(self.estimates, self.truth, strict=True)]
        )


# ---------------------------------------------------------------------------------- collection


@dataclass(frozen=True)
class MultidimCollection:
    """A multidimensional longitudinal collection: SMP, SPL or ALLOMFREE over d attributes.

    Parameters
    ----------
    ks : sequence of int
        Domain size k_j >= 2 of each attribute; d = len(ks) >= 1.
    solution : {"SMP", "SPL", "ALLOMFREE"}
        Case-insensitive. See the module docstring and [004] §3, §4.5.
    eps_perm : float
        ε∞, the longitudinal (memoized) budget of a user's whole tuple.
    eps_1 : float, optional
        ε1 < ε∞, the budget of one report. Give ``eps_1`` or ``alpha`` (not needed by chains
        with one round, dBitFlipPM).
    alpha : float, optional
        α = ε1/ε∞ in (0, 1); ``eps_1 = alpha * eps_perm``.
    chain : str or sequence of str, optional
        SMP/SPL: the longitudinal registry protocol every attribute uses (required). ALLOMFREE:
        None for the paper's candidates ("L-GRR", "L-OSUE"), or a sequence of candidates.
    calibration : {"paper", "exact"}, default="paper"
        Round-2 calibration of L-GRR and LOLOHA (docs/math.md §3.2). [004] used ``"paper"`` (its
        eq. 13; reproduces its Table 1), so it is the default here, unlike the protocol
        registry's default ``"exact"``.

    Attributes
    ----------
    protocols : tuple of FrequencyOracle
        The protocol each attribute uses: SMP at (ε∞, ε1); SPL at (ε∞/d, ε1/d); ALLOMFREE the
        V*-minimizing candidate at (ε∞, ε1).

    Notes
    -----
    Budget (sequential composition, [004] §3): SMP/ALLOMFREE users report one attribute with
    the whole budget, so a user's bound is that attribute's min(t·ε1, m·ε∞); SPL users spend
    Σ_j min(t·ε1/d, m_j·ε∞/d) <= min(t·ε1, Σ_j m_j·ε∞/d), i.e. at most ε∞ while no value changes.
    """

    ks: tuple[int, ...]
    solution: str
    eps_perm: float
    eps_1: float | None = None
    alpha: float | None = None
    chain: str | tuple[str, ...] | None = None
    calibration: str = PAPER_CALIBRATION
    protocols: tuple[FrequencyOracle, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ks = _check_ks(self.ks)
        solution = _check_solution(self.solution)
        eps_perm = check.positive_float(OWNER, "eps_perm", self.eps_perm)
        calibration = check.choice(
            OWNER, "calibration", self.calibration, privacy.LGRR_CALIBRATIONS
        )
        if solution == "ALLOMFREE":
            if isinstance(self.chain, str):
                raise ValueError(
                    f"{OWNER}: 'chain' must be None (the paper's L-GRR/L-OSUE choice) or a "
                    f"sequence of candidate protocols for ALLOMFREE; got {self.chain!r}."
                )
            chain: str | tuple[str, ...] = _candidate_names(
                ALLOMFREE_CANDIDATES if self.chain is None else self.chain
            )
            names = chain
        else:
            if not isinstance(self.chain, str):
                raise ValueError(
                    f"{OWNER}: 'chain' must be the name of a longitudinal protocol for "
                    f"{solution} (e.g. 'L-OSUE'); got {self.chain!r}."
                )
            chain = _chain_class(self.chain, "chain").name
            names = (chain,)
        needs_eps_1 = any("eps_1" in get_protocol_class(n).budget_params for n in names)
        eps_1 = _resolve_eps_1(eps_perm, self.eps_1, self.alpha, needs_eps_1, names)
        d = len(ks)
        if solution == "SPL":
            budget = (eps_perm / d, None if eps_1 is None else eps_1 / d)
        else:
            budget = (eps_perm, eps_1)
        if solution == "ALLOMFREE":
            protos = tuple(allomfree_protocol(k, eps_perm, eps_1, calibration, names) for k in ks)
        else:
            assert isinstance(chain, str)
            protos = tuple(build_protocol(chain, k, *budget, calibration) for k in ks)
        for name, value in (
            ("ks", ks),
            ("solution", solution),
            ("eps_perm", eps_perm),
            ("eps_1", eps_1),
            ("chain", chain),
            ("calibration", calibration),
            ("protocols", protos),
        ):
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ structure
    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.ks)

    @property
    def sampling(self) -> bool:
        """True for SMP and ALLOMFREE (one attribute per user), False for SPL."""
        return self.solution != "SPL"

    @property
    def attribute_budgets(self) -> tuple[float, float | None]:
        """(ε∞_j, ε1_j) every attribute's protocol runs at: SPL (ε∞/d, ε1/d), else (ε∞, ε1)."""
        share = 1 if self.sampling else self.d
        return self.eps_perm / share, None if self.eps_1 is None else self.eps_1 / share

    def group_sizes(self, n: int) -> NDArray[np.int64]:
        """n_j for n users: SPL n for every j; SMP/ALLOMFREE the balanced partition's sizes.

        The partition deals the shuffled users round-robin, so attribute j gets
        ⌈(n − j)/d⌉ users: ⌊n/d⌋ or ⌊n/d⌋ + 1, the first n mod d attributes getting the extra
        one (the sizes of ``np.array_split``, as in the paper's code).
        """
        n = check.integer(OWNER, "n", n, minimum=self.d if self.sampling else 1)
        if not self.sampling:
            return np.full(self.d, n, dtype=np.int64)
        return (n - np.arange(self.d) + self.d - 1) // self.d

    def assign(self, n: int, rng: Any) -> NDArray[np.int64]:
        """The attribute each of n users reports, drawn once (SMP/ALLOMFREE only).

        An exactly balanced uniformly random partition: a uniform permutation of the users is
        dealt round-robin to the d attributes (sizes :meth:`group_sizes`). Every user reports
        exactly one attribute, and a collection keeps this assignment for all timestamps.

        Parameters
        ----------
        n : int
            Number of users, n >= d.
        rng : numpy.random.Generator or seed
            Simulation randomness (``numpy.random.default_rng(rng)``).

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
        """
        if not self.sampling:
            raise ValueError(
                f"{OWNER}: assign() needs 'solution' SMP or ALLOMFREE; SPL users report every "
                "attribute."
            )
        n = check.integer(OWNER, "n", n, minimum=self.d)
        gen = np.random.default_rng(rng)
        out = np.empty(n, dtype=np.int64)
        out[gen.permutation(n)] = np.arange(n, dtype=np.int64) % self.d
        return out

    # ------------------------------------------------------------------ analytic accuracy
    def variance(self, n: int, f: Sequence[ArrayLike]) -> tuple[FloatArray, ...]:
        """Variance of each raw estimate (no post-processing) around the population frequency.

        SPL: Var_j(n, f) of attribute j's protocol ([004] eq. 7 in general form). SMP and
        ALLOMFREE, over the balanced random partition with n_j users for attribute j:

            Var_j(n_j, f) + f(1 − f)(n − n_j) / (n_j (n − 1)),

        the protocol's variance at n_j users ([004] eq. 8 at n_j = n/d) plus the sampling
        (hypergeometric) variance of the reporters' frequency, the "sampling error" of
        [004] §4.5, Limitations. Exact: Var_j is linear in f, so it averages over partitions
        to Var_j(n_j, f). It assumes the partition of :meth:`assign`; an ``assignment`` of
        other sizes has other variances.

        Parameters
        ----------
        n : int
            Number of users.
        f : sequence of array_like
            Per attribute, the population frequencies (length K_j) of one timestamp.

        Returns
        -------
        tuple of numpy.ndarray
            Per attribute, the variance of each value's estimate.
        """
        freqs = self._per_attribute_frequencies(f, "f")
        sizes = self.group_sizes(n)
        out = []
        for proto, fj, nj in zip(self.protocols, freqs, sizes, strict=True):
            var = proto.variance(int(nj), fj)
            if self.sampling and n > 1:
                var = var + fj * (1 - fj) * (n - nj) / (nj * (n - 1))
            out.append(np.asarray(var, dtype=np.float64))
        return tuple(out)

    def expected_mse_avg(self, n: int, truth: Sequence[ArrayLike]) -> float:
        """E[MSE_avg] of raw estimates (``postprocess=None``) against the population truth.

        (1/τ) Σ_t (1/d) Σ_j (1/K_j) Σ_v Var_j,v with Var from :meth:`variance`: the estimates
        are unbiased, so their expected squared error is their variance.

        Parameters
        ----------
        n : int
            Number of users.
        truth : sequence of array_like
            Per attribute, the population frequencies, shape (τ, K_j) or (K_j,).

        Returns
        -------
        float
        """
        rows = [np.atleast_2d(np.asarray(t, dtype=np.float64)) for t in truth]
        taus = {r.shape[0] for r in rows}
        if len(taus) != 1:
            raise ValueError(f"{OWNER}: 'truth' must have the same τ for every attribute.")
        per_t = [
            np.mean([v.mean() for v in self.variance(n, [r[t] for r in rows])])
            for t in range(taus.pop())
        ]
        return float(np.mean(per_t))

    # ------------------------------------------------------------------ collection
    def collect(
        self,
        values: ArrayLike | Sequence[ArrayLike],
        rng: Any,
        engine: str = "per-user",
        postprocess: str | pp.PostProcessor | None = None,
        assignment: ArrayLike | None = None,
    ) -> MultidimResult:
        """Run the collection over every timestamp and estimate every attribute.

        Parameters
        ----------
        values : array_like or sequence of array_like
            Integer values: an array of shape (τ, n, d) (or (n, d) for one timestamp), or a
            list/tuple of d per-attribute arrays of shape (τ, n) (or (n,)). Attribute j's values
            lie in [0, k_j).
        rng : numpy.random.Generator or seed
            Simulation randomness (``numpy.random.default_rng(rng)``); it also draws the
            assignment when none is given.
        engine : {"per-user", "reports", "count-level"}, default="per-user"
            docs/design.md §4. ``"per-user"``: every user a client with memos kept across timestamps
            (round 1 per user, round 2 at count level); ``"reports"``: the same with every report
            materialized; ``"count-level"``: each timestamp's support drawn from its true counts
            (exact per timestamp, no correlation across time, no per-user budget).
        postprocess : str, callable or None, default=None
            Applied to each attribute's estimate vector (:mod:`longldp.postprocess`). [004]'s
            code used clip-and-renormalize, ``"norm-mul"``; None keeps the unbiased estimates.
        assignment : array_like of int, shape (n,), optional
            SMP/ALLOMFREE only: the attribute of each user, every attribute with >= 1 user.
            Default: :meth:`assign` with ``rng``.

        Returns
        -------
        MultidimResult
        """
        gen = np.random.default_rng(rng)
        data = self._attribute_arrays(values)
        tau, n = data[0].shape
        population = Population(n, engine, OWNER)
        _check_postprocess(postprocess)
        assign = self._resolve_assignment(assignment, n, gen)
        groups = (
            [np.flatnonzero(assign == j) for j in range(self.d)]
            if assign is not None
            else [None] * self.d
        )
        estimates, truth, reporter_truth = [], [], []
        for proto, x, who in zip(self.protocols, data, groups, strict=True):
            truth.append(np.stack([proto.true_frequencies(row) for row in x]))
            sub = x if who is None else x[:, who]
            reporter_truth.append(np.stack([proto.true_frequencies(row) for row in sub]))
            estimates.append(np.empty((tau, proto.estimate_size)))
            population.group(proto, who, f"attribute {len(estimates) - 1}")
        sizes = np.array([g.n for g in population.groups], dtype=np.int64)
        for t in range(tau):  # timestamp after timestamp, attribute after attribute
            at_t = [x[t] if who is None else x[t, who] for x, who in zip(data, groups, strict=True)]
            supports = population.support(at_t, gen)
            for j, (proto, support) in enumerate(zip(self.protocols, supports, strict=True)):
                estimates[j][t] = proto.estimate(support, int(sizes[j]), postprocess)
        spent = population.budget_by_group()
        return MultidimResult(
            solution=self.solution,
            protocols=self.protocols,
            estimates=tuple(estimates),
            truth=tuple(truth),
            reporter_truth=tuple(reporter_truth),
            reporters=sizes,
            assignment=assign,
            reports=spent["reports"],  # type: ignore[arg-type]  # always counted
            spent_by_attribute=spent["epsilon"],
        )

    # ------------------------------------------------------------------ validation helpers
    def _attribute_arrays(self, values: ArrayLike | Sequence[ArrayLike]) -> list[NDArray]:
        """Per-attribute int64 arrays of shape (τ, n), validated against ``ks``."""
        d = self.d
        if isinstance(values, (list, tuple)):
            if len(values) != d:
                raise ValueError(
                    f"{OWNER}: 'values' must hold one array per attribute (d = len(ks) = {d}); "
                    f"got {len(values)}."
                )
            arrays = [np.asarray(v) for v in values]
            arrays = [a[None, :] if a.ndim == 1 else a for a in arrays]
            shapes = {a.shape for a in arrays}
            if len(shapes) != 1 or arrays[0].ndim != 2:
                raise ValueError(
                    f"{OWNER}: 'values' per-attribute arrays must all have shape (tau, n) or "
                    f"(n,); got {[a.shape for a in arrays]}."
                )
        else:
            arr = np.asarray(values)
            if arr.ndim == 2:
                arr = arr[None]
            if arr.ndim != 3 or arr.shape[2] != d:
                raise ValueError(
                    f"{OWNER}: 'values' must have shape (tau, n, d) or (n, d) with d = len(ks) "
                    f"= {d}; got {np.asarray(values).shape}."
                )
            arrays = [np.ascontiguousarray(arr[:, :, j]) for j in range(d)]
        tau, n = arrays[0].shape
        if tau < 1 or n < 1:
            raise ValueError(
                f"{OWNER}: 'values' must have at least one timestamp and one user; "
                f"got tau = {tau}, n = {n}."
            )
        if self.sampling and n < d:
            raise ValueError(
                f"{OWNER}: 'values' must have at least d = {d} users for {self.solution} "
                f"(every attribute needs a reporter); got n = {n}."
            )
        return [
            check.domain_values(OWNER, a, k, f"values (attribute {j})")
            for j, (a, k) in enumerate(zip(arrays, self.ks, strict=True))
        ]

    def _resolve_assignment(
        self, assignment: ArrayLike | None, n: int, gen: np.random.Generator
    ) -> NDArray[np.int64] | None:
        if not self.sampling:
            if assignment is not None:
                raise ValueError(
                    f"{OWNER}: 'assignment' must be None for SPL (every user reports every "
                    f"attribute); got an array."
                )
            return None
        if assignment is None:
            return self.assign(n, gen)
        a = check.domain_values(OWNER, assignment, self.d, "assignment")
        if a.shape != (n,):
            raise ValueError(
                f"{OWNER}: 'assignment' must have one attribute per user, shape ({n},); "
                f"got {a.shape}."
            )
        empty = np.flatnonzero(np.bincount(a, minlength=self.d) == 0)
        if empty.size:
            raise ValueError(
                f"{OWNER}: 'assignment' must give every attribute at least one user; "
                f"attribute {int(empty[0])} has none."
            )
        return a.copy()

    def _per_attribute_frequencies(self, f: Sequence[ArrayLike], name: str) -> list[FloatArray]:
        arrays = [np.asarray(x, dtype=np.float64) for x in f]
        sizes = [p.estimate_size for p in self.protocols]
        if len(arrays) != self.d or any(
            a.shape != (s,) for a, s in zip(arrays, sizes, strict=True)
        ):
            raise ValueError(
                f"{OWNER}: '{name}' must hold one frequency vector per attribute with lengths "
                f"{sizes}; got {[a.shape for a in arrays]}."
            )
        return arrays


def simulate_multidim(
    values: ArrayLike | Sequence[ArrayLike],
    ks: Sequence[int],
    solution: str,
    eps_perm: float,
    *,
    rng: Any,
    eps_1: float | None = None,
    alpha: float | None = None,
    chain: str | Sequence[str] | None = None,
    engine: str = "per-user",
    postprocess: str | pp.PostProcessor | None = None,
    calibration: str = PAPER_CALIBRATION,
    assignment: ArrayLike | None = None,
) -> MultidimResult:
    """One call: build a :class:`MultidimCollection` and :meth:`~MultidimCollection.collect`.

    Parameters are those of the two; see there.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> x = np.stack([rng.integers(0, k, size=(2, 3000)) for k in (2, 5, 40)], axis=-1)
    >>> res = simulate_multidim(x, (2, 5, 40), "ALLOMFREE", 2.0, alpha=0.5, rng=rng)
    >>> [p.name for p in res.protocols], res.reporters.tolist()
    (['L-GRR', 'L-GRR', 'L-OSUE'], [1000, 1000, 1000])
    """
    collection = MultidimCollection(
        tuple(ks) if isinstance(ks, (list, tuple)) else ks,
        solution,
        eps_perm,
        eps_1=eps_1,
        alpha=alpha,
        chain=tuple(chain) if isinstance(chain, (list, tuple)) else chain,
        calibration=calibration,
    )
    return collection.collect(values, rng, engine, postprocess, assignment)


# ---------------------------------------------------------------------------------- helpers


def _init_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}


def _chain_class(name: Any, param: str) -> type[FrequencyOracle]:
    """A longitudinal registry class, with errors that name ``param``."""
    try:
        cls = get_protocol_class(name)
    except ValueError:
        raise ValueError(
            f"{OWNER}: '{param}' must be a longitudinal protocol name ("
            + ", ".join(_longitudinal_names())
            + f"); got {name!r}."
        ) from None
    if not cls.longitudinal:
        raise ValueError(
            f"{OWNER}: '{param}' must be a longitudinal (memoizing) protocol ("
            + ", ".join(_longitudinal_names())
            + f"); got the one-shot {cls.name!r}."
        )
    return cls


def _longitudinal_names() -> list[str]:
    return [info.name for info in list_protocols() if info.longitudinal]


def _candidate_names(candidates: Any) -> tuple[str, ...]:
    if isinstance(candidates, str) or not isinstance(candidates, Sequence) or not candidates:
        raise ValueError(
            f"{OWNER}: 'chain' (ALLOMFREE candidates) must be a non-empty sequence of "
            f"longitudinal protocol names; got {candidates!r}."
        )
    return tuple(_chain_class(c, "chain").name for c in candidates)


def _check_ks(ks: Any) -> tuple[int, ...]:
    if isinstance(ks, np.ndarray) and ks.ndim == 1:
        ks = ks.tolist()
    if isinstance(ks, (str, bytes)) or not isinstance(ks, Sequence) or len(ks) < 1:
        raise ValueError(
            f"{OWNER}: 'ks' must be a non-empty sequence of domain sizes (d = len(ks) >= 1); "
            f"got {ks!r}."
        )
    return tuple(check.integer(OWNER, f"ks[{j}]", k, minimum=2) for j, k in enumerate(ks))


def _check_solution(solution: Any) -> str:
    if not isinstance(solution, str) or solution.upper() not in SOLUTIONS:
        raise ValueError(
            f"{OWNER}: 'solution' must be one of {', '.join(map(repr, SOLUTIONS))}; "
            f"got {solution!r}."
        )
    return solution.upper()


def _resolve_eps_1(
    eps_perm: float,
    eps_1: Any,
    alpha: Any,
    needed: bool,
    names: tuple[str, ...],
) -> float | None:
    """ε1 of the collection from ``eps_1`` or ``alpha`` (not both, unless equal).

    Not :meth:`longldp.privacy.Budget.parameters`: ε∞ and ε1 here are the budget of a user's
    whole tuple, which SPL splits over the d attributes, so the total may exceed
    ``privacy.EPS_MAX`` while every attribute's share is within it. Each attribute's protocol
    gets its share through the one parser, in :func:`build_protocol`.
    """
    if not needed:
        if eps_1 is not None or alpha is not None:
            raise ValueError(
                f"{OWNER}: 'eps_1'/'alpha' do not apply to {', '.join(names)} (one round: "
                f"a report costs ε∞); got eps_1={eps_1!r}, alpha={alpha!r}."
            )
        return None
    if alpha is not None:
        a = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
        from_alpha = a * eps_perm
        if eps_1 is not None and not (
            isinstance(eps_1, numbers.Real) and abs(float(eps_1) - from_alpha) <= 1e-12 * eps_perm
        ):
            raise ValueError(
                f"{OWNER}: give 'eps_1' or 'alpha', not both (unless eps_1 == alpha·eps_perm); "
                f"got eps_1={eps_1!r}, alpha={alpha!r}."
            )
        return from_alpha
    if eps_1 is None:
        raise ValueError(
            f"{OWNER}: 'eps_1' (or 'alpha') is required by {', '.join(names)}; got None."
        )
    return check.positive_float(OWNER, "eps_1", eps_1, upper=eps_perm)


def _check_postprocess(postprocess: Any) -> None:
    if postprocess is None or callable(postprocess):
        return
    try:
        pp.get_method(postprocess)
    except ValueError:
        raise ValueError(
            f"{OWNER}: 'postprocess' must be None, a callable or one of "
            f"{', '.join(map(repr, pp.METHODS))}; got {postprocess!r}."
        ) from None


__all__ = [
    "ALLOMFREE_CANDIDATES",
    "PAPER_CALIBRATION",
    "SOLUTIONS",
    "MultidimCollection",
    "MultidimResult",
    "allomfree_protocol",
    "allomfree_vstar",
    "build_protocol",
    "mse_avg_multidim",
    "mse_multidim_per_timestamp",
    "simulate_multidim",
]
