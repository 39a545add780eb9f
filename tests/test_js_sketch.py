"""The JavaScript sketch family (clients/js/src/sketch.js, built by protocolFromSpec from the
generated registry) against the Python classes: the same parameters bit for bit, the same item
keys, the same report bytes from the same HMAC byte stream for text and integer items (the
shared vectors check whole device clients); JS refuses the items Python refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

import longldp as ll
from longldp.protocols import HmacRandom
from test_js_client import run_node

pytestmark = pytest.mark.node

SPECS = [
    ll.protocol("CMS", m=16, d=4, eps=2.0, salt=3).spec(),
    ll.protocol("HCMS", m=16, d=4, eps=1.5, salt=3).spec(),
    ll.protocol("PCS", m=12, d=3, eps=2.5, salt=5).spec(),
    ll.protocol("THE", m=16, d=4, eps=3.0).spec(),
    ll.protocol("L-CMS", m=16, d=4, eps_perm=3.0, eps_1=1.0, salt=7).spec(),
    ll.protocol("L-HCMS", m=32, d=5, eps_perm=2.0, eps_1=0.5).spec(),
    ll.protocol("CMS", m=64, d=8, eps=1.0, bits=48).spec(),
]
ITEMS = ["", "a", "héllo", "日本語テキスト", "x" * 20, "tab\there"]
SECRET = bytes(range(1, 33))

SCRIPT = """
import { protocolFromSpec } from "./src/index.js";
import { textKey } from "./src/sketch.js";
import { hmacKey, HmacStream } from "./src/random.js";
import { toHex } from "./src/bytes.js";
const [specs, items, ints, secret] = JSON.parse(process.argv[1]);
const key = await hmacKey(Uint8Array.from(secret));
const out = [];
for (const spec of specs) {
  const o = await protocolFromSpec(spec);
  const values = o.params.bits === null ? items : ints.map(BigInt);
  const bodies = [];
  for (const [i, v] of values.entries()) {
    const src = new HmacStream(key, new TextEncoder().encode(`report ${i}`));
    const st = await o.state(src);
    const k = o.key(o.check(v), st);
    const payload = o.memoizes ? await o.round2(await o.round1(k, st, src), src)
                               : await o.round1(k, st, src);
    bodies.push(toHex(o.body(payload, st)));
  }
  out.push({ p: [o.p1, o.q1, o.p2, o.q2], eps: [o.eps1, o.epsInf], bodies,
             cols: values.map((v) => Array.from({ length: o.d }, (_, j) =>
               Number(BigInt.asUintN(64, BigInt(0)) + BigInt(0)) + 0)) });
}
console.log(JSON.stringify({ out, keys: items.map((s) => textKey(s).toString()) }));
"""


def test_js_sketches_match_python_bit_for_bit():
    ints = [0, 5, 2**47 + 3, 2**48 - 1]
    got = json.loads(run_node(SCRIPT, json.dumps([SPECS, ITEMS, ints, list(SECRET)])))
    py = ll.protocol("CMS", m=16, d=4, eps=2.0)
    assert [int(k) for k in got["keys"]] == [int(k) for k in py.item_keys(ITEMS)]
    for spec, js in zip(SPECS, got["out"], strict=True):
        proto = ll.protocol_from_spec(spec)
        where = json.dumps(spec)
        want = [proto.p1, proto.q1, proto.p2, proto.q2]
        assert js["p"] == want, where
        for a, b in zip(
            js["eps"], (proto.single_report_epsilon(), proto.first_round_epsilon()), strict=True
        ):
            assert abs(a - b) <= 1e-14 * b, (where, a, b)
        values = ITEMS if proto.bits is None else [np.uint64(v) for v in ints]
        for i, (value, body) in enumerate(zip(values, js["bodies"], strict=True)):
            client = proto.client(HmacRandom(SECRET, f"report {i}".encode()))
            value = value if proto.bits is None else int(value)
            record = client.report(value)
            want_body = proto.encode_bodies(np.asarray([record], dtype=proto.report_dtype))
            assert bytes(want_body[0]).hex() == body, (where, value)


REFUSE = """
import { protocolFromSpec } from "./src/index.js";
const o = await protocolFromSpec({ name: "CMS", params: { m: 8, eps: 1, max_length: 4 } });
const i = await protocolFromSpec({ name: "HCMS", params: { m: 8, eps: 1, bits: 16 } });
const out = [];
for (const [p, v] of [[o, "abcde"], [o, new Uint8Array([0xff])], [o, "a\\u0000"], [o, 3],
                      [i, 65536], [i, -1], [i, "x"]]) {
  try { p.check(v); out.push("accepted"); } catch (e) { out.push(e.message); }
}
try { await protocolFromSpec({ name: "HCMS", params: { m: 12, eps: 1 } }); }
catch (e) { out.push(e.message); }
try {
  await protocolFromSpec({ name: "PEM", params: { eps: 2, bits: 4, start: 0, step: 2, keep: 17 } });
} catch (e) { out.push(e.message); }
console.log(JSON.stringify(out));
"""


def test_js_refuses_what_python_refuses_in_one_line():
    got = json.loads(run_node(REFUSE))
    assert "at most 4 characters" in got[0]
    assert "not UTF-8" in got[1]
    assert "NUL" in got[2]
    assert "must be a str" in got[3]
    assert all("'value' must be an int in [0, 2^16)" in g for g in got[4:7])
    assert "'m' must be a power of two" in got[7]
    assert "'keep' must be <= the domain size 2^4; got 17" in got[8]  # as Python's PEM says
    assert all("\n" not in g for g in got)
