// Hadamard response (HR): a row of the K × K Sylvester matrix, K = 2^⌈log₂(k + 1)⌉, in the half
// C_v where column v + 1 is +1 with probability p1 (docs/client-spec.md §3.2, §4.2;
// docs/math.md §2.6; report kind "enumerated").

import { minBytes, uintBE } from "./bytes.js";
import { int } from "./check.js";
import { drawn, exp, floats, integers, log } from "./common.js";

/** popcount(a AND b) mod 2 (K < 2³¹: 32-bit words). */
function parity(a, b) {
  let x = (a & b) >>> 0, c = 0;
  for (; x; x &= x - 1) c ^= 1;
  return c;
}

export const methods = {
  key: (v) => v,
  /** u (y ∈ C_v iff u < p1), then a row r of [0, K); r kept on the wanted side, else r XOR the lowest set bit of v + 1. */
  async round1(v, st, src) {
    const inside = (await floats(src, 1))[0] < this.p1;
    const [r] = await integers(src, 0, this.K, 1);
    const c = v + 1;
    return (parity(r, c) === 0) === inside ? r : r ^ (c & -c);
  },
  body(y) {
    return uintBE(y, minBytes(this.K - 1));
  },
  epsilons() {
    const e = log(this.p1 / (1 - this.p1));
    return [e, e];
  },
};

export function derive(name, P) {
  int(name, "k", P.k, 2, 2 ** 26 - 1);
  const K = 2 ** (32 - Math.clz32(P.k)); // the smallest power of two above k
  return [drawn(1 / (1 + exp(-P.eps))), 0.5, 1, 0, { K }];
}
