// The device client: persisted memos, budget and queue; refusals that change nothing.
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FileStore } from "../node.js";
import { BudgetExceededError, DeviceClient, LocalStorageStore, MemoryStore, protocolFromSpec } from "../src/index.js";

const LOSUE = { name: "L-OSUE", params: { k: 12, eps_perm: 2, eps_1: 1 } };
const SECRET = Uint8Array.from({ length: 32 }, (_, i) => 100 + i);
const open = (store, extra = {}) => DeviceClient.open({ store, spec: LOSUE, collection: "demo", warn: () => {}, ...extra });
const hex = (b) => Buffer.from(b).toString("hex");

test("a restart keeps memos, budget and queue; the protocol comes back from the state", async () => {
  const store = new MemoryStore();
  const a = await open(store);
  const ids = [];
  for (const [e, v] of [1, 2, 1, 3, 1].entries()) ids.push(hex(await a.report(v, e)));
  const memos = await Promise.all(Array.from({ length: 12 }, (_, v) => a.memo(v)));
  // min(5·ε1, 3·ε∞) = min(5, 6), shown as privacy.spent_budget does: 12 digits, rounded up
  assert.deepEqual(a.spentBudget, { reports: 5, memos: 3, epsilon: 5 });
  const b = await DeviceClient.open({ store });
  assert.deepEqual(b.spentBudget, a.spentBudget);
  assert.deepEqual(b.queue.map((q) => hex(q.id)), ids);
  assert.deepEqual(b.queue.map((q) => q.epoch), [0, 1, 2, 3, 4]);
  for (let v = 0; v < 12; v++) assert.deepEqual(await b.memo(v), memos[v]);
  assert.equal(b.proto.name, "L-OSUE");
});

test("clearing the state but keeping the secret reproduces every memo (not the budget)", async () => {
  for (const spec of [LOSUE, { name: "OLOLOHA", params: { k: 50, eps_perm: 3, eps_1: 1 } }, { name: "dBitFlipPM", params: { k: 20, eps_perm: 2, b: 10, d: 3 } }]) {
    const store = new MemoryStore();
    const a = await open(store, { spec });
    await a.report(0, 0);
    const memos = await Promise.all(Array.from({ length: spec.params.k }, (_, v) => a.memo(v)));
    await store.clear();
    const b = await open(store, { spec });
    assert.equal(b.spentBudget.reports, 0);
    assert.deepEqual(b._state, a._state);
    for (let v = 0; v < spec.params.k; v++) assert.deepEqual(await b.memo(v), memos[v]);
    const other = await open(new MemoryStore(), { spec });
    const differ = await Promise.all(Array.from({ length: spec.params.k }, async (_, v) => String(await other.memo(v)) !== String(memos[v])));
    assert.ok(differ.some(Boolean), "another secret gives other memos");
  }
});

test("bad values and epochs throw one-line TypeError/RangeError; nothing is queued or saved", async () => {
  const store = new MemoryStore();
  const c = await open(store);
  await c.report(3, 0);
  const saved = store.state;
  const cases = [
    [12, RangeError, /'value' must be an integer in \[0, 12\); got 12/],
    [-1, RangeError, /'value' must be an integer in \[0, 12\)/],
    [1.5, TypeError, /'value' must be an integer/],
    ["3", TypeError, /'value' must be an integer in \[0, 12\); got "3"/],
    [null, TypeError, /'value' must be an integer/],
    [true, TypeError, /'value'/],
    [3n, TypeError, /'value' must be an integer in \[0, 12\); got 3n$/],
    [NaN, TypeError, /'value' must be an integer in \[0, 12\); got NaN$/],
    [Infinity, TypeError, /got Infinity$/],
    [undefined, TypeError, /got undefined$/],
  ];
  for (const [value, Err, msg] of cases) {
    await assert.rejects(c.report(value, 1), (err) => err instanceof Err && msg.test(err.message) && !err.message.includes("\n"));
  }
  for (const epoch of [-1, 2 ** 32, 0.5, "1"]) await assert.rejects(c.report(1, epoch), /'epoch'/);
  assert.equal(store.state, saved);
  assert.deepEqual([c.reports, c.queue.length], [1, 1]);
});

