// The public hash pool of the local-hashing protocols (hash_pool = m): NumPy's
// default_rng(SeedSequence([pool_seed, 0x10CA1])).integers(0, 2**63, m) (and a sketch's row
// seeds, SeedSequence([salt, 0x5CE7C4]), src/sketch.js), i.e. SeedSequence's
// entropy mixing then PCG64 (XSL-RR 128/64), whose bounded draw on [0, 2⁶³) is the output
// shifted right by one (docs/client-spec.md, appendix A). Loaded only by protocols with a pool.

const M32 = 0xffffffff;
const mul32 = (a, b) => Math.imul(a, b) >>> 0;

function words32(n) {
  let v = BigInt(n);
  if (v === 0n) return [0];
  const out = [];
  for (; v > 0n; v >>= 32n) out.push(Number(v & 0xffffffffn));
  return out;
}

/** SeedSequence(entropy).generate_state(8 words) as four uint64 (BigInt). */
function seedState(entropy) {
  const ent = entropy.flatMap(words32);
  const pool = [0, 0, 0, 0];
  let hc = 0x43b0d7e5;
  const hashmix = (v) => {
    v = (v ^ hc) >>> 0;
    hc = mul32(hc, 0x931e8875);
    v = mul32(v, hc);
    return (v ^ (v >>> 16)) >>> 0;
  };
  const mix = (x, y) => {
    const r = (mul32(0xca01f9dd, x) - mul32(0x4973f715, y)) >>> 0;
    return (r ^ (r >>> 16)) >>> 0;
  };
  for (let i = 0; i < 4; i++) pool[i] = hashmix(i < ent.length ? ent[i] : 0);
  for (let s = 0; s < 4; s++) for (let d = 0; d < 4; d++) if (s !== d) pool[d] = mix(pool[d], hashmix(pool[s]));
  for (let s = 4; s < ent.length; s++) for (let d = 0; d < 4; d++) pool[d] = mix(pool[d], hashmix(ent[s]));
  let hb = 0x8b51f9dd;
  const out32 = [];
  for (let i = 0; i < 8; i++) {
    let v = (pool[i % 4] ^ hb) >>> 0;
    hb = mul32(hb, 0x58f38ded);
    v = mul32(v, hb);
    out32.push((v ^ (v >>> 16)) >>> 0);
  }
  return [0, 1, 2, 3].map((i) => BigInt(out32[2 * i]) | (BigInt(out32[2 * i + 1]) << 32n));
}

const M64 = (1n << 64n) - 1n;
const M128 = (1n << 128n) - 1n;
const MULT = (2549297995355413924n << 64n) | 4865540595714422341n;

/** The pool's m hash seeds for ``pool_seed`` (BigInt, each in [0, 2⁶³)). */
export function poolSeeds(poolSeed, m) {
  return seeds63([poolSeed, 0x10ca1], m);
}

/**
 * default_rng(SeedSequence(entropy)).integers(0, 2**63, m) as BigInt (the public seeds of the
 * hash pool and of a sketch's rows, docs/client-spec.md appendix A).
 */
export function seeds63(entropy, m) {
  const [s0, s1, i0, i1] = seedState(entropy);
  const inc = ((((i0 << 64n) | i1) << 1n) | 1n) & M128;
  let state = 0n;
  const step = () => (state = (state * MULT + inc) & M128);
  step();
  state = (state + ((s0 << 64n) | s1)) & M128;
  step();
  const next = () => {
    step();
    const x = ((state >> 64n) ^ state) & M64;
    const r = state >> 122n;
    return ((x >> r) | (x << ((64n - r) & 63n))) & M64;
  };
  // Lemire's bounded integer on [0, 2⁶³): (x·2⁶³) >> 64 = x >> 1; its rejection threshold
  // (2⁶⁴ − 2⁶³) mod 2⁶³ is 0, so no draw is ever rejected.
  return Array.from({ length: m }, () => next() >> 1n);
}
