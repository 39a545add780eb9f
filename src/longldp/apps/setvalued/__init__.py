"""Set-valued mining under LDP, one-shot and longitudinal: SVIM, SVSM, LDPMiner.

The front door is :mod:`.mining` (one call per study cell); see ``docs/setvalued.md``. Modules:
:mod:`.psfo` (padding-and-sampling frequency oracles), :mod:`.oracle` (oracle choice and
budget), :mod:`.miner` (the timeline-miner base, also of GFIM and LDPMiner-SH), :mod:`.svim`,
:mod:`.svsm`, :mod:`.ldpminer`, :mod:`.metrics`, :mod:`.common`.
"""

from longldp.apps.setvalued.mining import *  # noqa: F403  (the package re-exports its front door)
from longldp.apps.setvalued.mining import __all__  # noqa: F401
