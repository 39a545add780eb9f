// Canonical JSON as Python's json.dumps(obj, sort_keys=True, separators=(",", ":"),
// ensure_ascii=True) writes it (docs/wire-format.md §2): the bytes a fingerprint hashes.

/** A number that is a float on the Python side even when integral (written 2.0, not 2). */
export class PyFloat {
  constructor(value) {
    this.value = value;
  }
}

/** Python's repr of a finite float: shortest round-trip digits, exponent if e < -4 or e ≥ 16. */
export function pyFloat(x) {
  if (!Number.isFinite(x)) throw new RangeError(`canonical JSON: ${x} is not a finite number`);
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e");
  const e = Number(expText);
  const sign = mant[0] === "-" ? "-" : "";
  const digits = mant.replace("-", "").replace(".", "");
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const ae = Math.abs(e);
    return `${sign}${m}e${e < 0 ? "-" : "+"}${ae < 10 ? "0" : ""}${ae}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const int = digits.slice(0, e + 1).padEnd(e + 1, "0");
  const frac = digits.slice(e + 1);
  return `${sign}${int}.${frac || "0"}`;
}

/** A JSON string as Python writes it with ensure_ascii: JSON.stringify's escapes, then every
 * UTF-16 code unit from 0x7f up as \uXXXX (lower-case hex, as Python). */
const str = (s) =>
  JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/**
 * Canonical JSON text. Integral Numbers are JSON integers, other Numbers and {@link PyFloat}
 * are Python floats; object keys sorted by code point.
 */
export function canonicalJson(v) {
  if (v === null) return "null";
  if (v instanceof PyFloat) return pyFloat(v.value);
  switch (typeof v) {
    case "boolean":
      return v ? "true" : "false";
    case "number":
      return Number.isInteger(v) ? String(v) : pyFloat(v);
    case "bigint":
      return v.toString();
    case "string":
      return str(v);
  }
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (typeof v === "object") {
    const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${str(k)}:${canonicalJson(v[k])}`).join(",")}}`;
  }
  throw new TypeError(`canonical JSON: cannot encode a ${typeof v}`);
}
