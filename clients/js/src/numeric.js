// The numeric mechanisms (docs/math.md §20, Python: longldp.protocols.numeric): Laplace, Duchi,
// PM, HM, SW, 1BitMean and the memoized L-1BitMean, L-PM, L-HM, L-SW (docs/client-spec.md §3.4).
// Every draw consumes the byte source in the order of the Python kernels (one float per
// `rng.random(1)`), with the same float64 expressions, so a device and the Python client give
// the same reports from the same stream (to the last bit where the platforms' exp/log1p agree;
// tests/test_numeric_js.py, clients/js/test/vectors.test.js). The claims ε1, ε∞ are the ε of
// the same exact channels the Python classes compute (within 1e-15 relative: V8's and the C
// library's exp/log differ in the last bits).

import { fromHex, minBytes, toHex, uintBE } from "./bytes.js";
import { fail } from "./check.js";
import { floats } from "./common.js";

const { exp, expm1, log, log1p, tanh, floor, min, max, atanh, sqrt, abs, sign, ceil } = Math;

// ------------------------------------------------------------------ formulas (privacy/numeric)
const duchiSlope = (eps) => tanh(eps / 2);
/** ⌈p·2⁵³⌉/2⁵³: the probability a draw u < p realizes (privacy.drawn). */
export const drawn = (p) => Math.ceil(p * 2 ** 53) / 2 ** 53;
export const duchiProbability = (eps, u) => drawn(0.5 + 0.5 * duchiSlope(eps) * u);
export const duchiBound = (eps) => 1.0 / duchiSlope(eps);

export function pmParams(eps) {
  const em1 = expm1(eps / 2);
  const width = 2.0 / em1;
  const center = drawn(1.0 / (1.0 + exp(-eps / 2)));
  const C = 1.0 + width;
  return { C, width, center, p: center / width, q: (1.0 - center) / (C + 1) };
}

/** ε* (HM): 2 ln of the real root of 3s³ − s² + s − 7 (Cardano), as privacy.numeric. */
export function hmEpsStar() {
  const [a, b, c, d] = [3.0, -1.0, 1.0, -7.0];
  const P = (3 * a * c - b * b) / (3 * a * a);
  const Q = (2 * b ** 3 - 9 * a * b * c + 27 * a * a * d) / (27 * a ** 3);
  const disc = sqrt((Q * Q) / 4 + P ** 3 / 27);
  const cube = (x) => sign(x) * abs(x) ** (1 / 3);
  return 2 * log(cube(-Q / 2 + disc) + cube(-Q / 2 - disc) - b / (3 * a));
}

export const hmBeta = (eps) => (eps > hmEpsStar() ? drawn(-expm1(-eps / 2)) : 0.0);

export function swParams(eps) {
  const e = exp(eps);
  let den, num;
  if (eps < 1e-3) {
    den = (eps * eps) / 2 + eps ** 3 / 6 + eps ** 4 / 24;
    num = (eps * eps) / 2 + eps ** 3 / 3 + eps ** 4 / 8;
  } else {
    den = expm1(eps) - eps;
    num = eps * e - expm1(eps);
  }
  const b = num / (2 * e * den);
  const center = drawn(1.0 / (1.0 + 1.0 / (2 * b * e)));
  return { b, center, p: center / (2 * b), q: 1.0 - center };
}

export const round2Slope = (eps1) => tanh(eps1 / 2);

// ------------------------------------------------------------------ one-shot samplers
const one = async (src) => (await floats(src, 1))[0];

export async function laplace(u, eps, src) {
  const scale = 2.0 / eps;
  let w = 2.0 * (await one(src));
  const upper = w >= 1.0 ? 1 : 0;
  w -= upper;
  let mag = log1p(-w);
  mag *= (1.0 - 2.0 * upper) * scale;
  return mag + u;
}

export async function duchiBit(u, eps, src) {
  return (await one(src)) < duchiProbability(eps, u) ? 1 : 0;
}

export async function pm(u, eps, src) {
  const { C, width, center: pc } = pmParams(eps);
  let v = await one(src);
  const center = (await one(src)) < pc;
  const lft = ((C + 1) / 2) * u - width / 2;
  let outer = v * (C + 1);
  outer -= C;
  outer += width * (outer >= lft ? 1 : 0);
  v *= width;
  v += lft;
  return center ? v : outer;
}

export async function hm(u, eps, src) {
  const beta = hmBeta(eps);
  const c = duchiBound(eps);
  const w = await one(src);
  let y = (await one(src)) < duchiProbability(eps, u) ? c : -c;
  if (beta > 0 && w < beta) y = await pm(u, eps, src);
  return y;
}

