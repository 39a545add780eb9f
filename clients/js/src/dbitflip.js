// dBitFlipPM: d sampled buckets of b, one answer bit each (docs/client-spec.md §3.2, §4.2;
// report kind "sampled-bits").

import { concat, minBytes, uintBE } from "./bytes.js";
import { budget, int } from "./check.js";
import { drawn, exp, floats, log, min, packBits } from "./common.js";

export const methods = {
  /** The d sampled buckets: the indices of the d smallest of b floats, ascending (d = b: all, no draw). */
  async state(src) {
    const { b, d } = this;
    const all = [...Array(b).keys()];
    if (d === b) return { sampled: all };
    const u = await floats(src, b);
    return { sampled: all.sort((x, y) => u[x] - u[y] || x - y).slice(0, d).sort((x, y) => x - y) };
  },
  key(v) {
    return Math.floor((v * this.b) / this.k);
  },
  async round1(key, st, src) {
    const u = await floats(src, this.d);
    return Uint8Array.from(st.sampled, (j, i) => ((j === key) === u[i] < this.p1 ? 1 : 0));
  },
  body(bits, st) {
    return concat(...st.sampled.map((j) => uintBE(j, minBytes(this.b - 1))), packBits(bits));
  },
  epsilons() {
    const e = min(this.d, 2) * log(this.p1 / this.q1);
    return [e, e];
  },
};

export function derive(name, P) {
  budget(name, "eps_perm", P.eps_perm);
  P.b = P.b === null ? P.k : int(name, "b", P.b, 2, P.k);
  int(name, "d", P.d, 1, P.b);
  const p = drawn(1 / (1 + exp(-P.eps_perm / 2)));
  return [p, 1 - p, 1, 0, { b: P.b, d: P.d }];
}
