"""What a protocol declares for the device clients of other languages (docs/client-spec.md).

A protocol class that devices run declares ``client_spec`` (a :class:`ClientSpec`) and
``vector_cases`` (:class:`VectorCase` objects). From the registry alone,
``scripts/registry_tables.py`` writes the JavaScript client's parameter table
(``clients/js/src/registry.js``: names, ids, parameters with their types and defaults, the
family module to load) and the three registry tables of docs/client-spec.md (§3.2 parameters,
§3.3 budgets, §4.2 draws), and ``scripts/client_vectors.py`` the test vectors of every case;
``tests/test_generated_files.py`` fails when a generated file is stale. The samplers of another
language stay hand-written family modules (``clients/js/src/<family>.js``).

A protocol with no ``client_spec`` (a protocol of another package, say) has no device client in
another language: it is left out of those files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClientSpec:
    """One protocol's rows of docs/client-spec.md and its JavaScript family module.

    Attributes
    ----------
    family : the hand-written module ``clients/js/src/<family>.js`` with its formulas and draws.
    chain, round2 : the §3.2 cells: how p1, q1 and p2, q2 are computed.
    eps_1, eps_perm : the §3.3 cells: ε1 of one report and ε∞ of one memo.
    state, memo_key, round1, draws2 : the §4.2 cells: the per-device state, the memo key of a
        value, round 1's draws and round 2's draws.
    derived : integer attributes the test vectors record besides the probabilities (e.g.
        ``g``, ``omega``): what a client derives from the spec and must agree on.
    probabilities : the real attributes a client derives and must reproduce bit for bit (the
        vectors record them; ``tests/test_js_client.py`` compares them): the chain's p1, q1,
        p2, q2, or a numeric mechanism's own constants (its slope, PM's width and centre
        probability, SW's b, …; docs/math.md §20).
    """

    family: str
    chain: str
    round2: str
    eps_1: str
    eps_perm: str
    state: str
    memo_key: str
    round1: str
    draws2: str
    derived: tuple[str, ...] = ()
    probabilities: tuple[str, ...] = ("p1", "q1", "p2", "q2")


@dataclass(frozen=True)
class VectorCase:
    """One case of the device test vectors (docs/client-spec.md §9): the protocol's parameters,
    the values a device reports at epochs 0, 1, … (or at ``epochs``), its collection and budget
    cap, and, for a planned protocol, the server's plan of each epoch (``plans``, one per
    value). The case is named after the protocol, then ``-suffix``."""

    params: Mapping[str, Any]
    values: tuple[Any, ...]
    suffix: str = ""
    collection: str = "vectors"
    max_epsilon: float | None = None
    plans: tuple[Mapping[str, Any] | None, ...] = ()
    epochs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("plans", "epochs"):
            given = getattr(self, name)
            if given and len(given) != len(self.values):
                raise ValueError(
                    f"VectorCase: '{name}' must give one entry per value ({len(self.values)}); "
                    f"got {len(given)}."
                )

    def steps(self) -> list[tuple[int, Any, Mapping[str, Any] | None]]:
        """(epoch, value, plan) of each step: ``epochs`` (default 0, 1, …) and ``plans``
        (default none)."""
        epochs = self.epochs or tuple(range(len(self.values)))
        plans = self.plans or (None,) * len(self.values)
        return list(zip(epochs, self.values, plans, strict=True))

    def name(self, protocol: str) -> str:
        """The case's name: the protocol's, then ``-suffix`` when there is one."""
        return f"{protocol}-{self.suffix}" if self.suffix else protocol