export async function sw(t, eps, src) {
  const { b, center: pc } = swParams(eps);
  let v = await one(src);
  const center = (await one(src)) < pc;
  let outer = v - b;
  outer += 2 * b * (v >= t ? 1 : 0);
  v *= 2 * b;
  v += t;
  v -= b;
  return center ? v : outer;
}

/** The output bucket of an SW report among dOut equal buckets of [−b, 1 + b]. */
export function swBucket(y, eps, dOut) {
  const { b } = swParams(eps);
  const j = floor((y + b) * (dOut / (1 + 2 * b)));
  return min(dOut - 1, Math.max(0, j));
}

// ------------------------------------------------------------------ the two-round forms
/** α-point rounding: key = min(⌊s·t + a⌋, s) (math (20.16)). */
export const roundingKey = (t, s, a) => min(floor(s * t + a), s);

/** Round 1 of L-1BitMean / L-PM / L-HM: the memo y1 of the grid value u_j at ε∞. */
export async function memo(mechanism, uGrid, epsPerm, src) {
  if (mechanism === "Duchi" || (mechanism === "HM" && hmBeta(epsPerm) === 0.0)) {
    const c = duchiBound(epsPerm);
    return (await one(src)) < duchiProbability(epsPerm, uGrid) ? c : -c;
  }
  return mechanism === "PM" ? pm(uGrid, epsPerm, src) : hm(uGrid, epsPerm, src);
}

/** Round 2: one bit, Pr[1 | y1] = (1 + κ·y1)/2, κ = tanh(ε1/2) (math (20.17)). */
export async function round2Bit(y1, eps1, src) {
  return (await one(src)) < drawn(0.5 + 0.5 * round2Slope(eps1) * y1) ? 1 : 0;
}

/** L-SW round 2: GRR over dOut buckets keeping the memo's bucket with p2. */
export async function lswRound2Draw(kept, p2, dOut, src) {
  let other = floor((await one(src)) * (dOut - 1));
  other += other >= kept ? 1 : 0;
  return (await one(src)) < p2 ? kept : other;
}

/** Real reports go on a grid of 2³¹ equal cells of the report range (math §20.12): the cell's
 * index (4 bytes big-endian; HM's atoms ±C take codes 2³¹ and 2³¹ + 1) and its midpoint. */
export const GRID = 2 ** 31;

export function gridCode(y, lo, hi, atoms = []) {
  const k = atoms.indexOf(y);
  if (k >= 0) return GRID + k;
  const w = (hi - lo) / GRID;
  return min(GRID - 1, Math.max(0, floor((y - lo) / w)));
}

export function gridValue(code, lo, hi, atoms = []) {
  if (code >= GRID) return atoms[code - GRID];
  return lo + (code + 0.5) * ((hi - lo) / GRID);
}

export function realBody(code) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, code, false);
  return out;
}

/** The claims of one report of the two-round forms (math (20.18)): 2·artanh(1/C_M) caps ε1. */
export function maxEps1(mechanism, epsPerm) {
  const cm = mechanism === "Duchi" || (mechanism === "HM" && hmBeta(epsPerm) === 0.0) ? duchiBound(epsPerm) : pmParams(epsPerm).C;
  return 2 * atanh(1.0 / cm);
}

// ------------------------------------------------------------------ exact channels (§20.7)
/** ε of a finite channel (rows: inputs): max over outputs of ln(max/min) (privacy.channel_epsilon). */
export function channelEpsilon(rows) {
  let eps = -Infinity;
  for (let y = 0; y < rows[0].length; y++) {
    let hi = -Infinity, lo = Infinity;
    for (const r of rows) (hi = max(hi, r[y])), (lo = min(lo, r[y]));
    if (!(hi > 0)) continue;
    if (lo === 0) return Infinity;
    eps = max(eps, log(hi) - log(lo));
  }
  return eps;
}

const sortedUnique = (xs) => [...new Set(xs)].sort((a, b) => a - b);
const clamp = (x, lo, hi) => min(max(x, lo), hi);

/** Pr[cell | input] for densities p on [a_i, b_i] and q elsewhere on [lo, hi]: the cells between
 * every breakpoint (privacy.numeric._cell_channel). */
function cellChannel(pieces, p, q, lo, hi) {
  const cuts = sortedUnique([lo, hi, ...pieces.flat()].map((x) => clamp(x, lo, hi)));
  return pieces.map(([a, b]) => {
    const row = [];
    for (let i = 0; i + 1 < cuts.length; i++) {
      const mid = (cuts[i] + cuts[i + 1]) / 2;
      row.push((mid >= a && mid <= b ? p : q) * (cuts[i + 1] - cuts[i]));
    }
    return row;
  });
}

