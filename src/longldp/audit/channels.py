"""Exact privacy loss from the enumerated channel (docs/audit.md §1, docs/math.md §13.1).

The audit asks the protocol's report kind (``proto.report_kind``, a
:class:`~longldp.protocols.ReportKind` object) for everything it needs: the output space, the
exact channels (:meth:`~longldp.protocols.ReportKind.channel`) and the attacker's sufficient
statistic. A report kind that is not a :class:`~longldp.protocols.ReportKind` is refused with
``ValueError``, never approximated by another kind's channel; a continuous report has no exact
channel (the binned black-box game audits it).

The channels are built from the per-round mechanisms (matrix products of the round channels,
enumeration of every output, :mod:`longldp.privacy.channels`), never from the library's P1/P0
closed forms, so that a wrong closed form in :mod:`longldp.privacy` cannot hide behind itself.
Given an enumerated channel, :func:`longldp.privacy.channel_epsilon` gives its ε.

:func:`exact_lifetime_epsilon` extends this to τ reports of one memo: the reports are i.i.d.
given the memo, so the sufficient statistic is the per-symbol (or per-bit) count of the τ
reports, and the worst ratio is found by maximizing over counts (docs/math.md §13.2).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import xlogy

from longldp import _validate as check
from longldp.privacy import channel_epsilon
from longldp.privacy.channels import bit_matrix, grr_matrix, unary_channel
from longldp.protocols import FrequencyOracle, ReportKind
from longldp.protocols.report_kinds import MAX_OUTPUTS

__all__ = [
    "MAX_OUTPUTS",
    "ExactEpsilons",
    "bit_matrix",
    "dbitflip_channel",
    "exact_epsilons",
    "exact_lifetime_epsilon",
    "grr_matrix",
    "memoized",
    "no_round_two",
    "output_space_size",
    "report_kind",
    "ue_channel",
    "unary_count_llr",
]

#: The channel over the 2^k outputs of k independent bits (``privacy.channels.unary_channel``).
ue_channel = unary_channel


@dataclass(frozen=True)
class ExactEpsilons:
    """ε of one report (both rounds) and of the memoized round 1, from enumerated channels."""

    single: float
    first_round: float


def dbitflip_channel(proto: FrequencyOracle) -> NDArray[np.float64]:
    """Every sampled d-subset S and every d-bit answer: Pr[(S, y) | v] (the mechanism's own
    enumeration, ``proto.report_channel()``)."""
    return proto.report_channel()  # type: ignore[attr-defined]


def report_kind(proto: FrequencyOracle) -> ReportKind:
    """``proto``'s report kind; ``ValueError`` for one the audit has no channel for."""
    kind = getattr(type(proto), "report_kind", None)
    if not isinstance(kind, ReportKind):
        raise ValueError(
            f"{proto.name}: the audit has no channel for report kind {str(kind)!r}; a report "
            "kind is a longldp.protocols.ReportKind object."
        )
    return kind


def output_space_size(proto: FrequencyOracle) -> int | None:
    """Number of distinct reports a protocol can emit, or None when unbounded (per-user hash)."""
    return report_kind(proto).output_space_size(proto)


