// Simulated devices in one page (tests/test_js_client.py drives it in headless chromium): each
// device has its own IndexedDB-backed state and non-extractable secret, reports through
// DeviceClient and uploads through Uploader to the page's origin (which proxies /v1/ to a real
// `longldp serve`); `replay` runs the device test vectors in the browser.
import { DeviceClient, HmacStream, IndexedDBStore, MemoryStore, Uploader, fetchSpec } from "../../src/index.js";
import { hmacKey } from "../../src/random.js";

const stores = new Map();
const store = (i) => {
  if (!stores.has(i)) stores.set(i, new IndexedDBStore("longldp-e2e", `device-${i}`));
  return stores.get(i);
};

/** Run fn(i) for i < n, `width` at a time. */
async function pool(n, width, fn) {
  const out = new Array(n);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) {
      const i = next++;
      out[i] = await fn(i);
    }
  }));
  return out;
}

const show = (m) => (typeof m === "number" ? String(m) : Array.from(m).join(""));

/** Every device i reports values[i][e] at epoch e (in order), then flushes its queue. */
export async function report({ spec, collection, token, values, width = 8 }) {
  const results = await pool(values.length, width, async (i) => {
    const c = await DeviceClient.open({ store: store(i), spec, collection });
    for (const [e, v] of values[i].entries()) await c.report(v, e);
    const up = new Uploader({ baseUrl: location.origin, collection, token, maxAttempts: 20, baseDelay: 0.05, maxDelay: 2 });
    return up.flush(c);
  });
  const sum = (key) => results.reduce((s, r) => s + r[key], 0);
  return { acknowledged: sum("acknowledged"), remaining: sum("remaining"), dropped: sum("dropped"), attempts: sum("attempts") };
}

/** Each device's memo of every value and its spent budget, from the stored state. */
export async function snapshot({ n, k, spec, collection, width = 8 }) {
  return pool(n, width, async (i) => {
    const c = await DeviceClient.open({ store: store(i), spec, collection });
    const memos = [];
    for (let v = 0; v < k; v++) memos.push(show(await c.memo(v)));
    return { memos, budget: c.spentBudget, queue: c.queue.length };
  });
}

/** Forget every device's state (memo keys, budget, queue), keeping its secret. */
export async function clearStates({ n }) {
  await pool(n, 8, (i) => store(i).clear());
  return n;
}

/** A bad value is refused with a RangeError/TypeError and changes nothing. */
export async function refusals({ k }) {
  const c = await DeviceClient.open({ store: store(0) });
  const before = await store(0).load();
  const out = [];
  for (const v of [k, -1, 0.5, "1"]) {
    try {
      await c.report(v, 0);
      out.push("accepted");
    } catch (err) {
      out.push(`${err.name}: ${err.message}`);
    }
  }
  return { errors: out, unchanged: before === (await store(0).load()) };
}

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));

/**
 * Replay test-vector cases (clients/js/test/vectors.json) in the page: each case's device with
 * its secret and fixed CSPRNG stream, every step (with its plan), in memory. Returns per case
 * the upload record of each step (or "refused: <error name>") and the final state file, for the
 * Python side to compare byte for byte.
 */
export async function replay({ cases }) {
  const out = [];
  for (const v of cases) {
    const store = new MemoryStore();
    const random = new HmacStream(await hmacKey(unhex(v.csprng_key)), new TextEncoder().encode(v.csprng_context));
    const c = await DeviceClient.open({ store, spec: v.spec, collection: v.collection, secret: unhex(v.secret), maxEpsilon: v.max_epsilon ?? undefined, random });
    const records = [];
    for (const step of v.steps) {
      try {
        if ((await c.report(step.value, step.epoch, step.plan)) === null) {
          records.push(null); // a history-dependent device sends nothing at this epoch
          continue;
        }
        const q = c.queue.at(-1);
        const e = q.epoch;
        records.push(hex(q.id) + hex([e >>> 24, (e >> 16) & 255, (e >> 8) & 255, e & 255]) + hex(q.report));
      } catch (err) {
        records.push(`refused: ${err.name}`);
      }
    }
    out.push({ name: v.name, records, state_file: store.state });
  }
  return out;
}

/**
 * A page on another origin than the server (tests/test_js_client.py, CORS): fetch the spec and
 * upload `values` (one device, epoch e = index) straight to `baseUrl`. Resolves to the
 * uploader's result, or to the error a blocked request gives ({error: "TypeError: …"}).
 */
export async function crossOrigin({ baseUrl, collection, token, values }) {
  try {
    const spec = await fetchSpec(baseUrl, collection, token);
    const c = await DeviceClient.open({ store: new MemoryStore(), spec, collection });
    for (const [e, v] of values.entries()) await c.report(v, e);
    const up = new Uploader({ baseUrl, collection, token, maxAttempts: 2, baseDelay: 0.01, maxDelay: 0.05 });
    return await up.flush(c);
  } catch (err) {
    return { error: `${err.name}: ${err.message}` };
  }
}
