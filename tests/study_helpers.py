"""Helpers shared by the experiment-runner tests of every study kind."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from longldp.cli import app

#: Columns that depend on the wall clock, not on the study.
VOLATILE = ("runtime_s",)


def stable(table: pa.Table) -> pa.Table:
    """The table without wall-clock columns (everything else is a function of the study)."""
    return table.drop_columns([c for c in VOLATILE if c in table.column_names])


def run_study_cli(study: Path, out: Path, expect: str, workers: int = 1) -> pa.Table:
    """``longldp run STUDY --out OUT`` through the CLI; checks the exit code and that the
    summary mentions ``expect``; returns the results table."""
    result = CliRunner().invoke(
        app, ["run", str(study), "--out", str(out), "--workers", str(workers)]
    )
    assert result.exit_code == 0, result.output
    assert expect in result.output
    return pq.read_table(out / "results.parquet")
