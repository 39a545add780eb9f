"""The memo-consistency defence: score each device's report history against the honest law.

Run where a deployment runs it: on stored reports with device ids (an archive, the server's
per-device export). Each device's history of τ_u reports in the window is reduced to a few
counts, compared with the exact law of an honest memoized device that held one value
(:mod:`longldp.attacks.defences.memo_law`), and flagged when a count falls in a tail of total
probability ≤ α. The defended estimate drops flagged devices and reads the kept devices'
reports with the kept law's (P1', P0'), which keeps it unbiased for honest populations
(docs/attacks.md §7).

Statistics (vectorized over devices, no Python loop per device or per report):

- one-symbol chains (L-GRR; LOLOHA and L-SH over buckets): the histogram's largest count M and
  runner-up R2 (dense (devices × K) counts, or a sort of (device, symbol) keys when that table
  would be large); hashing chains also flag a device whose hash function (or Hadamard row)
  changes, which an honest client never does;
- UE chains: per-bit counts X (ones of the unpacked reports keyed by (device, bit)) and their
  C largest values (the c-th largest against its threshold x_c).

One-shot oracles memoize nothing and dBitFlipPM's reports *are* its memos (an honest device
repeats itself), so the defence does not apply to them (ValueError).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.attacks import kinds
from longldp.attacks.defences.memo_law import SymbolLaw, UnaryLaw, kept_support
from longldp.protocols import FrequencyOracle

OWNER = "memo_consistency"
#: Default false-positive budget per honest device.
ALPHA = 0.01
#: One-symbol chains: the full test of a one-value history, or only the replay (M) test, which
#: devices whose value changes also pass (docs/attacks.md §7.1).
TESTS = ("one-value", "replay")
#: Largest (devices × symbols) table counted densely.
_DENSE_CELLS = 1 << 26


def check_applies(proto: FrequencyOracle, owner: str = OWNER) -> str:
    """The report kind, or ValueError when the defence does not apply to ``proto``."""
    kind = kinds.attack_kind(proto, owner)
    if not proto.longitudinal:
        raise ValueError(
            f"{owner}: '{proto.name}' is one-shot: it memoizes nothing, so a device's reports "
            "have no memo to be consistent with; the defence applies to two-round chains."
        )
    if kind == "bucket-bits":
        raise ValueError(
            f"{owner}: '{proto.name}' has one round: its reports are its memos, so an honest "
            "device repeats itself and consistency cannot separate it from a replay."
        )
    return kind


def _symbols(proto: FrequencyOracle, kind: str) -> int:
    return proto.k if kind == "symbol" else kinds.hash_range(proto)


def law_for(
    proto: FrequencyOracle, tau: int, alpha: float, tests: str = "one-value"
) -> SymbolLaw | UnaryLaw:
    """The honest law and thresholds of a history of ``tau`` reports (``tests``: see
    :data:`TESTS` and :class:`~longldp.attacks.defences.memo_law.SymbolLaw`)."""
    kind = check_applies(proto)
    tau = check.integer(OWNER, "tau", tau, minimum=1)
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    if kind == "unary":
        return UnaryLaw.build(tau, proto.k, proto.p1, proto.q1, proto.p2, proto.q2, alpha)
    tests = check.choice(OWNER, "tests", tests, TESTS)
    return SymbolLaw.build(tau, _symbols(proto, kind), float(proto.p2), alpha, tests)


@dataclass
class MemoVerdict:
    """Per device: number of reports, statistics, and whether it was flagged."""

    proto: FrequencyOracle
    alpha: float
    devices: NDArray[Any]  # the distinct device ids, in index order
    index: NDArray[np.int64]  # each report's device index
    n_reports: NDArray[np.int64]
    top: NDArray[np.int64]  # M: the largest symbol count, or the largest bit count (UE)
    runner_up: NDArray[np.int64]  # R2 (one-symbol chains; 0 otherwise)
    changed_hash: NDArray[np.bool_]
    flagged: NDArray[np.bool_]
    laws: dict[int, SymbolLaw | UnaryLaw] = field(default_factory=dict)
    tests: str = "one-value"

    @property
    def kept(self) -> NDArray[np.bool_]:
        """Devices that passed (not flagged)."""
        return ~self.flagged

    def stated_fpr(self) -> float:
        """The exact false-positive rate of the laws in use (largest over the τ_u present)."""
        return max((law.fpr for law in self.laws.values()), default=0.0)


def device_index(device: ArrayLike) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """(distinct ids, index of each report's device); dense non-negative ids are kept as is."""
    dev = np.asarray(device)
    if dev.ndim != 1:
        raise ValueError(f"{OWNER}: 'device' must be 1-D (one id per report); got {dev.shape}.")
    if dev.size and np.issubdtype(dev.dtype, np.integer) and dev.min() >= 0:
        top = int(dev.max()) + 1
        if dev.size % top == 0 and dev[0] == 0 and _epoch_major(dev, top):
            return np.arange(top), dev.astype(np.int64, copy=False)
        if top <= 2 * dev.size + 16:
            present = np.bincount(dev, minlength=top) > 0
            if present.all():
                return np.arange(top), dev.astype(np.int64, copy=False)
    ids, inv = np.unique(dev, return_inverse=True)
    return ids, inv.ravel().astype(np.int64)


def memo_consistency(
    proto: FrequencyOracle,
    device: ArrayLike,
    records: ArrayLike,
    *,
    alpha: float = ALPHA,
    tests: str = "one-value",
) -> MemoVerdict:
    """Score every device's history and flag the ones outside the honest law (FPR ≤ α).

    Parameters
    ----------
    proto : a two-round chain of the registry.
    device : array (R,)
        Device id of every report (any integer or bytes ids).
    records : report records (R,)
        The reports (as ``proto.perturb`` returns them, or decoded from the wire format).
    alpha : float in (0, 1)
        False-positive budget of an honest device holding one value.
    tests : {"one-value", "replay"}
        One-symbol chains: the full test of a device holding one value (largest count too
        high or too low, runner-up too high), or the replay test only (largest count too high),
        for populations whose values change (docs/attacks.md §7.1).
    """
    kind = check_applies(proto)
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    ids, idx = device_index(device)
    rec = np.asarray(records)
    if rec.shape[0] != idx.size:
        raise ValueError(
            f"{OWNER}: 'records' must hold one report per device id ({idx.size}); "
            f"got {rec.shape[0]}."
        )
    n_dev = ids.size
    n_rep = np.bincount(idx, minlength=n_dev).astype(np.int64)
    changed = np.zeros(n_dev, dtype=bool)
    runner = np.zeros(n_dev, dtype=np.int64)
    bit_counts = None
    if kind == "unary":
        bit_counts = _bit_counts(proto, idx, rec, n_dev)
        top = bit_counts.max(axis=0).astype(np.int64)
    else:
        K = _symbols(proto, kind)
        if kind == "symbol":
            sym = rec.astype(np.int64)
        else:
            sym = rec["bucket"].astype(np.int64)
            changed = _hash_changes(idx, rec["hash_id"].astype(np.int64), n_dev)
        top, runner = _top_two(idx, sym, n_dev, K)
    flagged = changed.copy()
    laws: dict[int, SymbolLaw | UnaryLaw] = {}
    present = np.flatnonzero(np.bincount(n_rep))
    for tau in present:
        law = law_for(proto, int(tau), alpha, tests)
        laws[int(tau)] = law
        sel = slice(None) if present.size == 1 else n_rep == tau
        if isinstance(law, UnaryLaw):
            assert bit_counts is not None
            block = bit_counts if isinstance(sel, slice) else bit_counts[:, sel]
            for c, x in enumerate(law.thresholds):  # the (c+1)-th largest X reaches x_c
                if x <= tau:
                    flagged[sel] |= (block >= x).sum(axis=0) >= c + 1
        else:
            flagged[sel] |= (top[sel] >= law.x_hi) | (top[sel] <= law.x_lo) | (runner[sel] >= law.y)
    return MemoVerdict(proto, alpha, ids, idx, n_rep, top, runner, changed, flagged, laws, tests)


def _hash_changes(idx: NDArray[np.int64], hash_id: NDArray[np.int64], n: int) -> NDArray:
    """True for devices whose reports carry more than one hash id (row)."""
    first = np.zeros(n, dtype=np.int64)
    first[idx[::-1]] = hash_id[::-1]  # the last write wins: each device's first id
    changed = np.zeros(n, dtype=bool)
    changed[idx[hash_id != first[idx]]] = True
    return changed


def _count_dtype(tau: int) -> type:
    return np.uint8 if tau < 255 else np.uint16 if tau < 65535 else np.int64


def _top_two_columns(counts: NDArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Largest and second-largest entry of each *column* of a (K, n) table (ties repeated).
    Reductions run across the K rows, elementwise over the n devices."""
    top = counts.max(axis=0)
    if counts.shape[0] == 1:
        return top.astype(np.int64), np.zeros(counts.shape[1], dtype=np.int64)
    eq = counts == top
    rest = np.where(eq, 0, counts).max(axis=0)
    second = np.where(eq.sum(axis=0) >= 2, top, rest)
    return top.astype(np.int64), second.astype(np.int64)


#: spread[v]: the 8 bits of byte v (most significant first, as numpy.packbits writes them)
#: in the 8 byte lanes of a little-endian uint64, so that summing up to 255 spread bytes
#: counts each bit position in its own lane.
_SPREAD = np.array(
    [sum(((v >> (7 - p)) & 1) << (8 * p) for p in range(8)) for v in range(256)], dtype=np.uint64
)


def _top_two(
    idx: NDArray[np.int64], sym: NDArray[np.int64], n: int, K: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Largest and second-largest symbol count per device."""
    tau = _epoch_major(idx, n)
    if tau and n * K <= _DENSE_CELLS:
        # One report per device and epoch: scatter-add epoch by epoch into a small table
        # (keys are distinct within an epoch, so fancy-index increments are exact).
        counts = np.zeros(K * n, dtype=_count_dtype(tau))  # (K, n): symbol-major
        base = np.arange(n, dtype=np.int64)
        for block in sym.reshape(tau, n):
            counts[block * n + base] += 1
        return _top_two_columns(counts.reshape(K, n))
    if n * K <= _DENSE_CELLS:
        return _top_two_columns(np.bincount(sym * n + idx, minlength=n * K).reshape(K, n))
    keys, cnt = np.unique(idx * K + sym, return_counts=True)
    dev = keys // K
    order = np.lexsort((-cnt, dev))
    dev, cnt = dev[order], cnt[order]
    first = np.ones(dev.size, dtype=bool)
    first[1:] = dev[1:] != dev[:-1]
    top = np.zeros(n, dtype=np.int64)
    top[dev[first]] = cnt[first]
    second = np.zeros(n, dtype=np.int64)
    nxt = np.flatnonzero(first) + 1
    ok = nxt < dev.size
    nxt = nxt[ok]
    same = dev[nxt] == dev[nxt - 1]
    second[dev[nxt[same]]] = cnt[nxt[same]]
    return top, second


def _epoch_major(idx: NDArray[np.int64], n: int) -> int:
    """τ when the reports are τ blocks each holding devices 0..n−1 in order (how simulations
    and per-epoch exports lay them out), else 0."""
    if n == 0 or idx.size % n:
        return 0
    tau = idx.size // n
    grid = np.broadcast_to(np.arange(n), (tau, n))
    return tau if np.array_equal(idx.reshape(tau, n), grid) else 0


def _bit_counts(
    proto: FrequencyOracle, idx: NDArray[np.int64], rec: NDArray[Any], n: int
) -> NDArray:
    """X[i, u]: the ones of bit i over device u's reports, a (k, n) table.

    Each packed byte is spread into 8 one-byte lanes (:data:`_SPREAD`) and a device's spread
    bytes are summed, which counts every bit position at once while a device has < 256
    reports. Reports laid out epoch by epoch are summed in place; otherwise each half (four
    lanes, < 2³² per report) is summed per device by a weighted bincount, exact in float64.
    Devices with 256 reports or more: the bits are unpacked and summed after a stable sort."""
    bits = np.ascontiguousarray(kinds.unary_bits(proto, rec))
    k = proto.k
    nb = bits.shape[1]
    tau = _epoch_major(idx, n)
    per = np.bincount(idx, minlength=n)
    if int(per.max(initial=0)) >= 256:
        order = np.argsort(idx, kind="stable")
        starts = np.concatenate([[0], np.cumsum(per)[:-1]])
        rows = np.unpackbits(bits[order], axis=1, count=k)
        return np.ascontiguousarray(np.add.reduceat(rows, starts, axis=0, dtype=np.int64).T)
    out = np.empty((k, n), dtype=np.uint8)
    if not tau:
        summed = np.zeros((n, nb), dtype=np.uint64)
        low, high = np.uint64(0xFFFFFFFF), np.uint64(32)
        for j in range(nb):
            spread = _SPREAD[bits[:, j]]
            lo = np.bincount(idx, weights=(spread & low).astype(np.float64), minlength=n)
            hi = np.bincount(idx, weights=(spread >> high).astype(np.float64), minlength=n)
            summed[:, j] = lo.astype(np.uint64) | (hi.astype(np.uint64) << high)
        out[:] = summed.view(np.uint8).reshape(n, 8 * nb)[:, :k].T
        return out
    blocks = bits.reshape(tau, n, nb)
    step = max(1, (1 << 21) // (8 * nb * tau))  # blocks that stay in cache
    for start in range(0, n, step):
        stop = min(n, start + step)
        summed = _SPREAD[blocks[:, start:stop]].sum(axis=0, dtype=np.uint64)
        out[:, start:stop] = summed.view(np.uint8).reshape(stop - start, 8 * nb)[:, :k].T
    return out


# ---------------------------------------------------------------------- defended estimate
def kept_law(
    proto: FrequencyOracle, tau: int, alpha: float, tests: str = "one-value"
) -> tuple[float, float, float]:
    """(κ, P1', P0') of an honest device with ``tau`` reports (docs/attacks.md §7.2)."""
    kind = check_applies(proto)
    law = law_for(proto, tau, alpha, tests)
    K = _symbols(proto, kind) if kind != "unary" else proto.k
    p1k, p0k = kept_support(kind, law, proto.p1, proto.q1, K, proto.P0)
    return law.keep, p1k, p0k


def defended_estimates(
    proto: FrequencyOracle,
    verdict: MemoVerdict,
    epoch: ArrayLike,
    records: ArrayLike,
    epochs: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Per-epoch frequencies from the kept devices' reports, read with (P1', P0').

    Devices are grouped by their number of reports τ_u (each group has its own kept law);
    each group is estimated by f̂ = (C/N − P0')/(P1' − P0') and the groups are combined in
    proportion to their reports at that epoch. Returns (len(epochs), k).
    """
    ep = np.asarray(epoch, dtype=np.int64)
    rec = np.asarray(records)
    if ep.shape[0] != verdict.index.size or rec.shape[0] != verdict.index.size:
        raise ValueError(f"{OWNER}: 'epoch' and 'records' must match the scored reports.")
    which = np.unique(ep) if epochs is None else np.asarray(epochs, dtype=np.int64)
    keep_report = verdict.kept[verdict.index]
    tau_of_report = verdict.n_reports[verdict.index]
    out = np.zeros((which.size, proto.k))
    for i, t in enumerate(which):
        at = (ep == t) & keep_report
        total = int(at.sum())
        if total == 0:
            raise ValueError(f"{OWNER}: no kept report at epoch {int(t)}.")
        for tau in np.unique(tau_of_report[at]):
            sel = at & (tau_of_report == tau)
            _, p1k, p0k = kept_law(proto, int(tau), verdict.alpha, verdict.tests)
            support = np.asarray(proto.support_counts(rec[sel]), dtype=np.float64)
            n_sel = int(sel.sum())
            out[i] += (n_sel / total) * (support / n_sel - p0k) / (p1k - p0k)
    return out
