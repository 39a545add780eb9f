"""Attacks on the applications: RAPPOR's decoder, the set-valued miners, FELIP range queries.

Each attack adds m = round(β·n/(1 − β)) fake users to a collection and compares the
application's output with and without them (docs/attacks.md §10):

- :func:`promote_string` (RAPPOR, [ERL14]): fake clients make a target string's Bloom bits
  look frequent so that the decoder (``longldp.apps.rappor.decode``) detects it; the result is
  the p-value the target reaches. MGA clients set the target's Bloom bits of their cohort and
  pad with random bits up to an honest report's expected weight (the RAPPOR form of
  [CJG21]'s MGA against unary encoding); RIA clients run the real client on the target.
- :func:`promote_items` (SVIM, SVSM, LDPMiner, GFIM): fake users *hold* the target items and
  run the miner honestly (input poisoning; docs/attacks.md §10.2 says precisely why a
  report-space MGA inside their padding-and-sampling oracles is not offered); the result is
  whether and where the targets enter the reported top-k.
- :func:`shift_range` (FELIP): fake users hold the middle of a target query's box (input
  poisoning). The *true* answer moves by β(1 − a) (a the genuine answer, as fractions of all
  users); an unbiased linear estimator would follow it in expectation, but FELIP answers from
  grids under a uniformity assumption with consistency post-processing, so the estimated shift
  is measured, not predicted (docs/attacks.md §10.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.apps.rappor.decode import DecodeResult, decode
from longldp.attacks.threat import fake_count
from longldp.data import SetData, Table, to_longitudinal
from longldp.protocols import Mechanism
from longldp.protocols.rappor import RAPPOR, candidate_map

OWNER = "attacks.apps"
STRING_ATTACKS = ("mga", "ria")


# ---------------------------------------------------------------------- RAPPOR
@dataclass(frozen=True)
class StringPromotion:
    """The target string's decoding with and without the fake clients."""

    target: str
    n: int
    m: int
    before: DecodeResult
    after: DecodeResult
    target_index: int

    @property
    def p_value_before(self) -> float:
        """The target's p-value decoded from the genuine clients alone."""
        return float(self.before.p_value[self.target_index])

    @property
    def p_value_after(self) -> float:
        """The target's p-value with the fake clients."""
        return float(self.after.p_value[self.target_index])

    @property
    def detected_before(self) -> bool:
        """Whether the decoder reports the target without the attack."""
        return bool(self.before.detected[self.target_index])

    @property
    def detected_after(self) -> bool:
        """Whether the decoder reports the target with the fake clients."""
        return bool(self.after.detected[self.target_index])

    @property
    def estimate_after(self) -> float:
        """Clients the decoder attributes to the target after the attack."""
        return float(self.after.estimate[self.target_index])


