"""RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014): one class per encoder, and one-time variants.

- :class:`RAPPOR` ("RAPPOR", wire id 14): Bloom filters of strings, google/rappor's MD5 hashing;
- :class:`RapporOneHot` ("RAPPOR-onehot"): basic RAPPOR, a one-hot int in [0, k);
- :class:`RapporBoolean` ("RAPPOR-boolean"): one bit;
- :class:`RapporOneTime`, :class:`RapporOneHotOneTime`, :class:`RapporBooleanOneTime`: the same
  encoders with one report per client (nothing memoized, f = 0 allowed).

The shared chain (PRR, IRR, cohorts, the report body) is :mod:`._chain`; the hashing is
:mod:`._hashing`; one device is the generic client with RAPPOR's PRR sources
(:mod:`.client`).
"""

from longldp.protocols.rappor._chain import CohortShares, OneTime, RapporChain, RapporMemo
from longldp.protocols.rappor._hashing import (
    MAX_COHORTS,
    bits_to_int,
    bloom_bits,
    bloom_indices,
    candidate_map,
    int_to_bits,
)
from longldp.protocols.rappor.bloom import BLOOM_HASHES, RAPPOR, RapporOneTime
from longldp.protocols.rappor.boolean import RapporBoolean, RapporBooleanOneTime
from longldp.protocols.rappor.client import PRR_SOURCES, RapporPrf, RapporPy, rappor_client
from longldp.protocols.rappor.onehot import RapporOneHot, RapporOneHotOneTime

__all__ = [
    "BLOOM_HASHES",
    "MAX_COHORTS",
    "PRR_SOURCES",
    "RAPPOR",
    "CohortShares",
    "OneTime",
    "RapporBoolean",
    "RapporBooleanOneTime",
    "RapporChain",
    "RapporMemo",
    "RapporOneHot",
    "RapporOneHotOneTime",
    "RapporOneTime",
    "RapporPrf",
    "RapporPy",
    "bits_to_int",
    "bloom_bits",
    "bloom_indices",
    "candidate_map",
    "int_to_bits",
    "rappor_client",
]
