"""Fake-user detection by frequent itemsets among the supported sets ([CJG21] §6.2).

MGA makes every fake report support all (or most) targets, so the targets appear *together* in
far more supported sets than honest reports allow. [CJG21] mines frequent itemsets among the
reports of OUE and OLH and removes the users whose reports support one. Our version
(docs/attacks.md §8.2) makes "frequent" a test with a known null:

- an honest report's supports of two items a ≠ b are independent given the user's value (UE
  bits are independent; per-user hash values of distinct items are independent uniform; two
  columns of a Hadamard row are pairwise independent), so Cov(S_a, S_b) = −f_a f_b (P1 − P0)² ≤ 0
  over the population; the members of a subset-selection report are drawn without
  replacement, so given the value they are negatively correlated and the covariance is
  negative too;
- the pair statistic z_ab = (C_ab − C_a C_b/R)/√(R p_a(1 − p_a) p_b(1 − p_b)) (C_ab reports
  supporting both, p_a = C_a/R) is then at most 0 in mean and ≈ N(0, 1) at most, and a pair is
  flagged when z_ab exceeds Φ⁻¹(1 − α/#pairs) (one-sided Bonferroni: asymptotic FPR ≤ α per
  epoch);
- flagged pairs are grown into itemsets (greedy cliques); a report is flagged when it supports
  every item of an itemset (``min_share`` of them, optionally).

It applies to reports that support many items (UE, subset selection, per-user hashing,
Hadamard). One-symbol
reports support one item and dBitFlipPM's report one bucket per sampled bit: no itemsets
(ValueError). A shared hash pool correlates honest supports (docs/math.md §2.4): refused too.
An enumerated report space (Hadamard response) is refused as well: the supports of two items
by one honest report can be positively correlated given the value. Honest reports that happen
to support a whole itemset are removed with the fakes; for an
itemset I that costs about R·Π_{v∈I} P0 honest reports (docs/attacks.md §8.2).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.attacks import crafting, kinds
from longldp.protocols import FrequencyOracle

OWNER = "detect_fake_reports"


def check_applies(proto: FrequencyOracle, owner: str = OWNER) -> str:
    """The report kind, or ValueError when itemset detection does not apply."""
    kind = kinds.attack_kind(proto, owner)
    if kind in ("symbol", "bucket-bits"):
        raise ValueError(
            f"{owner}: a '{proto.name}' report supports one item (per answered bucket), so it "
            "has no itemsets; itemset detection applies to unary, subset, hashing and Hadamard "
            "reports."
        )
    if kind == "enumerated":
        raise ValueError(
            f"{owner}: one honest '{proto.name}' report's supports of two items need not be "
            "independent given the user's value (Hadamard response: items a, b are co-supported "
            "more often by a holder of the item whose column is (a + 1) XOR (b + 1)), so the "
            "honest law of the pair statistic does not hold; detection is refused."
        )
    if kind == "hashed" and kinds.hash_family(proto).size is not None:
        raise ValueError(
            f"{owner}: with a shared hash pool honest users of one function share its "
            "collisions, so honest supports are correlated; detection needs per-user hashing."
        )
    return kind


def supported_sets(proto: FrequencyOracle, records: ArrayLike) -> NDArray[np.bool_]:
    """S[i, v] = report i supports v (R × k), from the reports' own support rule."""
    kind = check_applies(proto, "supported_sets")
    rec = np.asarray(records)
    k = proto.k
    if kind in kinds.BIT_SET_KINDS:
        return np.unpackbits(kinds.unary_bits(proto, rec), axis=1, count=k).astype(bool)
    values = np.arange(k, dtype=np.int64)[None, :]
    out = np.empty((rec.shape[0], k), dtype=bool)
    step = max(1, (1 << 20) // k)
    for start in range(0, rec.shape[0], step):
        part = rec[start : start + step]
        ids, got = part["hash_id"][:, None], part["bucket"][:, None]
        out[start : start + step] = crafting.hash_buckets(proto, ids, values) == got
    return out


@dataclass
class Detection:
    """Flagged itemsets and reports of one batch (one epoch)."""

    itemsets: list[tuple[int, ...]]
    flagged: NDArray[np.bool_]
    pair_z: NDArray[np.float64]
    threshold: float


def detect_fake_reports(
    proto: FrequencyOracle,
    records: ArrayLike,
    *,
    alpha: float = 0.01,
    min_size: int = 2,
    min_share: float = 1.0,
) -> Detection:
    """Flag reports that support an itemset co-supported beyond the honest law (see module)."""
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    min_size = check.integer(OWNER, "min_size", min_size, minimum=2)
    min_share = check.positive_float(OWNER, "min_share", min_share, upper=1.0 + 1e-12)
    S = supported_sets(proto, records)
    R, k = S.shape
    if R == 0:
        return Detection([], np.zeros(0, dtype=bool), np.zeros((k, k)), np.inf)
    Sf = S.astype(np.float32)
    with _one_blas_thread():  # a (k × k) product: threads cost more than they save
        C = (Sf.T @ Sf).astype(np.float64)
    p = np.diag(C) / R
    excess = C - R * np.outer(p, p)
    sd = np.sqrt(R * np.outer(p * (1 - p), p * (1 - p)))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, excess / sd, 0.0)
    np.fill_diagonal(z, 0.0)
    pairs = k * (k - 1) // 2
    threshold = NormalDist().inv_cdf(1.0 - alpha / max(pairs, 1))
    itemsets = _cliques(z > threshold, z, min_size)
    flagged = np.zeros(R, dtype=bool)
    for items in itemsets:
        cols = np.asarray(items)
        need = max(min_size, int(np.ceil(min_share * cols.size - 1e-9)))
        flagged |= S[:, cols].sum(axis=1) >= need
    return Detection(itemsets, flagged, z, threshold)


