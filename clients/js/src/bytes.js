// Byte helpers shared by the modules (no dependencies).

const enc = new TextEncoder();

/** UTF-8 bytes of a string. */
export const utf8 = (s) => enc.encode(s);

/** Concatenation of Uint8Arrays. */
export function concat(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Big-endian unsigned integer (a Number or BigInt) in `width` bytes. */
export function uintBE(x, width) {
  let v = BigInt(x);
  const out = new Uint8Array(width);
  for (let i = width - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** Bytes needed for unsigned integers up to `max` (docs/wire-format.md §3, w(x)). */
export function minBytes(max) {
  let v = BigInt(max > 1 ? max : 1);
  let bits = 0;
  while (v > 0n) {
    bits++;
    v >>= 1n;
  }
  return Math.max(1, Math.ceil(bits / 8));
}

export function toHex(bytes) {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

export function fromHex(s) {
  if (typeof s !== "string" || s.length % 2 || /[^0-9a-f]/.test(s)) {
    throw new TypeError(`hex: expected lower-case hex digits; got ${JSON.stringify(s)}`);
  }
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    s += B64[n >> 18] + B64[(n >> 12) & 63];
    s += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
    s += i + 2 < bytes.length ? B64[n & 63] : "=";
  }
  return s;
}

export function fromBase64(s) {
  if (typeof s !== "string" || s.length % 4 || /[^A-Za-z0-9+/=]/.test(s)) {
    throw new TypeError("base64: malformed text");
  }
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < s.length; i += 4) {
    const n =
      (B64.indexOf(s[i]) << 18) |
      (B64.indexOf(s[i + 1]) << 12) |
      ((B64.indexOf(s[i + 2]) & 63) << 6) |
      (B64.indexOf(s[i + 3]) & 63);
    if (o < out.length) out[o++] = n >> 16;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  return out;
}

export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}
