// The device client: round 1 derived from the device secret, round 2 from the platform CSPRNG,
// the spent budget and the upload queue persisted through a store (docs/client-spec.md).

import { concat, fromBase64, fromHex, toBase64, toHex, uintBE, utf8 } from "./bytes.js";
import { canonicalJson, PyFloat } from "./json.js";
import { int } from "./check.js";
import { protocolFromSpec } from "./protocols.js";
import { CryptoSource, HmacStream, hmac, hmacKey } from "./random.js";
import { batch, fingerprintHex, header, ID_ENTROPY, MAX_EPOCH, reportId } from "./wire.js";

export const STATE_FORMAT = "longldp.device-state";
export const STATE_VERSION = 1;
export const QUEUE_LIMIT = 1000;

/** A report would make the spent ε exceed the client's `maxEpsilon`. */
export class BudgetExceededError extends RangeError {
  constructor(message) {
    super(message);
    this.name = "BudgetExceededError";
  }
}

const label = (s) => utf8(s);

/** The 8-byte public name of a secret (hex): HMAC(secret, "longldp/secret-id/v1")[:8]. */
export async function secretId(key) {
  return toHex((await hmac(key, label("longldp/secret-id/v1"))).subarray(0, 8));
}

/** The state's tag: HMAC(HMAC(secret, "longldp/state-mac/v1"), canonical JSON of the rest). */
async function stateTag(macKey, body) {
  return toHex(await hmac(macKey, utf8(canonicalJson(body))));
}

/**
 * The spent total as privacy.spent_budget reports it: the per-term margin of 1e-12 taken off
 * once, then rounded up to 12 significant digits (through decimal text, so 3 is 3, not
 * 3.0000000000000004); docs/client-spec.md §6.1.
 */
function spentTotal(total) {
  if (total > 0 && Number.isFinite(total)) {
    const exponent = Math.floor(Math.log10(total)) - 11;
    // 10^e as the decimal literal (correctly rounded, as C's pow gives it here; V8's 10 ** e is not)
    const steps = Math.ceil((total * (1 - 1e-12)) / Number(`1e${exponent}`) - 1e-3);
    return Number(`${steps}e${exponent}`);
  }
  return total;
}


/** One device's client for one collection. Create with {@link DeviceClient.open}. */
export class DeviceClient {
  /**
   * Open (or create) the client's state in `store`.
   *
   * @param {object} o
   * @param {object} o.store  where the secret and the state live (MemoryStore, LocalStorageStore,
   *   IndexedDBStore, or FileStore from "longldp-client/node")
   * @param {object} [o.spec]  the collection's protocol spec; omitted: the stored state's
   * @param {string} [o.collection]  the collection's name; omitted: the stored one ("default")
   * @param {Uint8Array|CryptoKey} [o.secret]  the device secret instead of the store's
   * @param {number} [o.maxEpsilon]  refuse reports that would spend more in total
   * @param {number} [o.queueLimit]  most unacknowledged reports kept (oldest dropped past it)
   * @param {{bytes(n: number): Uint8Array|Promise<Uint8Array>}} [o.random]  the CSPRNG (tests)
   * @param {(message: string) => void} [o.warn]  where drops are reported (console.warn)
   */
  static async open(o = {}) {
    const c = new DeviceClient();
    await c._open(o);
    return c;
  }

  async _open({ store, spec, collection, secret, maxEpsilon, queueLimit = QUEUE_LIMIT, random, warn }) {
    const own = "DeviceClient";
    if (!store || typeof store.load !== "function") throw new TypeError(`${own}: 'store' must be a store (load/save/secret)`);
    if (maxEpsilon !== undefined && !(typeof maxEpsilon === "number" && maxEpsilon > 0 && Number.isFinite(maxEpsilon))) {
      throw new RangeError(`${own}: 'maxEpsilon' must be a positive number; got ${maxEpsilon}`);
    }
    int(own, "queueLimit", queueLimit, 1, 2 ** 31);
    if (collection !== undefined && (typeof collection !== "string" || !collection)) {
      throw new TypeError(`${own}: 'collection' must be a non-empty string`);
    }
    this.store = store;
    this.maxEpsilon = maxEpsilon;
    this.queueLimit = queueLimit;
    this._random = random ?? new CryptoSource();
    this._warn = warn ?? ((m) => console.warn(m));
    this._key = await hmacKey(secret ?? (await store.secret()));
    this._secretId = await secretId(this._key);
    this._macKey = await hmacKey(await hmac(this._key, label("longldp/state-mac/v1")));
    this._lock = Promise.resolve();
    const proto = spec === undefined ? undefined : await protocolFromSpec(spec);
    const text = await store.load();
    if (text != null) {
      await this._restore(text, proto, collection);
    } else {
      if (!proto) throw new TypeError(`${own}: no stored state; pass the collection's protocol 'spec'`);
      Object.assign(this, { proto, collection: collection ?? "default", reports: 0, dropped: 0 });
      this._memoKeys = new Set();
      this._queue = [];
      this._credentials = {};
    }
    this._header = await header(this.proto);
    const name = utf8(this.collection);
    this._context = concat(this._header, uintBE(name.length, 2), name);
    const stream = new HmacStream(this._key, concat(label("longldp/state/v1|"), this._context));
    this._state = await this.proto.state(stream);
    this._memos = new Map();
    if (text == null) await this._save();
  }

