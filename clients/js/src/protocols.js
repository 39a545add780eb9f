// Every protocol's device side: its parameters from a spec, its budgets, and the draws of
// per-device state, round 1, round 2 and the report body (docs/client-spec.md §3–§5).
// Formulas are those of src/longldp/privacy.py, in the same float64 operation order.

import { minBytes, uintBE } from "./bytes.js";
import { PyFloat } from "./json.js";
import { floats, integers, bigIntegers } from "./random.js";

const { exp, expm1, log, tanh, sqrt, min, max, abs } = Math;
export const EPS_MAX = 30;

// ------------------------------------------------------------------------------ validation
const show = (v) => (typeof v === "string" ? JSON.stringify(v) : typeof v === "bigint" ? `${v}` : JSON.stringify(v) ?? String(v));

function fail(owner, name, allowed, got, Err = RangeError) {
  return new Err(`${owner}: '${name}' must be ${allowed}; got ${show(got)}`);
}

function int(owner, name, v, lo, hi) {
  const allowed = hi === undefined ? `an integer >= ${lo}` : `an integer in [${lo}, ${hi}]`;
  if (typeof v !== "number" || !Number.isInteger(v)) throw fail(owner, name, allowed, v, TypeError);
  if (v < lo || (hi !== undefined && v > hi)) throw fail(owner, name, allowed, v);
  return v;
}

function real(owner, name, v) {
  if (typeof v !== "number" || !Number.isFinite(v)) throw fail(owner, name, "a finite number", v, TypeError);
  return v;
}

function budget(owner, name, v) {
  real(owner, name, v);
  if (v <= 0 || v > EPS_MAX) throw fail(owner, name, `a finite number > 0 and <= ${EPS_MAX}`, v);
  return v;
}

function chain(owner, P) {
  budget(owner, "eps_perm", P.eps_perm);
  real(owner, "eps_1", P.eps_1);
  if (P.eps_1 <= 0 || P.eps_1 >= P.eps_perm) {
    throw fail(owner, "eps_1", `a finite number in (0, ${P.eps_perm})`, P.eps_1);
  }
}

function choice(owner, name, v, allowed) {
  if (typeof v !== "string" || !allowed.includes(v.toLowerCase())) {
    throw fail(owner, name, `one of ${allowed.map((a) => `'${a}'`).join(", ")}`, v, typeof v === "string" ? RangeError : TypeError);
  }
  return v.toLowerCase();
}

// ------------------------------------------------------------------------------ privacy math
/** ε rounded outward by 1e-12 relative (privacy.round_up). */
export const roundUp = (eps) => eps + 1e-12 * max(1, abs(eps));

function grrProbabilities(eps, k) {
  const p = 1 / (1 + (k - 1) * exp(-eps));
  return [p, (1 - p) / (k - 1)];
}
const sueProbabilities = (eps) => {
  const p = 1 / (1 + exp(-eps / 2));
  return [p, 1 - p];
};
const oueProbabilities = (eps) => [0.5, 1 / (exp(eps) + 1)];
const chainSupport = (p1, q1, p2, q2) => [p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2];
const chainNonsupport = (p1, q1, p2, q2) => [
  p1 * (1 - p2) + (1 - p1) * (1 - q2),
  q1 * (1 - p2) + (1 - q1) * (1 - q2),
];
const vstar = (P1, P0) => (P0 * (1 - P0)) / (P1 - P0) ** 2;
const ueEpsilon = (P1, P0, N1 = 1 - P1, N0 = 1 - P0) => log((P1 * N0) / (P0 * N1));

function lgrrP2(k, a, b, calibration) {
  if (calibration === "paper") {
    const num = expm1(a + b);
    return num / ((k - 1) * exp(b) * expm1(a - b) + num);
  }
  const num = exp(b) * expm1(a) + (k - 1) * expm1(b);
  return num / ((exp(b) + k - 1) * expm1(a));
}

/** Python's round(): halves to even. */
function pyRound(x) {
  const r = Math.round(x);
  return abs(x % 1) === 0.5 ? 2 * Math.round(x / 2) : r;
}

