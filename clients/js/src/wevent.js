// The LDP-IDS methods LBU, LSP, LBD, LBA, LPU, LPD, LPA (w-event LDP; docs/math.md §19.2,
// docs/client-spec.md §6.3). Every report is one GRR symbol drawn at the budget b of the
// server's plan for its epoch ({"eps": b}); the class's own parameters (p1, q1) are GRR at its
// largest report budget. The device keeps every report's (epoch, b) in its state and refuses a
// report past eps_window in any window of w consecutive epochs (client.js).

import { minBytes, uintBE } from "./bytes.js";
import { budget, fail, int } from "./check.js";
import { grrProbabilities, grrRound, log } from "./common.js";

/** The largest budget one report of the method can ask (ldp_ids.WEventMechanism.report_eps). */
function reportEps(name, e, w) {
  if (name === "LBU") return e / w;
  if (name === "LBD") return Math.max(e / (2 * w), e / 4);
  if (name === "LBA") return e / 2;
  return e;
}

export const methods = {
  key: (v) => v,
  round1(key, st, src) {
    return grrRound(key, this.k, this.p1, src);
  },
  body(y) {
    return uintBE(y, minBytes(this.k - 1));
  },
  epsilons() {
    return [log(this.P1 / this.P0), log(this.p1 / this.q1)];
  },
  /** The budget b of a plan {"eps": b}, checked: 0 < b <= the method's largest report budget. */
  planBudget(plan) {
    if (!plan || typeof plan !== "object" || Array.isArray(plan)) {
      throw new TypeError(`${this.name}: a plan must be a JSON object; got ${JSON.stringify(plan)}`);
    }
    const keys = Object.keys(plan);
    if (keys.length !== 1 || keys[0] !== "eps") {
      throw new RangeError(`${this.name}: the plan's keys must be eps; got ${JSON.stringify(keys)}`);
    }
    const b = plan.eps?.value ?? plan.eps; // a PyFloat or a number
    if (typeof b !== "number" || !(b > 0 && b <= this.reportEps * (1 + 1e-12))) {
      throw fail(this.name, "eps", `a number in (0, ${this.reportEps}] (the method's largest report budget)`, plan.eps);
    }
    return b;
  },
  /** One report at the plan's budget b: y = GRR(v, k, D(1/(1 + (k−1)·e^(−b)))). */
  drawPlanned(v, b, src) {
    return grrRound(v, this.k, grrProbabilities(Math.min(b, this.reportEps), this.k)[0], src);
  },
};

export function derive(name, P) {
  budget(name, "eps_window", P.eps_window);
  int(name, "w", P.w, 1);
  const eps = reportEps(name, P.eps_window, P.w);
  return [...grrProbabilities(eps, P.k), 1, 0, { reportEps: eps, window: P.w, epsWindow: P.eps_window }];
}
