"""Run a population of clients over τ timestamps (docs/design.md §4).

- :mod:`~longldp.simulate.engines`: the engine names, defined once (``ENGINES``), and what each
  engine reproduces;
- :mod:`~longldp.simulate.population`: :class:`Population`, n users in reporting groups, the
  one place that runs the engines, and their spent budgets; every application simulates
  through it;
- :mod:`~longldp.simulate.simulation`: :func:`simulate`, one protocol over a dataset
  ``values[τ, n]``, and its :class:`Simulation` result.
"""

from __future__ import annotations

from longldp.simulate.engines import (
    COUNT_LEVEL,
    ENGINES,
    PER_USER,
    REPORTS,
    check_applies,
    check_engine,
    engines_for,
)
from longldp.simulate.population import Epoch, Population, ReportingGroup, SpentByUser
from longldp.simulate.simulation import Simulation, simulate

__all__ = [
    "COUNT_LEVEL",
    "ENGINES",
    "PER_USER",
    "REPORTS",
    "Epoch",
    "Population",
    "ReportingGroup",
    "Simulation",
    "SpentByUser",
    "check_applies",
    "check_engine",
    "engines_for",
    "simulate",
]
