"""Pinned rows of the tiny studies: a refactor of the engines, the apps or the kinds must give
the same cells the same rows (docs/design.md §4–§5).

Three cells of every kind's tiny study (experiments/*_tiny.toml, experiments/tiny.toml), each
run under the three engines, are compared column by column with the rows saved in
``tests/data/pinned_study_rows.json`` (every column but the wall time ``runtime_s``): integers,
strings and booleans exactly, floats to a relative 1e-12 (a change of random stream or of
estimator moves them by far more; the last bits may differ between BLAS builds).

A deliberate change of results regenerates the file, and the diff shows which rows moved::

    python tests/test_study_rows_pinned.py
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from longldp.experiments.config import parse_study

ROOT = Path(__file__).resolve().parents[1]
PINNED = ROOT / "tests" / "data" / "pinned_study_rows.json"
ENGINES = ("per-user", "reports", "count-level")
#: Study file -> the cells pinned (indices in the study's cell order): chains, dBitFlipPM,
#: one-shot oracles, each app of the kind.
CELLS = {
    "tiny.toml": (0, 6, 9),  # L-GRR (paper), L-OUE, dBitFlipPM
    "allomfree_tiny.toml": (0, 14, 17),  # ALLOMFREE, SPL + L-OSUE, SMP + 1BitFlipPM
    "felip_tiny.toml": (0, 3, 5),  # OLOLOHA (paper), L-OSUE, one-shot OUE
    "setvalued_tiny.toml": (4, 18, 20),  # SVIM + OLOLOHA, SVSM one-shot, LDPMiner + L-OUE
    "gfim_tiny.toml": (1, 20, 22),  # GFIM (thesis), LDPMiner-SH, GFIM + L-SH (τ = 3)
}
SKIP_COLUMNS = ("runtime_s",)


def _rows(name: str, engine: str, index: int, out_dir: Path) -> list[dict[str, Any]]:
    document = tomllib.loads((ROOT / "experiments" / name).read_text())
    study = parse_study({**document, "engine": engine}, where=name)
    study = dataclasses.replace(study, out_dir=out_dir)
    cell = study.study_kind.cells(study)[index]
    rows = study.study_kind.run_cell(cell)
    return json.loads(
        json.dumps([{k: v for k, v in r.items() if k not in SKIP_COLUMNS} for r in rows])
    )


def _same(got: Any, want: Any, where: str) -> list[str]:
    """Where ``got`` differs from ``want`` (floats to a relative 1e-12)."""
    if isinstance(want, float) or isinstance(got, float):
        if not isinstance(got, int | float) or not isinstance(want, int | float):
            return [f"{where}: {got!r} != {want!r}"]
        if math.isnan(want) and math.isnan(got):
            return []
        ok = math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0)
        return [] if ok else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return [f"{where}: columns {sorted(set(got) ^ set(want))} differ"]
        return [d for k in want for d in _same(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in _same(g, w, f"{where}[{i}]")
        ]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


CASES = [(name, engine, i) for name, cells in CELLS.items() for engine in ENGINES for i in cells]


@pytest.fixture(scope="module")
def pinned() -> dict[str, Any]:
    return json.loads(PINNED.read_text())


@pytest.mark.parametrize(
    ("name", "engine", "index"), CASES, ids=[f"{n}-{e}-{i}" for n, e, i in CASES]
)
def test_cell_rows_are_pinned(pinned, tmp_path, name, engine, index):
    want = pinned[f"{name}|{engine}|{index}"]
    got = _rows(name, engine, index, tmp_path)
    assert len(got) == len(want), f"{len(got)} rows, pinned {len(want)}"
    assert any(r.get("status", "ok") == "ok" for r in want), "a pinned cell must not be skipped"
    diffs = _same(got, want, "rows")
    assert not diffs, "\n".join(diffs[:20])


def test_every_pinned_cell_is_a_case(pinned):
    assert sorted(pinned) == sorted(f"{n}|{e}|{i}" for n, e, i in CASES)


def _regenerate() -> None:  # pragma: no cover - run by hand on a deliberate change
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = {f"{n}|{e}|{i}": _rows(n, e, i, Path(tmp) / n) for n, e, i in CASES}
    PINNED.parent.mkdir(parents=True, exist_ok=True)
    PINNED.write_text(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {PINNED} ({len(out)} cells)")


if __name__ == "__main__":
    _regenerate()
    sys.exit(0)
