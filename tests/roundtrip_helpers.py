"""Shared parts of the round-trip tests (tests/test_roundtrip_server.py and
tests/test_roundtrip_archive.py): a small population of real device clients, the shape an
estimate must have, and arrays rebuilt from the archive's estimate rows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import longldp as ll
from longldp.client import DeviceClient
from longldp.protocols import wire

#: Domain size for protocols that take k (small: the round trips check plumbing, not accuracy).
K = 6
#: Devices per population and the epochs each of them reports in.
N_DEVICES = 24
EPOCHS = (0, 1)
#: Estimate fields that the server, the archive and the in-memory aggregator must agree on.
FIELDS = ("estimate", "raw", "se", "lower", "upper")


def same(actual: object, desired: object, err_msg: str = "") -> None:
    """Equal: exactly for counts; to 1e-12 for a numeric mean's float sums and what follows
    from them, which depend on the order reports were added in (docs/math.md (20.3))."""
    a, d = np.asarray(actual), np.asarray(desired)
    if a.dtype.kind == "f" or d.dtype.kind == "f":
        np.testing.assert_allclose(a, d, rtol=1e-12, atol=1e-12, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(a, d, err_msg=err_msg)


def estimate_shape(proto: ll.FrequencyOracle) -> tuple[int, ...]:
    """What every estimate array must look like: the estimator's ``estimate_shape`` (a vector
    of frequencies, RAPPOR's (cohorts, bits) shares of set bits, a sketch's (rows, columns))."""
    return tuple(proto.estimate_shape)


def device_batches(
    proto: ll.FrequencyOracle, state_dir: Path, collection: str, seed: int
) -> tuple[dict[int, bytes], dict[int, np.ndarray]]:
    """Each epoch's binary upload batch from ``N_DEVICES`` real :class:`DeviceClient` s (state
    files in ``state_dir``), and the report records they hold (decoded from the batch with
    the wire codec, for the in-memory aggregator).

    Every device reports once per epoch in :data:`EPOCHS` (a history-dependent one when its
    history sends something), a value that changes with probability 1/2 (a planned protocol's
    device with the protocol's example plan); its secret
    is derived from ``seed`` and its index, so memos and RAPPOR cohorts are the same on every
    run (round 2 draws from the OS, as on a device). The state files are written as always but
    not fsynced: durability is tests/test_device_client.py's subject, and a few hundred fsyncs
    would make these tests slow.
    """
    with mock.patch("os.fsync"):
        return _device_batches(proto, state_dir, collection, seed)


def _device_batches(
    proto: ll.FrequencyOracle, state_dir: Path, collection: str, seed: int
) -> tuple[dict[int, bytes], dict[int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    domain = proto.domain_size or K
    codes = rng.integers(0, domain, N_DEVICES)
    batches: dict[int, bytes] = {}
    records: dict[int, np.ndarray] = {}
    devices = [
        DeviceClient(
            state_dir / f"device-{i}.json",
            proto,
            collection,
            secret=hashlib.sha256(f"round trip {seed} {i}".encode()).digest(),
        )
        for i in range(N_DEVICES)
    ]
    for epoch in EPOCHS:
        change = rng.random(N_DEVICES) < 0.5
        codes = np.where(change, rng.integers(0, domain, N_DEVICES), codes)
        values = list(proto.as_inputs(codes))
        parts = []
        for device, value in zip(devices, values, strict=True):
            sent = device.report(value, epoch, proto.example_plan(epoch))  # planned: the server's
            items, data = device.batch(limit=10)
            # The previous epoch's report was acknowledged; a history-dependent device may
            # send nothing at an epoch (a CHANGES-TREE level between its node ends).
            assert len(items) == (sent is not None)
            device.acknowledge([q.id for q in items])
            parts.append(data)
        batches[epoch] = b"".join(parts)
        _, epochs, records[epoch] = wire.decode_records(proto, batches[epoch])
        assert epochs.tolist() == [epoch] * len(records[epoch])
        assert len(records[epoch]) >= N_DEVICES // 4  # every device, or its share of levels
    return batches, records


def as_array(value: Any) -> np.ndarray:
    """A JSON estimate (nested lists, null for an empty cohort) as floats with NaN."""
    return np.array(value, dtype=np.float64)


def archive_arrays(rows: list[dict], epoch: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The estimate arrays of ``epoch`` rebuilt from :meth:`ArchiveCounts.estimates` rows (one
    row per value, or per cohort and bit, or per round, sketch row and column)."""
    out = {name: np.full(shape, np.nan) for name in FIELDS}
    seen = np.zeros(shape, dtype=np.int64)
    for row in rows:
        if row["epoch"] != epoch:
            continue
        lead = tuple(row[key] for key in ("round", "cohort") if key in row)
        where = (*lead, row["value"])
        seen[where] += 1
        for name in FIELDS:
            out[name][where] = row[name]
    assert np.all(seen == 1), "every value (and cohort) must have exactly one row"
    return out