function integerArgmin(f, start, lo = 2, hi = 2 ** 32) {
  let g = min(max(pyRound(start), lo), hi);
  let fg = f(g);
  for (let i = 0; i < 100000; i++) {
    let down, up;
    if (g > lo && (down = f(g - 1)) <= fg) [g, fg] = [g - 1, down];
    else if (g < hi && (up = f(g + 1)) < fg) [g, fg] = [g + 1, up];
    else return g;
  }
  throw new RangeError(`integer argmin: no minimum near ${start}`);
}

function logolohaG(a, b, calibration) {
  const variance = (g) => {
    const p1 = grrProbabilities(a, g)[0];
    const p2 = lgrrP2(g, a, b, calibration);
    return vstar(chainSupport(p1, (1 - p1) / (g - 1), p2, (1 - p2) / (g - 1))[0], 1 / g);
  };
  let start = exp(b) + 1;
  if (calibration === "paper") {
    const A_ = exp(a), B_ = exp(b);
    const A = A_ ** 4 - 14 * A_ ** 2 + 12 * A_ * B_ * (1 - A_ * B_) + 12 * A_ ** 3 * B_ + 1;
    start = 1 + (2 * A_ * expm1(a + b)) / (sqrt(max(A, 0)) + expm1(2 * a));
  }
  return integerArgmin(variance, start);
}

/** q2 of L-OUE / L-SOUE (p2 = 1/2): the root in [0, 1/2) of the ε1 quadratic (privacy.py). */
function halfP2Q2(owner, p1, q1, a, b_) {
  const b = exp(b_);
  const A1 = p1 / 2, B1 = 1 - p1, A0 = q1 / 2, B0 = 1 - q1;
  const epsMax = ueEpsilon(A1, A0);
  if (b_ >= epsMax) {
    throw new RangeError(`${owner}: 'eps_1' must be < ${+epsMax.toPrecision(6)} at eps_perm = ${a}; got ${b_}`);
  }
  const c2 = B0 * B1 * (b - 1);
  const c1 = B1 * (1 - A0) - A1 * B0 - b * (B0 * (1 - A1) - A0 * B1);
  const c0 = A1 * (1 - A0) - b * A0 * (1 - A1);
  return quadraticRoot(c2, c1, c0);
}

/** The root in [0, 1/2) of c2·x² + c1·x + c0 (privacy._quadratic_root's closed form). */
export function quadraticRoot(c2, c1, c0) {
  const disc = sqrt(max(c1 * c1 - 4 * c2 * c0, 0));
  const t = -0.5 * (c1 + (c1 >= 0 ? disc : -disc));
  const valid = [t / c2, c0 / t].filter((x) => x >= 0 && x < 0.5);
  if (valid.length !== 1) throw new RangeError("no valid q2 for these budgets");
  return valid[0];
}

// ------------------------------------------------------------------------------ hashing
const M64 = (1n << 64n) - 1n;
const GAMMA = 0x9e3779b97f4a7c15n, MIX1 = 0xbf58476d1ce4e5b9n, MIX2 = 0x94d049bb133111ebn;

/** H_s(v) of the local-hashing protocols (docs/wire-format.md §3). */
export function mixHash(seed, v, g) {
  let z = ((BigInt(v) + 1n) * GAMMA + BigInt(seed)) & M64;
  z ^= z >> 30n;
  z = (z * MIX1) & M64;
  z ^= z >> 27n;
  z = (z * MIX2) & M64;
  z >>= 32n;
  return Number((z * BigInt(g)) >> 32n);
}

const parity = (j, v) => {
  let x = BigInt(j) & BigInt(v), c = 0;
  while (x) {
    c ^= Number(x & 1n);
    x >>= 1n;
  }
  return c;
};

// ------------------------------------------------------------------------------ rounds
/** GRR over m symbols: draw s in [1, m), then u; keep x if u < keep, else (x + s) mod m. */
async function grrRound(x, m, keep, src) {
  const [s] = await integers(src, 1, m, 1);
  const [u] = await floats(src, 1);
  return u < keep ? x : (x + s) % m;
}

/** UE round 1: k draws u_i → bit_i = u_i < q1, then one draw u → bit_v = u < p1. */
async function ueRound1(v, k, p1, q1, src) {
  const u = await floats(src, k);
  const bits = new Uint8Array(k);
  for (let i = 0; i < k; i++) bits[i] = u[i] < q1 ? 1 : 0;
  bits[v] = (await floats(src, 1))[0] < p1 ? 1 : 0;
  return bits;
}

