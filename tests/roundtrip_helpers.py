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

    Every device reports once per epoch in :data:`EPOCHS`, a value that changes with
    probability 1/2; its secret is derived from ``seed`` and its index, so memos and RAPPOR
    cohorts are the same on every run (round 2 draws from the OS, as on a device). The state
    files are written as always but not fsynced: durability is tests/test_device_client.py's
    subject, and a few hundred fsyncs would make these tests slow.
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
            device.report(value, epoch)
            items, data = device.batch(limit=10)
            assert len(items) == 1  # the previous epoch's report was acknowledged
            device.acknowledge([q.id for q in items])
            parts.append(data)
        batches[epoch] = b"".join(parts)
        _, epochs, records[epoch] = wire.decode_records(proto, batches[epoch])
        assert epochs.tolist() == [epoch] * N_DEVICES
    return batches, records


def as_array(value: Any) -> np.ndarray:
    """A JSON estimate (nested lists, null for an empty cohort) as floats with NaN."""
    return np.array(value, dtype=np.float64)


def archive_arrays(rows: list[dict], epoch: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The estimate arrays of ``epoch`` rebuilt from :meth:`ArchiveCounts.estimates` rows (one
    row per value, or per cohort and bit)."""
    out = {name: np.full(shape, np.nan) for name in FIELDS}
    seen = np.zeros(shape, dtype=np.int64)
    for row in rows:
        if row["epoch"] != epoch:
            continue
        where = (row["cohort"], row["value"]) if "cohort" in row else (row["value"],)
        seen[where] += 1
        for name in FIELDS:
            out[name][where] = row[name]
    assert np.all(seen == 1), "every value (and cohort) must have exactly one row"
    return out
