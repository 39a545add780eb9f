"""Multidimensional collection: SMP, SPL and ALLOMFREE (see ``docs/multidim.md``).

Modules: :mod:`.collection` (the three solutions on any chain), :mod:`.tables` (the ALLOMFREE
paper's Tables 1-2 regenerated).
"""

from longldp.apps.multidim.collection import (
    MultidimCollection,
    MultidimResult,
    allomfree_protocol,
    allomfree_vstar,
    mse_avg_multidim,
    simulate_multidim,
)
from longldp.apps.multidim.tables import AllomfreeTables, allomfree_tables

__all__ = [
    "AllomfreeTables",
    "MultidimCollection",
    "MultidimResult",
    "allomfree_protocol",
    "allomfree_tables",
    "allomfree_vstar",
    "mse_avg_multidim",
    "simulate_multidim",
]
