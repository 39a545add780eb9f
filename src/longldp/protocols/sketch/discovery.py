"""Heavy-hitter discovery over open item spaces: PEM, TreeHist and SFP as vectorized kernels.

Items are ``width``-bit codes (:mod:`longldp.protocols.sketch.items`); nobody lists them. The
server learns them in rounds (docs/math.md §21.6–§21.8):

- **PEM** (prefix extending, [WLJ19] §4): users are split into R groups, group r reports the
  first ℓ_r bits of its item through a frequency oracle at the full ε (OLH by default); the
  server estimates every candidate prefix of round r, keeps the significant ones (or the top
  k), and extends each kept prefix by ℓ_{r+1} − ℓ_r bits to form round r + 1's candidates.
- **TreeHist** ([BNST17] §3): the same prefix tree from the root one bit (``step``) at a time;
  every user reports one level's prefix with a share of ε and her whole item with the rest,
  through a final oracle that estimates the frequencies of the leaves found.
- **SFP** (sequence fragment puzzle, [APP17] §4): every user reports her whole item to a CMS and
  one fragment — the item's 8-bit hash, and w bits at a position p drawn uniformly and sent in
  the clear — to a CMS per position; the server finds the frequent (hash, fragment) pairs of each
  position, joins the fragments that share a hash into candidate items and keeps the candidates
  the item CMS finds frequent.

Devices never need the candidates: a round is a *group* of devices and a prefix length, so one
answer per device per round (per epoch, longitudinally) suffices. Each round's test keeps a
candidate when f̂ > T = z_{1 − α/M}·σ₀ (M candidates, σ₀ the null standard error): at most α
expected false candidates per round, and an item of frequency f is found with the probability of
:func:`detection_probability`. Longitudinal discovery (:func:`discover_over_time`) keeps each
device in its group and memoizes its prefix reports per hashed bucket (OLOLOHA's chain), so a
device that reports t epochs from d distinct memos has spent min(t·ε1, d·ε∞) per oracle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import sketch as formulas
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import grr_round
from longldp.protocols.lh import mix_hash
from longldp.protocols.sketch import oracles
from longldp.protocols.sketch.items import prefix_bits

SELECT_RULES = ("threshold", "top")
#: prune(prefixes, bits) → which candidate prefixes can be held (e.g. ``TextItems.valid_prefix``).
Prune = Callable[[NDArray[np.uint64], int], NDArray[np.bool_]]
ROUND_ORACLES = ("olh", "hcms", "cms")
#: Largest number of candidates one round may test (2^start+step for the first round).
MAX_TESTS = 1 << 22
#: Cells (users × candidates) hashed per block by the OLH support kernel.
BLOCK_CELLS = 1 << 20


# --------------------------------------------------------------------------------------------
# The round oracle: OLH over prefix keys (per-user hash seeds), or a sketch
# --------------------------------------------------------------------------------------------


def olh_reports(
    keys: ArrayLike, g: int, keep: float, rng: RandomSource, seeds: ArrayLike | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(seed, bucket): a fresh 63-bit hash seed per user (or hers, kept) and GRR over g buckets
    of H_seed(key) ([WAN17] §4.4; math §2.3)."""
    k = np.asarray(keys, dtype=np.uint64)
    s = (
        np.asarray(rng.integers(0, 1 << 63, size=k.size), dtype=np.int64)
        if seeds is None
        else np.asarray(seeds, dtype=np.int64)
    )
    return s, grr_round(mix_hash(s, k, g), g, keep, rng)