def _one_blas_thread() -> contextlib.AbstractContextManager:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _cliques(adj: NDArray[np.bool_], z: NDArray[np.float64], min_size: int) -> list[tuple]:
    """Greedy cliques of the flagged-pair graph: seed with the strongest uncovered pair, add
    every item adjacent to all members (strongest first); keep those of ``min_size`` or more."""
    adj = adj & adj.T
    a, b = np.nonzero(np.triu(adj, 1))
    order = np.argsort(-z[a, b], kind="stable")
    covered: set[tuple[int, int]] = set()
    out: list[tuple[int, ...]] = []
    for i in order:
        pair = (int(a[i]), int(b[i]))
        if pair in covered:
            continue
        members = [pair[0], pair[1]]
        common = adj[pair[0]] & adj[pair[1]]
        for c in np.argsort(-(z[pair[0]] + z[pair[1]]), kind="stable"):
            if common[c] and c not in members and all(adj[c, m] for m in members):
                members.append(int(c))
                common &= adj[c]
        members.sort()
        for x in members:
            for y in members:
                if x < y:
                    covered.add((x, y))
        if len(members) >= min_size:
            out.append(tuple(members))
    return out


def detect_over_epochs(
    proto: FrequencyOracle,
    device: ArrayLike,
    epoch: ArrayLike,
    records: ArrayLike,
    **options: Any,
) -> tuple[NDArray[np.bool_], list[Detection]]:
    """Detection at every epoch; a device is flagged (all its reports dropped) when any of its
    reports is. Returns (flag per report, the per-epoch detections)."""
    dev = np.asarray(device)
    ep = np.asarray(epoch)
    rec = np.asarray(records)
    flagged_dev: set = set()
    found = []
    for t in np.unique(ep):
        at = np.flatnonzero(ep == t)
        det = detect_fake_reports(proto, rec[at], **options)
        found.append(det)
        flagged_dev.update(dev[at[det.flagged]].tolist())
    if not flagged_dev:
        return np.zeros(dev.size, dtype=bool), found
    return np.isin(dev, np.fromiter(flagged_dev, dtype=dev.dtype)), found
