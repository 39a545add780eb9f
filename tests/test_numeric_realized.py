"""The channels of the real reports as the float samplers realize them, counted exactly
(docs/math.md §20.12).

A real report (Laplace, PM, HM's PM branch, SW) is the cell of its output among the 2³¹ equal
cells of the report range, and its output is computed in binary64 from 53-bit uniforms. Its
realized probability is (the number of grid uniforms whose computed output falls in the cell)
times their probability. These tests count them, exactly, for the thinnest cells: Laplace's
tails up to the clamp and the cells holding the inputs, PM's and SW's cells astride the
breakpoints ℓ(u), r(u) (t ± b) and at the ends of the range; L-SW's buckets, memo and report.
The samplers themselves compute
the outputs, fed chosen uniforms; every map from a uniform's grid index to the cell index is
monotone (IEEE operations and ⌊·⌋ are), so a binary search finds each cell's first and last
uniform and the count is their difference. Checked, at ε = 0.1, 1, 4, 15 (Laplace also 30,
where the deepest cells need the third uniform) and five inputs from end to end:

1. every counted cell is reached from every input (positive realized mass);
2. every ratio of two inputs' realized masses is at most e^{claim}, the registered class's
   claim (ideal ε plus ``privacy.numeric.realized_slack``);
3. every realized mass lies between the ideal masses of the cell narrowed and widened by the δ
   of ``privacy.numeric``, give or take the uniforms' quanta: the inequality the slack is built
   on (math §20.12), checked rather than trusted.

The Laplace test fails on the former sampler (one uniform U, magnitude −ln(1 − frac(2U)), whose
tail values are −ln(i·2⁻⁵²)): counted with the same code (``test_one_uniform_laplace_leaves_
cells_of_one_input_only`` restates its three lines), 1. fails on the cells near the clamp, which
one input reaches and the other does not; so did ``lap_check`` of the issue, which found 4.8
and 17.9 million such cells at ε = 1 between u = −1 and u = +1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

import longldp as ll
from longldp import privacy
from longldp.privacy import numeric as nm
from longldp.protocols.numeric import oneshot

G = nm.GRID
TOP = 2**53  # uniforms are k·2⁻⁵³, k in [0, TOP)
UR = nm.UNIT_ROUNDOFF
EPS = (0.1, 1.0, 4.0, 15.0)
U_INPUTS = (-1.0, -0.37, 0.0, 0.61, 1.0)
#: cells counted at each end of a range and on each side of every breakpoint
EDGE = 6


class Fixed:
    """A generator handing out given uniforms in order."""

    def __init__(self, *parts: np.ndarray) -> None:
        self.values = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])
        self.at = 0

    def random(self, size: int) -> np.ndarray:
        out = self.values[self.at : self.at + size]
        assert out.size == size, "the sampler drew more uniforms than given"
        self.at += size
        return out.copy()


def first_true(pred: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray):
    """Per query, the least integer x in [lo, hi] with pred(x) true, pred false then true on
    the range (hi + 1 when never true); vectorized over the queries."""
    top = hi.astype(np.int64)
    lo, hi = lo.astype(np.int64).copy(), top + 1
    while np.any(lo < hi):
        mid = np.minimum(lo + (hi - lo) // 2, top)  # settled queries: any point of the range
        hit = pred(mid)
        live = lo < hi
        hi = np.where(live & hit, mid, hi)
        lo = np.where(live & ~hit, mid + 1, lo)
    return lo


def cells_to_count(r0: float, r1: float, points: list[float]) -> np.ndarray:
    """The cells at both ends of [r0, r1] and around each point (breakpoints, inputs)."""
    w = (r1 - r0) / G
    cells = set(range(EDGE)) | set(range(G - EDGE, G))
    for y in points:
        at = math.floor((y - r0) / w)
        cells |= {c for c in range(at - EDGE, at + EDGE + 1) if 0 <= c < G}
    return np.array(sorted(cells), dtype=np.int64)


def counts_increasing(index_of: Callable[[np.ndarray], np.ndarray], cells: np.ndarray):
    """Uniforms k ∈ [0, 2⁵³) with index_of(k) = c for each cell c, index_of non-decreasing."""
    ends = np.concatenate([cells, cells + 1])

    def at_least(k: np.ndarray) -> np.ndarray:
        return index_of(k) >= ends[: k.size]

    first = first_true(at_least, np.zeros(ends.size), np.full(ends.size, TOP - 1))
    return first[cells.size :] - first[: cells.size]


def check_channel(masses: np.ndarray, claim: float, ideal: float | None = None) -> float:
    """Rows: inputs, columns: cells (exact realized masses, any common unit). Every cell
    reached from every input, every ratio within e^{claim}; returns the largest log-ratio.
    With the ideal channel's ε: the realized one exceeds it, beyond the 10⁻¹² by which the
    claims used to be rounded up (they were false; the slack is needed)."""
    assert np.all(masses > 0), "a cell reachable from some inputs only"
    worst = float(np.max(np.log(masses.max(axis=0)) - np.log(masses.min(axis=0))))
    assert worst <= claim, (worst, claim)
    if ideal is not None:
        assert worst > privacy.round_up(ideal), (worst, ideal)
    return worst


# ------------------------------------------------------------------ PM (and HM's PM branch)


def pm_counts(u: float, eps: float, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(centre, outer) counts of the 53-bit grid positions v that pm_sample places in each
    cell, the piece chosen by z = 0 (centre) or z = 1 − 2⁻⁵³ (outer)."""
    r0, r1 = nm.report_range("PM", eps)
    out = []
    for z in (0.0, 1.0 - UR):

        def index_of(k: np.ndarray, z: float = z) -> np.ndarray:
            v = k.astype(np.float64) * UR
            y = oneshot.pm_sample(np.full(k.size, u), eps, Fixed(v, np.full(k.size, z)))
            return oneshot.grid_index(y, r0, r1)

        out.append(counts_increasing(index_of, cells))
    return out[0], out[1]


