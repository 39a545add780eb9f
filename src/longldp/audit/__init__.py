"""Prove the privacy claims from outside: exact and black-box audits (docs/audit.md).

Layer: above protocols and simulation, below experiments (docs/design.md §1). Parts:

- :mod:`~longldp.audit.channels`: the exact ε of one report, of round 1 and of τ reports, from
  the enumerated channel of small domains;
- :mod:`~longldp.audit.game`: the black-box distinguishing game through the real client path,
  one report or a lifetime of τ reports, with a Clopper–Pearson lower bound on ε;
- :mod:`~longldp.audit.histogram`: a black-box upper bound for small report spaces;
- :mod:`~longldp.audit.controls`: implementations known to be wrong, which must be flagged;
- :mod:`~longldp.audit.blackbox`: any randomizer as a plain function (or an external command,
  :mod:`~longldp.audit.exec_client`), one report or τ, bounded by tests found from the data
  (:mod:`~longldp.audit.events`); :mod:`~longldp.audit.randomizers` wraps the package's
  clients and holds the positive controls;
- :mod:`~longldp.audit.asr`: the Bayes-optimal attacker's success rate, exact or simulated;
- :mod:`~longldp.audit.reidentify`: re-identification across attributes and collections.

>>> import longldp as ll
>>> from longldp.audit import audit_game
>>> res = audit_game(ll.protocol("GRR", k=4, eps=1.0), trials=20_000, rng=1)
>>> res.lower <= res.claim
True
"""

from longldp.audit.asr import AttackSuccess, attacker_success, memo_asr
from longldp.audit.blackbox import (
    BlackBoxResult,
    audit_lifetime,
    audit_randomizer,
    client_lifetime,
    population_lifetime,
)
from longldp.audit.channels import (
    ExactEpsilons,
    exact_epsilons,
    exact_lifetime_epsilon,
    output_space_size,
)
from longldp.audit.controls import misencoded_unary
from longldp.audit.exec_client import exec_lifetime, exec_randomizer
from longldp.audit.game import (
    GameResult,
    LoopClients,
    PopulationClients,
    StatelessClients,
    audit_game,
    claimed_epsilon,
)
from longldp.audit.histogram import ChannelBounds, channel_bounds
from longldp.audit.randomizers import protocol_lifetime, protocol_randomizer
from longldp.audit.reidentify import Reidentification, reidentify
from longldp.audit.report import AuditReport, audit_protocol
from longldp.audit.stats import cp_lower, cp_upper, epsilon_lower_bound

__all__ = [
    "AttackSuccess",
    "AuditReport",
    "BlackBoxResult",
    "ChannelBounds",
    "ExactEpsilons",
    "GameResult",
    "LoopClients",
    "PopulationClients",
    "Reidentification",
    "StatelessClients",
    "attacker_success",
    "audit_game",
    "audit_lifetime",
    "audit_protocol",
    "audit_randomizer",
    "channel_bounds",
    "claimed_epsilon",
    "client_lifetime",
    "cp_lower",
    "cp_upper",
    "epsilon_lower_bound",
    "exact_epsilons",
    "exact_lifetime_epsilon",
    "exec_lifetime",
    "exec_randomizer",
    "memo_asr",
    "misencoded_unary",
    "output_space_size",
    "population_lifetime",
    "protocol_lifetime",
    "protocol_randomizer",
    "reidentify",
]