/** UE round 2: k draws; symmetric chains flip with q2, others set with p2 / q2. */
async function ueRound2(memo, p2, q2, src) {
  const u = await floats(src, memo.length);
  const out = new Uint8Array(memo.length);
  const symmetric = abs(p2 + q2 - 1) < 1e-15;
  for (let i = 0; i < memo.length; i++) {
    out[i] = symmetric ? memo[i] ^ (u[i] < q2 ? 1 : 0) : u[i] < (memo[i] ? p2 : q2) ? 1 : 0;
  }
  return out;
}

/** Bits packed most significant first, ⌈n/8⌉ bytes. */
export function packBits(bits) {
  const out = new Uint8Array((bits.length + 7) >> 3);
  for (let i = 0; i < bits.length; i++) if (bits[i]) out[i >> 3] |= 0x80 >> (i & 7);
  return out;
}

// ------------------------------------------------------------------------------ values
const text = (v) => (typeof v === "string" ? JSON.stringify(v) : String(v));

/** The default value check: an integer in [0, k) (TypeError for another type). */
function checkInt(v) {
  if (typeof v !== "number" || !Number.isInteger(v)) throw new TypeError(`${this.name}: 'value' must be an integer in [0, ${this.k}); got ${text(v)}`);
  if (v < 0 || v >= this.k) throw new RangeError(`${this.name}: 'value' must be in [0, ${this.k}); got ${v}`);
  return v;
}

// ------------------------------------------------------------------------------ families
// A family gives: derive(P) → chain fields; state(src); key(v, st); round1(key, st, src);
// round2(payload, src); body(payload, st); epsilons.

const symbol = {
  check: checkInt,
  key: (v) => v,
  round1(key, st, src) {
    return grrRound(key, this.k, this.p1, src);
  },
  round2(y, src) {
    return grrRound(y, this.k, this.p2, src);
  },
  body(y) {
    return uintBE(y, minBytes(this.k - 1));
  },
  epsilons() {
    return [log(this.P1 / this.P0), log(this.p1 / this.q1)];
  },
};

const unary = {
  check: checkInt,
  key: (v) => v,
  round1(key, st, src) {
    return ueRound1(key, this.k, this.p1, this.q1, src);
  },
  round2(memo, src) {
    return ueRound2(memo, this.p2, this.q2, src);
  },
  body: packBits,
  epsilons() {
    const [N1, N0] = chainNonsupport(this.p1, this.q1, this.p2, this.q2);
    return [ueEpsilon(this.P1, this.P0, N1, N0), ueEpsilon(this.p1, this.q1)];
  },
};

const hashing = {
  check: checkInt,
  async state(src) {
    const pool = this.params.hash_pool;
    const [id] = await bigIntegers(src, 0, pool === null ? 1n << 63n : pool, 1);
    const seed = pool === null ? id : (await this.poolSeeds())[Number(id)];
    return { hash_id: id, seed };
  },
  async poolSeeds() {
    const { poolSeeds } = await import("./pool.js");
    return poolSeeds(this.params.pool_seed, this.params.hash_pool);
  },
  key(v, st) {
    return mixHash(st.seed, v, this.g);
  },
  round1(key, st, src) {
    return grrRound(key, this.g, this.p1, src);
  },
  round2(y, src) {
    return grrRound(y, this.g, this.p2, src);
  },
  body(y, st) {
    const pool = this.params.hash_pool;
    return concatBytes(uintBE(st.hash_id, pool === null ? 8 : minBytes(pool - 1)), uintBE(y, minBytes(this.g - 1)));
  },
  epsilons() {
    const [N1] = chainNonsupport(this.p1, this.q1, this.p2, this.q2);
    return [log((this.P1 * (this.g - 1)) / N1), log(this.p1 / this.q1)];
  },
};

const hadamard = {
  ...hashing,
  async state(src) {
    const [row] = await integers(src, 0, this.m, 1);
    return { hash_id: row };
  },
  key(v, st) {
    return parity(st.hash_id, v);
  },
  body(y, st) {
    return concatBytes(uintBE(st.hash_id, minBytes(this.m - 1)), uintBE(y, 1));
  },
};