  async _restore(text, proto, collection) {
    const where = `device state`;
    let full;
    try {
      full = JSON.parse(text);
    } catch {
      throw new TypeError(`${where}: corrupt (not JSON); refusing it (clear the state: the secret reproduces the same memos)`);
    }
    if (!full || typeof full !== "object" || full.format !== STATE_FORMAT) throw new TypeError(`${where}: not a longldp device state`);
    if (full.version !== STATE_VERSION) throw new RangeError(`${where}: version ${full.version}; this client reads version ${STATE_VERSION}`);
    if (full.secret_id !== this._secretId) {
      throw new RangeError(`${where}: written under another device secret (secret id ${full.secret_id}, this device's is ${this._secretId}); refusing it`);
    }
    const { mac, ...body } = full;
    // The tag covers the canonical JSON with Python's floats (2.0, not 2): rebuild it through the spec.
    const stored = await protocolFromSpec(body.protocol).catch(() => null);
    const typed = stored && { ...body, protocol: stored.spec, spent_epsilon: new PyFloat(body.spent_epsilon) };
    if (!typed || typeof mac !== "string" || mac !== (await stateTag(this._macKey, typed))) {
      throw new TypeError(`${where}: its authentication tag does not match: corrupt or modified; refusing it`);
    }
    if (proto && canonicalJson(proto.spec) !== canonicalJson(stored.spec)) {
      throw new RangeError(`${where}: it belongs to ${canonicalJson(stored.spec)}, not to ${canonicalJson(proto.spec)}; refusing it`);
    }
    if (collection !== undefined && body.collection !== collection) {
      throw new RangeError(`${where}: it belongs to collection ${JSON.stringify(body.collection)}, not ${JSON.stringify(collection)}; refusing it`);
    }
    this.proto = stored;
    this.collection = body.collection;
    this.reports = body.reports;
    this.dropped = body.dropped;
    this._memoKeys = new Set(body.memo_keys);
    this._queue = body.queue.map((q) => ({ id: fromHex(q.id), epoch: q.epoch, report: fromBase64(q.report) }));
    this._credentials = body.credentials ?? {};
  }

  async _save() {
    const body = {
      format: STATE_FORMAT,
      version: STATE_VERSION,
      secret_id: this._secretId,
      collection: this.collection,
      protocol: this.proto.spec,
      fingerprint: fingerprintHex(this._header),
      reports: this.reports,
      memo_keys: [...this._memoKeys].sort(),
      spent_epsilon: new PyFloat(this.spentBudget.epsilon),
      dropped: this.dropped,
      credentials: this._credentials, // by server base URL (device identities, §7)
      queue: this._queue.map((q) => ({ id: toHex(q.id), epoch: q.epoch, report: toBase64(q.report) })),
    };
    body.mac = await stateTag(this._macKey, body);
    await this.store.save(canonicalJson(body));
  }

  /** Run `fn` after every earlier state change (reports are made one at a time). */
  _serial(fn) {
    const run = this._lock.then(fn);
    this._lock = run.catch(() => {});
    return run;
  }

  // -------------------------------------------------------------------- randomization
  /** The memo key of `value` (its value, hash bucket, bucket or encoding) as text; checks `value`. */
  memoId(value) {
    return String(this.proto.key(this.proto.check(value), this._state));
  }

  /** Round 1's input: the memo key as a number, or RAPPOR's encoding (hex) as is. */
  _input(key) {
    return this.proto.keyBytes ? key : Number(key);
  }

  async _round1(key) {
    let memo = this._memos.get(key);
    if (memo === undefined) {
      const o = this.proto;
      const x = o.keyBytes ? o.keyBytes(key) : uintBE(Number(key), 8);
      const src = new HmacStream(this._key, concat(label("longldp/round1/v1|"), this._context, x));
      memo = await o.round1(this._input(key), this._state, src);
      this._memos.set(key, memo);
    }
    return memo;
  }

  /** The round-1 memo of `value` (derived from the secret; one-shot protocols have none). */
  async memo(value) {
    if (!this.proto.memoizes) throw new TypeError(`${this.proto.name}: a one-shot protocol memoizes nothing`);
    return this._round1(this.memoId(value));
  }

