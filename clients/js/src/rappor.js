// RAPPOR, every encoder: Bloom filters (google/rappor's "rappor-md5-1byte"), one-hot, boolean,
// and the one-time variants (docs/client-spec.md §3.2, §4.2, §4.3; report kind "cohort-bits").
// The cohort comes from the state stream, the memo key is the packed encoding, the PRR comes
// from the memo stream of those bytes.

import { concat, fromHex, toHex, uintBE, utf8 } from "./bytes.js";
import { checkValue, choice, fail, int, show as text } from "./check.js";
import { abs, bitAt, chainNonsupport, chainSupport, drawn, floats, integers, log, max, packBits, ueRound2 } from "./common.js";
import { md5 } from "./md5.js";

export const methods = {
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
    return checkValue.call(this, v);
  },
  async state(src) {
    const m = this.params.m ?? 1;
    return { cohort: m === 1 ? 0 : (await integers(src, 0, m, 1))[0] };
  },
  /** The packed encoding as hex: Bloom bits (MD5(u32(cohort) ‖ value), byte i mod k), one-hot or the boolean. */
  key(v, st) {
    const bits = new Uint8Array(this.k);
    if (this.encoder === "bloom") {
      const digest = md5(concat(uintBE(st.cohort, 4), typeof v === "string" ? utf8(v) : v));
      for (let i = 0; i < this.params.h; i++) bits[digest[i] % this.k] = 1;
    } else bits[this.encoder === "onehot" ? v : 0] = this.encoder === "onehot" ? 1 : v;
    return toHex(packBits(bits));
  },
  keyBytes: fromHex,
  /** PRR (one-time: PRR and IRR in one draw): k floats; bit_i = u_i < (encoded_i ? p1 : q1). */
  async round1(key, st, src) {
    const enc = fromHex(key);
    return Uint8Array.from(await floats(src, this.k), (u, i) => (u < (bitAt(enc, i) ? this.p1 : this.q1) ? 1 : 0));
  },
  round2(memo, src) {
    return ueRound2(memo, this.p2, this.q2, src);
  },
  body(bits, st) {
    return concat(uintBE(st.cohort, 2), packBits(bits));
  },
  /** ε1 and ε∞ for encodings differing in (x, y) bits, from the stored chain
   * (privacy.rappor_bits_epsilon at (P1, P0) with (N1, N0), and at the PRR's (p1, q1)). */
  epsilons() {
    const [x, y] = this.differing;
    const [N1, N0] = chainNonsupport(this.p1, this.q1, this.p2, this.q2);
    const e1 = bitsEpsilon(this.P1, this.P0, x, y, N1, N0);
    return [e1, !this.memoizes ? e1 : bitsEpsilon(this.p1, this.q1, x, y, 1 - this.p1, 1 - this.q1)];
  },
};

/** ε of independent bits set w.p. hi (encoded 1) or lo (encoded 0), encodings differing in
 * (x, y) bits, with the complements nhi = 1 − hi, nlo = 1 − lo (privacy.rappor_bits_epsilon). */
function bitsEpsilon(hi, lo, x, y, nhi, nlo) {
  if (min4(hi, lo, nhi, nlo) <= 0) return Infinity;
  if (x === y) return x * abs(log((hi * nlo) / (lo * nhi)));
  const u = max(log(hi / lo), log(nhi / nlo));
  const d = max(log(lo / hi), log(nlo / nhi));
  return max(x * u + y * d, y * u + x * d);
}
const min4 = (...v) => Math.min(...v);

export function derive(name, P) {
  const encoder = name.includes("boolean") ? "boolean" : name.includes("onehot") ? "onehot" : "bloom";
  const oneTime = name.endsWith("one-time");
  if (encoder === "bloom") {
    choice(name, "bloom_hash", P.bloom_hash, ["rappor-md5-1byte"]);
    int(name, "k", P.k, 1, 256);
    int(name, "h", P.h, 1, 16);
  }
  if ("m" in P) int(name, "m", P.m, 1, 65536);
  for (const r of ["f", "p", "q"]) if (P[r] < 0 || P[r] > 1) throw fail(name, r, "a number in [0, 1]", P[r]);
  if (P.f >= 1) throw fail(name, "f", "a number in [0, 1)", P.f);
  if (P.p === P.q) throw new RangeError(`${name}: 'p' and 'q' must differ (p = q makes reports independent of the value); got p = q = ${P.p}`);
  if (P.f === 0 && !oneTime) throw fail(name, "f", "> 0 for longitudinal use (f = 0 memoizes the true bits); use the one-time variant", P.f);
  const q1 = drawn(P.f / 2);
  const chainRates = [1 - q1, q1, drawn(P.q), drawn(P.p)];
  // One-time: (q*, p*) of the chain (1 − f/2, f/2, q, p), each as the one draw realizes it.
  const once = chainSupport(1 - P.f / 2, P.f / 2, P.q, P.p).map(drawn);
  const differing = encoder === "bloom" ? [P.h, P.h] : encoder === "boolean" ? [1, 0] : [1, 1];
  const rates = oneTime ? [...once, 1, 0] : chainRates;
  return [...rates, { k: encoder === "boolean" ? 1 : P.k, encoder, differing }];
}
