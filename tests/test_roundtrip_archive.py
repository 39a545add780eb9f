"""Archive round trip for every registered protocol (issue 21; docs/design.md §8).

For each class and test parameters of the registry (tests/registry_cases.py): reports of two
epochs made by real device clients are written to report archives (two files, one row group
per epoch and file), aggregated back (in one pass and in small slices), and their per-epoch
counts and estimate rows must equal the in-memory aggregator's over the same reports, number
for number, including RAPPOR's per-cohort rows. tests/test_registry_coverage.py fails when a
registered protocol is missing here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from longldp.archive import ArchiveWriter, aggregate_archive
from longldp.protocols import wire
from registry_cases import build, cases, deployable
from roundtrip_helpers import (
    EPOCHS,
    FIELDS,
    N_DEVICES,
    K,
    archive_arrays,
    device_batches,
    estimate_shape,
    same,
)


def write_archives(proto, batches: dict[int, bytes], folder: Path) -> list[Path]:  # type: ignore[no-untyped-def]
    """Each epoch's upload batch split over two archive files (first and second half)."""
    paths = [folder / f"part-{i}.parquet" for i in range(2)]
    split = {e: wire.split_records(proto, data) for e, data in batches.items()}
    for i, path in enumerate(paths):
        with ArchiveWriter(path, proto, collection="roundtrip") as writer:
            for ids, epochs, rows in split.values():
                half = slice(0, len(ids) // 2) if i == 0 else slice(len(ids) // 2, len(ids))
                writer.write(epochs[half], ids[half], rows[half])
    return paths


@pytest.mark.parametrize(("cls", "params"), cases(deployable))
def test_archive_round_trip(cls, params, tmp_path: Path) -> None:
    proto = build(cls, params, K)
    batches, records = device_batches(proto, tmp_path, "roundtrip", seed=100 + cls.wire_id)
    paths = write_archives(proto, batches, tmp_path / "archive")
    whole = aggregate_archive(tmp_path / "archive")  # the folder: both files
    sliced = aggregate_archive(paths, slice_rows=5)
    assert sliced.slices > whole.slices
    shape = estimate_shape(proto)
    for counts in (whole, sliced):
        assert counts.protocol.spec() == proto.spec()
        assert sorted(counts.by_epoch) == list(EPOCHS)
        # Every device at every epoch, or (history-dependent) those that sent a report.
        assert counts.reports == sum(len(records[e]) for e in EPOCHS) >= N_DEVICES
        rows = counts.estimates()
        for epoch in EPOCHS:
            agg = proto.aggregator()
            agg.add(records[epoch])
            archived = counts.by_epoch[epoch]
            assert archived.n == len(records[epoch])
            same(archived.support_counts, agg.support_counts)
            expected = agg.estimate_with_se()
            got = archive_arrays(rows, epoch, shape)
            for name in FIELDS:
                assert getattr(expected, name).shape == shape, name
                same(got[name], getattr(expected, name), err_msg=name)
