// Local hashing: BLH, OLH, BiLOLOHA, OLOLOHA (report kind "hashed") and the Hadamard
// protocols SH, L-SH ("hadamard"); docs/client-spec.md §3.2, §4.2, docs/wire-format.md §3.

import { concat, minBytes, uintBE } from "./bytes.js";
import { chain, choice, fail, int } from "./check.js";
import { bigIntegers, chainNonsupport, chainSupport, exp, expm1, grrProbabilities, grrRound, integerArgmin, integers, lgrrP2, log, max, sqrt, vstar } from "./common.js";

const M64 = (1n << 64n) - 1n;

/** H_s(v) over g buckets (docs/wire-format.md §3). */
export function mixHash(seed, v, g) {
  let z = ((BigInt(v) + 1n) * 0x9e3779b97f4a7c15n + BigInt(seed)) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return Number(((z >> 32n) * BigInt(g)) >> 32n);
}

const hashing = {
  key(v, st) {
    return mixHash(st.seed, v, this.g);
  },
  round1(key, st, src) {
    return grrRound(key, this.g, this.p1, src);
  },
  round2(y, src) {
    return grrRound(y, this.g, this.p2, src);
  },
  body(y, st) {
    const pool = this.params.hash_pool;
    return concat(uintBE(st.hash_id, pool === null ? 8 : minBytes(pool - 1)), uintBE(y, minBytes(this.g - 1)));
  },
  async state(src) {
    const pool = this.params.hash_pool;
    const [id] = await bigIntegers(src, 0, pool === null ? 1n << 63n : pool, 1);
    if (pool === null) return { hash_id: id, seed: id };
    const { poolSeeds } = await import("./pool.js");
    return { hash_id: id, seed: (await poolSeeds(this.params.pool_seed, pool))[Number(id)] };
  },
  epsilons() {
    const [N1] = chainNonsupport(this.p1, this.q1, this.p2, this.q2);
    return [log((this.P1 * (this.g - 1)) / N1), log(this.p1 / this.q1)];
  },
};

const hadamard = {
  ...hashing,
  async state(src) {
    return { hash_id: (await integers(src, 0, this.m, 1))[0] };
  },
  key(v, st) {
    let x = BigInt(st.hash_id) & BigInt(v), c = 0;
    for (; x; x >>= 1n) c ^= Number(x & 1n);
    return c;
  },
  body(y, st) {
    return concat(uintBE(st.hash_id, minBytes(this.m - 1)), uintBE(y, 1));
  },
};

export const methods = (name) => (name.endsWith("SH") ? hadamard : hashing);

/** OLOLOHA's g: the descent on the chain's V(g) from e^b + 1 ("exact") or the paper's start. */
function ololohaG(a, b, calibration) {
  const variance = (g) => {
    const p1 = grrProbabilities(a, g)[0];
    const p2 = lgrrP2(g, a, b, calibration);
    return vstar(chainSupport(p1, (1 - p1) / (g - 1), p2, (1 - p2) / (g - 1))[0], 1 / g);
  };
  let start = exp(b) + 1;
  if (calibration === "paper") {
    const A_ = exp(a), B_ = exp(b);
    const A = A_ ** 4 - 14 * A_ ** 2 + 12 * A_ * B_ * (1 - A_ * B_) + 12 * A_ ** 3 * B_ + 1;
    start = 1 + (2 * A_ * expm1(a + b)) / (sqrt(max(A, 0)) + expm1(2 * a));
  }
  return integerArgmin(variance, start);
}

export function derive(name, P) {
  if (name === "L-SH" && P.hash_pool !== null) throw fail(name, "hash_pool", "null (the Hadamard rows are the family)", P.hash_pool);
  const out = {};
  if (name.endsWith("SH")) {
    int(name, "k", P.k, 2, 2 ** 26);
    out.m = 2 ** (32 - Math.clz32(P.k - 1));
    out.P0 = 0.5;
  }
  let g = 2, p2 = 1, a = P.eps;
  if (name === "OLH") g = integerArgmin((g) => vstar(grrProbabilities(a, g)[0], 1 / g), exp(a) + 1);
  if (P.eps_perm !== undefined) {
    chain(name, P);
    const c = (P.calibration = choice(name, "calibration", P.calibration, ["exact", "paper"]));
    a = P.eps_perm;
    if (name === "OLOLOHA") g = ololohaG(a, P.eps_1, c);
    p2 = lgrrP2(g, a, P.eps_1, c);
  }
  const p1 = grrProbabilities(a, g)[0];
  out.P0 ??= 1 / g;
  return [p1, (1 - p1) / (g - 1), p2, p2 < 1 ? (1 - p2) / (g - 1) : 0, { g, ...out }];
}
