"""Fixtures shared across test modules."""

from __future__ import annotations

import os

import pytest

# pytest-xdist's workers inherit COLUMNS=80 / LINES=24 from execnet; the CLI honours COLUMNS off
# a terminal, so a worker would draw 80-column tables where a serial run draws 160. Tests that
# care about the width set COLUMNS themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for the whole session (server tests)."""
    from server_helpers import PgCluster, pg_bin, require

    require(pg_bin() is not None, "PostgreSQL (initdb, pg_ctl)")
    cluster = PgCluster()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="session")
def dask_cluster():
    """A real Dask cluster on loopback: two worker processes of one thread each.

    ``distributed`` is imported here, not skipped: a run without Dask fails the tests that
    use this fixture.
    """
    import distributed  # noqa: F401  (missing Dask fails here, loudly)

    from longldp.archive import local_cluster

    with local_cluster(2) as cluster:
        yield cluster
