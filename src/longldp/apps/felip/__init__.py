"""FELIP: range and multidimensional queries over grids of attributes (see ``docs/felip.md``).

Modules: :mod:`.grids` (schema and grids), :mod:`.sizing` (grid sizes), :mod:`.queries`
(queries and workloads), :mod:`.data` (tables), :mod:`.estimate` (response matrices and
consistency), :mod:`.pipeline` (plan, collect, answer).
"""

from longldp.apps.felip.data import felip_table
from longldp.apps.felip.estimate import EstimationOptions, FelipModel, fit_model
from longldp.apps.felip.grids import Attribute, FelipSchema
from longldp.apps.felip.pipeline import (
    FelipPlan,
    FelipResult,
    plan_felip,
    run_felip,
    simulate_felip,
)
from longldp.apps.felip.queries import Query, Workload, generate_workload, make_query

__all__ = [
    "Attribute",
    "EstimationOptions",
    "FelipModel",
    "FelipPlan",
    "FelipResult",
    "FelipSchema",
    "Query",
    "Workload",
    "felip_table",
    "fit_model",
    "generate_workload",
    "make_query",
    "plan_felip",
    "run_felip",
    "simulate_felip",
]
