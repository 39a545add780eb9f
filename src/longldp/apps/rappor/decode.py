"""Decoding RAPPOR counts against candidate strings ([ERL14] §4; docs/rappor.md, math §11).

Procedure A (the paper, default): per-bit unbiased counts t̂ → per-cohort fractions
y = t̂/N_j → sparse design matrix X of the distinct Bloom columns per cohort → LASSO selection
when they outnumber 0.8·k·m (or U·k·m > 10⁶) → least squares with intercept weighted by the
cohort sizes N_j (math §11.2; unbiased whatever the cohort sizes) → per-test estimate,
standard error √(σ²[G⁺]_ss), one-sided p-value → Bonferroni, Benjamini–Hochberg or no
correction → detected strings with counts, proportions and 95% intervals; plus the explained,
noise and missing shares of the variance of y.

Candidates the counts cannot tell apart (identical Bloom bits in every reporting cohort, or
linearly dependent columns: :mod:`longldp.apps.rappor.aliases`) are one test, as a group with
the group's total (:class:`AliasGroup`); none of them is tested or reported on its own.

Procedure B (google/rappor's current R decoder; ``procedure="B"``): y with plug-in standard
deviations sd, non-negative LASSO support when the columns outnumber 0.8·len(y), weighted
least squares under the reference's constraints β ≥ 0, Σβ ≤ 1 and Xβ ≤ y + 3sd per bit
(clamped to [0.01, 1]; :func:`constrained_least_squares`), ``N_FITS`` = 5 fits: y, then four
copies resampled as google/rappor's ``Resample()`` (noise of SD sd, the copy fitted with
sd·√2; :func:`resample`, math §11.3): estimate N·mean, SE N·sd, reported iff the estimate
exceeds 2·SE.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.apps.rappor.aliases import Dependencies, dependencies, identical_columns
from longldp.protocols.rappor import RAPPOR, candidate_map

OWNER = "rappor.decode"
CORRECTIONS = ("bh", "bonferroni", "none")
SELECTIONS = ("lasso-cv", "lasso-sigma", "nn-lasso")
PROCEDURES = ("A", "B")


# ---------------------------------------------------------------------- inputs
def check_counts(proto: RAPPOR, counts: ArrayLike) -> NDArray[np.int64]:
    """google/rappor's counts matrix (m, k + 1): column 0 reports N_j, 1 + i ones of bit i."""
    c = np.asarray(counts)
    if c.dtype == bool or not np.issubdtype(c.dtype, np.integer):
        if not (np.issubdtype(c.dtype, np.floating) and np.all(c == np.rint(c))):
            raise ValueError(f"{OWNER}: counts must be integers; got dtype {c.dtype}.")
        c = c.astype(np.int64)
    if c.shape != (proto.m, proto.k + 1):
        raise ValueError(
            f"{OWNER}: counts must have m = {proto.m} rows and k + 1 = {proto.k + 1} columns "
            f"(reports, then one column per bit); got shape {c.shape}."
        )
    if c.size and c.min() < 0:
        raise ValueError(f"{OWNER}: counts must be >= 0; got {int(c.min())}.")
    over = c[:, 1:] > c[:, :1]
    if np.any(over):
        j, b = np.argwhere(over)[0]
        raise ValueError(
            f"{OWNER}: cohort {j} has {int(c[j, 1 + b])} ones in bit {b} but only "
            f"{int(c[j, 0])} reports; a bit count cannot exceed the number of reports."
        )
    return c.astype(np.int64, copy=False)


def check_map(proto: RAPPOR, bloom_map: ArrayLike, n_candidates: int) -> NDArray[np.int64]:
    """Bloom positions (M, m, h) with every position in [0, k)."""
    idx = np.asarray(bloom_map)
    shape = (n_candidates, proto.m, proto.h)
    if idx.shape != shape or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"{OWNER}: the map must be integers of shape {shape}; got {idx.shape}.")
    if idx.size and (idx.min() < 0 or idx.max() >= proto.k):
        bad = int(idx[(idx < 0) | (idx >= proto.k)][0])
        raise ValueError(f"{OWNER}: the map names bit {bad}; bits must be in [0, k = {proto.k}).")
    return idx.astype(np.int64, copy=False)


