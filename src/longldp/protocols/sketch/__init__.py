"""Open item spaces: sketch oracles (CMS, HCMS, PCS, SHE, THE) and heavy-hitter discovery
(PEM, TreeHist, SFP) as pure vectorized kernels (docs/math.md §21).

Phase 1 of issue 31: the kernels take arrays and an explicit generator and return arrays; they
subclass nothing. Their formulas are :mod:`longldp.privacy.sketch`.
"""

from __future__ import annotations

from longldp.protocols.sketch import discovery, items, oracles
from longldp.protocols.sketch.discovery import (
    Discovery,
    PrefixPlan,
    RoundOracle,
    Selection,
    SFPPlan,
    detection_probability,
    discover,
    discover_over_time,
    pem_plan,
    sfp_discover,
    treehist_plan,
)
from longldp.protocols.sketch.items import IntegerItems, TextItems, text_keys
from longldp.protocols.sketch.oracles import SketchConfig, SketchState

__all__ = [
    "Discovery",
    "IntegerItems",
    "PrefixPlan",
    "RoundOracle",
    "SFPPlan",
    "Selection",
    "SketchConfig",
    "SketchState",
    "TextItems",
    "detection_probability",
    "discover",
    "discover_over_time",
    "discovery",
    "items",
    "oracles",
    "pem_plan",
    "sfp_discover",
    "text_keys",
    "treehist_plan",
]
