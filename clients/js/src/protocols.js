// A protocol from its spec: the registered names, their parameters and defaults (the generated
// registry.js, written from the Python registry by scripts/registry_tables.py), and the family
// module with its formulas and draws, loaded on first use (docs/client-spec.md §3–§5).

import { budget, checkValue, fail, int, real, show } from "./check.js";
import { PyFloat } from "./json.js";
import { ALIASES, B, F, FAMILIES, I, OPT, OPTF, OPTS, S, TABLE } from "./registry.js";

/** Canonical protocol names (Python's registry, longldp.protocols.NAMES, with a device client). */
export const PROTOCOL_NAMES = Object.keys(TABLE);

/** ε rounded outward by 1e-12 relative (privacy.round_up). */
export const roundUp = (eps) => eps + 1e-12 * Math.max(1, Math.abs(eps));

/**
 * A protocol from its spec `{name, params}` (as `proto.spec()` in Python and the server's
 * `GET /v1/collections/{name}` give it), with its family's code loaded. Unknown names or
 * parameters, missing or invalid values reject with a RangeError or TypeError naming them.
 */
export async function protocolFromSpec(spec) {
  const own = "protocol spec";
  if (typeof spec?.name !== "string") throw new TypeError(`${own}: must be an object {name: string, params: object}; got ${show(spec)}`);
  const extra = Object.keys(spec).filter((k) => k !== "name" && k !== "params");
  if (extra.length) throw new TypeError(`${own}: unknown key(s) ${extra}; allowed: name, params`);
  const given = spec.params ?? {};
  if (typeof given !== "object" || Array.isArray(given)) throw new TypeError(`${own}: 'params' must be an object; got ${show(given)}`);
  const lower = spec.name.toLowerCase();
  const name = ALIASES[lower] ?? PROTOCOL_NAMES.find((n) => n.toLowerCase() === lower);
  if (!name) throw new RangeError(`${own}: 'name' must be one of ${PROTOCOL_NAMES.join(", ")}; got ${show(spec.name)}`);
  const [id, memoizes, family, params, planKeys = []] = TABLE[name];
  const types = Object.fromEntries(Object.entries(params).map(([key, [type]]) => [key, type]));
  const unknown = Object.keys(given).filter((k) => !(k in types));
  if (unknown.length) throw new RangeError(`${name}: unknown parameter(s) ${unknown.join(", ")}; allowed: ${Object.keys(types).join(", ")}`);
  const P = {};
  for (const [key, [type, ...fallback]] of Object.entries(params)) {
    let v = key in given ? given[key] : fallback[0];
    if (v === undefined) throw new RangeError(`${name}: missing parameter(s) ${key}`);
    if (v instanceof PyFloat) v = v.value;
    if (type === F) real(name, key, v);
    else if (type === I) int(name, key, v, key === "k" ? (family === "rappor" ? 1 : 2) : 0);
    else if (type === OPT && v !== null) int(name, key, v, 1);
    else if (type === OPTF && v !== null) real(name, key, v);
    else if (type === OPTS && v !== null && typeof v !== "string") throw fail(name, key, "a string or null", v, TypeError);
    else if (type === S && typeof v !== "string") throw fail(name, key, "a string", v, TypeError);
    else if (type === B && typeof v !== "boolean") throw fail(name, key, "true or false", v, TypeError);
    P[key] = v;
  }
  if ("eps" in P) budget(name, "eps", P.eps);
  const fam = await FAMILIES[family]();
  const [p1, q1, p2, q2, more] = fam.derive(name, P);
  const typed = {};
  for (const [key, type] of Object.entries(types)) typed[key] = type === F || (type === OPTF && P[key] !== null) ? new PyFloat(P[key]) : P[key];
  const methods = typeof fam.methods === "function" ? fam.methods(name) : fam.methods;
  const proto = Object.assign(Object.create({ check: checkValue, state: async () => ({}), round2: async (x) => x, ...methods }), {
    name, id, memoizes: !!memoizes, k: P.k, params: P, spec: { name, params: typed },
    planKeys, planned: planKeys.length > 0,
    p1, q1, p2, q2, P1: p1 * p2 + (1 - p1) * q2, P0: q1 * p2 + (1 - q1) * q2,
    ...more,
  });
  const [e1, eInf] = proto.epsilons();
  proto.eps1 = roundUp(e1);
  proto.epsInf = roundUp(eInf);
  return Object.freeze(proto);
}
