"""Applications built on the protocol objects (design §6): FELIP range queries, multidimensional
collection (SMP, SPL, ALLOMFREE), set-valued mining (SVIM, SVSM, LDPMiner).

``longldp.apps`` imports only the layers above it: privacy, protocols, postprocess, metrics,
data and simulate.
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
from longldp.apps.multidim.collection import (
    MultidimCollection,
    MultidimResult,
    allomfree_protocol,
    allomfree_vstar,
    mse_avg_multidim,
    simulate_multidim,
)
from longldp.apps.multidim.tables import AllomfreeTables, allomfree_tables
from longldp.apps.setvalued.mining import (
    SVIM,
    SVSM,
    LDPMiner,
    LDPMinerParams,
    MiningResult,
    OracleSpec,
    SetValuedRun,
    SetValuedTruth,
    SVIMParams,
    SVSMParams,
    TopK,
    evaluate,
    oneshot_psfo,
    psfo_channel,
    setvalued_truth,
)
from longldp.apps.setvalued.mining import make_spec as setvalued_spec
from longldp.apps.setvalued.mining import mine as mine_setvalued

__all__ = [
    "SVIM",
    "SVSM",
    "AllomfreeTables",
    "Attribute",
    "EstimationOptions",
    "FelipModel",
    "FelipPlan",
    "FelipResult",
    "FelipSchema",
    "LDPMiner",
    "LDPMinerParams",
    "MiningResult",
    "MultidimCollection",
    "MultidimResult",
    "OracleSpec",
    "Query",
    "SVIMParams",
    "SVSMParams",
    "SetValuedRun",
    "SetValuedTruth",
    "TopK",
    "Workload",
    "allomfree_protocol",
    "allomfree_tables",
    "allomfree_vstar",
    "evaluate",
    "felip_table",
    "fit_model",
    "generate_workload",
    "make_query",
    "mine_setvalued",
    "mse_avg_multidim",
    "oneshot_psfo",
    "plan_felip",
    "psfo_channel",
    "run_felip",
    "setvalued_spec",
    "setvalued_truth",
    "simulate_felip",
    "simulate_multidim",
]
