// Reports per second of the JS client in Node (driven by benchmarks/bench_js_client.py).
// argv: JSON {spec, reports, values, dir}; prints JSON {memory, file} in reports/s.
import { DeviceClient, MemoryStore } from "../clients/js/src/index.js";
import { FileStore } from "../clients/js/node.js";

const { spec, reports, values, dir } = JSON.parse(process.argv[2]);

async function rate(store) {
  const c = await DeviceClient.open({ store, spec, collection: "bench" });
  for (let v = 0; v < values; v++) await c.memo(v); // memos derived before timing, as in steady use
  const t0 = performance.now();
  for (let i = 0; i < reports; i++) {
    await c.report(i % values, i);
    if (c.queue.length >= 100) await c.acknowledge(c.queue.map((q) => q.id));
  }
  return reports / ((performance.now() - t0) / 1000);
}

async function firstReports(store) {
  // every report holds a new value: round 1 is derived each time (HMAC stream, WebCrypto)
  const c = await DeviceClient.open({ store, spec, collection: "bench-first" });
  const n = Math.min(50, spec.params.k);
  const t0 = performance.now();
  for (let v = 0; v < n; v++) await c.report(v, v);
  return n / ((performance.now() - t0) / 1000);
}

// Best of three runs each (the machine is shared); one unmeasured run first warms the JIT.
const best = async (fn) => Math.max(await fn(), await fn(), await fn());
await rate(new MemoryStore());
let n = 0;
const out = {
  memory: await best(() => rate(new MemoryStore())),
  file: await best(() => rate(new FileStore(`${dir}/js-state-${n++}.json`))),
  first_memory: await best(() => firstReports(new MemoryStore())),
};
console.log(JSON.stringify(out));
