"""Decoding RAPPOR counts against candidate strings ([ERL14] §4; docs/rappor.md).

Procedure A (the paper, default): per-bit unbiased counts t̂ → sparse design matrix X of the
candidates' Bloom bits per cohort → LASSO selection when candidates outnumber 0.8·k·m (or
M·k·m > 10⁶) → least squares with intercept on the kept candidates → per-candidate estimate,
standard error √(σ²[(XᵀX)⁻¹]_ss), one-sided p-value → Bonferroni, Benjamini–Hochberg or no
correction → detected strings with counts, proportions and 95% intervals; plus the explained,
noise and missing shares of the variance of Y.

Procedure B (google/rappor's current R decoder; ``procedure="B"``): Y in fractions with
plug-in standard deviations, non-negative LASSO support when candidates outnumber 0.8·len(Y),
weighted least squares under the reference's constraints β ≥ 0, Σβ ≤ 1 and Xβ ≤ Y + 3sd per
bit (clamped to [0.01, 1]; :func:`constrained_least_squares`), five fits (Y and four noisy
copies): estimate N·mean, SE N·sd, reported iff estimate > 2·SE.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
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
@dataclass
class DecodeResult:
    """Per-candidate estimates (counts of clients over all cohorts) and the fit summary."""

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

    @property
    def proportion(self) -> NDArray[np.float64]:
        return self.estimate / max(self.n_reports, 1)

    @property
    def ci_low(self) -> NDArray[np.float64]:
        return self.estimate - 1.959964 * self.std_error

    @property
    def ci_high(self) -> NDArray[np.float64]:
        return self.estimate + 1.959964 * self.std_error

    def table(self, only_detected: bool = True) -> list[dict[str, object]]:
        """Rows sorted by estimate (largest first): string, estimate, SE, interval, p-value."""
        order = np.argsort(-self.estimate, kind="stable")
        rows = []
        for i in order:
            if only_detected and not self.detected[i]:
                continue
            rows.append(
                {
                    "string": self.candidates[i],
                    "estimate": float(self.estimate[i]),
                    "std_error": float(self.std_error[i]),
                    "proportion": float(self.proportion[i]),
                    "ci_low": float(self.ci_low[i]),
                    "ci_high": float(self.ci_high[i]),
                    "p_value": float(self.p_value[i]),
                    "detected": bool(self.detected[i]),
                }
            )
        return rows

    def detected_strings(self) -> list[str]:
        return [r["string"] for r in self.table()]  # type: ignore[misc]


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


def _blas_limit() -> contextlib.AbstractContextManager:
    """One BLAS thread for the small dense algebra here (threads cost more than they save on
    a 200×200 inverse); a no-op without threadpoolctl (installed with scikit-learn)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


