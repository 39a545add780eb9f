// Uploading a client's queue to `longldp serve` (docs/client-spec.md §7, docs/server.md):
// binary batches, the same report ids on every retry, exponential backoff with full jitter,
// Retry-After honoured, 413 halves the batch, 401/403 keep everything and stop.

import { show } from "./check.js";
import { toHex } from "./bytes.js";
import { canonicalJson } from "./json.js";
import { protocolFromSpec } from "./protocols.js";
import { fingerprintHex, header } from "./wire.js";

const RETRY = new Set([408, 429]);

/** Seconds to wait from a Retry-After value (delta-seconds or an HTTP date), else null. */
export function parseRetryAfter(value, now = Date.now()) {
  if (value == null) return null;
  const v = String(value).trim();
  if (/^\d+$/.test(v)) return Number(v);
  const when = Date.parse(v);
  return Number.isNaN(when) ? null : Math.max(0, (when - now) / 1000);
}

const sleepMs = (s) => new Promise((ok) => setTimeout(ok, s * 1000));
const url = (base, collection, tail = "") => `${base.replace(/\/+$/, "")}/v1/collections/${encodeURIComponent(collection)}${tail}`;

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * The collection as the server describes it (GET /v1/collections/{name}): its protocol spec,
 * fingerprint (checked against the one this client computes: RangeError if they differ), its
 * clock (first_epoch, epoch_seconds, start_time, current_epoch, epoch_window) and its quota
 * (reports_per_epoch); docs/server.md, "Collections and tokens".
 */
export async function fetchCollection(baseUrl, collection, token, fetchFn = globalThis.fetch) {
  const resp = await fetchFn(url(baseUrl, collection), { headers: { Authorization: `Bearer ${token}` } });
  if (!resp.ok) throw new RangeError(`collection ${JSON.stringify(collection)}: HTTP ${resp.status} from the server`);
  const info = await resp.json();
  const proto = await protocolFromSpec(info.protocol);
  const mine = fingerprintHex(await header(proto));
  if (info.fingerprint !== undefined && info.fingerprint !== mine) {
    throw new RangeError(
      `collection ${JSON.stringify(collection)}: the server's fingerprint ${info.fingerprint} is not ${mine}, this client's for ${canonicalJson(proto.spec)}`,
    );
  }
  return info;
}

/** The collection's protocol spec only (`fetchCollection(…).protocol`). */
export async function fetchSpec(baseUrl, collection, token, fetchFn = globalThis.fetch) {
  return (await fetchCollection(baseUrl, collection, token, fetchFn)).protocol;
}

/**
 * The epoch of a collection with a wall clock at time `nowMs` (milliseconds since 1970, UTC;
 * default: now): first_epoch + ⌊(now − start_time)/epoch_seconds⌋, the server's own rule
 * (docs/client-spec.md §5.1). A collection without a clock (epoch_seconds null) has no such
 * epoch: the app numbers its epochs itself, and this throws a RangeError.
 */
export function epochAt(info, nowMs = Date.now()) {
  const { first_epoch: first, epoch_seconds: length, start_time: start } = info ?? {};
  if (!Number.isFinite(length) || !Number.isFinite(start) || !Number.isInteger(first)) {
    throw new RangeError(`epochAt: the collection has no wall clock (epoch_seconds ${show(length)}); the app numbers its epochs`);
  }
  if (!Number.isFinite(nowMs)) throw new TypeError(`epochAt: 'nowMs' must be a finite number; got ${show(nowMs)}`);
  return first + Math.floor((nowMs / 1000 - start) / length);
}

/**
 * What a device reports with at `epoch` (GET /v1/collections/{name}/epochs/{epoch}/plan,
 * docs/server.md): {status: "report" | "none" | "pending", plan: object or null, …}. `token`:
 * any token of the collection (the device's credential, its enrollment token).
 */
export async function fetchPlan(baseUrl, collection, epoch, token, fetchFn = globalThis.fetch) {
  const resp = await fetchFn(url(baseUrl, collection, `/epochs/${epoch}/plan`), { headers: { Authorization: `Bearer ${token}` } });
  if (!resp.ok) throw new RangeError(`collection ${JSON.stringify(collection)}: HTTP ${resp.status} from the server for the plan of epoch ${epoch}`);
  return resp.json();
}

