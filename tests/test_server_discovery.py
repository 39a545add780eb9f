"""A discovery collection on the server (PEM, docs/heavy_hitters.md): devices each answer one
round of the epoch with one report, the server runs the rounds on the epoch's counts, the API
and the dashboard list the items found with 95% intervals; one answer per device per epoch;
a protocol that discovers nothing is refused the endpoint; end to end, Python and JS devices
enroll with `longldp serve`, answer, and headless chromium shows the dashboard's items."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import longldp as ll
from server_helpers import bearer, new_ids, records, wire_reports
from test_server_protocols import create, make, upload

WORDS = ["cat", "dog", "owl"]


def test_the_server_runs_the_rounds_and_lists_what_it_found(tmp_path):
    """3,000 reports in one shared-token upload: each picked its round; the discovered
    endpoint and the dashboard show the rounds' items with 95% intervals."""
    client = make(tmp_path)
    proto = ll.protocol(
        "PEM", eps=6.0, bits=None, alphabet="abcdefghijklmnopqrstuvwxyz", length=3,
        start=0, step=5, m=64, d=4, keep=4,
    )  # fmt: skip
    info = create(client, "words", proto.spec(), auth="shared")
    rng = np.random.default_rng(3)
    n = 3000
    items = [WORDS[i] if i < 3 else "zz" for i in rng.choice(4, n, p=[0.4, 0.25, 0.15, 0.2])]
    reports = wire_reports(proto, proto.perturb(items, None, rng))
    rounds = proto.decode_reports(b"".join(reports))["round"]
    body = records(new_ids(n, rng), [0] * n, reports)
    got = upload(client, "words", info["ingest_token"], body)
    assert got.status_code == 200 and got.json()["new"] == n, got.text
    rd = bearer(info["read_token"])
    found = client.get("/v1/collections/words/epochs/0/discovered", headers=rd).json()
    agg = proto.aggregator()
    agg.add_bytes(reports)
    want = proto.discover(agg.support_counts, agg.n).as_dict()
    assert found["n"] == n and found["items"] == want["items"] and found["rounds"] == want["rounds"]
    assert [r["reports"] for r in found["rounds"]] == np.bincount(rounds).tolist()
    top = found["items"][0]
    assert top["item"] == "cat" and top["lower"] <= 0.4 <= top["upper"]
    page = client.get("/collections/words/dashboard", headers=rd).text
    assert "Discovered items, epoch 0" in page and ">cat<" in page


def test_one_answer_per_device_per_epoch_and_other_protocols_are_refused(tmp_path):
    client = make(tmp_path)
    proto = ll.protocol("PEM", eps=2.0, bits=12, m=16, d=2)
    info = create(client, "ints", proto.spec())
    rng = np.random.default_rng(4)
    reports = wire_reports(proto, proto.perturb(np.array([5, 7]), None, rng))
    cred = client.post("/v1/collections/ints/devices", headers=bearer(info["enroll_token"]))
    token = cred.json()["credential"]
    assert (
        upload(client, "ints", token, records(new_ids(1, rng), [0], reports[:1])).status_code == 200
    )
    again = upload(client, "ints", token, records(new_ids(1, rng), [0], reports[1:]))
    assert again.status_code == 409 and "quota per epoch" in again.text, again.text
    cms = create(client, "cms", ll.protocol("CMS", m=16, d=2, eps=1.0).spec(), auth="shared")
    sketch = ll.protocol("CMS", m=16, d=2, eps=1.0)
    body = records(new_ids(1, rng), [0], wire_reports(sketch, sketch.perturb(["a"], None, rng)))
    assert upload(client, "cms", cms["ingest_token"], body).status_code == 200
    refused = client.get(
        "/v1/collections/cms/epochs/0/discovered", headers=bearer(cms["read_token"])
    )
    assert refused.status_code == 422 and "not discovered items" in refused.json()["error"]


# ------------------------------------------------------------------ end to end, live server
#: The live collection: 3-letter words over a-z (15-bit codes), three rounds of 5 bits.
LIVE_SPEC = {
    "name": "PEM",
    "params": {"eps": 6.0, "bits": None, "alphabet": "abcdefghijklmnopqrstuvwxyz",
               "length": 3, "start": 0, "step": 5, "m": 64, "d": 4, "keep": 4},
}  # fmt: skip
LIVE_WORDS, LIVE_SHARES = ["cat", "dog", "owl"], [0.6, 0.25, 0.15]
N_PY = N_JS = 120

