"""The log-likelihood of a client's reports under each value: the Bayes-optimal attacker's view.

``log_likelihoods(proto, reports)`` takes the τ report batches of n clients (what ``perturb``
returns at each timestamp) and returns the (n, k) matrix ln Pr[reports of client i | value v]
up to a constant per client, from the protocol's public parameters (p1, q1, p2, q2, P1, P0,
g, the hash functions of the wire format, RAPPOR's encoder, dBitFlipPM's buckets). Adding
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

from longldp import privacy
from longldp.audit.channels import UNARY, report_kind, unary_count_llr
from longldp.protocols import LSH, RAPPOR, SH, DBitFlipPM, FrequencyOracle, ReportKind
from longldp.protocols.hadamard import hadamard_parity
from longldp.protocols.lh import mix_hash
from longldp.protocols.rappor import RapporBoolean, RapporChain


def is_hashing(proto: FrequencyOracle) -> bool:
    """Reports carry a per-user hash function (local hashing, LOLOHA, SH, L-SH)."""
    return hasattr(proto, "g") and hasattr(proto, "hash_pool")


def value_buckets(
    proto: FrequencyOracle, hash_ids: NDArray[np.int64], values: NDArray[np.int64]
) -> NDArray[np.int64]:
    """H_u(v) for every client u (its report's hash id) and value v: shape (n, len(values)).

    SH and L-SH: the Hadamard parity of (row, v); local hashing and LOLOHA: the wire format's
    mixing hash of the user's seed, or of the public pool's seed at that index
    (docs/wire-format.md §3)."""
    if isinstance(proto, (SH, LSH)):
        return hadamard_parity(hash_ids[:, None], values[None, :])
    pool = getattr(proto, "hash_pool", None)
    seeds = hash_ids if pool is None else proto.pool_seeds()[hash_ids]  # type: ignore[attr-defined]
    return mix_hash(seeds[:, None], values[None, :], proto.g)  # type: ignore[attr-defined]


def rappor_masks(proto: RapporChain, cohorts: NDArray[np.int64]) -> NDArray[np.bool_]:
    """(n, values, bits): the encoding of every value (the strings str(v) for Bloom filters)
    in each client's cohort."""
    return _cohort_table(proto)[cohorts]


def _cohort_table(proto: RapporChain) -> NDArray[np.bool_]:
    """(m, values, bits): every value's encoding in every cohort (computed once per protocol)."""
    cached = _TABLES.get(id(proto))
    if cached is not None and cached[0] is proto:
        return cached[1]
    values = domain_size(proto)
    per = []
    for c in range(proto.m):
        vals: Any = np.arange(values)
        if isinstance(proto, RAPPOR):  # Bloom filters of strings
            vals = [str(v) for v in range(values)]
        packed = proto.encode(vals, np.full(values, c, dtype=np.int64))
        per.append(np.unpackbits(packed, axis=1, count=proto.k).astype(bool))
    table = np.stack(per)
    _TABLES.clear()  # one protocol at a time: the table is small, the cache is not a store
    _TABLES[id(proto)] = (proto, table)
    return table


_TABLES: dict[int, tuple[RapporChain, NDArray[np.bool_]]] = {}


def domain_size(proto: FrequencyOracle) -> int:
    """Number of values the attacker chooses among (boolean RAPPOR: 2)."""
    if isinstance(proto, RapporBoolean):
        return 2
    return proto.k


def log_likelihoods(
    proto: FrequencyOracle, reports: Sequence[NDArray], memoized: bool
) -> NDArray[np.float64]:
    """(n, k): ln Pr[the τ reports of client i | value v], up to a constant per client.

    ``reports``: τ batches of n report records of the same n clients, in time order.
    """
    tau = len(reports)
    if tau == 0:
        raise ValueError(f"{proto.name}: 'reports' must hold at least one batch.")
    kind = report_kind(proto)  # refuses a kind the audit has no channel for
    if isinstance(proto, DBitFlipPM):
        return _dbitflip(proto, reports, memoized)
    if isinstance(proto, (RapporChain, *UNARY)):
        return _bits(proto, reports, memoized)
    if is_hashing(proto):
        return _hashed(proto, reports, memoized)
    if kind is ReportKind.ENUMERATED:  # τ fresh reports: Σ_t ln Pr[y_t | v] of its channel
        log_ch = np.log(proto.report_channel())
        return sum(log_ch[:, proto.report_index(rep)].T for rep in reports)
    if kind is not ReportKind.SYMBOL:
        raise ValueError(f"{proto.name}: no likelihood for report kind {str(kind)!r}.")
    return _symbols(proto, reports, memoized)


def _chain(proto: FrequencyOracle, memoized: bool) -> tuple[float, float, float, float]:
    """(a1, b1, a2, b2): round-1 and round-2 keep/other probabilities of the client model; a
    fresh draw per report is the chain (1, 0, P1, P0) over the composed channel."""
    if memoized:
        return proto.p1, proto.q1, proto.p2, proto.q2
    return 1.0, 0.0, proto.P1, proto.P0


def _grr_chain_ll(counts: NDArray, at_value: NDArray, chain: tuple) -> NDArray[np.float64]:
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


def _symbols(proto: FrequencyOracle, reports: Sequence[NDArray], memoized: bool) -> NDArray:
    k = proto.k
    n = np.asarray(reports[0]).shape[0]
    counts = _counts(reports, n, k)
    if not memoized:
        # Composed GRR over k: keep P1, each other symbol P0.
        return counts * math.log(proto.P1 / proto.P0)
    return _grr_chain_ll(counts, counts, _chain(proto, True))


def _hashed(proto: FrequencyOracle, reports: Sequence[NDArray], memoized: bool) -> NDArray:
    g = proto.g  # type: ignore[attr-defined]
    values = np.arange(proto.k, dtype=np.int64)
    n = reports[0].shape[0]
    if not memoized:
        # Per report: the bucket supports v (H(v) = y) with P1, any other bucket (1 − P1)/(g − 1).
        gain = math.log(proto.P1 * (g - 1) / (1 - proto.P1))
        out = np.zeros((n, proto.k))
        for rep in reports:
            hit = value_buckets(proto, rep["hash_id"], values) == rep["bucket"][:, None]
            out += hit * gain
        return out
    ids = reports[0]["hash_id"]
    if any(np.any(rep["hash_id"] != ids) for rep in reports[1:]):
        raise ValueError(f"{proto.name}: a memoized client's reports must share its hash id.")
    counts = _counts([rep["bucket"] for rep in reports], n, g)
    table = value_buckets(proto, ids, values)  # (n, k) bucket of every value
    at_value = np.take_along_axis(counts, table, axis=1)
    return _grr_chain_ll(counts, at_value, _chain(proto, True))


def _counts(symbols: Sequence[NDArray], n: int, m: int) -> NDArray[np.float64]:
    """(n, m) number of times each client reported each symbol (one bincount)."""
    rows = np.arange(n, dtype=np.int64) * m
    flat = np.concatenate([rows + np.asarray(s, dtype=np.int64) for s in symbols])
    return np.bincount(flat, minlength=n * m).reshape(n, m).astype(np.float64)


def _bits(proto: FrequencyOracle, reports: Sequence[NDArray], memoized: bool) -> NDArray:
    tau = len(reports)
    rappor = isinstance(proto, RapporChain)
    memoized = memoized and proto.longitudinal  # one-time RAPPOR keeps no memo
    width = proto.k
    first = reports[0]
    n = first.shape[0]

    def bits(rep: NDArray) -> NDArray[np.uint8]:
        packed = rep["bits"] if rappor else rep
        return np.unpackbits(np.asarray(packed), axis=1, count=width)

    a1, b1, a2, b2 = _chain(proto, memoized)
    if memoized:
        counts = np.zeros((n, width), dtype=np.int64)
        for rep in reports:
            counts += bits(rep)
        r = unary_count_llr(np.arange(tau + 1), tau, a1, b1, a2, b2)[counts]
        if not rappor:
            return r
        return np.einsum("nvb,nb->nv", rappor_masks(proto, first["cohort"]), r)
    out = np.zeros((n, domain_size(proto)))
    on, off = math.log(a2 / b2), math.log((1 - a2) / (1 - b2))
    for rep in reports:
        r = np.where(bits(rep) == 1, on, off)
        if rappor:
            out += np.einsum("nvb,nb->nv", rappor_masks(proto, rep["cohort"]), r)
        else:
            out += r
    return out


def _dbitflip(proto: DBitFlipPM, reports: Sequence[NDArray], memoized: bool) -> NDArray:
    bucket = privacy.bucket_of(np.arange(proto.k), proto.k, proto.n_buckets)  # (k,)
    keep = proto.p1
    use = reports[:1] if memoized else reports  # no round 2: a memo's reports are identical
    out = np.zeros((reports[0].shape[0], proto.k))
    for rep in use:
        truth = rep["buckets"][:, :, None] == bucket[None, None, :]  # (n, d, k)
        agree = (rep["bits"][:, :, None] == 1) == truth
        out += np.where(agree, math.log(keep), math.log(1 - keep)).sum(axis=1)
    return out
