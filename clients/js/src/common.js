// What the protocol families share (loaded with the first of them): the two draws from a byte
// stream (docs/client-spec.md §2.2), bit packing, and formulas of src/longldp/privacy.py in the
// same float64 operation order (§3).


export const { exp, expm1, log, tanh, sqrt, min, max, abs } = Math;

/** The probability a draw u < p realizes with 53-bit uniforms: ⌈p·2⁵³⌉/2⁵³ (privacy.drawn). */
export const drawn = (p) => Math.ceil(p * 2 ** 53) / 2 ** 53;

export const grrProbabilities = (eps, k) => {
  const p = drawn(1 / (1 + (k - 1) * exp(-eps)));
  return [p, (1 - p) / (k - 1)];
};

/** The chain's (P1, P0) (privacy.chain_support). */
export const chainSupport = (p1, q1, p2, q2) => [p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2];

/** The chain's (N1, N0) = P(report bit 0 | …) (privacy.chain_nonsupport). */
export const chainNonsupport = (p1, q1, p2, q2) => [p1 * (1 - p2) + (1 - p1) * (1 - q2), q1 * (1 - p2) + (1 - q1) * (1 - q2)];

export const vstar = (P1, P0) => (P0 * (1 - P0)) / (P1 - P0) ** 2;

/** L-GRR's p2 ("exact" or "paper" calibration), as the sampler draws it. */
export function lgrrP2(k, a, b, calibration) {
  if (calibration === "paper") {
    const num = expm1(a + b);
    return drawn(num / ((k - 1) * exp(b) * expm1(a - b) + num));
  }
  return drawn((exp(b) * expm1(a) + (k - 1) * expm1(b)) / ((exp(b) + k - 1) * expm1(a)));
}

/** Smallest integer argmin of a unimodal f in [lo, hi] by descent from round-half-even(start). */
export function integerArgmin(f, start, lo = 2, hi = 2 ** 32) {
  const r = Math.round(start);
  let g = min(max(abs(start % 1) === 0.5 ? 2 * Math.round(start / 2) : r, lo), hi);
  let fg = f(g);
  for (let i = 0; i < 1e5; i++) {
    let next;
    if (g > lo && (next = f(g - 1)) <= fg) fg = next, g--;
    else if (g < hi && (next = f(g + 1)) < fg) fg = next, g++;
    else return g;
  }
  throw new RangeError(`integer argmin: no minimum near ${start}`);
}

/** GRR over m symbols: draw s in [1, m), then u; keep x if u < keep, else (x + s) mod m. */
export async function grrRound(x, m, keep, src) {
  const [s] = await integers(src, 1, m, 1);
  return (await floats(src, 1))[0] < keep ? x : (x + s) % m;
}

/** UE round 2: k floats; a symmetric chain flips with q2, another sets with p2 / q2. */
export async function ueRound2(memo, p2, q2, src) {
  const u = await floats(src, memo.length);
  const symmetric = p2 === 1 - q2;
  return memo.map((m, i) => (symmetric ? m ^ (u[i] < q2) : u[i] < (m ? p2 : q2) ? 1 : 0));
}

// ------------------------------------------------------------------------------ draws
const TWO_M53 = 2 ** -53;
const TWO64 = 1n << 64n;

/** n floats uniform on [0, 1): 8-byte little-endian word w → (w >> 11)·2⁻⁵³. */
export async function floats(source, n) {
  const raw = await source.bytes(8 * n);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const lo = view.getUint32(8 * i, true);
    const hi = view.getUint32(8 * i + 4, true);
    out[i] = (hi * 2097152 + (lo >>> 11)) * TWO_M53;
  }
  return out;
}

/**
 * n integers uniform on [low, high) as BigInt: low + w mod span for each word w below the
 * largest multiple of span under 2⁶⁴ (rejected words are skipped, in stream order).
 */
export async function bigIntegers(source, low, high, n) {
  const lo = BigInt(low);
  const span = BigInt(high) - lo;
  if (span <= 0n) throw new RangeError(`integers: 'high' must be > 'low'; got ${low}, ${high}`);
  const limit = TWO64 - (TWO64 % span);
  const out = [];
  while (out.length < n) {
    const raw = await source.bytes(8 * (n - out.length));
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < raw.length; i += 8) {
      const w = view.getBigUint64(i, true);
      if (w < limit) out.push(lo + (w % span));
    }
  }
  return out;
}

/** As {@link bigIntegers}, as Numbers (high ≤ 2⁵³). */
export async function integers(source, low, high, n) {
  return (await bigIntegers(source, low, high, n)).map(Number);
}

/** Bits (0/1 values) packed most significant first, ⌈n/8⌉ bytes. */
export function packBits(bits) {
  const out = new Uint8Array((bits.length + 7) >> 3);
  bits.forEach((b, i) => b && (out[i >> 3] |= 0x80 >> (i & 7)));
  return out;
}

/** Bit i of packed bytes (most significant first). */
export const bitAt = (packed, i) => (packed[i >> 3] >> (7 - (i & 7))) & 1;
