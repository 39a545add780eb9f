"""Positive controls: implementations known to break their claim, which the audit must flag.

- :func:`misencoded_unary`: unary encoding whose true bit is 1 with probability p + (1 − p)·q
  instead of p (the one-hot vector OR-ed with the noise; a bug once shipped by a peer library).
  Its parameters, and so its claimed ε, are the correct protocol's; only its client is wrong.
- The stateless "longitudinal" client (:class:`longldp.audit.game.StatelessClients`): the memo
  is redrawn at every report, so τ reports cost τ·ε1, not min(τ·ε1, ε∞).
- L-GRR's published calibration ([ARC22] eq. 9; docs/math.md §3.2) audited against the ε1 it
  was asked for: for k > 2 one report does not reach ε1, so the claim is loose, which the
  exact channel and the black-box upper bound (:func:`longldp.audit.histogram.channel_bounds`)
  both show.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
from numpy.typing import NDArray

from longldp.protocols import FrequencyOracle
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import row_slices


@cache
def _misencoded_class(cls: type) -> type:
    def _round1(self: FrequencyOracle, keys: NDArray[np.int64], state: dict, rng: RandomSource):
        out = np.empty((keys.size, (self.k + 7) // 8), dtype=np.uint8)
        for rows in row_slices(keys.size, self.k):
            v = keys[rows]
            bits = rng.random((v.size, self.k)) < self.q1  # noise on every bit, the true one too
            bits[np.arange(v.size), v] |= rng.random(v.size) < self.p1
            out[rows] = np.packbits(bits, axis=1)
        return out

    return type(
        f"Misencoded{cls.__name__}",
        (cls,),
        {"_round1": _round1, "name": f"{cls.name} (misencoded)", "__doc__": _round1.__doc__},
    )


def misencoded_unary(proto: FrequencyOracle) -> FrequencyOracle:
    """The same unary-encoding protocol with the buggy client (true bit 1 w.p. p + (1 − p)q)."""
    if type(proto).report_kind != "bits":
        raise ValueError(
            "misencoded_unary: 'proto' must be a unary-encoding protocol (report kind "
            f"'bits'); got {proto.name} ({type(proto).report_kind})."
        )
    params = {f.name: getattr(proto, f.name) for f in dataclasses.fields(proto) if f.init}
    return _misencoded_class(type(proto))(**params)


def misencoded_true_bit(proto: FrequencyOracle) -> float:
    """Pr[true bit = 1] of the misencoded client's round 1: p1 + (1 − p1)·q1."""
    return proto.p1 + (1 - proto.p1) * proto.q1