const dbitflip = {
  check: checkInt,
  async state(src) {
    const { b, d } = this;
    if (d === b) return { sampled: Array.from({ length: b }, (_, i) => i) };
    const u = await floats(src, b);
    const order = Array.from({ length: b }, (_, i) => i).sort((x, y) => u[x] - u[y] || x - y);
    return { sampled: order.slice(0, d).sort((x, y) => x - y) };
  },
  key(v) {
    return Math.floor((v * this.b) / this.k);
  },
  async round1(key, st, src) {
    const u = await floats(src, this.d);
    return Uint8Array.from(st.sampled, (j, i) => ((j === key) === u[i] < this.p1 ? 1 : 0));
  },
  body(bits, st) {
    const w = minBytes(this.b - 1);
    return concatBytes(...st.sampled.map((j) => uintBE(j, w)), packBits(bits));
  },
  epsilons() {
    const e = min(this.d, 2) * log(this.p1 / this.q1);
    return [e, e];
  },
};

// RAPPOR (every encoder): the cohort from the state stream, the memo key the packed encoding
// (hex), the PRR from the memo stream of those bytes; Bloom hashing in src/rappor.js (MD5),
// loaded on first use.
let bloom; // src/rappor.js's Bloom hashing, once a Bloom-filter protocol is opened
const rappor = {
  check(v) {
    const o = this.name;
    if (this.encoder === "bloom") {
      if (typeof v !== "string" && !(v instanceof Uint8Array)) throw new TypeError(`${o}: 'value' must be a string or bytes; got ${text(v)}`);
      return v;
    }
    if (this.encoder === "boolean") {
      if (v !== 0 && v !== 1 && v !== true && v !== false) throw new (typeof v === "number" ? RangeError : TypeError)(`${o}: 'value' must be 0, 1, false or true; got ${text(v)}`);
      return Number(v);
    }
    return checkInt.call(this, v);
  },
  async state(src) {
    const m = this.params.m ?? 1;
    const st = { cohort: m === 1 ? 0 : (await integers(src, 0, m, 1))[0] };
    if (this.encoder === "bloom") bloom ??= (await import("./rappor.js")).bloom;
    return st;
  },
  key(v, st) {
    const bits = new Uint8Array(this.k);
    if (this.encoder === "bloom") for (const i of bloom(v, st.cohort, this.params.h, this.k)) bits[i] = 1;
    else bits[this.encoder === "onehot" ? v : 0] = this.encoder === "onehot" ? 1 : v;
    return [...packBits(bits)].map((b) => b.toString(16).padStart(2, "0")).join("");
  },
  keyBytes: (key) => Uint8Array.from(key.match(/../g), (h) => parseInt(h, 16)),
  /** PRR (one-time: PRR and IRR in one draw): k floats; bit_i = u_i < (encoded_i ? p1 : q1). */
  async round1(key, st, src) {
    const u = await floats(src, this.k);
    const enc = this.keyBytes(key);
    return u.map((x, i) => (x < ((enc[i >> 3] >> (7 - (i & 7))) & 1 ? this.p1 : this.q1) ? 1 : 0));
  },
  round2(memo, src) {
    return ueRound2(memo, this.p2, this.q2, src);
  },
  body(bits, st) {
    return concatBytes(uintBE(st.cohort, 2), packBits(bits));
  },
  /** ε1 and ε∞ for encodings differing in (x, y) bits (privacy.rappor_report_epsilon, rappor_prr_epsilon). */
  epsilons() {
    const { f, p, q } = this.params;
    const [x, y] = this.differing;
    const [hi, lo] = chainSupport(1 - f / 2, f / 2, q, p);
    let e1;
    if (x === y) e1 = x * abs(log((hi * (1 - lo)) / (lo * (1 - hi))));
    else if (lo <= 0 || hi <= 0 || lo >= 1 || hi >= 1) e1 = Infinity;
    else {
      const u = max(log(hi / lo), log((1 - hi) / (1 - lo)));
      const d = max(log(lo / hi), log((1 - lo) / (1 - hi)));
      e1 = max(x * u + y * d, y * u + x * d);
    }
    const prr = log((1 - f / 2) / (f / 2));
    return [e1, !this.memoizes ? e1 : x === y ? 2 * x * prr : max(x, y) * prr];
  },
};

