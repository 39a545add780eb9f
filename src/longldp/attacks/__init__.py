"""Poisoning attacks on (longitudinal) local differential privacy, and defences.

Fake users inject crafted reports to raise the estimates of target items (Cao, Jia and Gong,
"Data Poisoning Attacks to Local Differential Privacy Protocols", USENIX Security 2021).
Modules (docs/attacks.md):

- :mod:`.threat`: the threat model as data (β or m fake users, targets, timeline);
- :mod:`.kinds`: the attack kind of a protocol, derived from its traits (report kind);
- :mod:`.crafting`: RPA, RIA and MGA reports (and memos) and their expected support;
- :mod:`.occupancy`: the law of MGA's hash search against local hashing;
- :mod:`.gains`: closed-form expected gains from longldp's estimator;
- :mod:`.runner`: attacks over τ epochs on the count-level, per-user and reports engines;
- :mod:`.defences`: normalization, fake-user detection, recovery, memo consistency;
- :mod:`.apps`: attacks on RAPPOR's decoder, the set-valued miners and FELIP.

Layer (docs/design.md §1): after the applications, before the experiments.
"""

from longldp.attacks.crafting import (
    ATTACKS,
    HASH_TRIALS,
    craft_memos,
    craft_reports,
    expected_memo_support,
    expected_support,
    memo_reports,
    reading,
)
from longldp.attacks.gains import (
    VARIANTS,
    GainForecast,
    cao_table1,
    expected_gain,
    expected_time_average_gain,
    fake_reading,
)
from longldp.attacks.kinds import KINDS, attack_kind
from longldp.attacks.runner import AttackRun, ReportLog, collect_reports, run_attack
from longldp.attacks.threat import ThreatModel, fake_count

__all__ = [
    "ATTACKS",
    "HASH_TRIALS",
    "KINDS",
    "VARIANTS",
    "AttackRun",
    "GainForecast",
    "ReportLog",
    "ThreatModel",
    "attack_kind",
    "cao_table1",
    "collect_reports",
    "craft_memos",
    "craft_reports",
    "expected_gain",
    "expected_memo_support",
    "expected_support",
    "expected_time_average_gain",
    "fake_count",
    "fake_reading",
    "memo_reports",
    "reading",
    "run_attack",
]