def interval_overlap(a: Fraction, b: Fraction, lo: Fraction, hi: Fraction) -> Fraction:
    return max(Fraction(0), min(b, hi) - max(a, lo))


@pytest.mark.parametrize("eps", EPS)
def test_pm_cells_realized_within_the_claim(eps):
    pm = nm.pm_params(eps)
    r0, r1 = nm.report_range("PM", eps)
    lefts = [float(pm.left(u)) for u in U_INPUTS]
    cells = cells_to_count(r0, r1, lefts + [a + pm.width for a in lefts] + [0.0])
    claim = ll.protocol("PM", lo=-1.0, hi=1.0, eps=eps).single_report_epsilon()
    w, delta, _ = nm._piecewise_error("pm", eps)
    centre_n = int(pm.center * TOP)  # Pr[z < centre] = centre, a multiple of 2⁻⁵³
    rows = []
    # the ideal law of the exact outputs of the same uniforms: density p* on [ℓ, ℓ + W),
    # q* on the rest of [−C, S − C + W), S = C + 1 as the sampler computes it
    width, c_f, slope = Fraction(pm.width), Fraction(pm.C), Fraction(pm.C + 1.0)
    p_star = Fraction(pm.center) / width
    q_star = (1 - Fraction(pm.center)) / slope
    wf, df = Fraction(w), Fraction(delta)
    delta_o = Fraction(UR) * (slope + c_f)
    extra = Fraction(UR) + q_star * (2 * delta_o + slope * Fraction(UR))
    for u in U_INPUTS:
        centre, outer = pm_counts(u, eps, cells)
        rows.append(centre * float(centre_n) + outer * float(TOP - centre_n))
        lft = Fraction(float(pm.left(u)))
        for c, nc, no in zip(cells, centre, outer, strict=True):
            realized = (int(nc) * centre_n + int(no) * (TOP - centre_n)) * Fraction(1, TOP * TOP)
            a = Fraction(r0) + int(c) * wf
            ideal = []
            for grow in (-df, df):
                lo, hi = a - grow, a + wf + grow
                if c == 0:
                    lo = Fraction(-10**9)
                if c == G - 1:
                    hi = Fraction(10**9)
                inner = interval_overlap(lo, hi, lft, lft + width)
                rest = interval_overlap(lo, hi, -c_f, lft) + interval_overlap(
                    lo, hi, lft + width, slope - c_f + width
                )
                ideal.append(p_star * inner + q_star * rest)
            assert ideal[0] - extra <= realized <= ideal[1] + extra
    check_channel(np.array(rows), claim, nm.channel_epsilon(nm.pm_channel(eps, np.array(U_INPUTS))))


