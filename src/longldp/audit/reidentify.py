"""Re-identification across attributes and collections (docs/audit.md §12).

The setting of Arcolezi, Gambs, Couchot and Palamidessi, "On the risks of collecting
multidimensional data under local differential privacy" (PVLDB 16(5), 2023, §5): users hold
d attributes and take part in S collections; in each, a user reports through a multidimensional
solution (SMP and ALLOMFREE: one attribute drawn anew per collection with the whole budget; SPL:
every attribute with ε/d). The attacker (the collector) knows the profiles of the whole
population, as background knowledge, and tries to find which profile a set of reports belongs to.

The attacker here is the Bayes-optimal linker: it scores every known profile p by the
log-likelihood of the user's reports under p's values,

    score(p) = Σ_j ln Pr[reports of attribute j | value p_j],

with :func:`longldp.audit.likelihood.log_likelihoods` (a memoizing client's reports of one
attribute are scored jointly, as one memo, docs/math.md §13.2), and ranks the profiles. The
**top-r rate** is the probability that the user's true profile is among the r best (equal
scores broken at random; a profile shared by several people counts as one candidate per person,
so an exact duplicate caps the top-1 rate at 1/multiplicity).

Clients keep their memos across collections by default (``memo="kept"``: the same device reports
the same attribute again from its memo); ``memo="fresh"`` makes every collection a new
client, so repeated reports of one attribute are independent and accumulate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.audit.likelihood import log_likelihoods
from longldp.audit.randomizers import protocol_inputs

OWNER = "reidentify"
MEMOS = ("kept", "fresh")
#: Targets scored against the whole population per block (bounds the (block, n) score matrix).
BLOCK = 256


@dataclass(frozen=True)
class Reidentification:
    """Top-r re-identification rates of ``targets`` users after ``surveys`` collections."""

    solution: str
    protocols: tuple[str, ...]
    surveys: int
    memo: str
    population: int
    targets: int
    top: tuple[int, ...]
    rates: tuple[float, ...]
    standard_errors: tuple[float, ...]
    #: The best an attacker can do knowing every value exactly (duplicates of a profile tie).
    ceiling: tuple[float, ...]
    #: Random guessing: r / population.
    chance: tuple[float, ...]

    def rate(self, r: int) -> float:
        """The top-r rate."""
        return self.rates[self.top.index(r)]


def reidentify(
    profiles: NDArray,
    collection: Any,
    surveys: int,
    *,
    targets: int = 2000,
    top: Sequence[int] = (1, 10),
    memo: str = "kept",
    rng: Any = None,
) -> Reidentification:
    """Re-identification rate of users reporting through ``collection`` ``surveys`` times.

    Parameters
    ----------
    profiles : (n, d) int array
        The population's attribute values (the attacker's background knowledge), attribute j
        in [0, k_j).
    collection : MultidimCollection
        From :mod:`longldp.apps.multidim` (SMP, SPL or ALLOMFREE): its ``protocols`` (one per
        attribute, at the budget the solution gives it), ``sampling`` and ``assign``.
    surveys : int
        Collections each target takes part in.
    targets : int
        Users drawn from the population whose reports are simulated and linked.
    top : sequence of int
        The r of the top-r rates.
    memo : "kept" or "fresh"
        Memos kept across collections, or a new client per collection.
    rng : seed or Generator
        Simulation randomness (targets, attribute draws, the clients).
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    surveys = check.integer(OWNER, "surveys", surveys, minimum=1)
    memo = check.choice(OWNER, "memo", memo, MEMOS)
    protos = tuple(collection.protocols)
    pop = np.asarray(profiles)
    if pop.ndim != 2 or pop.shape[1] != len(protos):
        raise ValueError(
            f"{OWNER}: 'profiles' must have one column per attribute of the collection "
            f"({len(protos)}); got shape {pop.shape}."
        )
    for j, proto in enumerate(protos):
        check.domain_values(OWNER, pop[:, j], proto.k, f"profiles (attribute {j})")
    n = pop.shape[0]
    targets = check.integer(OWNER, "targets", targets, minimum=1, maximum=n)
    ranks = tuple(check.integer(OWNER, "top", r, minimum=1, maximum=n) for r in top)
    who = gen.choice(n, size=targets, replace=False)
    mine = pop[who].astype(np.int64)
    reports = _collect(protos, collection, mine, surveys, memo, gen)
    ll = [_attribute_ll(p, rep, targets, memo) for p, rep in zip(protos, reports, strict=True)]
    _, inverse, multiplicity = np.unique(pop, axis=0, return_inverse=True, return_counts=True)
    same = multiplicity[inverse.ravel()[who]]  # people sharing each target's profile
    exact = np.stack([_top_rate(np.zeros_like(same), same, r) for r in ranks], axis=1)
    hits = np.zeros((targets, len(ranks)))
    columns = [np.ascontiguousarray(pop[:, j], dtype=np.intp) for j in range(pop.shape[1])]
    for start in range(0, targets, BLOCK):
        rows = slice(start, min(targets, start + BLOCK))
        score = np.zeros((rows.stop - rows.start, n))
        for table, col in zip(ll, columns, strict=True):
            score += np.take(table[rows], col, axis=1)
        truth = score[np.arange(score.shape[0]), who[rows]][:, None]
        tol = 1e-9 * (1.0 + np.abs(truth))
        higher = np.count_nonzero(score > truth + tol, axis=1)
        equal = np.count_nonzero(np.abs(score - truth) <= tol, axis=1)  # includes itself
        for i, r in enumerate(ranks):
            hits[rows, i] = _top_rate(higher, equal, r)
    rates = hits.mean(axis=0)
    se = hits.std(axis=0, ddof=1) / np.sqrt(targets) if targets > 1 else np.zeros(len(ranks))
    return Reidentification(
        solution=collection.solution,
        protocols=tuple(p.name for p in protos),
        surveys=surveys,
        memo=memo,
        population=n,
        targets=targets,
        top=ranks,
        rates=tuple(float(x) for x in rates),
        standard_errors=tuple(float(x) for x in se),
        ceiling=tuple(float(x) for x in exact.mean(axis=0)),
        chance=tuple(r / n for r in ranks),
    )


