"""Sampling S-Hist: one item of a set through SH, with a reserved dummy column (docs/math.md §12.3).

A user with the set S (distinct items of [0, d)) reports through SH over d + 1 columns:

- |S| ≥ L: a uniformly random item of S (truncation to L then sampling, in one draw);
- |S| < L: r uniform on [0, L); S[r] if r < |S|, else the dummy ⊥ = column d.

This is PSFO(L, SH, ε) with one shared dummy and no amplification
(:class:`longldp.apps.setvalued.psfo.PSFO`): the client draw is
:func:`~longldp.apps.setvalued.psfo.pad_and_sample`, the estimator f̂(v) = L·f̂_SH(v) =
L·(c_ε/n_g)·Σ_u s_u·H[j_u, v] is ``PSFO.estimate``. Zhang (GFIM thesis, §3.1.2) sends a fresh
uniform sign for ⊥; a reserved column has the same mean and variance and lets a longitudinal
chain memoize ⊥ like any item.

The exact variance on a fixed population (Hadamard columns are orthogonal, so
E[L·c_ε·s_u·H[j_u, v]] = a_u := min(1, L/|S_u|)·1[v ∈ S_u]):

    Var f̂(v) = (L²·c_ε² − Σ_u a_u²/n_g)/n_g.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.apps.setvalued.psfo import PSFO
from longldp.data import SetData
from longldp.protocols import SH, protocol

OWNER = "sampling S-Hist"


def sampling_shist(d: int, L: int, eps: float) -> PSFO:
    """The one-shot sampling S-Hist over d real items: PSFO(L, SH(k = d + 1, ε), shared ⊥).

    Parameters
    ----------
    d : int
        Real items 0..d−1; the dummy is column d.
    L : int
        Padding/sampling length, L >= 1.
    eps : float
        ε of the one report.
    """
    d = check.integer(OWNER, "d", d, minimum=1)
    L = check.integer(OWNER, "L", L, minimum=1)
    eps = check.positive_float(OWNER, "eps", eps)
    return PSFO(d, L, protocol("SH", k=d + 1, eps=eps), "shared", eps, False)


def sampling_target(data: SetData, L: int, n_items: int | None = None) -> NDArray[np.float64]:
    """What f̂ estimates: f_L(v) = (1/n)·Σ_u a_u, a_u = min(1, L/|S_u|)·1[v ∈ S_u].

    Equals the item frequency when every |S_u| ≤ L.
    """
    L = check.integer(OWNER, "L", L, minimum=1)
    a = _weights(data, L)
    d = data.domain.size if n_items is None else n_items
    return np.bincount(data.items, weights=np.repeat(a, data.lengths), minlength=d) / data.n


def shist_variance(
    data: SetData, L: int, eps: float, n_items: int | None = None
) -> NDArray[np.float64]:
    """Exact Var f̂(v) = (L²c_ε² − Σ_u a_u²/n)/n of sampling S-Hist for every item v.

    Parameters
    ----------
    data : SetData
        The reporting group's sets (n_g = data.n users).
    L : int
        Sampling length.
    eps : float
        ε of SH; c_ε = (e^ε + 1)/(e^ε − 1).

    Returns
    -------
    numpy.ndarray of float64
        One variance per item of the domain.
    """
    L = check.integer(OWNER, "L", L, minimum=1)
    c = SH(k=2, eps=eps).c_eps
    n = data.n
    if n < 1:
        raise ValueError(f"{OWNER}: 'data' must hold at least one user.")
    a = _weights(data, L)
    d = data.domain.size if n_items is None else n_items
    sq = np.bincount(data.items, weights=np.repeat(a * a, data.lengths), minlength=d)
    return (L * L * c * c - sq / n) / n


def _weights(data: SetData, L: int) -> NDArray[np.float64]:
    lengths = data.lengths.astype(np.float64)
    return np.minimum(1.0, L / np.maximum(lengths, 1.0))
