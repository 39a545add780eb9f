"""RAPPOR collection of strings ([ERL14]): decoding against candidates with significance,
google/rappor's file formats, association of two variables, and the paper's studies.

The protocol (encoders, cohorts, PRR/IRR, clients) is :class:`longldp.protocols.RAPPOR`.
"""

from longldp.apps.rappor.association import Association, associate, report_likelihoods
from longldp.apps.rappor.decode import (
    DecodeResult,
    bit_estimates,
    decode,
    decode_boolean,
    design_matrix,
    select,
)

__all__ = [
    "Association",
    "DecodeResult",
    "associate",
    "bit_estimates",
    "decode",
    "decode_boolean",
    "design_matrix",
    "report_likelihoods",
    "select",
]