test("unknown or malformed protocol specs are refused with one line", async () => {
  const bad = [
    [{ name: "L-FOO", params: {} }, RangeError, /'name' must be one of GRR/],
    [{ name: "L-GRR", params: { k: 10, eps_perm: 2, eps_1: 1, zeta: 1 } }, RangeError, /unknown parameter\(s\) zeta/],
    [{ name: "L-GRR", params: { k: 10, eps_perm: 2 } }, RangeError, /missing parameter\(s\) eps_1/],
    [{ name: "L-GRR", params: { k: 10, eps_perm: 2, eps_1: 3 } }, RangeError, /'eps_1' must be a finite number in \(0, 2\)/],
    [{ name: "L-GRR", params: { k: 1.5, eps_perm: 2, eps_1: 1 } }, TypeError, /'k' must be an integer/],
    [{ name: "GRR", params: { k: 10, eps: 31 } }, RangeError, /'eps' must be a finite number > 0 and <= 30/],
    [{ name: "L-OUE", params: { k: 10, eps_perm: 1, eps_1: 0.99 } }, RangeError, /'eps_1' must be </],
    [{ name: "OLOLOHA", params: { k: 10, eps_perm: 2, eps_1: 1, calibration: "none" } }, RangeError, /'calibration' must be one of/],
    [{ name: "dBitFlipPM", params: { k: 10, eps_perm: 2, d: 11 } }, RangeError, /'d' must be an integer in \[1, 10\]/],
    [["L-GRR"], TypeError, /protocol spec: must be an object/],
    [{ name: "L-GRR", params: [] }, TypeError, /'params' must be an object/],
    [{ name: "L-GRR", params: {}, extra: 1 }, TypeError, /unknown key\(s\) extra/],
  ];
  for (const [spec, Err, msg] of bad) {
    await assert.rejects(protocolFromSpec(spec), (err) => err instanceof Err && msg.test(err.message) && !err.message.includes("\n"), JSON.stringify(spec));
    const store = new MemoryStore();
    await assert.rejects(DeviceClient.open({ store, spec, collection: "x" }), Err);
    assert.equal(store.state, null);
  }
});

test("corrupt, modified or foreign stored state is refused and never replaced", async () => {
  const store = new MemoryStore();
  const a = await open(store);
  await a.report(1, 0);
  const good = store.state;
  const full = JSON.parse(good);
  const variants = {
    notJson: good.slice(0, -3),
    fewerReports: JSON.stringify({ ...full, reports: 0 }),
    otherFormat: JSON.stringify({ ...full, format: "x" }),
    otherVersion: JSON.stringify({ ...full, version: 2 }),
    otherSecret: JSON.stringify({ ...full, secret_id: "0000000000000000" }),
    badSpec: JSON.stringify({ ...full, protocol: { name: "L-FOO", params: {} } }),
  };
  for (const [what, text] of Object.entries(variants)) {
    store.state = text;
    await assert.rejects(open(store), (err) => (err instanceof TypeError || err instanceof RangeError) && !err.message.includes("\n"), what);
    assert.equal(store.state, text, what);
  }
  store.state = good;
  await assert.rejects(open(store, { spec: { name: "L-OSUE", params: { k: 13, eps_perm: 2, eps_1: 1 } } }), /it belongs to \{"name":"L-OSUE"/);
  await assert.rejects(open(store, { collection: "other" }), /belongs to collection "demo"/);
  const other = new MemoryStore();
  other.state = good; // another device's state
  await assert.rejects(open(other), /another device secret/);
});

test("maxEpsilon: a report past it is refused, nothing spent, also after a restart", async () => {
  const store = new MemoryStore();
  const a = await open(store, { maxEpsilon: 4.5 });
  await a.report(0, 0); // t·ε1 = 1
  await a.report(1, 1); // 2
  await a.report(0, 2); // 3
  await a.report(0, 3); // min(4, 2·2) = 4
  await assert.rejects(a.report(2, 4), BudgetExceededError); // min(5, 3·2) = 5 > 4.5
  assert.equal(a.spentBudget.reports, 4);
  const b = await open(store, { maxEpsilon: 4.5 });
  await b.report(1, 4); // min(5, 2·2) = 4: free once the memo cap binds
  assert.equal(b.spentBudget.epsilon, 4);
  await assert.rejects(b.report(5, 5), (err) => err instanceof RangeError && /past maxEpsilon = 4.5/.test(err.message));
});

test("one-shot protocols spend ε per report and memoize nothing", async () => {
  const c = await open(new MemoryStore(), { spec: { name: "OUE", params: { k: 8, eps: 1 } } });
  for (let i = 0; i < 3; i++) await c.report(2, i);
  assert.deepEqual(c.spentBudget, { reports: 3, memos: 0, epsilon: 3 });
  await assert.rejects(c.memo(2), TypeError);
});

test("the queue is bounded: the oldest report is dropped and reported", async () => {
  const warned = [];
  const c = await open(new MemoryStore(), { queueLimit: 3, warn: (m) => warned.push(m) });
  for (let i = 0; i < 5; i++) await c.report(i, i);
  assert.deepEqual(c.queue.map((q) => q.epoch), [2, 3, 4]);
  assert.equal(c.dropped, 2);
  assert.match(warned[0], /upload queue full \(3\): dropped report [0-9a-f]{32} of epoch 0/);
});

test("a failed save leaves the old state and makes no report", async () => {
  const store = new MemoryStore();
  const c = await open(store);
  await c.report(1, 0);
  const saved = store.state;
  store.save = async () => {
    throw new Error("disk full");
  };
  await assert.rejects(c.report(2, 1), /disk full/);
  assert.deepEqual([c.reports, c.queue.length, c.spentBudget.memos], [1, 1, 1]);
  assert.equal(store.state, saved);
});

test("concurrent reports are made one at a time", async () => {
  const c = await open(new MemoryStore());
  await Promise.all(Array.from({ length: 20 }, (_, i) => c.report(i % 12, i)));
  assert.deepEqual([c.reports, c.queue.length, c.spentBudget.memos], [20, 20, 12]);
  assert.deepEqual(c.queue.map((q) => q.epoch), Array.from({ length: 20 }, (_, i) => i));
});

test("FileStore: Python's file layout, atomic and private; a corrupt secret is never replaced", async () => {
  const dir = await mkdtemp(join(tmpdir(), "longldp-js-"));
  const path = join(dir, "state.json");
  const a = await open(new FileStore(path));
  await a.report(4, 0);
  const secret = await readFile(`${path}.secret`);
  assert.equal(secret.length, 40);
  assert.equal(secret.subarray(0, 4).toString(), "LLS1");
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  assert.deepEqual((await readdir(dir)).sort(), ["state.json", "state.json.secret"]);
  const b = await open(new FileStore(path));
  assert.deepEqual(b.spentBudget, a.spentBudget);
  await writeFile(`${path}.secret`, Buffer.from("garbage"));
  await assert.rejects(open(new FileStore(path)), /corrupt or not a longldp secret file/);
  assert.equal((await readFile(`${path}.secret`)).toString(), "garbage");
});

test("LocalStorageStore keeps the secret and the state under its prefix", async () => {
  const items = new Map();
  const storage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, String(v)), removeItem: (k) => items.delete(k) };
  const a = await open(new LocalStorageStore("app", storage));
  await a.report(2, 0);
  assert.deepEqual([...items.keys()].sort(), ["app.secret", "app.state"]);
  const memo = await a.memo(2);
  await new LocalStorageStore("app", storage).clear();
  const b = await open(new LocalStorageStore("app", storage));
  assert.deepEqual(await b.memo(2), memo);
  assert.equal(b.spentBudget.reports, 0);
  items.set("app.secret", "zz");
  await assert.rejects(open(new LocalStorageStore("app", storage)), /not a 32-byte secret/);
});