const pmLeft = (pm, u) => ((pm.C + 1) / 2) * u - pm.width / 2;

export function pmChannel(eps, us) {
  const pm = pmParams(eps);
  return cellChannel(us.map((u) => [pmLeft(pm, u), pmLeft(pm, u) + pm.width]), pm.p, pm.q, -pm.C, pm.C);
}

export function swChannel(eps, ts) {
  const { b, p, q } = swParams(eps);
  return cellChannel(ts.map((t) => [t - b, t + b]), p, q, -b, 1 + b);
}

export const duchiChannel = (eps, us) => us.map((u) => [1.0 - duchiProbability(eps, u), duchiProbability(eps, u)]);

export function hmChannel(eps, us) {
  const beta = hmBeta(eps);
  const atoms = duchiChannel(eps, us).map((r) => r.map((x) => (1.0 - beta) * x));
  if (beta === 0.0) return atoms;
  return pmChannel(eps, us).map((r, i) => [...r.map((x) => beta * x), ...atoms[i]]);
}

const duchiMemo = (mech, epsPerm) => mech === "Duchi" || (mech === "HM" && hmBeta(epsPerm) === 0.0);

export function memoChannel(mech, epsPerm, us) {
  if (mech === "Duchi") return duchiChannel(epsPerm, us);
  return mech === "PM" ? pmChannel(epsPerm, us) : hmChannel(epsPerm, us);
}

/** The mean memo value of each column of memoChannel: cell midpoints, then Duchi's atoms. */
function memoValues(mech, epsPerm, us) {
  const c = duchiBound(epsPerm);
  if (duchiMemo(mech, epsPerm)) return [-c, c];
  const pm = pmParams(epsPerm);
  const lft = us.map((u) => pmLeft(pm, u));
  const cuts = sortedUnique([-pm.C, pm.C, ...lft, ...lft.map((a) => a + pm.width)].map((x) => clamp(x, -pm.C, pm.C)));
  const mids = cuts.slice(1).map((r, i) => (cuts[i] + r) / 2);
  return mech === "PM" ? mids : [...mids, -c, c];
}

const gridU = (s) => Array.from({ length: s + 1 }, (_, j) => (2.0 * j) / s - 1.0);

/** One report of L-1BitMean / L-PM / L-HM over the grid values: (bit 0, bit 1). */
export function chainReportChannel(mech, epsPerm, eps1, s) {
  const us = gridU(s);
  const values = memoValues(mech, epsPerm, us);
  const kappa = round2Slope(eps1);
  const r2 = values.map((y) => drawn(0.5 + 0.5 * kappa * y));
  return memoChannel(mech, epsPerm, us).map((row) => {
    let one = 0;
    row.forEach((x, k) => (one += x * r2[k]));
    return [1.0 - one, one];
  });
}

/** W1[j][m] = Pr[SW(j/s) at ε∞ in output bucket m] (privacy.numeric.sw_grid_channel). */
export function swGridChannel(epsPerm, s, dOut) {
  const { b, p, q } = swParams(epsPerm);
  const edges = Array.from({ length: dOut + 1 }, (_, m) => -b + ((1 + 2 * b) * m) / dOut);
  return Array.from({ length: s + 1 }, (_, j) => {
    const t = j / s;
    return edges.slice(1).map((hi, m) => {
      const lo = edges[m];
      return q * (hi - lo) + (p - q) * max(min(hi, t + b) - max(lo, t - b), 0.0);
    });
  });
}

function grrComposed(w1, lam) {
  const q2 = 1.0 / (w1[0].length + lam);
  const p2 = (1.0 + lam) * q2;
  return [p2, q2, w1.map((r) => r.map((x) => q2 + (p2 - q2) * x))];
}

/** L-SW's round 2 (p2, q2): the largest GRR odds whose report ε is at most ε1 (bisection). */
export function lswRound2(name, epsPerm, eps1, s, dOut) {
  const w1 = swGridChannel(epsPerm, s, dOut);
  const top = channelEpsilon(w1);
  if (!(eps1 < top)) throw fail(name, "eps_1", `a finite number in (0, ${top}) (the ε of one bucketed SW memo)`, eps1);
  const epsOf = (lam) => channelEpsilon(grrComposed(w1, lam)[2]);
  let lo = 0.0, hi = 1.0;
  while (epsOf(hi) <= eps1) hi *= 2.0;
  for (let i = 0; i < 100; i++) {
    const mid = 0.5 * (lo + hi);
    if (epsOf(mid) <= eps1) lo = mid;
    else hi = mid;
  }
  const [p2, q2] = grrComposed(w1, lo);
  return { p2, q2, w1 };
}