def mga_string_counts(
    proto: RAPPOR, target_map: NDArray[np.int64], m: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Counts matrix (cohorts, k + 1) of m MGA clients: cohorts uniform; each sets the
    target's Bloom bits of its cohort and ``l`` random other bits, l = round(E[ones of an honest
    report]) − (distinct target bits), E[ones] = b·q* + (k − b)·p* for b distinct Bloom bits.
    Padding columns are drawn Bin(m_j, l/(k − b)) per cohort (exact per bit)."""
    qs, ps = proto.effective
    per = rng.multinomial(m, np.full(proto.m, 1.0 / proto.m))
    out = np.zeros((proto.m, proto.k + 1), dtype=np.int64)
    out[:, 0] = per
    for j in range(proto.m):
        bits = np.unique(target_map[j])
        b = bits.size
        others = np.setdiff1d(np.arange(proto.k), bits)
        pad = int(np.clip(round(b * qs + (proto.k - b) * ps) - b, 0, others.size))
        out[j, 1 + bits] += per[j]
        if others.size and per[j]:
            out[j, 1 + others] += rng.binomial(per[j], pad / others.size, size=others.size)
    return out


def promote_string(
    proto: RAPPOR,
    names: list[str],
    counts: ArrayLike,
    target: str,
    beta: float,
    *,
    attack: str = "MGA",
    candidates: list[str] | None = None,
    rng: Any = None,
    **decode_options: Any,
) -> StringPromotion:
    """Decode a collection of ``counts[i]`` clients holding ``names[i]``, without and with
    β·(n + m) fake clients promoting ``target``; ``candidates`` (default: names + target)."""
    bloom = isinstance(proto, Mechanism) and proto.report_kind == "cohort-bits"
    if not bloom or proto.domain.codes:
        raise ValueError(
            f"{OWNER}: promote_string attacks RAPPOR's Bloom-filter decoder: 'proto' must be "
            f"RAPPOR or RAPPOR-one-time; got {getattr(proto, 'name', proto)!r}."
        )
    attack = check.choice(OWNER, "attack", attack, STRING_ATTACKS).upper()
    cnt = np.asarray(counts, dtype=np.int64)
    if cnt.ndim != 1 or cnt.size != len(names) or cnt.min(initial=0) < 0 or cnt.sum() < 1:
        raise ValueError(f"{OWNER}: 'counts' must be one non-negative count per name.")
    if not isinstance(target, str) or not target:
        raise ValueError(f"{OWNER}: 'target' must be a non-empty string; got {target!r}.")
    cands = list(candidates) if candidates is not None else list(dict.fromkeys([*names, target]))
    if target not in cands:
        raise ValueError(f"{OWNER}: the target {target!r} must be one of the candidates.")
    gen = np.random.default_rng(rng)
    n = int(cnt.sum())
    m = fake_count(n, beta)
    bloom = candidate_map(cands, proto.h, proto.k, proto.m)
    where = {c: i for i, c in enumerate(cands)}
    present = np.flatnonzero(cnt)
    idx = np.array([where.get(names[i], -1) for i in present])
    own = candidate_map([names[i] for i in present[idx < 0]], proto.h, proto.k, proto.m)
    rows = np.empty((present.size, proto.m, proto.h), dtype=np.int64)
    rows[idx >= 0] = bloom[idx[idx >= 0]]
    rows[idx < 0] = own
    genuine = proto.sample_counts([names[i] for i in present], cnt[present], gen, bloom_map=rows)
    t = where[target]
    if attack == "RIA":
        fake = proto.sample_counts([target], [m], gen, bloom_map=bloom[t : t + 1])
    else:
        fake = mga_string_counts(proto, bloom[t], m, gen)
    before = decode(proto, genuine, cands, bloom_map=bloom, **decode_options)
    after = decode(proto, genuine + fake, cands, bloom_map=bloom, **decode_options)
    return StringPromotion(target, n, m, before, after, t)


# ---------------------------------------------------------------------- set-valued miners
@dataclass(frozen=True)
class ItemPromotion:
    """Top-k per timestamp without and with the fake users, and which targets entered it."""

    targets: tuple[tuple[int, ...], ...]
    m: int
    before: Any
    after: Any

    def _in_topk(self, result: Any) -> NDArray[np.bool_]:
        return np.array(
            [[key in set(top.keys) for key in self.targets] for top in result.topk], dtype=bool
        )

    @property
    def in_topk_before(self) -> NDArray[np.bool_]:
        """(τ, number of targets): target in the reported top-k without the attack."""
        return self._in_topk(self.before)

    @property
    def in_topk_after(self) -> NDArray[np.bool_]:
        """(τ, number of targets): target in the reported top-k with the fake users."""
        return self._in_topk(self.after)

    @property
    def promoted_share(self) -> float:
        """Share of (timestamp, target) pairs in the top-k after the attack."""
        return float(self.in_topk_after.mean())


def with_fake_sets(data: SetData, itemset: NDArray[np.int64], m: int) -> SetData:
    """``data`` plus m users holding exactly ``itemset``."""
    fake_items = np.tile(np.sort(itemset), m)
    indptr = np.concatenate(
        [data.indptr, data.indptr[-1] + itemset.size * np.arange(1, m + 1)]
    ).astype(data.indptr.dtype)
    items = np.concatenate([data.items, fake_items]).astype(data.items.dtype)
    return SetData(indptr, items, data.domain, data.name)


def promote_items(
    data: SetData,
    miner: Any,
    targets: ArrayLike,
    beta: float,
    *,
    tau: int = 1,
    rng: Any = None,
    engine: str = "count-level",
    itemset: bool = False,
) -> ItemPromotion:
    """Run ``miner`` (SVIM, SVSM, LDPMiner or GFIM: anything with ``run(data, rng, engine)``
    returning per-timestamp ``topk``) on ``data`` over τ timestamps, without and with m fake
    users holding the target items. ``itemset=True`` scores the targets as one itemset (SVSM).
    """
    if not isinstance(data, SetData):
        raise ValueError(f"{OWNER}: 'data' must be a SetData; got {type(data).__name__}.")
    tau = check.integer(OWNER, "tau", tau, minimum=1)
    T = np.asarray(targets, dtype=np.int64)
    if T.ndim != 1 or T.size == 0 or T.min() < 0 or T.max() >= data.domain.size:
        raise ValueError(
            f"{OWNER}: 'targets' must be a non-empty list of items in [0, {data.domain.size}); "
            f"got {targets!r}."
        )
    m = fake_count(data.n, beta)
    gen = np.random.default_rng(rng)
    perm_rng, run_rng = gen.spawn(2)
    poisoned = with_fake_sets(data, T, m)
    clean_t = to_longitudinal(data, tau, np.random.default_rng(perm_rng)) if tau > 1 else data
    dirty_t = (
        to_longitudinal(poisoned, tau, np.random.default_rng(perm_rng)) if tau > 1 else (poisoned)
    )
    seeds = np.random.default_rng(run_rng).integers(0, 2**63, size=2)
    before = miner.run(clean_t, int(seeds[0]), engine)
    after = miner.run(dirty_t, int(seeds[1]), engine)
    keys = (tuple(sorted(T.tolist())),) if itemset else tuple((int(t),) for t in T)
    return ItemPromotion(keys, m, before, after)


# ---------------------------------------------------------------------- FELIP
@dataclass(frozen=True)
class RangeShift:
    """A target query's estimated and true answers (fractions of all users) per timestamp."""

    before: NDArray[np.float64]
    after: NDArray[np.float64]
    truth_before: NDArray[np.float64]
    truth_after: NDArray[np.float64]
    beta: float

    @property
    def shift(self) -> float:
        """Mean over timestamps of the estimated answer's change."""
        return float(np.mean(self.after - self.before))

    @property
    def truth_shift(self) -> float:
        """β(1 − a): how much the true answer (a fraction of n + m users) moves."""
        return float(np.mean(self.truth_after - self.truth_before))

    @property
    def linear_prediction(self) -> float:
        """β(1 − â): the shift a linear unbiased reading of the fake rows would give, with the
        clean estimate â in place of a."""
        return float(self.beta * (1.0 - np.mean(self.before)))


