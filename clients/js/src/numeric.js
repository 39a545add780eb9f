// The numeric mechanisms (docs/math.md §20, Python: longldp.protocols.numeric): Laplace, Duchi,
// PM, HM, SW, 1BitMean and the memoized L-1BitMean, L-PM, L-HM, L-SW (docs/client-spec.md §3.4).
// Every draw consumes the byte source in the order of the Python kernels (one float per
// `rng.random(1)`), with the same float64 expressions, so a device and the Python client give
// the same reports from the same stream (to the last bit where the platforms' exp/log agree;
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

/** Laplace's fine uniform (math §20.12): R = c − U2·2⁻⁵² with c = 1 − frac(2U1), refined by
 * U3 when c = 2⁻⁵² (oneshot.laplace_sample). */
export async function laplace(u, eps, src) {
  const scale = 2.0 / eps;
  let w = 2.0 * (await one(src));
  const upper = w >= 1.0 ? 1 : 0;
  w -= upper;
  const c = 1.0 - w;
  let r = c - (await one(src)) * 2 ** -52;
  if (c === 2 ** -52) r -= (await one(src)) * 2 ** -105;
  let mag = log(r);
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
  if (beta > 0 && w < beta) {
    y = await pm(u, eps, src);
    if (abs(y) === c) y = towardZero(y); // the atoms' codes carry Duchi's branch only (oneshot.off_atoms)
  }
  return y;
}