// ------------------------------------------------------------------ the registered protocols
/** Per-report variance v0 + v2·u² of PM and HM, and its worst over u ∈ [−1, 1] (privacy.numeric). */
function unitVariance(mech, eps) {
  const s = exp(eps / 2), em1 = expm1(eps / 2);
  const pm = [(s + 3) / (3 * em1 * em1), 1.0 / em1];
  if (mech === "PM") return pm;
  const c = duchiBound(eps), beta = hmBeta(eps);
  return [beta * pm[0] + (1 - beta) * (c * c), beta * pm[1] + (1 - beta) * -1.0];
}

/** The default grid: the smallest s whose rounding term is at most 5% of the memo's worst variance, ≤ 64. */
export function defaultGrid(mech, epsPerm) {
  if (duchiMemo(mech, epsPerm)) return 1;
  const [v0, v2] = unitVariance(mech, epsPerm);
  const at = (u) => v0 + 0.0 * u + v2 * u * u;
  const worst = max(at(-1.0), at(1.0), ...(v2 < 0 ? [at(min(1.0, max(-1.0, -0.0 / (2 * v2))))] : []));
  return min(64, max(1, ceil(sqrt((1 + v2) / (0.05 * worst)) - 1e-12)));
}

const MEMO = { "L-1BitMean": "Duchi", "L-PM": "PM", "L-HM": "HM" };
const AUDIT_T = [0.0, 0.25, 0.5, 0.75, 1.0];

/** t = clip((x − lo)/(hi − lo), 0, 1) of a checked value. */
const tOf = (o, x) => clamp((x - o.lo) / (o.hi - o.lo), 0.0, 1.0);
/** The audit inputs' t: the declared values lo + (hi − lo)·i/4 mapped back. */
const auditT = (o) => AUDIT_T.map((t) => tOf(o, o.lo + (o.hi - o.lo) * t));

/** The value's 8 bytes (binary64, big-endian) as hex: a one-shot protocol's memo key. */
function floatKey(x) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setFloat64(0, x, false);
  return toHex(b);
}
const keyFloat = (h) => new DataView(fromHex(h).buffer).getFloat64(0, false);

const bitBody = (bit) => Uint8Array.of(bit);
const realBody4 = (o, y) => realBody(gridCode(y, o.range[0], o.range[1], o.atoms));

/** A real in [lo, hi] (clipped to it when the protocol's `clip` is true). */
function checkReal(v) {
  const allowed = `a real number in [${this.lo}, ${this.hi}]`;
  if (typeof v !== "number") throw fail(this.name, "value", allowed, v, TypeError);
  if (!Number.isFinite(v)) throw fail(this.name, "value", allowed, v);
  if (v < this.lo || v > this.hi) {
    if (!this.params.clip) throw fail(this.name, "value", `${allowed} (or clip = true)`, v);
    return clamp(v, this.lo, this.hi);
  }
  return v;
}

const ONE_SHOT = {
  Laplace: {
    draw: (o, t, src) => laplace(2.0 * t - 1.0, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => [2.0 / o.scale, 2.0 / o.scale],
  },
  Duchi: {
    draw: (o, t, src) => duchiBit(2.0 * t - 1.0, o.params.eps, src),
    body: (o, y) => bitBody(y),
    epsilons: (o) => channelEpsilon(duchiChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))),
  },
  PM: {
    draw: (o, t, src) => pm(2.0 * t - 1.0, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(pmChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))),
  },
  HM: {
    draw: (o, t, src) => hm(2.0 * t - 1.0, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(hmChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))),
  },
  SW: {
    draw: (o, t, src) => sw(t, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(swChannel(o.params.eps, auditT(o))),
  },
};
ONE_SHOT["1BitMean"] = ONE_SHOT.Duchi;

