"""Defences over stored reports: report archives with a device column (docs/attacks.md §9).

A report archive (``longldp.archive.layout``) holds one row per report: ``epoch``, ``cohort``,
``report_id`` and the wire-format ``report``. The report-level defences also need to know which
reports came from the same device, so they read one more column, ``device`` (by default): any
integer or fixed-size binary id, one per device. A collection server's per-device export is
expected to carry it under that name; :func:`write_device_archive` writes such an archive from
stored reports (tests, simulations).

The defences hold the whole window in memory (a device's history must be seen at once): about
wire_size + 16 bytes per report.
"""

from __future__ import annotations

from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.archive.aggregate import archive_files
from longldp.archive.layout import WRITE_OPTIONS, archive_schema, read_info, report_table
from longldp.attacks.defences import detection, memo, normalization
from longldp.attacks.runner import ReportLog
from longldp.protocols import FrequencyOracle, wire

OWNER = "defended aggregate"
#: Defences ``longldp aggregate --defence`` runs over an archive.
ARCHIVE_DEFENCES = ("memo", "memo-replay", "detect", "normalize")
DEVICE_COLUMN = "device"


def write_device_archive(
    path: str | Path,
    proto: FrequencyOracle,
    log: ReportLog,
    collection: str = "default",
    rng: Any = None,
) -> Path:
    """Write ``log``'s reports as an archive with a ``device`` (uint64) column."""
    gen = np.random.default_rng(rng)
    rows = np.frombuffer(proto.encode_reports(log.records), dtype=np.uint8)
    rows = rows.reshape(-1, proto.wire_size)
    ids = gen.integers(0, 256, size=(rows.shape[0], 16), dtype=np.uint8)
    schema = archive_schema(proto, collection)
    table = report_table(proto, schema, log.epoch, ids, rows)
    table = table.append_column(
        pa.field(DEVICE_COLUMN, pa.uint64(), nullable=False),
        pa.array(np.asarray(log.device, dtype=np.uint64)),
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **WRITE_OPTIONS)
    return path


def read_device_reports(
    paths: Any, device_column: str = DEVICE_COLUMN
) -> tuple[FrequencyOracle, NDArray, NDArray[np.int64], NDArray]:
    """(protocol, device ids, epochs, decoded records) of every report of the archive(s)."""
    files = archive_files(paths)
    if not files:
        raise ValueError(f"{OWNER}: no archive file in {paths!r}.")
    proto: FrequencyOracle | None = None
    devices, epochs, records = [], [], []
    for path in files:
        info = read_info(path)
        if proto is None:
            proto = info.protocol
        elif info.protocol.spec() != proto.spec():
            raise ValueError(f"{OWNER}: {path} holds another protocol than {files[0]}.")
        names = pq.read_schema(path).names
        if device_column not in names:
            raise ValueError(
                f"{OWNER}: {path} has no '{device_column}' column; report-level defences need "
                "each report's device id (a server's per-device export, or an archive written "
                "by longldp.attacks.archive.write_device_archive)."
            )
        table = pq.read_table(path, columns=["epoch", "report", device_column])
        width = proto.wire_size
        raw = table.column("report").combine_chunks()
        rows = np.frombuffer(raw.buffers()[1], dtype=np.uint8)[
            raw.offset * width : (raw.offset + len(raw)) * width
        ].reshape(-1, width)
        wire.check_headers(proto, rows)
        records.append(wire.decode_rows(proto, rows))
        epochs.append(table.column("epoch").to_numpy().astype(np.int64))
        col = table.column(device_column).combine_chunks()
        if pa.types.is_fixed_size_binary(col.type) or pa.types.is_binary(col.type):
            devices.append(np.array(col.to_pylist(), dtype=object).astype(bytes))
        else:
            devices.append(col.to_numpy(zero_copy_only=False))
    assert proto is not None
    return proto, np.concatenate(devices), np.concatenate(epochs), np.concatenate(records)