# ------------------------------------------------------------------ SW


@pytest.mark.parametrize("eps", EPS)
def test_sw_cells_realized_within_the_claim(eps):
    sw = nm.sw_params(eps)
    r0, r1 = nm.report_range("SW", eps)
    ts = [(u + 1.0) / 2.0 for u in U_INPUTS]
    cells = cells_to_count(r0, r1, [t - sw.b for t in ts] + [t + sw.b for t in ts])
    claim = ll.protocol("SW", lo=0.0, hi=1.0, eps=eps, d=8, d_out=8).single_report_epsilon()
    w, delta, _ = nm._piecewise_error("sw", eps)
    centre_n = int(sw.center * TOP)
    wf, df, b = Fraction(w), Fraction(delta), Fraction(sw.b)
    p_star, q_star = Fraction(sw.center) / (2 * b), 1 - Fraction(sw.center)
    extra = Fraction(UR)
    rows = []
    for t in ts:
        counts = []
        for z in (0.0, 1.0 - UR):

            def index_of(k: np.ndarray, z: float = z, t: float = t) -> np.ndarray:
                v = k.astype(np.float64) * UR
                y = oneshot.sw_sample(np.full(k.size, t), eps, Fixed(v, np.full(k.size, z)))
                return oneshot.grid_index(y, r0, r1)

            counts.append(counts_increasing(index_of, cells))
        centre, outer = counts
        rows.append(centre * float(centre_n) + outer * float(TOP - centre_n))
        tf = Fraction(t)
        for c, nc, no in zip(cells, centre, outer, strict=True):
            realized = (int(nc) * centre_n + int(no) * (TOP - centre_n)) * Fraction(1, TOP * TOP)
            a = Fraction(r0) + int(c) * wf
            ideal = []
            for grow in (-df, df):
                lo = Fraction(-10**9) if c == 0 else a - grow
                hi = Fraction(10**9) if c == G - 1 else a + wf + grow
                inner = interval_overlap(lo, hi, tf - b, tf + b)
                rest = interval_overlap(lo, hi, -b, 1 + b) - inner
                ideal.append(p_star * inner + q_star * rest)
            assert ideal[0] - extra <= realized <= ideal[1] + extra
    check_channel(np.array(rows), claim, nm.channel_epsilon(nm.sw_channel(eps, np.array(ts))))


# ------------------------------------------------------------------ Laplace

#: Laplace's fine uniform, per sign: "deep" points R = fl(j·2⁻¹⁰⁵ − m·2⁻¹⁵⁸) (j ∈ [1, 2⁵³]:
#: U1 leaves c = 2⁻⁵², U2 = (2⁵³ − j)·2⁻⁵³, U3 = m·2⁻⁵³), each of mass 2⁻¹⁵⁹; then coarse
#: points R = fl(k·2⁻⁵² − m·2⁻¹⁰⁵) (k ∈ [2, 2⁵²], U2 = m·2⁻⁵³), each 2⁻¹⁰⁶ = 2⁵³·2⁻¹⁵⁹. In the
#: order J of R (a up, then m down) a report's cell is monotone. Masses below are in 2⁻¹⁵⁹.
DEEP_POINTS = TOP * TOP  # j, m
COARSE_WEIGHT = TOP


def laplace_y(u: float, eps: float, upper: int, deep: bool, a: np.ndarray, m: np.ndarray):
    """Laplace's outputs from the uniforms of the points (a, m) of one sign (upper: U1 ≥ 1/2)."""
    n = a.size
    if deep:
        u1 = np.full(n, oneshot.LAPLACE_DEEP_U1[upper])
        parts = (u1, (TOP - a).astype(np.float64) * UR, m.astype(np.float64) * UR)
    else:
        u1 = (2**52 - a).astype(np.float64) * UR + 0.5 * upper
        parts = (u1, m.astype(np.float64) * UR)
    return oneshot.laplace_sample(np.full(n, u), eps, Fixed(*parts))


