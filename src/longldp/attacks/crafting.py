"""Fake reports of Cao, Jia and Gong's three attacks, and each report's expected support.

Cao, Jia and Gong, "Data Poisoning Attacks to Local Differential Privacy Protocols", USENIX
Security 2021 ([CJG21]), §3.2–§3.5:

- **RPA** (random perturbed-value attack): a report drawn uniformly from the report space.
- **RIA** (random item attack): a target drawn uniformly from T, then the protocol run
  honestly on it.
- **MGA** (maximal gain attack): the report that supports the most targets.

Every function here works from a protocol's report kind (:mod:`longldp.attacks.kinds`) and its
public parameters, so it applies to every protocol of the registry with that kind, one-shot or
longitudinal: a chain's reports live in the same space as its one-shot oracle's. What a crafted
report buys is its *expected support*: E[1{report supports v}] for every v (for dBitFlipPM the
pair (ones, samplers) per bucket). Fed to the protocol's own estimator as the support of a
population of one user it gives the report's reading φ(v) = estimate(s̄, n = 1), from which
every gain follows (docs/attacks.md §3).

Memo space (docs/attacks.md §5.3): a fake device of a two-round chain may instead craft its
*round-1 memo* with MGA and run round 2 honestly (:func:`craft_memos`, :func:`memo_reports`),
so that its reports follow exactly the law of an honest device holding that memo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import privacy
from longldp.attacks import kinds, occupancy
from longldp.attacks.threat import check_targets
from longldp.protocols import FrequencyOracle
from longldp.protocols.base import grr_round

OWNER = "attacks"
ATTACKS = ("RPA", "RIA", "MGA")
#: Hash functions a fake user of a hashing oracle samples in MGA (docs/attacks.md §3.3).
HASH_TRIALS = 100
#: Cells of the largest temporary (users × trials × targets) of the hash search.
_SEARCH_CELLS = 1 << 21
#: Hadamard rows searched exhaustively up to this many; beyond, a seeded sample of rows.
HADAMARD_SEARCH_ROWS = 1 << 16
#: Largest enumerated report space MGA searches output by output (``enumerated`` kind).
ENUMERATED_SEARCH = 1 << 22
#: Outputs whose support sets are computed at once (bounds the (outputs × k) temporaries).
_OUTPUT_BLOCK = 1 << 12
_SEED_LIMIT = 1 << 63


def check_attack(attack: str, owner: str = OWNER) -> str:
    """One of RPA, RIA, MGA (case-insensitive)."""
    if not isinstance(attack, str) or attack.upper() not in ATTACKS:
        raise ValueError(f"{owner}: 'attack' must be one of {', '.join(ATTACKS)}; got {attack!r}.")
    return attack.upper()


def _rng(rng: Any) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


# ---------------------------------------------------------------------- helpers per kind
def mga_padding(proto: FrequencyOracle, r: int, memo: bool = False) -> int:
    """Non-target ones of an MGA unary report: round(E[#ones of an honest report]) − r.

    [CJG21] §3.4 pads the r target bits with l random non-target bits so that the report has
    as many ones as a genuine one (P1 + (k − 1)P0) and does not stand out by its weight; in
    memo space the honest memo weight is p1 + (k − 1)q1. Clipped to [0, k − r].
    """
    k = proto.k
    mean = (proto.p1 + (k - 1) * proto.q1) if memo else (proto.P1 + (k - 1) * proto.P0)
    return int(np.clip(round(mean) - r, 0, k - r))


def _subset_rows(rng: np.random.Generator, m: int, pool: int, size: int) -> NDArray[np.int64]:
    """m rows, each a uniform ``size``-subset of [0, pool) (the smallest of random keys)."""
    if size == 0 or m == 0:
        return np.zeros((m, 0), dtype=np.int64)
    if size >= pool:
        return np.broadcast_to(np.arange(pool), (m, pool)).copy()
    out = np.empty((m, size), dtype=np.int64)
    step = max(1, (1 << 22) // pool)
    for start in range(0, m, step):
        keys = rng.random((min(step, m - start), pool))
        out[start : start + step] = np.argpartition(keys, size - 1, axis=1)[:, :size]
    return out


def _unary_rows(k: int, ones: list[NDArray[np.int64]], m: int) -> NDArray[np.uint8]:
    """Packed k-bit rows with ones at the given (m, ·) index arrays."""
    bits = np.zeros((m, k), dtype=bool)
    rows = np.arange(m)[:, None]
    for idx in ones:
        if idx.size:
            bits[rows, idx] = True
    return np.packbits(bits, axis=1)


def hash_buckets(proto: FrequencyOracle, hash_ids: ArrayLike, values: ArrayLike) -> NDArray:
    """H(v) of a hashing oracle for report ids (per-user seeds, pool indices or Hadamard rows),
    broadcasting: its report kind's public hash family."""
    return kinds.hash_family(proto).buckets(hash_ids, values)


def _hash_records(proto: FrequencyOracle, ids: NDArray[np.int64], buckets: NDArray) -> NDArray:
    return kinds.hash_family(proto).records(ids, buckets)


@dataclass(frozen=True)
class OptimalChoices:
    """Every (hash id or row, bucket) that puts the most targets together; fake users pick one
    uniformly (a public hash pool or the Hadamard rows: a finite, public search space)."""

    ids: NDArray[np.int64]
    buckets: NDArray[np.int64]
    best: int

    def support(self, proto: FrequencyOracle, kind: str) -> NDArray[np.float64]:
        """E[1{report supports v}] over the uniform choice, for every v of [0, k)."""
        values = np.arange(proto.k, dtype=np.int64)
        total = np.zeros(proto.k)
        for start in range(0, self.ids.size, 4096):
            ids = self.ids[start : start + 4096, None]
            got = self.buckets[start : start + 4096, None]
            total += (hash_buckets(proto, ids, values[None, :]) == got).sum(axis=0)
        return total / self.ids.size


def optimal_choices(proto: FrequencyOracle, targets: NDArray[np.int64]) -> OptimalChoices:
    """The MGA search over a public, finite family: a hash pool or the Hadamard rows."""
    kind = kinds.attack_kind(proto)
    if kind == "hadamard":
        m = kinds.hadamard_rows(proto)
        if m - 1 <= HADAMARD_SEARCH_ROWS:
            rows = np.arange(1, m, dtype=np.int64)
        else:  # a fixed sample: the choice set must not depend on the caller's stream
            gen = np.random.default_rng(np.random.SeedSequence([m, *targets.tolist()]))
            rows = np.unique(gen.integers(1, m, HADAMARD_SEARCH_ROWS))
        if rows.size == 0:  # k = 2 has m = 2: row 1 only
            rows = np.arange(1, 2, dtype=np.int64)
        par = hash_buckets(proto, rows[:, None], targets[None, :])  # (rows, r) parities
        ones = par.sum(axis=1)
        counts = np.stack([targets.size - ones, ones], axis=1)  # targets with parity 0 / 1
    else:
        pool = kinds.hash_family(proto).ids()
        assert pool is not None
        rows = pool
        b = hash_buckets(proto, rows[:, None], targets[None, :])  # (pool, r)
        g = kinds.hash_range(proto)
        counts = np.stack([(b == j).sum(axis=1) for j in range(g)], axis=1)
    best = int(counts.max())
    fi, bi = np.nonzero(counts == best)
    return OptimalChoices(rows[fi], bi.astype(np.int64), best)


def search_hashes(
    proto: FrequencyOracle, targets: NDArray[np.int64], m: int, trials: int, rng: Any
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Per fake user: the best of ``trials`` random seeds (hash id, bucket, targets gathered).

    Per-user hashing ([CJG21] §3.5): each fake user draws ``trials`` seeds and keeps the one
    whose fullest bucket holds the most targets (first on ties), with that bucket.
    """
    gen = _rng(rng)
    r = targets.size
    ids = np.empty(m, dtype=np.int64)
    buckets = np.empty(m, dtype=np.int64)
    gathered = np.empty(m, dtype=np.int64)
    step = max(1, _SEARCH_CELLS // max(1, trials * r * r))
    for start in range(0, m, step):
        rows = min(step, m - start)
        seeds = gen.integers(0, _SEED_LIMIT, size=(rows, trials), dtype=np.int64)
        b = hash_buckets(proto, seeds[:, :, None], targets[None, None, :])  # (rows, S, r)
        same = (b[:, :, :, None] == b[:, :, None, :]).sum(axis=3)  # targets sharing i's bucket
        fullest = same.max(axis=2)  # (rows, S)
        pick = fullest.argmax(axis=1)
        at = np.arange(rows)
        lead = same[at, pick].argmax(axis=1)
        ids[start : start + rows] = seeds[at, pick]
        buckets[start : start + rows] = b[at, pick, lead]
        gathered[start : start + rows] = fullest[at, pick]
    return ids, buckets, gathered


def _pick(rng: np.random.Generator, choices: OptimalChoices, m: int) -> tuple[NDArray, NDArray]:
    at = rng.integers(0, choices.ids.size, size=m)
    return choices.ids[at], choices.buckets[at]


def _uses_search_space(proto: FrequencyOracle, kind: str) -> bool:
    """MGA searches the whole family when it is public and listed (Hadamard rows, a pool)."""
    return kind == "hadamard" or kinds.hash_family(proto).size is not None


def _output_blocks(proto: FrequencyOracle) -> Any:
    """Blocks of the enumerated outputs [0, S) of an ``enumerated`` report kind."""
    size = int(proto.report_kind.output_space_size(proto))
    if size > ENUMERATED_SEARCH:
        raise ValueError(
            f"{OWNER}: '{proto.name}' has {size} outputs; MGA searches at most "
            f"{ENUMERATED_SEARCH} output by output."
        )
    for start in range(0, size, _OUTPUT_BLOCK):
        yield np.arange(start, min(size, start + _OUTPUT_BLOCK), dtype=np.int64)


def best_outputs(proto: FrequencyOracle, targets: NDArray[np.int64]) -> NDArray[np.int64]:
    """MGA over an enumerated report space: every output that supports the most targets (its
    report kind's ``supports``); a fake user picks one uniformly."""
    kind, best, found = proto.report_kind, -1, []
    for outputs in _output_blocks(proto):
        hits = kind.supports(proto, outputs)[:, targets].sum(axis=1)
        top = int(hits.max())
        if top > best:
            best, found = top, []
        if top == best:
            found.append(outputs[hits == best])
    return np.concatenate(found)


def mean_support(proto: FrequencyOracle, outputs: NDArray[np.int64] | None) -> NDArray:
    """E[1{report supports v}] of a report uniform over ``outputs`` (None: every output)."""
    kind = proto.report_kind
    blocks = (
        _output_blocks(proto)
        if outputs is None
        else [outputs[i : i + _OUTPUT_BLOCK] for i in range(0, outputs.size, _OUTPUT_BLOCK)]
    )
    total, count = np.zeros(proto.k), 0
    for block in blocks:
        total += kind.supports(proto, block).sum(axis=0)
        count += block.size
    return total / count


# ---------------------------------------------------------------------- reports
def craft_reports(
    proto: FrequencyOracle,
    attack: str,
    targets: ArrayLike,
    m: int,
    rng: Any = None,
    *,
    hash_trials: int = HASH_TRIALS,
) -> NDArray[Any]:
    """``m`` fake reports of ``attack`` against ``targets``, as ``proto``'s report records.

    The records are what a real client sends (``proto.support_counts`` and
    ``proto.encode_reports`` accept them). ``hash_trials`` is the search width S of MGA
    against per-user hashing (docs/attacks.md §3.3).
    """
    attack = check_attack(attack)
    kind = kinds.attack_kind(proto)
    T = check_targets(targets, proto.estimate_size)
    gen = _rng(rng)
    k, r = proto.k, T.size
    if attack == "RIA":
        return _honest_reports(proto, kind, T[gen.integers(0, r, size=m)], gen)
    if kind == "symbol":
        if attack == "RPA":
            return gen.integers(0, k, size=m).astype(np.int64)
        return T[gen.integers(0, r, size=m)]
    if kind == "enumerated":  # a uniform output, or a uniform one of those MGA finds best
        if attack == "RPA":
            size = int(proto.report_kind.output_space_size(proto))
            outputs = gen.integers(0, size, size=m).astype(np.int64)
        else:
            best = best_outputs(proto, T)
            outputs = best[gen.integers(0, best.size, size=m)]
        return proto.report_kind.records(proto, outputs)
    if kind in kinds.BIT_SET_KINDS:
        return kinds.wrap_unary(proto, _bit_set_reports(proto, kind, attack, T, m, gen))
    if kind in ("hashed", "hadamard"):
        g = kinds.hash_range(proto)
        if attack == "RPA":  # a function drawn as a client draws it, a uniform bucket
            ids = kinds.hash_family(proto).draw(m, gen)
            return _hash_records(proto, ids.astype(np.int64), gen.integers(0, g, size=m))
        if _uses_search_space(proto, kind):
            ids, buckets = _pick(gen, optimal_choices(proto, T), m)
        else:
            ids, buckets, _ = search_hashes(proto, T, m, hash_trials, gen)
        return _hash_records(proto, ids, buckets)
    return _bucket_reports(proto, attack, T, m, gen)


def _bit_set_reports(
    proto: FrequencyOracle,
    kind: str,
    attack: str,
    T: NDArray[np.int64],
    m: int,
    gen: np.random.Generator,
) -> NDArray[np.uint8]:
    """Packed k-bit rows of RPA or MGA against unary encoding or subset selection.

    Unary RPA: every bit a fair coin. Subset RPA: a uniform ω-subset (the report space of SS
    is the C(k, ω) subsets, and the server refuses any other weight). MGA: every target and
    :func:`bit_set_padding` random non-targets; a subset report with r > ω targets holds a
    uniform ω of them ([CJG21] §3.4's MGA, with SS's fixed weight).
    """
    k, r = proto.k, T.size
    if attack == "RPA":
        if kind == "unary":
            return np.packbits(gen.random((m, k)) < 0.5, axis=1)
        return _unary_rows(k, [_subset_rows(gen, m, k, kinds.subset_size(proto))], m)
    if kind == "subset" and r > kinds.subset_size(proto):
        return _unary_rows(k, [T[_subset_rows(gen, m, r, kinds.subset_size(proto))]], m)
    others = np.setdiff1d(np.arange(k), T)
    pad = others[_subset_rows(gen, m, others.size, bit_set_padding(proto, kind, r))]
    return _unary_rows(k, [np.broadcast_to(T, (m, r)), pad], m)


def bit_set_padding(proto: FrequencyOracle, kind: str, r: int) -> int:
    """Non-target values in an MGA bit-set report: unary :func:`mga_padding`; subset ω − r
    (at least 0), so that the report holds exactly ω values."""
    if kind == "subset":
        return max(0, kinds.subset_size(proto) - r)
    return mga_padding(proto, r)


def _honest_reports(
    proto: FrequencyOracle, kind: str, values: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[Any]:
    """RIA: the protocol's own client path on the chosen targets (a fresh population)."""
    if kind == "bucket-bits":
        values = first_value_of_bucket(proto, values)
    return proto.perturb(values, proto.new_memo(max(1, values.size)), rng)


def first_value_of_bucket(proto: FrequencyOracle, buckets: NDArray[np.int64]) -> NDArray:
    """The smallest value v with ⌊v·b/k⌋ = bucket (a dBitFlipPM user holding that bucket)."""
    b = kinds.n_buckets(proto)
    values = -((-buckets * proto.k) // b)  # ceil(j·k/b)
    assert np.array_equal(privacy.bucket_of(values, proto.k, b), buckets)
    return values


def _bucket_reports(
    proto: FrequencyOracle, attack: str, T: NDArray[np.int64], m: int, gen: np.random.Generator
) -> NDArray[Any]:
    """dBitFlipPM: d sampled buckets and their bits (RPA: random; MGA: targets first, bit 1)."""
    b, d = kinds.n_buckets(proto), kinds.sampled_buckets(proto)
    out = np.empty(m, dtype=proto.empty_records().dtype)
    if attack == "RPA":
        out["buckets"] = np.sort(_subset_rows(gen, m, b, d), axis=1)
        out["bits"] = gen.integers(0, 2, size=(m, d))
        return out
    r = T.size
    if r >= d:
        chosen = T[_subset_rows(gen, m, r, d)]
        bits = np.ones((m, d), dtype=np.uint8)
    else:
        others = np.setdiff1d(np.arange(b), T)
        rest = others[_subset_rows(gen, m, others.size, d - r)]
        chosen = np.concatenate([np.broadcast_to(T, (m, r)), rest], axis=1)
        bits = np.concatenate(
            [np.ones((m, r), dtype=np.uint8), np.zeros((m, d - r), dtype=np.uint8)], axis=1
        )
    order = np.argsort(chosen, axis=1)
    out["buckets"] = np.take_along_axis(chosen, order, axis=1)
    out["bits"] = np.take_along_axis(bits, order, axis=1)
    return out


# ---------------------------------------------------------------------- expected support
def expected_support(
    proto: FrequencyOracle,
    attack: str,
    targets: ArrayLike,
    *,
    hash_trials: int = HASH_TRIALS,
) -> NDArray[np.float64]:
    """E[support] of one fake report of ``attack``: shape ``proto.support_shape`` per report.

    Closed forms (docs/attacks.md §3): RPA uniform report → 1/k (symbol), ½ (unary), ω/k
    (subset), 1/g (hashing), ½ (Hadamard); RIA → P0 + (P1 − P0)/r on targets, P0 elsewhere;
    MGA → 1/r on targets (symbol), 1 on targets and l/(k − r) elsewhere (unary; subset with
    l = ω − r, or ω/r on targets and 0 elsewhere when r > ω), E[M_S]/r on targets and 1/g
    elsewhere (per-user hashing, :mod:`longldp.attacks.occupancy`), the optimal set's average
    (hash pool, Hadamard rows, the best outputs of an enumerated report space).
    """
    attack = check_attack(attack)
    kind = kinds.attack_kind(proto)
    T = check_targets(targets, proto.estimate_size)
    k, r = proto.k, T.size
    on_target = np.zeros(proto.estimate_size, dtype=bool)
    on_target[T] = True
    if kind == "bucket-bits":
        return _bucket_support(proto, attack, on_target, r)
    if attack == "RIA":
        return np.where(on_target, proto.P0 + (proto.P1 - proto.P0) / r, proto.P0)
    if kind == "symbol":
        return np.full(k, 1.0 / k) if attack == "RPA" else np.where(on_target, 1.0 / r, 0.0)
    if kind == "enumerated":  # the mean support set of the outputs the attack draws from
        return mean_support(proto, None if attack == "RPA" else best_outputs(proto, T))
    if kind in kinds.BIT_SET_KINDS:
        if attack == "RPA":
            return np.full(k, 0.5 if kind == "unary" else kinds.subset_size(proto) / k)
        if kind == "subset" and r > kinds.subset_size(proto):
            return np.where(on_target, kinds.subset_size(proto) / r, 0.0)
        pad = bit_set_padding(proto, kind, r)
        return np.where(on_target, 1.0, pad / (k - r) if k > r else 0.0)
    g = kinds.hash_range(proto)
    if attack == "RPA":
        return np.full(k, 1.0 / g)
    if _uses_search_space(proto, kind):
        return optimal_choices(proto, T).support(proto, kind)
    best = occupancy.expected_best(r, g, hash_trials)
    return np.where(on_target, best / r, 1.0 / g)


def _bucket_support(
    proto: FrequencyOracle, attack: str, on_target: NDArray[np.bool_], r: int
) -> NDArray[np.float64]:
    """dBitFlipPM: rows (ones, samplers) per bucket of one fake report."""
    b, d = kinds.n_buckets(proto), kinds.sampled_buckets(proto)
    p, q = proto.p1, proto.q1
    if attack == "RPA":
        return np.stack([np.full(b, d / (2 * b)), np.full(b, d / b)])
    if attack == "RIA":
        ones = np.where(on_target, (d / b) * (p / r + q * (1 - 1 / r)), (d / b) * q)
        return np.stack([ones, np.full(b, d / b)])
    hit = min(1.0, d / r)
    rest = (d - r) / (b - r) if (r < d and b > r) else 0.0
    return np.stack([np.where(on_target, hit, 0.0), np.where(on_target, hit, rest)])


def reading(proto: FrequencyOracle, support: ArrayLike) -> NDArray[np.float64]:
    """φ = the estimator applied to one report's support: what one report adds, f̂ of n = 1.

    f̂ is affine in the support, so N reports whose mean support is s̄ read as φ(s̄); for
    pure oracles φ(v) = (s̄_v − P0)/(P1 − P0) ([CJG21] eq. 3; docs/math.md §1.1).
    """
    return proto.estimate(np.asarray(support, dtype=np.float64), 1)


# ---------------------------------------------------------------------- memo space
@dataclass
class CraftedMemos:
    """Round-1 memos crafted with MGA for m fake devices of a chain (memo-mimic, §5.3)."""

    kind: str
    memo: NDArray[Any]  # symbol: values; unary: packed bits; hashed/hadamard: buckets
    hash_ids: NDArray[np.int64] | None = None


def _check_memo_space(proto: FrequencyOracle, kind: str, owner: str) -> None:
    if not proto.longitudinal or kind == "bucket-bits":
        raise ValueError(
            f"{owner}: memo-space attacks need a two-round memoizing chain; '{proto.name}' "
            + (
                "is one-shot."
                if not proto.longitudinal
                else "has one round (its memo is the report): use the 'persistent' variant."
            )
        )


def craft_memos(
    proto: FrequencyOracle,
    targets: ArrayLike,
    m: int,
    rng: Any = None,
    *,
    hash_trials: int = HASH_TRIALS,
) -> CraftedMemos:
    """MGA in memo space: the round-1 state that supports the most targets.

    L-GRR: the memo is a uniform target. UE chains: target bits set plus
    round(p1 + (k − 1)q1) − r random others (an honest memo's weight). LOLOHA / L-SH: the
    hash function (or Hadamard row) and bucket of MGA (docs/attacks.md §5.3).
    """
    kind = kinds.attack_kind(proto)
    _check_memo_space(proto, kind, OWNER)
    T = check_targets(targets, proto.estimate_size)
    gen = _rng(rng)
    k, r = proto.k, T.size
    if kind == "symbol":
        return CraftedMemos(kind, T[gen.integers(0, r, size=m)])
    if kind == "unary":
        others = np.setdiff1d(np.arange(k), T)
        pad = others[_subset_rows(gen, m, others.size, mga_padding(proto, r, memo=True))]
        return CraftedMemos(kind, _unary_rows(k, [np.broadcast_to(T, (m, r)), pad], m))
    if _uses_search_space(proto, kind):
        ids, buckets = _pick(gen, optimal_choices(proto, T), m)
    else:
        ids, buckets, _ = search_hashes(proto, T, m, hash_trials, gen)
    return CraftedMemos(kind, buckets, ids)


def memo_reports(proto: FrequencyOracle, memos: CraftedMemos, rng: Any = None) -> NDArray[Any]:
    """Round 2 run honestly on crafted memos: the reports an honest device with them sends.

    Symbol and hashed chains: keep the memo with p2, else a uniform other symbol
    (``protocols.base.grr_round``); UE chains: each bit 1 with p2 where the memo bit is set,
    q2 elsewhere (docs/math.md §3).
    """
    gen = _rng(rng)
    if memos.kind == "symbol":
        return grr_round(memos.memo, proto.k, proto.p2, gen)
    if memos.kind == "unary":
        bits = np.unpackbits(memos.memo, axis=1, count=proto.k).astype(bool)
        u = gen.random(bits.shape)
        out = np.packbits(np.where(bits, u < proto.p2, u < proto.q2), axis=1)
        return kinds.wrap_unary(proto, out)
    assert memos.hash_ids is not None
    buckets = grr_round(memos.memo, kinds.hash_range(proto), proto.p2, gen)
    return _hash_records(proto, memos.hash_ids, buckets)


def expected_memo_support(
    proto: FrequencyOracle, targets: ArrayLike, *, hash_trials: int = HASH_TRIALS
) -> NDArray[np.float64]:
    """E[support] of one report of a memo-mimic device: q2 + (p2 − q2)·Pr[memo points at v].

    Pr[memo points at v]: L-GRR 1/r on targets; UE chains 1 on targets, l'/(k − r) elsewhere;
    LOLOHA E[M_S]/r on targets and (for non-targets) the hash is independent, so 1/g overall.
    """
    kind = kinds.attack_kind(proto)
    _check_memo_space(proto, kind, OWNER)
    T = check_targets(targets, proto.estimate_size)
    k, r = proto.k, T.size
    p2, q2 = proto.p2, proto.q2
    on = np.zeros(k, dtype=bool)
    on[T] = True
    if kind == "symbol":
        return np.where(on, q2 + (p2 - q2) / r, q2)
    if kind == "unary":
        pad = mga_padding(proto, r, memo=True) / (k - r) if k > r else 0.0
        return np.where(on, p2, q2 + (p2 - q2) * pad)
    g = kinds.hash_range(proto)
    if _uses_search_space(proto, kind):
        point = optimal_choices(proto, T).support(proto, kind)
        # Pr[H(v) = memo]; a report supports v iff the reported bucket is H(v).
        return q2 + (p2 - q2) * point
    best = occupancy.expected_best(r, g, hash_trials)
    return np.where(on, q2 + (p2 - q2) * best / r, 1.0 / g)
