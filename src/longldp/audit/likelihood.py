"""The log-likelihood of a client's reports under each value: the Bayes-optimal attacker's view.

``log_likelihoods(proto, reports)`` takes the τ report batches of n clients (what ``perturb``
returns at each timestamp) and returns the (n, k) matrix ln Pr[reports of client i | value v]
up to a constant per client, from the protocol's public parameters (p1, q1, p2, q2, P1, P0)
and its report kind (the symbols or bits a client's reports reduce to, and what each value
points at: the hash function of the wire format, RAPPOR's encoder, dBitFlipPM's buckets). Adding
ln π(v) and taking the argmax is the maximum-a-posteriori guess of the value, the attack of
:mod:`longldp.audit.asr` (simulated ASR) and :mod:`longldp.audit.reidentify`.

Two client models (docs/math.md §13.2, §13.5):

- ``memoized=True``: one round-1 memo per memo key, kept for all τ reports, which are i.i.d.
  given it. The likelihood depends on the reports only through their counts: per symbol for
  GRR-type chains (L-GRR over k symbols, LOLOHA and L-SH over the g buckets of the user's hash
  function, (13.2)), per bit for unary encodings and RAPPOR ((13.3), with the Bloom filter of
  each value in the client's cohort), and the repeated report of dBitFlipPM (no round 2);
- ``memoized=False``: every report is drawn afresh from the composed channel (one-shot
  oracles; or a stateless client, whose per-user state may change at each report), so the
  log-likelihoods of the reports add.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.audit.channels import no_round_two, report_kind, unary_count_llr
from longldp.protocols import FrequencyOracle


def domain_size(proto: FrequencyOracle) -> int:
    """Number of values the attacker chooses among: the domain's size (boolean RAPPOR: 2), or
    k for a domain that cannot be listed (Bloom RAPPOR: the strings of codes 0..k−1)."""
    return proto.domain.audit_size or proto.k


def audited_inputs(proto: FrequencyOracle) -> Any:
    """The inputs of the values :func:`domain_size` counts (``proto.as_inputs`` of 0..V−1)."""
    return proto.as_inputs(np.arange(domain_size(proto)))


def log_likelihoods(
    proto: FrequencyOracle,
    reports: Sequence[NDArray],
    memoized: bool,
    codes: Sequence[int] | NDArray[np.int64] | None = None,
) -> NDArray[np.float64]:
    """(n, V): ln Pr[the τ reports of client i | value v], up to a constant per client.

    ``reports``: τ batches of n report records of the same n clients, in time order. The
    report kind gives the sufficient statistic (symbols or bits per report) and what each value
    points at (:meth:`~longldp.protocols.ReportKind.targets`); the chain gives the law.
    ``codes``: only these of the :func:`domain_size` values, in this order (a column each);
    default all of them.
    """
    tau = len(reports)
    if tau == 0:
        raise ValueError(f"{proto.name}: 'reports' must hold at least one batch.")
    kind = report_kind(proto)  # refuses a kind the audit has no channel for
    memoized = memoized and proto.longitudinal  # one-time RAPPOR keeps no memo
    if codes is None:
        values = audited_inputs(proto)
        rows: Any = slice(None)
    else:
        rows = np.asarray(codes, dtype=np.int64)
        if rows.ndim != 1 or np.any(rows < 0) or np.any(rows >= domain_size(proto)):
            raise ValueError(
                f"{proto.name}: 'codes' must be a list of values in [0, {domain_size(proto)}); "
                f"got {codes!r}."
            )
        values = proto.as_inputs(rows)
    own = kind.log_likelihoods(proto, reports, values, memoized)
    if own is not None:  # a kind that computes its law itself (numeric reports, math §20)
        return own
    if not kind.discrete:
        raise ValueError(f"{proto.name}: no likelihood for continuous report kind {kind.name!r}.")
    explicit = kind.symbol_channel(proto)
    if explicit is not None:  # τ fresh reports: Σ_t ln Pr[y_t | v] of its channel
        log_ch = np.log(explicit)[rows]
        return sum(log_ch[:, kind.observe(proto, rep)].T for rep in reports)
    if kind.statistic == "bits":
        return _bits(proto, kind, reports, values, memoized)
    return _symbols(proto, kind, reports, values, memoized)


def _chain(proto: FrequencyOracle, memoized: bool) -> tuple[float, float, float, float]:
    """(a1, b1, a2, b2): round-1 and round-2 keep/other probabilities of the client model; a
    fresh draw per report is the chain (1, 0, P1, P0) over the composed channel."""
    if memoized:
        return proto.p1, proto.q1, proto.p2, proto.q2
    return 1.0, 0.0, proto.P1, proto.P0


def grr_chain_ll(counts: NDArray, at_value: NDArray, chain: tuple) -> NDArray[np.float64]:
    """ln[b1·S + (a1 − b1)·ρ^{N_v}] (13.2) with S = Σ_j ρ^{N_j}, ρ = a2/b2; when b2 = 0 every
    report repeats the memo and ln Pr = ln a1 or ln b1 (the memo is the value or not)."""
    a1, b1, a2, b2 = chain
    if b2 == 0.0:
        first = at_value == counts.max(axis=1, keepdims=True)  # the repeated symbol is H(v)
        with np.errstate(divide="ignore"):
            return np.where(first, math.log(a1), math.log(b1) if b1 > 0 else -np.inf)
    lr = math.log(a2 / b2)
    if b1 == 0.0:
        return at_value * lr
    log_s = np.logaddexp.reduce(counts * lr, axis=1, keepdims=True)
    return np.logaddexp(math.log(b1) + log_s, math.log(a1 - b1) + at_value * lr)


def _symbols(
    proto: FrequencyOracle, kind: Any, reports: Sequence[NDArray], values: Any, memoized: bool
) -> NDArray:
    """GRR-type symbols over the kind's ``width`` (L-GRR over k, LOLOHA and L-SH over the g
    buckets of the user's function): per report the symbol supports v when it is v's target."""
    m = kind.width(proto)
    n = np.asarray(reports[0]).shape[0]
    if not memoized:
        # Per report: the target symbol with P1, any other symbol (1 − P1)/(m − 1).
        gain = math.log(proto.P1 * (m - 1) / (1 - proto.P1))
        out = np.zeros((n, len(values)))
        for rep in reports:
            hit = kind.targets(proto, rep, values) == kind.observe(proto, rep)[:, None]
            out += hit * gain
        return out
    at = kind.targets(proto, reports[0], values)  # (n, V): fixed by the per-user state
    if any(np.any(kind.targets(proto, rep, values) != at) for rep in reports[1:]):
        raise ValueError(
            f"{proto.name}: a memoized client's reports must share its per-user state."
        )
    counts = _counts([kind.observe(proto, rep) for rep in reports], n, m)
    at_value = np.take_along_axis(counts, np.asarray(at), axis=1)
    return grr_chain_ll(counts, at_value, _chain(proto, True))


def _counts(symbols: Sequence[NDArray], n: int, m: int) -> NDArray[np.float64]:
    """(n, m) number of times each client reported each symbol (one bincount)."""
    rows = np.arange(n, dtype=np.int64) * m
    flat = np.concatenate([rows + np.asarray(s, dtype=np.int64) for s in symbols])
    return np.bincount(flat, minlength=n * m).reshape(n, m).astype(np.float64)


def spread(masks: NDArray[np.bool_], r: NDArray[np.float64]) -> NDArray[np.float64]:
    """Σ_b masks[i, v, b]·r[i, b]: per client the sum of the bit scores each value sets
    (masks of shape (1, V, width) are shared by every client)."""
    if masks.shape[0] == 1:
        m = masks[0]
        if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(m.shape[0], dtype=bool)):
            return r  # one-hot: value v is bit v
        return r @ m.T.astype(np.float64)
    return np.einsum("nvb,nb->nv", masks, r)


def _bits(
    proto: FrequencyOracle, kind: Any, reports: Sequence[NDArray], values: Any, memoized: bool
) -> NDArray:
    """Independent bits (UE, RAPPOR, dBitFlipPM's sampled buckets): per-bit counts, each with
    its log-likelihood ratio, summed over the bits a value sets (13.3)."""
    if memoized and no_round_two(proto):
        reports = reports[:1]  # no round 2: a memo's reports are identical
    tau = len(reports)
    a1, b1, a2, b2 = _chain(proto, memoized)
    if memoized:
        counts = sum(kind.observe(proto, rep).astype(np.int64) for rep in reports)
        r = unary_count_llr(np.arange(tau + 1), tau, a1, b1, a2, b2)[counts]
        return spread(kind.targets(proto, reports[0], values), r)
    n = np.asarray(reports[0]).shape[0]
    out = np.zeros((n, len(values)))
    on, off = math.log(a2 / b2), math.log((1 - a2) / (1 - b2))
    for rep in reports:
        r = np.where(kind.observe(proto, rep) == 1, on, off)
        out += spread(kind.targets(proto, rep, values), r)
    return out