def olh_supports(
    seeds: ArrayLike, buckets: ArrayLike, candidates: ArrayLike, g: int
) -> NDArray[np.int64]:
    """C(c) = #{u : H_{s_u}(c) = bucket_u} for every candidate, in cache-sized blocks."""
    s, b = np.asarray(seeds, dtype=np.int64), np.asarray(buckets, dtype=np.int64)
    c = np.asarray(candidates, dtype=np.uint64)
    total = np.zeros(c.size, dtype=np.int64)
    if c.size == 0:
        return total
    step = max(1, BLOCK_CELLS // c.size)
    for start in range(0, s.size, step):
        blk = slice(start, start + step)
        total += np.count_nonzero(mix_hash(s[blk, None], c[None, :], g) == b[blk, None], axis=0)
    return total


@dataclass(frozen=True)
class RoundOracle:
    """The frequency oracle of a discovery round over prefix keys.

    ``kind`` "olh" (PEM's: per-user hash seeds, exact P0 = 1/g, O(n·M) server work) or a sketch
    kind "hcms"/"cms" (pooled hash functions: O(n + M·d), plus the collision term of
    docs/math.md (21.3), bounded with ``sum_f2``, a bound on Σf² (1 when unknown)).
    Memoized (``eps_perm``, ``eps_1``): OLOLOHA's chain for "olh", the sketch chains otherwise.
    """

    kind: str = "olh"
    eps: float | None = None
    eps_perm: float | None = None
    eps_1: float | None = None
    m: int = 1024
    d: int = 64
    salt: int = 0
    sum_f2: float = 1.0
    g: int = field(init=False)
    P1: float = field(init=False)
    P0: float = field(init=False)

    def __post_init__(self) -> None:
        kind = check.choice("discovery", "oracle", self.kind, ROUND_ORACLES)
        object.__setattr__(self, "kind", kind)
        memo = self.eps_perm is not None or self.eps_1 is not None
        if kind == "olh":
            if memo:
                g, _, _, _, _ = formulas.olh_chain(self.eps_perm, self.eps_1)
                P1, _ = privacy.chain_support(*self.chain[1:])
            else:
                g, P1, _ = formulas.olh_moments(self.eps)
            object.__setattr__(self, "g", g)
            object.__setattr__(self, "P1", P1)
            object.__setattr__(self, "P0", 1.0 / g)
        else:
            mom = self.sketch.moments
            object.__setattr__(self, "g", self.m)
            object.__setattr__(self, "P1", mom.P1)
            object.__setattr__(self, "P0", mom.P0)

    @property
    def memoized(self) -> bool:
        """True for a memoized (two-round) oracle."""
        return self.eps_perm is not None

    @property
    def chain(self) -> tuple[int, float, float, float, float]:
        """OLH's (g, p1, q1, p2, q2) when memoized."""
        return formulas.olh_chain(self.eps_perm, self.eps_1)

    @property
    def sketch(self) -> oracles.SketchConfig:
        """The sketch configuration of a sketch round."""
        return oracles.SketchConfig(
            self.kind,
            self.m,
            self.d,
            eps=self.eps,
            eps_perm=self.eps_perm,
            eps_1=self.eps_1,
            salt=self.salt,
        )

    def null_sd(self, n: int) -> float:
        """σ₀ of a candidate nobody holds, over n reports."""
        if self.kind == "olh":
            return math.sqrt(privacy.estimator_variance(n, 0.0, self.P1, self.P0))
        return self.sketch.moments.null_sd(n, self.sum_f2)

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """Var of f̂ at frequencies f over n reports (math (1.2); sketch: plus collisions)."""
        if self.kind == "olh":
            return privacy.estimator_variance(n, f, self.P1, self.P0)
        return self.sketch.moments.variance(n, f, self.sum_f2)

    def report(self, keys: ArrayLike, rng: RandomSource) -> tuple[NDArray, ...]:
        """One-shot reports of these prefix keys (rows drawn here for a sketch)."""
        k = np.asarray(keys, dtype=np.uint64)
        if self.kind == "olh":
            return olh_reports(k, self.g, self.P1, rng)
        cfg = self.sketch
        rows = oracles.draw_rows(k.size, cfg.d, rng)
        return (rows, *oracles.perturb(cfg, k, rows, rng))

    def estimate(self, reports: tuple[NDArray, ...], candidates: ArrayLike) -> NDArray[np.float64]:
        """f̂ of every candidate from this round's reports."""
        if self.kind == "olh":
            seeds, buckets = reports
            n = seeds.size
            return (olh_supports(seeds, buckets, candidates, self.g) / n - self.P0) / (
                self.P1 - self.P0
            )
        cfg = self.sketch
        state = oracles.aggregate(cfg, reports[1:], reports[0])
        return oracles.estimate(cfg, state, candidates)


# --------------------------------------------------------------------------------------------
# Plans and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """How a round keeps candidates: ``threshold`` (f̂ > z_{1−α/M}σ₀, at most ``cap`` kept,
    the largest) or ``top`` (the ``cap`` largest, as PEM's and pure-ldp's top-k)."""

    rule: str = "threshold"
    alpha: float = 0.05
    cap: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "rule", check.choice("discovery", "select", self.rule, SELECT_RULES)
        )
        check.positive_float("discovery", "alpha", self.alpha, upper=1.0)
        check.integer("discovery", "cap", self.cap, minimum=1)

    def threshold(self, null_sd: float, tests: int) -> float:
        """T of (21.6) for ``tests`` candidates (−∞ for top-k selection)."""
        if self.rule == "top":
            return -math.inf
        return formulas.detection_threshold(null_sd, tests, self.alpha)

    def keep(self, estimates: NDArray[np.float64], threshold: float) -> NDArray[np.int64]:
        """Indices kept, largest first (ties to the lower index)."""
        idx = np.flatnonzero(estimates > threshold)
        order = np.lexsort((idx, -estimates[idx]))
        return idx[order][: self.cap]


@dataclass(frozen=True)
class RoundLog:
    """One round as run: prefix bits, reports, candidates tested, threshold, kept."""

    bits: int
    reports: int
    candidates: int
    null_sd: float
    threshold: float
    kept: int


@dataclass(frozen=True)
class Discovery:
    """What a discovery found: item codes, estimated frequencies (fractions of all users) with
    standard errors (math (1.6) rule, plug-in clipped), the rounds, and per-user ε."""

    items: NDArray[np.uint64]
    estimates: NDArray[np.float64]
    std_errors: NDArray[np.float64]
    rounds: tuple[RoundLog, ...]
    epsilon: float

    def top(self, k: int) -> NDArray[np.uint64]:
        """The k found items of largest estimate."""
        return self.items[np.argsort(-self.estimates, kind="stable")[:k]]


def _extend(prefixes: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
    if bits == 0:
        return prefixes
    tails = np.arange(1 << bits, dtype=np.uint64)
    return ((prefixes[:, None] << np.uint64(bits)) | tails[None, :]).ravel()


def _first_candidates(bits: int) -> NDArray[np.uint64]:
    if (1 << bits) > MAX_TESTS:
        raise ValueError(
            f"discovery: the first round would test 2^{bits} candidates (more than "
            f"2^{MAX_TESTS.bit_length() - 1}); lower 'start' + 'step'."
        )
    return np.arange(1 << bits, dtype=np.uint64)


def assign_groups(n: int, groups: int, rng: RandomSource) -> NDArray[np.int64]:
    """A uniformly random balanced partition of n users into ``groups`` (group id per user)."""
    sizes = formulas.group_sizes(n, groups)
    ids = np.repeat(np.arange(groups, dtype=np.int64), sizes)
    return ids[np.asarray(rng.permutation(n))]


def _se(oracle: RoundOracle, n: int, est: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.sqrt(oracle.variance(n, np.clip(est, 0.0, 1.0)))


@dataclass(frozen=True)
class PrefixPlan:
    """PEM (``final_share`` None: the last round's group gives the frequencies) or TreeHist
    (``final_share`` s: every user reports her whole item at s·ε to a final oracle, her level's
    prefix at (1 − s)·ε). ``width`` bits per item; rounds at start + step, start + 2·step, …"""

    width: int
    eps: float
    start: int = 4
    step: int = 4
    select: Selection = field(default_factory=Selection)
    oracle: str = "olh"
    final_share: float | None = None
    m: int = 1024
    d: int = 64
    salt: int = 0

    def __post_init__(self) -> None:
        check.budget("discovery", "eps", self.eps)
        check.choice("discovery", "oracle", self.oracle, ROUND_ORACLES)
        if self.final_share is not None:
            formulas.split_budget("TreeHist", self.eps, self.final_share)
        _ = self.lengths
        _check_k(self.select, self.width)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Prefix bits of the rounds (docs/math.md §21.6)."""
        return formulas.prefix_lengths(self.width, self.start, self.step)

    @property
    def eps_prefix(self) -> float:
        """ε of a user's prefix report."""
        if self.final_share is None:
            return self.eps
        return formulas.split_budget("TreeHist", self.eps, self.final_share)[1]

    @property
    def eps_final(self) -> float | None:
        """ε of the whole-item report (TreeHist), None for PEM."""
        if self.final_share is None:
            return None
        return formulas.split_budget("TreeHist", self.eps, self.final_share)[0]

    def round_oracle(self, r: int, **budget: float) -> RoundOracle:
        """Round r's oracle (its own salt); a memoized budget may be given."""
        return RoundOracle(
            self.oracle,
            m=self.m,
            d=self.d,
            salt=self.salt + 1 + r,
            **(budget or {"eps": self.eps_prefix}),
        )

    def final_oracle(self, **budget: float) -> RoundOracle:
        """TreeHist's oracle of whole items (salt 0 of the plan)."""
        return RoundOracle(
            self.oracle, m=self.m, d=self.d, salt=self.salt, **(budget or {"eps": self.eps_final})
        )


def _check_k(select: Selection, width: int) -> None:
    if select.cap > 1 << width:
        raise ValueError(
            f"discovery: 'cap' (k, the items kept) must be <= the domain size 2^{width}; "
            f"got {select.cap}."
        )


def pem_plan(width: int, eps: float, **options: object) -> PrefixPlan:
    """PEM ([WLJ19] §4): every user in one group at the full ε; default start 4, step 4, OLH."""
    return PrefixPlan(width, eps, **options)  # type: ignore[arg-type]


def treehist_plan(width: int, eps: float, **options: object) -> PrefixPlan:
    """TreeHist ([BNST17] §3): the binary prefix tree (start 0, step 1) and half of ε to a final
    oracle of whole items (the split pure-ldp uses)."""
    opts: dict[str, object] = {"start": 0, "step": 1, "final_share": 0.5, **options}
    return PrefixPlan(width, eps, **opts)  # type: ignore[arg-type]


def run_rounds(
    plan: PrefixPlan,
    estimators: list,
    n_rounds: list[int],
    oracles_: list[RoundOracle],
    prune: Prune | None = None,
) -> tuple[NDArray[np.uint64], list[RoundLog]]:
    """The server's loop over the rounds: test, keep, extend (docs/math.md §21.6); ``prune``
    drops candidates nobody can hold (codes that are no string) before they are tested."""
    lengths = plan.lengths

    def pruned(c: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
        return c if prune is None else c[prune(c, bits)]

    cands = pruned(_first_candidates(lengths[0]), lengths[0])
    logs: list[RoundLog] = []
    kept = cands[:0]
    for r, bits in enumerate(lengths):
        est = estimators[r](cands)
        sd0 = oracles_[r].null_sd(n_rounds[r])
        thr = plan.select.threshold(sd0, max(1, cands.size))
        idx = plan.select.keep(est, thr)
        kept = cands[idx]
        logs.append(RoundLog(bits, n_rounds[r], int(cands.size), sd0, thr, int(idx.size)))
        if r + 1 < len(lengths):
            cands = pruned(_extend(kept, lengths[r + 1] - bits), lengths[r + 1])
    return kept, logs


def discover(
    plan: PrefixPlan, codes: ArrayLike, rng: RandomSource, prune: Prune | None = None
) -> Discovery:
    """Simulate one collection of PEM or TreeHist over users holding ``codes`` (width-bit).

    Groups are a random balanced partition (one per round); each user sends one report (PEM) or
    two (TreeHist: her level's prefix and her whole item). Per-user ε: ``plan.eps``.
    """
    x = np.asarray(codes, dtype=np.uint64)
    if x.size == 0:
        raise ValueError("discovery: 'codes' must hold at least one item; got an empty set.")
    lengths = plan.lengths
    groups = assign_groups(x.size, len(lengths), rng)
    ests, ns, ors = [], [], []
    for r, bits in enumerate(lengths):
        oracle = plan.round_oracle(r)
        reps = oracle.report(prefix_bits(x[groups == r], plan.width, bits), rng)
        ests.append(lambda c, o=oracle, rp=reps: o.estimate(rp, c))
        ns.append(int(np.count_nonzero(groups == r)))
        ors.append(oracle)
    kept, logs = run_rounds(plan, ests, ns, ors, prune)
    if plan.final_share is None:
        est, n_last, last = ests[-1](kept), ns[-1], ors[-1]
    else:
        last, n_last = plan.final_oracle(), x.size
        reps = last.report(x, rng)
        est = last.estimate(reps, kept)
        tested = int(kept.size)
        thr = plan.select.threshold(last.null_sd(n_last), max(1, tested))
        ok = est > thr
        kept, est = kept[ok], est[ok]
        logs.append(RoundLog(plan.width, n_last, tested, last.null_sd(n_last), thr, int(ok.sum())))
    order = np.argsort(-est, kind="stable")
    return Discovery(kept[order], est[order], _se(last, n_last, est[order]), tuple(logs), plan.eps)


# --------------------------------------------------------------------------------------------
# Detection guarantee (docs/math.md §21.6)
# --------------------------------------------------------------------------------------------


def detection_probability(plan: PrefixPlan, n: int, f: ArrayLike) -> NDArray[np.float64]:
    """A lower bound on Pr[an item of frequency f is found] under threshold selection whose cap
    does not bind: 1 − Σ_r Pr[its prefix's f̂_r ≤ T_r], each round's f̂_r normal with the
    oracle's variance at the worst prefix frequency in [f, 1] plus the group-sampling variance;
    T_r computed with the largest number of candidates the round can test (first round 2^{ℓ₁},
    then cap·2^{step}), so the bound holds whatever the other items do."""
    f = np.asarray(f, dtype=np.float64)
    lengths = plan.lengths
    sizes = formulas.group_sizes(n, len(lengths))
    miss = np.zeros_like(f)
    # The prefix of an item of frequency f has a frequency f' in [f, 1]; both variances are
    # largest at an end of that range (the oracle's is linear in f', the group's f'(1 − f')).
    worst_share = np.where(f <= 0.5, 0.25, f * (1 - f))
    for r, bits in enumerate(lengths):
        o = plan.round_oracle(r)
        tests = (1 << bits) if r == 0 else plan.select.cap * (1 << (bits - lengths[r - 1]))
        thr = plan.select.threshold(o.null_sd(sizes[r]), tests)
        var = np.maximum(o.variance(sizes[r], f), o.variance(sizes[r], 1.0))
        var = var + formulas.group_sampling_variance(0.5, n, sizes[r]) * worst_share / 0.25
        miss += _miss(f, thr, var)
    if plan.final_share is not None:
        o = plan.final_oracle()
        thr = plan.select.threshold(o.null_sd(n), plan.select.cap)
        miss += _miss(f, thr, o.variance(n, f))
    return np.clip(1.0 - miss, 0.0, 1.0)


def _miss(f: NDArray[np.float64], thr: float, var: NDArray[np.float64]) -> NDArray[np.float64]:
    """Φ((T − f)/σ) where f > T (a larger σ only raises it, so σ at the worst prefix frequency
    bounds the miss); 1 where f ≤ T (no guarantee)."""
    p = formulas.miss_probability(f, thr, np.sqrt(var))
    return np.where(f > thr, p, 1.0)


# --------------------------------------------------------------------------------------------
# SFP (docs/math.md §21.7)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SFPPlan:
    """SFP ([APP17] §4): ``width``-bit items cut into width/``frag_bits`` fragments; a fragment
    report is (8-bit item hash ‖ fragment) to a CMS per position at (1 − word_share)·ε; the whole
    item goes to a CMS at word_share·ε. Both sketches have ``m`` columns and ``d`` rows."""

    width: int
    eps: float
    frag_bits: int = 8
    hash_bits: int = 8
    word_share: float = 0.5
    select: Selection = field(default_factory=Selection)
    m: int = 1024
    d: int = 64
    salt: int = 0
    max_joins: int = 1 << 16
    engine: str = "reports"

    def __post_init__(self) -> None:
        check.integer("SFP", "frag_bits", self.frag_bits, minimum=1, maximum=self.width)
        check.integer("SFP", "hash_bits", self.hash_bits, minimum=1, maximum=16)
        if self.width % self.frag_bits:
            raise ValueError(
                f"SFP: 'frag_bits' must divide the width {self.width}; got {self.frag_bits}."
            )
        if self.frag_bits + self.hash_bits > 22:
            raise ValueError(
                "SFP: 'frag_bits' + 'hash_bits' must be <= 22 (every fragment key of a position "
                f"is tested); got {self.frag_bits + self.hash_bits}."
            )
        formulas.split_budget("SFP", self.eps, self.word_share)
        _check_k(self.select, self.width)

    @property
    def positions(self) -> int:
        """Number of fragment positions, width/frag_bits."""
        return self.width // self.frag_bits

    @property
    def word_sketch(self) -> oracles.SketchConfig:
        """The CMS of whole items."""
        eps_w = formulas.split_budget("SFP", self.eps, self.word_share)[0]
        return oracles.SketchConfig("cms", self.m, self.d, eps=eps_w, salt=self.salt)

    def fragment_sketch(self, p: int) -> oracles.SketchConfig:
        """The CMS of position p's fragment reports."""
        eps_f = formulas.split_budget("SFP", self.eps, self.word_share)[1]
        return oracles.SketchConfig("cms", self.m, self.d, eps=eps_f, salt=self.salt + 1 + p)

    def item_hash(self, codes: ArrayLike) -> NDArray[np.uint64]:
        """The public hash_bits-bit hash of each item that joins its fragments."""
        seed = np.int64((self.salt * 0x9E3779B1 + 0x5F9) % (1 << 63))
        return mix_hash(seed, np.asarray(codes, dtype=np.uint64), 1 << self.hash_bits).astype(
            np.uint64
        )

    def fragment_keys(self, codes: ArrayLike, p: ArrayLike) -> NDArray[np.uint64]:
        """(hash(x) << w) | fragment_p(x), fragment p = bits [p·w, (p + 1)·w) from the top."""
        x = np.asarray(codes, dtype=np.uint64)
        shift = np.uint64(self.width) - np.uint64(self.frag_bits) * (
            np.asarray(p, dtype=np.uint64) + np.uint64(1)
        )
        frag = (x >> shift) & np.uint64((1 << self.frag_bits) - 1)
        return (self.item_hash(x) << np.uint64(self.frag_bits)) | frag


def sfp_discover(
    plan: SFPPlan, codes: ArrayLike, rng: RandomSource, prune: Prune | None = None
) -> Discovery:
    """Simulate one SFP collection: word and fragment reports of every user, then the puzzle."""
    x = np.asarray(codes, dtype=np.uint64)
    if x.size == 0:
        raise ValueError("SFP: 'codes' must hold at least one item; got an empty set.")
    P, w = plan.positions, plan.frag_bits
    pos = assign_groups(x.size, P, rng)
    keys_all = np.arange(1 << (plan.hash_bits + w), dtype=np.uint64)
    per_hash: list[dict[int, NDArray[np.uint64]]] = []
    logs: list[RoundLog] = []
    for p in range(P):
        cfg = plan.fragment_sketch(p)
        users = x[pos == p]
        rows = oracles.draw_rows(users.size, cfg.d, rng)
        keys = plan.fragment_keys(users, np.full(users.size, p))
        state = oracles.simulate_state(cfg, keys, rows, rng, plan.engine)
        est = oracles.estimate(cfg, state, keys_all)
        sd0 = cfg.moments.null_sd(users.size, 1.0)
        thr = plan.select.threshold(sd0, keys_all.size)
        kept = keys_all[plan.select.keep(est, thr)]
        logs.append(RoundLog(w, int(users.size), int(keys_all.size), sd0, thr, int(kept.size)))
        hashes, frags = kept >> np.uint64(w), kept & np.uint64((1 << w) - 1)
        per_hash.append({int(h): frags[hashes == h] for h in np.unique(hashes)})
    cands = _join(per_hash, w, plan.max_joins)
    if prune is not None:
        cands = cands[prune(cands, plan.width)]
    wcfg = plan.word_sketch
    rows = oracles.draw_rows(x.size, wcfg.d, rng)
    wstate = oracles.simulate_state(wcfg, x, rows, rng, plan.engine)
    est = oracles.estimate(wcfg, wstate, cands)
    sd0 = wcfg.moments.null_sd(x.size, 1.0)
    thr = plan.select.threshold(sd0, max(1, cands.size))
    idx = plan.select.keep(est, thr)
    logs.append(RoundLog(plan.width, int(x.size), int(cands.size), sd0, thr, int(idx.size)))
    items, e = cands[idx], est[idx]
    se = np.sqrt(wcfg.moments.variance(x.size, np.clip(e, 0, 1), 1.0))
    return Discovery(items, e, se, tuple(logs), plan.eps)


def sfp_detection_probability(plan: SFPPlan, n: int, f: ArrayLike) -> NDArray[np.float64]:
    """Lower bound on Pr[SFP finds an item of frequency f] under threshold selection whose caps
    and join limit do not bind: 1 − Σ_p Pr[fragment test of position p misses] − Pr[item test
    misses] (each fragment key (hash ‖ fragment) has a frequency f' in [f, 1] in its position's
    group; the collision term uses Σf² ≤ 1, as the thresholds do)."""
    f = np.asarray(f, dtype=np.float64)
    sizes = formulas.group_sizes(n, plan.positions)
    tests = 1 << (plan.hash_bits + plan.frag_bits)
    worst_share = np.where(f <= 0.5, 0.25, f * (1 - f))
    miss = np.zeros_like(f)
    for p in range(plan.positions):
        mom = plan.fragment_sketch(p).moments
        thr = plan.select.threshold(mom.null_sd(sizes[p], 1.0), tests)
        var = np.maximum(mom.variance(sizes[p], f, 1.0), mom.variance(sizes[p], 1.0, 1.0))
        var = var + formulas.group_sampling_variance(0.5, n, sizes[p]) * worst_share / 0.25
        miss += _miss(f, thr, var)
    mom = plan.word_sketch.moments
    thr = plan.select.threshold(mom.null_sd(n, 1.0), plan.max_joins)
    miss += _miss(f, thr, mom.variance(n, f, 1.0))
    return np.clip(1.0 - miss, 0.0, 1.0)


def _join(per_hash: list[dict[int, NDArray[np.uint64]]], w: int, limit: int) -> NDArray[np.uint64]:
    """Candidates: for every hash value with kept fragments at every position, the product of
    its fragment lists, concatenated in position order (at most ``limit`` in all)."""
    common = set(per_hash[0])
    for table in per_hash[1:]:
        common &= set(table)
    out: list[NDArray[np.uint64]] = []
    total = 0
    for h in sorted(common):
        acc = per_hash[0][h]
        for table in per_hash[1:]:
            acc = ((acc[:, None] << np.uint64(w)) | table[h][None, :]).ravel()
        total += acc.size
        if total > limit:
            raise ValueError(
                f"SFP: the fragments join into more than {limit} candidates ('max_joins'); "
                "raise it or lower the selection cap."
            )
        out.append(acc)
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.uint64)


# --------------------------------------------------------------------------------------------
# Longitudinal discovery (docs/math.md §21.9)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverTime:
    """Discoveries of every epoch and each user's spent ε (min(t·ε1, d·ε∞) per oracle, summed
    over the user's oracles: sequential composition, math §4)."""

    epochs: tuple[Discovery, ...]
    spent: NDArray[np.float64]
    memos: NDArray[np.int64]


def discover_over_time(
    plan: PrefixPlan,
    codes: ArrayLike,
    eps_perm: float,
    eps_1: float,
    rng: RandomSource,
    prune: Prune | None = None,
) -> OverTime:
    """PEM over τ epochs (``codes[τ, n]``) with fixed groups and memoized prefix reports.

    Each user keeps her group, her hash seed and, per hashed bucket of her prefix, a round-1
    GRR memo over g buckets (OLOLOHA at ``eps_perm``); each epoch's report re-randomizes the
    memo at ``eps_1``. Only PEM plans with the OLH oracle (TreeHist's final oracle would be a
    second chain; see docs/math.md §21.9).
    """
    if plan.final_share is not None or plan.oracle != "olh":
        raise ValueError(
            "discover_over_time: longitudinal discovery runs PEM plans with the OLH oracle."
        )
    x = np.asarray(codes, dtype=np.uint64)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(
            f"discover_over_time: 'codes' must be a non-empty (τ, n) array; got {x.shape}."
        )
    tau, n = x.shape
    lengths = plan.lengths
    groups = assign_groups(n, len(lengths), rng)
    oracle = RoundOracle("olh", eps_perm=eps_perm, eps_1=eps_1)
    g, p1, _, p2, _ = oracle.chain
    seeds = np.asarray(rng.integers(0, 1 << 63, size=n), dtype=np.int64)
    memo = np.full((n, g), -1, dtype=np.int64)
    epochs = []
    for t in range(tau):
        ests, ns = [], []
        for r, bits in enumerate(lengths):
            users = np.flatnonzero(groups == r)
            keys = prefix_bits(x[t, users], plan.width, bits)
            bucket = mix_hash(seeds[users], keys, g)
            fresh = memo[users, bucket] < 0
            memo[users[fresh], bucket[fresh]] = grr_round(bucket[fresh], g, p1, rng)
            rep = grr_round(memo[users, bucket], g, p2, rng)
            ests.append(
                lambda c, s=seeds[users], b=rep: (
                    (olh_supports(s, b, c, g) / s.size - oracle.P0) / (oracle.P1 - oracle.P0)
                )
            )
            ns.append(int(users.size))
        kept, logs = run_rounds(plan, ests, ns, [oracle] * len(lengths), prune)
        est = ests[-1](kept)
        order = np.argsort(-est, kind="stable")
        epochs.append(
            Discovery(
                kept[order], est[order], _se(oracle, ns[-1], est[order]), tuple(logs), math.nan
            )
        )
    memos = np.count_nonzero(memo >= 0, axis=1)
    spent = privacy.spent_epsilon(np.full(n, tau), memos, eps_1, eps_perm)
    return OverTime(tuple(epochs), np.asarray(spent, dtype=np.float64), memos)