export function methods(name) {
  if (name in ONE_SHOT) {
    const m = ONE_SHOT[name];
    return {
      check: checkReal,
      key: (v) => floatKey(v),
      keyBytes: fromHex,
      round1(key, st, src) {
        return m.draw(this, tOf(this, keyFloat(key)), src);
      },
      body(y) {
        return m.body(this, y);
      },
      epsilons() {
        const e = m.epsilons(this);
        return Array.isArray(e) ? e : [e, e];
      },
    };
  }
  const lsw = name === "L-SW";
  return {
    check: checkReal,
    async state(src) {
      return { offset: (await floats(src, 1))[0] };
    },
    /** α-point rounding: j = min(⌊s·t + a⌋, s). */
    key(v, st) {
      return roundingKey(tOf(this, v), this.s, st.offset);
    },
    async round1(j, st, src) {
      if (!lsw) return memo(this.memoMech, (2.0 * j) / this.s - 1.0, this.params.eps_perm, src);
      return swBucket(await sw(j / this.s, this.params.eps_perm, src), this.params.eps_perm, this.params.d_out);
    },
    round2(y1, src) {
      return lsw ? lswRound2Draw(y1, this.p2, this.params.d_out, src) : round2Bit(y1, this.params.eps_1, src);
    },
    body(y) {
      return lsw ? uintBE(y, minBytes(this.params.d_out - 1)) : bitBody(y);
    },
    epsilons() {
      const P = this.params;
      if (lsw) {
        const report = this.w1.map((r) => r.map((x) => this.q2 + (this.p2 - this.q2) * x));
        return [channelEpsilon(report), channelEpsilon(this.w1)];
      }
      const us = gridU(this.s);
      return [channelEpsilon(chainReportChannel(this.memoMech, P.eps_perm, P.eps_1, this.s)), channelEpsilon(memoChannel(this.memoMech, P.eps_perm, us))];
    },
  };
}

function intIn(name, key, v, lo, hi) {
  if (!Number.isInteger(v) || v < lo || v > hi) throw fail(name, key, `an integer in [${lo}, ${hi}]`, v, Number.isInteger(v) ? RangeError : TypeError);
  return v;
}

/** The derived constants (docs/client-spec.md §3.2–§3.4); chains and L-SW check ε1 < its bound. */
export function derive(name, P) {
  if (!(P.lo < P.hi)) throw fail(name, "range", "a non-empty range lo < hi", `[${P.lo}, ${P.hi}]`);
  if (!Number.isFinite(P.hi - P.lo)) throw fail(name, "range", "a range whose width is a finite float", `[${P.lo}, ${P.hi}]`);
  const o = { lo: P.lo, hi: P.hi, atoms: [] };
  const none = [undefined, undefined, undefined, undefined];
  if (name === "Laplace") {
    const scale = 2.0 / P.eps;
    const b = 20 * scale;
    return [...none, { ...o, scale, range: [-1.0 - b, 1.0 + b] }];
  }
  if (name === "Duchi" || name === "1BitMean") return [...none, { ...o, slope: duchiSlope(P.eps) }];
  if (name === "PM") {
    const { width, center, C } = pmParams(P.eps);
    return [...none, { ...o, width, center, range: [-C, C] }];
  }
  if (name === "HM") {
    const { width, center, C } = pmParams(P.eps);
    const c = max(C, duchiBound(P.eps));
    return [...none, { ...o, beta: hmBeta(P.eps), width, center, range: [-c, c], atoms: [-duchiBound(P.eps), duchiBound(P.eps)] }];
  }
  if (name === "SW") {
    intIn(name, "d", P.d, 2, Infinity);
    intIn(name, "d_out", P.d_out, 2, Infinity);
    const { b, center } = swParams(P.eps);
    return [...none, { ...o, b, center, range: [-b, 1.0 + b] }];
  }
  budgetPair(name, P);
  if (name === "L-SW") {
    intIn(name, "s", P.s, 1, 4096);
    intIn(name, "d_out", P.d_out, 2, 4096);
    const { p2, q2, w1 } = lswRound2(name, P.eps_perm, P.eps_1, P.s, P.d_out);
    return [undefined, undefined, p2, q2, { ...o, s: P.s, w1 }];
  }
  const mech = MEMO[name];
  const top = maxEps1(mech, P.eps_perm) * (1 - 1e-9); // the bound less its float error (privacy.numeric.EPS_1_MARGIN)
  if (!(P.eps_1 < top)) throw fail(name, "eps_1", `a finite number in (0, ${top}) (the largest per-report ε of a ${mech} memo)`, P.eps_1);
  if (P.s === null) P.s = defaultGrid(mech, P.eps_perm);
  intIn(name, "s", P.s, 1, 4096);
  return [...none, { ...o, memoMech: mech, s: P.s, slope: round2Slope(P.eps_1) }];
}

function budgetPair(name, P) {
  for (const key of ["eps_perm", "eps_1"]) {
    if (!(P[key] > 0) || !(P[key] <= 30)) throw fail(name, key, "a finite number > 0 and <= 30", P[key]);
  }
  if (!(P.eps_1 < P.eps_perm)) throw fail(name, "eps_1", `a finite number in (0, ${P.eps_perm})`, P.eps_1);
}
