"""Fixtures shared across test modules, and the one rule for real parts.

Real parts (markers ``postgres``, ``browser``, ``dask``, ``install``, ``node``; tests/real_parts.py
says how each is detected): before a marked test runs, a missing part skips it on a developer's
machine and fails it under ``CI=true``. No test skips on its own. ``slow`` marks the slowest
tests: ``pytest -m "not slow"`` is the inner loop; ``make test`` and CI run everything.
"""

from __future__ import annotations

import os

import pytest

from real_parts import IN_CI, missing_parts

# pytest-xdist's workers inherit COLUMNS=80 / LINES=24 from execnet; the CLI honours COLUMNS off
# a terminal, so a worker would draw 80-column tables where a serial run draws 160. Tests that
# care about the width set COLUMNS themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

#: Fixtures that start a real part: a test using one gets the part's marker without saying so
#: (the ``backend`` fixtures mark their PostgreSQL parameter themselves).
FIXTURE_MARKERS = {"pg_cluster": "postgres", "dask_cluster": "dask"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)


@pytest.hookimpl(tryfirst=True)  # before any fixture starts the part
def pytest_runtest_setup(item):  # type: ignore[no-untyped-def]
    missing = missing_parts({m.name for m in item.iter_markers()})
    if not missing:
        return
    what = "; ".join(missing)
    if IN_CI:
        pytest.fail(f"{what}: required in CI (CI=true) but missing", pytrace=False)
    pytest.skip(f"{what} not available (under CI=true this fails)")


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def backend(request, tmp_path):
    """The server's database URL: a SQLite file, and a fresh database on a real PostgreSQL."""
    from server_helpers import db_url

    pg = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    return db_url(request.param, pg, tmp_path)


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for the whole session (server tests)."""
    from server_helpers import PgCluster

    cluster = PgCluster()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="session")
def dask_cluster():
    """A real Dask cluster on loopback: two worker processes of one thread each."""
    from longldp.archive import local_cluster

    with local_cluster(2) as cluster:
        yield cluster
