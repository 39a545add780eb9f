"""The JavaScript device client (clients/js, docs/client-spec.md) against the Python side.

- its reports, aggregated by the Python aggregator, give unbiased estimates;
- end to end in headless chromium: 1,000 simulated devices in one page report over 3 epochs to
  a real ``longldp serve``; the server's estimates are within 5 standard errors of the truth;
  a page reload keeps every device's memos and budget, and clearing the stored states while
  keeping the secrets reproduces every memo.

node and chromium are real parts: under CI=true their absence fails these tests.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

import longldp as ll
from chromium_cdp import Chromium
from real_parts import CHROMIUM
from server_helpers import ADMIN, ROOT, LiveServer, bearer

JS = ROOT / "clients" / "js"
NODE = shutil.which("node")
#: Every test here runs node (tests/conftest.py: missing, it skips locally and fails under CI).
pytestmark = pytest.mark.node


def run_node(script: str, *args: str, timeout: float = 300) -> str:
    """Run an ES module script (text) with node from the repository's JS package folder."""
    out = subprocess.run(
        [NODE, "--input-type=module", "-e", script, *args],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


# ------------------------------------------------------------------------------ parameters

DERIVE = """
import { protocolFromSpec } from "./src/index.js";
import { header } from "./src/wire.js";
const out = [];
for (const [spec, names] of JSON.parse(process.argv[1])) {
  const o = await protocolFromSpec(spec);
  const h = Buffer.from(await header(o)).toString("hex");
  out.push({ header: h, values: names.map((n) => o[n]), eps_1: o.eps1, eps_perm: o.epsInf });
}
console.log(JSON.stringify(out));
"""


def test_js_derives_every_registered_protocol_as_python():
    """Every registered class at its test parameters (k = 6 and 1,000 where it takes k): the
    JS client accepts the spec and derives the same header (so the same canonical spec and
    fingerprint) and the probabilities its ``client_spec`` declares (the chain's p1, q1, p2,
    q2, or a numeric mechanism's constants) bit for bit; ε1 and ε∞ within 1e-15 relative (exp
    and log differ in the last bits between V8 and the C library). A protocol added to the
    registry fails here until the JS client knows it; a class that declares no device client
    outside Python (``client_spec`` None: SHE, whose float reports the server refuses) is not in
    the JS table, by its trait."""
    from registry_cases import build, triples

    protos = [
        build(cls, params, k)
        for cls, params, _ in triples(lambda c: c.client_spec is not None)
        for k in (6, 1000)
    ]
    asked = [[p.spec(), list(p.client_spec.probabilities)] for p in protos]
    got = json.loads(run_node(DERIVE, json.dumps(asked)))
    for proto, js in zip(protos, got, strict=True):
        where = json.dumps(proto.spec())
        assert js["header"] == proto.wire_header.hex(), where
        names = proto.client_spec.probabilities
        assert js["values"] == [getattr(proto, n) for n in names], (where, names)
        for name, py in (
            ("eps_1", proto.single_report_epsilon()),
            ("eps_perm", proto.first_round_epsilon()),
        ):
            assert abs(js[name] - py) <= 1e-15 * py, (where, name, js[name], py)


# ------------------------------------------------------------------------------ unbiasedness

UNBIASED = {
    "L-OSUE": {"name": "L-OSUE", "params": {"k": 6, "eps_perm": 2.0, "eps_1": 1.0}},
    "OLOLOHA": {"name": "OLOLOHA", "params": {"k": 6, "eps_perm": 3.0, "eps_1": 1.5}},
    "dBitFlipPM": {"name": "dBitFlipPM", "params": {"k": 6, "eps_perm": 2.0, "d": 2}},
    "L-GRR": {"name": "L-GRR", "params": {"k": 6, "eps_perm": 2.0, "eps_1": 1.0}},
}

MAKE_REPORTS = """
import { DeviceClient, MemoryStore } from "./src/index.js";
const [spec, values] = JSON.parse(process.argv[1]);
const out = [];
for (const v of values) {
  const c = await DeviceClient.open({ store: new MemoryStore(), spec, collection: "unbiased" });
  await c.report(v, 0);
  out.push(Buffer.from(c.queue[0].report).toString("hex"));
}
console.log(out.join(""));
"""


@pytest.mark.parametrize("case", sorted(UNBIASED))
def test_js_reports_give_unbiased_estimates_in_python(case):
    spec = UNBIASED[case]
    proto = ll.protocol_from_spec(spec)
    rng = np.random.default_rng(19)
    n = 3000
    values = rng.choice(proto.k, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    blob = bytes.fromhex(run_node(MAKE_REPORTS, json.dumps([spec, values.tolist()])).strip())
    agg = proto.aggregator()
    agg.add_bytes(blob)  # every header and body checked by the Python decoder
    assert agg.n == n
    truth = proto.true_frequencies(values)
    se = np.sqrt(proto.variance(n, truth))  # over round 1, round 2 and the hash draws
    z = (agg.estimate() - truth) / se
    assert np.all(np.abs(z) < 5), z


# ------------------------------------------------------------------------------ end to end


class _SiteHandler(http.server.BaseHTTPRequestHandler):
    """Serves clients/js read-only and forwards /v1/ to the collection server (same origin
    for the page, as a site that fronts its collector would)."""

    upstream: str = ""

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _forward(self) -> None:
        up = urlsplit(self.upstream)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    def do_POST(self) -> None:
        self._forward()

    def do_GET(self) -> None:
        if self.path.startswith("/v1/"):
            return self._forward()
        path = (JS / self.path.lstrip("/").split("?")[0]).resolve()
        if not path.is_file() or JS.resolve() not in path.parents:
            self.send_error(404)
            return
        kind = {".js": "text/javascript", ".html": "text/html"}.get(path.suffix, "text/plain")
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _site(upstream: str) -> http.server.ThreadingHTTPServer:
    handler = type("Site", (_SiteHandler,), {"upstream": upstream})
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    return site


def _close(site: http.server.ThreadingHTTPServer) -> None:
    """Stop serving and close the listening socket (an open one is a ResourceWarning)."""
    site.shutdown()
    site.server_close()


E2E_SPEC = {"name": "L-OSUE", "params": {"k": 8, "eps_perm": 2.0, "eps_1": 1.0}}
DEVICES, EPOCHS = 1000, 3


def _device_values(rng: np.random.Generator, n: int, k: int, epochs: int) -> np.ndarray:
    """Values that drift: each epoch a device keeps its value w.p. 0.7, else draws anew."""
    weights = np.linspace(2.0, 0.5, k)
    p = weights / weights.sum()
    vals = np.empty((n, epochs), dtype=np.int64)
    vals[:, 0] = rng.choice(k, size=n, p=p)
    for e in range(1, epochs):
        move = rng.random(n) < 0.3
        vals[:, e] = np.where(move, rng.choice(k, size=n, p=p), vals[:, e - 1])
    return vals


@pytest.mark.slow
@pytest.mark.browser
def test_chromium_end_to_end_against_a_real_server(tmp_path):
    srv = LiveServer(str(tmp_path / "e2e.db"), tmp_path).start()
    site = _site(srv.base)
    try:
        col = httpx.post(
            f"{srv.base}/v1/collections",
            # One shared ingest token (the server's default is per-device enrollment).
            json={"name": "browser", "protocol": E2E_SPEC, "first_epoch": 0, "auth": "shared"},
            headers=bearer(ADMIN),
            timeout=30,
        ).json()
        proto = ll.protocol_from_spec(E2E_SPEC)
        values = _device_values(np.random.default_rng(1919), DEVICES, proto.k, EPOCHS)
        page = f"http://127.0.0.1:{site.server_address[1]}/test/browser/e2e.html"
        with Chromium(CHROMIUM, tmp_path / "profile") as browser:
            browser.navigate(page)
            args = {
                "spec": E2E_SPEC,
                "collection": "browser",
                "token": col["ingest_token"],
                "values": values.tolist(),
            }
            sent = browser.evaluate(f"e2e.report({json.dumps(args)})")
            assert sent["acknowledged"] == DEVICES * EPOCHS
            assert sent["remaining"] == sent["dropped"] == 0

            k = proto.k
            before = browser.evaluate(f"e2e.snapshot({{n: {DEVICES}, k: {k}}})")
            distinct = [len(set(row)) for row in values.tolist()]
            assert [s["budget"]["reports"] for s in before] == [EPOCHS] * DEVICES
            assert [s["budget"]["memos"] for s in before] == distinct
            assert all(s["queue"] == 0 for s in before)

            browser.reload()
            after_reload = browser.evaluate(f"e2e.snapshot({{n: {DEVICES}, k: {k}}})")
            assert after_reload == before

            assert browser.evaluate(f"e2e.clearStates({{n: {DEVICES}}})") == DEVICES
            browser.reload()
            again = {"n": DEVICES, "k": k, "spec": E2E_SPEC, "collection": "browser"}
            after_clear = browser.evaluate(f"e2e.snapshot({json.dumps(again)})")
            assert [s["memos"] for s in after_clear] == [s["memos"] for s in before]
            assert all(s["budget"]["reports"] == 0 for s in after_clear)

            refused = browser.evaluate(f"e2e.refusals({{k: {k}}})")
            assert refused["unchanged"]
            assert [e.split(":")[0] for e in refused["errors"]] == [
                "RangeError",
                "RangeError",
                "TypeError",
                "TypeError",
            ]

        inside = total = 0
        for e in range(EPOCHS):
            est = httpx.get(
                f"{srv.base}/v1/collections/browser/epochs/{e}/estimate",
                params={"postprocess": "none"},
                headers=bearer(col["read_token"]),
                timeout=30,
            ).json()
            assert est["n"] == DEVICES
            truth = np.bincount(values[:, e], minlength=k) / DEVICES
            raw, se = np.array(est["raw"]), np.array(est["se"])
            assert np.all(np.abs(raw - truth) <= 5 * se), (e, raw, truth, se)
            inside += int(np.sum((np.array(est["lower"]) <= truth) & (truth <= est["upper"])))
            total += k
        # 95% intervals: fewer than 3/4 of 24 covering has probability below 1e-5.
        assert inside >= 0.75 * total, (inside, total)
    finally:
        _close(site)
        srv.stop()


@pytest.mark.browser
def test_chromium_page_on_another_origin_uploads_when_the_server_allows_it(tmp_path):
    """CORS: a page served from another origin than `longldp serve` fetches the spec and
    uploads straight to the server when the server lists its origin (`--cors-origin`; the
    browser's preflight for the Authorization header is answered), and is blocked by the
    browser when it does not (docs/server.md, "Pages on another origin")."""
    allowed, refused = _site(""), _site("")  # static sites on two ports: two origins
    origin = f"http://127.0.0.1:{allowed.server_address[1]}"
    srv = LiveServer(str(tmp_path / "cors.db"), tmp_path, args=("--cors-origin", origin)).start()
    try:
        col = httpx.post(
            f"{srv.base}/v1/collections",
            json={"name": "cors", "protocol": E2E_SPEC, "first_epoch": 0, "auth": "shared"},
            headers=bearer(ADMIN),
            timeout=30,
        ).json()
        args = {"baseUrl": srv.base, "collection": "cors", "token": col["ingest_token"],
                "values": [3, 1, 4]}  # fmt: skip
        with Chromium(CHROMIUM, tmp_path / "profile") as browser:
            browser.navigate(f"{origin}/test/browser/e2e.html")
            sent = browser.evaluate(f"e2e.crossOrigin({json.dumps(args)})")
            assert sent.get("acknowledged") == 3 and sent["remaining"] == 0, sent
            other = f"http://127.0.0.1:{refused.server_address[1]}/test/browser/e2e.html"
            browser.navigate(other)
            blocked = browser.evaluate(f"e2e.crossOrigin({json.dumps(args)})")
            assert blocked.get("error", "").startswith("TypeError"), blocked  # "Failed to fetch"
        stored = httpx.get(
            f"{srv.base}/v1/collections/cors/epochs/0/estimate",
            headers=bearer(col["read_token"]),
            timeout=30,
        ).json()
        assert stored["n"] == 1  # the allowed page's one report of epoch 0, and nothing else
    finally:
        _close(allowed)
        _close(refused)
        srv.stop()


@pytest.mark.browser
def test_chromium_replays_the_device_vectors_byte_for_byte(tmp_path):
    """The device test vectors (clients/js/test/vectors.json, docs/client-spec.md §9) replayed by
    the JS client inside headless chromium (WebCrypto's HMAC, the page's module loader): every
    upload record, every refusal (a w-event window, a budget cap) and every final state file
    equal the Python client's, byte for byte. The planned (w-event) cases carry their plans."""
    vectors = json.loads((JS / "test" / "vectors.json").read_text())
    site = _site("http://127.0.0.1:9")  # no server is needed: the page only computes
    try:
        page = f"http://127.0.0.1:{site.server_address[1]}/test/browser/e2e.html"
        with Chromium(CHROMIUM, tmp_path / "profile") as browser:
            browser.navigate(page)
            got = browser.evaluate(f"e2e.replay({json.dumps({'cases': vectors['cases']})})")
    finally:
        _close(site)
    assert [g["name"] for g in got] == [c["name"] for c in vectors["cases"]]
    planned = 0
    for case, js in zip(vectors["cases"], got, strict=True):
        expected = [
            "refused: BudgetExceededError" if s.get("refused") else s["record"]
            for s in case["steps"]
        ]
        assert js["records"] == expected, case["name"]
        assert js["state_file"] == case["state_file"], case["name"]
        planned += any("plan" in s for s in case["steps"])
    assert planned >= 7  # every LDP-IDS method's case, with its plans


# ------------------------------------------------------------------------------ black-box audit


def test_node_client_passes_the_black_box_audit():
    """clients/js/bin/audit-client.mjs behind ``longldp audit --exec`` (docs/audit.md §9): the
    framing works and a correct client's claim is not refuted (confidence 1 − 10⁻⁶, so a false
    refutation has probability below 10⁻⁶); the bounds of longer runs are in clients/js's
    README."""
    spec = json.dumps({"name": "L-GRR", "params": {"k": 4, "eps_perm": 2.0, "eps_1": 1.0}})
    cmd = f"{NODE} {JS / 'bin' / 'audit-client.mjs'} '{spec}'"
    args = ["--exec", cmd, "--k", "4", "--claim", "1.0", "--trials", "400", "--alpha", "1e-6"]
    out = subprocess.run(
        [sys.executable, "-m", "longldp", "audit", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No claim refuted" in out.stdout


# --------------------------------------------------------------------------- device enrollment

ENROLL_AND_UPLOAD = """
import { DeviceClient, MemoryStore, Uploader } from "./src/index.js";
const [base, collection, enrollToken, spec, values] = JSON.parse(process.argv[1]);
const out = [];
for (const row of values) {
  const client = await DeviceClient.open({ store: new MemoryStore(), spec, collection });
  const uploader = new Uploader({ baseUrl: base, collection, enrollToken, sleep: async () => {} });
  const sent = [];
  const held = [];
  for (let epoch = 0; epoch < row.length; epoch++) {
    await client.report(row[epoch], epoch);
    const r = await uploader.flush(client);
    sent.push(r.acknowledged);
    held.push(client.credential(base)?.credential ?? null);
  }
  out.push({ sent, held, device: client.credential(base)?.device ?? null });
}
console.log(JSON.stringify(out));
"""


def test_node_client_enrolls_with_a_real_server_and_keeps_its_credential(tmp_path):
    """The JS uploader against `longldp serve` in its default mode (devices enroll): each device
    enrolls once on its first upload, keeps its credential in its state for later uploads, and
    every report is acknowledged and counted once per epoch."""
    srv = LiveServer(str(tmp_path / "enroll.db"), tmp_path).start()
    try:
        spec = {"name": "L-GRR", "params": {"k": 4, "eps_perm": 2.0, "eps_1": 1.0}}
        col = httpx.post(
            f"{srv.base}/v1/collections",
            json={"name": "enrolled", "protocol": spec, "first_epoch": 0},
            headers=bearer(ADMIN),
            timeout=30,
        ).json()
        assert "enroll_token" in col and "ingest_token" not in col, col
        values = np.random.default_rng(7).integers(0, 4, size=(6, 3)).tolist()
        args = [srv.base, "enrolled", col["enroll_token"], spec, values]
        devices = json.loads(run_node(ENROLL_AND_UPLOAD, json.dumps(args)))
        assert [d["sent"] for d in devices] == [[1, 1, 1]] * 6
        for d in devices:  # one credential, obtained once and kept
            assert d["held"][0] is not None and len(set(d["held"])) == 1
        assert len({d["device"] for d in devices}) == 6  # six distinct identities
        assert len({d["held"][0] for d in devices}) == 6
        for epoch in range(3):
            est = httpx.get(
                f"{srv.base}/v1/collections/enrolled/epochs/{epoch}/estimate",
                headers=bearer(col["read_token"]),
                timeout=30,
            ).json()
            assert est["n"] == 6, est
    finally:
        srv.stop()