def laplace_prefix(pred, u: float, eps: float, upper: int, nq: int) -> list[int]:
    """Per query, the mass (in 2⁻¹⁵⁹) of the points J with pred true, pred true on a prefix
    of the J order (vectorized over the nq queries)."""

    def block_prefix(deep: bool, a_lo: int, a_hi: int) -> list[int]:
        def pred_at(a: np.ndarray, m: np.ndarray) -> np.ndarray:
            return pred(laplace_y(u, eps, upper, deep, a, m))

        # the last block a whose first point (m = 2⁵³ − 1) is in the prefix
        last_m = np.full(nq, TOP - 1)
        a_star = first_true(
            lambda a: ~pred_at(a, last_m[: a.size]), np.full(nq, a_lo), np.full(nq, a_hi)
        ) - 1
        safe = np.maximum(a_star, a_lo)
        m_star = first_true(
            lambda m: pred_at(safe[: m.size], m), np.zeros(nq), np.full(nq, TOP - 1)
        )
        return [
            0 if int(a) < a_lo else (int(a) - a_lo) * TOP + (TOP - int(mm))
            for a, mm in zip(a_star, m_star, strict=True)
        ]

    deep = block_prefix(True, 1, TOP)
    coarse = block_prefix(False, 2, 2**52)
    return [d if d < DEEP_POINTS else DEEP_POINTS + c * COARSE_WEIGHT
            for d, c in zip(deep, coarse, strict=True)]  # fmt: skip


def laplace_masses(u: float, eps: float, cells: np.ndarray) -> list[int]:
    """Realized mass of each cell (in 2⁻¹⁵⁹), both signs, counted exactly."""
    r0, r1 = nm.report_range("Laplace", eps)
    ends = np.concatenate([cells, cells + 1])
    half = DEEP_POINTS + (2**52 - 1) * TOP * COARSE_WEIGHT  # one sign's total, 2¹⁵⁸
    total = np.zeros(cells.size, dtype=object)
    for upper in (1, 0):
        # upper: y = u − β·ln R falls as R grows, so "cell ≥ c" holds on a prefix of J;
        # lower: y = u + β·ln R rises with R, so "cell < c" does
        def pred(y: np.ndarray, upper: int = upper) -> np.ndarray:
            at_least = oneshot.grid_index(y, r0, r1) >= ends[: y.size]
            return at_least if upper else ~at_least

        prefix = laplace_prefix(pred, u, eps, upper, ends.size)
        ge = prefix if upper else [half - p for p in prefix]  # mass with cell ≥ each end
        total += np.array(ge[: cells.size], dtype=object) - np.array(ge[cells.size :], dtype=object)
    return list(total)


def laplace_ideal(u: float, scale: float, lo: Fraction, hi: Fraction) -> float:
    """Pr[lo ≤ u + Lap(scale) < hi] (float, 10⁻¹⁴ relative: far below the bounds checked)."""

    def upper_tail(x: float) -> float:  # Pr[Y ≥ x]
        z = (x - u) / scale
        return 0.5 * math.exp(-z) if z >= 0 else 1.0 - 0.5 * math.exp(z)

    a, b = float(lo), float(hi)
    if a >= u:  # one tail: 0.5·e^{−(a−u)/β}·(1 − e^{−(b−a)/β})
        return -0.5 * math.exp(-(a - u) / scale) * math.expm1(-(b - a) / scale)
    if b <= u:
        return -0.5 * math.exp(-(u - b) / scale) * math.expm1(-(b - a) / scale)
    return upper_tail(a) - upper_tail(b)


