// GRR and L-GRR: a symbol in [0, k) (docs/client-spec.md §3.2, §4.2; report kind "symbol").

import { minBytes, uintBE } from "./bytes.js";
import { chain, choice } from "./check.js";
import { grrProbabilities, grrRound, lgrrP2, log } from "./common.js";

export const methods = {
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

export function derive(name, P) {
  if (name === "GRR") return [...grrProbabilities(P.eps, P.k), 1, 0];
  chain(name, P);
  P.calibration = choice(name, "calibration", P.calibration, ["exact", "paper"]);
  const p2 = lgrrP2(P.k, P.eps_perm, P.eps_1, P.calibration);
  return [...grrProbabilities(P.eps_perm, P.k), p2, (1 - p2) / (P.k - 1)];
}