/** The next float towards 0 of a finite nonzero x. */
function towardZero(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
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

/** Round 1 of L-1BitMean / L-PM / L-HM: the memo y1 of the grid value u_j at ε∞ (a PM or HM memo
 * as the midpoint of its report-grid cell, math §20.9). */
export async function memo(mechanism, uGrid, epsPerm, src) {
  if (mechanism === "Duchi" || (mechanism === "HM" && hmBeta(epsPerm) === 0.0)) {
    const c = duchiBound(epsPerm);
    return (await one(src)) < duchiProbability(epsPerm, uGrid) ? c : -c;
  }
  const y = mechanism === "PM" ? await pm(uGrid, epsPerm, src) : await hm(uGrid, epsPerm, src);
  const [lo, hi] = reportRange(mechanism, epsPerm);
  const atoms = mechanism === "HM" ? [-duchiBound(epsPerm), duchiBound(epsPerm)] : [];
  return gridValue(gridCode(y, lo, hi, atoms), lo, hi, atoms); // kept as its cell's midpoint (chains.round1)
}

/** The report range of a real report (privacy.numeric.report_range). */
export function reportRange(mechanism, eps) {
  if (mechanism === "Laplace") {
    const b = 20 * (2.0 / eps);
    return [-1.0 - b, 1.0 + b];
  }
  if (mechanism === "SW") {
    const { b } = swParams(eps);
    return [-b, 1.0 + b];
  }
  const c = mechanism === "HM" ? max(pmParams(eps).C, duchiBound(eps)) : pmParams(eps).C;
  return [-c, c];
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

// ------------------------------------------------------------------ realized slack (§20.12)
const UR = 2 ** -53; // unit roundoff
const LOG_ULPS = 4; // the logarithm's error assumed, in ulps (privacy.numeric.LOG_ULPS)
const bracket = (eta) => log1p((2.0 * eta) / (1.0 - eta));

/** (w, δ, x) of PM's or SW's sampler at ε (privacy.numeric._piecewise_error). */
function piecewiseError(mech, eps) {
  const [r0, r1] = reportRange(mech, eps);
  const w = (r1 - r0) / GRID;
  const quantize = 2.0 * UR * (r1 - r0);
  if (mech === "SW") {
    const { b } = swParams(eps);
    return [w, (UR * (2.0 + 5.0 * b) + quantize) * (1.0 + 2 ** -40), UR * (2.0 * b + 1.0)];
  }
  const pm = pmParams(eps);
  const c = pm.C, slope = pm.C + 1.0;
  const delta = (UR * (3.0 * c + 1.0 + 2.0 * c) + quantize) * (1.0 + 2 ** -40);
  return [w, delta, UR * (pm.width + slope + 2.0 * (slope + c) + slope)];
}

/** How far a real report's realized ε may exceed the ideal one (privacy.numeric.realized_slack). */
export function realizedSlack(mech, eps) {
  if (mech === "Duchi" || mech === "1BitMean" || (mech === "HM" && hmBeta(eps) === 0.0)) return 0.0;
  if (mech === "Laplace") {
    const [r0, r1] = reportRange(mech, eps);
    const w = (r1 - r0) / GRID;
    const beta = 2.0 / eps;
    const depth = (r1 + 1.0) / beta;
    let delta = UR * (beta * (1.0 + (2 * LOG_ULPS + 1) * depth) + r1) + 2.0 * UR * (r1 - r0);
    delta *= 1.0 + 2 ** -40;
    const widen = ((w + 2 * delta) / (w - 2 * delta)) * exp((w + 2 * delta) / beta);
    const cell = (w + 2 * delta) / beta;
    const rho = (max((2 ** -105 + 2 ** -158) * exp(52 * log(2.0) + cell), 2 ** -158 * exp(depth + cell)) * 2 * beta) / (w - 2 * delta);
    return log((widen + rho) / (1.0 - rho)) + 8 * UR;
  }
  const [w, delta, extra] = piecewiseError(mech, eps);
  return bracket((2.0 * delta + extra) / w) + 8 * UR;
}

/** The same for one report of L-PM / L-HM (privacy.numeric.chain_report_slack). */
function chainReportSlack(mech, epsPerm, eps1, s) {
  if (duchiMemo(mech, epsPerm)) return 0.0;
  const [w, delta] = piecewiseError(mech, epsPerm);
  const p = pmParams(epsPerm).p;
  const kappa = round2Slope(eps1);
  const e = 2.5 * UR;
  const channel = chainReportChannel(mech, epsPerm, eps1, s);
  const cells = memoChannel(mech, epsPerm, [0.0])[0].length + 2 * (s + 1);
  const moved = 2.0 * delta * (1.0 + 4.0 * w * p) * (kappa / 2 + (2.0 * e) / w) + 6.0 * UR;
  const means = (kappa / 2) * p * w * w + 2.0 * e + (cells + 1) * UR;
  return bracket((moved + means) / Math.min(...channel.flat()));
}

/** L-SW (privacy.numeric.lsw_slack): [the bound on one report's realized ε, the memo's slack];
 * w1 and p2 as derived. */
function lswSlack(epsPerm, eps1, s, dOut, w1, p2) {
  const { b, p, q } = swParams(epsPerm);
  const delta = UR * (8.0 + 17.0 * b) * (1.0 + 2 ** -40);
  const edges = Array.from({ length: dOut + 1 }, (_, m) => -b + ((1 + 2 * b) * m) / dOut);
  const grow = delta + 6.0 * UR * (1.0 + 2.0 * b);
  const pad = UR + 4.0 * q * UR * (1.0 + b);
  const mass = (t, lo, hi) =>
    q * max(min(hi, 1.0 + b) - max(lo, -b), 0.0) + (p - q) * max(min(hi - t, b) + min(t - lo, b), 0.0);
  const upper = [], lower = [];
  for (let j = 0; j <= s; j++) {
    const t = j / s;
    const up = [], low = [];
    for (let m = 0; m < dOut; m++) {
      const lo = m === 0 ? -Infinity : edges[m], hi = m === dOut - 1 ? Infinity : edges[m + 1];
      up.push((mass(t, lo - grow, hi + grow) + pad) * (1.0 + 64 * UR));
      low.push((mass(t, lo + grow, hi - grow) - pad) * (1.0 - 64 * UR));
    }
    upper.push(up), lower.push(low);
  }
  if (lower.some((r) => r.some((x) => !(x > 0)))) return [Infinity, Infinity];
  const bound = (hiRows, loRows) => {
    let e = -Infinity;
    for (let m = 0; m < dOut; m++) {
      let hi = -Infinity, lo = Infinity;
      for (let j = 0; j <= s; j++) (hi = max(hi, hiRows[j][m])), (lo = min(lo, loRows[j][m]));
      e = max(e, log(hi) - log(lo));
    }
    return e;
  };
  const memo = max(0.0, bound(upper, lower) - channelEpsilon(w1));
  const keep = drawn(p2);
  const eta = 6.0 * (dOut - 1) * UR;
  const other = (1.0 - keep) / (dOut - 1);
  const repHi = upper.map((r, j) => r.map((x, m) => (keep * x + other * (1.0 + eta) * (1.0 - lower[j][m])) * (1.0 + 64 * UR)));
  const repLo = lower.map((r, j) => r.map((x, m) => (keep * x + other * (1.0 - eta) * (1.0 - upper[j][m])) * (1.0 - 64 * UR)));
  return [bound(repHi, repLo), memo];
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
    epsilons: (o) => 2.0 / o.scale + realizedSlack("Laplace", o.params.eps),
  },
  Duchi: {
    draw: (o, t, src) => duchiBit(2.0 * t - 1.0, o.params.eps, src),
    body: (o, y) => bitBody(y),
    epsilons: (o) => channelEpsilon(duchiChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))),
  },
  PM: {
    draw: (o, t, src) => pm(2.0 * t - 1.0, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(pmChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))) + realizedSlack("PM", o.params.eps),
  },
  HM: {
    draw: (o, t, src) => hm(2.0 * t - 1.0, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(hmChannel(o.params.eps, auditT(o).map((t) => 2.0 * t - 1.0))) + realizedSlack("HM", o.params.eps),
  },
  SW: {
    draw: (o, t, src) => sw(t, o.params.eps, src),
    body: realBody4,
    epsilons: (o) => channelEpsilon(swChannel(o.params.eps, auditT(o))) + realizedSlack("SW", o.params.eps),
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
        const report = channelEpsilon(this.w1.map((r) => r.map((x) => this.q2 + (this.p2 - this.q2) * x)));
        const [bound, memo] = lswSlack(P.eps_perm, P.eps_1, this.s, P.d_out, this.w1, this.p2);
        return [report + max(0.0, bound - report), channelEpsilon(this.w1) + memo];
      }
      const us = gridU(this.s);
      const report = channelEpsilon(chainReportChannel(this.memoMech, P.eps_perm, P.eps_1, this.s)) + chainReportSlack(this.memoMech, P.eps_perm, P.eps_1, this.s);
      return [report, channelEpsilon(memoChannel(this.memoMech, P.eps_perm, us)) + realizedSlack(this.memoMech, P.eps_perm)];
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
    return [...none, { ...o, scale: 2.0 / P.eps, range: reportRange(name, P.eps) }];
  }
  if (name === "Duchi" || name === "1BitMean") return [...none, { ...o, slope: duchiSlope(P.eps) }];
  if (name === "PM") {
    const { width, center } = pmParams(P.eps);
    return [...none, { ...o, width, center, range: reportRange(name, P.eps) }];
  }
  if (name === "HM") {
    const { width, center } = pmParams(P.eps);
    return [...none, { ...o, beta: hmBeta(P.eps), width, center, range: reportRange(name, P.eps), atoms: [-duchiBound(P.eps), duchiBound(P.eps)] }];
  }
  if (name === "SW") {
    intIn(name, "d", P.d, 2, Infinity);
    intIn(name, "d_out", P.d_out, 2, Infinity);
    const { b, center } = swParams(P.eps);
    return [...none, { ...o, b, center, range: reportRange(name, P.eps) }];
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
