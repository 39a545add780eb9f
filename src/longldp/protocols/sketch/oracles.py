"""Sketch oracles over open item spaces: CMS, HCMS, PCS, SHE, THE as pure vectorized kernels.

A sketch (docs/math.md §21.1–§21.3) has d public hash functions h_1..h_d onto m columns, drawn
from a public ``salt``. A user draws her row J once (uniform on [0, d)), maps her item's 64-bit
key to the column b = h_J(key), and sends (J, randomized report of b):

- **CMS** (Apple's count mean sketch, [APP17] §3.1): the ±1 one-hot of b, every coordinate
  flipped with p = 1/(1 + e^{ε/2}); sent as m bits (1 = +1).
- **HCMS** (Hadamard CMS, [APP17] §3.2): a uniform Hadamard row l and the bit parity(l AND b)
  kept with e^ε/(1 + e^ε); sent as (l, bit).
- **PCS** (private count sketch, [CCF04] with the randomizer of [BS15]): m uniform random bits
  except coordinate b, which carries the sign hash g_J(key) kept with e^ε/(1 + e^ε).
- **SHE** ([WAN17] §4.3): the 0/1 one-hot of b plus Laplace(2/ε) noise on every coordinate;
  m floats.
- **THE** ([WAN17] §4.3): SHE thresholded at θ *on the device*: m bits, bit b set with p_θ and
  every other with q_θ (the same law as thresholding SHE's floats, drawn from (p_θ, q_θ)
  directly, so the channel the audit checks is the sampler's).

The server keeps, per row and column, the sufficient statistic (count of set bits, Hadamard
sums, or Laplace sums); the support of a queried key x is the sum over rows of the statistic at
h_j(x), and f̂ = (C/n − P0)/(P1 − P0) with the moments of :mod:`longldp.privacy.sketch`
(one formula, one place). An *identity* sketch (``hashed=False``: d = 1, keys < m, h = id) is the
classical oracle over [m] (CMS = SUE, HCMS = SH, SHE and THE as in [WAN17]).

Every kernel takes an explicit ``numpy.random.Generator`` (or the secure source of
:mod:`longldp.protocols._rng`) and is vectorized over users; memoized forms re-randomize stored
round-1 reports (:func:`rerandomize_bits`, :func:`rerandomize_bit`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import sketch as formulas
from longldp.protocols._bitcount import grouped_column_sums, packed_column_sums
from longldp.protocols._rng import RandomSource
from longldp.protocols.hadamard import fwht, hadamard_parity
from longldp.protocols.lh import mix_hash

#: Cells (users × columns) drawn per block by the bit samplers (bounds the temporaries).
BLOCK_CELLS = 1 << 22


# --------------------------------------------------------------------------------------------
# Configuration and hashing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SketchConfig:
    """Parameters of one sketch oracle, validated, and its derived moments and hash seeds.

    ``kind`` ∈ cms, hcms, pcs, she, the; ``eps`` (one-shot) or ``eps_perm``/``eps_1``
    (memoized CMS and HCMS); ``m`` columns (a power of two for HCMS), ``d`` rows, ``salt`` the
    public seed of the hash functions, ``hashed`` False for an identity sketch, ``theta`` THE's
    threshold (default: the V*-optimal one).
    """

    kind: str
    m: int
    d: int = 1
    eps: float | None = None
    eps_perm: float | None = None
    eps_1: float | None = None
    salt: int = 0
    hashed: bool = True
    theta: float | None = None
    moments: formulas.SketchMoments = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = check.choice("sketch", "kind", self.kind, formulas.SKETCH_KINDS)
        object.__setattr__(self, "kind", kind)
        owner = kind.upper()
        check.integer(owner, "salt", self.salt, minimum=0, maximum=(1 << 63) - 1)
        if kind == "hcms" and (self.m < 2 or self.m & (self.m - 1)):
            raise ValueError(f"HCMS: 'm' must be a power of two >= 2; got {self.m!r}.")
        if kind == "the" and self.theta is None and self.eps is not None:
            object.__setattr__(self, "theta", formulas.the_optimal_theta(self.eps))
        if self.memoized:
            if self.eps is not None:
                raise ValueError(f"{owner}: give 'eps' or 'eps_perm' with 'eps_1', not both.")
            if kind not in formulas.MEMO_KINDS:
                raise ValueError(
                    f"{owner}: a memoized form exists for {', '.join(formulas.MEMO_KINDS)} only "
                    "(docs/math.md §21.5); give 'eps'."
                )
            mom = formulas.chain_moments(
                kind, self.eps_perm, self.eps_1, self.m, self.d, hashed=self.hashed
            )
        else:
            if self.eps is None:
                raise ValueError(f"{owner}: 'eps' is required (or 'eps_perm' with 'eps_1').")
            mom = formulas.sketch_moments(
                kind, self.eps, self.m, self.d, hashed=self.hashed, theta=self.theta
            )
        object.__setattr__(self, "moments", mom)

    @property
    def memoized(self) -> bool:
        """True for the memoized (two-round) form."""
        return self.eps_perm is not None or self.eps_1 is not None

    @property
    def chain(self) -> tuple[float, float, float, float]:
        """(p1, q1, p2, q2) of the memoized form (docs/math.md §21.5)."""
        return formulas.sketch_chain(self.kind, self.eps_perm, self.eps_1)

    @property
    def round1(self) -> tuple[float, float]:
        """(P1, q) of one round-1 (or one-shot) report: what the samplers draw with."""
        if self.memoized:
            p1, q1, _, _ = self.chain
            return p1, q1
        return self.moments.P1, self.moments.q

    @functools.cached_property
    def seeds(self) -> NDArray[np.int64]:
        """(2, d) public seeds: row j's column hash and (PCS) sign hash, from ``salt``."""
        gen = np.random.default_rng(np.random.SeedSequence([self.salt, 0x5CE7C4]))
        return gen.integers(0, 1 << 63, size=(2, self.d), dtype=np.int64)

    def epsilon(self) -> float:
        """Exact ε of one report (one-shot) or of one report of the chain (memoized)."""
        if self.memoized:
            return formulas.chain_epsilons(self.kind, self.eps_perm, self.eps_1)[1]
        return formulas.sketch_epsilon(self.kind, self.eps, self.theta)