def _top_rate(higher: NDArray, equal: NDArray, r: int) -> NDArray[np.float64]:
    """Probability that the true profile is in the top r when it ties with ``equal`` − 1 others
    (random order among ties) and ``higher`` score above it."""
    room = np.clip(r - higher, 0, None)
    return np.minimum(1.0, room / np.maximum(equal, 1))


def _collect(
    protos: tuple,
    collection: Any,
    values: NDArray[np.int64],
    surveys: int,
    memo: str,
    gen: np.random.Generator,
) -> list[list[tuple[NDArray[np.int64], NDArray]]]:
    """Per attribute, the (users, reports) batches of every collection."""
    t = values.shape[0]
    memos = [p.new_memo(t) for p in protos]
    out: list[list[tuple[NDArray[np.int64], NDArray]]] = [[] for _ in protos]
    for _ in range(surveys):
        if memo == "fresh":
            memos = [p.new_memo(t) for p in protos]
        if collection.sampling:
            if t < len(protos):
                chosen = gen.integers(0, len(protos), size=t)
            else:
                chosen = collection.assign(t, gen)
            groups = [np.flatnonzero(chosen == j) for j in range(len(protos))]
        else:
            groups = [np.arange(t)] * len(protos)
        for j, (proto, users) in enumerate(zip(protos, groups, strict=True)):
            if users.size == 0:
                continue
            vals = protocol_inputs(proto, values[users, j])
            rep = proto.perturb(vals, memos[j], gen, users=users)
            out[j].append((users, rep))
    return out


def _attribute_ll(
    proto: Any, batches: list[tuple[NDArray[np.int64], NDArray]], t: int, memo: str
) -> NDArray[np.float64]:
    """(t, k) log-likelihood of each target's reports of one attribute (0 without reports).

    Kept memos: a user's reports of the attribute share one memo, so they are scored jointly:
    users are grouped by their number of reports c and each group's c reports aligned."""
    out = np.zeros((t, proto.k))
    if not batches:
        return out
    if memo == "fresh":
        for users, rep in batches:
            out[users] += log_likelihoods(proto, [rep], memoized=True)
        return out
    users = np.concatenate([u for u, _ in batches])
    reports = np.concatenate([np.asarray(r) for _, r in batches])
    order = np.argsort(users, kind="stable")  # by user, then by collection
    users, reports = users[order], reports[order]
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    counts = np.diff(np.r_[starts, users.size])
    rank = np.arange(users.size) - np.repeat(starts, counts)
    per_row_count = np.repeat(counts, counts)
    for count in np.unique(counts).tolist():
        group = users[starts[counts == count]]
        aligned = [reports[(per_row_count == count) & (rank == i)] for i in range(count)]
        out[group] = log_likelihoods(proto, aligned, memoized=True)
    return out
