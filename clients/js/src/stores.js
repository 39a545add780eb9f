// Stores: where a client keeps its device secret and its state (docs/client-spec.md §6).
// A store has three methods: secret() (load, or create once, the device secret), load()
// (the state text or null), save(text) (replace it atomically); clear() forgets the state and
// keeps the secret. Each save replaces the whole state in one atomic step, so a crash leaves
// the old or the new state, never a mixture.

const newSecret = () => globalThis.crypto.getRandomValues(new Uint8Array(32));

/** In memory (tests, or an app that persists elsewhere). */
export class MemoryStore {
  constructor() {
    this.state = null;
    this.key = null;
  }
  async secret() {
    return (this.key ??= newSecret());
  }
  async load() {
    return this.state;
  }
  async save(text) {
    this.state = text;
  }
  async clear() {
    this.state = null;
  }
}

/** window.localStorage (or any Storage): one setItem per save, which is atomic. */
export class LocalStorageStore {
  constructor(prefix = "longldp", storage = globalThis.localStorage) {
    if (!storage) throw new TypeError("LocalStorageStore: no localStorage here");
    this.storage = storage;
    this.prefix = prefix;
  }
  async secret() {
    const name = `${this.prefix}.secret`;
    const hex = this.storage.getItem(name);
    if (hex !== null) {
      if (!/^[0-9a-f]{64}$/.test(hex)) throw new TypeError(`LocalStorageStore: ${name} is not a 32-byte secret; refusing to replace it`);
      return Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
    }
    const key = newSecret();
    this.storage.setItem(name, Array.from(key, (b) => b.toString(16).padStart(2, "0")).join(""));
    return key;
  }
  async load() {
    return this.storage.getItem(`${this.prefix}.state`);
  }
  async save(text) {
    this.storage.setItem(`${this.prefix}.state`, text);
  }
  async clear() {
    this.storage.removeItem(`${this.prefix}.state`);
  }
}

/**
 * IndexedDB: the state is one value written in one transaction (atomic); the secret is a
 * non-extractable WebCrypto HMAC key, so page scripts can use it but never read it out.
 */
export class IndexedDBStore {
  /** `name`: the database; `prefix`: this client's keys in it (several clients may share one). */
  constructor(name = "longldp", prefix = "", indexedDB = globalThis.indexedDB) {
    if (!indexedDB) throw new TypeError("IndexedDBStore: no indexedDB here");
    this.idb = indexedDB;
    this.name = name;
    this.k = (key) => (prefix ? `${prefix}.${key}` : key);
  }
  _db() {
    return (this._open ??= new Promise((ok, ko) => {
      const req = this.idb.open(this.name, 1);
      req.onupgradeneeded = () => req.result.createObjectStore("kv");
      req.onsuccess = () => ok(req.result);
      req.onerror = () => ko(req.error);
    }));
  }
  async _tx(mode, fn) {
    const db = await this._db();
    return new Promise((ok, ko) => {
      const tx = db.transaction("kv", mode);
      const req = fn(tx.objectStore("kv"));
      tx.oncomplete = () => ok(req?.result);
      tx.onerror = tx.onabort = () => ko(tx.error);
    });
  }
  async secret() {
    const have = await this._tx("readonly", (s) => s.get(this.k("secret")));
    if (have !== undefined) return have;
    const key = await crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256", length: 256 }, false, ["sign"]);
    // add() fails if another tab created it meanwhile: then use theirs.
    try {
      await this._tx("readwrite", (s) => s.add(key, this.k("secret")));
      return key;
    } catch {
      return this._tx("readonly", (s) => s.get(this.k("secret")));
    }
  }
  async load() {
    return (await this._tx("readonly", (s) => s.get(this.k("state")))) ?? null;
  }
  async save(text) {
    await this._tx("readwrite", (s) => s.put(text, this.k("state")));
  }
  async clear() {
    await this._tx("readwrite", (s) => s.delete(this.k("state")));
  }
}
