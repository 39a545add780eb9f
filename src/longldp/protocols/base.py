"""The frequency oracle: a mechanism, the support estimator and a report codec in one class.

A protocol class combines three roles (docs/design.md §2), each a public API written once:

- the **mechanism** (:class:`~longldp.protocols.mechanism.Mechanism`): parameters and their
  validation, the traits, the exact claims (``single_report_epsilon``, ``first_round_epsilon``,
  ``accounting``), the samplers (per-user state, memo rounds, population path, count level)
  and one client;
- the **estimator** (:class:`~longldp.protocols.estimator.Estimator`): support → estimate,
  variance, standard error, post-processing hooks, the server's aggregator;
- the **codec** (:class:`~longldp.protocols.codec.ReportCodec`): spec, fingerprint, header and
  report bodies.

Traits live on the mechanism role, ``linkage`` among them (what persists per device and rides
in its reports, :class:`longldp.privacy.linkage.Linkage`, from which the shuffle accounting picks
its valid routes, docs/math.md §17.4).

:class:`FrequencyOracle` is the three for a frequency oracle (estimand ``frequencies``, the
support estimator of docs/math.md §1); every registered protocol of this package subclasses it.
A family whose estimate is something else (a mean, queried items) combines the mechanism and
the codec with its own estimator. This module also holds the helpers the families share.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp.protocols._bitcount import BYTE_BITS, packed_column_sums  # noqa: F401  (re-exported)
from longldp.protocols._estimate import Estimate  # noqa: F401  (re-exported)
from longldp.protocols._rng import RandomSource
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import (  # noqa: F401  (re-exported)
    Aggregator,
    Estimator,
    SupportEstimator,
    as_report_array,
    frequencies,
)
from longldp.protocols.mechanism import (  # noqa: F401  (re-exported)
    CHUNK_CELLS,
    Mechanism,
    PopulationStep,
    _user_index,
    row_slices,
)
from longldp.protocols.report_kinds import ReportKind  # noqa: F401  (re-exported)


class FrequencyOracle(Mechanism, SupportEstimator, ReportCodec):
    """Base of every frequency oracle: the three roles (module docstring).

    Traits (class variables) every registered protocol declares (docs/design.md §2.2):

    - ``name``: its registry name; ``aliases``: other accepted names;
    - ``longitudinal``: True for memoizing chains (``rounds`` follows from it);
    - ``wire_id``: its one-byte protocol id on the wire, fixed forever (docs/wire-format.md);
    - ``report_kind``: what a report is (a :class:`ReportKind` object);
    - ``budget_params``: the constructor parameters that set its privacy: ``("eps",)`` for a
      one-shot oracle, ``("eps_perm", "eps_1")`` for a chain, or its own (dBitFlipPM:
      ``("eps_perm",)``; RAPPOR: ``("f", "p", "q")``);
    - ``test_params``: a few constructor dicts (``k`` supplied by the test unless given) with
      which the common tests enroll it (as scipy.stats's ``_distr_params``);
    - ``linkage``: what persists per device and rides in its reports
      (:class:`longldp.privacy.linkage.Linkage`), from which the shuffle accounting picks its
      valid routes (docs/math.md §17.4); each registered class declares its own.
    """

    k: int
    eps_perm: float
    eps_1: float


class OneShot:
    """Mixin of the one-shot oracles: their single ε is spent by every report, no memo."""

    longitudinal: ClassVar[bool] = False
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    eps: float

    @property
    def eps_1(self) -> float:
        """Budget of one report: ε."""
        return self.eps

    @property
    def eps_perm(self) -> float:
        """One-shot oracles memoize nothing; each report spends ε."""
        return self.eps


# ---------------------------------------------------------------------- helpers


def set_derived(obj: object, **values: float) -> None:
    """Set derived fields of a frozen dataclass from its ``__post_init__``."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


def grr_round(x: NDArray[np.int64], m: int, keep: float, rng: RandomSource) -> NDArray[np.int64]:
    """Keep x with probability ``keep``, else a uniform *other* symbol of [0, m) ([WAN17] §4.1)."""
    if x.size == 0:
        return x.copy()
    shift = rng.integers(1, m, size=x.shape) if m > 1 else np.zeros(x.shape, dtype=np.int64)
    return np.where(rng.random(x.shape) < keep, x, (x + shift) % m)


def min_bytes(max_value: int) -> int:
    """Bytes needed for an unsigned integer up to ``max_value``."""
    return max(1, math.ceil(max(1, max_value).bit_length() / 8))


def uint_to_bytes(x: NDArray, width: int) -> NDArray[np.uint8]:
    """Big-endian fixed-width bytes of non-negative integers, shape (n, width)."""
    return x.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width :]


def bytes_to_uint(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Inverse of :func:`uint_to_bytes`."""
    padded = np.zeros((rows.shape[0], 8), dtype=np.uint8)
    padded[:, 8 - rows.shape[1] :] = rows
    return padded.view(">u8").ravel().astype(np.int64)
