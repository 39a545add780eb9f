"""Frequency oracles: one frozen dataclass per protocol, reachable by name.

>>> import longldp as ll
>>> proto = ll.protocol("L-OSUE", k=74, eps_perm=2.0, eps_1=0.8)
>>> ll.protocols()[0].name, ll.protocols()[0].wire_id
('GRR', 1)

This package is also callable: ``longldp.protocols()`` lists the registry (see
:func:`list_protocols`).
"""

from __future__ import annotations

import sys
import types

from longldp.protocols import wire
from longldp.protocols._memo import MemoStore, PopulationMemo
from longldp.protocols._registry import (
    ALIASES,
    NAMES,
    PROTOCOL_CLASSES,
    REGISTRY,
    ProtocolInfo,
    aggregator_from_state,
    get_protocol_class,
    list_protocols,
    protocol,
    protocol_from_spec,
)
from longldp.protocols._rng import HmacRandom, SecureRandom
from longldp.protocols.base import Aggregator, Estimate, FrequencyOracle, OneShot
from longldp.protocols.client import Client, DerivedRound1, DrawnRound1, Round1Source
from longldp.protocols.codec import ReportCodec
from longldp.protocols.dbitflip import DBitFlipPM
from longldp.protocols.estimator import Estimator, SupportEstimator
from longldp.protocols.grr import GRR, LGRR
from longldp.protocols.hadamard import LSH, SH
from longldp.protocols.lh import BLH, OLH, OLOLOHA, BiLOLOHA
from longldp.protocols.mechanism import Mechanism, PopulationStep
from longldp.protocols.rappor import (
    RAPPOR,
    RapporBoolean,
    RapporBooleanOneTime,
    RapporOneHot,
    RapporOneHotOneTime,
    RapporOneTime,
)
from longldp.protocols.report_kinds import (
    BitReports,
    ContinuousReport,
    EnumeratedReports,
    ExactChannel,
    HashFamily,
    ReportKind,
    SymbolReports,
)
from longldp.protocols.sketch.mechanisms import CMS, HCMS, LCMS, LHCMS, PCS, SHE, THE
from longldp.protocols.subset import SubsetSelection
from longldp.protocols.traits import (
    Categorical,
    Domain,
    Estimand,
    Interval,
    ItemSpace,
    Rounds,
    Strings,
)
from longldp.protocols.ue import LOSUE, LOUE, LSOUE, LSUE, OUE, SUE


class _CallableModule(types.ModuleType):
    def __call__(self) -> list[ProtocolInfo]:
        return list_protocols()


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "ALIASES",
    "BLH",
    "CMS",
    "GRR",
    "HCMS",
    "LCMS",
    "LGRR",
    "LHCMS",
    "LOSUE",
    "LOUE",
    "LSH",
    "LSOUE",
    "LSUE",
    "NAMES",
    "OLH",
    "OLOLOHA",
    "OUE",
    "PCS",
    "PROTOCOL_CLASSES",
    "RAPPOR",
    "REGISTRY",
    "SH",
    "SHE",
    "SUE",
    "THE",
    "Aggregator",
    "BiLOLOHA",
    "BitReports",
    "Categorical",
    "Client",
    "ContinuousReport",
    "DBitFlipPM",
    "DerivedRound1",
    "Domain",
    "DrawnRound1",
    "EnumeratedReports",
    "Estimand",
    "Estimate",
    "Estimator",
    "ExactChannel",
    "FrequencyOracle",
    "HashFamily",
    "HmacRandom",
    "Interval",
    "ItemSpace",
    "Mechanism",
    "MemoStore",
    "OneShot",
    "PopulationMemo",
    "PopulationStep",
    "ProtocolInfo",
    "RapporBoolean",
    "RapporBooleanOneTime",
    "RapporOneHot",
    "RapporOneHotOneTime",
    "RapporOneTime",
    "ReportCodec",
    "ReportKind",
    "Round1Source",
    "Rounds",
    "SecureRandom",
    "Strings",
    "SubsetSelection",
    "SupportEstimator",
    "SymbolReports",
    "aggregator_from_state",
    "get_protocol_class",
    "list_protocols",
    "protocol",
    "protocol_from_spec",
    "wire",
]
