"""Mechanisms for data that changes (docs/math.md §19): pure vectorized kernels.

- :mod:`~longldp.protocols.streams.oracle`: the one-epoch frequency oracle (GRR/OUE), per user
  and at count level;
- :mod:`~longldp.protocols.streams.wevent`: LDP-IDS (LBU, LSP, LBD, LBA, LPU, LPD, LPA),
  w-event LDP;
- :mod:`~longldp.protocols.streams.thresh`: THRESH (votes to update stale statistics);
- :mod:`~longldp.protocols.streams.changes_tree`: CHANGES-TREE, the change-bounded tree protocol
  of Erlingsson et al. (SODA 2019);
- :mod:`~longldp.protocols.streams.ddrm`: DDRM (difference trees, no cost without change).

Every kernel takes arrays and an explicit ``numpy.random.Generator`` and returns a frozen result
with the per-epoch estimates and what the ledger (:mod:`longldp.privacy.ledger`) needs.
"""

from longldp.protocols.streams import changes_tree, ddrm, oracle, thresh, wevent

__all__ = ["changes_tree", "ddrm", "oracle", "thresh", "wevent"]