test("a secret given by the app (bytes or a non-extractable CryptoKey) derives the same memos", async () => {
  const a = await open(new MemoryStore(), { secret: SECRET });
  const key = await crypto.subtle.importKey("raw", SECRET, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const b = await open(new MemoryStore(), { secret: key });
  assert.deepEqual(await a.memo(5), await b.memo(5));
  await assert.rejects(open(new MemoryStore(), { secret: new Uint8Array(8) }), TypeError);
});

test("messages show NaN, Infinity and BigInts as JS writes them (not null, not a bare 3)", async () => {
  const { show } = await import("../src/check.js");
  assert.deepEqual([NaN, -Infinity, -0, 3n, undefined, "3", [1n, NaN]].map(show), ["NaN", "-Infinity", "-0", "3n", "undefined", '"3"', '["1n","NaN"]']);
  const cyclic = {};
  cyclic.self = cyclic;
  assert.equal(show(cyclic), "[object Object]");
  await assert.rejects(protocolFromSpec({ name: "L-GRR", params: { k: 10, eps_perm: NaN, eps_1: 1 } }), /'eps_perm' must be a finite number; got NaN$/);
  await assert.rejects(protocolFromSpec({ name: "L-GRR", params: { k: 10n, eps_perm: 2, eps_1: 1 } }), /'k' must be an integer >= 2; got 10n$/);
  const rappor = await protocolFromSpec({ name: "RAPPOR", params: { k: 16, h: 2, m: 2, f: 0.5, p: 0.5, q: 0.75 } });
  assert.throws(() => rappor.check(5n), /'value' must be a string or bytes; got 5n$/);
  const boolean = await protocolFromSpec({ name: "RAPPOR-boolean", params: { f: 0.5, p: 0.5, q: 0.75 } });
  assert.throws(() => boolean.check(NaN), /'value' must be 0, 1, false or true; got NaN$/);
});
