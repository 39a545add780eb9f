"""Results on disk: one Parquet part per finished cell, one table assembled from the parts.

Layout of an output folder::

    OUT/
      study.json          the study as read, with the library version
      parts/<cell_id>.parquet
      results.parquet     every row, in the study's cell order
      figures.json        the figures drawn from results.parquet (`record_figures`)
      workloads/          files a kind saves beside its results (felip)

A folder holds one study: running another study into it is refused unless forced
(`check_owner`, `clear`). The figures drawn from a table are listed in ``figures.json`` and
deleted when the table changes (`remove_figures`), so that no stale figure stays beside new
results.

A part is written to a temporary file in ``parts/`` (a name starting with ``.``), flushed to
disk and renamed onto ``<cell_id>.parquet``; the rename is atomic, so an interruption (Ctrl-C,
a killed process) leaves either the whole part or none, plus at most a temporary file that the
next run deletes. ``results.parquet`` is written the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "COMMON_HEAD",
    "COMMON_TAIL",
    "FIGURES",
    "PARTS",
    "RESULTS",
    "STUDY",
    "assemble",
    "check_owner",
    "clean_temporaries",
    "clear",
    "part_path",
    "read_json",
    "read_results",
    "record_figures",
    "remove_figures",
    "schema_for",
    "write_part",
]

PARTS = "parts"
RESULTS = "results.parquet"
STUDY = "study.json"
FIGURES = "figures.json"
WORKLOADS = "workloads"
_TMP_PREFIX = ".tmp-"

#: Columns before the kind's own.
COMMON_HEAD: tuple[pa.Field, ...] = (
    pa.field("study", pa.string()),
    pa.field("kind", pa.string()),
)
#: Columns after the kind's own: bookkeeping and provenance.
COMMON_TAIL: tuple[pa.Field, ...] = (
    pa.field("status", pa.string()),  # "ok" or "skipped"
    pa.field("skip_reason", pa.string()),
    pa.field("seed_entropy", pa.string()),  # decimal: the base seed may exceed int64
    pa.field("spawn_key", pa.list_(pa.int64())),
    pa.field("runtime_s", pa.float64()),
    pa.field("longldp_version", pa.string()),
    pa.field("cell_id", pa.string()),
)


def schema_for(columns: Sequence[pa.Field], metadata: Mapping[str, str] | None = None) -> pa.Schema:
    """Schema of a kind's rows: common head, the kind's columns, common tail."""
    fields = [*COMMON_HEAD, *columns, *COMMON_TAIL]
    meta = None if metadata is None else {k.encode(): v.encode() for k, v in metadata.items()}
    return pa.schema(fields, metadata=meta)


def part_path(out_dir: Path, cell_id: str) -> Path:
    """Where the part of cell ``cell_id`` lives."""
    return out_dir / PARTS / f"{cell_id}.parquet"


def _atomic_write(table: pa.Table, path: Path) -> None:
    tmp = path.parent / f"{_TMP_PREFIX}{path.stem}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with tmp.open("wb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_part(
    out_dir: Path, cell_id: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema
) -> Path:
    """Write the rows of one cell atomically (temporary file + rename); return the part path."""
    path = part_path(out_dir, cell_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
    _atomic_write(table, path)
    return path


def clean_temporaries(out_dir: Path) -> int:
    """Delete temporary files left in ``parts/`` by an interrupted run; return how many."""
    folder = out_dir / PARTS
    if not folder.is_dir():
        return 0
    removed = 0
    for tmp in folder.glob(f"{_TMP_PREFIX}*"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed += 1
    return removed


def assemble(
    out_dir: Path, cell_ids: Iterable[str], schema: pa.Schema, metadata: Mapping[str, Any]
) -> Path:
    """Concatenate the parts of ``cell_ids`` (in that order) into ``results.parquet``.

    Parts of cells that are not listed (left by an earlier version of the study) are ignored.
    ``metadata`` is stored as JSON under the schema metadata key ``longldp``.
    """
    tables = [pq.read_table(part_path(out_dir, cid), schema=schema) for cid in cell_ids]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    table = table.replace_schema_metadata({"longldp": json.dumps(dict(metadata), default=str)})
    path = out_dir / RESULTS
    _atomic_write(table, path)
    return path


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as indented JSON, atomically."""
    tmp = path.parent / f"{_TMP_PREFIX}{path.name}-{os.getpid()}"
    tmp.write_text(json.dumps(dict(payload), indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_results(path: str | Path) -> pa.Table:
    """Read a results table written by `assemble` (a clear error if it is missing)."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS
    if not p.is_file():
        raise ValueError(f"results file {str(p)!r} does not exist.")
    return pq.read_table(p)


def read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def check_owner(out_dir: Path, name: str, kind: str) -> bool:
    """Whether ``out_dir`` holds the results of another study than (``name``, ``kind``).

    Returns
    -------
    bool
        True when its ``study.json`` names another study or kind; False when the folder is
        new, empty or holds this study (a resume).
    """
    meta = read_json(out_dir / STUDY)
    if not isinstance(meta, dict):
        return False
    return (meta.get("study"), meta.get("kind")) != (name, kind)


def owner(out_dir: Path) -> str:
    """``'<study>' (kind <kind>)`` of the results in ``out_dir``, for messages."""
    meta = read_json(out_dir / STUDY) or {}
    return f"{meta.get('study')!r} (kind {meta.get('kind')})"


def clear(out_dir: Path) -> None:
    """Delete a study's results from ``out_dir``: its table, parts, metadata, saved workloads
    and the figures drawn from it. Other files are left alone."""
    import shutil

    remove_figures(out_dir)
    for name in (RESULTS, STUDY):
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()
    for name in (PARTS, WORKLOADS):
        if (out_dir / name).is_dir():
            shutil.rmtree(out_dir / name)


def record_figures(results_dir: Path, paths: Iterable[Path]) -> None:
    """Add ``paths`` to the list of figures drawn from the table in ``results_dir``."""
    listed = read_json(results_dir / FIGURES)
    known = list(listed) if isinstance(listed, list) else []
    for p in paths:  # relative to the results folder: the folder can move (or be committed)
        text = os.path.relpath(Path(p).resolve(), results_dir.resolve())
        if text not in known:
            known.append(text)
    write_json_list(results_dir / FIGURES, known)


def write_json_list(path: Path, items: Sequence[str]) -> None:
    """Write a JSON list atomically."""
    tmp = path.parent / f"{_TMP_PREFIX}{path.name}-{os.getpid()}"
    tmp.write_text(json.dumps(list(items), indent=2) + "\n")
    os.replace(tmp, path)


def remove_figures(results_dir: Path) -> int:
    """Delete the figures drawn from the table in ``results_dir`` (its ``figures.json``, and
    the ``mse_avg*.png`` files of the default ``plots/`` folder); return how many."""
    listed = read_json(results_dir / FIGURES)
    paths = [results_dir / p for p in listed] if isinstance(listed, list) else []
    paths += sorted((results_dir / "plots").glob("mse_avg*.png"))
    removed = 0
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed += 1
    with contextlib.suppress(FileNotFoundError):
        (results_dir / FIGURES).unlink()
    return removed
