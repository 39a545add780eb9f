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
- flagged pairs are grown into itemsets (greedy cliques, and cliques sharing half their items
  united, `_merged`); a report is flagged when it supports
  at least ``need`` items of an itemset I. ``need`` is derived from the honest law of the
  number X of I's items one honest report supports (`honest_support_tail`): the smallest count
  whose tail Pr[X ≥ need] is within the false-positive budget ``fpr`` (shared by the
  itemsets; over a window of epochs, by the epochs too), so honest reports are flagged with
  probability at most ``fpr`` whatever the attack. A fixed ``min_share`` of I can be asked for
  instead (the earlier rule, ``min_share = 1``: only reports that support all of I, which
  misses MGA against hashing at many targets: a searched hash function gathers some of them).

It applies to reports that support many items (UE, subset selection, per-user hashing,
Hadamard). One-symbol
reports support one item and dBitFlipPM's report one bucket per sampled bit: no itemsets
(ValueError). A shared hash pool correlates honest supports (docs/math.md §2.4): refused too.
An enumerated report space (Hadamard response) is refused as well: the supports of two items
by one honest report can be positively correlated given the value. Honest reports that happen
to reach ``need`` items of an itemset are removed with the fakes; the threshold bounds their
share (docs/attacks.md §8.2).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
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


def _binomial_pmf(n: int, p: float) -> NDArray[np.float64]:
    return np.array([math.comb(n, j) * p**j * (1.0 - p) ** (n - j) for j in range(n + 1)])


def _hypergeometric_pmf(population: int, marked: int, draws: int) -> NDArray[np.float64]:
    """Pr[j marked among ``draws`` drawn without replacement], j = 0..marked."""
    total = math.comb(population, draws)
    rest = population - marked
    return np.array(
        [math.comb(marked, j) * math.comb(rest, draws - j) / total if draws - j >= 0 else 0.0
         for j in range(marked + 1)]
    )  # fmt: skip