def exact_epsilons(proto: FrequencyOracle, rng: np.random.Generator | None = None) -> ExactEpsilons:
    """(single-report ε, first-round ε) of ``proto`` from its enumerated channel.

    Refuses domains whose channel has more than :data:`MAX_OUTPUTS` outputs and continuous
    reports. ``rng`` draws the hash functions of a per-user family (default: seed 0); the worst
    ε over the functions is the loss.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    exact = report_kind(proto).channel(proto, rng)
    return ExactEpsilons(
        max(channel_epsilon(ch) for ch in exact.single),
        max(channel_epsilon(ch) for ch in exact.first_round),
    )


def memoized(proto: FrequencyOracle) -> bool:
    """Does the client keep round 1 across reports? (Longitudinal protocols do; the one-shot
    oracles and one-time RAPPOR do not.)"""
    return proto.longitudinal


def no_round_two(proto: FrequencyOracle) -> bool:
    """A memoizing client whose reports repeat the memo (p2 = 1, q2 = 0: dBitFlipPM): τ reports
    reveal exactly what one does."""
    return memoized(proto) and proto.repeats_memo


# ------------------------------------------------------------------------------ lifetime


def exact_lifetime_epsilon(proto: FrequencyOracle, tau: int, alternating: bool = False) -> float:
    """Exact ε of τ reports of one client (docs/math.md §13.2).

    ``alternating=False``: the client holds one value for all τ reports; the two worlds are two
    values. ``alternating=True``: the client alternates a, b, a, b, … against b, a, b, a, …;
    the odd and the even reports come from two independent memos, so the loss is the sum of
    two one-value losses over ⌈τ/2⌉ and ⌊τ/2⌋ reports.

    One-shot oracles randomize every report afresh: τ·ε. dBitFlipPM has no second round, so
    every report repeats the memo. The chains are reduced to their sufficient statistic, the
    counts of the τ reports (per symbol for GRR-type chains, per bit for unary encodings).
    """
    tau = check.integer(proto.name, "tau", tau, minimum=1)
    if alternating and tau >= 2:
        half = (tau + 1) // 2
        return _one_value_lifetime(proto, half) + _one_value_lifetime(proto, tau - half)
    return _one_value_lifetime(proto, tau)


def _one_value_lifetime(proto: FrequencyOracle, tau: int) -> float:
    """The kind's sufficient statistic decides: τ fresh reports compose (τ·ε); reports that
    repeat the memo reveal one report's ε; bits count per bit (the two inputs differ in
    ``differing_bits``, each contributing the worst log-likelihood ratio of its count, r or
    −r); symbols of a GRR chain over the kind's ``width`` symbols (docs/math.md §13.2)."""
    kind = report_kind(proto)
    if not memoized(proto) or no_round_two(proto):
        single = _cached_single(proto)
        return single if memoized(proto) else tau * single
    if kind.statistic == "bits":
        r = unary_count_llr(np.arange(tau + 1), tau, proto.p1, proto.q1, proto.p2, proto.q2)
        x, y = kind.differing_bits(proto)
        up, down = float(r.max()), float((-r).max())
        return max(x * up + y * down, y * up + x * down)
    if kind.symbol_channel(proto) is not None:
        raise ValueError(f"{proto.name}: the audit enumerates one-shot enumerated reports only.")
    m = kind.width(proto)
    return _categorical_chain_lifetime(proto.p1, proto.q1, proto.p2, proto.q2, m, tau)


@functools.lru_cache(maxsize=256)
def _cached_single(proto: FrequencyOracle) -> float:
    return exact_epsilons(proto).single


def unary_count_llr(
    c: NDArray, tau: int | NDArray, p1: float, q1: float, p2: float, q2: float
) -> NDArray[np.float64]:
    """ln Pr[c ones in τ reports | true bit 1] − ln Pr[… | true bit 0] for a memoized bit."""
    c = np.asarray(c, dtype=np.float64)
    a1 = xlogy(c, p2) + xlogy(tau - c, 1 - p2)
    a0 = xlogy(c, q2) + xlogy(tau - c, 1 - q2)
    return _mix(p1, a1, a0) - _mix(q1, a1, a0)


def _mix(w: float, a1: NDArray, a0: NDArray) -> NDArray[np.float64]:
    """ln(w·e^{a1} + (1 − w)·e^{a0})."""
    return np.logaddexp(math.log(w) + a1, math.log(1 - w) + a0)


def _categorical_chain_lifetime(
    p1: float, q1: float, p2: float, q2: float, m: int, tau: int
) -> float:
    """GRR chain over m symbols. With A_j = ρ^{N_j} (ρ = p2/q2, N_j the count of symbol j) the
    ratio is (p1·A_a + q1·A_b + q1·T)/(p1·A_b + q1·A_a + q1·T), T the sum over the other
    symbols. For fixed (N_a, N_b) it decreases in T when A_a > A_b, and T is smallest with the
    remaining counts spread evenly (ρ^N is convex); enumerate (N_a, N_b)."""
    lr = math.log(p2 / q2)
    na, nb = np.meshgrid(np.arange(tau + 1), np.arange(tau + 1), indexing="ij")
    ok = na + nb <= tau if m > 2 else na + nb == tau
    na, nb = na[ok].astype(np.float64), nb[ok].astype(np.float64)
    la, lb = na * lr, nb * lr
    if m > 2:
        rest = tau - na - nb
        base, extra = np.floor_divide(rest, m - 2), np.mod(rest, m - 2)
        with np.errstate(divide="ignore"):
            lt = np.logaddexp(np.log(m - 2 - extra) + base * lr, np.log(extra) + (base + 1) * lr)
    else:
        lt = np.full_like(la, -np.inf)
    lp, lq = math.log(p1), math.log(q1)
    num = np.logaddexp(np.logaddexp(lp + la, lq + lb), lq + lt)
    den = np.logaddexp(np.logaddexp(lp + lb, lq + la), lq + lt)
    return float(np.max(num - den))
