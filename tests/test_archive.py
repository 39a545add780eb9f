"""Report archives: layout, simulated writer, local and Dask aggregation, memory bound, refusals.

The tests on a real Dask cluster use the ``dask_cluster`` fixture, which marks them ``dask``:
without Dask they fail under CI=true (tests/conftest.py), they never skip there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.archive import (
    ArchiveWriter,
    aggregate_archive,
    archive_bytes,
    archive_schema,
    read_info,
    row_groups,
    simulate_reports,
)
from longldp.cli import app

FAMILIES = {
    "ue": ("L-OSUE", {"k": 20, "eps_perm": 2.0, "eps_1": 0.8}),
    "ue-one-shot": ("OUE", {"k": 20, "eps": 1.0}),
    "grr": ("L-GRR", {"k": 20, "eps_perm": 2.0, "eps_1": 0.8}),
    "hashing": ("OLOLOHA", {"k": 20, "eps_perm": 2.0, "eps_1": 0.8}),
    "dbitflip": ("dBitFlipPM", {"k": 20, "eps_perm": 2.0, "d": 2, "b": 5}),
    "rappor": ("RAPPOR", {"k": 16, "h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75}),
}


def _all_reports(path: Path) -> tuple[np.ndarray, np.ndarray]:
    table = pq.read_table(path)
    width = table.schema.field("report").type.byte_width
    reports = np.frombuffer(b"".join(table.column("report").to_pylist()), dtype=np.uint8).reshape(
        -1, width
    )
    return table.column("epoch").to_numpy(), reports


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_local_and_dask_counts_are_identical_and_exact(tmp_path, dask_cluster, family):
    name, params = FAMILIES[family]
    proto = ll.protocol(name, **params)
    path = tmp_path / f"{family}.parquet"
    truth = simulate_reports(proto, path, n=3000, epochs=3, change=0.2, chunk_users=1100, rng=5)
    info = read_info(path)
    assert info.num_rows == 9000 and info.num_row_groups == 9
    assert info.protocol.spec() == proto.spec()

    local = aggregate_archive(path)
    on_dask = aggregate_archive(path, scheduler=dask_cluster.scheduler_address)
    sliced = aggregate_archive(path, slice_rows=250)  # many small slices
    assert sliced.slices > local.slices
    epochs, reports = _all_reports(path)
    for epoch in range(3):
        direct = proto.aggregator()
        direct.add_bytes(reports[epochs == epoch])
        for counts in (local, on_dask, sliced):
            agg = counts.by_epoch[epoch]
            assert agg.n == 3000
            np.testing.assert_array_equal(agg.support_counts, direct.support_counts)
    assert truth["true_counts"].sum(axis=1).tolist() == [3000] * 3
    cohorts = pq.read_table(path, columns=["cohort"]).column("cohort")
    if family == "rappor":  # the cohort column holds each report's cohort (body bytes 0-1)
        per_cohort = np.bincount(cohorts.to_numpy()[epochs == 0], minlength=4)
        np.testing.assert_array_equal(per_cohort, local.by_epoch[0].support_counts[:, 0])
        rows = local.estimates()
        assert {r["cohort"] for r in rows} == {0, 1, 2, 3} and len(rows) == 3 * 4 * 16
    else:
        assert cohorts.null_count == len(cohorts)


def test_estimates_equal_the_protocol_estimator(tmp_path):
    proto = ll.protocol("L-OSUE", k=30, eps_perm=2.0, eps_1=1.0)
    path = tmp_path / "a.parquet"
    simulate_reports(proto, path, n=5000, epochs=2, rng=1)
    counts = aggregate_archive(path)
    rows = counts.estimates(postprocess=None)
    for epoch in (0, 1):
        agg = counts.by_epoch[epoch]
        expected = proto.estimate(agg.support_counts, agg.n)
        got = np.array([r["estimate"] for r in rows if r["epoch"] == epoch])
        np.testing.assert_array_equal(got, expected)
        se = np.array([r["se"] for r in rows if r["epoch"] == epoch])
        np.testing.assert_allclose(se**2, proto.variance(agg.n, np.clip(expected, 0, 1)))


@pytest.mark.slow
def test_archive_larger_than_the_memory_limit_stays_within_it(tmp_path):
    proto = ll.protocol("L-OSUE", k=74, eps_perm=2.0, eps_1=0.8)
    path = tmp_path / "big.parquet"
    # One row group of 1.2 million reports (about 50 MB on disk): unbounded reading holds it
    # whole; a limit of 10 MB reads it in slices. Any 74-bit pattern is a valid L-OSUE report,
    # so the bodies are drawn directly (faster than perturbing).
    n = 1_200_000
    rng = np.random.default_rng(2)
    rows = np.empty((n, proto.wire_size), dtype=np.uint8)
    rows[:, : len(proto.wire_header)] = np.frombuffer(proto.wire_header, np.uint8)
    rows[:, len(proto.wire_header) :] = rng.integers(0, 256, (n, proto.report_nbytes), np.uint8)
    rows[:, -1] &= 0xC0  # k = 74: the last 6 bits are padding
    with ArchiveWriter(path, proto) as writer:
        writer.write(0, rng.integers(0, 256, (n, 16), np.uint8), rows)
    size = path.stat().st_size
    limit = 10_000_000
    assert size > 4 * limit
    probe = textwrap.dedent(
        """
        import json, sys, tracemalloc
        import pyarrow as pa
        from longldp.archive import aggregate_archive, read_info, row_groups
        from longldp.archive.aggregate import count_slice
        limit = None if sys.argv[2] == "none" else int(sys.argv[2])
        # Warm up on 1,000 reports: the imports this triggers (pyarrow pulls in pandas) are code,
        # not working memory.
        count_slice(read_info(sys.argv[1]).protocol, next(row_groups(sys.argv[1], max_rows=1000)))

        def status(key):  # bytes of a /proc/self/status line (VmRSS: now, VmHWM: its peak)
            with open("/proc/self/status") as f:
                return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key))

        rss = status("VmRSS:")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the RSS now
        tracemalloc.start()
        counts = aggregate_archive(sys.argv[1], memory_limit=limit)
        print(json.dumps({
            "numpy": tracemalloc.get_traced_memory()[1],
            # Bounded runs allocate from the system pool, others from the default one.
            "arrow_peak": max(
                pa.default_memory_pool().max_memory(), pa.system_memory_pool().max_memory()
            ),
            "rss_growth": status("VmHWM:") - rss,
            "n": counts.reports,
        }))
        """
    )

    def peak(limit_value: int | None) -> dict:
        arg = "none" if limit_value is None else str(limit_value)
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path), arg],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    unbounded = peak(None)
    assert unbounded["n"] == 1_200_000
    assert unbounded["rss_growth"] > size / 2, unbounded  # the whole row group at once
    for value in (limit, 16_000_000):
        bounded = peak(value)
        assert bounded["n"] == 1_200_000
        # What the process adds to its resident memory (peak RSS over the RSS before) stays
        # within the limit, and so do the NumPy and Arrow allocations.
        assert bounded["rss_growth"] <= value, bounded
        assert bounded["numpy"] + bounded["arrow_peak"] <= value, bounded


def _write_raw(path: Path, proto, epochs, reports, ids=None) -> None:
    """An archive written without the writer's checks (to plant bad rows)."""
    n = reports.shape[0]
    ids = np.zeros((n, 16), np.uint8) if ids is None else ids
    schema = archive_schema(proto, "c")
    fixed = lambda rows: pa.FixedSizeBinaryArray.from_buffers(  # noqa: E731
        pa.binary(rows.shape[1]), rows.shape[0], [None, pa.py_buffer(rows.tobytes())]
    )
    table = pa.table(
        {
            "epoch": pa.array(np.asarray(epochs, np.uint32)),
            "cohort": pa.nulls(n, pa.uint16()),
            "report_id": fixed(ids),
            "report": fixed(reports),
        },
        schema=schema,
    )
    pq.write_table(table, path, row_group_size=max(1, n // 2), compression="none")


def test_a_report_of_another_protocol_is_refused_naming_file_and_row_group(tmp_path):
    proto = ll.protocol("L-OSUE", k=30, eps_perm=2.0, eps_1=1.0)
    other = ll.protocol("L-OSUE", k=30, eps_perm=3.0, eps_1=1.0)  # same width, other params
    assert other.wire_size == proto.wire_size
    good = np.frombuffer(
        proto.encode_reports(proto.perturb(np.zeros(10, int), proto.new_memo(10), 1)), np.uint8
    ).reshape(10, -1)
    bad = np.frombuffer(
        other.encode_reports(other.perturb(np.zeros(10, int), other.new_memo(10), 1)), np.uint8
    ).reshape(10, -1)
    rows = np.concatenate([good, good[:5], bad[:5]])
    path = tmp_path / "mixed.parquet"
    _write_raw(path, proto, np.zeros(20), rows)
    out = tmp_path / "est.csv"
    with pytest.raises(ValueError, match=r"mixed\.parquet, row group 1"):
        aggregate_archive(path)
    result = CliRunner().invoke(app, ["aggregate", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert "row group 1" in result.output
    assert not out.exists() and not list(tmp_path.glob(".tmp-*"))


def test_a_corrupt_row_group_is_refused_naming_file_and_row_group(tmp_path):
    proto = ll.protocol("L-GRR", k=30, eps_perm=2.0, eps_1=1.0)
    path = tmp_path / "corrupt.parquet"
    simulate_reports(proto, path, n=4000, epochs=2, chunk_users=4000, rng=3)
    meta = pq.read_metadata(path)
    column = meta.row_group(1).column(3)  # 'report' of the second row group
    start = column.data_page_offset
    raw = bytearray(path.read_bytes())
    raw[start : start + 64] = b"\xff" * 64  # break the page header
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"corrupt\.parquet, row group 1"):
        aggregate_archive(path)


def test_not_an_archive_and_bad_arguments(tmp_path):
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), plain)
    with pytest.raises(ValueError, match="not a longldp report archive"):
        aggregate_archive(plain)
    with pytest.raises(ValueError, match="no such archive"):
        aggregate_archive(tmp_path / "missing.parquet")
    proto = ll.protocol("OUE", k=8, eps=1.0)
    with pytest.raises(ValueError, match="'n' must be"):
        simulate_reports(proto, tmp_path / "x.parquet", n=0)
    with pytest.raises(ValueError, match="'change' must be"):
        simulate_reports(proto, tmp_path / "x.parquet", n=10, change=2.0)
    with (
        ArchiveWriter(tmp_path / "w.parquet", proto) as writer,
        pytest.raises(ValueError, match="'reports' must be uint8"),
    ):
        writer.write(0, np.zeros((2, 16), np.uint8), np.zeros((2, 3), np.uint8))


def test_cli_simulate_then_aggregate(tmp_path):
    path = tmp_path / "cli.parquet"
    runner = CliRunner()
    made = runner.invoke(
        app,
        [
            "simulate-reports",
            "L-OSUE",
            "k=16",
            "eps_perm=2",
            "eps_1=1",
            "--out",
            str(path),
            "--n",
            "2000",
            "--epochs",
            "2",
        ],
    )
    assert made.exit_code == 0, made.output
    est = tmp_path / "est.json"
    done = runner.invoke(app, ["aggregate", str(path), "--out", str(est), "--memory-limit", "9MB"])
    assert done.exit_code == 0, done.output
    rows = json.loads(est.read_text())
    assert len(rows) == 2 * 16 and {r["epoch"] for r in rows} == {0, 1}
    bad = runner.invoke(app, ["aggregate", str(path), "--memory-limit", "lots"])
    assert bad.exit_code == 2 and "memory size" in bad.output
    assert len(list(row_groups(path))) == 2


def test_archive_bytes_is_an_archive(tmp_path):
    proto = ll.protocol("L-GRR", k=12, eps_perm=2.0, eps_1=1.0)
    reports = proto.perturb(np.arange(40) % 12, proto.new_memo(40), 9)
    wire_rows = np.frombuffer(proto.encode_reports(reports), np.uint8).reshape(40, -1)
    ids = np.random.default_rng(0).integers(0, 256, (40, 16), np.uint8)
    path = tmp_path / "export.parquet"
    path.write_bytes(archive_bytes(proto, "exported", 3, ids, wire_rows))
    info = read_info(path)
    assert info.collection == "exported" and info.num_rows == 40
    counts = aggregate_archive(path)
    np.testing.assert_array_equal(counts.by_epoch[3].support_counts, proto.support_counts(reports))
    with pytest.raises(ValueError, match="'epochs' must be integers"):
        archive_bytes(proto, "x", -1, ids, wire_rows)


def test_dask_tasks_are_few_runs_of_row_groups_covering_each_once(tmp_path):
    """About two tasks per worker thread, each a run of consecutive groups of one file."""
    from longldp.archive.aggregate import TASKS_PER_THREAD, dask_tasks
    from longldp.archive.layout import ArchiveInfo

    proto = ll.protocol("L-OSUE", k=20, eps_perm=2.0, eps_1=0.8)
    infos = [
        ArchiveInfo(tmp_path / f"{i}.parquet", "c", proto, 0, groups)
        for i, groups in enumerate((100, 7, 1))
    ]
    for threads in (1, 2, 8, 1000):
        tasks = dask_tasks(infos, threads)
        assert len(tasks) <= TASKS_PER_THREAD * threads + len(infos)
        seen = sorted((info.path.name, g) for info, groups in tasks for g in groups)
        assert seen == sorted((i.path.name, g) for i in infos for g in range(i.num_row_groups))
        for _, groups in tasks:
            assert groups == list(range(groups[0], groups[-1] + 1))
    assert [len(g) for _, g in dask_tasks(infos[:1], 2)] == [25] * 4  # 100 groups, 2 threads
    assert sorted(len(g) for _, g in dask_tasks([infos[1]], 2)) == [1, 2, 2, 2]  # 7 groups
