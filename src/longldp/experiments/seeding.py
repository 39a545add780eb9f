"""Random streams of a study: one root `SeedSequence`, children named by grid position.

A study has one base seed (the ``seed`` key). Every random stream of the study is the
`numpy.random.SeedSequence` with that entropy and a *spawn key* that names the stream by its
position in the grid::

    SeedSequence(entropy=seed, spawn_key=(namespace, i1, i2, ...))

This is exactly the child that a chain of ``spawn`` calls would return:
``SeedSequence(seed).spawn(N)[namespace].spawn(M)[i1]...`` has the spawn key
``(namespace, i1, ...)``. Building it directly from the key means no stream depends on how
many cells were enumerated before it, on the number of workers or on the order in which the
cells run; and a row of the results table can be replayed from its own ``seed_entropy`` and
``spawn_key`` columns (`stream`).

The first element of a key is the *namespace*, the purpose of the stream; the rest are
0-based indices into the study's lists (datasets, attributes, repetitions, protocols,
ε∞ grid, α grid). Each kind documents its keys; the standalone kind uses:

=================  ===============================  =============================================
namespace          key                              stream
=================  ===============================  =============================================
`DATA` (0)         ``(0, d)``                       synthetic dataset d (timestamp 0)
`PERMUTATION` (1)  ``(1, d, a, r)``                 interpolation of attribute a of dataset d in
                                                    repetition r (shared by every protocol, ε∞
                                                    and α of that repetition: common random
                                                    numbers)
`CELL` (2)         ``(2, d, a, r, p, e, l)``        the protocol's randomness in one cell
                                                    (protocol p, ε∞ index e, α index l; l = 0
                                                    for a protocol without ε1)
=================  ===============================  =============================================

Consequence: appending to a list keeps every existing stream; inserting or reordering entries
shifts the streams of the entries after it (the cells then have new ids and are recomputed on
resume, see `longldp.experiments.runner`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["CELL", "DATA", "PERMUTATION", "generator", "stream"]

#: Namespace of the streams that generate synthetic datasets.
DATA = 0
#: Namespace of the streams that interpolate a dataset over τ timestamps.
PERMUTATION = 1
#: Namespace of the streams of one grid cell (the protocol's randomness).
CELL = 2


def stream(entropy: int, spawn_key: Sequence[int]) -> np.random.SeedSequence:
    """The `SeedSequence` of the study seeded with ``entropy`` at ``spawn_key``.

    Parameters
    ----------
    entropy : int
        The study's base seed (a non-negative integer).
    spawn_key : sequence of int
        The stream's position: namespace first, then grid indices (all >= 0).

    Returns
    -------
    numpy.random.SeedSequence
        Equal to the child reached from ``SeedSequence(entropy)`` by nested ``spawn`` calls.

    Examples
    --------
    >>> root = np.random.SeedSequence(7)
    >>> child = root.spawn(3)[2].spawn(5)[4]
    >>> stream(7, (2, 4)).generate_state(2).tolist() == child.generate_state(2).tolist()
    True
    """
    key = tuple(int(i) for i in spawn_key)
    if any(i < 0 for i in key):
        raise ValueError(f"stream: 'spawn_key' must hold integers >= 0; got {spawn_key!r}.")
    return np.random.SeedSequence(int(entropy), spawn_key=key)


def generator(entropy: int, spawn_key: Sequence[int]) -> np.random.Generator:
    """A `numpy.random.Generator` on `stream` ``(entropy, spawn_key)``."""
    return np.random.default_rng(stream(entropy, spawn_key))
