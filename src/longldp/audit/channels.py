"""Exact privacy loss from the enumerated channel (docs/audit.md §1, docs/math.md §13.1).

The audit dispatches on the protocol's report kind (``proto.report_kind``, a
:class:`~longldp.protocols.ReportKind`); a kind it has no channel for is refused with
``ValueError``, never approximated by another kind's channel. A one-shot protocol of kind
``enumerated`` enumerates its own channel from its sampler's probabilities
(``proto.report_channel()``), which the audit checks against its closed-form claim.

The channels are built from the per-round mechanisms (matrix products of the round channels,
enumeration of every output), never from the library's P1/P0 closed forms, so that a wrong
closed form in :mod:`longldp.privacy` cannot hide behind itself. Given an enumerated channel,
:func:`longldp.privacy.channel_epsilon` gives its ε.

:func:`exact_lifetime_epsilon` extends this to τ reports of one memo: the reports are i.i.d.
given the memo, so the sufficient statistic is the per-symbol (or per-bit) count of the τ
reports, and the worst ratio is found by maximizing over counts (docs/math.md §13.2).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import xlogy

from longldp import _validate as check
from longldp.privacy import channel_epsilon
from longldp.protocols import PROTOCOL_CLASSES, DBitFlipPM, FrequencyOracle, ReportKind
from longldp.protocols.rappor import RapporChain

#: Largest number of outputs an enumerated channel may have (2^16 unary-encoded vectors).
MAX_OUTPUTS = 1 << 16
#: The unary-encoding classes of the registry (report kind ``bits``): independent bits.
UNARY = tuple(cls for cls in PROTOCOL_CLASSES if cls.report_kind is ReportKind.BITS)
#: Report kinds whose report is a vector of bits (counted per bit by the black-box game).
BIT_KINDS = frozenset({ReportKind.BITS, ReportKind.COHORT_BITS, ReportKind.SAMPLED_BITS})
#: Report kinds of a hash function and a bucket: the worst case is taken over the family.
HASH_KINDS = frozenset({ReportKind.HASHED, ReportKind.HADAMARD})
#: Hash functions drawn from a hashing protocol's own family to take the worst ε over.
HASH_DRAWS = 40


@dataclass(frozen=True)
class ExactEpsilons:
    """ε of one report (both rounds) and of the memoized round 1, from enumerated channels."""

    single: float
    first_round: float


def grr_matrix(keep: float, m: int) -> NDArray[np.float64]:
    """Round channel of GRR over m symbols: keep with ``keep``, else a uniform other symbol."""
    if m == 1:
        return np.ones((1, 1))
    off = (1 - keep) / (m - 1)
    return np.full((m, m), off) + np.eye(m) * (keep - off)


def bit_matrix(p: float, q: float) -> NDArray[np.float64]:
    """Per-bit channel: rows = input bit (0, 1), columns = output bit (0, 1)."""
    return np.array([[1 - q, q], [1 - p, p]])


def ue_channel(
    k: int, per_bit: NDArray[np.float64], patterns: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Channel over all 2^k output vectors of k independent bits.

    Rows are the encoded inputs: ``patterns`` (P, k) boolean, default the k one-hot vectors.
    """
    outputs = np.array(list(itertools.product((0, 1), repeat=k)))
    rows = np.eye(k, dtype=int) if patterns is None else np.asarray(patterns, dtype=int)
    return np.stack([np.prod(per_bit[row[None, :], outputs], axis=1) for row in rows])


def hashed_epsilon(
    proto: FrequencyOracle, bucket_channel: NDArray[np.float64], rng: np.random.Generator
) -> float:
    """Worst ε over hash functions drawn from the protocol's own family.

    Given H the report (H, y) has Pr[y | v] = bucket_channel[H(v), y]; H is public and drawn
    independently of v, so the worst case over H is the privacy loss.
    """
    worst = 0.0
    for _ in range(HASH_DRAWS):
        state = proto._new_state(1, rng)
        table = np.array([proto._memo_key(np.array([v]), state)[0] for v in range(proto.k)])
        worst = max(worst, channel_epsilon(bucket_channel[table]))
    return worst


