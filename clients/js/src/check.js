// Parameter checks with one-line messages naming the owner, the parameter, what is allowed and
// what was given (docs/client-spec.md §8): a TypeError for a wrong type, else a RangeError.

export const EPS_MAX = 30;

/** A given value as a message shows it, as it would be written in JS: NaN, Infinity, -0, 3n,
 * undefined and strings in quotes (JSON.stringify alone printed NaN as "null" and 3n as "3", or
 * threw on a BigInt inside an object). */
export function show(v) {
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (v === undefined || typeof v === "symbol" || typeof v === "function") return String(v);
  try {
    const mark = (_, x) => (typeof x === "bigint" ? `${x}n` : typeof x === "number" && !Number.isFinite(x) ? String(x) : x);
    return JSON.stringify(v, mark) ?? String(v);
  } catch {
    return String(v); // a cycle
  }
}

export const fail = (owner, name, allowed, got, Err = RangeError) => new Err(`${owner}: '${name}' must be ${allowed}; got ${show(got)}`);

export function int(owner, name, v, lo, hi) {
  const allowed = hi === undefined ? `an integer >= ${lo}` : `an integer in [${lo}, ${hi}]`;
  if (!Number.isInteger(v)) throw fail(owner, name, allowed, v, TypeError);
  if (v < lo || v > hi) throw fail(owner, name, allowed, v);
  return v;
}

export function real(owner, name, v) {
  if (!Number.isFinite(v)) throw fail(owner, name, "a finite number", v, TypeError);
  return v;
}

export function budget(owner, name, v) {
  if (real(owner, name, v) <= 0 || v > EPS_MAX) throw fail(owner, name, `a finite number > 0 and <= ${EPS_MAX}`, v);
  return v;
}

/** 0 < ε1 < ε∞ ≤ EPS_MAX. */
export function chain(owner, P) {
  budget(owner, "eps_perm", P.eps_perm);
  if (real(owner, "eps_1", P.eps_1) <= 0 || P.eps_1 >= P.eps_perm) throw fail(owner, "eps_1", `a finite number in (0, ${P.eps_perm})`, P.eps_1);
}

export function choice(owner, name, v, allowed) {
  if (typeof v !== "string" || !allowed.includes(v.toLowerCase())) {
    throw fail(owner, name, `one of ${allowed.map((a) => `'${a}'`).join(", ")}`, v, typeof v === "string" ? RangeError : TypeError);
  }
  return v.toLowerCase();
}

/** The default value check (`this`: the protocol): an integer in [0, k). */
export function checkValue(v) {
  const allowed = `an integer in [0, ${this.k})`;
  if (!Number.isInteger(v)) throw fail(this.name, "value", allowed, v, TypeError);
  if (v < 0 || v >= this.k) throw fail(this.name, "value", allowed, v);
  return v;
}
