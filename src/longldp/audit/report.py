"""One protocol's whole audit: claims, exact channel, one-report and lifetime lower bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longldp.audit.channels import exact_epsilons, exact_lifetime_epsilon
from longldp.audit.game import GameResult, audit_game, claimed_epsilon, describe
from longldp.protocols import FrequencyOracle

#: Tolerance of "the exact channel equals the claim" (the closed forms are exact to ~1e-15).
EXACT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class LifetimeRow:
    """The lifetime game at one τ: claim, exact ε of the channel, audited lower bound."""

    tau: int
    pattern: str
    claim: float
    exact: float | None
    audit: GameResult


@dataclass(frozen=True)
class AuditReport:
    """Everything :func:`audit_protocol` measured for one protocol."""

    protocol: str
    eps_1: float
    eps_perm: float | None
    exact_single: float | None
    exact_first_round: float | None
    one_report: GameResult
    lifetime: list[LifetimeRow] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        """Every claim refuted: an exact ε above its claim or a lower bound above its claim."""
        out = []
        if self.exact_single is not None and self.exact_single > self.eps_1 + EXACT_TOLERANCE:
            out.append(f"exact one-report ε {self.exact_single:.4g} > claimed ε1 {self.eps_1:.4g}")
        if (
            self.exact_first_round is not None
            and self.eps_perm is not None
            and self.exact_first_round > self.eps_perm + EXACT_TOLERANCE
        ):
            out.append(
                f"exact round-1 ε {self.exact_first_round:.4g} > claimed ε∞ {self.eps_perm:.4g}"
            )
        for res in [self.one_report, *(row.audit for row in self.lifetime)]:
            if res.violates:
                out.append(
                    f"τ = {res.tau} ({res.pattern}): lower bound {res.lower:.4g} > claim "
                    f"{res.claim:.4g}"
                )
        return out

    @property
    def loose(self) -> bool:
        """The exact channel does not reach the claimed ε1 (over-private: utility is lost)."""
        return self.exact_single is not None and self.exact_single < self.eps_1 - 1e-6


def audit_protocol(
    proto: FrequencyOracle,
    *,
    trials: int = 1_000_000,
    taus: Sequence[int] = (1, 10, 100, 1000),
    lifetime_trials: int = 20_000,
    patterns: Sequence[str] = ("one-value",),
    attack: str = "lr",
    alpha: float = 0.01,
    eps_1: float | None = None,
    eps_perm: float | None = None,
    clients: str = "population",
    exact: bool | None = None,
    rng: Any = None,
) -> AuditReport:
    """Audit ``proto``: exact ε (when the channel is small), the one-report game with
    ``trials`` clients per world, and the lifetime game at every τ with ``lifetime_trials``.

    ``eps_1``/``eps_perm`` override the claims (default: the protocol's own exact figures).
    ``exact``: None (default) enumerates the channel when it is small enough, True insists,
    False skips it.
    """
    gen = rng if isinstance(rng, np.random.Generator) or rng == "secure" else None
    gen = np.random.default_rng(rng) if gen is None else gen
    e1 = proto.single_report_epsilon() if eps_1 is None else float(eps_1)
    einf = proto.first_round_epsilon() if eps_perm is None else float(eps_perm)
    ex = None
    if exact or exact is None:
        try:
            ex = exact_epsilons(proto)
        except ValueError:
            if exact:  # asked for explicitly: the domain is too large to enumerate
                raise
    exact = ex is not None
    one = audit_game(proto, trials, attack=attack, alpha=alpha, claim=e1, clients=clients, rng=gen)
    rows = []
    for pattern in patterns:
        for tau in taus:
            claim = claimed_epsilon(proto, tau, pattern, e1, einf)
            res = audit_game(
                proto,
                lifetime_trials,
                tau=tau,
                pattern=pattern,
                attack=attack,
                alpha=alpha,
                claim=claim,
                clients=clients,
                rng=gen,
            )
            alt = pattern == "alternating"
            exact_tau = exact_lifetime_epsilon(proto, tau, alt) if exact else None
            rows.append(LifetimeRow(tau, pattern, claim, exact_tau, res))
    return AuditReport(
        protocol=describe(proto),
        eps_1=e1,
        eps_perm=einf if proto.longitudinal else None,
        exact_single=None if ex is None else ex.single,
        exact_first_round=None if ex is None else ex.first_round,
        one_report=one,
        lifetime=rows,
    )
