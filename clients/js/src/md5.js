// MD5 (RFC 1321), for RAPPOR's Bloom hashing only (WebCrypto has no MD5; it is not used for
// security here: google/rappor's "rappor-md5-1byte" hash picks Bloom bit positions).

const S = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
const K = Array.from({ length: 64 }, (_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32) >>> 0);

/** MD5 digest (16 bytes) of a Uint8Array. */
export function md5(msg) {
  const n = msg.length;
  const words = new Uint32Array((((n + 8) >> 6) + 1) * 16);
  for (let i = 0; i < n; i++) words[i >> 2] |= msg[i] << ((i & 3) * 8);
  words[n >> 2] |= 0x80 << ((n & 3) * 8);
  words[words.length - 2] = (n * 8) >>> 0;
  words[words.length - 1] = Math.floor(n / 2 ** 29);
  let a0 = 0x67452301, b0 = 0xefcdab89, c0 = 0x98badcfe, d0 = 0x10325476;
  for (let off = 0; off < words.length; off += 16) {
    let a = a0, b = b0, c = c0, d = d0;
    for (let i = 0; i < 64; i++) {
      const r = i >> 4;
      let f, g;
      if (r === 0) (f = (b & c) | (~b & d)), (g = i);
      else if (r === 1) (f = (d & b) | (~d & c)), (g = (5 * i + 1) & 15);
      else if (r === 2) (f = b ^ c ^ d), (g = (3 * i + 5) & 15);
      else (f = c ^ (b | ~d)), (g = (7 * i) & 15);
      const t = (a + f + K[i] + words[off + g]) | 0;
      const s = S[(r << 2) | (i & 3)];
      a = d;
      d = c;
      c = b;
      b = (b + ((t << s) | (t >>> (32 - s)))) | 0;
    }
    a0 = (a0 + a) | 0;
    b0 = (b0 + b) | 0;
    c0 = (c0 + c) | 0;
    d0 = (d0 + d) | 0;
  }
  const out = new Uint8Array(16);
  [a0, b0, c0, d0].forEach((w, j) => {
    for (let i = 0; i < 4; i++) out[4 * j + i] = (w >>> (8 * i)) & 255;
  });
  return out;
}
