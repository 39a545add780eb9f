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
      this._spending = [];
      this._history = proto.history ? proto.newHistory() : null;
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
    if (typed && Array.isArray(body.spending)) typed.spending = body.spending.map(([e, b]) => [e, new PyFloat(b)]);
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
    // A planned (w-event) or history-dependent protocol: what every report cost, by epoch
    // (docs/math.md §19.2, §19.6); a history-dependent one also its history.
    this._spending = (body.spending ?? []).map(([e, b]) => [e, b]);
    this._history = stored.history ? body.history : null;
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
    if (this._tracked) body.spending = this._spending.map(([e, b]) => [e, new PyFloat(b)]);
    if (this.proto.history) body.history = this._history;
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

  /** Reports t, distinct memos d and ε = min(t·ε1, d·ε∞) (one-shot protocols: t·ε); a planned
   * (w-event) protocol: the sum of its reports' budgets over the whole horizon. */
  /** Each report's cost is kept by epoch: a planned (w-event) or history-dependent protocol. */
  get _tracked() {
    return this.proto.planned || !!this.proto.history;
  }

  /** A history-dependent protocol's history (a copy; null for every other protocol). */
  get history() {
    return this._history && structuredClone(this._history);
  }

  get spentBudget() {
    if (this._tracked) {
      const total = this._spending.reduce((sum, [, b]) => sum + b, 0);
      return { reports: this._spending.length, memos: 0, epsilon: spentTotal(total) };
    }
    return this._budget(this.reports, this._memoKeys.size);
  }

  /** Most ε spent in a window of w consecutive epochs containing `epoch`, with `extra` more at
   * `epoch` (a planned w-event protocol; docs/math.md §19.2). */
  windowSpent(epoch, extra = 0) {
    const w = this.proto.window;
    let worst = 0;
    for (let start = epoch - w + 1; start <= epoch; start++) {
      let inside = 0;
      for (const [e, b] of this._spending) if (start <= e && e < start + w) inside += b;
      worst = Math.max(worst, inside + extra);
    }
    return worst;
  }

  /** The spent budget if `value` were reported next. */
  budgetAfter(value) {
    const key = this.memoId(value);
    return this._budget(this.reports + 1, this._memoKeys.size + (this._memoKeys.has(key) ? 0 : 1));
  }

  /**
   * Randomize `value` for `epoch`, queue the report and save the state (before it can be
   * uploaded); resolves to the report's 16-byte id. Bad input throws and changes nothing.
   * A planned protocol (the LDP-IDS methods) takes the server's `plan` of the epoch
   * (`{eps: b}`): the report is drawn at budget b and refused with a BudgetExceededError when
   * any window of w epochs containing `epoch` would spend more than `eps_window`.
   */
  report(value, epoch, plan) {
    return this._serial(async () => {
      int("DeviceClient", "epoch", epoch, 0, MAX_EPOCH);
      const o = this.proto;
      const key = this.memoId(value); // checks the value before anything else
      if (o.history) return this._reportHistory(value, epoch, plan);
      if (o.planned) return this._reportPlanned(value, epoch, plan);
      if (plan !== undefined && plan !== null && Object.keys(plan).length) {
        throw new RangeError(`${o.name}: the plan's keys must be nothing (it is not planned); got ${JSON.stringify(Object.keys(plan))}`);
      }
      const after = this.budgetAfter(value);
      if (this.maxEpsilon !== undefined && after.epsilon > this.maxEpsilon * (1 + 1e-12)) {
        throw new BudgetExceededError(
          `${o.name}: reporting would spend ε = ${after.epsilon.toPrecision(6)} in total, past maxEpsilon = ${this.maxEpsilon} (spent so far ${this.spentBudget.epsilon.toPrecision(6)}); the report was not made`,
        );
      }
      const payload = o.memoizes
        ? await o.round2(await this._round1(key), this._random)
        : await o.round1(this._input(key), this._state, this._random);
      return this._enqueue(epoch, concat(this._header, o.body(payload, this._state)), () => {
        if (o.memoizes) this._memoKeys.add(key);
      });
    });
  }

  async _reportPlanned(value, epoch, plan) {
    const o = this.proto;
    if (plan === undefined || plan === null) {
      throw new TypeError(`${o.name}: its rounds are planned by the server; pass the epoch's plan (keys ${o.planKeys.join(", ")})`);
    }
    const b = o.planBudget(plan);
    const worst = this.windowSpent(epoch, b);
    if (worst > o.epsWindow * (1 + 1e-12)) {
      throw new BudgetExceededError(
        `${o.name}: reporting at ε = ${b} in epoch ${epoch} would spend ${worst.toPrecision(6)} in a window of ${o.window} epochs, past eps_window = ${o.epsWindow}; the report was not made`,
      );
    }
    const lifetime = this.spentBudget.epsilon + b;
    if (this.maxEpsilon !== undefined && lifetime > this.maxEpsilon * (1 + 1e-12)) {
      throw new BudgetExceededError(
        `${o.name}: reporting would spend ε = ${lifetime.toPrecision(6)} in total, past maxEpsilon = ${this.maxEpsilon}; the report was not made`,
      );
    }
    // The epoch's oracle draws the report (round 2's source), the collection's header sends it.
    const payload = await o.drawPlanned(value, b, this._random);
    return this._enqueue(epoch, concat(this._header, o.body(payload, this._state)), () => this._spending.push([epoch, b]));
  }

  /** A history-dependent protocol (THRESH, CHANGES-TREE, DDRM): the report its history and
   * `value` give at `epoch`; null at an epoch where it sends nothing (the history moves on). */
  async _reportHistory(value, epoch, plan) {
    const o = this.proto;
    if (o.planned && (plan === undefined || plan === null)) {
      throw new TypeError(`${o.name}: its rounds are planned by the server; pass the epoch's plan (keys ${o.planKeys.join(", ")})`);
    }
    const step = o.historyStep(value, this._state, this._history, epoch, plan);
    const lifetime = this.spentBudget.epsilon + step.cost;
    if (this.maxEpsilon !== undefined && lifetime > this.maxEpsilon * (1 + 1e-12)) {
      throw new BudgetExceededError(
        `${o.name}: reporting would spend ε = ${lifetime.toPrecision(6)} in total, past maxEpsilon = ${this.maxEpsilon}; the report was not made`,
      );
    }
    if (step.input < 0) {
      const before = this._history;
      this._history = step.history;
      try {
        await this._save();
      } catch (err) {
        this._history = before;
        throw err;
      }
      return null;
    }
    const body = await o.drawStep(step.input, this._state, this._random);
    return this._enqueue(epoch, concat(this._header, body), () => {
      this._spending.push([epoch, step.cost]);
      this._history = step.history;
    });
  }

  /** Queue `report`, record what it spends with `spend()` and save, all or nothing: the state
   * is saved before the report can be uploaded; a failed save leaves no report, budget unchanged. */
  async _enqueue(epoch, report, spend) {
    const id = reportId(epoch, Uint8Array.from(await this._random.bytes(ID_ENTROPY)));
    const before = [this.reports, new Set(this._memoKeys), [...this._spending], [...this._queue], this.dropped, this._history];
    spend();
    this.reports += 1;
    this._queue.push({ id, epoch, report });
    const overflow = this._queue.splice(0, Math.max(0, this._queue.length - this.queueLimit));
    this.dropped += overflow.length;
    try {
      await this._save();
    } catch (err) {
      [this.reports, this._memoKeys, this._spending, this._queue, this.dropped, this._history] = before;
      throw err;
    }
    for (const q of overflow) this._warn(`upload queue full (${this.queueLimit}): dropped report ${toHex(q.id)} of epoch ${q.epoch}`);
    return id;
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
