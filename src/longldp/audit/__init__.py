"""Prove the privacy claims from outside: exact and black-box audits (docs/audit.md).

Layer: above protocols and simulation, below experiments (docs/design.md §1). Four parts:

- :mod:`~longldp.audit.channels`: the exact ε of one report, of round 1 and of τ reports, from
  the enumerated channel of small domains;
- :mod:`~longldp.audit.game`: the black-box distinguishing game through the real client path,
  one report or a lifetime of τ reports, with a Clopper–Pearson lower bound on ε;
- :mod:`~longldp.audit.histogram`: a black-box upper bound for small report spaces;
- :mod:`~longldp.audit.controls`: implementations known to be wrong, which must be flagged.

>>> import longldp as ll
>>> from longldp.audit import audit_game
>>> res = audit_game(ll.protocol("GRR", k=4, eps=1.0), trials=20_000, rng=1)
>>> res.lower <= res.claim
True
"""

from longldp.audit.channels import (
    ExactEpsilons,
    exact_epsilons,
    exact_lifetime_epsilon,
    output_space_size,
)
from longldp.audit.controls import misencoded_unary
from longldp.audit.game import (
    GameResult,
    LoopClients,
    PopulationClients,
    StatelessClients,
    audit_game,
    claimed_epsilon,
)
from longldp.audit.histogram import ChannelBounds, channel_bounds
from longldp.audit.report import AuditReport, audit_protocol
from longldp.audit.stats import cp_lower, cp_upper, epsilon_lower_bound

__all__ = [
    "AuditReport",
    "ChannelBounds",
    "ExactEpsilons",
    "GameResult",
    "LoopClients",
    "PopulationClients",
    "StatelessClients",
    "audit_game",
    "audit_protocol",
    "channel_bounds",
    "claimed_epsilon",
    "cp_lower",
    "cp_upper",
    "epsilon_lower_bound",
    "exact_epsilons",
    "exact_lifetime_epsilon",
    "misencoded_unary",
    "output_space_size",
]