def _tail(pmf: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    """Pr[X ≥ c], c = 0..size, from a pmf over 0..len(pmf) − 1 (padded with zeros)."""
    full = np.zeros(size + 1)
    full[: pmf.size] = pmf[: size + 1]
    return np.clip(np.cumsum(full[::-1])[::-1], 0.0, 1.0)


#: Largest rows × values product enumerated exactly for Hadamard reports; beyond it the bound
#: that takes the worse bit of each row is used (`honest_support_tail`).
HADAMARD_EXACT_CELLS = 1 << 24


def honest_support_tail(proto: FrequencyOracle, items: ArrayLike) -> NDArray[np.float64]:
    """Pr[X ≥ c], c = 0..|I|: how many of the items I one honest report supports, at most.

    The worst case over the honest user's value (docs/attacks.md §8.2), from the protocol's own
    support law (P1 for the user's value, P0 for another, docs/math.md §1.1):

    - unary and per-user hashing: the supports of distinct items are independent given the
      value (UE bits; per-user hash values H_u(w) ~ uniform on g, so P0 = 1/g); with the
      value in I, X = Bern(P1) + Bin(|I| − 1, P0), else Bin(|I|, P0);
    - subset selection: the value is in the ω-subset with P1 and the rest is uniform, so X is
      hypergeometric given that (value in I or not, held or not);
    - Hadamard: the row j is uniform on [0, m) and the bit equals the parity of j·v with P1;
      with c_b(j) the items of I of parity b under row j,
      Pr[X ≥ c | v] = (1/m) Σ_j [P1·1(c_{par_j(v)} ≥ c) + (1 − P1)·1(c_{1 − par_j(v)} ≥ c)],
      maximized over v exactly (m·k ≤ `HADAMARD_EXACT_CELLS`) or bounded by the worse bit of
      each row (larger domains).

    The chains' reports follow the same laws with their composed P1, P0 (docs/math.md (3.1)).
    """
    kind = check_applies(proto, "honest_support_tail")
    cols = np.unique(np.asarray(items, dtype=np.int64))
    size = int(cols.size)
    P1, P0 = float(proto.P1), float(proto.P0)
    if kind in ("unary", "hashed"):
        inside = np.convolve([1.0 - P1, P1], _binomial_pmf(size - 1, P0)) if size else [1.0]
        return np.maximum(_tail(np.asarray(inside), size), _tail(_binomial_pmf(size, P0), size))
    if kind == "subset":
        k, omega = int(proto.k), kinds.subset_size(proto)
        held_in = _hypergeometric_pmf(k - 1, size - 1, omega - 1)
        free_in = _hypergeometric_pmf(k - 1, size - 1, omega)
        inside = P1 * np.concatenate([[0.0], held_in]) + (1 - P1) * np.append(free_in, 0.0)
        outside = P1 * _hypergeometric_pmf(k - 1, size, omega - 1) + (1 - P1) * (
            _hypergeometric_pmf(k - 1, size, omega)
        )
        return np.maximum(_tail(inside, size), _tail(outside, size))
    m = kinds.hadamard_rows(proto)
    rows = np.arange(m, dtype=np.int64)
    ones = crafting.hash_buckets(proto, rows[:, None], cols[None, :]).sum(axis=1)  # c_1(j)
    c = np.arange(size + 1)
    a = (ones[:, None] >= c[None, :]).astype(np.float64)  # m × (|I| + 1): c_1(j) ≥ c
    b = ((size - ones)[:, None] >= c[None, :]).astype(np.float64)  # c_0(j) ≥ c
    if m * proto.k > HADAMARD_EXACT_CELLS:
        return np.maximum(a, b).mean(axis=0)
    values = np.arange(proto.k)[None, :]
    parity = crafting.hash_buckets(proto, rows[:, None], values).astype(np.float64)
    weight = P1 * parity + (1 - P1) * (1 - parity)  # Pr[bit = 1 | row j, value v]
    per_value = (b.T @ (1 - weight) + a.T @ weight) / m  # (|I| + 1) × k
    return np.clip(per_value.max(axis=1), 0.0, 1.0)


def report_threshold(
    proto: FrequencyOracle, items: ArrayLike, budget: float, min_size: int = 2
) -> int | None:
    """The smallest count ``need`` ≥ ``min_size`` of I's items with Pr_honest[X ≥ need] ≤
    ``budget`` (`honest_support_tail`), or None when even all of I is too likely."""
    tail = honest_support_tail(proto, items)
    for need in range(max(min_size, 1), tail.size):
        if tail[need] <= budget:
            return need
    return None


@dataclass
class Detection:
    """Flagged itemsets and reports of one batch (one epoch).

    ``needs[i]`` is how many items of ``itemsets[i]`` a report must support to be flagged
    (None: the itemset is too common among honest reports to be used at this budget), and
    ``stated_fpr`` the bound Σ_i Pr_honest[X_i ≥ needs[i]] on the share of honest reports
    flagged.
    """

    itemsets: list[tuple[int, ...]]
    flagged: NDArray[np.bool_]
    pair_z: NDArray[np.float64]
    threshold: float
    needs: list[int | None] = field(default_factory=list)
    stated_fpr: float = 0.0


def detect_fake_reports(
    proto: FrequencyOracle,
    records: ArrayLike,
    *,
    alpha: float = 0.01,
    min_size: int = 2,
    min_share: float | None = None,
    fpr: float | None = None,
) -> Detection:
    """Flag reports that support an itemset co-supported beyond the honest law (see module).

    ``alpha`` is the pair test's level (a spurious itemset on honest data with probability at
    most ``alpha``). A report is flagged when it supports ``need`` items of a flagged itemset:
    with ``min_share`` None (the default), ``need`` is `report_threshold` at the budget
    ``fpr`` (default ``alpha``) shared equally by the itemsets; with ``min_share`` given,
    ``need`` = ⌈min_share·|I|⌉ (at least ``min_size``).
    """
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    min_size = check.integer(OWNER, "min_size", min_size, minimum=2)
    if min_share is not None:
        min_share = check.positive_float(OWNER, "min_share", min_share, upper=1.0 + 1e-12)
    fpr = alpha if fpr is None else check.positive_float(OWNER, "fpr", fpr, upper=1.0)
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
    itemsets = _merged(_cliques(z > threshold, z, min_size))
    flagged = np.zeros(R, dtype=bool)
    needs: list[int | None] = []
    stated = 0.0
    for items in itemsets:
        cols = np.asarray(items)
        tail = honest_support_tail(proto, cols)
        if min_share is None:
            need = report_threshold(proto, cols, fpr / len(itemsets), min_size)
        else:
            need = max(min_size, int(np.ceil(min_share * cols.size - 1e-9)))
        needs.append(need)
        if need is None:
            continue
        stated += float(tail[need])
        flagged |= S[:, cols].sum(axis=1) >= need
    return Detection(itemsets, flagged, z, threshold, needs, min(stated, 1.0))


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


def _merged(itemsets: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Unite itemsets that share at least half of the smaller one, until none do.

    With many targets a few target pairs fall below the pair threshold by chance (MGA against
    OLH at r = 10 co-supports a pair about (M_S/r)² of the time, z ≈ 4–8 against a threshold of
    4.1 at k = 32), so the greedy cliques cover the targets with several overlapping itemsets,
    each missing a target or two; their union is the attacked set. The threshold derived for
    the union keeps the false-positive budget whatever the union holds.
    """
    sets = [set(items) for items in itemsets]
    merged = True
    while merged:
        merged = False
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                if 2 * len(sets[i] & sets[j]) >= min(len(sets[i]), len(sets[j])):
                    sets[i] |= sets.pop(j)
                    merged = True
                    break
            if merged:
                break
    return [tuple(sorted(items)) for items in sets]


def detect_over_epochs(
    proto: FrequencyOracle,
    device: ArrayLike,
    epoch: ArrayLike,
    records: ArrayLike,
    *,
    fpr: float | None = None,
    **options: Any,
) -> tuple[NDArray[np.bool_], list[Detection]]:
    """Detection at every epoch; a device is flagged (all its reports dropped) when any of its
    reports is. Returns (flag per report, the per-epoch detections).

    ``fpr`` (default: the ``alpha`` option, 0.01) is the budget of honest *devices* dropped over
    the whole window: each of the T epochs' detections gets ``fpr``/T (a union bound), so a
    device whose reports never look like a fake one's is dropped with probability ≤ ``fpr``.
    Other options go to `detect_fake_reports` (``alpha``, ``min_size``, ``min_share``).
    """
    dev = np.asarray(device)
    ep = np.asarray(epoch)
    rec = np.asarray(records)
    epochs = np.unique(ep)
    budget = options.get("alpha", 0.01) if fpr is None else fpr
    budget = check.positive_float(OWNER, "fpr", budget, upper=1.0)
    flagged_dev: set = set()
    found = []
    for t in epochs:
        at = np.flatnonzero(ep == t)
        det = detect_fake_reports(proto, rec[at], fpr=budget / max(epochs.size, 1), **options)
        found.append(det)
        flagged_dev.update(dev[at[det.flagged]].tolist())
    if not flagged_dev:
        return np.zeros(dev.size, dtype=bool), found
    return np.isin(dev, np.fromiter(flagged_dev, dtype=dev.dtype)), found
