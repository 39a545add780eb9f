// The change-based mechanisms THRESH, CHANGES-TREE and DDRM (docs/math.md §19.3–§19.5;
// docs/client-spec.md §6.4): what a device reports depends on its own past values, so it keeps
// a small history (saved in its state by client.js). Each report is historyStep (the report
// input, its cost and the history after, from the value, the per-device state, the history, the
// epoch and, for THRESH, the server's plan of the round), then drawStep (the report body, drawn
// from the CSPRNG in the order of the Python samplers, src/longldp/protocols/streams/).

import { minBytes, uintBE } from "./bytes.js";
import { budget, fail, int, real } from "./check.js";
import { drawn, exp, floats, grrProbabilities, integers, log, max, packBits } from "./common.js";

/** The oracle of an epoch: GRR when k < 3e^ε + 2, else OUE (privacy.streams.fo_kind). */
const foKind = (k, eps) => (k < 3 * exp(eps) + 2 ? "grr" : "oue");
const foProbabilities = (kind, k, eps) => (kind === "grr" ? grrProbabilities(eps, k) : [0.5, drawn(1 / (exp(eps) + 1))]);
const foEpsilon = (kind, p, q) => (kind === "grr" ? log(p / q) : log((p * (1 - q)) / (q * (1 - p))));
const foWidth = (kind, k) => (kind === "grr" ? minBytes(k - 1) : Math.ceil(k / 8));
const bitLength = (n) => (n > 0 ? n.toString(2).length : 0);

/** One report of the oracle (streams.oracle.perturb): GRR draws a float u, then an integer r
 * of [0, k − 1): v if u < p, else (v + 1 + r) mod k; OUE k floats (bit = u < q), then bit v. */
async function oracleReport(kind, v, k, p, q, src) {
  if (kind === "grr") {
    const u = (await floats(src, 1))[0];
    const [r] = await integers(src, 0, k - 1, 1);
    return u < p ? v : (v + 1 + r) % k;
  }
  const bits = Array.from(await floats(src, k), (u) => (u < q ? 1 : 0));
  bits[v] = (await floats(src, 1))[0] < p ? 1 : 0;
  return bits;
}

/** The oracle's report as `width` bytes: the symbol big-endian, or the packed bits. */
function foPayload(kind, k, report, width) {
  const out = new Uint8Array(width);
  out.set(kind === "grr" ? uintBE(report, minBytes(k - 1)) : packBits(report));
  return out;
}

/** Epochs move forward and, with a horizon, stay in it. */
function checkEpoch(name, e, last, tau) {
  if (e <= last) throw new RangeError(`${name}: epoch ${e} does not follow the device's last epoch ${last}; a device reports each epoch once, in order`);
  if (tau !== undefined && e >= tau) throw fail(name, "epoch", `in [0, ${tau}) (tau = ${tau})`, e);
}

/** A plan's keys, checked against the protocol's plan keys (none for an unplanned one). */
function checkPlan(o, plan) {
  const given = plan == null ? {} : plan;
  if (typeof given !== "object" || Array.isArray(given)) throw new TypeError(`${o.name}: a plan must be a JSON object; got ${JSON.stringify(plan)}`);
  const keys = Object.keys(given).sort();
  if (keys.join(",") !== [...o.planKeys].sort().join(",")) {
    throw new RangeError(`${o.name}: the plan's keys must be ${o.planKeys.join(", ") || "nothing (it is not planned)"}; got ${JSON.stringify(keys)}`);
  }
  return given;
}

