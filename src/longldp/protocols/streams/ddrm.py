"""DDRM: difference trees that cost nothing without change (Xue et al., IEEE TKDE), §19.5.

Device: the user draws once an item j uniformly from [0, k) (public, independent of her data)
and follows the bit b_s = 1[x_{s−1} = j] for s = 1..τ, with b_0 = 0. At every s she reports one
node of the dyadic tree that ends at s: the leaf (s − 1, s] or, with probability 1/2 when s is
even, the largest node ending at s (level ν(s), the trailing zeros of s). Its difference
Δ = b_s − b_{s−2^h} ∈ {−1, 0, 1} goes through a ternary randomized response: +1 with
probability 1/2 + Δ·(e^ε − 1)/(2(e^ε + 1)), else −1. A zero difference gives a fair coin,
independent of the data: no change, no privacy spent.

Server: per item, c·(mean of the reports) with c = (e^ε + 1)/(e^ε − 1) estimates the mean Δ of
the users who reported that node. The share F(s) of the item's users who hold it is estimated
twice, F̂(s − 1) + leaf and F̂(s − 2^h) + node, and the two are averaged with weights from
their data-independent variances, so the result stays unbiased (docs/math.md (19.11)).
F̂_j(s) estimates f_j at epoch s − 1 (the item's users are a uniform random share).

Privacy: each report is ε-LDP, and a report whose node difference is zero is a fair coin; a
user spends ε at each epoch where a candidate node of hers changed (docs/math.md (19.12)).

Our reconstruction from the paper's abstract and a public re-implementation: the paper's
optimized budget allocation over the tree's levels is not reproduced (one ε per report).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy.streams import ddrm_plus_probabilities, ddrm_scale, trailing_level
from longldp.protocols._rng import RandomSource
from longldp.protocols.streams import oracle


def node_reports(
    leaf: NDArray,
    top: NDArray,
    coin: NDArray[np.bool_],
    down: float,
    up: float,
    rng: RandomSource,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """DDRM reports of m users: (which node each reports: the top one, the report is +1).

    A user with ``coin`` (her epoch s is even, so a node above the leaf ends at s) picks the
    top node with a fair coin, else the leaf; her node's difference Δ ∈ {−1, 0, 1} is reported
    +1 with probability ``down`` (Δ = −1), 1/2 (Δ = 0) or ``up`` (Δ = 1) (docs/math.md §19.5).
    Draws: one uniform per user with a coin, in order (top when u < 1/2), then one uniform per
    user (+1 when u < the probability). The kernel and the registered mechanism's devices
    (:class:`longldp.protocols.streams.changes.DDRM`) draw with this one function.
    """
    coin = np.asarray(coin, dtype=bool)
    use_top = np.zeros(coin.size, dtype=bool)
    use_top[coin] = rng.random(int(coin.sum())) < 0.5
    delta = np.where(use_top, top, leaf)
    plus = np.where(delta > 0, up, np.where(delta < 0, down, 0.5))
    return use_top, rng.random(coin.size) < plus


@dataclass(frozen=True)
class DDRMRun:
    """One DDRM run.

    ``estimates[τ, k]``: f̂ at every epoch; ``items[n]``: each user's item; ``coefficients``:
    per item j a (τ + 1, N) matrix expressing F̂_j(s) as a combination of the N node estimates
    of that item (rows s = 0..τ), with ``node_variance[j]`` their exact variances and
    ``node_truth[j]`` the true mean Δ of each node's reporters (so, given who reported which
    node, E[F̂_j(s)] = coefficients[j][s] @ node_truth[j]), ``node_estimates[j]`` the node
    estimates themselves; ``changed``: each user's epochs
    with a non-zero candidate node.
    """

    estimates: NDArray[np.float64]
    items: NDArray[np.int64]
    coefficients: list[NDArray[np.float64]]
    node_variance: list[NDArray[np.float64]]
    node_truth: list[NDArray[np.float64]]
    node_estimates: list[NDArray[np.float64]]
    changed: NDArray[np.int64]
    eps: float

    def conditional_mean(self, t: int) -> NDArray[np.float64]:
        """E[f̂(t)] given the items and who reported which node, per value."""
        return np.array(
            [float(c[t + 1] @ d) for c, d in zip(self.coefficients, self.node_truth, strict=True)]
        )

    def estimate_variance(self, t: int) -> NDArray[np.float64]:
        """Exact variance of f̂(t) given the items and the sampled levels, per value."""
        return np.array(
            [
                float(np.sum(c[t + 1] ** 2 * v))
                for c, v in zip(self.coefficients, self.node_variance, strict=True)
            ]
        )


def run(
    values: NDArray,
    k: int,
    eps: float,
    rng: np.random.Generator,
    items: NDArray | None = None,
) -> DDRMRun:
    """Run DDRM over ``values[τ, n]`` (per-user engine; docs/math.md §19.5).

    ``items``: each user's item if already drawn (a device keeps hers); None draws them.
    """
    values, k = oracle.check_values("DDRM", values, k)
    down, _, up = ddrm_plus_probabilities(eps)
    c = ddrm_scale(eps)
    tau, n = values.shape
    if items is None:
        items = rng.integers(0, k, size=n)
    else:
        items = check.domain_values("DDRM", items, k, name="items")
        if items.shape != (n,):
            raise ValueError(f"DDRM: 'items' must have length {n}; got shape {items.shape}.")
    bits = np.zeros((tau + 1, n), dtype=np.int8)
    bits[1:] = values == items[None, :]
    changed = np.zeros(n, dtype=np.int64)

    # Per item j: the node estimates in order, their exact variances, F̂_j(s) as a row of
    # coefficients over those nodes (s = 0: F̂ = 0), and a planning variance of F̂_j(s) from
    # the data-independent bound c²/m of every node, which sets the weights.
    coef: list[list[NDArray]] = [[np.zeros(0)] for _ in range(k)]
    plan = np.zeros((tau + 1, k))
    node_var: list[list[float]] = [[] for _ in range(k)]
    node_est: list[list[float]] = [[] for _ in range(k)]
    node_truth: list[list[float]] = [[] for _ in range(k)]
    F = np.zeros((tau + 1, k))

    for s in range(1, tau + 1):
        h_top = trailing_level(s)
        leaf_d = bits[s] - bits[s - 1]
        top_d = bits[s] - bits[s - (1 << h_top)] if h_top > 0 else leaf_d
        changed += (leaf_d != 0) | (top_d != 0)
        use_top, up_bit = node_reports(leaf_d, top_d, np.full(n, h_top > 0), down, up, rng)
        delta = np.where(use_top, top_d, leaf_d)
        y = np.where(up_bit, 1.0, -1.0)
        branches = []
        for chosen, back in ((~use_top, 1), (use_top, 1 << h_top)):
            m = np.bincount(items[chosen], minlength=k)
            total = np.bincount(items[chosen], weights=y[chosen], minlength=k)
            d2 = np.bincount(items[chosen], weights=delta[chosen] ** 2.0, minlength=k)
            d1 = np.bincount(items[chosen], weights=delta[chosen] * 1.0, minlength=k)
            branches.append((m, total, d1, d2, back))
        for j in range(k):
            options = []
            for m, total, d1, d2, back in branches:
                mj = int(m[j])
                if mj == 0:
                    continue
                node_est[j].append(c * total[j] / mj)
                node_var[j].append((c * c - d2[j] / mj) / mj)
                node_truth[j].append(d1[j] / mj)
                prev = coef[j][s - back]
                row = np.zeros(len(node_est[j]))
                row[: prev.size] = prev
                row[-1] = 1.0
                options.append((row, plan[s - back, j] + c * c / mj))
            if not options:
                raise ValueError(f"DDRM: item {j} has no report at epoch {s}; use more users.")
            if len(options) == 1:
                row, v = options[0]
            else:
                (r1, v1), (r2, v2) = options
                r1 = np.pad(r1, (0, r2.size - r1.size))
                row, v = (v2 * r1 + v1 * r2) / (v1 + v2), v1 * v2 / (v1 + v2)
            coef[j].append(row)
            plan[s, j] = v
            F[s, j] = float(row @ np.asarray(node_est[j]))

    width = [len(v) for v in node_var]
    coefficients = []
    for j in range(k):
        mat = np.zeros((tau + 1, width[j]))
        for s, row in enumerate(coef[j]):
            mat[s, : row.size] = row
        coefficients.append(mat)
    return DDRMRun(
        estimates=F[1:],
        items=items,
        coefficients=coefficients,
        node_variance=[np.asarray(v) for v in node_var],
        node_truth=[np.asarray(v) for v in node_truth],
        node_estimates=[np.asarray(v) for v in node_est],
        changed=changed,
        eps=eps,
    )