def bit_estimates(proto: RAPPOR, counts: ArrayLike) -> tuple[NDArray, NDArray, NDArray]:
    """Per cohort and bit: t̂ = (c − p*N_j)/(q* − p*) (clients with the bit set, unbiased),
    its plug-in variance N_j·r(1−r)/(q*−p*)² with r = φq* + (1−φ)p*, φ = clamp(t̂/N_j, 0, 1),
    and N_j. Shapes (m, k), (m, k), (m,)."""
    c = check_counts(proto, counts)
    qs, ps = proto.effective
    n_j = c[:, 0].astype(np.float64)
    t = (c[:, 1:] - ps * n_j[:, None]) / (qs - ps)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.clip(np.where(n_j[:, None] > 0, t / np.maximum(n_j[:, None], 1), 0), 0, 1)
    r = phi * qs + (1 - phi) * ps
    var = n_j[:, None] * r * (1 - r) / (qs - ps) ** 2
    return t, var, n_j


def design_matrix(
    proto: RAPPOR, bloom_map: NDArray[np.int64], cohorts: NDArray[np.int64]
) -> object:
    """Sparse 0/1 matrix (len(cohorts)·k, M): column s has 1 at row r·k + b for each Bloom bit
    b of candidate s in the r-th listed cohort (a position hashed twice counts once)."""
    from scipy import sparse

    M = bloom_map.shape[0]
    sub = bloom_map[:, cohorts, :]  # (M, c, h)
    rows = (np.arange(cohorts.size)[None, :, None] * proto.k + sub).reshape(M, -1)
    cols = np.repeat(np.arange(M), rows.shape[1])
    X = sparse.csc_matrix(
        (np.ones(cols.size), (rows.ravel(), cols)), shape=(cohorts.size * proto.k, M)
    )
    X.data[:] = 1.0  # duplicates were summed; a bit is either set or not
    return X


# ---------------------------------------------------------------------- result
@dataclass(frozen=True)
class AliasGroup:
    """Candidates that the counts cannot tell apart, tested once as a group (math §11.2).

    Attributes
    ----------
    members : indices of the candidates (into ``DecodeResult.candidates``), sorted.
    estimate, std_error : the group's total (clients holding any member) and its SE; NaN and
        inf when not even the total is identified (then the group is never detected).
    p_value, detected : the group's one test (procedure B: p-value 1, detected iff the
        estimate exceeds 2 SE).
    identical : True when the members' Bloom bits coincide in every cohort that reported;
        False when their columns are linearly dependent (or nearly so) without being equal.
    """

    members: tuple[int, ...]
    estimate: float
    std_error: float
    p_value: float
    detected: bool
    identical: bool

    @property
    def estimable(self) -> bool:
        """Whether the group's total is identified (else its estimate is NaN)."""
        return bool(np.isfinite(self.estimate))


