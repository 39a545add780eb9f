"""Shared by the stream tests: a CHANGES-TREE node report's law, enumerated from its bits."""

from __future__ import annotations

import itertools

import numpy as np


def node_encoding(k: int, before: int, after: int) -> tuple[int, ...]:
    """The 2k-bit encoding of a node's difference: plus part e_after, minus part e_before."""
    bits = [0] * (2 * k)
    if before != after:
        bits[after], bits[k + before] = 1, 1
    return tuple(bits)


def node_row(enc: tuple[int, ...], p: float, q: float) -> np.ndarray:
    """Pr[y | enc] over every output y of {0, 1}^{2k}: a 1 stays 1 with p, a 0 turns 1 with q."""
    row = []
    for y in itertools.product((0, 1), repeat=len(enc)):
        pr = 1.0
        for e, b in zip(enc, y, strict=True):
            one = p if e else q
            pr *= one if b else 1 - one
        row.append(pr)
    return np.array(row)
