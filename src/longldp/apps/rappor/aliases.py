"""Aliased candidates: Bloom columns that the counts cannot tell apart (docs/math.md §11.2).

Two candidates alias when the design gives no way to split a count between them: their Bloom
bits coincide in every cohort that reported (identical columns, found by comparing the bit
sets directly), or their columns are linearly dependent on others (for example four strings
whose Bloom bits form a cycle a–b, b–c, c–d, d–a with one cohort: s₁ + s₃ = s₂ + s₄). Testing
such candidates one by one would split a real count between a reported string and a string
nobody holds, so the decoder tests each aliased set once, as a group, with the group's total.

Dependencies are read from the eigen-decomposition of the weighted Gram matrix G = AᵀWA of the
fitted columns (W = diag(N_j), shares as coefficients, math §11.2): an eigenvector v with
eigenvalue λ is an alias direction when a unit contrast of shares along it has a standard
error σ₀/√λ of at least 1, i.e. λ ≤ σ₀² (no population, not even all clients holding one
string, could be told apart along v), or when λ is zero to rounding (``λ ≤ n·ε_mach·λ_max``,
the numerical rank). Candidates with weight on an alias direction form the groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: A coordinate belongs to an alias group when the projector onto the alias directions has at
#: least this weight on it (P_ii); two coordinates are linked when |P_ij| is at least this.
MEMBER_WEIGHT = 1e-6
#: Multiple of n·ε_mach·λ_max below which an eigenvalue is zero (the numerical rank).
RANK_FACTOR = 100.0


def identical_columns(
    bloom_map: NDArray[np.int64], cohorts: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Candidates whose Bloom bits coincide in every listed cohort share one column.

    Parameters
    ----------
    bloom_map : (M, m, h) Bloom positions of the candidates.
    cohorts : the cohorts that reported (the rows of the design).

    Returns
    -------
    first : (U,) the first candidate of every distinct column, in order of appearance.
    unit_of : (M,) the distinct column of every candidate (``first[unit_of[s]]`` has s's bits).
    """
    sub = bloom_map[:, cohorts, :]
    # Each cohort's bit set as a bitmask (k ≤ 256: at most four 64-bit words), so that a
    # position hashed twice counts once and equal sets give equal keys, without sorting.
    words = max(1, (int(sub.max(initial=0)) >> 6) + 1)
    masks = np.zeros((*sub.shape[:2], words), dtype=np.uint64)
    for i in range(sub.shape[2]):
        pos = sub[..., i]
        bit = np.left_shift(np.uint64(1), (pos & 63).astype(np.uint64))
        for w in range(words):
            masks[..., w] |= np.where((pos >> 6) == w, bit, np.uint64(0))
    keys = masks.reshape(sub.shape[0], -1)
    if keys.shape[1] == 0 or cohorts.size == 0:  # no cohort: every candidate has no column
        return np.zeros(min(1, keys.shape[0]), dtype=np.int64), np.zeros(
            keys.shape[0], dtype=np.int64
        )
    # each row's bytes as one opaque scalar: a 1-D unique, much faster than unique(axis=0)
    rows = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.itemsize * keys.shape[1])))
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # units numbered by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order].astype(np.int64), rank[inverse.ravel()].astype(np.int64)


@dataclass(frozen=True)
class Dependencies:
    """The linear structure of a Gram matrix G = AᵀWA (n × n).

    Attributes
    ----------
    pinv : G⁺, inverting every eigenvalue above the numerical rank threshold (an exact
        dependency is truncated; a near one is kept, so its coefficients stay unbiased).
    rank : the numerical rank of G.
    groups : coordinates (two or more) that share an alias direction, connected through
        |P_ij|, each sorted; every other coordinate is tested on its own.
    null_basis : (n, n − rank) orthonormal basis of the exact null space.
    """

    pinv: NDArray[np.float64]
    rank: int
    groups: list[NDArray[np.int64]]
    null_basis: NDArray[np.float64]

    def estimable(self, weights: NDArray[np.float64]) -> bool:
        """Whether wᵀβ is identified: w is orthogonal to the exact null space."""
        if self.null_basis.shape[1] == 0:
            return True
        w = np.asarray(weights, dtype=np.float64)
        return bool(np.linalg.norm(self.null_basis.T @ w) <= 1e-6 * max(np.linalg.norm(w), 1.0))

    def estimable_coordinates(self, coords: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each single coefficient β_c is identified (e_c orthogonal to the null space)."""
        if self.null_basis.shape[1] == 0:
            return np.ones(len(coords), dtype=bool)
        return np.linalg.norm(self.null_basis[coords], axis=1) <= 1e-6


def dependencies(gram: NDArray[np.float64], sigma0_2: float) -> Dependencies:
    """Alias groups and the pseudo-inverse of a weighted Gram matrix (module docstring).

    Parameters
    ----------
    gram : symmetric positive semi-definite G = AᵀWA, coefficients in shares of all clients.
    sigma0_2 : the per-report noise variance σ₀² of the regression (math §11.2); an
        eigenvalue λ ≤ σ₀² makes its eigenvector an alias direction.
    """
    n = gram.shape[0]
    if n == 0:
        return Dependencies(np.zeros((0, 0)), 0, [], np.zeros((0, 0)))
    # Fast path (the usual case): a Cholesky factor and trace(G⁻¹) = Σ 1/λ_i < 1/σ₀² prove
    # every eigenvalue above σ₀², so there is no alias direction and G⁺ = G⁻¹.
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    try:
        factor = cho_factor(gram, lower=True, check_finite=False)
        inverse = cho_solve(factor, np.eye(n), check_finite=False)
        if np.all(np.isfinite(inverse)) and 0 < float(np.trace(inverse)) * sigma0_2 < 1:
            return Dependencies((inverse + inverse.T) / 2, n, [], np.zeros((n, 0)))
    except LinAlgError:
        pass
    lam, V = np.linalg.eigh(gram)
    zero = RANK_FACTOR * n * np.finfo(np.float64).eps * max(float(lam[-1]), 0.0)
    exact = lam <= zero
    alias = lam <= max(zero, sigma0_2)
    inv = np.where(exact, 0.0, 1.0 / np.where(exact, 1.0, lam))
    pinv = (V * inv) @ V.T
    groups: list[NDArray[np.int64]] = []
    if alias.any():
        from scipy.sparse.csgraph import connected_components

        Va = V[:, alias]
        P = Va @ Va.T
        members = np.flatnonzero(np.diag(P) >= MEMBER_WEIGHT)
        link = np.abs(P[np.ix_(members, members)]) >= MEMBER_WEIGHT
        n_comp, label = connected_components(link, directed=False)
        # A lone coordinate (a column of almost no weight) is no alias: it stays on its own,
        # with the large standard error that its eigenvalue gives it.
        groups = [g for c in range(n_comp) if (g := members[label == c]).size >= 2]
    return Dependencies(pinv, int((~exact).sum()), groups, V[:, exact])
