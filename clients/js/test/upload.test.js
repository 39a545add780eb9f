// The uploader against a scripted HTTP server on loopback (node:http): ids reused on retry,
// backoff with jitter, Retry-After, 413 halving, 401/403 stop, 4xx item drops, no answer.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import { DeviceClient, MemoryStore, Uploader, parseRetryAfter } from "../src/index.js";

const SPEC = { name: "L-GRR", params: { k: 10, eps_perm: 2, eps_1: 1 } };
const RECORD = 20 + 13; // id + epoch + (12-byte header + 1-byte body)

/** A server answering each POST with the next scripted [status, headers, body]. */
async function scripted(answers) {
  const seen = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ auth: req.headers.authorization, type: req.headers["content-type"], url: req.url, body });
      const [status, headers, text] = answers.shift() ?? [200, {}, '{"received":0}'];
      if (status === "hang") return; // never answers: the client's timeout fires
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(text);
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return { base: `http://127.0.0.1:${server.address().port}`, seen, close: () => server.closeAllConnections() || server.close() };
}

async function client(n) {
  const c = await DeviceClient.open({ store: new MemoryStore(), spec: SPEC, collection: "c 1", warn: () => {} });
  for (let i = 0; i < n; i++) await c.report(i % 10, i);
  return c;
}

const ids = (body) => Array.from({ length: body.length / RECORD }, (_, i) => body.subarray(i * RECORD, i * RECORD + 16).toString("hex"));

test("retries reuse the report ids, back off with jitter and honour Retry-After", async () => {
  const srv = await scripted([
    [503, { "Retry-After": "7" }, '{"error":"busy"}'],
    [500, {}, "oops"],
    [200, {}, '{"received":3}'],
  ]);
  const c = await client(3);
  const waits = [];
  const up = new Uploader({ baseUrl: srv.base, collection: "c 1", token: "tok", sleep: async (s) => waits.push(s), rand: () => 0.5, baseDelay: 2 });
  const r = await up.flush(c);
  srv.close();
  assert.equal(r.acknowledged, 3);
  assert.equal(r.remaining, 0);
  assert.equal(c.queue.length, 0);
  assert.deepEqual(waits, [7, 2]); // max(0.5·2, Retry-After 7), then 0.5·min(3600, 2·2¹)
  assert.equal(srv.seen.length, 3);
  for (const s of srv.seen) {
    assert.equal(s.auth, "Bearer tok");
    assert.equal(s.type, "application/octet-stream");
    assert.equal(s.url, "/v1/collections/c%201/reports");
    assert.deepEqual(ids(s.body), ids(srv.seen[0].body));
    assert.equal(s.body.length, 3 * RECORD);
  }
});

test("413 halves the batch; a 4xx naming an item drops it and resends the rest", async () => {
  const srv = await scripted([
    [413, {}, '{"error":"too large"}'],
    [422, {}, '{"error":"item 1: epoch not open","item":1}'],
    [200, {}, "{}"],
    [200, {}, "{}"],
  ]);
  const c = await client(4);
  const before = c.queue.map((q) => Buffer.from(q.id).toString("hex"));
  const warned = [];
  c._warn = (m) => warned.push(m);
  const r = await new Uploader({ baseUrl: srv.base, collection: "c 1", token: "t", batchSize: 4 }).flush(c);
  srv.close();
  // 4 → 413 → 2 (item 1 refused) → the rest, still 2 at a time
  assert.deepEqual(srv.seen.map((s) => s.body.length / RECORD), [4, 2, 2, 1]);
  assert.deepEqual(ids(srv.seen[2].body), [before[0], before[2]]);
  assert.deepEqual(ids(srv.seen[3].body), [before[3]]);
  assert.deepEqual([r.acknowledged, r.dropped, c.dropped], [3, 1, 1]);
  assert.match(warned[0], /epoch not open/);
});

test("401 and 403 keep every report and stop", async () => {
  for (const status of [401, 403]) {
    const srv = await scripted([[status, {}, '{"error":"bad token"}']]);
    const c = await client(2);
    const r = await new Uploader({ baseUrl: srv.base, collection: "c 1", token: "t" }).flush(c);
    srv.close();
    assert.equal(r.refused, status);
    assert.equal(c.queue.length, 2);
    assert.equal(srv.seen.length, 1);
  }
});

test("no answer: bounded attempts, the queue is kept for the next flush", async () => {
  const srv = await scripted(["hang", "hang"].map((h) => [h]));
  const c = await client(1);
  const waits = [];
  const up = new Uploader({ baseUrl: srv.base, collection: "c 1", token: "t", timeout: 0.2, maxAttempts: 2, sleep: async (s) => waits.push(s), rand: () => 1 - 2 ** -53 });
  const r = await up.flush(c);
  srv.close();
  assert.deepEqual([r.attempts, r.remaining, waits.length], [2, 1, 1]);
  assert.ok(waits[0] < 1 && waits[0] > 0.99);
  const closed = await new Uploader({ baseUrl: "http://127.0.0.1:9", collection: "c", token: "t", maxAttempts: 1 }).flush(c);
  assert.deepEqual([closed.attempts, closed.remaining], [1, 1]);
});