@pytest.mark.parametrize("eps", (*EPS, 30.0))
def test_laplace_cells_realized_within_the_claim(eps):
    """Laplace's cells up to the clamp on both sides and around every input: reached from every
    input, within e^{claim} of each other, and each between the ideal masses of the cell
    narrowed and widened by δ (relative 10⁻⁶; the quanta are far smaller)."""
    r0, r1 = nm.report_range("Laplace", eps)
    w = (r1 - r0) / G
    scale = nm.laplace_scale(eps)
    cells = cells_to_count(r0, r1, list(U_INPUTS))
    claim = ll.protocol("Laplace", lo=-1.0, hi=1.0, eps=eps).single_report_epsilon()
    rows = []
    slack = nm.realized_slack("Laplace", eps)
    for u in U_INPUTS:
        masses = laplace_masses(u, eps, cells)
        rows.append([float(Fraction(int(m), 2**159)) for m in masses])
        for c, m in zip(cells, rows[-1], strict=True):
            a = r0 + int(c) * w
            lo, hi = (-math.inf if c == 0 else a), (math.inf if c == G - 1 else a + w)
            ideal = laplace_ideal(u, scale, Fraction(lo) if lo > -math.inf else Fraction(-10**6),
                                  Fraction(hi) if hi < math.inf else Fraction(10**6))  # fmt: skip
            assert abs(m / ideal - 1.0) <= slack / 2, (u, int(c), m, ideal)
    check_channel(np.array(rows), claim, 2.0 / scale)


def test_one_uniform_laplace_leaves_cells_of_one_input_only():
    """The former sampler (one uniform U: h = [2U ≥ 1], y = u + (1 − 2h)·β·log1p(−frac(2U)),
    restated here) counted by the same code: near the clamp some cells are reached from one end
    of the interval and not from the other (an infinite ε as realized), which is how the test
    above fails on it. Its tail values are −ln(i·2⁻⁵²)·β: beyond about 18 scales a cell holds
    fewer than one."""
    eps = 1.0
    r0, r1 = nm.report_range("Laplace", eps)
    scale = nm.laplace_scale(eps)
    cells = np.arange(G - 2000, G - 1, dtype=np.int64)  # the last cells before the clamp

    def old_counts(u: float) -> np.ndarray:
        ends = np.concatenate([cells, cells + 1])

        def index_of(i: np.ndarray) -> np.ndarray:  # i = frac(2U)·2⁵²: y rises with i
            w = i.astype(np.float64) * 2.0**-52
            return oneshot.grid_index(u - np.log1p(-w) * scale, r0, r1)

        first = first_true(lambda i: index_of(i) >= ends[: i.size], np.zeros(ends.size),
                           np.full(ends.size, 2**52 - 1))  # fmt: skip
        return first[cells.size :] - first[: cells.size]

    low, high = old_counts(-1.0), old_counts(1.0)
    one_sided = int(np.sum((low == 0) & (high > 0))) + int(np.sum((high == 0) & (low > 0)))
    assert one_sided > 100
    with pytest.raises(AssertionError, match="some inputs only"):
        check_channel(np.array([low, high], dtype=float), 1.0)


# ------------------------------------------------------------------ HM's atoms


