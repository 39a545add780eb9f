// Randomness: the keyed HMAC-SHA256 stream (round 1, per-device state) and the platform CSPRNG
// (round 2), docs/client-spec.md §2.1; the two draws every protocol uses are in src/common.js.

import { concat, uintBE } from "./bytes.js";

const subtle = () => {
  const c = globalThis.crypto;
  if (!c || !c.subtle || !c.getRandomValues) {
    throw new TypeError("longldp: WebCrypto (globalThis.crypto.subtle) is not available");
  }
  return c.subtle;
};

const ALG = { name: "HMAC", hash: "SHA-256" };

/** A WebCrypto HMAC-SHA256 key from raw bytes (at least 16) or an HMAC CryptoKey as is. */
export async function hmacKey(secret) {
  if (typeof CryptoKey !== "undefined" && secret instanceof CryptoKey) {
    if (secret.algorithm?.name !== "HMAC" || secret.algorithm.hash?.name !== "SHA-256") {
      throw new TypeError("longldp: the secret CryptoKey must be an HMAC SHA-256 key");
    }
    return secret;
  }
  if (!(secret instanceof Uint8Array) || secret.length < 16) {
    throw new TypeError("longldp: a key must be a Uint8Array of at least 16 bytes or a CryptoKey");
  }
  return subtle().importKey("raw", secret, ALG, false, ["sign"]);
}

/** HMAC-SHA256(key, message) as 32 bytes. */
export async function hmac(key, message) {
  return new Uint8Array(await subtle().sign("HMAC", key, message));
}

/** SHA-256(message) as 32 bytes. */
export async function sha256(message) {
  return new Uint8Array(await subtle().digest("SHA-256", message));
}

/**
 * The deterministic stream HMAC-SHA256(key, context ‖ i as 8 bytes big-endian), i = 0, 1, …,
 * blocks concatenated and consumed in order (Python's HmacRandom).
 */
export class HmacStream {
  constructor(key, context) {
    this.key = key;
    this.context = context;
    this.counter = 0;
    this.buffer = new Uint8Array(0);
  }

  async bytes(n) {
    const need = n - this.buffer.length;
    if (need > 0) {
      const blocks = [];
      for (let i = 0, m = Math.ceil(need / 32); i < m; i++) {
        blocks.push(hmac(this.key, concat(this.context, uintBE(this.counter++, 8))));
      }
      this.buffer = concat(this.buffer, ...(await Promise.all(blocks)));
    }
    const out = this.buffer.slice(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }
}

/** Bytes from the platform CSPRNG (crypto.getRandomValues). */
export class CryptoSource {
  bytes(n) {
    subtle();
    const out = new Uint8Array(n);
    for (let at = 0; at < n; at += 65536) {
      globalThis.crypto.getRandomValues(out.subarray(at, Math.min(n, at + 65536)));
    }
    return out;
  }
}
