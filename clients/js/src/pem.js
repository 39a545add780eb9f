// PEM, prefix-extending discovery with HCMS rounds (docs/math.md §21.6, §21.13; report kind
// "prefix-sketch", wire id 67): each report picks its round r, then sends the HCMS report of the
// first ℓ_r bits of its item's code with round r's hash functions (salt + 1 + r). Items are
// bits-bit integers or strings of at most `length` symbols of `alphabet` (TextItems' codes).
// Every draw is in the order of the Python sampler (longldp.protocols.sketch.pem).

import { concat, minBytes, uintBE } from "./bytes.js";
import { budget, fail, int } from "./check.js";
import { drawn, exp, floats, integers, log } from "./common.js";
import { mixHash } from "./lh.js";
import { seeds63 } from "./pool.js";

const show = (v) => (typeof v === "bigint" ? `${v}` : JSON.stringify(v) ?? String(v));
const bitLength = (x) => (x === 0 ? 0 : 32 - Math.clz32(x));

/** Prefix lengths start + step, start + 2·step, …, width (privacy.sketch.prefix_lengths). */
function lengths(name, width, start, step) {
  int(name, "start", start, 0, width - 1);
  int(name, "step", step, 1, width);
  const out = [];
  for (let l = start + step; l < width; l += step) out.push(l);
  return [...out, width];
}

export function derive(name, P) {
  budget(name, "eps", P.eps);
  let width;
  if (P.alphabet === null) {
    int(name, "bits", P.bits, 1, 64);
    width = P.bits;
  } else {
    if (P.bits !== null) throw new RangeError(`${name}: give 'bits' (integers) or 'alphabet' (text), not both`);
    const w = bitLength([...P.alphabet].length);
    int(name, "length", P.length, 1, Math.floor(64 / w));
    width = P.length * w;
  }
  if (!(P.m >= 2 && (P.m & (P.m - 1)) === 0)) throw fail(name, "m", "a power of two >= 2", P.m);
  int(name, "d", P.d, 1, 2 ** 16);
  int(name, "keep", P.keep, 1);
  if (width < 63 && P.keep > 2 ** width) throw fail(name, "keep", `<= the domain size 2^${width}`, P.keep);
  const ls = lengths(name, width, P.start, P.step);
  if (ls.length > 64) throw new RangeError(`${name}: at most 64 rounds; got ${ls.length}`);
  const seeds = ls.map((_, r) => seeds63([P.salt + 1 + r, 0x5ce7c4], 2 * P.d).slice(0, P.d));
  const keep = drawn(1 / (1 + exp(-P.eps)));
  return [keep, 1 - keep, 1, 0, { width, lengths: ls, seeds, m: P.m, d: P.d }];
}

export const methods = {
  /** The item's code (BigInt); refuses what the Python domain refuses, in one line. */
  check(v) {
    const o = this.name, P = this.params;
    if (P.alphabet === null) {
      if (!(Number.isInteger(v) || typeof v === "bigint")) throw new TypeError(`${o}: 'value' must be an int in [0, 2^${P.bits}); got ${show(v)}`);
      const x = BigInt(v);
      if (x < 0n || x >> BigInt(P.bits)) throw new RangeError(`${o}: 'value' must be an int in [0, 2^${P.bits}); got ${show(v)}`);
      return x;
    }
    if (typeof v !== "string") throw new TypeError(`${o}: 'value' must be a str; got ${show(v)}`);
    const symbols = [...P.alphabet], chars = [...v];
    if (chars.length > P.length) throw new RangeError(`${o}: items must have at most ${P.length} characters (the declared length); got ${chars.length}`);
    const w = BigInt(bitLength(symbols.length));
    let code = 0n;
    for (let i = 0; i < P.length; i++) {
      let s = 0;
      if (i < chars.length) {
        s = symbols.indexOf(chars[i]) + 1;
        if (s === 0) throw new RangeError(`${o}: items must use only the characters ${show(P.alphabet)}; got ${show(chars[i])}`);
      }
      code = (code << w) | BigInt(s);
    }
    return code;
  },
  key: (code) => String(code),
  keyBytes: (key) => uintBE(Number(key), 8),
  async round1(input, st, src) {
    const o = this, code = BigInt(input);
    const [r] = await integers(src, 0, o.lengths.length, 1);
    const [row] = await integers(src, 0, o.d, 1);
    const [l] = await integers(src, 0, o.m, 1);
    const u = (await floats(src, 1))[0];
    const prefix = code >> BigInt(o.width - o.lengths[r]);
    const c = mixHash(o.seeds[r][row], prefix, o.m);
    let x = l & c, parity = 0;
    for (; x; x &= x - 1) parity ^= 1;
    return { r, row, l, bit: parity ^ (u < o.p1 ? 0 : 1) };
  },
  body(y) {
    const o = this;
    return concat(uintBE(y.r, minBytes(o.lengths.length - 1)), uintBE(y.row, minBytes(o.d - 1)), uintBE(y.l, minBytes(o.m - 1)), uintBE(y.bit, 1));
  },
  epsilons() {
    const e = log(this.p1 / (1 - this.p1));
    return [e, e];
  },
};
