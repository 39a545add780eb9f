// Sketches over open item spaces: CMS, HCMS, PCS, THE and the memoized L-CMS, L-HCMS
// (docs/math.md §21; report kinds "sketch-bits", "sketch-hadamard", "signed-sketch-bits",
// "memo-sketch-bits", "memo-sketch-hadamard"; wire ids 60–66, docs/wire-format.md §3). SHE's
// float reports are not collected by the server and have no client here.
//
// Items are text (at most max_length code points, UTF-8, no NUL) or bits-bit integers; each is
// a 64-bit key (text: the SplitMix64 fingerprint of its code points, docs/math.md §21.1). Row j's
// column of a key is H_{s_j}(key) of local hashing (src/lh.js) with the public seeds s of the
// collection's salt. Every draw is in the order of the Python samplers
// (longldp.protocols.sketch), so one byte stream gives the same report in both languages.
//
// protocolFromSpec (src/protocols.js, the generated registry.js) builds them; the test vectors
// and tests/test_js_sketch.py check them against Python.

import { concat, minBytes, uintBE } from "./bytes.js";
import { budget, chain, fail, int } from "./check.js";
import { drawn, exp, floats, grrProbabilities, integers, lgrrP2, log, packBits, tanh } from "./common.js";
import { mixHash } from "./lh.js";
import { seeds63 } from "./pool.js";

const M64 = (1n << 64n) - 1n;
const GAMMA = 0x9e3779b97f4a7c15n;
const fmix = (z) => {
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
};

/** The 64-bit key of a text item (longldp.protocols.sketch.items.text_keys). */
export function textKey(text) {
  const cps = Array.from(text, (c) => c.codePointAt(0));
  let h = fmix((BigInt(cps.length) * GAMMA) & M64);
  for (const c of cps) h = fmix((h + BigInt(c + 1) * GAMMA) & M64);
  return h;
}

const show = (v) => (typeof v === "bigint" ? `${v}` : JSON.stringify(v) ?? String(v));
const decoder = new TextDecoder("utf-8", { fatal: true });

const KIND = { CMS: "cms", HCMS: "hcms", PCS: "pcs", THE: "the", "L-CMS": "cms", "L-HCMS": "hcms" };
const MEMO = new Set(["L-CMS", "L-HCMS"]);

/** THE's (p, q, 1 − p) at θ; its θ minimising V* on [½, 1) is the golden-section search of
 * privacy.sketch, rounded to 6 decimals. */
function theProbabilities(eps, theta) {
  const p = drawn(1 - 0.5 * exp((-(1 - theta) * eps) / 2));
  return [p, drawn(0.5 * exp((-theta * eps) / 2)), 1 - p];
}
function theOptimalTheta(eps) {
  const v = (t) => {
    const [p, q] = theProbabilities(eps, t);
    return (q * (1 - q)) / (p - q) ** 2;
  };
  let lo = 0.5, hi = 1 - 1e-9;
  const ratio = (Math.sqrt(5) - 1) / 2;
  let a = hi - ratio * (hi - lo), b = lo + ratio * (hi - lo);
  let fa = v(a), fb = v(b);
  while (hi - lo > 1e-12) {
    if (fa <= fb) {
      hi = b; b = a; fb = fa;
      a = hi - ratio * (hi - lo);
      fa = v(a);
    } else {
      lo = a; a = b; fa = fb;
      b = lo + ratio * (hi - lo);
      fb = v(b);
    }
  }
  return Number(((lo + hi) / 2).toFixed(6)); // privacy.sketch.the_optimal_theta: 6 decimals
}

/** [p1, q1, p2, q2, more] of a sketch (privacy.sketch.sketch_moments, sketch_chain). */
export function derive(name, P) {
  const kind = KIND[name];
  int(name, "m", P.m, 2, 2 ** 24);
  int(name, "d", P.d, 1, 2 ** 16);
  int(name, "max_length", P.max_length, 1, 2 ** 16);
  if (P.bits !== null) int(name, "bits", P.bits, 1, 64);
  if (kind === "hcms" && P.m & (P.m - 1)) throw fail(name, "m", "a power of two >= 2", P.m);
  const more = { kind, m: P.m, d: P.d, seeds: seeds63([P.salt, 0x5ce7c4], 2 * P.d) };
  if (MEMO.has(name)) {
    chain(name, P);
    const [a, b] = [P.eps_perm, P.eps_1];
    if (kind === "cms") {
      const p1 = drawn(1 / (1 + exp(-a / 2)));
      const p2 = drawn(0.5 * (1 + tanh(b / 4) / tanh(a / 4)));
      return [p1, 1 - p1, p2, 1 - p2, more];
    }
    const [p1, q1] = grrProbabilities(a, 2);
    const p2 = lgrrP2(2, a, b, "exact");
    return [p1, q1, p2, 1 - p2, more];
  }
  budget(name, "eps", P.eps);
  if (kind === "cms") {
    const p = drawn(1 / (1 + exp(P.eps / 2)));
    return [1 - p, p, 1, 0, more];
  }
  if (kind === "the") {
    const theta = P.theta ?? theOptimalTheta(P.eps);
    if (!(theta > 0 && theta < 1)) throw fail(name, "theta", "a finite number in (0, 1)", theta);
    const [p, q, notP] = theProbabilities(P.eps, theta);
    return [p, q, 1, 0, { ...more, theta, notP }];
  }
  const keep = drawn(1 / (1 + exp(-P.eps)));
  return [keep, kind === "pcs" ? 0.5 : 1 - keep, 1, 0, more]; // PCS: other coordinates ½
}