@dataclass
class DecodeResult:
    """Per-candidate estimates (counts of clients over all cohorts) and the fit summary.

    A candidate that aliases others (``groups``) has no estimate of its own: its entries in
    ``estimate``, ``std_error`` and ``p_value`` are NaN and it is never ``detected`` on its
    own; its group carries one estimate, SE and test.
    """

    candidates: list[str]
    estimate: NDArray[np.float64]
    std_error: NDArray[np.float64]
    p_value: NDArray[np.float64]
    detected: NDArray[np.bool_]
    n_reports: int
    correction: str
    alpha: float
    kept: NDArray[np.bool_]
    summary: dict[str, float] = field(default_factory=dict)
    groups: list[AliasGroup] = field(default_factory=list)

    @property
    def proportion(self) -> NDArray[np.float64]:
        """Estimates as shares of the reports, estimate/N."""
        return self.estimate / max(self.n_reports, 1)

    @property
    def ci_low(self) -> NDArray[np.float64]:
        """Lower ends of the 95% intervals, estimate − 1.96·SE (normal approximation)."""
        return self.estimate - 1.959964 * self.std_error

    @property
    def ci_high(self) -> NDArray[np.float64]:
        """Upper ends of the 95% intervals, estimate + 1.96·SE."""
        return self.estimate + 1.959964 * self.std_error

    def group_label(self, group: AliasGroup) -> str:
        """``{a, b}``: how a group is named in tables, plots and the CLI."""
        return "{" + ", ".join(self.candidates[i] for i in group.members) + "}"

    def table(self, only_detected: bool = True) -> list[dict[str, object]]:
        """One row per test, largest estimate first (a group unidentified last): ``string``
        (a candidate, or ``{a, b}`` for an alias group), ``members``, ``aliased``, estimate,
        SE, proportion, 95% interval, p-value and ``detected``."""
        in_group = np.zeros(len(self.candidates), dtype=bool)
        for g in self.groups:
            in_group[list(g.members)] = True
        n = max(self.n_reports, 1)
        rows: list[dict[str, object]] = []

        def row(
            label: str,
            members: list[str],
            aliased: bool,
            est: float,
            se: float,
            p: float,
            det: bool,
        ) -> dict[str, object]:
            return {
                "string": label,
                "members": members,
                "aliased": aliased,
                "estimate": est,
                "std_error": se,
                "proportion": est / n,
                "ci_low": est - 1.959964 * se,
                "ci_high": est + 1.959964 * se,
                "p_value": p,
                "detected": det,
            }

        for i in np.flatnonzero(~in_group):
            name = self.candidates[i]
            rows.append(
                row(
                    name,
                    [name],
                    False,
                    float(self.estimate[i]),
                    float(self.std_error[i]),
                    float(self.p_value[i]),
                    bool(self.detected[i]),
                )
            )
        for g in self.groups:
            rows.append(
                row(
                    self.group_label(g),
                    [self.candidates[i] for i in g.members],
                    True,
                    g.estimate,
                    g.std_error,
                    g.p_value,
                    g.detected,
                )
            )
        if only_detected:
            rows = [r for r in rows if r["detected"]]
        est = np.array([r["estimate"] for r in rows], dtype=np.float64)
        order = np.argsort(np.where(np.isnan(est), np.inf, -est), kind="stable")
        return [rows[i] for i in order]

    def corrected(self, correction: str, alpha: float | None = None) -> DecodeResult:
        """The same fit under another multiple-testing correction (procedure A): ``select``
        over every test, the candidates on their own and the alias groups."""
        correction = check.choice(OWNER, "correction", correction, CORRECTIONS)
        alpha = (
            self.alpha if alpha is None else check.positive_float(OWNER, "alpha", alpha, upper=1.0)
        )
        if self.correction not in CORRECTIONS:
            raise ValueError(f"{OWNER}: procedure B's results have no p-values to correct.")
        alone = np.ones(len(self.candidates), dtype=bool)
        for g in self.groups:
            alone[list(g.members)] = False
        p = np.concatenate([self.p_value[alone], [g.p_value for g in self.groups]])
        chosen = select(p, alpha, correction)
        detected = np.zeros(len(self.candidates), dtype=bool)
        detected[alone] = chosen[: int(alone.sum())]
        groups = [
            replace(g, detected=bool(d))
            for g, d in zip(self.groups, chosen[int(alone.sum()) :], strict=True)
        ]
        return replace(self, detected=detected, correction=correction, alpha=alpha, groups=groups)

    def detected_strings(self) -> list[str]:
        """The candidates detected on their own (a detected alias group names no member)."""
        return [r["string"] for r in self.table() if not r["aliased"]]  # type: ignore[misc]


def select(p_values: NDArray[np.float64], alpha: float, correction: str) -> NDArray[np.bool_]:
    """Significant candidates among M p-values: Bonferroni p < α/M; Benjamini–Hochberg (all
    i ≤ the largest with p_(i) ≤ iα/M); or uncorrected p < α."""
    M = p_values.size
    if M == 0:
        return np.zeros(0, dtype=bool)
    if correction == "bonferroni":
        return p_values < alpha / M
    if correction == "none":
        return p_values < alpha
    order = np.argsort(p_values, kind="stable")
    below = p_values[order] <= alpha * np.arange(1, M + 1) / M
    out = np.zeros(M, dtype=bool)
    if below.any():
        out[order[: np.flatnonzero(below)[-1] + 1]] = True
    return out


