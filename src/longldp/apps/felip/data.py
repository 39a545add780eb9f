"""The datasets of seed 002's FELIP study: 12 numerical attributes (6 for BMS-POS).

Seed 002 §8.2: "From the datasets Bfive, Loan, and Adult, 12 attributes were sampled, while 6
attributes were selected from BMS-POS ... The query attributes were all numerical." Which ones
is not said (math §8.12). Our choices, all deterministic:

- **Adult** (45,222 rows): UCI Adult has 6 numeric columns and ``fnlwgt`` is not bundled, so
  "12 numerical attributes" can only mean what [C]'s ``adult12`` file does: the first UCI
  columns with categorical codes used as numbers (its domains 50 9 50 16 16 7 15 6 5 4 50 50
  start age, workclass, fnlwgt, education, ...). We take the first 12 UCI columns without
  ``fnlwgt``: age, workclass, education, education-num, marital-status, occupation,
  relationship, race, sex, capital-gain, capital-loss, hours-per-week. Category codes are in
  label order (alphabetical), so a range over them is a range of codes, as in [C].
- **Loan** (``loans-full-schema``, 10,000 rows): the first 12 of its binned numeric columns in
  file order (:data:`FELIP_ATTRIBUTES`).
- **Bfive** (``big5``: 500 × 240 items, or ``bfi``: 2,436 × 25): the first 12 items in file
  order (answers 1–5, resp. 1–6, as codes).
- **BMS-POS** (the stand-in, or real transactions from :func:`longldp.data.read_fimi`): 6
  attributes of each basket (:func:`bms_pos_attributes`).

Domains larger than ``max_domain`` (default 50, [C]'s binning of Adult) are coarsened by merging
consecutive codes into ``max_domain`` groups of near-equal code counts (the widths of
:func:`~longldp.apps.felip.grids.cell_widths`). ``rows`` resamples rows with replacement
(seeded) to reach a given n, e.g. as a stand-in for the 10⁶-row Kaggle Big Five.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.felip.grids import OWNER, cell_widths
from longldp.data import Domain, SetData, Table, bms_pos_standin, load

ADULT_12 = (
    "age",
    "workclass",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
LOAN_12 = (
    "emp_length",
    "loan_amount",
    "interest_rate",
    "installment",
    "annual_income",
    "earliest_credit_line",
    "inquiries_last_12m",
    "total_credit_lines",
    "open_credit_lines",
    "total_credit_limit",
    "total_credit_utilized",
    "current_installment_accounts",
)
#: Bundled dataset → the attributes FELIP's study uses (None: the first 12 columns).
FELIP_ATTRIBUTES: dict[str, tuple[str, ...] | None] = {
    "adult": ADULT_12,
    "loans-full-schema": LOAN_12,
    "big5": None,
    "bfi": None,
}
ALIASES = {"loan": "loans-full-schema", "lending-club": "loans-full-schema", "bfive": "big5"}
BMS_POS_ATTRIBUTES = (
    "size",
    "best_rank",
    "median_rank",
    "worst_rank",
    "head_items",
    "tail_items",
)


def coarsen(table: Table, max_domain: int | None = 50) -> Table:
    """Merge consecutive codes of every attribute with more than ``max_domain`` values.

    Codes are grouped into ``max_domain`` runs of ⌊D/max⌋ or ⌈D/max⌉ consecutive codes; the new
    labels name the first and last original label of each run.
    """
    if max_domain is None:
        return table
    max_domain = check.integer(OWNER, "max_domain", max_domain, minimum=2)
    cols, doms = {}, {}
    for a in table.attributes:
        dom = table.domains[a]
        if dom.size <= max_domain:
            cols[a], doms[a] = table[a], dom
            continue
        widths = cell_widths(dom.size, max_domain)
        lut = np.repeat(np.arange(max_domain), widths)
        edges = np.concatenate([[0], np.cumsum(widths)])
        labels = [
            dom.label(int(lo)) + ("" if hi - lo == 1 else "-" + dom.label(int(hi) - 1))
            for lo, hi in itertools.pairwise(edges)
        ]
        cols[a], doms[a] = lut[table[a]], Domain(max_domain, tuple(labels))
    return Table(cols, doms, table.name)


def _rank_bins(ranks: np.ndarray, k: int, bins: int) -> tuple[np.ndarray, Domain]:
    bins = min(bins, k)
    lut = np.repeat(np.arange(bins), cell_widths(k, bins))
    edges = np.concatenate([[0], np.cumsum(cell_widths(k, bins))])
    labels = tuple(f"[{lo}, {hi})" for lo, hi in itertools.pairwise(edges))
    return lut[ranks], Domain(bins, labels)


def bms_pos_attributes(
    sets: SetData, *, bins: int = 50, head: int = 16, tail_from: int = 256
) -> Table:
    """Six numerical attributes of every basket (our construction; seed 002 does not say).

    Items are ranked by popularity in the data (rank 0 = most frequent; ties by item id). Per
    basket:

    - ``size``: number of items, capped at ``bins`` (code = min(size, bins) − 1);
    - ``best_rank``, ``median_rank``, ``worst_rank``: the smallest, lower-median and largest
      rank of its items, binned into ``bins`` runs of near-equal rank width;
    - ``head_items``: items among the ``head`` most popular (0..head);
    - ``tail_items``: items of rank >= ``tail_from``, capped at 15 (0..15).

    Every basket must be non-empty. Vectorized over baskets (one sort of all items).
    """
    if not isinstance(sets, SetData):
        raise ValueError(f"{OWNER}: expected SetData; got {type(sets).__name__}.")
    lengths = sets.lengths
    if sets.n == 0 or np.any(lengths == 0):
        raise ValueError(f"{OWNER}: every basket must hold at least one item.")
    k = sets.domain.size
    counts = np.bincount(sets.items, minlength=k)
    rank_of = np.empty(k, dtype=np.int64)
    rank_of[np.lexsort((np.arange(k), -counts))] = np.arange(k)
    user = np.repeat(np.arange(sets.n), lengths)
    r = rank_of[sets.items]
    r_sorted = r[np.lexsort((r, user))]
    start = sets.indptr[:-1]
    best = r_sorted[start]
    worst = r_sorted[sets.indptr[1:] - 1]
    median = r_sorted[start + (lengths - 1) // 2]
    cols: dict[str, np.ndarray] = {"size": np.minimum(lengths, bins) - 1}
    doms: dict[str, Domain] = {
        "size": Domain(bins, tuple([str(i) for i in range(1, bins)] + [f"{bins}+"]))
    }
    for name, ranks in (("best_rank", best), ("median_rank", median), ("worst_rank", worst)):
        cols[name], doms[name] = _rank_bins(ranks, k, bins)
    cols["head_items"] = np.bincount(user, weights=r < head, minlength=sets.n).astype(np.int64)
    doms["head_items"] = Domain(head + 1)
    tail = np.bincount(user, weights=r >= tail_from, minlength=sets.n).astype(np.int64)
    cols["tail_items"] = np.minimum(tail, 15)
    doms["tail_items"] = Domain(16, tuple([str(i) for i in range(15)] + ["15+"]))
    return Table(cols, doms, "bms-pos-felip")


def felip_table(
    name: str,
    *,
    attributes: Sequence[str] | None = None,
    max_domain: int | None = 50,
    rows: int | None = None,
    seed: Any = 0,
) -> Table:
    """A FELIP study dataset: 12 numerical attributes (BMS-POS: 6), domains coarsened.

    Parameters
    ----------
    name : str
        ``"adult"``, ``"loans-full-schema"`` (alias ``"loan"``), ``"big5"`` (alias ``"bfive"``),
        ``"bfi"`` or ``"bms-pos"`` (the stand-in, :func:`longldp.data.bms_pos_standin`).
    attributes : sequence of str, optional
        Override the attribute choice of :data:`FELIP_ATTRIBUTES`.
    max_domain : int or None, default=50
        Coarsen larger domains (:func:`coarsen`); None keeps them.
    rows : int, optional
        Resample this many rows with replacement (seeded); BMS-POS: the stand-in's n.
    seed : int or numpy.random.Generator, default=0
        Seed of the stand-in and of the resampling.

    Returns
    -------
    Table
        All attributes numerical (:class:`~longldp.apps.felip.grids.FelipSchema.from_table`).
    """
    key = ALIASES.get(name.lower(), name.lower()) if isinstance(name, str) else name
    if key in ("bms-pos", "bms-pos-standin"):
        table = bms_pos_attributes(bms_pos_standin(seed, rows))
        return table.select(attributes) if attributes is not None else table
    if key not in FELIP_ATTRIBUTES:
        allowed = sorted([*FELIP_ATTRIBUTES, "bms-pos"])
        raise ValueError(f"{OWNER}: 'name' must be one of {allowed}; got {name!r}.")
    base = load(key)
    assert isinstance(base, Table)
    chosen = attributes or FELIP_ATTRIBUTES[key] or base.attributes[:12]
    table = coarsen(base.select(chosen), max_domain)
    if rows is not None:
        rows = check.integer(OWNER, "rows", rows, minimum=1)
        table = table.take(np.random.default_rng(seed).integers(0, table.n, size=rows))
    return table


__all__ = [
    "ADULT_12",
    "BMS_POS_ATTRIBUTES",
    "FELIP_ATTRIBUTES",
    "LOAN_12",
    "bms_pos_attributes",
    "coarsen",
    "felip_table",
]
