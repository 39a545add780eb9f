"""End to end for data that changes (docs/streams.md): the two protocols the study recommends,
LSP (w-event sampling) and THRESH (votes and updates), through the Python and JavaScript
device clients, the wire format and a real ``longldp serve``: the collection serves each
epoch's plan (``GET …/epochs/{epoch}/plan``), the devices report with it and keep their
spending across restarts, the server's estimates are within 5 standard errors of the truth, and
the collection's ledger (``GET …/ledger`` and the dashboard) summarizes what its devices spent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from unittest import mock

import httpx
import numpy as np
import pytest

import longldp as ll
from longldp.client import DeviceClient
from longldp.client.upload import Uploader, fetch_plan
from server_helpers import ADMIN, ROOT, LiveServer, bearer

JS = ROOT / "clients" / "js"
NODE = shutil.which("node")

LSP = {"name": "LSP", "params": {"k": 4, "eps_window": 2.0, "w": 3}}
#: Votes at ε_vote = 8/(4·2) = 1: with 100 devices no change stays below the update threshold
#: (3 standard errors, 0.33 here) and 60% changing is far above it.
THRESH = {"name": "THRESH", "params": {"k": 3, "eps_total": 8.0, "max_votes": 2, "max_updates": 3}}


#: The plans' statuses over 7 epochs (LSP, w = 3) and 8 (THRESH's rounds: 0 no vote yet, 1 the
#: first update, 3 nobody changed so no update, 5 after 60% changed).
LSP_STATUSES = ["report", "none", "none"] * 2 + ["report"]
THRESH_STATUSES = ["none", "report", "report", "none", "report", "report", "report", "none"]


def _create(srv: LiveServer, name: str, spec: dict) -> dict:
    r = httpx.post(
        f"{srv.base}/v1/collections",
        json={"name": name, "protocol": spec, "first_epoch": 0, "epoch_window": 16},
        headers=bearer(ADMIN),
        timeout=30,
    )
    assert r.status_code == 201, r.text
    return r.json()


def _get(srv: LiveServer, path: str, token: str) -> dict:
    r = httpx.get(f"{srv.base}{path}", headers=bearer(token), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _close(srv: LiveServer, name: str, epoch: int) -> None:
    r = httpx.post(
        f"{srv.base}/v1/collections/{name}/epochs/{epoch}/close", headers=bearer(ADMIN), timeout=30
    )
    assert r.status_code == 200, r.text


def _within(estimate: dict, truth: np.ndarray, part: slice = slice(None)) -> None:
    raw, se = np.array(estimate["raw"], dtype=float)[part], np.array(estimate["se"])[part]
    assert np.all(np.abs(raw - truth) <= 5 * se), (raw, truth, se)


def _lsp_values(rng: np.random.Generator, n: int, tau: int) -> np.ndarray:
    """(tau, n) values that drift: each epoch a device keeps its value w.p. 0.7."""
    p = np.array([0.4, 0.3, 0.2, 0.1])
    vals = np.empty((tau, n), dtype=np.int64)
    vals[0] = rng.choice(4, size=n, p=p)
    for t in range(1, tau):
        vals[t] = np.where(rng.random(n) < 0.3, rng.choice(4, size=n, p=p), vals[t - 1])
    return vals


def _thresh_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """(periods, n): period 1 keeps every value, period 2 changes 60% of them, period 3 none."""
    first = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    moved = np.where(rng.random(n) < 0.6, (first + 1 + rng.integers(0, 2, n)) % 3, first)
    return np.stack([first, first, moved, moved])


# ------------------------------------------------------------------------------ Python


@pytest.fixture(autouse=True)
def _no_fsync():
    """Device state files are written as always but not fsynced (their durability is
    tests/test_device_client.py's subject; hundreds of fsyncs would make these tests slow)."""
    with mock.patch("os.fsync"):
        yield


def test_lsp_through_python_devices_and_the_server(tmp_path):
    srv = LiveServer(str(tmp_path / "lsp.db"), tmp_path).start()
    try:
        col = _create(srv, "lsp", LSP)
        n, tau = 60, 7
        values = _lsp_values(np.random.default_rng(41), n, tau)
        states = [tmp_path / f"d{i}.json" for i in range(n)]
        proto = ll.protocol_from_spec(LSP)
        for i, path in enumerate(states):
            DeviceClient(path, proto, "lsp", secret=bytes([i % 256, i // 256]) * 16)
        up = Uploader(srv.base, "lsp", enroll_token=col["enroll_token"], sleep=lambda s: None)
        plans = []
        for epoch in range(tau):
            plans.append(fetch_plan(srv.base, "lsp", epoch, col["enroll_token"]))
            for i, path in enumerate(states):
                # every device restarts at every epoch: its window comes back from its state
                dev = DeviceClient(path, secret=bytes([i % 256, i // 256]) * 16)
                if plans[-1]["status"] == "report":
                    dev.report(int(values[epoch, i]), epoch, plans[-1]["plan"])
                assert up.flush(dev).remaining == 0
        assert [p["status"] for p in plans] == LSP_STATUSES
        assert plans[0]["plan"] == {"eps": 2.0}
        read = col["read_token"]
        for epoch in (0, 3, 6):
            est = _get(srv, f"/v1/collections/lsp/epochs/{epoch}/estimate?postprocess=none", read)
            assert est["n"] == n
            _within(est, np.bincount(values[epoch], minlength=4) / n)
        devices = [
            DeviceClient(p, secret=bytes([i % 256, i // 256]) * 16) for i, p in enumerate(states)
        ]
        assert {d.spent_budget.epsilon for d in devices} == {6.0}
        assert {d.window_spent(6) for d in devices} == {2.0}
        ledger = _get(srv, "/v1/collections/lsp/ledger", read)
        assert ledger["status"] == "ok" and ledger["rule"] == "per-window"
        assert ledger["devices"] == n
        assert ledger["spent"] == {"median": 2.0, "p99": 2.0, "max": 2.0}  # ≤ eps_window
        assert ledger["lifetime"] == {"median": 6.0, "p99": 6.0, "max": 6.0}  # 3 windows
        page = httpx.get(f"{srv.base}/collections/lsp/dashboard?token={read}", timeout=30).text
        assert 'id="ledger" data-status="ok" data-rule="per-window"' in page
        assert 'data-max="2.0"' in page and 'data-max="6.0"' in page
    finally:
        srv.stop()


def test_thresh_through_python_devices_and_the_server(tmp_path):
    """Epochs are THRESH's rounds: 2t the votes of period t, 2t + 1 its update, opened when
    the operator closes the vote epoch and the votes call for one."""
    srv = LiveServer(str(tmp_path / "thresh.db"), tmp_path).start()
    try:
        col = _create(srv, "thresh", THRESH)
        n = 100
        values = _thresh_values(np.random.default_rng(43), n)
        proto = ll.protocol_from_spec(THRESH)
        devices = [
            DeviceClient(tmp_path / f"t{i}.json", proto, "thresh", secret=bytes([i % 256, 7]) * 16)
            for i in range(n)
        ]
        up = Uploader(srv.base, "thresh", enroll_token=col["enroll_token"], sleep=lambda s: None)
        statuses = []
        for epoch in range(8):
            plan = fetch_plan(srv.base, "thresh", epoch, col["enroll_token"])
            if plan["status"] == "pending":  # the vote epoch before it is still open
                _close(srv, "thresh", epoch - 1)
                plan = fetch_plan(srv.base, "thresh", epoch, col["enroll_token"])
            statuses.append(plan["status"])
            if plan["status"] == "report":
                for i, dev in enumerate(devices):
                    dev.report(int(values[epoch // 2, i]), epoch, plan["plan"])
                    assert up.flush(dev).remaining == 0
        assert statuses == THRESH_STATUSES
        read = col["read_token"]
        for epoch, period in ((1, 0), (5, 2)):
            est = _get(
                srv, f"/v1/collections/thresh/epochs/{epoch}/estimate?postprocess=none", read
            )
            _within(est, np.bincount(values[period], minlength=3) / n, slice(1, None))
        votes = _get(srv, "/v1/collections/thresh/epochs/4/estimate?postprocess=none", read)
        _within(votes, np.array([np.mean(values[2] != values[1])]), slice(0, 1))
        # Per device: 3 votes (2 counted: max_votes) and 2 updates, as the server sees them.
        eps_vote, eps_est = proto.budgets
        bound = 2 * eps_vote + 2 * eps_est
        ledger = _get(srv, "/v1/collections/thresh/ledger", read)
        assert ledger["rule"] == "per-change" and ledger["devices"] == n
        assert ledger["spent"]["max"] == pytest.approx(bound)
        assert bound <= THRESH["params"]["eps_total"] / 2
        own = np.array([d.spent_budget.epsilon for d in devices])
        assert own.max() <= bound + 1e-9 and own.min() >= 2 * eps_est  # a real vote or two
    finally:
        srv.stop()


# ------------------------------------------------------------------------------ JavaScript

RUN_JS = """
import { DeviceClient, MemoryStore, Uploader, fetchPlan } from "./src/index.js";
const [base, name, enrollToken, admin, spec, values, epochs, byPeriod] =
  JSON.parse(process.argv[1]);
const devices = [];
for (let i = 0; i < values[0].length; i++) {
  devices.push(await DeviceClient.open({ store: new MemoryStore(), spec, collection: name }));
}
const up = new Uploader({ baseUrl: base, collection: name, enrollToken, sleep: async () => {} });
const statuses = [];
for (let epoch = 0; epoch < epochs; epoch++) {
  let plan = await fetchPlan(base, name, epoch, enrollToken);
  if (plan.status === "pending") {
    const close = `${base}/v1/collections/${name}/epochs/${epoch - 1}/close`;
    await fetch(close, { method: "POST", headers: { Authorization: `Bearer ${admin}` } });
    plan = await fetchPlan(base, name, epoch, enrollToken);
  }
  statuses.push(plan.status);
  if (plan.status !== "report") continue;
  const row = values[byPeriod ? Math.floor(epoch / 2) : epoch];
  for (let i = 0; i < devices.length; i++) {
    await devices[i].report(row[i], epoch, plan.plan);
    const r = await up.flush(devices[i]);
    if (r.remaining) throw new Error(`device ${i}: ${r.remaining} reports left`);
  }
}
const spent = devices.map((d) => d.spentBudget.epsilon);
const windows = devices.map((d) => (d.proto.window ? d.windowSpent(epochs - 1) : null));
console.log(JSON.stringify({ statuses, spent, windows }));
"""


def _node(args: list) -> dict:
    out = subprocess.run(
        [NODE, "--input-type=module", "-e", RUN_JS, json.dumps(args)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.node
def test_lsp_and_thresh_through_js_devices_and_the_server(tmp_path):
    srv = LiveServer(str(tmp_path / "js.db"), tmp_path).start()
    try:
        lsp = _create(srv, "lsp-js", LSP)
        n, tau = 50, 7
        values = _lsp_values(np.random.default_rng(47), n, tau)
        got = _node([srv.base, "lsp-js", lsp["enroll_token"], ADMIN, LSP, values.tolist(), tau, 0])
        assert got["statuses"] == LSP_STATUSES
        assert set(got["spent"]) == {6.0} and set(got["windows"]) == {2.0}
        read = lsp["read_token"]
        for epoch in (0, 3, 6):
            est = _get(
                srv, f"/v1/collections/lsp-js/epochs/{epoch}/estimate?postprocess=none", read
            )
            assert est["n"] == n
            _within(est, np.bincount(values[epoch], minlength=4) / n)
        ledger = _get(srv, "/v1/collections/lsp-js/ledger", read)
        assert ledger["spent"]["max"] == 2.0 and ledger["lifetime"]["max"] == 6.0

        th = _create(srv, "thresh-js", THRESH)
        n = 100
        periods = _thresh_values(np.random.default_rng(53), n)
        got = _node(
            [srv.base, "thresh-js", th["enroll_token"], ADMIN, THRESH, periods.tolist(), 8, 1]
        )
        assert got["statuses"] == THRESH_STATUSES
        read = th["read_token"]
        est = _get(srv, "/v1/collections/thresh-js/epochs/5/estimate?postprocess=none", read)
        _within(est, np.bincount(periods[2], minlength=3) / n, slice(1, None))
        ledger = _get(srv, "/v1/collections/thresh-js/ledger", read)
        assert ledger["devices"] == n and ledger["spent"]["max"] >= max(got["spent"])
    finally:
        srv.stop()


def test_plans_and_ledgers_say_why_when_they_cannot(tmp_path):
    """A planned method whose plans follow the server's decision step (LBD) is refused at its
    plan with the reason; a shared-token collection has no per-device ledger; a memo chain's
    ledger is the devices' alone."""
    from fastapi.testclient import TestClient

    from longldp.server import build_app

    with TestClient(build_app(str(tmp_path / "x.db"), ADMIN)) as client:

        def create(name, spec, **more):
            r = client.post(
                "/v1/collections",
                json={"name": name, "protocol": spec, **more},
                headers=bearer(ADMIN),
            )
            assert r.status_code == 201, r.text
            return r.json()

        lbd = create("lbd", {"name": "LBD", "params": {"k": 4, "eps_window": 1.0, "w": 4}})
        r = client.get("/v1/collections/lbd/epochs/0/plan", headers=bearer(lbd["enroll_token"]))
        assert r.status_code == 422 and "serves LBU and LSP" in r.json()["error"]
        shared = create("shared", LSP, auth="shared")
        led = client.get("/v1/collections/shared/ledger", headers=bearer(shared["read_token"]))
        assert led.json()["status"] == "shared"
        chain = create(
            "chain", {"name": "L-GRR", "params": {"k": 4, "eps_perm": 2.0, "eps_1": 1.0}}
        )
        plan = client.get(
            "/v1/collections/chain/epochs/3/plan", headers=bearer(chain["read_token"])
        )
        assert plan.json() == {"collection": "chain", "epoch": 3, "status": "report", "plan": None}