# ---------------------------------------------------------------------- procedure A
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

    Parameters
    ----------
    proto : the RAPPOR parameters the reports were made with (Bloom encoder).
    counts : (m, k + 1) counts matrix (:meth:`RAPPOR.support_counts`, google/rappor's counts).
    candidates : candidate strings; ``bloom_map`` (M, m, h) gives their Bloom positions
        (default: hashed here with google/rappor's hash).
    alpha, correction : significance level and multiple-testing correction over all M.
    procedure : "A" (the paper's regression, default) or "B" (google/rappor's current one).
    selection : "lasso-cv" (seeded 5-fold CV), "lasso-sigma" (one fit at the noise-derived
        penalty, fast) or "nn-lasso" (non-negative); see :func:`_lasso_support`.
    lasso : force LASSO on or off (default: when M > 0.8·k·m or M·k·m > 10⁶).
    """
    with _blas_limit():
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
    if not isinstance(proto, RAPPOR):
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
    X = design_matrix(proto, idx, live)
    if procedure == "B":
        return _procedure_b(proto, cands, X, t[live], var[live], n_j, live, alpha, correction, seed)
    Y = t[live].ravel()
    M, rows = len(cands), Y.size
    use_lasso = (M > 0.8 * rows or M * rows > 10**6) if lasso is None else bool(lasso)
    kept = np.ones(M, dtype=bool)
    qs, ps = proto.effective
    N = float(n_j.sum())
    sigma0 = ps * (1 - ps) * (N / live.size) / (qs - ps) ** 2
    if use_lasso:
        kept = _lasso_support(
            X, Y, selection, max_keep=int(0.9 * rows), seed=seed, sigma=math.sqrt(sigma0)
        )
    cols = np.flatnonzero(kept)
    beta, se, rss, fitted = _ols(X[:, cols], Y)
    dof = max(rows - cols.size - 1, 1)
    sigma2 = max(sigma0, rss / dof)
    est = np.zeros(M)
    sd = np.full(M, math.inf)
    est[cols] = beta * live.size  # per-cohort count → clients over all cohorts
    sd[cols] = np.sqrt(sigma2 * se) * live.size
    from scipy.special import ndtr

    p = np.ones(M)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(np.isfinite(sd) & (sd > 0), est / sd, -np.inf)
    p[cols] = ndtr(-z[cols])  # one-sided: 1 − Φ(β/SE)
    detected = select(p, alpha, correction)
    tss = float(np.sum((Y - Y.mean()) ** 2))
    explained = float(np.sum((fitted - Y.mean()) ** 2)) / tss if tss > 0 else 0.0
    noise = min(sigma0 * rows / tss, 1.0) if tss > 0 else 1.0
    summary = {
        "explained": explained,
        "noise": noise,
        "missing": max(0.0, 1.0 - explained - noise),
        "sigma2": sigma2,
        "sigma0_2": sigma0,
        "lasso": float(use_lasso),
        "kept": float(cols.size),
    }
    return DecodeResult(cands, est, sd, p, detected, int(N), correction, alpha, kept, summary)


def _ols(Xs: object, Y: NDArray) -> tuple[NDArray, NDArray, float, NDArray]:
    """OLS with intercept by the normal equations on the sparse columns: slopes,
    diag((AᵀA)⁻¹) of the slopes (A = [1, X]), RSS and fitted values."""
    from scipy import sparse

    A = sparse.hstack([sparse.csc_matrix(np.ones((Xs.shape[0], 1))), Xs], format="csc")
    G = (A.T @ A).toarray()
    try:
        inv = np.linalg.inv(G)
    except np.linalg.LinAlgError:
        inv = np.linalg.pinv(G)
    coef = inv @ (A.T @ Y)
    fitted = A @ coef
    rss = float(np.sum((Y - fitted) ** 2))
    return coef[1:], np.diag(inv)[1:].copy(), rss, fitted


def universal_penalty(sigma: float, column_norm: float, rows: int, M: int) -> float:
    """scikit-learn's LASSO penalty at the universal threshold σ·√(2 ln M)·‖x‖/n: the largest
    |xᵀε|/n that pure noise of sd σ reaches over M columns of norm ‖x‖ (with high probability)."""
    return sigma * math.sqrt(2 * math.log(max(M, 2))) * column_norm / rows


def _lasso_support(
    X: object, Y: NDArray, selection: str, max_keep: int, seed: int, sigma: float
) -> NDArray:
    """Candidates with positive LASSO coefficients (at most ``max_keep``, largest first; if
    none, the two largest).

    The penalty scale is the universal threshold λ_u of :func:`universal_penalty` (RAPPOR's
    noise σ is known analytically). "lasso-cv": 5-fold seeded CV (mean squared error) over
    six penalties 2λ_u … λ_u/4; "lasso-sigma": one fit at λ_u/2 (a lenient screen; OLS and the
    correction then decide); "nn-lasso": as "lasso-sigma" with non-negative coefficients.
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

    norm = float(np.sqrt(np.asarray(X.sum(axis=0)).mean()))  # 0/1 columns: √(ones)
    lam = universal_penalty(sigma, norm, Y.size, X.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if selection == "lasso-cv":
            model = LassoCV(
                cv=KFold(5, shuffle=True, random_state=seed),
                alphas=lam * np.geomspace(2.0, 0.25, 6),
                max_iter=1000,
                tol=1e-3,
            ).fit(X, Y)
        else:
            model = Lasso(
                alpha=lam / 2, positive=selection == "nn-lasso", max_iter=1000, tol=1e-3
            ).fit(X, Y)
    coef = np.asarray(model.coef_)
    pos = np.flatnonzero(coef > 0)
    if pos.size == 0:
        pos = np.argsort(-coef)[:2]
    pos = pos[np.argsort(-coef[pos], kind="stable")][:max_keep]
    kept = np.zeros(coef.size, dtype=bool)
    kept[pos] = True
    return kept


# ---------------------------------------------------------------------- procedure B
def _procedure_b(
    proto: RAPPOR,
    cands: list[str],
    X: object,
    t: NDArray,
    var: NDArray,
    n_j: NDArray,
    live: NDArray,
    alpha: float,
    correction: str,
    seed: int,
) -> DecodeResult:
    nl = n_j[live][:, None]
    Y = (t / nl).ravel()
    sd = (np.sqrt(var) / nl).ravel()
    sd = np.where(sd > 0, sd, 1.0)
    M = len(cands)
    kept = np.ones(M, dtype=bool)
    if M > 0.8 * Y.size:
        kept = _lasso_support(
            X,
            Y,
            "nn-lasso",
            max_keep=min(500, int(0.8 * Y.size)),
            seed=seed,
            sigma=float(np.median(sd)),
        )
    cols = np.flatnonzero(kept)
    w = 1 / sd
    w = np.minimum(w, 2 * np.median(w))
    w = w / w.mean()
    Xs = X[:, cols].toarray() * w[:, None]
    Xc = X[:, cols].toarray()
    rng = np.random.default_rng(seed)
    fits = []
    for rep in range(5):
        y = Y if rep == 0 else Y + rng.normal(0, sd * math.sqrt(2))
        # google/rappor's constraints: β ≥ 0, Σβ ≤ 1, and no bit overshoots its target by more
        # than 3 SD (the bound clamped to [0.01, 1]).
        cap = np.clip(y + 3 * sd, 0.01, 1.0)
        fits.append(constrained_least_squares(Xs, y * w, Xc, cap))
    fits = np.array(fits)
    N = float(n_j.sum())
    est = np.zeros(M)
    se = np.full(M, math.inf)
    est[cols] = N * fits.mean(axis=0)
    se[cols] = N * fits.std(axis=0, ddof=1)
    detected = np.zeros(M, dtype=bool)
    detected[cols] = est[cols] > 1e-6 + 2 * se[cols]
    p = np.ones(M)  # procedure B has no p-values (the reference's are commented out)
    summary = {"lasso": float(M > 0.8 * Y.size), "kept": float(cols.size)}
    return DecodeResult(cands, est, se, p, detected, int(N), "two-se", alpha, kept, summary)


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
    chol = np.linalg.cholesky(K)

    def solve(rhs: NDArray) -> NDArray:
        return np.linalg.solve(chol.T, np.linalg.solve(chol, rhs))

    beta = np.zeros(n)
    z = np.clip(M @ beta, lower, upper)
    y = np.zeros(M.shape[0])
    scale = max(1.0, float(np.abs(q).max()))
    for _ in range(max_iter):
        beta_t = solve(sigma * beta - q + M.T @ (rho * z - y))
        z_t = M @ beta_t
        beta = alpha * beta_t + (1 - alpha) * beta
        z_relaxed = alpha * z_t + (1 - alpha) * z
        z_new = np.clip(z_relaxed + y / rho, lower, upper)
        y = y + rho * (z_relaxed - z_new)
        z = z_new
        primal = float(np.abs(M @ beta - z).max())
        dual = float(np.abs(P @ beta + q + M.T @ y).max())
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