def draw_rows(n: int, d: int, rng: RandomSource) -> NDArray[np.int64]:
    """Each user's row J, uniform on [0, d), drawn once (per-user state)."""
    return np.asarray(rng.integers(0, d, size=n), dtype=np.int64)


def columns(cfg: SketchConfig, keys: ArrayLike, rows: ArrayLike) -> NDArray[np.int64]:
    """b_u = h_{J_u}(key_u): each user's column in her own row (identity: the key itself)."""
    k = np.asarray(keys, dtype=np.uint64)
    if not cfg.hashed:
        if k.size and int(k.max()) >= cfg.m:
            raise ValueError(
                f"{cfg.kind.upper()}: an identity sketch takes keys in [0, {cfg.m}); "
                f"got {int(k.max())}."
            )
        return k.astype(np.int64)
    return mix_hash(cfg.seeds[0][np.asarray(rows, dtype=np.int64)], k, cfg.m)


def signs(cfg: SketchConfig, keys: ArrayLike, rows: ArrayLike) -> NDArray[np.int64]:
    """PCS's sign hash g_{J_u}(key_u) ∈ {−1, +1} (identity sketch: +1)."""
    k = np.asarray(keys, dtype=np.uint64)
    if not cfg.hashed:
        return np.ones(k.shape, dtype=np.int64)
    return 1 - 2 * mix_hash(cfg.seeds[1][np.asarray(rows, dtype=np.int64)], k, 2)


def query_columns(cfg: SketchConfig, keys: ArrayLike) -> NDArray[np.int64]:
    """(C, d) columns of C queried keys in every row."""
    k = np.asarray(keys, dtype=np.uint64).ravel()
    if not cfg.hashed:
        return columns(cfg, k, np.zeros(k.size, np.int64))[:, None]
    return mix_hash(cfg.seeds[0][None, :], k[:, None], cfg.m)


