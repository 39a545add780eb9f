// The numeric mechanisms (docs/math.md §20, Python: longldp.protocols.numeric): Laplace, Duchi,
// PM, HM, SW, 1BitMean and the memoized L-1BitMean, L-PM, L-HM, L-SW. Every draw consumes the
// byte source in the order of the Python kernels (one float per `rng.random(1)`), with the same
// float64 expressions, so a device and the Python client give the same reports from the same
// stream (to the last bit where the platforms' exp/log1p agree; tests/test_numeric_js.py).
// Not yet in the protocol table (src/protocols.js): that row comes with the generated table.

import { floats } from "./common.js";

const { exp, expm1, log, log1p, tanh, floor, min, atanh, sqrt, abs, sign } = Math;

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
export async function lswRound2(kept, p2, dOut, src) {
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
