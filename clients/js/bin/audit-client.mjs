#!/usr/bin/env node
// The JS device client as a black box for `longldp audit --exec` (docs/audit.md, "Clients in
// any language"): stdin has one line "<client> <value>" per report to make; stdout gets one
// line per input line, in order: the wire report in hex. Each client id is one device with its
// own fresh secret (from the CSPRNG) and in-memory state, kept for the life of the process, so
// a lifetime batch reuses its memos exactly as a deployed device would.
//
// Usage: node bin/audit-client.mjs '<protocol spec JSON>'
//   e.g. longldp audit --exec "node clients/js/bin/audit-client.mjs '{\"name\":\"L-GRR\",\"params\":{\"k\":8,\"eps_perm\":2,\"eps_1\":1}}'" --k 8 --claim 1.0
// A Bloom-filter RAPPOR spec reports the string "value-<value>" for each integer value.
import { createInterface } from "node:readline";
import { DeviceClient, MemoryStore } from "../src/index.js";

const spec = JSON.parse(process.argv[2] ?? "null");
const devices = new Map();
const epochs = new Map();

async function reportHex(client, value) {
  let c = devices.get(client);
  if (c === undefined) {
    c = DeviceClient.open({ store: new MemoryStore(), spec, collection: "audit" });
    devices.set(client, c);
  }
  const dev = await c;
  const epoch = epochs.get(client) ?? 0;
  epochs.set(client, epoch + 1);
  const input = dev.proto.encoder === "bloom" ? `value-${value}` : value;
  await dev.report(input, epoch);
  const q = dev.queue.at(-1);
  await dev.acknowledge([q.id]); // nothing is uploaded: keep the in-memory state small
  return Buffer.from(q.report).toString("hex");
}

const lines = [];
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim()) lines.push(line.trim().split(/\s+/).map(Number));
}
// Lines of distinct clients run concurrently (WebCrypto is asynchronous); one client's lines
// keep their order. Output order is input order.
const out = new Array(lines.length);
const chains = new Map();
const CHUNK = 512;
for (let start = 0; start < lines.length; start += CHUNK) {
  const batch = [];
  for (let i = start; i < Math.min(lines.length, start + CHUNK); i++) {
    const [client, value] = lines[i];
    const run = (chains.get(client) ?? Promise.resolve()).then(async () => {
      out[i] = await reportHex(client, value);
    });
    chains.set(client, run);
    batch.push(run);
  }
  await Promise.all(batch);
  chains.clear();
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
