// The shared test vectors (docs/client-spec.md §9, written by scripts/client_vectors.py from
// the Python client): the JS client must reproduce every byte: header, parameters, per-device
// state, memo keys, memos, upload records (round 2 and ids from the fixed stream), budgets,
// refusals, and the state file itself.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { BudgetExceededError, DeviceClient, HmacStream, MemoryStore, PROTOCOL_NAMES } from "../src/index.js";
import { hmacKey } from "../src/random.js";
import { packBits } from "../src/common.js";

const vectors = JSON.parse(readFileSync(new URL("./vectors.json", import.meta.url), "utf8"));
const hex = (b) => Buffer.from(b).toString("hex");
const fromHex = (s) => new Uint8Array(Buffer.from(s, "hex"));
const memoText = (m) => (typeof m === "number" ? m : hex(packBits(m)));

test("every protocol of the Python registry has a vector case and a JS client", () => {
  assert.equal(vectors.format, "longldp.client-vectors/1");
  // vectors.protocols is the Python registry's list (longldp.protocols.NAMES), written with the cases
  assert.ok(vectors.protocols.length >= 22);
  const names = new Set(vectors.cases.map((c) => c.spec.name));
  for (const name of vectors.protocols) {
    assert.ok(names.has(name), `no vector case for ${name}`);
    assert.ok(PROTOCOL_NAMES.includes(name), `the JS client does not know ${name}`);
  }
});

for (const v of vectors.cases) {
  test(`vector ${v.name}: byte-identical with the Python client`, async () => {
    const store = new MemoryStore();
    const random = new HmacStream(await hmacKey(fromHex(v.csprng_key)), new TextEncoder().encode(v.csprng_context));
    const c = await DeviceClient.open({ store, spec: v.spec, collection: v.collection, secret: fromHex(v.secret), maxEpsilon: v.max_epsilon ?? undefined, random });
    assert.equal(hex(c._header), v.header);
    // the derived probabilities and integers (the class's client_spec: p1, q1, p2, q2, g, K, omega, a numeric
    // mechanism's constants) bit for bit
    for (const [key, value] of Object.entries(v.params)) if (!key.startsWith("eps")) assert.equal(c.proto[key], value, key);
    // ε1 and ε∞ go through exp/log, whose last bits differ between libms (V8's and glibc's):
    // equal within 1e-15 relative; the spent totals below, rounded to 12 digits, are exact.
    for (const [js, py] of [[c.proto.eps1, v.params.eps_1], [c.proto.epsInf, v.params.eps_perm]]) {
      assert.ok(Math.abs(js - py) <= 1e-15 * py, `ε ${js} vs ${py}`);
    }
    const state = Object.fromEntries(Object.entries(c._state).filter(([k]) => k !== "seed").map(([k, x]) => [k, [x].flat().map(String)]));
    if (c.proto.name === "dBitFlipPM" && c.proto.d === c.proto.b) delete state.sampled; // Python keeps none
    assert.deepEqual(state, v.state);
    for (const step of v.steps) {
      if (step.refused) {
        await assert.rejects(c.report(step.value, step.epoch, step.plan), BudgetExceededError);
        continue;
      }
      const id = await c.report(step.value, step.epoch, step.plan);
      if (step.record === null) {
        // a history-dependent device sends nothing at this epoch; its history moved on
        assert.equal(id, null);
        assert.equal(c.memoId(step.value), step.memo_key);
        assert.deepEqual(c.spentBudget, step.budget);
        continue;
      }
      const q = c.queue.at(-1);
      assert.deepEqual(q.id, id);
      assert.equal(hex(Buffer.concat([q.id, Buffer.from([q.epoch >>> 24, (q.epoch >> 16) & 255, (q.epoch >> 8) & 255, q.epoch & 255]), q.report])), step.record, `record of epoch ${step.epoch}`);
      assert.equal(c.memoId(step.value), step.memo_key);
      if (step.memo !== null) assert.equal(memoText(await c.memo(step.value)), step.memo);
      assert.deepEqual(c.spentBudget, step.budget);
    }
    assert.equal(store.state, v.state_file, "the state file, byte for byte");
    // The Python client's state file opens in the JS client (tag checked) and carries on.
    const other = new MemoryStore();
    other.state = v.state_file;
    const again = await DeviceClient.open({ store: other, secret: fromHex(v.secret) });
    assert.deepEqual(again.spentBudget, c.spentBudget);
    assert.deepEqual(again.queue.map((x) => hex(x.report)), c.queue.map((x) => hex(x.report)));
  });
}
