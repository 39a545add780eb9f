// Unary encodings: SUE, OUE, L-SUE, L-OUE, L-SOUE, L-OSUE (docs/client-spec.md §3.2, §4.2;
// report kind "bits").

import { chain } from "./check.js";
import { chainNonsupport, drawn, exp, expm1, floats, log, max, packBits, sqrt, tanh, ueRound2 } from "./common.js";

const sue = (eps) => {
  const p = drawn(1 / (1 + exp(-eps / 2)));
  return [p, 1 - p];
};
const oue = (eps) => [0.5, drawn(1 / (exp(eps) + 1))];
const ueEpsilon = (P1, P0, N1 = 1 - P1, N0 = 1 - P0) => log((P1 * N0) / (P0 * N1));

export const methods = {
  key: (v) => v,
  /** k floats u_i → bit_i = u_i < q1, then one float u → bit_v = u < p1. */
  async round1(v, st, src) {
    const bits = Uint8Array.from(await floats(src, this.k), (u) => (u < this.q1 ? 1 : 0));
    bits[v] = (await floats(src, 1))[0] < this.p1 ? 1 : 0;
    return bits;
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

/** q2 of L-OUE / L-SOUE (p2 = 1/2): the root in [0, 1/2) of the ε1 quadratic, in closed form. */
function halfP2Q2(owner, p1, q1, a, b_) {
  const b = exp(b_);
  const A1 = p1 / 2, B1 = 1 - p1, A0 = q1 / 2, B0 = 1 - q1;
  const epsMax = ueEpsilon(A1, A0);
  if (b_ >= epsMax) throw new RangeError(`${owner}: 'eps_1' must be < ${+epsMax.toPrecision(6)} at eps_perm = ${a}; got ${b_}`);
  const c2 = B0 * B1 * (b - 1);
  const c1 = B1 * (1 - A0) - A1 * B0 - b * (B0 * (1 - A1) - A0 * B1);
  const c0 = A1 * (1 - A0) - b * A0 * (1 - A1);
  const disc = sqrt(max(c1 * c1 - 4 * c2 * c0, 0));
  const t = -0.5 * (c1 + (c1 >= 0 ? disc : -disc));
  const valid = [t / c2, c0 / t].filter((x) => x >= 0 && x < 0.5);
  if (valid.length !== 1) throw new RangeError(`${owner}: no valid q2 at eps_perm = ${a}, eps_1 = ${b_}`);
  return drawn(valid[0]);
}

export function derive(name, P) {
  if (name === "SUE") return [...sue(P.eps), 1, 0];
  if (name === "OUE") return [...oue(P.eps), 1, 0];
  chain(name, P);
  const a = P.eps_perm, b = P.eps_1;
  const [p1, q1] = name === "L-SUE" || name === "L-SOUE" ? sue(a) : oue(a);
  if (name === "L-SUE") {
    const p2 = drawn(0.5 * (1 + tanh(b / 4) / tanh(a / 4)));
    return [p1, q1, p2, 1 - p2];
  }
  if (name === "L-OSUE") {
    const p2 = drawn(expm1(a + b) / ((exp(b) + 1) * expm1(a)));
    return [p1, q1, p2, 1 - p2];
  }
  return [p1, q1, 0.5, halfP2Q2(name, p1, q1, a, b)];
}
