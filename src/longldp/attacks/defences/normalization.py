"""Normalization as a defence: post-processing that forces estimates onto the simplex.

[CJG21] §6.1 normalizes the estimates so that they are non-negative and sum to one: subtract
the smallest estimate from every estimate and divide by their sum,

    f'_v = (f̂_v − min_u f̂_u) / Σ_w (f̂_w − min_u f̂_u)                                  (N.1)

(docs/attacks.md §8.1). MGA against GRR pushes every non-target down by the same amount while
the targets rise, so (N.1) removes part of the gain; against unary encoding the padding keeps
the sum near one and (N.1) changes little. longldp's own post-processing methods (docs/math.md
§5, e.g. Norm-Sub, the Euclidean projection onto the simplex) are defences of the same kind and
are accepted by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import postprocess as pp


def cao_normalize(estimates: ArrayLike, total: float = 1.0, channel: Any = None) -> NDArray:
    """(N.1) scaled to ``total``; uniform when all estimates are equal (a post-processor)."""
    f = np.asarray(estimates, dtype=np.float64)
    shifted = f - f.min()
    s = shifted.sum()
    if s <= 0:
        return np.full(f.shape, total / f.size)
    return total * shifted / s


#: Estimate-level defences by name: Cao's normalization and longldp's projections.
POSTPROCESSORS: dict[str, Any] = {
    "normalize": cao_normalize,
    "norm-sub": "norm-sub",
    "base-cut": "base-cut",
}


def postprocessor(name: str) -> Any:
    """The post-processor of an estimate-level defence name (``pp.apply`` accepts it)."""
    method = POSTPROCESSORS[name]
    if isinstance(method, str):
        pp.get_method(method)
    return method
