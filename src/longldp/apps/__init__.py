"""Applications built on the protocol objects (DESIGN §1): multidimensional collection, ...

``longldp.apps`` imports only the layers above it: privacy, protocols, postprocess, metrics,
data and simulate.
"""

from longldp.apps.multidim import (
    MultidimCollection,
    MultidimResult,
    allomfree_protocol,
    allomfree_vstar,
    mse_avg_multidim,
    simulate_multidim,
)
from longldp.apps.multidim_tables import AllomfreeTables, allomfree_tables

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
