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
from longldp.attacks.defences.memo_law import UNARY_ORDERS, SymbolLaw, UnaryLaw, kept_support
from longldp.protocols import FrequencyOracle

OWNER = "memo_consistency"
#: Default false-positive budget per honest device.
ALPHA = 0.01
#: Largest (devices × symbols) table counted densely.
_DENSE_CELLS = 1 << 26


def check_applies(proto: FrequencyOracle, owner: str = OWNER) -> str:
    """The report kind, or ValueError when the defence does not apply to ``proto``."""
    kind = kinds.report_kind(proto, owner)
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


def law_for(proto: FrequencyOracle, tau: int, alpha: float) -> SymbolLaw | UnaryLaw:
    """The honest law and thresholds of a history of ``tau`` reports."""
    kind = check_applies(proto)
    tau = check.integer(OWNER, "tau", tau, minimum=1)
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    if kind == "unary":
        return UnaryLaw.build(tau, proto.k, proto.p1, proto.q1, proto.p2, proto.q2, alpha)
    return SymbolLaw.build(tau, _symbols(proto, kind), float(proto.p2), alpha)


@dataclass
class MemoVerdict:
    """Per device: number of reports, statistics, and whether it was flagged."""

    proto: FrequencyOracle
    alpha: float
    devices: NDArray[Any]  # the distinct device ids, in index order
    index: NDArray[np.int64]  # each report's device index
    n_reports: NDArray[np.int64]
    top: NDArray[np.int64]  # M (one-symbol chains) or the C largest bit counts (UE chains)
    runner_up: NDArray[np.int64]  # R2 (one-symbol chains; 0 otherwise)
    changed_hash: NDArray[np.bool_]
    flagged: NDArray[np.bool_]
    laws: dict[int, SymbolLaw | UnaryLaw] = field(default_factory=dict)

    @property
    def kept(self) -> NDArray[np.bool_]:
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
        if top <= 2 * dev.size + 16:
            present = np.bincount(dev, minlength=top) > 0
            if present.all():
                return np.arange(top), dev.astype(np.int64, copy=False)
    ids, inv = np.unique(dev, return_inverse=True)
    return ids, inv.ravel().astype(np.int64)


def memo_consistency(
    proto: FrequencyOracle, device: ArrayLike, records: ArrayLike, *, alpha: float = ALPHA
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
    if kind == "unary":
        top = _top_bit_counts(proto, idx, rec, n_dev)
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
    for tau in np.unique(n_rep):
        law = law_for(proto, int(tau), alpha)
        laws[int(tau)] = law
        sel = n_rep == tau
        if isinstance(law, UnaryLaw):
            for c, x in enumerate(law.thresholds):
                flagged[sel] |= top[sel, c] >= x
        else:
            flagged[sel] |= (
                (top[sel] >= law.x_hi) | (top[sel] <= law.x_lo) | (runner[sel] >= law.y)
            )
    return MemoVerdict(proto, alpha, ids, idx, n_rep, top, runner, changed, flagged, laws)


def _hash_changes(idx: NDArray[np.int64], hash_id: NDArray[np.int64], n: int) -> NDArray:
    """True for devices whose reports carry more than one hash id (row)."""
    first = np.zeros(n, dtype=np.int64)
    first[idx[::-1]] = hash_id[::-1]  # the last write wins: each device's first id
    changed = np.zeros(n, dtype=bool)
    changed[idx[hash_id != first[idx]]] = True
    return changed


def _top_two(
    idx: NDArray[np.int64], sym: NDArray[np.int64], n: int, K: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Largest and second-largest symbol count per device."""
    if n * K <= _DENSE_CELLS:
        counts = np.bincount(idx * K + sym, minlength=n * K).reshape(n, K)
        if K == 1:
            return counts[:, 0], np.zeros(n, dtype=np.int64)
        part = -np.partition(-counts, 1, axis=1)
        return part[:, 0].astype(np.int64), part[:, 1].astype(np.int64)
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


def _top_bit_counts(
    proto: FrequencyOracle, idx: NDArray[np.int64], rec: NDArray[Any], n: int
) -> NDArray[np.int64]:
    """The C largest X_i per device, X_i the ones of bit i over its reports: (n, C)."""
    bits = kinds.unary_bits(proto, rec)
    k = proto.k
    orders = min(UNARY_ORDERS, k)
    top = np.zeros((n, orders), dtype=np.int64)
    # Devices in blocks so that the (devices × k) counts stay small; reports of a block are
    # found by one sort-free mask per block when there are few blocks.
    block = max(1, _DENSE_CELLS // (4 * k))
    for start in range(0, n, block):
        stop = min(n, start + block)
        sel = (idx >= start) & (idx < stop) if (start or stop < n) else slice(None)
        rows = np.unpackbits(bits[sel], axis=1, count=k)
        r, c = np.nonzero(rows)
        local = idx[sel][r] - start
        counts = np.bincount(local * k + c, minlength=(stop - start) * k).reshape(-1, k)
        if orders < k:
            counts = np.partition(counts, k - orders, axis=1)[:, k - orders :]
        top[start:stop] = -np.sort(-counts, axis=1)
    return top


# ---------------------------------------------------------------------- defended estimate
def kept_law(proto: FrequencyOracle, tau: int, alpha: float) -> tuple[float, float, float]:
    """(κ, P1', P0') of an honest device with ``tau`` reports (docs/attacks.md §7.2)."""
    kind = check_applies(proto)
    law = law_for(proto, tau, alpha)
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
            _, p1k, p0k = kept_law(proto, int(tau), verdict.alpha)
            support = np.asarray(proto.support_counts(rec[sel]), dtype=np.float64)
            n_sel = int(sel.sum())
            out[i] += (n_sel / total) * (support / n_sel - p0k) / (p1k - p0k)
    return out