def dbitflip_channel(proto: DBitFlipPM) -> NDArray[np.float64]:
    """Every sampled d-subset S and every d-bit answer: Pr[(S, y) | v]."""
    b, d, p = proto.n_buckets, proto.d, proto.p1
    bucket = (np.arange(proto.k) * b) // proto.k
    subsets = list(itertools.combinations(range(b), d))
    cols = []
    for s in subsets:
        truth = (np.array(s)[None, :] == bucket[:, None]).astype(int)
        for y in itertools.product((0, 1), repeat=d):
            prob = np.where(np.array(y)[None, :] == truth, p, 1 - p).prod(axis=1)
            cols.append(prob / len(subsets))
    return np.array(cols).T


def report_kind(proto: FrequencyOracle) -> ReportKind:
    """``proto``'s report kind; ``ValueError`` for a kind the audit has no channel for."""
    kind = getattr(type(proto), "report_kind", None)
    if not isinstance(kind, ReportKind) or kind not in _SPACE:
        known = ", ".join(str(k) for k in _SPACE)
        raise ValueError(
            f"{proto.name}: the audit has no channel for report kind {kind!r}; it knows {known}."
        )
    return kind


_SPACE = {
    ReportKind.SYMBOL: lambda p: p.k,
    ReportKind.BITS: lambda p: 2**p.k,
    ReportKind.HASHED: lambda p: None if p.hash_pool is None else p.hash_pool * p.g,
    ReportKind.HADAMARD: lambda p: p.m * 2,
    ReportKind.SAMPLED_BITS: lambda p: math.comb(p.n_buckets, p.d) * 2**p.d,
    ReportKind.COHORT_BITS: lambda p: p.m * 2**p.k,
    ReportKind.ENUMERATED: lambda p: p.report_space_size(),
}


def output_space_size(proto: FrequencyOracle) -> int | None:
    """Number of distinct reports a protocol can emit, or None when unbounded (per-user hash)."""
    return _SPACE[report_kind(proto)](proto)