/** Sends a DeviceClient's queue to one collection of a server. */
export class Uploader {
  /**
   * @param {object} o
   * @param {string} o.baseUrl  e.g. "https://ldp.example.org"
   * @param {string} o.collection
   * @param {string} [o.token]  the collection's shared ingest token, or
   * @param {string} [o.enrollToken]  its enrollment token: the device enrolls on first use
   *   (POST …/devices) and keeps its own credential in its state (docs/server.md)
   * @param {number} [o.batchSize=500] @param {number} [o.timeout=10] seconds per request
   * @param {number} [o.maxAttempts=8] consecutive failures before flush() gives up
   * @param {number} [o.baseDelay=1] @param {number} [o.maxDelay=3600] seconds
   * @param {(s: number) => Promise<void>} [o.sleep] @param {() => number} [o.rand] uniform [0, 1)
   * @param {typeof fetch} [o.fetch]
   */
  constructor({ baseUrl, collection, token, enrollToken, batchSize = 500, timeout = 10, maxAttempts = 8, baseDelay = 1, maxDelay = 3600, sleep, rand, fetch }) {
    if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) {
      throw new TypeError(`Uploader: 'baseUrl' must be http(s)://…; got ${show(baseUrl)}`);
    }
    if (typeof collection !== "string" || !collection) throw new TypeError("Uploader: 'collection' must be a non-empty string");
    if (!token === !enrollToken || typeof (token ?? enrollToken) !== "string") {
      throw new TypeError("Uploader: give exactly one of 'token' (the shared ingest token) and 'enrollToken' (devices enroll)");
    }
    if (!(batchSize >= 1 && maxAttempts >= 1 && baseDelay >= 0 && maxDelay >= 0)) {
      throw new RangeError("Uploader: 'batchSize' and 'maxAttempts' must be >= 1, 'baseDelay' and 'maxDelay' >= 0");
    }
    Object.assign(this, { baseUrl, collection, token, enrollToken, batchSize, timeout, maxAttempts, baseDelay, maxDelay });
    this.sleep = sleep ?? sleepMs;
    this.rand = rand ?? (() => globalThis.crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32);
    this.fetch = fetch ?? globalThis.fetch.bind(globalThis);
  }

  get url() {
    return url(this.baseUrl, this.collection, "/reports");
  }

  _wait(failures, retryAfter, result) {
    const cap = Math.min(this.maxDelay, this.baseDelay * 2 ** failures);
    let wait = this.rand() * cap;
    if (retryAfter !== null) wait = Math.max(wait, Math.min(retryAfter, this.maxDelay));
    if (failures + 1 < this.maxAttempts) {
      result.waits.push(wait);
      return this.sleep(wait);
    }
  }

  /** The bearer token: the shared one, the device's credential, or one obtained by enrolling now. */
  async _bearer(client, result) {
    if (this.token) return this.token;
    const held = client.credential(this.baseUrl);
    if (held) return held.credential;
    for (let failures = 0; failures < this.maxAttempts; failures++) {
      result.attempts += 1;
      const { status, body, retryAfter } = await this._post(url(this.baseUrl, this.collection, "/devices"), new Uint8Array(0), this.enrollToken);
      if (status === 201) {
        const answer = parseJson(body) ?? {};
        await client.setCredential(this.baseUrl, answer.device, answer.credential);
        return answer.credential;
      }
      if (status !== null && status >= 400 && status < 500 && !RETRY.has(status)) {
        result.refused = status;
        return null;
      }
      await this._wait(failures, retryAfter, result);
    }
    return null;
  }

  /**
   * Send the queue until it is empty, or until `maxAttempts` consecutive failures, or a 401/403.
   * Resolves to {acknowledged, dropped, deferred, attempts, remaining, refused, waits};
   * `deferred` counts reports kept for a later flush (425: their epoch opens later).
   */
  async flush(client) {
    const result = { acknowledged: 0, dropped: 0, deferred: 0, attempts: 0, remaining: 0, refused: null, waits: [] };
    let failures = 0;
    let limit = this.batchSize;
    const later = new Set(); // ids (hex) of reports whose epoch opens later: for a later flush
    const bearer = client.queue.length ? await this._bearer(client, result) : null;
    while (bearer !== null && client.queue.length && failures < this.maxAttempts) {
      const { items, data } = client.batch(limit, later);
      if (!items.length) break;
      result.attempts += 1;
      const { status, body, retryAfter } = await this._post(this.url, data, bearer);
      const ids = items.map((q) => q.id);
      if (status !== null && status >= 200 && status < 300) {
        await client.acknowledge(ids);
        result.acknowledged += items.length;
        failures = 0;
      } else if (status === 425) {
        // The epoch opens later (this device's clock runs ahead): keep the report it names.
        const answer = parseJson(body);
        const item = Number.isInteger(answer?.item) && answer.item >= 0 && answer.item < items.length ? answer.item : null;
        for (const q of item === null ? items : [items[item]]) later.add(toHex(q.id));
        result.deferred += item === null ? items.length : 1;
      } else if (status === 413 && limit > 1) {
        limit = Math.max(1, items.length >> 1);
      } else if (status === 401 || status === 403) {
        result.refused = status;
        break;
      } else if (status !== null && status >= 400 && status < 500 && !RETRY.has(status)) {
        const answer = parseJson(body);
        const item = Number.isInteger(answer?.item) && answer.item >= 0 && answer.item < items.length ? answer.item : null;
        const bad = item === null ? ids : [ids[item]];
        await client.drop(bad, `HTTP ${status}: ${typeof answer?.error === "string" ? answer.error : body.slice(0, 200)}`);
        result.dropped += bad.length;
      } else {
        await this._wait(failures, retryAfter, result);
        failures += 1;
      }
    }
    result.remaining = client.queue.length;
    return result;
  }

  async _post(target, data, bearer) {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.timeout * 1000);
    try {
      const resp = await this.fetch(target, {
        method: "POST",
        body: data,
        headers: { Authorization: `Bearer ${bearer}`, "Content-Type": "application/octet-stream" },
        signal: abort.signal,
      });
      const body = await resp.text();
      return { status: resp.status, body, retryAfter: parseRetryAfter(resp.headers.get("Retry-After")) };
    } catch {
      return { status: null, body: "", retryAfter: null };
    } finally {
      clearTimeout(timer);
    }
  }
}
