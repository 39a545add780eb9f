"""Association of two variables reported by the same clients (EM over the joint).

Fanti, Pihur, Erlingsson, "Building a RAPPOR with the unknown" (PETS 2016) §5; google/rappor
``association.R``. Each client sends one report per variable (same cohort). For each report the
likelihood of every candidate string s is the product over bits of q* or 1 − q* on s's Bloom
bits in the report's cohort and p* or 1 − p* elsewhere; "Other" (anything not listed) uses, per
cohort and bit, the share of set bits left after the listed strings' estimated shares. The
joint likelihood of a pair is the outer product; EM finds the joint distribution π:
π ← mean_n normalize(L_n ⊙ π). Its covariance is the inverse of the observed information
Σ_n L_n L_nᵀ/(L_n·π)², and independence is tested with χ² = dᵀ I d, d = π − outer(marginals),
df = (r − 1)(c − 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.protocols.rappor import RAPPOR, candidate_map

OWNER = "rappor.association"
OTHER = "Other"


def report_likelihoods(
    proto: RAPPOR,
    reports: NDArray,
    candidates: Sequence[str],
    shares: ArrayLike | None = None,
    other: bool = True,
) -> NDArray[np.float64]:
    """(n, S + 1) likelihoods (scaled per row) of each report under each candidate and Other
    (``other=False``: the S candidates only, for a variable they exhaust, e.g. a boolean).

    ``shares`` are the candidates' estimated proportions (for Other's bit rates; default 0).
    """
    rec = proto.check_reports(reports)
    S = len(candidates)
    qs, ps = proto.effective
    bits = np.unpackbits(np.ascontiguousarray(rec["bits"]), axis=1, count=proto.k).astype(bool)
    coh = rec["cohort"]
    if not proto.domain.codes:  # strings: each candidate's Bloom bits in every cohort
        idx = candidate_map(candidates, proto.h, proto.k, proto.m)  # (S, m, h)
        member = np.zeros((S, proto.m, proto.k), dtype=bool)
        member[np.arange(S)[:, None, None], np.arange(proto.m)[None, :, None], idx] = True
    else:  # codes (boolean: candidates "FALSE", "TRUE" are codes 0 and 1): their encodings
        codes = np.arange(S, dtype=np.int64)
        member = np.stack(
            [
                np.unpackbits(proto.encode(codes, np.full(S, j)), axis=1, count=proto.k)
                for j in range(proto.m)
            ],
            axis=1,
        ).astype(bool)
    f = np.zeros(S) if shares is None else np.clip(np.asarray(shares, dtype=np.float64), 0, 1)
    # Other: per cohort and bit, the share of set bits the listed strings leave unexplained.
    rest = max(1e-9, 1 - f.sum())
    n_j = np.bincount(coh, minlength=proto.m)
    ones = np.zeros((proto.m, proto.k))
    np.add.at(ones, coh, bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(n_j[:, None] > 0, (ones / np.maximum(n_j, 1)[:, None] - ps) / (qs - ps), 0)
    phi_other = np.clip((phi - np.tensordot(f, member, axes=1)) / rest, 0, 1)
    # log-likelihoods: Σ_bits [y log r + (1−y) log(1−r)], r = q* on the string's bits else p*.
    log_q = np.where(bits, np.log(qs), np.log1p(-qs))  # (n, k)
    log_p = np.where(bits, np.log(ps), np.log1p(-ps))
    diff = log_q - log_p
    ll = log_p.sum(axis=1)[:, None] + np.einsum("nk,snk->ns", diff, member[:, coh, :])
    r_other = phi_other[coh] * qs + (1 - phi_other[coh]) * ps  # (n, k)
    ll_other = np.where(bits, np.log(r_other), np.log1p(-r_other)).sum(axis=1)
    out = np.column_stack([ll, ll_other]) if other else ll
    return np.exp(out - out.max(axis=1, keepdims=True))


def _needs_other(proto: RAPPOR, shares: ArrayLike | None) -> bool:
    """An "Other" category unless the candidates exhaust the variable (boolean, or shares
    summing to 1)."""
    if proto.domain.codes:  # a listed domain (boolean): the candidates are every value
        return False
    return shares is None or float(np.sum(shares)) < 1 - 1e-6


@dataclass
class Association:
    """The joint distribution of two variables, its standard errors and the χ² test."""

    rows: list[str]
    cols: list[str]
    joint: NDArray[np.float64]
    std_error: NDArray[np.float64]
    chi2: float
    dof: int
    p_value: float
    iterations: int


def associate(
    proto1: RAPPOR,
    reports1: NDArray,
    candidates1: Sequence[str],
    proto2: RAPPOR,
    reports2: NDArray,
    candidates2: Sequence[str],
    shares1: ArrayLike | None = None,
    shares2: ArrayLike | None = None,
    tol: float = 1e-6,
    max_iter: int = 1000,
) -> Association:
    """EM estimate of the joint distribution of two variables (reports row-aligned by client).

    An "Other" row/column is added unless the candidates exhaust the variable (a boolean, or
    ``shares`` summing to 1).
    """
    from scipy.stats import chi2 as chi2_dist

    r1, r2 = np.asarray(reports1), np.asarray(reports2)
    if r1.shape != r2.shape:
        raise ValueError(
            f"{OWNER}: one report per client and variable; got {r1.shape}, {r2.shape}."
        )
    if r1.size == 0:
        raise ValueError(f"{OWNER}: no reports.")
    o1, o2 = _needs_other(proto1, shares1), _needs_other(proto2, shares2)
    L1 = report_likelihoods(proto1, r1, candidates1, shares1, o1)
    L2 = report_likelihoods(proto2, r2, candidates2, shares2, o2)
    a, b = L1.shape[1], L2.shape[1]
    pi = np.full((a, b), 1.0 / (a * b))
    n = L1.shape[0]
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        d = np.sum((L1 @ pi) * L2, axis=1)  # Σ_ab L1[n,a]·π[a,b]·L2[n,b], through BLAS
        new = pi * ((L1 / d[:, None]).T @ L2) / n
        done = np.max(np.abs(new - pi)) < tol
        pi = new
        if done:
            break
    d = np.sum((L1 @ pi) * L2, axis=1)
    J = (L1[:, :, None] * L2[:, None, :]).reshape(n, a * b) / d[:, None]
    info = J.T @ J
    cov = np.linalg.pinv(info)
    se = np.sqrt(np.clip(np.diag(cov), 0, None)).reshape(a, b)
    diff = (pi - np.outer(pi.sum(axis=1), pi.sum(axis=0))).ravel()
    stat = float(diff @ info @ diff)
    dof = (a - 1) * (b - 1)
    return Association(
        [*map(str, candidates1), *([OTHER] if o1 else [])],
        [*map(str, candidates2), *([OTHER] if o2 else [])],
        pi,
        se,
        stat,
        dof,
        float(chi2_dist.sf(stat, dof)),
        it,
    )
