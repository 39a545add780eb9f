"""longldp: local differential privacy over longitudinal data.

Memoizing frequency oracles with exact privacy parameters, unbiased estimators and exact
variances; post-processing; and (in later layers) simulation engines, applications and
experiments. See docs/design.md for the layers and docs/math.md for the math.
"""

from longldp import postprocess, privacy, protocols
from longldp.protocols import (
    FrequencyOracle,
    get_protocol_class,
    list_protocols,
    protocol,
    protocol_from_spec,
)

__version__ = "0.1.0"

__all__ = [
    "FrequencyOracle",
    "__version__",
    "get_protocol_class",
    "list_protocols",
    "postprocess",
    "privacy",
    "protocol",
    "protocol_from_spec",
    "protocols",
]