def query_signs(cfg: SketchConfig, keys: ArrayLike) -> NDArray[np.int64]:
    """(C, d) sign hashes of C queried keys in every row."""
    k = np.asarray(keys, dtype=np.uint64).ravel()
    if not cfg.hashed:
        return np.ones((k.size, 1), dtype=np.int64)
    return 1 - 2 * mix_hash(cfg.seeds[1][None, :], k[:, None], 2)


# --------------------------------------------------------------------------------------------
# Client side: samplers
# --------------------------------------------------------------------------------------------


def ue_bits(cols: ArrayLike, m: int, p: float, q: float, rng: RandomSource) -> NDArray[np.uint8]:
    """Packed m-bit reports: bit b_u set with probability p, every other bit with q (CMS with
    p = 1 − flip, q = flip; THE with p_θ, q_θ; a memo's round 1). One uniform per cell."""
    b = np.asarray(cols, dtype=np.int64)
    out = np.empty((b.size, (m + 7) // 8), dtype=np.uint8)
    step = max(1, BLOCK_CELLS // m)
    for s in range(0, b.size, step):
        blk = b[s : s + step]
        u = rng.random((blk.size, m))
        thr = np.full(u.shape, q)
        thr[np.arange(blk.size), blk] = p
        out[s : s + step] = np.packbits(u < thr, axis=1)
    return out


def rerandomize_bits(
    memo: NDArray[np.uint8], m: int, p2: float, q2: float, rng: RandomSource
) -> NDArray[np.uint8]:
    """Round 2 of a memoized CMS: a memo bit 1 is reported 1 with p2, a 0 with q2 (math §3.1)."""
    mem = np.asarray(memo, dtype=np.uint8)
    out = np.empty_like(mem)
    step = max(1, BLOCK_CELLS // m)
    for s in range(0, mem.shape[0], step):
        bits = np.unpackbits(mem[s : s + step], axis=1, count=m).astype(bool)
        u = rng.random(bits.shape)
        out[s : s + step] = np.packbits(np.where(bits, u < p2, u < q2), axis=1)
    return out


def hcms_report(
    cols: ArrayLike, m: int, keep: float, rng: RandomSource, hadamard_rows: ArrayLike | None = None
) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
    """(l, bit): a uniform Hadamard row l (or the user's fixed one) and parity(l AND b) kept
    with probability ``keep``, else flipped ([APP17] §3.2; math §12.1)."""
    b = np.asarray(cols, dtype=np.int64)
    l_rows = (
        np.asarray(rng.integers(0, m, size=b.size), dtype=np.int64)
        if hadamard_rows is None
        else np.asarray(hadamard_rows, dtype=np.int64)
    )
    parity = hadamard_parity(l_rows, b)
    kept = rng.random(b.size) < keep  # every Bernoulli drawn as u < p
    return l_rows, (parity ^ ~kept).astype(np.uint8)


def rerandomize_bit(memo: ArrayLike, p2: float, rng: RandomSource) -> NDArray[np.uint8]:
    """Round 2 of a memoized HCMS: keep the memo bit with p2 (binary L-GRR, math §12.2)."""
    mem = np.asarray(memo, dtype=np.uint8)
    kept = rng.random(mem.shape) < p2  # every Bernoulli drawn as u < p
    return (mem ^ ~kept).astype(np.uint8)


def pcs_bits(
    cols: ArrayLike, sgn: ArrayLike, m: int, keep: float, rng: RandomSource
) -> NDArray[np.uint8]:
    """Packed m-bit PCS reports: uniform bits, except coordinate b_u = [g_u·σ = +1] with σ = +1
    w.p. ``keep`` ([BS15] randomizer on the count sketch's (h, g), [CCF04])."""
    b = np.asarray(cols, dtype=np.int64)
    g = np.asarray(sgn, dtype=np.int64)
    out = np.empty((b.size, (m + 7) // 8), dtype=np.uint8)
    step = max(1, BLOCK_CELLS // m)
    for s in range(0, b.size, step):
        blk, gb = b[s : s + step], g[s : s + step]
        bits = rng.random((blk.size, m)) < 0.5
        informative = (rng.random(blk.size) < keep) == (gb > 0)
        bits[np.arange(blk.size), blk] = informative
        out[s : s + step] = np.packbits(bits, axis=1)
    return out


def she_values(cols: ArrayLike, m: int, scale: float, rng: RandomSource) -> NDArray[np.float64]:
    """SHE reports: one-hot of b plus Laplace(scale) on every coordinate ([WAN17] §4.3), the
    Laplace variable as a difference of two exponentials of uniforms.

    float64 Laplace draws are not an exact Laplace channel (Mironov, CCS 2012): SHE is given for
    comparison; THE's bits are the deployable form (docs/math.md §21.4).
    """
    b = np.asarray(cols, dtype=np.int64)
    # Laplace(b) = b·(E1 − E2), E = −ln(1 − U) exponential (1 − U ∈ (0, 1]: finite), from
    # uniforms only, so that any random source (the OS's, a device's HMAC stream) draws it.
    out = -np.log1p(-np.asarray(rng.random((b.size, m))))
    out -= -np.log1p(-np.asarray(rng.random((b.size, m))))
    out *= scale
    out[np.arange(b.size), b] += 1.0
    return out


# --------------------------------------------------------------------------------------------
# Server side: aggregation, supports, estimates
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SketchState:
    """The aggregate of a sketch's reports: per row and column the sufficient statistic
    (``table``: set bits for CMS, PCS, THE; Hadamard row sums for HCMS; Laplace sums for SHE) and
    per row the number of reports ``n_rows``."""

    table: NDArray
    n_rows: NDArray[np.int64]

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return int(self.n_rows.sum())

    def __add__(self, other: SketchState) -> SketchState:
        return SketchState(self.table + other.table, self.n_rows + other.n_rows)


def _check_rows(cfg: SketchConfig, rows: ArrayLike, n: int) -> NDArray[np.int64]:
    r = np.asarray(rows)
    if r.shape != (n,) or r.dtype == bool or not np.issubdtype(r.dtype, np.integer):
        raise ValueError(
            f"{cfg.kind.upper()}: 'rows' must be {n} integers in [0, {cfg.d}); "
            f"got shape {r.shape}, dtype {r.dtype}."
        )
    return check.domain_values(cfg.kind.upper(), r, cfg.d, "rows")


def count_bits(bits: NDArray[np.uint8], rows: ArrayLike, d: int, m: int) -> NDArray[np.int64]:
    """(d, m) set bits per row and column of packed reports, in any order: the carry-save
    column sums of :func:`longldp.protocols._bitcount.grouped_column_sums` with the row as
    the label (all rows in one pass). Reports already stored by row (a server's layout) may
    pass one row's reports with d = 1 (benchmarks/bench_sketch.py measures both)."""
    r = np.asarray(rows, dtype=np.int64)
    if d == 1:
        return packed_column_sums(bits, m)[None, :]
    return grouped_column_sums(bits, r, d, m)


def aggregate_bits(cfg: SketchConfig, bits: NDArray[np.uint8], rows: ArrayLike) -> SketchState:
    """CMS, PCS, THE: set bits per (row, column)."""
    b = np.asarray(bits, dtype=np.uint8)
    if b.ndim != 2 or b.shape[1] != (cfg.m + 7) // 8:
        raise ValueError(
            f"{cfg.kind.upper()}: 'bits' must be packed reports of shape (n, {(cfg.m + 7) // 8}); "
            f"got {b.shape}."
        )
    r = _check_rows(cfg, rows, b.shape[0])
    return SketchState(count_bits(b, r, cfg.d, cfg.m), np.bincount(r, minlength=cfg.d))


def aggregate_hcms(
    cfg: SketchConfig, l_rows: ArrayLike, bit: ArrayLike, rows: ArrayLike
) -> SketchState:
    """HCMS: T[j, l] = Σ_{u: J_u = j, l_u = l} (−1)^bit_u, one bincount of (row, l, bit)."""
    lr, bt = np.asarray(l_rows, dtype=np.int64), np.asarray(bit, dtype=np.int64)
    r = _check_rows(cfg, rows, lr.size)
    check.domain_values("HCMS", lr, cfg.m, "l (the Hadamard row)")
    check.domain_values("HCMS", bt, 2, "bit")
    pairs = np.bincount((r * cfg.m + lr) * 2 + bt, minlength=2 * cfg.d * cfg.m)
    pairs = pairs.reshape(cfg.d, cfg.m, 2)
    return SketchState(pairs[..., 0] - pairs[..., 1], np.bincount(r, minlength=cfg.d))


def aggregate_she(cfg: SketchConfig, values: NDArray[np.float64], rows: ArrayLike) -> SketchState:
    """SHE: Laplace-noised one-hots summed per (row, column)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != cfg.m or not np.all(np.isfinite(v)):
        raise ValueError(f"SHE: 'values' must be finite, of shape (n, {cfg.m}); got {v.shape}.")
    r = _check_rows(cfg, rows, v.shape[0])
    table = np.zeros((cfg.d, cfg.m))
    np.add.at(table, r, v)
    return SketchState(table, np.bincount(r, minlength=cfg.d))


def supports(cfg: SketchConfig, state: SketchState, keys: ArrayLike) -> NDArray[np.float64]:
    """C(x) = Σ_u S_u(x) for queried keys: the sum over rows of the statistic at h_j(x)
    (docs/math.md §21.3). HCMS first turns each row's sums into supports by one fast
    Walsh–Hadamard transform: #{u in row j: bit_u = parity(l_u, c)} = (n_j + (H·T_j)[c])/2."""
    cols = query_columns(cfg, keys)  # (C, d)
    rows = np.arange(cols.shape[1])[None, :]
    if cfg.kind == "hcms":
        per = (state.n_rows[:, None] + fwht(state.table)) / 2.0
        return per[rows, cols].sum(axis=1)
    if cfg.kind == "pcs":
        ones = state.table[rows, cols]
        g = query_signs(cfg, keys)
        return np.where(g > 0, ones, state.n_rows[None, :] - ones).sum(axis=1).astype(np.float64)
    return state.table[rows, cols].sum(axis=1).astype(np.float64)


def estimate(cfg: SketchConfig, state: SketchState, keys: ArrayLike) -> NDArray[np.float64]:
    """f̂(x) = (C(x)/n − P0)/(P1 − P0), unbiased over the noise, the rows and the hash draw."""
    n = state.n
    if n == 0:
        raise ValueError(f"{cfg.kind.upper()}: no reports were aggregated.")
    mom = cfg.moments
    return (supports(cfg, state, keys) / n - mom.P0) / mom.gap


# --------------------------------------------------------------------------------------------
# One-shot reports end to end, and the count-level sampler
# --------------------------------------------------------------------------------------------


def perturb(
    cfg: SketchConfig, keys: ArrayLike, rows: ArrayLike, rng: RandomSource
) -> tuple[NDArray, ...]:
    """One-shot (or round-1) reports of users with these keys and rows, as the aggregators take
    them: (bits,) for CMS, PCS, THE; (l, bit) for HCMS; (values,) for SHE."""
    cols = columns(cfg, keys, rows)
    p, q = cfg.round1
    if cfg.kind in ("cms", "the"):
        return (ue_bits(cols, cfg.m, p, q, rng),)
    if cfg.kind == "hcms":
        return hcms_report(cols, cfg.m, p, rng)
    if cfg.kind == "pcs":
        return (pcs_bits(cols, signs(cfg, keys, rows), cfg.m, p, rng),)
    return (she_values(cols, cfg.m, formulas.she_scale(cfg.eps), rng),)


def aggregate(cfg: SketchConfig, reports: tuple[NDArray, ...], rows: ArrayLike) -> SketchState:
    """The aggregate of :func:`perturb`'s reports."""
    if cfg.kind == "hcms":
        return aggregate_hcms(cfg, reports[0], reports[1], rows)
    if cfg.kind == "she":
        return aggregate_she(cfg, reports[0], rows)
    return aggregate_bits(cfg, reports[0], rows)


#: Kinds whose sketch the count-level sampler draws exactly (HCMS's transformed rows couple the
#: columns through the users' random Hadamard rows: no cheap exact law; use the reports).
COUNT_LEVEL_KINDS = ("cms", "pcs", "she", "the")


def cell_counts(cfg: SketchConfig, keys: ArrayLike, rows: ArrayLike) -> NDArray[np.int64]:
    """(d, m) true counts: how many users of row j have their item in column c (for PCS,
    (2, d, m): those with sign +1, then −1)."""
    cols = columns(cfg, keys, rows)
    r = np.asarray(rows, dtype=np.int64)
    flat = r * cfg.m + cols
    if cfg.kind != "pcs":
        return np.bincount(flat, minlength=cfg.d * cfg.m).reshape(cfg.d, cfg.m)
    neg = signs(cfg, keys, rows) < 0
    return np.bincount(flat + neg * cfg.d * cfg.m, minlength=2 * cfg.d * cfg.m).reshape(
        2, cfg.d, cfg.m
    )


def sample_state(
    cfg: SketchConfig, counts: NDArray[np.int64], n_rows: ArrayLike, rng: RandomSource
) -> SketchState:
    """The exact law of the aggregate given the true cell counts (docs/math.md §21.3):
    CMS/THE: Bin(n_jc, P1) + Bin(n_j − n_jc, q) set bits; PCS: Bin(n⁺, keep) + Bin(n⁻, 1 − keep)
    + Bin(n_j − n_jc, ½); SHE: n_jc + b·(Γ(n_j) − Γ(n_j)) (a sum of n_j Laplace(b) variables
    is b times a difference of two Gamma(n_j, 1) variables). O(d·m) draws, independent of n."""
    if cfg.kind not in COUNT_LEVEL_KINDS:
        raise ValueError(
            f"{cfg.kind.upper()}: no count-level sampler (its aggregate couples the columns); "
            f"count-level kinds: {', '.join(COUNT_LEVEL_KINDS)}."
        )
    nr = np.asarray(n_rows, dtype=np.int64)
    p, q = cfg.round1
    if cfg.kind in ("cms", "the"):
        c = np.asarray(counts, dtype=np.int64)
        table = rng.binomial(c, p) + rng.binomial(nr[:, None] - c, q)
    elif cfg.kind == "pcs":
        pos, neg = np.asarray(counts, dtype=np.int64)
        table = (
            rng.binomial(pos, p)
            + rng.binomial(neg, 1 - p)
            + rng.binomial(nr[:, None] - pos - neg, 0.5)
        )
    else:
        c = np.asarray(counts, dtype=np.int64)
        shape = np.broadcast_to(nr[:, None], c.shape).astype(np.float64)
        live = shape > 0
        g1 = np.where(live, rng.gamma(np.maximum(shape, 1.0)), 0.0)
        g2 = np.where(live, rng.gamma(np.maximum(shape, 1.0)), 0.0)
        table = c + formulas.she_scale(cfg.eps) * (g1 - g2)
    return SketchState(table, nr)


def simulate_state(
    cfg: SketchConfig, keys: ArrayLike, rows: ArrayLike, rng: RandomSource, engine: str = "reports"
) -> SketchState:
    """The aggregate of users with these keys and rows, drawn through their reports
    (``"reports"``: every report materialized, as a server receives them) or from its exact law
    given the cell counts (``"count-level"``: :func:`sample_state`, O(d·m) draws)."""
    engine = check.choice("sketch", "engine", engine, ("reports", "count-level"))
    r = np.asarray(rows, dtype=np.int64)
    if engine == "reports" or cfg.kind not in COUNT_LEVEL_KINDS:
        return aggregate(cfg, perturb(cfg, keys, r, rng), r)
    return sample_state(cfg, cell_counts(cfg, keys, r), np.bincount(r, minlength=cfg.d), rng)
