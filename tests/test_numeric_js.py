"""The JavaScript numeric family module (clients/js/src/numeric.js) draws the Python kernels'
reports from the same byte stream (docs/math.md §20): one float per ``rng.random(1)``, in the
same order and with the same float64 expressions; and the JS device client's numeric reports,
decoded and aggregated by Python, give unbiased means (the registered protocols' rows, header,
constants and test vectors: tests/test_js_client.py, tests/test_client_vectors.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from longldp.privacy import numeric as nm
from longldp.protocols._rng import HmacRandom
from longldp.protocols.numeric import chains, oneshot

pytestmark = pytest.mark.node

JS = Path(__file__).resolve().parents[1] / "clients" / "js"
KEY = bytes(range(32))
#: PM outputs at ε = 2 (C ≈ 2.164) to put on the grid in both languages.
GRID_Y = [-2.1, -1.0000001, 0.0, 0.333, 1.5, 2.16]

SCRIPT = """
import { HmacStream, hmacKey } from "./src/random.js";
import * as N from "./src/numeric.js";
const cases = JSON.parse(process.argv[1]);
const key = await hmacKey(Uint8Array.from(cases.key));
const out = [];
for (const c of cases.items) {
  const src = new HmacStream(key, new TextEncoder().encode(c.ctx));
  let y;
  if (c.kind === "laplace") y = await N.laplace(c.x, c.eps, src);
  else if (c.kind === "duchi") y = await N.duchiBit(c.x, c.eps, src);
  else if (c.kind === "pm") y = await N.pm(c.x, c.eps, src);
  else if (c.kind === "hm") y = await N.hm(c.x, c.eps, src);
  else if (c.kind === "sw") y = await N.sw(c.x, c.eps, src);
  else if (c.kind === "memo") y = await N.memo(c.mech, c.x, c.eps, src);
  else if (c.kind === "round2") y = await N.round2Bit(c.x, c.eps, src);
  out.push(y);
}
out.push(N.hmEpsStar(), N.maxEps1("PM", 3.0), N.swBucket(0.37, 1.0, 64));
const pm = N.pmParams(2.0);
const codes = cases.grid.map((y) => N.gridCode(y, -pm.C, pm.C));
out.push(codes, codes.map((c) => N.gridValue(c, -pm.C, pm.C)));
console.log(JSON.stringify(out));
"""


def python_draw(item: dict) -> float:
    rng = HmacRandom(KEY, item["ctx"].encode())
    x, eps = np.array([item["x"]]), item["eps"]
    kind = item["kind"]
    if kind == "laplace":
        return float(oneshot.laplace_sample(x, eps, rng)[0])
    if kind == "duchi":
        return float(oneshot.duchi_sample(x, eps, rng)[0])
    if kind == "pm":
        return float(oneshot.pm_sample(x, eps, rng)[0])
    if kind == "hm":
        return float(oneshot.hm_sample(x, eps, rng)[0])
    if kind == "sw":
        return float(oneshot.sw_sample(x, eps, rng)[0])
    if kind == "memo":
        return float(chains.round1(item["mech"], x, eps, rng)[0])
    bit = rng.random(1) < nm.round2_probability(eps, x)
    return float(bit[0])


def test_js_numeric_draws_equal_python():
    node = shutil.which("node")
    assert node is not None  # the node marker: a missing node skips (or fails under CI)
    items = []
    for i, (kind, x, eps) in enumerate(
        [("laplace", -0.3, 1.0), ("laplace", 0.9, 4.0), ("duchi", 0.2, 1.0), ("duchi", -1.0, 3.0),
         ("pm", 0.5, 1.0), ("pm", -1.0, 8.0), ("hm", 0.1, 0.4), ("hm", 0.7, 2.0), ("hm", -0.2, 6.0),
         ("sw", 0.0, 1.0), ("sw", 0.61, 3.0), ("round2", 1.7, 0.8), ("round2", -2.1, 1.2)]
    ):  # fmt: skip
        items += [{"kind": kind, "x": x, "eps": eps, "ctx": f"case-{i}-{j}"} for j in range(6)]
    for j, mech in enumerate(("Duchi", "PM", "HM")):
        items += [{"kind": "memo", "mech": mech, "x": u, "eps": 3.0, "ctx": f"memo-{j}-{u}"}
                  for u in (-1.0, -0.5, 0.25, 1.0)]  # fmt: skip
    out = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT,
         json.dumps({"key": list(KEY), "items": items, "grid": GRID_Y})],
        cwd=JS, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = [python_draw(it) for it in items]
    np.testing.assert_allclose(got[: len(items)], want, rtol=1e-13, atol=1e-13)
    eps_star, max_pm, bucket, codes, values = got[len(items) :]
    import longldp as ll

    pm = ll.protocol("PM", eps=2.0, lo=0.0, hi=1.0)
    want_values = pm.quantize(np.array(GRID_Y))
    assert values == want_values.tolist()  # the same midpoints, bit for bit
    assert codes == pm._codes(want_values).tolist()
    assert eps_star == pytest.approx(nm.hm_eps_star(), rel=1e-14)
    assert max_pm == pytest.approx(nm.max_eps_1("PM", 3.0), rel=1e-14)
    from longldp.protocols.numeric import sw

    assert bucket == int(sw.bucket_index(np.array([0.37]), 1.0, 64)[0])


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "PM", "params": {"lo": 0.0, "hi": 10.0, "eps": 2.0}},
        {"name": "L-HM", "params": {"lo": 0.0, "hi": 10.0, "eps_perm": 3.0, "eps_1": 1.0}},
    ],
    ids=lambda s: s["name"],
)
def test_js_numeric_reports_give_unbiased_means_in_python(spec):
    """1,000 JS devices (each its own secret, so its own offset and memo) report once; the
    Python aggregator decodes every report and its mean is within 5 standard errors of the
    values' mean (the exact variance of one report per device, math (20.3), (20.20))."""
    import longldp as ll
    from test_js_client import MAKE_REPORTS

    node = shutil.which("node")
    assert node is not None
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(23)
    n = 1000
    values = np.concatenate([[0.0, 10.0], rng.uniform(0.0, 10.0, n - 2) ** 2 / 10.0])
    out = subprocess.run(
        [node, "--input-type=module", "-e", MAKE_REPORTS, json.dumps([spec, values.tolist()])],
        cwd=JS, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    agg = proto.aggregator()
    agg.add_bytes(bytes.fromhex(out.stdout.strip()))  # every header and body checked
    assert agg.n == n
    se = np.sqrt(proto.variance(n, values))
    assert abs(float(agg.estimate()[0]) - values.mean()) < 5 * se