def blas_limit() -> contextlib.AbstractContextManager:
    """One BLAS thread for the small dense algebra here (threads cost more than they save on
    a 200×200 inverse); a no-op without threadpoolctl (installed with scikit-learn)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


# ---------------------------------------------------------------------- decode
def decode(
    proto: RAPPOR,
    counts: ArrayLike,
    candidates: Sequence[str],
    *,
    bloom_map: ArrayLike | None = None,
    alpha: float = 0.05,
    correction: str = "bh",
    procedure: str = "A",
    selection: str = "lasso-cv",
    lasso: bool | None = None,
    seed: int = 0,
) -> DecodeResult:
    """Estimate how many clients hold each candidate string, and which are significant.

    Candidates whose Bloom columns the counts cannot tell apart (identical bits in every
    reporting cohort, or linearly dependent columns) are tested once, as a group
    (:class:`AliasGroup`, ``result.groups``; math §11.2).

    Parameters
    ----------
    proto : the RAPPOR parameters the reports were made with (Bloom encoder).
    counts : (m, k + 1) counts matrix (:meth:`RAPPOR.support_counts`, google/rappor's counts).
    candidates : candidate strings; ``bloom_map`` (M, m, h) gives their Bloom positions
        (default: hashed here with google/rappor's hash).
    alpha, correction : significance level and multiple-testing correction over all tests
        (one per candidate or alias group).
    procedure : "A" (the paper's regression, default) or "B" (google/rappor's current one).
    selection : "lasso-cv" (seeded 5-fold CV), "lasso-sigma" (one fit at the noise-derived
        penalty, fast) or "nn-lasso" (non-negative); see :func:`_lasso_support`.
    lasso : force LASSO on or off (default: when the distinct columns U > 0.8·k·m or
        U·k·m > 10⁶).
    """
    with blas_limit():
        return _decode(
            proto,
            counts,
            candidates,
            bloom_map,
            alpha,
            correction,
            procedure,
            selection,
            lasso,
            seed,
        )


@dataclass
class _Tests:
    """What a procedure returns: tests over the distinct columns (units), in the order alias
    groups, other fitted columns, columns left out by the LASSO."""

    test_of_unit: NDArray[np.int64]  # (U,) the test of every distinct column
    estimate: NDArray[np.float64]
    std_error: NDArray[np.float64]
    p_value: NDArray[np.float64]
    detected: NDArray[np.bool_]
    kept: NDArray[np.bool_]  # per distinct column
    summary: dict[str, float]


def _decode(
    proto: RAPPOR,
    counts: ArrayLike,
    candidates: Sequence[str],
    bloom_map: ArrayLike | None,
    alpha: float,
    correction: str,
    procedure: str,
    selection: str,
    lasso: bool | None,
    seed: int,
) -> DecodeResult:
    if proto.report_kind != "cohort-bits" or proto.domain.codes:
        raise ValueError(f"{OWNER}: decode needs Bloom-filter RAPPOR; got {proto.name!r}.")
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    correction = check.choice(OWNER, "correction", correction, CORRECTIONS)
    selection = check.choice(OWNER, "selection", selection, SELECTIONS)
    if procedure not in PROCEDURES:
        raise ValueError(f"{OWNER}: 'procedure' must be one of 'A', 'B'; got {procedure!r}.")
    cands = [str(c) for c in candidates]
    if not cands:
        raise ValueError(f"{OWNER}: 'candidates' must not be empty.")
    if len(set(cands)) != len(cands):
        raise ValueError(f"{OWNER}: 'candidates' must be distinct.")
    idx = (
        candidate_map(cands, proto.h, proto.k, proto.m)
        if bloom_map is None
        else check_map(proto, bloom_map, len(cands))
    )
    t, var, n_j = bit_estimates(proto, counts)
    if n_j.sum() == 0:
        raise ValueError(f"{OWNER}: the counts hold no reports.")
    live = np.flatnonzero(n_j > 0)
    first, unit_of = identical_columns(idx, live)
    X = design_matrix(proto, idx[first], live)  # one column per distinct Bloom column
    qs, ps = proto.effective
    v0 = ps * (1 - ps) / (qs - ps) ** 2  # per-report variance of t̂ for a bit nobody holds
    N = float(n_j.sum())
    if procedure == "B":
        tests = _procedure_b(X, t[live], var[live], n_j[live], v0, N, seed)
        correction = "two-se"
    else:
        tests = _procedure_a(X, t[live], n_j[live], v0, N, selection, lasso, seed)
        tests.detected = select(tests.p_value, alpha, correction)
    return _assemble(cands, unit_of, tests, int(N), correction, alpha)


def _assemble(
    cands: list[str],
    unit_of: NDArray[np.int64],
    tests: _Tests,
    N: int,
    correction: str,
    alpha: float,
) -> DecodeResult:
    """Per-candidate arrays and alias groups from the tests over distinct columns."""
    M = len(cands)
    test_of = tests.test_of_unit[unit_of]  # the test of every candidate
    size = np.bincount(test_of, minlength=tests.estimate.size)
    alone = size[test_of] == 1
    est = np.full(M, math.nan)
    se = np.full(M, math.nan)
    p = np.full(M, math.nan)
    det = np.zeros(M, dtype=bool)
    est[alone] = tests.estimate[test_of[alone]]
    se[alone] = tests.std_error[test_of[alone]]
    p[alone] = tests.p_value[test_of[alone]]
    det[alone] = tests.detected[test_of[alone]]
    units_per_test = np.bincount(tests.test_of_unit, minlength=tests.estimate.size)
    shared = np.flatnonzero(~alone)
    order = shared[np.argsort(test_of[shared], kind="stable")]
    cut = np.flatnonzero(np.diff(test_of[order])) + 1
    groups = []
    for members in np.split(order, cut) if order.size else []:
        i = test_of[members[0]]
        groups.append(
            AliasGroup(
                tuple(int(m) for m in np.sort(members)),
                float(tests.estimate[i]),
                float(tests.std_error[i]),
                float(tests.p_value[i]),
                bool(tests.detected[i]),
                bool(units_per_test[i] == 1),
            )
        )
    groups.sort(key=lambda g: g.members)
    summary = dict(
        tests.summary, tests=float(tests.estimate.size), aliased_groups=float(len(groups))
    )
    kept = tests.kept[unit_of]
    return DecodeResult(cands, est, se, p, det, N, correction, alpha, kept, summary, groups)


def _one_sided_p(estimate: NDArray, std_error: NDArray) -> NDArray:
    """1 − Φ(estimate/SE); 1 where the SE is not finite and positive (nothing to test)."""
    from scipy.special import ndtr

    ok = np.isfinite(estimate) & np.isfinite(std_error) & (std_error > 0)
    z = np.where(ok, estimate / np.where(ok, std_error, 1.0), -np.inf)
    return np.where(ok, ndtr(-z), 1.0)


@dataclass
class _Layout:
    """How a fit's coordinates become tests (``_layout``)."""

    group_weights: list[NDArray[np.float64]]  # one coefficient weight vector per alias group
    singles: NDArray[np.int64]  # coordinates tested on their own
    test_of_unit: NDArray[np.int64]  # (U,) tests: groups, then singles, then left-out columns
    n_fitted: int  # number of tests on fitted columns (groups + singles)


def _layout(
    cols: NDArray[np.int64], dep: Dependencies, offset: int, ones: NDArray[np.float64]
) -> _Layout:
    """The tests of a fit on the distinct columns ``cols`` (coordinate ``offset + j`` is
    column ``cols[j]``; coordinates below ``offset`` are an intercept): one per alias group,
    one per other fitted column, one per column left out.

    A group's weights are its members' numbers of set bits ``ones`` over the largest among
    them: 1 for every member unless a hash collision left a filter with fewer distinct bits.
    Any combination v of columns that vanishes (Xv = 0) has Σ ones_i·v_i = 1ᵀXv = 0, so this
    weighted total is identified whenever the intercept takes no part (math §11.2)."""
    size = offset + cols.size
    grouped = np.zeros(size, dtype=bool)
    test_of_unit = np.empty(ones.size, dtype=np.int64)
    weights = []
    for g in dep.groups:
        grouped[g] = True
        coords = g[g >= offset]
        if coords.size:
            w = np.zeros(size)
            bits = ones[cols[coords - offset]]
            w[coords] = bits / bits.max()
            test_of_unit[cols[coords - offset]] = len(weights)
            weights.append(w)
    singles = offset + np.flatnonzero(~grouped[offset:])
    test_of_unit[cols[singles - offset]] = len(weights) + np.arange(singles.size)
    n_fitted = len(weights) + singles.size
    left_out = np.setdiff1d(np.arange(ones.size), cols)
    test_of_unit[left_out] = n_fitted + np.arange(left_out.size)
    return _Layout(weights, singles, test_of_unit, n_fitted)


# ---------------------------------------------------------------------- procedure A
def _procedure_a(
    X: object,
    t: NDArray,
    n_live: NDArray,
    v0: float,
    N: float,
    selection: str,
    lasso: bool | None,
    seed: int,
) -> _Tests:
    """The paper's regression on per-cohort fractions, weighted by cohort size (math §11.2):
    y_ij = t̂_ij/N_j on [1, X] with weights N_j; β_s is string s's share of all clients."""
    from scipy import sparse

    k = t.shape[1]
    rows, U = t.size, X.shape[1]
    n_row = np.repeat(n_live.astype(np.float64), k)
    t_row = t.ravel()
    y = t_row / n_row
    use_lasso = (U > 0.8 * rows or U * rows > 10**6) if lasso is None else bool(lasso)
    kept = np.ones(U, dtype=bool)
    if use_lasso:
        scale = float(n_row.mean())
        kept = _lasso_support(
            X,
            y,
            n_row / scale,
            selection,
            max_keep=int(0.9 * rows),
            seed=seed,
            sigma=math.sqrt(v0 / scale),
        )
    cols = np.flatnonzero(kept)
    A = sparse.hstack([sparse.csc_matrix(np.ones((rows, 1))), X[:, cols]], format="csc")
    G = np.asarray((A.T @ sparse.diags(n_row) @ A).todense())
    dep = dependencies(G, v0)
    beta = dep.pinv @ (A.T @ t_row)  # Aᵀ W y = Aᵀ t̂
    fitted = A @ beta
    rss = float(np.sum(n_row * (y - fitted) ** 2))
    sigma2 = max(v0, rss / max(rows - dep.rank, 1))
    lay = _layout(cols, dep, 1, np.asarray(X.sum(axis=0)).ravel())
    n_tests = lay.n_fitted + U - cols.size
    est = np.zeros(n_tests)  # a column left out by the LASSO: 0, SE ∞, p = 1
    se = np.full(n_tests, math.inf)
    for i, w in enumerate(lay.group_weights):
        if dep.estimable(w):
            est[i] = N * float(w @ beta)
            se[i] = N * math.sqrt(max(sigma2 * float(w @ dep.pinv @ w), 0.0))
        else:
            est[i] = math.nan
    alone = slice(len(lay.group_weights), lay.n_fitted)
    identified = dep.estimable_coordinates(lay.singles)
    est[alone] = np.where(identified, N * beta[lay.singles], math.nan)
    variance = sigma2 * np.diag(dep.pinv)[lay.singles]
    se[alone] = np.where(identified, N * np.sqrt(np.maximum(variance, 0.0)), math.inf)
    p = _one_sided_p(est, se)
    ybar = float(np.sum(n_row * y) / n_row.sum())
    tss = float(np.sum(n_row * (y - ybar) ** 2))
    explained = float(np.sum(n_row * (fitted - ybar) ** 2)) / tss if tss > 0 else 0.0
    noise = min(v0 * rows / tss, 1.0) if tss > 0 else 1.0
    summary = {
        "explained": explained,
        "noise": noise,
        "missing": max(0.0, 1.0 - explained - noise),
        "sigma2": sigma2,
        "sigma0_2": v0,
        "lasso": float(use_lasso),
        "kept": float(cols.size),
        "rank": float(dep.rank),
    }
    return _Tests(lay.test_of_unit, est, se, p, np.zeros(n_tests, dtype=bool), kept, summary)


def universal_penalty(sigma: float, column_norm: float, rows: int, M: int) -> float:
    """scikit-learn's LASSO penalty at the universal threshold σ·√(2 ln M)·‖x‖/n: the largest
    |xᵀε|/n that pure noise of sd σ reaches over M columns of norm ‖x‖ (with high probability)."""
    return sigma * math.sqrt(2 * math.log(max(M, 2))) * column_norm / rows


def _lasso_support(
    X: object,
    Y: NDArray,
    weight: NDArray | None,
    selection: str,
    max_keep: int,
    seed: int,
    sigma: float,
) -> NDArray:
    """Columns with positive LASSO coefficients (at most ``max_keep``, largest first; if
    none, the two largest).

    ``weight`` are row weights of mean 1 (procedure A: N_j/mean N_j, under which every row's
    noise has sd ``sigma``; None: unweighted). The penalty scale is the universal threshold
    λ_u of :func:`universal_penalty` (RAPPOR's noise σ is known analytically). "lasso-cv":
    5-fold seeded CV (mean squared error) over six penalties 2λ_u … λ_u/4; "lasso-sigma": one
    fit at λ_u/2 (a lenient screen; OLS and the correction then decide); "nn-lasso": as
    "lasso-sigma" with non-negative coefficients.
    """
    try:
        from sklearn.linear_model import Lasso, LassoCV
        from sklearn.model_selection import KFold
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ValueError(
            f"{OWNER}: LASSO selection needs scikit-learn (pip install 'longldp[rappor]')."
        ) from exc
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    ones = np.asarray(X.sum(axis=0) if weight is None else X.T @ weight).ravel()
    norm = float(np.sqrt(ones.mean()))  # 0/1 columns: √(weighted ones)
    lam = universal_penalty(sigma, norm, Y.size, X.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if selection == "lasso-cv":
            model = LassoCV(
                cv=KFold(5, shuffle=True, random_state=seed),
                alphas=lam * np.geomspace(2.0, 0.25, 6),
                max_iter=1000,
                tol=1e-3,
            ).fit(X, Y, sample_weight=weight)
        else:
            model = Lasso(
                alpha=lam / 2, positive=selection == "nn-lasso", max_iter=1000, tol=1e-3
            ).fit(X, Y, sample_weight=weight)
    coef = np.asarray(model.coef_)
    pos = np.flatnonzero(coef > 0)
    if pos.size == 0:
        pos = np.argsort(-coef)[:2]
    pos = pos[np.argsort(-coef[pos], kind="stable")][:max_keep]
    kept = np.zeros(coef.size, dtype=bool)
    kept[pos] = True
    return kept


# ---------------------------------------------------------------------- procedure B
#: Fits of procedure B: the data, then this many less resampled copies (google/rappor: 5).
N_FITS = 5


def resample(
    y: NDArray[np.float64], sd: NDArray[np.float64], rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """google/rappor's ``Resample()`` (analysis/R/decode.R): a noisy copy y + N(0, sd²) of the
    per-bit fractions, whose standard deviations are then sd·√2 (the data's own noise plus
    the added noise); procedure B weights and caps the copy's fit with sd·√2 (math §11.3)."""
    return y + rng.normal(0.0, 1.0, size=np.shape(y)) * sd, sd * math.sqrt(2.0)


def _google_fit(X: NDArray, y: NDArray, sd: NDArray) -> NDArray[np.float64]:
    """One constrained fit of google/rappor's ``ConstrainedLinModel``: weights 1/sd capped at
    twice their median and scaled to mean 1; β ≥ 0, Σβ ≤ 1, Xβ ≤ clamp(y + 3sd, 0.01, 1)."""
    with np.errstate(divide="ignore"):
        w = 1.0 / sd
    finite = w[np.isfinite(w)]
    median = float(np.median(finite)) if finite.size else 1.0
    w = np.minimum(w, 2 * median)
    w = w / w.mean()
    cap = np.clip(y + 3 * sd, 0.01, 1.0)
    return constrained_least_squares(X * w[:, None], y * w, X, cap)


def _procedure_b(
    X: object,
    t: NDArray,
    var: NDArray,
    n_live: NDArray,
    v0: float,
    N: float,
    seed: int,
) -> _Tests:
    """google/rappor's decoder on the distinct columns: fractions with plug-in SDs,
    non-negative LASSO support when they outnumber 0.8·len(Y), ``N_FITS`` constrained fits
    (the data and resampled copies), estimate N·mean and SE N·sd of the fits, detected iff
    the estimate exceeds 2 SE. Alias groups are tested through the sums of their fits."""
    from scipy import sparse

    nl = n_live[:, None].astype(np.float64)
    Y = (t / nl).ravel()
    sd = (np.sqrt(var) / nl).ravel()
    U = X.shape[1]
    kept = np.ones(U, dtype=bool)
    use_lasso = U > 0.8 * Y.size
    if use_lasso:
        kept = _lasso_support(
            X,
            Y,
            None,
            "nn-lasso",
            max_keep=min(500, int(0.8 * Y.size)),
            seed=seed,
            sigma=float(np.median(sd)),
        )
    cols = np.flatnonzero(kept)
    Xc = X[:, cols].toarray()
    rng = np.random.default_rng(seed)
    fits = np.array(
        [_google_fit(Xc, *((Y, sd) if r == 0 else resample(Y, sd, rng))) for r in range(N_FITS)]
    )
    n_row = np.repeat(n_live.astype(np.float64), t.shape[1])
    Xs = X[:, cols]
    dep = dependencies(np.asarray((Xs.T @ sparse.diags(n_row) @ Xs).todense()), v0)
    lay = _layout(cols, dep, 0, np.asarray(X.sum(axis=0)).ravel())
    n_tests = lay.n_fitted + U - cols.size
    est = np.zeros(n_tests)
    se = np.zeros(n_tests)  # a column left out has a zero coefficient in every fit
    for i, w in enumerate(lay.group_weights):
        if dep.estimable(w):
            sums = fits @ w
            est[i], se[i] = N * sums.mean(), N * sums.std(ddof=1)
        else:
            est[i], se[i] = math.nan, math.inf
    alone = slice(len(lay.group_weights), lay.n_fitted)
    identified = dep.estimable_coordinates(lay.singles)
    single_fits = fits[:, lay.singles]
    est[alone] = np.where(identified, N * single_fits.mean(axis=0), math.nan)
    se[alone] = np.where(identified, N * single_fits.std(axis=0, ddof=1), math.inf)
    detected = np.isfinite(est) & (est > 1e-6 + 2 * se)
    summary = {"lasso": float(use_lasso), "kept": float(cols.size), "rank": float(dep.rank)}
    return _Tests(lay.test_of_unit, est, se, np.ones(n_tests), detected, kept, summary)


def constrained_least_squares(
    A: NDArray[np.float64],
    b: NDArray[np.float64],
    X: NDArray[np.float64],
    cap: NDArray[np.float64],
    *,
    tol: float = 1e-7,
    max_iter: int = 5000,
) -> NDArray[np.float64]:
    """argmin ||Aβ − b||² subject to β ≥ 0, Σβ ≤ 1 and Xβ ≤ cap (google/rappor's LSEI problem).

    Solved by the operator-splitting iteration of OSQP (Stellato et al., Math. Prog. Comp.
    2020, Algorithm 1) on the constraints l ≤ Mβ ≤ u with M = [I; 1ᵀ; X]: one Cholesky factor
    of PᵀP-sized system, then matrix-vector products only. Stops when the primal and dual
    residuals fall below ``tol`` (relative), and returns β projected onto β ≥ 0.
    """
    n = A.shape[1]
    if n == 0:
        return np.zeros(0)
    M = np.vstack([np.eye(n), np.ones((1, n)), X])
    lower = np.concatenate([np.zeros(n), [-np.inf], np.full(X.shape[0], -np.inf)])
    upper = np.concatenate([np.full(n, np.inf), [1.0], cap])
    P = A.T @ A
    q = -(A.T @ b)
    sigma, alpha = 1e-6, 1.6
    rho = 0.1 * max(1.0, float(np.trace(P)) / n)
    K = P + sigma * np.eye(n) + rho * (M.T @ M)
    # K is symmetric positive definite and small (n ≤ 500): one explicit inverse makes every
    # iteration a few matrix-vector products (the loop runs ~100 times per fit).
    chol = np.linalg.cholesky(K)
    K_inv = np.linalg.solve(chol.T, np.linalg.solve(chol, np.eye(n)))
    Mt = np.ascontiguousarray(M.T)
    beta = np.zeros(n)
    z = np.clip(M @ beta, lower, upper)
    y = np.zeros(M.shape[0])
    scale = max(1.0, float(np.abs(q).max()))
    for it in range(max_iter):
        beta_t = K_inv @ (sigma * beta - q + Mt @ (rho * z - y))
        z_t = M @ beta_t
        beta = alpha * beta_t + (1 - alpha) * beta
        z_relaxed = alpha * z_t + (1 - alpha) * z
        z_new = np.clip(z_relaxed + y / rho, lower, upper)
        y = y + rho * (z_relaxed - z_new)
        z = z_new
        if it % 5 == 4 or it == max_iter - 1:  # the residuals cost as much as a step
            primal = float(np.abs(M @ beta - z).max())
            dual = float(np.abs(P @ beta + q + Mt @ y).max())
            if primal <= tol * max(1.0, float(np.abs(z).max())) and dual <= tol * scale:
                break
    return np.maximum(beta, 0.0)


def decode_boolean(proto: RAPPOR, counts: ArrayLike) -> dict[str, float]:
    """Boolean RAPPOR (k = 1): cohorts summed, debiased once; share of TRUE and its SE."""
    if proto.k != 1:
        raise ValueError(f"{OWNER}: decode_boolean needs k = 1; got k = {proto.k}.")
    c = check_counts(proto, counts).sum(axis=0)
    n = int(c[0])
    if n == 0:
        raise ValueError(f"{OWNER}: the counts hold no reports.")
    qs, ps = proto.effective
    share = (c[1] / n - ps) / (qs - ps)
    phi = min(max(share, 0.0), 1.0)
    r = phi * qs + (1 - phi) * ps
    return {
        "true": share,
        "false": 1 - share,
        "std_error": math.sqrt(r * (1 - r) / n) / abs(qs - ps),
        "n_reports": float(n),
    }
