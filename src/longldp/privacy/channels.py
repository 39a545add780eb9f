"""Round channels as matrices: the building blocks of every exact channel (docs/math.md §13.1).

``channel[x, y] = Pr[output y | input x]``. The report kinds of :mod:`longldp.protocols` build
their exact one-report and round-1 channels from these (products of the round channels, over
every output), never from the P1/P0 closed forms, so that :func:`longldp.privacy.channel_epsilon`
checks each claim against the probabilities the sampler draws with.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray


def grr_matrix(keep: float, m: int) -> NDArray[np.float64]:
    """Round channel of GRR over m symbols: keep with ``keep``, else a uniform other symbol."""
    if m == 1:
        return np.ones((1, 1))
    off = (1 - keep) / (m - 1)
    return np.full((m, m), off) + np.eye(m) * (keep - off)


def bit_matrix(p: float, q: float) -> NDArray[np.float64]:
    """Per-bit channel: rows = input bit (0, 1), columns = output bit (0, 1); an input 1 gives
    1 with ``p``, an input 0 gives 1 with ``q``."""
    return np.array([[1 - q, q], [1 - p, p]])


def unary_channel(
    k: int, per_bit: NDArray[np.float64], patterns: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Channel over all 2^k output vectors of k independent bits, each through ``per_bit``.

    Rows are the encoded inputs: ``patterns`` (P, k) boolean, default the k one-hot vectors;
    columns the 2^k outputs in lexicographic order.
    """
    outputs = np.array(list(itertools.product((0, 1), repeat=k)))
    rows = np.eye(k, dtype=int) if patterns is None else np.asarray(patterns, dtype=int)
    return np.stack([np.prod(per_bit[row[None, :], outputs], axis=1) for row in rows])
