"""Fixtures shared across test modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for the whole session (server tests)."""
    from server_helpers import PgCluster, pg_bin, require

    require(pg_bin() is not None, "PostgreSQL (initdb, pg_ctl)")
    cluster = PgCluster()
    yield cluster
    cluster.destroy()
