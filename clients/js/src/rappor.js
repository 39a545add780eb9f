// RAPPOR's device side (docs/client-spec.md §4.3), loaded only for RAPPOR collections: the
// cohort and the PRR are derived from a RAPPOR key K_R = HMAC(S, "longldp/rappor/v1|" ‖ H)
// (Python's RapporClient with prr_source "hmac"); the encoding is a Bloom filter (MD5, google's
// "rappor-md5-1byte"), one-hot, or one boolean bit.

import { concat, toHex, uintBE, utf8 } from "./bytes.js";
import { md5 } from "./md5.js";
import { floats, hmac, hmacKey, HmacStream } from "./random.js";

/** Per-device state: K_R, the metric (the collection's first 255 UTF-8 bytes), the cohort. */
export async function rapporState(proto, secretKey, header, collection) {
  const key = await hmacKey(await hmac(secretKey, concat(utf8("longldp/rappor/v1|"), header)));
  const metric = utf8(collection).slice(0, 255);
  const digest = await hmac(key, concat(utf8("cohort"), metric));
  const cohort = Number(BigInt(`0x${toHex(digest)}`) % BigInt(proto.params.m ?? 1));
  return { key, metric, cohort };
}

/** The encoded bits (Uint8Array of k zeros and ones) of a checked value. */
export function encode(proto, value, st) {
  const bits = new Uint8Array(proto.k);
  if (proto.encoder === "bloom") {
    const digest = md5(concat(uintBE(st.cohort, 4), typeof value === "string" ? utf8(value) : value));
    for (let i = 0; i < proto.params.h; i++) bits[digest[i] % proto.k] = 1;
  } else bits[proto.encoder === "onehot" ? value : 0] = proto.encoder === "onehot" ? 1 : Number(value);
  return bits;
}

/** The PRR stream of an encoding: HmacStream(K_R, 0x01 ‖ len(metric) ‖ metric ‖ u16(cohort) ‖ packed bits). */
export function prrStream(st, packed) {
  return new HmacStream(st.key, concat(new Uint8Array([1, st.metric.length]), st.metric, uintBE(st.cohort, 2), packed));
}

/** PRR: k floats u_i; bit_i = 1 if u_i < f/2, 0 if u_i < f, else the encoded bit. */
export async function prr(proto, bits, src) {
  const f = proto.params.f;
  const u = await floats(src, proto.k);
  return bits.map((b, i) => (u[i] < f / 2 ? 1 : u[i] < f ? 0 : b));
}

/** One-time RAPPOR's one draw (PRR and IRR composed): bit_i = u_i < (encoded ? q* : p*). */
export async function oneTime(proto, bits, src) {
  const u = await floats(src, proto.k);
  return bits.map((b, i) => (u[i] < (b ? proto.P1 : proto.P0) ? 1 : 0));
}