function rapporChain(encoder, oneTime, types) {
  return [rappor, !oneTime, types, (P, o) => {
    if (encoder === "bloom") {
      choice(o, "bloom_hash", P.bloom_hash, ["rappor-md5-1byte"]);
      int(o, "k", P.k, 1, 256);
      int(o, "h", P.h, 1, 16);
    }
    if ("m" in P) int(o, "m", P.m, 1, 65536);
    for (const r of ["f", "p", "q"]) if (P[r] < 0 || P[r] > 1) throw fail(o, r, "a number in [0, 1]", P[r]);
    if (P.f >= 1) throw fail(o, "f", "a number in [0, 1)", P.f);
    if (P.p === P.q) throw new RangeError(`${o}: 'p' and 'q' must differ (p = q makes reports independent of the value); got p = q = ${P.p}`);
    if (P.f === 0 && !oneTime) throw fail(o, "f", "> 0 for longitudinal use (f = 0 memoizes the true bits); use the one-time variant", P.f);
    const k = encoder === "boolean" ? 1 : P.k;
    const chain = oneTime ? [...chainSupport(1 - P.f / 2, P.f / 2, P.q, P.p), 1, 0] : [1 - P.f / 2, P.f / 2, P.q, P.p];
    const differing = encoder === "bloom" ? [P.h, P.h] : encoder === "boolean" ? [1, 0] : [1, 1];
    return { ...chainOf(...chain), k, encoder, differing };
  }];
}

// Subset selection: a size-ω subset holding v w.p. P1, the rest the smallest of k uniforms.
const subsetProbabilities = (eps, k, omega) => {
  const a = omega * exp(eps);
  const p1 = a / (a + k - omega);
  return [p1, (omega - p1) / (k - 1), (k - omega) / (a + k - omega)];
};

const subset = {
  check: checkInt,
  key: (v) => v,
  /** u' (v ∈ Y if u' < P1), then k floats with u_v := 2: the ω − 1 smallest, plus v or the ω-th. */
  async round1(v, st, src) {
    const held = (await floats(src, 1))[0] < this.p1;
    const u = await floats(src, this.k);
    u[v] = 2;
    const chosen = [...u.keys()].sort((i, j) => u[i] - u[j] || i - j).slice(0, this.omega);
    if (held) chosen[this.omega - 1] = v;
    const bits = new Uint8Array(this.k);
    for (const i of chosen) bits[i] = 1;
    return bits;
  },
  body: packBits,
  epsilons() {
    const e = log((this.p1 * (this.k - this.omega)) / (this.notP1 * this.omega));
    return [e, e];
  },
};

