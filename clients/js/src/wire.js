// Wire format v1 (docs/wire-format.md): report header, upload records and binary batches.

import { concat, toHex, uintBE } from "./bytes.js";
import { canonicalJson } from "./json.js";
import { sha256 } from "./random.js";

export const ID_SIZE = 16;
export const MAX_EPOCH = 2 ** 32 - 1;
/** Random bytes in a report id, after its 4-byte epoch. */
export const ID_ENTROPY = 12;

/**
 * A report's id: its epoch (u32 big-endian) ‖ 12 CSPRNG bytes (docs/wire-format.md §4). The
 * epoch is in the upload record anyway; the prefix keeps one epoch's reports together in the
 * server's index.
 */
export const reportId = (epoch, entropy) => concat(uintBE(epoch, 4), entropy);

/** The canonical JSON of a protocol's spec (the bytes its fingerprint hashes). */
export const specJson = (proto) => canonicalJson(proto.spec);

const headers = new Map();

/** The 12-byte header of every report: "LL", version 1, protocol id, fingerprint (8 bytes). */
export async function header(proto) {
  const spec = specJson(proto);
  if (!headers.has(spec)) {
    const digest = await sha256(new TextEncoder().encode(spec));
    headers.set(spec, concat(new Uint8Array([0x4c, 0x4c, 1, proto.id]), digest.subarray(0, 8)));
  }
  return headers.get(spec).slice();
}

/** The fingerprint of a header, as 16 hex digits (what the server publishes). */
export const fingerprintHex = (head) => toHex(head.subarray(4, 12));

/** One upload record: report id (16) ‖ epoch u32 big-endian ‖ report. */
export function record(id, epoch, report) {
  return concat(id, uintBE(epoch, 4), report);
}

/** A binary batch (application/octet-stream) of queued items {id, epoch, report}. */
export function batch(items) {
  return concat(...items.map((q) => record(q.id, q.epoch, q.report)));
}