  _budget(t, d) {
    const o = this.proto;
    return { reports: t, memos: o.memoizes ? d : 0, epsilon: spentTotal(o.memoizes ? Math.min(t * o.eps1, d * o.epsInf) : t * o.eps1) };
  }

  /** Reports t, distinct memos d and ε = min(t·ε1, d·ε∞) (one-shot protocols: t·ε). */
  get spentBudget() {
    return this._budget(this.reports, this._memoKeys.size);
  }

  /** The spent budget if `value` were reported next. */
  budgetAfter(value) {
    const key = this.memoId(value);
    return this._budget(this.reports + 1, this._memoKeys.size + (this._memoKeys.has(key) ? 0 : 1));
  }

  /**
   * Randomize `value` for `epoch`, queue the report and save the state (before it can be
   * uploaded); resolves to the report's 16-byte id. Bad input throws and changes nothing.
   */
  report(value, epoch) {
    return this._serial(async () => {
      int("DeviceClient", "epoch", epoch, 0, MAX_EPOCH);
      const o = this.proto;
      const key = this.memoId(value);
      const after = this.budgetAfter(value);
      if (this.maxEpsilon !== undefined && after.epsilon > this.maxEpsilon * (1 + 1e-12)) {
        throw new BudgetExceededError(
          `${o.name}: reporting would spend ε = ${after.epsilon.toPrecision(6)} in total, past maxEpsilon = ${this.maxEpsilon} (spent so far ${this.spentBudget.epsilon.toPrecision(6)}); the report was not made`,
        );
      }
      const payload = o.memoizes
        ? await o.round2(await this._round1(key), this._random)
        : await o.round1(this._input(key), this._state, this._random);
      const report = concat(this._header, o.body(payload, this._state));
      const id = reportId(epoch, Uint8Array.from(await this._random.bytes(ID_ENTROPY)));
      const before = [this.reports, new Set(this._memoKeys), [...this._queue], this.dropped];
      if (o.memoizes) this._memoKeys.add(key);
      this.reports += 1;
      this._queue.push({ id, epoch, report });
      const overflow = this._queue.splice(0, Math.max(0, this._queue.length - this.queueLimit));
      this.dropped += overflow.length;
      try {
        await this._save();
      } catch (err) {
        [this.reports, this._memoKeys, this._queue, this.dropped] = before;
        throw err;
      }
      for (const q of overflow) this._warn(`upload queue full (${this.queueLimit}): dropped report ${toHex(q.id)} of epoch ${q.epoch}`);
      return id;
    });
  }

  // -------------------------------------------------------------------- device identity
  /** The {device, credential} this device holds on `server` (its base URL), or null. */
  credential(server) {
    return this._credentials[server.replace(/\/+$/, "")] ?? null;
  }

  /** Keep the credential a server issued at enrollment (saved in the state). */
  setCredential(server, device, credential) {
    if (typeof credential !== "string" || !credential) throw new TypeError("DeviceClient: 'credential' must be a non-empty string");
    return this._serial(async () => {
      this._credentials[server.replace(/\/+$/, "")] = { device: Number(device), credential };
      await this._save();
    });
  }

  /** Forget the credential held on `server` (the next upload enrolls anew). */
  forgetCredential(server) {
    return this._serial(async () => {
      delete this._credentials[server.replace(/\/+$/, "")];
      await this._save();
    });
  }

  // -------------------------------------------------------------------- queue
  /** Reports not yet acknowledged, oldest first (a copy). */
  get queue() {
    return this._queue.map((q) => ({ ...q }));
  }

  /**
   * The oldest `limit` queued reports (those whose id, as hex, is in the Set `skip` left out,
   * still queued) and their binary batch (docs/wire-format.md §4).
   */
  batch(limit, skip = null) {
    const queue = skip && skip.size ? this._queue.filter((q) => !skip.has(toHex(q.id))) : this._queue;
    const items = queue.slice(0, limit);
    return { items, data: batch(items) };
  }

  /** Remove acknowledged reports from the queue and save. */
  acknowledge(ids) {
    return this._serial(async () => {
      const done = new Set(ids.map(toHex));
      this._queue = this._queue.filter((q) => !done.has(toHex(q.id)));
      await this._save();
    });
  }

  /** Remove reports the server refused for good (reported through `warn` with `reason`). */
  drop(ids, reason) {
    return this._serial(async () => {
      const done = new Set(ids.map(toHex));
      for (const q of this._queue) {
        if (done.has(toHex(q.id))) {
          this._warn(`dropped report ${toHex(q.id)} of epoch ${q.epoch}: ${reason}`);
          this.dropped += 1;
        }
      }
      this._queue = this._queue.filter((q) => !done.has(toHex(q.id)));
      await this._save();
    });
  }
}
