// Subset selection (SS): a size-ω subset holding the value with probability p1
// (docs/client-spec.md §3.2, §4.2; report kind "enumerated").

import { int } from "./check.js";
import { drawn, exp, floats, integerArgmin, log, packBits, vstar } from "./common.js";

/** (P1, P0, 1 − P1) at ω (privacy.subset_probabilities): P1 as the sampler draws it. */
function probabilities(eps, k, omega) {
  const a = omega * exp(eps);
  const p1 = drawn(a / (a + k - omega));
  return [p1, (omega - p1) / (k - 1), 1 - p1];
}

export const methods = {
  key: (v) => v,
  /** u′ (v is held if u′ < p1), then k floats with u_v := 2: the ω − 1 smallest, plus v or the ω-th. */
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

export function derive(name, P) {
  const { eps, k } = P;
  P.omega = P.omega === null
    ? integerArgmin((w) => vstar(...probabilities(eps, k, w)), k / (exp(eps) + 1), 1, k - 1)
    : int(name, "omega", P.omega, 1, k - 1);
  const [p1, q1, notP1] = probabilities(eps, k, P.omega);
  return [p1, q1, 1, 0, { omega: P.omega, notP1 }];
}