def with_fake_rows(table: Table, values: dict[str, int], m: int) -> Table:
    """``table`` plus m rows holding ``values`` on their attributes (the rest: code 0)."""
    cols = {}
    for name in table.attributes:
        fill = int(values.get(name, 0))
        cols[name] = np.concatenate([table[name], np.full(m, fill, dtype=table[name].dtype)])
    return Table(cols, dict(table.domains), table.name)


def shift_range(
    table: Table,
    workload: Any,
    query: int,
    beta: float,
    *,
    rng: Any = None,
    **felip_options: Any,
) -> RangeShift:
    """FELIP on ``table`` without and with m fake rows inside the box of ``workload.queries
    [query]`` (each constrained attribute at the middle of its range); ``felip_options`` go to
    :func:`longldp.apps.felip.pipeline.run_felip` (oracle, eps, alpha, tau, engine, ...)."""
    from longldp.apps.felip.pipeline import run_felip

    q = workload.queries[
        check.integer(OWNER, "query", query, minimum=0, maximum=len(workload.queries) - 1)
    ]
    m = fake_count(table.n, beta)
    names = workload.schema.names
    values = {names[a]: (lo + hi) // 2 for a, lo, hi in zip(q.attributes, q.lo, q.hi, strict=True)}
    poisoned = with_fake_rows(table.select(names), values, m)
    gen = np.random.default_rng(rng)
    a_rng, b_rng = gen.spawn(2)
    clean = run_felip(table.select(names), workload, rng=a_rng, **felip_options)
    dirty = run_felip(poisoned, workload, rng=b_rng, **felip_options)
    return RangeShift(
        clean.answers[:, query],
        dirty.answers[:, query],
        clean.truth[:, query],
        dirty.truth[:, query],
        m / (table.n + m),
    )
