"""A discovery collection on the server (PEM, docs/heavy_hitters.md): devices each answer one
round of the epoch with one report, the server runs the rounds on the epoch's counts, the API
and the dashboard list the items found with 95% intervals; one answer per device per epoch;
a protocol that discovers nothing is refused the endpoint."""

from __future__ import annotations

import numpy as np

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
