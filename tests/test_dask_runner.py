"""The study runner on a real Dask cluster (a ``distributed.LocalCluster`` of two worker
processes on loopback): identical results to the process pool, and resume after an interrupt.

Every test here carries the ``dask`` marker: where Dask is missing they fail under CI=true
(tests/conftest.py), so a CI run without Dask is red, not silently skipped.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from longldp.experiments import Cell, run_study, store
from study_helpers import stable

pytestmark = [pytest.mark.dask, pytest.mark.slow]  # a real cluster and study runs

TINY = Path(__file__).resolve().parents[1] / "experiments" / "tiny.toml"


@pytest.fixture(scope="module")
def pool_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool")
    return pq.read_table(run_study(TINY, out, workers=2, progress=False).path)


def test_dask_results_equal_the_process_pool(tmp_path, dask_cluster, pool_result):
    report = run_study(TINY, tmp_path, scheduler=dask_cluster.scheduler_address, progress=False)
    assert report.computed == report.cells
    assert stable(pq.read_table(report.path)).equals(stable(pool_result))


def test_dask_run_resumes_after_an_interrupt(tmp_path, dask_cluster, pool_result):
    seen: list[str] = []

    def stop_after_three(cell: Cell) -> None:
        seen.append(cell.cell_id)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_study(
            TINY,
            tmp_path,
            scheduler=dask_cluster.scheduler_address,
            progress=False,
            on_cell_done=stop_after_three,
        )
    saved = sorted(p.name for p in (tmp_path / store.PARTS).iterdir())
    assert saved == sorted(f"{c}.parquet" for c in seen)
    report = run_study(TINY, tmp_path, scheduler=dask_cluster.scheduler_address, progress=False)
    assert report.resumed == 3
    assert report.computed == report.cells - 3
    assert stable(pq.read_table(report.path)).equals(stable(pool_result))
