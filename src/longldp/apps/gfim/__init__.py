"""GFIM: frequent items of set-valued data with Hadamard randomized response (SH), one-shot and
longitudinal, with sampling S-Hist and the LDPMiner-SH baseline.

>>> from longldp.apps.gfim import GFIM, GFIMParams, LDPMinerSH, synthetic_sets, evaluate
>>> from longldp.apps.setvalued.oracle import OracleSpec
>>> data = synthetic_sets(20_000, "laplace", rng=0)               # doctest: +SKIP
>>> gfim = GFIM(30, OracleSpec("SH", eps=2.0), GFIMParams(k_max=60))
>>> res = gfim.run(data, rng=1)                                   # doctest: +SKIP
>>> evaluate(res, data)["precision_avg"]                          # doctest: +SKIP

Modules: :mod:`~longldp.apps.gfim.shist` (sampling S-Hist and its exact variance),
:mod:`~longldp.apps.gfim.gfim` (GFIM), :mod:`~longldp.apps.gfim.baseline` (LDPMiner-SH),
:mod:`~longldp.apps.gfim.metrics` (precision, RE), :mod:`~longldp.apps.gfim.data` (the
studies' populations). Formulas: docs/math.md §12; design and findings: docs/gfim.md.
"""

from longldp.apps.gfim.baseline import LDPMinerSH
from longldp.apps.gfim.data import (
    census_sets,
    changing_population,
    item_probabilities,
    planted_sets,
    synthetic_sets,
)
from longldp.apps.gfim.gfim import (
    COMBINES,
    GFIM,
    GFIMParams,
    GFIMResult,
    GFIMRun,
    combine_estimates,
)
from longldp.apps.gfim.metrics import evaluate, relative_error
from longldp.apps.gfim.shist import sampling_shist, sampling_target, shist_variance

__all__ = [
    "COMBINES",
    "GFIM",
    "GFIMParams",
    "GFIMResult",
    "GFIMRun",
    "LDPMinerSH",
    "census_sets",
    "changing_population",
    "combine_estimates",
    "evaluate",
    "item_probabilities",
    "planted_sets",
    "relative_error",
    "sampling_shist",
    "sampling_target",
    "shist_variance",
    "synthetic_sets",
]
