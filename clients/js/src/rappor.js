// RAPPOR's Bloom filter (docs/client-spec.md §4.3), loaded only for RAPPOR collections with
// Bloom filters: google/rappor's "rappor-md5-1byte" hashing.

import { concat, uintBE, utf8 } from "./bytes.js";
import { md5 } from "./md5.js";

/** The h bit positions of `value` (string or bytes) in `cohort`: MD5(u32(cohort) ‖ value), byte i mod k. */
export function bloom(value, cohort, h, k) {
  const digest = md5(concat(uintBE(cohort, 4), typeof value === "string" ? utf8(value) : value));
  return Array.from(digest.subarray(0, h), (b) => b % k);
}
