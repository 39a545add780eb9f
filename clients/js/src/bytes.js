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

export const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export const fromHex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));

/** Base64 (standard alphabet, padded) through the platform's btoa/atob. */
export const toBase64 = (bytes) => btoa(String.fromCharCode(...bytes));

export function fromBase64(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}
