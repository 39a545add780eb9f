"""The randomized fault-injection simulation (tests/server_sim.py) on SQLite and PostgreSQL:
seeded sequences of uploads, replays, conflicting ids, lost answers, kill -9 mid-batch,
concurrent uploaders, epoch closes, exports and estimates against two real server processes,
the database checked against the model after every step.

``make test`` runs LONGLDP_SIM_SEQUENCES sequences in all (default 300, half per database);
``make soak`` runs 10,000. A failure prints its seed and a one-line replay command."""

from __future__ import annotations

import json
import os

import pytest
import sqlalchemy as sa

import longldp as ll
from longldp.server import db
from registry_cases import CLASSES, deployable
from server_sim import PROTOCOLS, Checker, Model, Simulation, SimulationError, sqlite_path

SEQUENCES = int(os.environ.get("LONGLDP_SIM_SEQUENCES", "300"))
FIRST_SEED = int(os.environ.get("LONGLDP_SIM_FIRST_SEED", "0"))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def simulation(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"sim-{request.param}")
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_cluster").new_database()
    else:
        url = sqlite_path(tmp)
    sim = Simulation(request.param, url, tmp)
    yield sim
    sim.close()


@pytest.mark.slow
def test_random_sequences_keep_every_invariant(simulation):
    per_backend = max(1, SEQUENCES // 2)
    offset = 0 if simulation.backend == "sqlite" else 1_000_000
    for seed in range(FIRST_SEED + offset, FIRST_SEED + offset + per_backend):
        simulation.run(seed)  # raises SimulationError naming the seed and the replay command


def test_the_sequences_cover_every_registered_protocol():
    """Sequence ``seed`` runs on PROTOCOLS[seed % len(PROTOCOLS)], one entry per registry case:
    every registered class that collections serve (not comparison-only) is simulated on both
    databases by ``make test``."""
    assert {type(ll.protocol_from_spec(s)) for s in PROTOCOLS} == {
        cls for cls in CLASSES if deployable(cls)
    }
    assert max(1, SEQUENCES // 2) >= len(PROTOCOLS)


def model_from_database(checker: Checker, name: str) -> Model:
    """The model of a finished sequence, rebuilt from what its collection holds."""
    with db.transaction(checker.engine, write=False) as conn:
        row = (
            conn.execute(sa.select(db.collections).where(db.collections.c.name == name))
            .mappings()
            .one()
        )
        ec = db.epoch_counts
        closed = conn.execute(
            sa.select(ec.c.epoch).where(ec.c.collection_id == row["id"], ec.c.closed)
        ).scalars()
        closed = {int(e) for e in closed}
    model = Model(
        name,
        ll.protocol_from_spec(json.loads(row["protocol_spec"])),
        row["auth"] == "shared",
        row["reports_per_epoch"],
        int(row["epoch_window"]),
        {},
    )
    model.closed = closed
    model.stored = checker.stored(model)
    return model


@pytest.mark.slow
def test_the_checker_catches_what_it_must(tmp_path):
    """The invariants can fail: a changed report, a lost one, a count off by one and an
    exceeded quota are each reported."""
    sim = Simulation("sqlite", sqlite_path(tmp_path), tmp_path)
    try:
        seed = next(s for s in range(50) if _stores_something(sim, s))
        checker = sim.checker
        model = model_from_database(checker, f"sim-{seed}")
        checker.check(model)
        key = sorted(model.stored)[0]
        epoch, wire = model.stored[key]
        r, ec = db.reports, db.epoch_counts
        cid = checker.collection_id(model)
        mine = sa.and_(r.c.collection_id == cid, r.c.device_id == key[0], r.c.report_id == key[1])
        row = {
            "collection_id": cid,
            "device_id": key[0],
            "report_id": key[1],
            "epoch": epoch,
            "cohort": None,
            "wire": wire,
        }
        at = sa.and_(ec.c.collection_id == cid, ec.c.epoch == epoch)
        other = wire[:12] + bytes(b ^ 1 for b in wire[12:])
        for change, restore, what in (
            (
                r.update().where(mine).values(wire=other),
                r.update().where(mine).values(wire=wire),
                "with other bytes",
            ),
            (r.delete().where(mine), r.insert().values(**row), "acknowledged missing"),
            (
                r.insert().values(**{**row, "report_id": bytes(16)}),
                r.delete().where(r.c.report_id == bytes(16)),
                "never acknowledged",
            ),
            (
                ec.update().where(at).values(n=ec.c.n + 1),
                ec.update().where(at).values(n=ec.c.n - 1),
                "reports are stored",
            ),
        ):
            with db.transaction(checker.engine, write=True) as conn:
                conn.execute(change)
            with pytest.raises(SimulationError, match=what):
                checker.check(model)
            with db.transaction(checker.engine, write=True) as conn:
                conn.execute(restore)
            checker.check(model)
        crowded = Model(model.name, model.proto, False, 1, model.window, {})
        two = {(7, bytes(16)): (3, wire), (7, bytes([1]) * 16): (3, wire)}
        with pytest.raises(SimulationError, match="quota of 1 exceeded"):
            Checker.check_quota(crowded, two)
        Checker.check_quota(crowded, dict(list(two.items())[:1]))
    finally:
        sim.close()


def _stores_something(sim: Simulation, seed: int) -> bool:
    sim.run(seed, steps=10)
    return bool(sim.checker.stored(model_from_database(sim.checker, f"sim-{seed}")))
