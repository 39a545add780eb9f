"""CHANGES-TREE: the change-bounded tree protocol of Erlingsson et al. (SODA 2019), §19.4.

Why the name: the protocol of Erlingsson, Feldman, Mironov, Raghunathan, Talwar and Thakurta
("Amplification by shuffling", SODA 2019) for users whose data changes a bounded number of times
has no short name in the paper; what defines it is that a user pays per *change* of her value,
through the nodes of a dyadic *tree* over time. Hence ``CHANGES-TREE``.

Device: at epoch 0 the user sends a frequency-oracle report of her value at ε_0. She draws once
a level h uniformly from the L = ⌊log2(τ − 1)⌋ + 1 levels of the tree over epochs 1..τ−1; at
every epoch s that ends a node of her level (s ≡ 0 mod 2^h) she reports that node's difference
x_s − x_{s−2^h} of one-hot vectors: nothing, or "left a, entered b". It is encoded on 2k bits
(minus part e_a, plus part e_b) and every bit randomized as in OUE (a 1 stays 1 with 1/2, a 0
becomes 1 with q = 1/(e^{ε_n/2} + 1)), so one node report is ε_n-LDP and a node whose
difference is zero costs nothing beyond the default.

Server: the node sum of level h is estimated from the users of level h (a uniform random share
of the population); the frequencies at epoch s are f̂(0) plus the estimated node sums of the
≤ L nodes that tile (0, s] (:func:`longldp.privacy.streams.dyadic_decomposition`).

Privacy: a user whose value changes c times has at most c non-zero nodes at her level, so she
spends ε_0 + c·ε_n at most (docs/math.md (19.8)); the paper's binary protocol
randomizes node sums in {−1, 0, 1}; the 2k-bit encoding is our generalization to k values.
Per-user engine only (a node needs each user's values at its two ends).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy.streams import (
    dyadic_decomposition,
    fo_kind,
    tree_levels,
    tree_node_probabilities,
)
from longldp.protocols._rng import RandomSource
from longldp.protocols.streams import oracle


def node_bits(
    before: NDArray[np.int64],
    now: NDArray[np.int64],
    k: int,
    p: float,
    q: float,
    rng: RandomSource,
) -> NDArray[np.bool_]:
    """Node reports of m users (m, 2k): the difference "left ``before``, entered ``now``" on 2k
    bits (plus part e_now, minus part e_before; all zero when ``before == now``), each bit
    randomized as in OUE (docs/math.md §19.4).

    Draws, in order: 2k·m uniforms u (bit = u < q), then one uniform per user who moved for her
    plus bit (u < p), then one per user who moved for her minus bit (u < p). The kernel and the
    registered mechanism's devices (:class:`longldp.protocols.streams.changes.ChangesTree`)
    draw with this one function.
    """
    before = np.asarray(before, dtype=np.int64)
    now = np.asarray(now, dtype=np.int64)
    bits = rng.random((now.size, 2 * k)) < q
    rows = np.flatnonzero(now != before)
    bits[rows, now[rows]] = rng.random(rows.size) < p
    bits[rows, k + before[rows]] = rng.random(rows.size) < p
    return bits


@dataclass(frozen=True)
class TreeRun:
    """One CHANGES-TREE run.

    ``estimates[τ, k]``: f̂ at every epoch; ``initial``: f̂(0) alone; ``nodes``: the estimated
    node sums, keyed (level, end epoch), each a length-k vector; ``node_users``: users per level;
    ``levels[n]``: each user's level; ``plus``/``minus``: per node, the true counts of the
    reporting users' plus and minus parts (for the exact variance); ``kind``: epoch 0's oracle.
    """

    estimates: NDArray[np.float64]
    initial: NDArray[np.float64]
    nodes: dict[tuple[int, int], NDArray[np.float64]]
    node_users: NDArray[np.int64]
    levels: NDArray[np.int64]
    plus: dict[tuple[int, int], NDArray[np.int64]]
    minus: dict[tuple[int, int], NDArray[np.int64]]
    eps_node: float
    eps_0: float
    kind: str

    def node_variance(self, key: tuple[int, int]) -> NDArray[np.float64]:
        """Exact variance of one node estimate given the levels (docs/math.md (19.9))."""
        p, q = tree_node_probabilities(self.eps_node)
        m = int(self.node_users[key[0]])
        a, b = self.plus[key], self.minus[key]
        bits = (a + b) * p * (1 - p) + (2 * m - a - b) * q * (1 - q)
        return bits / (m * m * (p - q) ** 2)


def run(
    values: NDArray,
    k: int,
    eps_node: float,
    eps_0: float,
    rng: np.random.Generator,
    oracle_name: str = "adaptive",
    levels: NDArray | None = None,
) -> TreeRun:
    """Run CHANGES-TREE over ``values[τ, n]`` (per-user engine; docs/math.md §19.4).

    ``levels``: each user's level if already drawn (a device keeps hers); None draws them.
    """
    values, k = oracle.check_values("CHANGES-TREE", values, k)
    eps_0 = check.budget("CHANGES-TREE", "eps_0", eps_0)
    p, q = tree_node_probabilities(eps_node)
    tau, n = values.shape
    n_levels = tree_levels(tau - 1) if tau > 1 else 1
    if levels is None:
        levels = rng.integers(0, n_levels, size=n)
    else:
        levels = np.asarray(levels)
        if levels.shape != (n,) or not np.issubdtype(levels.dtype, np.integer):
            raise ValueError(
                f"CHANGES-TREE: 'levels' must be an integer vector of length {n}; got shape "
                f"{levels.shape}."
            )
        if n and (levels.min() < 0 or levels.max() >= n_levels):
            raise ValueError(f"CHANGES-TREE: 'levels' must lie in [0, {n_levels}).")
        levels = levels.astype(np.int64)
    node_users = np.bincount(levels, minlength=n_levels).astype(np.int64)

    kind = fo_kind(oracle_name, k, eps_0)
    reports = oracle.perturb(values[0], kind, k, eps_0, rng)
    initial = oracle.estimate(oracle.support(reports, kind, k), n, kind, k, eps_0)

    nodes: dict[tuple[int, int], NDArray[np.float64]] = {}
    plus: dict[tuple[int, int], NDArray[np.int64]] = {}
    minus: dict[tuple[int, int], NDArray[np.int64]] = {}
    estimates = np.empty((tau, k))
    estimates[0] = initial
    for s in range(1, tau):
        for h in range(n_levels):
            if s % (1 << h):
                continue
            who = np.flatnonzero(levels == h)
            m = who.size
            now, before = values[s, who], values[s - (1 << h), who]
            rows = np.flatnonzero(now != before)
            bits = node_bits(before, now, k, p, q, rng)
            counts = bits.sum(axis=0)
            key = (h, s)
            plus[key] = np.bincount(now[rows], minlength=k)
            minus[key] = np.bincount(before[rows], minlength=k)
            if m == 0:
                nodes[key] = np.full(k, np.nan)
            else:
                shares = (counts / m - q) / (p - q)
                nodes[key] = shares[:k] - shares[k:]
        estimates[s] = initial + sum(
            (nodes[node] for node in dyadic_decomposition(s)), start=np.zeros(k)
        )
    return TreeRun(
        estimates=estimates,
        initial=initial,
        nodes=nodes,
        node_users=node_users,
        levels=levels,
        plus=plus,
        minus=minus,
        eps_node=eps_node,
        eps_0=eps_0,
        kind=kind,
    )
