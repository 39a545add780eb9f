"""Server round trip for every registered protocol (issue 21; docs/design.md §8).

For each class and test parameters of the registry (tests/registry_cases.py): create a
collection on the real server (FastAPI's test client over a SQLite file), upload two epochs of
reports made by real device clients, then read each epoch's estimate, the series, the
dashboard and the Parquet export. Every answer is 2xx; every estimate has the protocol's shape
(RAPPOR's Bloom and boolean encoders: (cohorts, bits)) and equals the in-memory aggregator's
estimate-with-SE of the same reports, number for number; the export aggregated as an archive
gives the same numbers again. tests/test_registry_coverage.py fails when a registered protocol
is missing here.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from longldp.archive import aggregate_archive
from longldp.server import build_app
from registry_cases import build, cases, deployable
from roundtrip_helpers import (
    EPOCHS,
    FIELDS,
    K,
    archive_arrays,
    as_array,
    device_batches,
    estimate_shape,
    same,
)
from server_helpers import ADMIN, bearer

NAME = "roundtrip"


def server_round_trip(db_url: str, spec: dict[str, Any], batches: dict[int, bytes]) -> dict:
    """Everything a collection's users do, against the server's HTTP API; the answers by name.

    The one place these tests speak the API (create as admin, upload with the ingest token,
    read with the read token), so a change to it, e.g. device enrollment, is made here only.
    """
    with TestClient(build_app(db_url, ADMIN)) as client:  # one event loop for all requests
        return _requests(client, spec, batches)


def _requests(client: TestClient, spec: dict[str, Any], batches: dict[int, bytes]) -> dict:
    col = client.post(
        # One shared ingest token (the server's default is per-device enrollment).
        "/v1/collections",
        json={"name": NAME, "protocol": spec, "auth": "shared"},
        headers=bearer(ADMIN),
    )
    assert col.status_code == 201, col.text
    tokens = col.json()
    ingest, read = bearer(tokens["ingest_token"]), bearer(tokens["read_token"])
    base = f"/v1/collections/{NAME}"
    got: dict[str, Any] = {"create": col}
    for epoch, data in batches.items():
        got[f"ingest {epoch}"] = client.post(
            f"{base}/reports",
            content=data,
            headers={**ingest, "Content-Type": "application/octet-stream"},
        )
        for pp in ("none", "norm-sub"):
            got[f"estimate {epoch} {pp}"] = client.get(
                f"{base}/epochs/{epoch}/estimate?postprocess={pp}", headers=read
            )
        got[f"export {epoch}"] = client.get(f"{base}/epochs/{epoch}/reports.parquet", headers=read)
    got["series"] = client.get(f"{base}/series?postprocess=none", headers=read)
    got["dashboard"] = client.get(f"/collections/{NAME}/dashboard?token={tokens['read_token']}")
    return got


@pytest.mark.parametrize(("cls", "params"), cases(deployable))
def test_server_round_trip(cls, params, tmp_path: Path) -> None:
    proto = build(cls, params, K)
    batches, records = device_batches(proto, tmp_path, NAME, seed=cls.wire_id)
    got = server_round_trip(str(tmp_path / "server.db"), proto.spec(), batches)

    frequencies = cls.estimates_frequencies
    for key, response in got.items():
        if key.endswith("norm-sub") and not frequencies:
            # Post-processing applies to frequencies only: refused with a reason, never a 5xx.
            assert response.status_code == 422, (key, response.text)
            assert "does not apply" in response.json()["error"]
            continue
        assert 200 <= response.status_code < 300, (key, response.status_code, response.text)
    sent = {epoch: len(records[epoch]) for epoch in EPOCHS}  # N_DEVICES, or a level's share
    for epoch in EPOCHS:
        assert got[f"ingest {epoch}"].json() == {
            "received": sent[epoch],
            "new": sent[epoch],
            "duplicates": 0,
        }

    shape = estimate_shape(proto)
    series = got["series"].json()["epochs"]
    assert [s["epoch"] for s in series] == list(EPOCHS)
    for epoch, entry in zip(EPOCHS, series, strict=True):
        agg = proto.aggregator()
        agg.add(records[epoch])
        expected = agg.estimate_with_se()
        body = got[f"estimate {epoch} none"].json()
        assert body["n"] == entry["n"] == sent[epoch]
        assert body["postprocess"] is None
        for name in FIELDS:
            value = as_array(body[name])
            assert value.shape == shape, (name, value.shape, shape)
            same(value, getattr(expected, name), err_msg=name)
            np.testing.assert_array_equal(as_array(entry[name]), value, err_msg=name)
        se = as_array(body["se"])
        if frequencies or proto.estimand in ("mean", "distribution"):
            assert np.all(se > 0), se  # a standard error for every value (EMS: math §20.14)
        else:  # a cohort (a context) without reports has no numbers; every other has all
            empty = np.isnan(as_array(body["raw"]))
            assert np.all(np.isnan(se[empty])), se
            # A sketch row without reports is a constant cell (SE 0); a row with reports has an
            # SE everywhere (its count is the support's first column).
            sup = np.asarray(agg.support_counts)
            rows = sup[..., :1] > 0 if sup.shape[:-1] == se.shape[:-1] else np.ones(1, bool)
            reported = np.broadcast_to(rows, se.shape)
            assert np.all(se[~empty & reported] > 0) and np.all(se[~empty] >= 0), se
        if frequencies:
            processed = got[f"estimate {epoch} norm-sub"].json()
            np.testing.assert_array_equal(
                as_array(processed["estimate"]), agg.estimate_with_se("norm-sub").estimate
            )
            np.testing.assert_array_equal(as_array(processed["raw"]), expected.raw)

        # The export is an archive of exactly this epoch's reports: aggregating it gives the
        # same estimates.
        blob = got[f"export {epoch}"].content
        assert pq.read_table(io.BytesIO(blob)).num_rows == sent[epoch]
        path = tmp_path / f"export-{epoch}.parquet"
        path.write_bytes(blob)
        archived = aggregate_archive(path)
        same(archived.by_epoch[epoch].support_counts, agg.support_counts)
        rows = archive_arrays(archived.estimates(), epoch, shape)
        for name in FIELDS:
            same(rows[name], getattr(expected, name), err_msg=name)

    page = got["dashboard"]
    assert page.headers["content-type"].startswith("text/html")
    assert f'<span id="total">{sum(sent.values()):,}</span>' in page.text
    assert f"<b>{cls.name}</b>" in page.text
