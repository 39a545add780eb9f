// A protocol from its spec: the registered names, their parameters and defaults, and the
// family module with its formulas and draws, loaded on first use (docs/client-spec.md §3–§5).

import { budget, checkValue, fail, int, real } from "./check.js";
import { PyFloat } from "./json.js";

// Each family is its own module, so an app loads the code of its collection's protocol only.
const FAMILIES = {
  grr: () => import("./grr.js"),
  ue: () => import("./ue.js"),
  lh: () => import("./lh.js"),
  dbitflip: () => import("./dbitflip.js"),
  ss: () => import("./ss.js"),
  rappor: () => import("./rappor.js"),
};

const F = 1, I = 2, OPT = 3, S = 4; // float, int, int or null, string
const ONE = { k: I, eps: F };
const LH1 = { ...ONE, hash_pool: OPT, pool_seed: I };
const CH = { k: I, eps_perm: F, eps_1: F };
const LGRR = { ...CH, calibration: S };
const LOLOHA = { ...LGRR, hash_pool: OPT, pool_seed: I };
const RATES = { f: F, p: F, q: F };
const BLOOM = { k: I, h: I, m: I, ...RATES, bloom_hash: S };
const DEFAULTS = { calibration: "exact", hash_pool: null, pool_seed: 0, b: null, d: 1, h: 2, m: 1, f: 0.5, p: 0.5, q: 0.75, bloom_hash: "rappor-md5-1byte", omega: null };

/** name → [wire id, memoizes, parameter types, family]. */
const TABLE = {
  GRR: [1, 0, ONE, "grr"],
  SUE: [2, 0, ONE, "ue"],
  OUE: [3, 0, ONE, "ue"],
  BLH: [4, 0, LH1, "lh"],
  OLH: [5, 0, LH1, "lh"],
  SH: [15, 0, ONE, "lh"],
  SS: [22, 0, { ...ONE, omega: OPT }, "ss"],
  "L-GRR": [6, 1, LGRR, "grr"],
  "L-SUE": [7, 1, CH, "ue"],
  "L-OUE": [8, 1, CH, "ue"],
  "L-SOUE": [9, 1, CH, "ue"],
  "L-OSUE": [10, 1, CH, "ue"],
  BiLOLOHA: [11, 1, LOLOHA, "lh"],
  OLOLOHA: [12, 1, LOLOHA, "lh"],
  "L-SH": [16, 1, LOLOHA, "lh"],
  dBitFlipPM: [13, 1, { k: I, eps_perm: F, b: OPT, d: I }, "dbitflip"],
  RAPPOR: [14, 1, BLOOM, "rappor"],
  "RAPPOR-onehot": [17, 1, { k: I, ...RATES }, "rappor"],
  "RAPPOR-boolean": [18, 1, { m: I, ...RATES }, "rappor"],
  "RAPPOR-one-time": [19, 0, BLOOM, "rappor"],
  "RAPPOR-onehot-one-time": [20, 0, { k: I, ...RATES }, "rappor"],
  "RAPPOR-boolean-one-time": [21, 0, { m: I, ...RATES }, "rappor"],
};

/** Canonical protocol names (Python's registry, longldp.protocols.NAMES). */
export const PROTOCOL_NAMES = Object.keys(TABLE);
const ALIASES = { dbitflip: "dBitFlipPM", "subset-selection": "SS" };

/** ε rounded outward by 1e-12 relative (privacy.round_up). */
export const roundUp = (eps) => eps + 1e-12 * Math.max(1, Math.abs(eps));

/**
 * A protocol from its spec `{name, params}` (as `proto.spec()` in Python and the server's
 * `GET /v1/collections/{name}` give it), with its family's code loaded. Unknown names or
 * parameters, missing or invalid values reject with a RangeError or TypeError naming them.
 */
export async function protocolFromSpec(spec) {
  const own = "protocol spec";
  if (typeof spec?.name !== "string") throw new TypeError(`${own}: must be an object {name: string, params: object}; got ${JSON.stringify(spec)}`);
  const extra = Object.keys(spec).filter((k) => k !== "name" && k !== "params");
  if (extra.length) throw new TypeError(`${own}: unknown key(s) ${extra}; allowed: name, params`);
  const given = spec.params ?? {};
  if (typeof given !== "object" || Array.isArray(given)) throw new TypeError(`${own}: 'params' must be an object; got ${JSON.stringify(given)}`);
  const lower = spec.name.toLowerCase();
  const name = ALIASES[lower] ?? PROTOCOL_NAMES.find((n) => n.toLowerCase() === lower);
  if (!name) throw new RangeError(`${own}: 'name' must be one of ${PROTOCOL_NAMES.join(", ")}; got ${JSON.stringify(spec.name)}`);
  const [id, memoizes, types, family] = TABLE[name];
  const unknown = Object.keys(given).filter((k) => !(k in types));
  if (unknown.length) throw new RangeError(`${name}: unknown parameter(s) ${unknown.join(", ")}; allowed: ${Object.keys(types).join(", ")}`);
  const P = {};
  for (const [key, type] of Object.entries(types)) {
    let v = key in given ? given[key] : DEFAULTS[key];
    if (v === undefined) throw new RangeError(`${name}: missing parameter(s) ${key}`);
    if (v instanceof PyFloat) v = v.value;
    if (type === F) real(name, key, v);
    else if (type === I) int(name, key, v, key === "k" ? (family === "rappor" ? 1 : 2) : 0);
    else if (type === OPT && v !== null) int(name, key, v, 1);
    else if (type === S && typeof v !== "string") throw fail(name, key, "a string", v, TypeError);
    P[key] = v;
  }
  if ("eps" in P) budget(name, "eps", P.eps);
  const fam = await FAMILIES[family]();
  const [p1, q1, p2, q2, more] = fam.derive(name, P);
  const typed = {};
  for (const [key, type] of Object.entries(types)) typed[key] = type === F ? new PyFloat(P[key]) : P[key];
  const methods = typeof fam.methods === "function" ? fam.methods(name) : fam.methods;
  const proto = Object.assign(Object.create({ check: checkValue, state: async () => ({}), round2: async (x) => x, ...methods }), {
    name, id, memoizes: !!memoizes, k: P.k, params: P, spec: { name, params: typed },
    p1, q1, p2, q2, P1: p1 * p2 + (1 - p1) * q2, P0: q1 * p2 + (1 - q1) * q2,
    ...more,
  });
  const [e1, eInf] = proto.epsilons();
  proto.eps1 = roundUp(e1);
  proto.epsInf = roundUp(eInf);
  return Object.freeze(proto);
}