function concatBytes(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

// ------------------------------------------------------------------------------ the table
const F = "float", I = "int";
const ONE = { k: I, eps: F };
const LH1 = { ...ONE, hash_pool: "int?", pool_seed: I };
const CH = { k: I, eps_perm: F, eps_1: F };
const LGRR = { ...CH, calibration: "str" };
const LOLOHA = { ...LGRR, hash_pool: "int?", pool_seed: I };
const RATES = { f: F, p: F, q: F };
const BLOOM = { k: I, h: I, m: I, ...RATES, bloom_hash: "str" };
const ONEHOT = { k: I, ...RATES };
const BOOLEAN = { m: I, ...RATES };
const DEFAULTS = { calibration: "exact", hash_pool: null, pool_seed: 0, b: null, d: 1, h: 2, m: 1, f: 0.5, p: 0.5, q: 0.75, bloom_hash: "rappor-md5-1byte", omega: null };

function lhChain(g, p1, p2) {
  return { g, p1, q1: (1 - p1) / (g - 1), p2, q2: p2 < 1 ? (1 - p2) / (g - 1) : 0, P0: 1 / g };
}

function checkHashing(o, P) {
  if (P.hash_pool !== null) int(o, "hash_pool", P.hash_pool, 1);
  int(o, "pool_seed", P.pool_seed, 0);
}

const loloha = (gOf) => (P, o) => {
  chain(o, P);
  checkHashing(o, P);
  const c = choice(o, "calibration", P.calibration, ["exact", "paper"]);
  P.calibration = c;
  const g = gOf(P, c);
  return lhChain(g, grrProbabilities(P.eps_perm, g)[0], lgrrP2(g, P.eps_perm, P.eps_1, c));
};

const hadamardSize = (k) => 2 ** (32 - Math.clz32(k - 1));

/** name → [wire id, family, memoizes, parameter types, derive(params, name) → chain]. */
const TABLE = {
  GRR: [1, symbol, false, ONE, (P, o) => chainOf(...grrProbabilities(budget(o, "eps", P.eps), P.k), 1, 0)],
  SUE: [2, unary, false, ONE, (P, o) => chainOf(...sueProbabilities(budget(o, "eps", P.eps)), 1, 0)],
  OUE: [3, unary, false, ONE, (P, o) => chainOf(...oueProbabilities(budget(o, "eps", P.eps)), 1, 0)],
  BLH: [4, hashing, false, LH1, (P, o) => (budget(o, "eps", P.eps), checkHashing(o, P), lhChain(2, grrProbabilities(P.eps, 2)[0], 1))],
  OLH: [5, hashing, false, LH1, (P, o) => {
    budget(o, "eps", P.eps);
    checkHashing(o, P);
    const g = integerArgmin((g) => vstar(grrProbabilities(P.eps, g)[0], 1 / g), exp(P.eps) + 1);
    return lhChain(g, grrProbabilities(P.eps, g)[0], 1);
  }],
  "L-GRR": [6, symbol, true, LGRR, (P, o) => {
    chain(o, P);
    P.calibration = choice(o, "calibration", P.calibration, ["exact", "paper"]);
    const p2 = lgrrP2(P.k, P.eps_perm, P.eps_1, P.calibration);
    return chainOf(...grrProbabilities(P.eps_perm, P.k), p2, (1 - p2) / (P.k - 1));
  }],
  "L-SUE": [7, unary, true, CH, (P, o) => {
    chain(o, P);
    const p2 = 0.5 * (1 + tanh(P.eps_1 / 4) / tanh(P.eps_perm / 4));
    return chainOf(...sueProbabilities(P.eps_perm), p2, 1 - p2);
  }],
  "L-OUE": [8, unary, true, CH, (P, o) => {
    chain(o, P);
    const [p1, q1] = oueProbabilities(P.eps_perm);
    return chainOf(p1, q1, 0.5, halfP2Q2(o, p1, q1, P.eps_perm, P.eps_1));
  }],
  "L-SOUE": [9, unary, true, CH, (P, o) => {
    chain(o, P);
    const [p1, q1] = sueProbabilities(P.eps_perm);
    return chainOf(p1, q1, 0.5, halfP2Q2(o, p1, q1, P.eps_perm, P.eps_1));
  }],
  "L-OSUE": [10, unary, true, CH, (P, o) => {
    chain(o, P);
    const p2 = expm1(P.eps_perm + P.eps_1) / ((exp(P.eps_1) + 1) * expm1(P.eps_perm));
    return chainOf(...oueProbabilities(P.eps_perm), p2, 1 - p2);
  }],
  BiLOLOHA: [11, hashing, true, LOLOHA, loloha(() => 2)],
  OLOLOHA: [12, hashing, true, LOLOHA, loloha((P, c) => logolohaG(P.eps_perm, P.eps_1, c))],
  dBitFlipPM: [13, dbitflip, true, { k: I, eps_perm: F, b: "int?", d: I }, (P, o) => {
    budget(o, "eps_perm", P.eps_perm);
    P.b = P.b === null ? P.k : int(o, "b", P.b, 2, P.k);
    int(o, "d", P.d, 1, P.b);
    const p = 1 / (1 + exp(-P.eps_perm / 2));
    return { ...chainOf(p, 1 - p, 1, 0), b: P.b, d: P.d };
  }],
  SH: [15, hadamard, false, ONE, (P, o) => {
    budget(o, "eps", P.eps);
    int(o, "k", P.k, 2, 2 ** 26);
    return { ...lhChain(2, grrProbabilities(P.eps, 2)[0], 1), m: hadamardSize(P.k), P0: 0.5 };
  }],
  "L-SH": [16, hadamard, true, LOLOHA, (P, o) => {
    int(o, "k", P.k, 2, 2 ** 26);
    if (P.hash_pool !== null) throw fail(o, "hash_pool", "null (the Hadamard rows are the family)", P.hash_pool);
    return { ...loloha(() => 2)(P, o), m: hadamardSize(P.k), P0: 0.5 };
  }],
  SS: [22, subset, false, { ...ONE, omega: "int?" }, (P, o) => {
    budget(o, "eps", P.eps);
    const { eps, k } = P;
    P.omega = P.omega === null
      ? integerArgmin((w) => vstar(...subsetProbabilities(eps, k, w)), k / (exp(eps) + 1), 1, k - 1)
      : int(o, "omega", P.omega, 1, k - 1);
    const [p1, q1, notP1] = subsetProbabilities(eps, k, P.omega);
    return { ...chainOf(p1, q1, 1, 0), omega: P.omega, notP1 };
  }],
  RAPPOR: [14, ...rapporChain("bloom", false, BLOOM)],
  "RAPPOR-onehot": [17, ...rapporChain("onehot", false, ONEHOT)],
  "RAPPOR-boolean": [18, ...rapporChain("boolean", false, BOOLEAN)],
  "RAPPOR-one-time": [19, ...rapporChain("bloom", true, BLOOM)],
  "RAPPOR-onehot-one-time": [20, ...rapporChain("onehot", true, ONEHOT)],
  "RAPPOR-boolean-one-time": [21, ...rapporChain("boolean", true, BOOLEAN)],
};

function chainOf(p1, q1, p2, q2) {
  return { p1, q1, p2, q2 };
}

/** Canonical protocol names. */
export const PROTOCOL_NAMES = Object.keys(TABLE);
const ALIASES = { dbitflip: "dBitFlipPM", "subset-selection": "SS" };

/**
 * A protocol from its spec `{name, params}` (as `proto.spec()` in Python and the server's
 * `GET /v1/collections/{name}` give it). Unknown names or parameters, missing or invalid
 * values throw a RangeError or TypeError naming them.
 */
export function protocolFromSpec(spec) {
  if (spec === null || typeof spec !== "object" || typeof spec.name !== "string") {
    throw new TypeError(`protocol spec: must be an object {name: string, params: object}; got ${show(spec)}`);
  }
  const extra = Object.keys(spec).filter((k) => k !== "name" && k !== "params");
  if (extra.length) throw new TypeError(`protocol spec: unknown key(s) ${extra.join(", ")}; allowed: name, params`);
  const given = spec.params ?? {};
  if (given === null || typeof given !== "object" || Array.isArray(given)) {
    throw new TypeError(`protocol spec: 'params' must be an object; got ${show(given)}`);
  }
  const lower = spec.name.toLowerCase();
  const name = ALIASES[lower] ?? PROTOCOL_NAMES.find((n) => n.toLowerCase() === lower);
  if (name === undefined) {
    throw new RangeError(`protocol spec: 'name' must be one of ${PROTOCOL_NAMES.join(", ")}; got ${show(spec.name)}`);
  }
  const [id, family, memoizes, types, derive] = TABLE[name];
  const unknown = Object.keys(given).filter((k) => !(k in types));
  if (unknown.length) {
    throw new RangeError(`${name}: unknown parameter(s) ${unknown.join(", ")}; allowed: ${Object.keys(types).join(", ")}`);
  }
  const P = {};
  for (const [key, type] of Object.entries(types)) {
    let v = key in given ? given[key] : DEFAULTS[key];
    if (v === undefined) throw new RangeError(`${name}: missing parameter(s) ${key}`);
    if (v instanceof PyFloat) v = v.value;
    if (type === F) real(name, key, v);
    else if (type === I) int(name, key, v, key === "k" ? (family === rappor ? 1 : 2) : 0);
    else if (type === "int?" && v !== null) int(name, key, v, 1);
    else if (type === "str" && typeof v !== "string") throw fail(name, key, "a string", v, TypeError);
    P[key] = v;
  }
  const fields = derive(P, name);
  const params = {};
  for (const [key, type] of Object.entries(types)) params[key] = type === F ? new PyFloat(P[key]) : P[key];
  const proto = Object.assign(Object.create(family), {
    name,
    id,
    memoizes,
    k: P.k,
    params: P,
    spec: { name, params },
    ...fields,
  });
  const [P1, P0] = chainSupport(proto.p1, proto.q1, proto.p2, proto.q2);
  proto.P1 = P1;
  if (!("P0" in fields)) proto.P0 = P0;
  const [e1, eInf] = proto.epsilons();
  proto.eps1 = roundUp(e1);
  proto.epsInf = roundUp(eInf);
  if (!proto.state) proto.state = async () => ({});
  if (!proto.round2) proto.round2 = async (x) => x;
  return Object.freeze(proto);
}