def test_hm_pm_branch_never_takes_an_atom_code():
    """At ε = 30 PM's centre piece for u = 1 covers Duchi's atom C_D = coth(ε/2) with density
    ~e^{ε/2}/2: about 10⁷ grid positions land on the float C_D itself (counted), realized mass
    ~10⁻⁹ against the atom's own (1 − β)·Pr[+C_D | u = −1] ≈ 3·10⁻²⁰ at the other end, which
    would have added ~10⁻³ to the atoms' ε. The sampler moves those outputs one float towards 0,
    so the atoms' codes carry Duchi's branch alone: the atoms' channel is the exact one."""
    eps = 30.0
    c_d = nm.duchi_bound(eps)
    u = 1.0

    def first(op) -> int:
        def at(k: np.ndarray) -> np.ndarray:
            v = k.astype(np.float64) * UR
            return op(oneshot.pm_sample(np.full(k.size, u), eps, Fixed(v, np.zeros(k.size))))

        return int(first_true(at, np.zeros(1), np.full(1, TOP - 1))[0])

    lo, hi = first(lambda y: y >= c_d), first(lambda y: y > c_d)
    assert hi - lo > 10**6  # PM alone lands on the atom's float this often
    beta = nm.hm_beta(eps)
    k = np.array([lo, (lo + hi) // 2, hi - 1])
    v = k.astype(np.float64) * UR
    # HM's stream: branch w (< β: PM), Duchi's sign, then PM's v and z (centre)
    y = oneshot.hm_sample(np.full(3, u), eps, Fixed(np.zeros(3), np.zeros(3), v, np.zeros(3)))
    assert beta > 0 and np.all(y < c_d) and np.all(y == np.nextafter(c_d, 0.0))
    proto = ll.protocol("HM", lo=-1.0, hi=1.0, eps=eps)
    codes = proto._codes(proto.quantize(y))
    assert np.all(codes < G)  # cells, never the atom's code G + 1
    atoms = (1 - beta) * nm.duchi_channel(eps, np.array(U_INPUTS))
    assert check_channel(atoms, proto.single_report_epsilon()) <= eps * (1 + 1e-12)


# ------------------------------------------------------------------ L-SW's memo and report


@pytest.mark.parametrize(
    ("eps_perm", "eps_1", "s", "d_out"), [(4.0, 1.0, 4, 32), (30.0, 5.0, 4, 32)]
)
def test_lsw_buckets_realized_within_the_claims(eps_perm, eps_1, s, d_out):
    """L-SW's memo is the bucket of SW's computed output at a grid value t_j (the buckets' edges
    cut the centre pieces: d_out is a multiple of s). Counted exactly: the realized memo channel
    W1 lies between the bounds of ``privacy.numeric.lsw_slack`` and within e^{claim} (memo), and
    so does one report, round 2's keep drawn(p2) and other bucket ⌊U·(d_out − 1)⌋ counted too."""
    from longldp.protocols.numeric import sw as swk

    proto = ll.protocol("L-SW", lo=0.0, hi=1.0, eps_perm=eps_perm, eps_1=eps_1, s=s, d_out=d_out)
    params = nm.sw_params(eps_perm)
    centre_n = int(params.center * TOP)
    buckets = np.arange(d_out, dtype=np.int64)
    w1 = []
    for j in range(s + 1):
        t = j / s
        counts = []
        for z in (0.0, 1.0 - UR):

            def index_of(k: np.ndarray, z: float = z, t: float = t) -> np.ndarray:
                v = k.astype(np.float64) * UR
                y = oneshot.sw_sample(np.full(k.size, t), eps_perm, Fixed(v, np.full(k.size, z)))
                return swk.bucket_index(y, eps_perm, d_out)

            counts.append(counts_increasing(index_of, buckets))
        w1.append([Fraction(int(c) * centre_n + int(o) * (TOP - centre_n), TOP * TOP)
                   for c, o in zip(*counts, strict=True)])  # fmt: skip
        assert sum(w1[-1]) == 1
    realized = np.array([[float(x) for x in row] for row in w1])
    check_channel(realized, proto.first_round_epsilon())
    # round 2: keep with drawn(p2), else o = ⌊U·(d_out − 1)⌋, shifted past the memo's bucket
    keep = Fraction(math.ceil(Fraction(proto.p2) * TOP), TOP)
    ends = np.arange(d_out, dtype=np.int64)
    first = first_true(
        lambda k: np.floor(k.astype(np.float64) * UR * (d_out - 1)) >= ends[: k.size],
        np.zeros(d_out), np.full(d_out, TOP - 1),
    )  # fmt: skip
    first[0] = 0
    starts, stops = first[:-1], [*first[1:-1], TOP]
    other = [Fraction(int(b - a), TOP) for a, b in zip(starts, stops, strict=True)]
    assert len(other) == d_out - 1 and sum(other) == 1
    report = []
    for row in w1:
        report.append([
            float(keep * row[r] + (1 - keep) * sum(
                row[m] * other[r if r < m else r - 1] for m in range(d_out) if m != r))
            for r in range(d_out)
        ])  # fmt: skip
    check_channel(np.array(report), proto.single_report_epsilon())
