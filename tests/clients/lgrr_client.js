#!/usr/bin/env node
// A device client written outside longldp, audited through `longldp audit --exec`
// (docs/audit.md §9): L-GRR over k symbols (round 1 keeps the value with probability p1 and
// is memoized per client and value; round 2 keeps the memo with probability p2; p2 = 1 is
// plain GRR). It reads "<client> <value>" lines on stdin and writes one wire-format report
// per line in hexadecimal: the 12-byte header given by --header, then the symbol in
// ceil(bits(k - 1) / 8) bytes, big-endian (docs/wire-format.md §3).
//
//   node lgrr_client.js --k 4 --p1 0.6 --p2 0.9 --header 4c4c01...
//   --leak V : a bug to be caught: the true value V is sent unrandomized half of the time.
"use strict";
const crypto = require("crypto");

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const k = parseInt(option("--k", process.env.LONGLDP_AUDIT_K || "0"), 10);
const p1 = parseFloat(option("--p1", "NaN"));
const p2 = parseFloat(option("--p2", "1"));
const header = option("--header", "");
const leak = option("--leak", null);
if (!(k >= 2) || !(p1 > 0 && p1 <= 1) || !(p2 > 0 && p2 <= 1) || !/^([0-9a-f]{2})*$/.test(header)) {
  process.stderr.write("usage: lgrr_client.js --k K --p1 P1 [--p2 P2] [--header HEX] [--leak V]\n");
  process.exit(2);
}
const width = Math.max(1, Math.ceil((k - 1).toString(2).length / 8));

// OS randomness, drawn in blocks: uniform doubles in [0, 1) from 32-bit words.
const pool = new Uint32Array(1 << 16);
let used = pool.length;
function uniform() {
  if (used === pool.length) {
    crypto.randomFillSync(pool);
    used = 0;
  }
  return pool[used++] / 4294967296;
}
// Keep x with probability keep, else a uniform other symbol.
function grr(x, keep) {
  if (uniform() < keep) return x;
  const shift = 1 + Math.floor(uniform() * (k - 1));
  return (x + shift) % k;
}

const memos = new Map();
function report(client, value) {
  if (leak !== null && value === parseInt(leak, 10) && uniform() < 0.5) return value;
  const key = client + ":" + value;
  let memo = memos.get(key);
  if (memo === undefined) {
    memo = grr(value, p1);
    memos.set(key, memo);
  }
  return p2 < 1 ? grr(memo, p2) : memo;
}

function hex(symbol) {
  return symbol.toString(16).padStart(2 * width, "0");
}

let rest = "";
const out = [];
function handle(line) {
  if (line === "") return;
  const [c, v] = line.split(" ");
  const value = parseInt(v, 10);
  if (!(value >= 0 && value < k)) {
    process.stderr.write("bad input line: " + line + "\n");
    process.exit(3);
  }
  // GRR (p2 = 1) keeps no memo: a fresh draw per line, whatever the client id.
  const symbol = p2 < 1 ? report(c, value) : (leak !== null && value === parseInt(leak, 10) && uniform() < 0.5 ? value : grr(value, p1));
  out.push(header + hex(symbol));
}
process.stdin.on("data", (chunk) => {
  const lines = (rest + chunk.toString()).split("\n");
  rest = lines.pop();
  for (const line of lines) handle(line);
});
process.stdin.on("end", () => {
  handle(rest);
  process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
});