JS_DEVICES = """
import { DeviceClient, MemoryStore, Uploader } from "./src/index.js";
const [base, collection, enrollToken, spec, words] = JSON.parse(process.argv[1]);
const sent = [];
for (const word of words) {
  const client = await DeviceClient.open({ store: new MemoryStore(), spec, collection });
  await client.report(word, 0);
  const uploader = new Uploader({ baseUrl: base, collection, enrollToken, sleep: async () => {} });
  sent.push((await uploader.flush(client)).acknowledged);
}
console.log(JSON.stringify(sent));
"""


def _live_words(rng: np.random.Generator, n: int) -> list[str]:
    return [LIVE_WORDS[i] for i in rng.choice(len(LIVE_WORDS), n, p=LIVE_SHARES)]


@pytest.mark.slow
@pytest.mark.node
@pytest.mark.browser
def test_python_and_js_devices_answer_the_rounds_of_a_live_server(tmp_path):
    """`longldp serve` with a PEM collection whose devices enroll: Python devices
    (DeviceClient + Uploader) and JS devices (node: DeviceClient + Uploader) each answer one
    round of epoch 0 with one report (a second report of a device in the epoch is refused
    with 409 and dropped by its uploader); the server runs the rounds on the epoch's counts:
    its answer is ``discover`` of its own exported reports, the frequent word is found within
    5 standard errors of its share, and the dashboard rendered by headless chromium lists the
    discovered words with the API's numbers."""
    import httpx

    from chromium_cdp import one_shot
    from longldp.archive import aggregate_archive
    from longldp.client.device import DeviceClient
    from longldp.client.upload import Uploader
    from real_parts import CHROMIUM
    from server_helpers import LiveServer, create_shared
    from test_js_client import run_node

    proto = ll.protocol_from_spec(LIVE_SPEC)
    rng = np.random.default_rng(31)
    py_words, js_words = _live_words(rng, N_PY), _live_words(rng, N_JS)
    srv = LiveServer(str(tmp_path / "live.db"), tmp_path).start()
    try:
        col = create_shared(srv.base, "words", LIVE_SPEC, auth="device", first_epoch=0)
        assert "enroll_token" in col, col
        acked = []
        for i, word in enumerate(py_words):
            device = DeviceClient(tmp_path / f"py-{i}.json", proto, "words")
            device.report(word, 0)
            if i == 0:  # a second answer of one device in the epoch
                device.report("dog", 0)
            up = Uploader(srv.base, "words", enroll_token=col["enroll_token"], sleep=lambda s: None)
            got = up.flush(device)
            acked.append(got.acknowledged)
            if i == 0:
                assert got.dropped == 1 and device.dropped == 1, got
        assert acked == [1] * N_PY
        args = [srv.base, "words", col["enroll_token"], LIVE_SPEC, js_words]
        assert json.loads(run_node(JS_DEVICES, json.dumps(args))) == [1] * N_JS

        read = bearer(col["read_token"])
        found = httpx.get(
            f"{srv.base}/v1/collections/words/epochs/0/discovered", headers=read, timeout=60
        ).json()
        n = N_PY + N_JS
        assert found["n"] == n and sum(r["reports"] for r in found["rounds"]) == n
        blob = httpx.get(
            f"{srv.base}/v1/collections/words/epochs/0/reports.parquet", headers=read, timeout=60
        ).content
        (tmp_path / "export.parquet").write_bytes(blob)
        agg = aggregate_archive(tmp_path / "export.parquet").by_epoch[0]
        want = proto.discover(agg.support_counts, agg.n).as_dict()
        assert found["items"] == want["items"] and found["rounds"] == want["rounds"]
        top = found["items"][0]
        share = (py_words + js_words).count("cat") / n
        assert top["item"] == "cat" and abs(top["estimate"] - share) <= 5 * top["se"], top

        url = f"{srv.base}/collections/words/dashboard?token={col['read_token']}"
        dom = one_shot(CHROMIUM, tmp_path / "chromium", url, "--dump-dom")
    finally:
        srv.stop()
    table = re.search(r'<table id="discovered">(.*?)</table>', dom, re.S)
    assert table is not None, "the dashboard has no discovered items"
    shown = re.findall(
        r'<td class="item">([^<]*)</td><td class="num" data-estimate="([^"]+)">', table.group(1)
    )
    assert [(w, float(e)) for w, e in shown] == [(r["item"], r["estimate"]) for r in found["items"]]