def defended_rows(
    paths: Any,
    defence: str,
    *,
    alpha: float = memo.ALPHA,
    level: float = 0.95,
    device_column: str = DEVICE_COLUMN,
    min_share: float | None = None,
) -> tuple[FrequencyOracle, list[dict], dict[str, Any]]:
    """Estimates per (epoch, value) after ``defence``, in the rows of ``longldp aggregate``.

    Returns (protocol, rows, summary). ``memo``: devices flagged by memo consistency are
    dropped and the rest read with the kept law; ``memo-replay``: the same with the replay test
    only (for populations whose values change, docs/attacks.md §7.1); ``detect``: devices with a
    report that supports enough of a flagged itemset are dropped (the threshold derived at the
    budget ``alpha`` of honest devices, or a fixed ``min_share`` of the itemset,
    docs/attacks.md §8.2); ``normalize``: [CJG21]'s normalization of each epoch's estimate (no
    device column needed).
    """
    defence = check.choice(OWNER, "defence", defence, ARCHIVE_DEFENCES)
    alpha = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    if defence == "normalize":
        return _normalized(paths, z, level)
    proto, dev, ep, rec = read_device_reports(paths, device_column)
    epochs = np.unique(ep)
    rows: list[dict] = []
    if defence in ("memo", "memo-replay"):
        memo.check_applies(proto, OWNER)
        tests = "replay" if defence == "memo-replay" else "one-value"
        verdict = memo.memo_consistency(proto, dev, rec, alpha=alpha, tests=tests)
        est = memo.defended_estimates(proto, verdict, ep, rec, epochs)
        kept_report = verdict.kept[verdict.index]
        summary = {
            "devices": int(verdict.devices.size),
            "flagged_devices": int(verdict.flagged.sum()),
            "stated_fpr": float(verdict.stated_fpr()),
        }
        for i, t in enumerate(epochs):
            at = (ep == t) & kept_report
            taus = verdict.n_reports[verdict.index[at]]
            var = np.zeros(proto.k)
            total = int(at.sum())
            for tau in np.unique(taus):
                n_g = int((taus == tau).sum())
                _, p1k, p0k = memo.kept_law(proto, int(tau), alpha, tests)
                f = np.clip(est[i], 0, 1)
                var += (n_g / total) ** 2 * (
                    (f * p1k * (1 - p1k) + (1 - f) * p0k * (1 - p0k)) / (n_g * (p1k - p0k) ** 2)
                )
            rows += _rows(int(t), total, est[i], np.sqrt(var), z)
        return proto, rows, summary
    detection.check_applies(proto, OWNER)
    flag, found = detection.detect_over_epochs(
        proto, dev, ep, rec, alpha=alpha, min_share=min_share
    )
    thresholds = {
        items: need for det in found for items, need in zip(det.itemsets, det.needs, strict=True)
    }
    summary = {
        "devices": int(np.unique(dev).size),
        "flagged_devices": int(np.unique(dev[flag]).size),
        "itemsets": sorted(thresholds),
        "needs": [thresholds[items] for items in sorted(thresholds)],
        "stated_fpr": float(sum(det.stated_fpr for det in found)),
    }
    for t in epochs:
        keep = (ep == t) & ~flag
        n = int(keep.sum())
        e = proto.estimate_with_se(proto.support_counts(rec[keep]), n, level=level)
        rows += _rows(int(t), n, e.estimate, e.se, z)
    return proto, rows, summary


def _normalized(
    paths: Any, z: float, level: float
) -> tuple[FrequencyOracle, list[dict], dict[str, Any]]:
    """[CJG21]'s normalization of each epoch's estimate; the standard error is the unbiased
    estimate's (``estimate_with_se``), the interval is centred on the normalized estimate."""
    from longldp.archive import aggregate_archive

    counts = aggregate_archive(paths)
    proto = counts.protocol
    if not proto.estimates_frequencies:
        raise ValueError(
            f"{OWNER}: defence 'normalize' needs a frequency estimate; '{proto.name}' "
            "estimates per-cohort bit shares (estimates_frequencies is False)."
        )
    rows: list[dict] = []
    for epoch in sorted(counts.by_epoch):
        agg = counts.by_epoch[epoch]
        e = agg.estimate_with_se(level=level)
        est = normalization.cao_normalize(e.raw)
        rows += _rows(int(epoch), int(agg.n), est, e.se, z)
    return proto, rows, {"devices": None, "flagged_devices": 0}


def _rows(epoch: int, n: int, est: NDArray, se_values: NDArray, z: float) -> list[dict]:
    se = np.asarray(se_values, dtype=np.float64)
    return [
        {
            "epoch": epoch,
            "value": v,
            "reports": n,
            "support": None,
            "estimate": float(est[v]),
            "se": float(se[v]),
            "lower": float(est[v] - z * se[v]),
            "upper": float(est[v] + z * se[v]),
        }
        for v in range(est.size)
    ]