test("Retry-After: seconds or an HTTP date; the wait is capped by maxDelay", () => {
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  assert.equal(parseRetryAfter("120"), 120);
  assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:29:00 GMT", now), 60);
  assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), 0);
  assert.equal(parseRetryAfter("soon"), null);
  assert.equal(parseRetryAfter(null), null);
});

test("bad uploader options are refused", () => {
  assert.throws(() => new Uploader({ baseUrl: "ftp://x", collection: "c", token: "t" }), TypeError);
  assert.throws(() => new Uploader({ baseUrl: "http://x", collection: "c", token: "" }), TypeError);
  assert.throws(() => new Uploader({ baseUrl: "http://x", collection: "c", token: "t", batchSize: 0 }), RangeError);
});

test("device identities: enroll once (retrying a 503), keep the credential across a restart, upload with it", async () => {
  const srv = await scripted([
    [503, { "Retry-After": "1" }, '{"error":"busy"}'],
    [201, {}, '{"collection":"c 1","device":17,"credential":"ll_device_17.secret"}'],
    [200, {}, "{}"],
    [200, {}, "{}"],
  ]);
  const store = new MemoryStore();
  const c = await DeviceClient.open({ store, spec: SPEC, collection: "c 1", warn: () => {} });
  await c.report(1, 0);
  const up = new Uploader({ baseUrl: `${srv.base}/`, collection: "c 1", enrollToken: "enroll-tok", sleep: async () => {} });
  const r = await up.flush(c);
  assert.deepEqual([r.acknowledged, r.refused], [1, null]);
  assert.deepEqual(srv.seen.map((s) => [s.url, s.auth]), [
    ["/v1/collections/c%201/devices", "Bearer enroll-tok"],
    ["/v1/collections/c%201/devices", "Bearer enroll-tok"],
    ["/v1/collections/c%201/reports", "Bearer ll_device_17.secret"],
  ]);
  const again = await DeviceClient.open({ store, warn: () => {} });
  assert.deepEqual(again.credential(srv.base), { device: 17, credential: "ll_device_17.secret" });
  await again.report(2, 1);
  await up.flush(again);
  srv.close();
  assert.equal(srv.seen.length, 4); // no second enrollment
  assert.equal(srv.seen[3].auth, "Bearer ll_device_17.secret");
});

test("a refused enrollment keeps the queue and stops; exactly one kind of token is accepted", async () => {
  const srv = await scripted([[409, {}, '{"error":"collection takes a shared ingest token"}']]);
  const c = await client(2);
  const r = await new Uploader({ baseUrl: srv.base, collection: "c 1", enrollToken: "e" }).flush(c);
  srv.close();
  assert.deepEqual([r.refused, r.remaining, srv.seen.length], [409, 2, 1]);
  assert.equal(c.credential(srv.base), null);
  assert.throws(() => new Uploader({ baseUrl: "http://x", collection: "c", token: "t", enrollToken: "e" }), TypeError);
  assert.throws(() => new Uploader({ baseUrl: "http://x", collection: "c" }), TypeError);
});

test("epochAt numbers epochs by the collection's clock; fetchCollection gives the clock", async () => {
  const { epochAt, fetchCollection } = await import("../src/index.js");
  const info = { first_epoch: 5, epoch_seconds: 86400, start_time: 1767225600 };
  // first_epoch + floor((now − start_time)/epoch_seconds), now in seconds
  assert.equal(epochAt(info, 1767225600 * 1000), 5);
  assert.equal(epochAt(info, (1767225600 + 86399) * 1000), 5);
  assert.equal(epochAt(info, (1767225600 + 86400) * 1000), 6);
  assert.equal(epochAt(info, (1767225600 + 10 * 86400 + 1) * 1000), 15);
  assert.equal(epochAt(info, (1767225600 - 1) * 1000), 4);
  assert.throws(() => epochAt({ first_epoch: 0, epoch_seconds: null, start_time: null }), /no wall clock/);
  assert.throws(() => epochAt(info, NaN), /'nowMs' must be a finite number; got NaN/);
  const spec = { name: "L-GRR", params: { k: 4, eps_perm: 2, eps_1: 1 } };
  const answer = { name: "c", protocol: spec, ...info, current_epoch: 9, epoch_window: 8, reports_per_epoch: 1 };
  const got = await fetchCollection("https://x.example", "c", "t", async () => new Response(JSON.stringify(answer)));
  assert.deepEqual(got, answer);
});

test("425 keeps the report it names for a later flush and sends the others", async () => {
  const srv = await scripted([
    [425, { "Retry-After": "30" }, '{"error":"item 1: epoch 1 is not open yet","item":1}'],
    [200, {}, '{"received":2}'],
  ]);
  const c = await client(3);
  const queued = c.queue.map((q) => Buffer.from(q.id).toString("hex"));
  const up = new Uploader({ baseUrl: srv.base, collection: "c 1", token: "tok", sleep: async () => {}, rand: () => 0.5 });
  const r = await up.flush(c);
  srv.close();
  assert.deepEqual(ids(srv.seen[1].body), [queued[0], queued[2]]);
  assert.deepEqual(c.queue.map((q) => Buffer.from(q.id).toString("hex")), [queued[1]]);
  assert.equal(r.deferred, 1);
  assert.equal(r.dropped, 0);
  assert.equal(r.remaining, 1);
});
