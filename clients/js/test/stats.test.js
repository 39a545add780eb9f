// Cheap statistical checks: over many device secrets the derived round 1 has the protocol's
// distribution, and round 2 from the CSPRNG has its rates. Every bound is 5 standard errors of
// a binomial count, so a correct client fails with probability below 1e-5 per check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DeviceClient, MemoryStore } from "../src/index.js";

const secret = (i) => Uint8Array.from({ length: 32 }, (_, j) => (j < 4 ? (i >> (8 * j)) & 255 : j));
const devices = async (spec, n) =>
  Promise.all(Array.from({ length: n }, (_, i) => DeviceClient.open({ store: new MemoryStore(), spec, collection: "stats", secret: secret(i) })));

function within(count, n, p, what) {
  const sd = Math.sqrt(n * p * (1 - p));
  assert.ok(Math.abs(count - n * p) <= 5 * sd, `${what}: ${count} of ${n}, expected ${(n * p).toFixed(1)} ± ${(5 * sd).toFixed(1)}`);
}

test("L-GRR: memos keep the value with p1, move uniformly otherwise, independently per value", async () => {
  const n = 2000;
  const cs = await devices({ name: "L-GRR", params: { k: 4, eps_perm: 1.5, eps_1: 0.7 } }, n);
  const { p1, q1 } = cs[0].proto;
  const m0 = await Promise.all(cs.map((c) => c.memo(0)));
  const m1 = await Promise.all(cs.map((c) => c.memo(1)));
  for (let y = 0; y < 4; y++) within(m0.filter((m) => m === y).length, n, y === 0 ? p1 : q1, `memo(0) = ${y}`);
  // independence: Pr[memo(0) = 0 and memo(1) = 1] = p1²
  within(m0.filter((m, i) => m === 0 && m1[i] === 1).length, n, p1 * p1, "joint");
});

test("L-OSUE: every memo bit has its rate (p1 at the value, q1 elsewhere)", async () => {
  const n = 2000, k = 6;
  const cs = await devices({ name: "L-OSUE", params: { k, eps_perm: 2, eps_1: 1 } }, n);
  const { p1, q1 } = cs[0].proto;
  const memos = await Promise.all(cs.map((c) => c.memo(2)));
  for (let i = 0; i < k; i++) within(memos.filter((m) => m[i]).length, n, i === 2 ? p1 : q1, `bit ${i}`);
});

test("OLOLOHA: the memo is the value's bucket with p1; hash buckets are uniform", async () => {
  const n = 2000;
  const cs = await devices({ name: "OLOLOHA", params: { k: 100, eps_perm: 3, eps_1: 1 } }, n);
  const { p1, g } = cs[0].proto;
  const faithful = await Promise.all(cs.map(async (c) => (await c.memo(7)) === Number(c.memoId(7))));
  within(faithful.filter(Boolean).length, n, p1, "faithful bucket");
  within(cs.filter((c) => c.memoId(7) === "0").length, n, 1 / g, "bucket 0 of value 7");
});

test("dBitFlipPM: sampled buckets uniform, answer bits kept with p", async () => {
  const n = 2000, b = 8, d = 3;
  const cs = await devices({ name: "dBitFlipPM", params: { k: 16, eps_perm: 2, b, d } }, n);
  const p = cs[0].proto.p1;
  for (let j = 0; j < b; j++) within(cs.filter((c) => c._state.sampled.includes(j)).length, n, d / b, `bucket ${j} sampled`);
  const kept = await Promise.all(cs.map(async (c) => {
    const bits = await c.memo(0); // value 0 is in bucket 0
    return c._state.sampled.map((j, i) => (bits[i] === 1) === (j === 0)).filter(Boolean).length;
  }));
  within(kept.reduce((a, x) => a + x, 0), n * d, p, "bits kept");
});

test("round 2 from the CSPRNG: L-GRR keeps the memo with p2; L-OSUE flips bits with q2", async () => {
  const [grr] = await devices({ name: "L-GRR", params: { k: 5, eps_perm: 2, eps_1: 1 } }, 1);
  const memo = await grr.memo(3);
  const n = 4000;
  const ys = [];
  for (let i = 0; i < n; i++) ys.push(await grr.proto.round2(memo, grr._random));
  within(ys.filter((y) => y === memo).length, n, grr.proto.p2, "L-GRR round 2 keeps");
  const [ue] = await devices({ name: "L-OSUE", params: { k: 4, eps_perm: 2, eps_1: 1 } }, 1);
  const bits = await ue.memo(1);
  let flips = 0;
  for (let i = 0; i < n; i++) {
    const out = await ue.proto.round2(bits, ue._random);
    flips += out.filter((x, j) => x !== bits[j]).length;
  }
  within(flips, 4 * n, ue.proto.q2, "L-OSUE round 2 flips");
});

test("RAPPOR: cohorts uniform; the PRR keeps a set Bloom bit with 1 − f/2 and sets an unset one with f/2", async () => {
  const n = 2000, m = 4, k = 16;
  const cs = await devices({ name: "RAPPOR", params: { k, h: 2, m, f: 0.5, p: 0.25, q: 0.75 } }, n);
  const { p1, q1 } = cs[0].proto;
  for (let j = 0; j < m; j++) within(cs.filter((c) => c._state.cohort === j).length, n, 1 / m, `cohort ${j}`);
  let set = 0, setOnes = 0, unsetOnes = 0;
  for (const c of cs) {
    const key = c.memoId("apple"); // the Bloom filter of "apple" in the device's cohort (hex)
    const enc = Array.from({ length: k }, (_, i) => (parseInt(key.slice(2 * (i >> 3), 2 * (i >> 3) + 2), 16) >> (7 - (i & 7))) & 1);
    const prr = await c.memo("apple");
    enc.forEach((e, i) => {
      set += e;
      if (e) setOnes += prr[i];
      else unsetOnes += prr[i];
    });
  }
  within(setOnes, set, p1, "PRR of set bits");
  within(unsetOnes, n * k - set, q1, "PRR of unset bits");
});

test("SS: the subset holds ω values, the own value with P1 and every other with P0", async () => {
  const n = 4000, k = 8;
  const [c] = await devices({ name: "SS", params: { k, eps: 1 } }, 1);
  const { p1, q1, omega } = c.proto;
  const counts = new Array(k).fill(0);
  for (let i = 0; i < n; i++) {
    const bits = await c.proto.round1(3, c._state, c._random);
    assert.equal(bits.reduce((a, x) => a + x, 0), omega);
    bits.forEach((x, v) => (counts[v] += x));
  }
  for (let v = 0; v < k; v++) within(counts[v], n, v === 3 ? p1 : q1, `value ${v} in the subset`);
});