/** H_{s_row}(key) over m columns, and PCS's sign hash (±1). */
const column = (o, key, row) => mixHash(o.seeds[row], key, o.m);
const sign = (o, key, row) => 1 - 2 * mixHash(o.seeds[o.d + row], key, 2);
const parity = (l, c) => {
  let x = l & c, p = 0;
  for (; x; x &= x - 1) p ^= 1;
  return p;
};

const sketch = {
  /** The item's 64-bit key (BigInt); refuses what the Python domain refuses, in one line. */
  check(v) {
    const o = this.name, P = this.params;
    if (P.bits !== null) {
      if (!(Number.isInteger(v) || typeof v === "bigint")) throw new TypeError(`${o}: 'value' must be an int in [0, 2^${P.bits}); got ${show(v)}`);
      const x = BigInt(v);
      if (x < 0n || x >> BigInt(P.bits)) throw new RangeError(`${o}: 'value' must be an int in [0, 2^${P.bits}); got ${show(v)}`);
      return x;
    }
    let text = v;
    if (v instanceof Uint8Array) {
      try {
        text = decoder.decode(v);
      } catch {
        throw new RangeError(`${o}: 'value' must be text (UTF-8); got bytes that are not UTF-8`);
      }
    }
    if (typeof text !== "string") throw new TypeError(`${o}: 'value' must be a str or UTF-8 bytes; got ${show(v)}`);
    const length = Array.from(text).length;
    if (length > P.max_length) throw new RangeError(`${o}: items must have at most ${P.max_length} characters (the declared length); got ${length}`);
    if (text.includes("\0")) throw new RangeError(`${o}: 'value' must not contain NUL characters (U+0000)`);
    return textKey(text);
  },
  /** One-shot: the key (decimal); memoized: the column in the device's row (or the parity). */
  key(key, st) {
    if (!this.memoizes) return String(key);
    const c = column(this, key, st.row);
    return String(this.kind === "hcms" ? parity(st.l, c) : c);
  },
  keyBytes: (key) => uintBE(Number(key), 8),
  async state(src) {
    if (!this.memoizes) return {};
    const [row] = await integers(src, 0, this.d, 1);
    if (this.kind !== "hcms") return { row };
    const [l] = await integers(src, 0, this.m, 1);
    return { row, l };
  },
  async round1(input, st, src) {
    const o = this;
    if (o.memoizes) {
      if (o.kind === "hcms") return Number(input) ^ ((await floats(src, 1))[0] < o.p1 ? 0 : 1);
      const col = Number(input), u = await floats(src, o.m);
      return Uint8Array.from(u, (x, i) => (x < (i === col ? o.p1 : o.q1) ? 1 : 0));
    }
    const key = BigInt(input);
    const [row] = await integers(src, 0, o.d, 1);
    const col = column(o, key, row);
    if (o.kind === "hcms") {
      const [l] = await integers(src, 0, o.m, 1);
      const flip = (await floats(src, 1))[0] < o.p1 ? 0 : 1;
      return { row, l, bit: parity(l, col) ^ flip };
    }
    const u = await floats(src, o.m);
    if (o.kind === "pcs") {
      const bits = Uint8Array.from(u, (x) => (x < 0.5 ? 1 : 0));
      const sigma = (await floats(src, 1))[0] < o.p1;
      bits[col] = sigma === sign(o, key, row) > 0 ? 1 : 0;
      return { row, bits };
    }
    return { row, bits: Uint8Array.from(u, (x, i) => (x < (i === col ? o.p1 : o.q1) ? 1 : 0)) };
  },
  /** Round 2 of a memo: each bit reported 1 w.p. p2 if set, q2 if not (L-CMS); the parity
   * kept w.p. p2 (L-HCMS). */
  async round2(memo, src) {
    if (this.kind === "hcms") return memo ^ ((await floats(src, 1))[0] < this.p2 ? 0 : 1);
    const u = await floats(src, this.m);
    return Uint8Array.from(u, (x, i) => (x < (memo[i] ? this.p2 : this.q2) ? 1 : 0));
  },
  body(payload, st) {
    const o = this;
    const rowBytes = minBytes(o.d - 1);
    if (o.memoizes) {
      // L-HCMS names one of the d·m functions by hash_id = J·m + l
      if (o.kind === "hcms") return concat(uintBE(st.row * o.m + st.l, minBytes(o.d * o.m - 1)), uintBE(payload, 1));
      return concat(uintBE(st.row, rowBytes), packBits(payload));
    }
    if (o.kind === "hcms") return concat(uintBE(payload.row, rowBytes), uintBE(payload.l, minBytes(o.m - 1)), uintBE(payload.bit, 1));
    return concat(uintBE(payload.row, rowBytes), packBits(payload.bits));
  },
  /** [ε1, ε∞] before the outward rounding (privacy.sketch.sketch_epsilon, chain_epsilons). */
  epsilons() {
    const { p1, q1, p2, q2 } = this;
    if (this.memoizes) {
      const P1 = p1 * p2 + (1 - p1) * q2, P0 = q1 * p2 + (1 - q1) * q2;
      const N1 = p1 * (1 - p2) + (1 - p1) * (1 - q2), N0 = q1 * (1 - p2) + (1 - q1) * (1 - q2);
      if (this.kind === "hcms") return [log(P1 / N1), log(p1 / q1)];
      return [log((P1 * N0) / (P0 * N1)), 2 * log(p1 / q1)];
    }
    if (this.kind === "hcms" || this.kind === "pcs") return [log(p1 / (1 - p1)), log(p1 / (1 - p1))];
    const notP = this.kind === "the" ? this.notP : 1 - p1;
    const e = log((p1 * (1 - q1)) / (q1 * notP));
    return [e, e];
  },
};

export const methods = sketch;