def exact_epsilons(proto: FrequencyOracle, rng: np.random.Generator | None = None) -> ExactEpsilons:
    """(single-report ε, first-round ε) of ``proto`` from its enumerated channel.

    Refuses domains whose channel has more than :data:`MAX_OUTPUTS` outputs.
    ``rng`` draws the hash functions of the hashing protocols (default: seed 0).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    kind = report_kind(proto)
    size = output_space_size(proto)
    if size is not None and size > MAX_OUTPUTS and kind not in HASH_KINDS:
        raise ValueError(
            f"{proto.name}: the exact audit enumerates the channel; k = {proto.k} gives {size} "
            f"outputs, more than the {MAX_OUTPUTS} allowed; use a smaller k."
        )
    return _EXACT[kind](proto, rng)


def _sampled_bits_exact(proto: DBitFlipPM, rng: np.random.Generator) -> ExactEpsilons:
    eps = channel_epsilon(dbitflip_channel(proto))
    return ExactEpsilons(eps, eps)


def _hashed_exact(proto: Any, rng: np.random.Generator) -> ExactEpsilons:
    r1 = grr_matrix(proto.p1, proto.g)
    both = r1 @ grr_matrix(proto.p2, proto.g) if proto.longitudinal else r1
    return ExactEpsilons(hashed_epsilon(proto, both, rng), hashed_epsilon(proto, r1, rng))


def _bits_exact(proto: FrequencyOracle, rng: np.random.Generator) -> ExactEpsilons:
    b1 = bit_matrix(proto.p1, proto.q1)
    both = b1 @ bit_matrix(proto.p2, proto.q2)
    return ExactEpsilons(
        channel_epsilon(ue_channel(proto.k, both)), channel_epsilon(ue_channel(proto.k, b1))
    )


def _enumerated_exact(proto: FrequencyOracle, rng: np.random.Generator) -> ExactEpsilons:
    """The protocol's own enumeration of its one-report channel (a one-shot oracle: its
    round 1 is the whole channel)."""
    if proto.longitudinal:
        raise ValueError(f"{proto.name}: the audit enumerates one-shot reports only.")
    eps = channel_epsilon(proto.report_channel())
    return ExactEpsilons(eps, eps)


def _symbol_exact(proto: FrequencyOracle, rng: np.random.Generator) -> ExactEpsilons:
    r1 = grr_matrix(proto.p1, proto.k)
    return ExactEpsilons(channel_epsilon(r1 @ grr_matrix(proto.p2, proto.k)), channel_epsilon(r1))


def _cohort_bits_exact(proto: RapporChain, rng: np.random.Generator) -> ExactEpsilons:
    """Every encoding a client can hold (``proto.possible_encodings()``) through the PRR and
    IRR bit channels (a one-time variant's round 1 is already the composed channel)."""
    patterns = proto.possible_encodings()
    if patterns.shape[0] * 2**proto.k > 1 << 24:
        raise ValueError(
            f"{proto.name}: the exact audit enumerates {patterns.shape[0]} encodings × "
            f"2^{proto.k} outputs; use a smaller k or h."
        )
    b1 = bit_matrix(proto.p1, proto.q1)
    both = b1 @ bit_matrix(proto.p2, proto.q2)
    single = channel_epsilon(ue_channel(proto.k, both, patterns))
    return ExactEpsilons(single, channel_epsilon(ue_channel(proto.k, b1, patterns)))


_EXACT: dict[ReportKind, Callable[[Any, np.random.Generator], ExactEpsilons]] = {
    ReportKind.SYMBOL: _symbol_exact,
    ReportKind.BITS: _bits_exact,
    ReportKind.HASHED: _hashed_exact,
    ReportKind.HADAMARD: _hashed_exact,
    ReportKind.SAMPLED_BITS: _sampled_bits_exact,
    ReportKind.COHORT_BITS: _cohort_bits_exact,
    ReportKind.ENUMERATED: _enumerated_exact,
}


def memoized(proto: FrequencyOracle) -> bool:
    """Does the client keep round 1 across reports? (Longitudinal protocols do; the one-shot
    oracles and one-time RAPPOR do not.)"""
    return proto.longitudinal


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
    kind = report_kind(proto)
    if not memoized(proto) or kind is ReportKind.SAMPLED_BITS:
        single = _cached_single(proto)
        return single if kind is ReportKind.SAMPLED_BITS else tau * single
    if kind is ReportKind.COHORT_BITS:
        # Two encodings differ in at most (x, y) bits, set in one and not the other: each such
        # bit contributes the worst log-likelihood ratio of its count, r or −r.
        r = unary_count_llr(np.arange(tau + 1), tau, proto.p1, proto.q1, proto.p2, proto.q2)
        x, y = proto.differing_bits  # type: ignore[attr-defined]
        up, down = float(r.max()), float((-r).max())
        return max(x * up + y * down, y * up + x * down)
    if kind is ReportKind.BITS:
        return _unary_chain_lifetime(proto.p1, proto.q1, proto.p2, proto.q2, tau)
    m = proto.g if kind in HASH_KINDS else proto.k  # type: ignore[attr-defined]
    return _categorical_chain_lifetime(proto.p1, proto.q1, proto.p2, proto.q2, m, tau)


@functools.lru_cache(maxsize=256)
def _cached_single(proto: FrequencyOracle) -> float:
    return exact_epsilons(proto).single


def _unary_chain_lifetime(p1: float, q1: float, p2: float, q2: float, tau: int) -> float:
    """Two inputs differ in two bits; per bit the count c of ones over τ reports has the
    log-likelihood ratio r(c) = ℓ1(c) − ℓ0(c); the worst output maximizes r at one bit and −r
    at the other: max r + max(−r)."""
    r = unary_count_llr(np.arange(tau + 1), tau, p1, q1, p2, q2)
    return float(r.max() + (-r).max())


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