// ------------------------------------------------------------------------------ CHANGES-TREE
const changesTree = {
  derive(name, P) {
    budget(name, "eps_0", P.eps_0);
    budget(name, "eps_node", P.eps_node);
    int(name, "tau", P.tau, 1);
    const kind = foKind(P.k, P.eps_0);
    const [p1, q1] = foProbabilities(kind, P.k, P.eps_0);
    const more = { kind, nodeP: 0.5, nodeQ: drawn(1 / (exp(P.eps_node / 2) + 1)), levels: P.tau > 1 ? bitLength(P.tau - 1) : 1, bodySize: 2 + Math.ceil((2 * P.k) / 8) };
    return [p1, q1, 1, 0, more];
  },
  methods: {
    async state(src) {
      return { level: (await integers(src, 0, this.levels, 1))[0] };
    },
    newHistory: () => ({ current: -1, anchor: -1, last: -1 }),
    /** Epoch 0: the initial report; a node end of the level: the transition from the value at
     * its start (carried forward) to the value now; else nothing. */
    historyStep(x, st, h, e, plan) {
      checkPlan(this, plan);
      checkEpoch(this.name, e, h.last, this.params.tau);
      const size = 2 ** st.level;
      const anchor = Math.floor((e - 1) / size) * size > h.last ? h.current : h.anchor;
      const nodeEnd = e >= 1 && e % size === 0;
      const node = nodeEnd && anchor >= 0;
      const k = this.k;
      const input = e === 0 ? x : node ? k + anchor * k + x : -1;
      const cost = e === 0 ? this.params.eps_0 : node && anchor !== x ? this.params.eps_node : 0;
      return { input, cost, history: { current: x, anchor: e === 0 || nodeEnd ? x : anchor, last: e } };
    },
    async drawStep(input, st, src) {
      const k = this.k;
      // The level, 0 (initial report) or 1 (node), then the payload.
      const body = new Uint8Array(this.bodySize);
      body[0] = st.level;
      if (input < k) {
        body.set(foPayload(this.kind, k, await oracleReport(this.kind, input, k, this.p1, this.q1, src), this.bodySize - 2), 2);
        return body;
      }
      const a = Math.floor((input - k) / k), b = (input - k) % k;
      // changes_tree.node_bits: 2k floats (bit = u < q), then, for a change, bit b and bit k + a.
      const bits = Array.from(await floats(src, 2 * k), (u) => (u < this.nodeQ ? 1 : 0));
      if (a !== b) {
        bits[b] = (await floats(src, 1))[0] < this.nodeP ? 1 : 0;
        bits[k + a] = (await floats(src, 1))[0] < this.nodeP ? 1 : 0;
      }
      body[1] = 1;
      body.set(packBits(bits), 2);
      return body;
    },
    epsilons() {
      const p = this.nodeP, q = this.nodeQ;
      const e = max(foEpsilon(this.kind, this.p1, this.q1), 2 * log((p * (1 - q)) / (q * (1 - p))));
      return [e, e];
    },
  },
};

// ------------------------------------------------------------------------------ DDRM
const ddrm = {
  derive(name, P) {
    budget(name, "eps", P.eps);
    int(name, "tau", P.tau, 1);
    const p = drawn(1 / (1 + exp(-P.eps)));
    return [p, 1 - p, 1, 0, { levels: bitLength(P.tau), bodySize: minBytes(P.k - 1) + 1 }];
  },
  methods: {
    async state(src) {
      return { item: (await integers(src, 0, this.k, 1))[0] };
    },
    newHistory() {
      return { current: 0, marks: new Array(this.levels).fill(0), last: -1 };
    },
    /** The item's bit b = [x = j] at point s = e + 1; the leaf's and (s even) the top node's
     * differences, from b at their starts (carried forward over unobserved epochs). */
    historyStep(x, st, h, e, plan) {
      checkPlan(this, plan);
      checkEpoch(this.name, e, h.last, this.params.tau);
      const s = e + 1;
      const b = x === st.item ? 1 : 0;
      const marks = h.marks.map((m, lvl) => (Math.floor((s - 1) / 2 ** lvl) * 2 ** lvl > h.last + 1 ? h.current : m));
      const top = bitLength(s & -s) - 1;
      const leaf = b - marks[0];
      const topD = top > 0 ? b - marks[top] : leaf;
      const input = top > 0 ? 3 * (leaf + 1) + topD + 1 : 9 + leaf + 1;
      const cost = leaf !== 0 || topD !== 0 ? this.params.eps : 0;
      return { input, cost, history: { current: b, marks: marks.map((m, lvl) => (s % 2 ** lvl === 0 ? b : m)), last: e } };
    },
    /** ddrm.node_reports: with s even a float u (top node if u < 1/2), then a float u′: +1 if
     * u′ < Pr[+1 | Δ] (q1, 1/2, p1 for Δ = −1, 0, +1). */
    async drawStep(input, st, src) {
      const even = input < 9;
      const leaf = even ? Math.floor(input / 3) - 1 : input - 10;
      const top = even ? (input % 3) - 1 : leaf;
      const useTop = even ? (await floats(src, 1))[0] < 0.5 : false;
      const delta = useTop ? top : leaf;
      const plus = delta > 0 ? this.p1 : delta < 0 ? this.q1 : 0.5;
      const up = (await floats(src, 1))[0] < plus;
      const body = new Uint8Array(this.bodySize);
      body.set(uintBE(st.item, this.bodySize - 1));
      body[this.bodySize - 1] = 2 * useTop + up;
      return body;
    },
    epsilons() {
      const e = log(this.p1 / this.q1);
      return [e, e];
    },
  },
};

// ------------------------------------------------------------------------------ THRESH
const ROUNDS = ["vote", "estimate"];
const threshMech = {
  derive(name, P) {
    budget(name, "eps_total", P.eps_total);
    int(name, "max_votes", P.max_votes, 1);
    int(name, "max_updates", P.max_updates, 1);
    if (real(name, "z", P.z) <= 0) throw fail(name, "z", "a number > 0", P.z);
    const epsVote = P.eps_total / (4 * P.max_votes), epsEst = P.eps_total / (4 * P.max_updates);
    const kind = foKind(P.k, epsEst);
    const [p1, q1] = foProbabilities(kind, P.k, epsEst);
    const voteP = drawn(1 / (1 + exp(-epsVote)));
    const more = { kind, epsVote, epsEst, voteP, voteQ: 1 - voteP, bodySize: 1 + max(1, foWidth(kind, P.k)) };
    return [p1, q1, 1, 0, more];
  },
  methods: {
    newHistory: () => ({ reference: -1, votes: 0, estimates: 0, last_vote: -1, last_estimate: -1 }),
    /** The plan's round: a vote (real when the value left the last update's and the counter has
     * room) or an update report (real while the estimate counter has room; else the default). */
    historyStep(x, st, h, e, plan) {
      const round = checkPlan(this, plan).round;
      if (!ROUNDS.includes(round)) throw fail(this.name, "round", "'vote' or 'estimate'", round);
      if (round === "vote") {
        checkEpoch(this.name, e, max(h.last_vote, h.last_estimate));
        const realVote = h.reference >= 0 && x !== h.reference && h.votes < this.params.max_votes;
        return { input: this.k + 1 + (realVote ? 1 : 0), cost: realVote ? this.epsVote : 0, history: { ...h, votes: h.votes + (realVote ? 1 : 0), last_vote: e } };
      }
      checkEpoch(this.name, e, max(h.last_estimate, h.last_vote - 1));
      const realEst = h.estimates < this.params.max_updates;
      return { input: realEst ? x : this.k, cost: realEst ? this.epsEst : 0, history: { ...h, estimates: h.estimates + (realEst ? 1 : 0), reference: x, last_estimate: e } };
    },
    /** thresh.update_reports (a uniform value first for the default) or thresh.vote_bits. */
    async drawStep(input, st, src) {
      const k = this.k;
      const body = new Uint8Array(this.bodySize);
      if (input <= k) {
        const held = input === k ? (await integers(src, 0, k, 1))[0] : input;
        body[0] = 1;
        body.set(foPayload(this.kind, k, await oracleReport(this.kind, held, k, this.p1, this.q1, src), this.bodySize - 1), 1);
        return body;
      }
      body[1] = (await floats(src, 1))[0] < (input === k + 2 ? this.voteP : this.voteQ) ? 1 : 0;
      return body;
    },
    epsilons() {
      const e = max(log(this.voteP / this.voteQ), foEpsilon(this.kind, this.p1, this.q1));
      return [e, e];
    },
  },
};

const FAMILY = { "CHANGES-TREE": changesTree, DDRM: ddrm, THRESH: threshMech };

/** The protocol's methods; `history`: the per-device history these keep (client.js). */
export function methods(name) {
  return { key: (v) => v, history: true, body: (payload) => payload, ...FAMILY[name].methods };
}

export function derive(name, P) {
  return FAMILY[name].derive(name, P);
}
