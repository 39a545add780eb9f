"""Which frequency oracle the set-valued apps use, and with which budget.

:class:`OracleSpec` names the oracle and its budget once for a whole app:

- **one-shot** (``eps``): ``"adaptive"`` (GRR(ε') with ℓ distinct dummies or OLH(ε), math §9.1.2)
  or a one-shot registry name; every PSFO is rebuilt for its current ℓ and domain;
- **longitudinal** (``eps_perm``, ``eps_1``): any memoizing chain of the registry (L-GRR, L-SUE,
  L-OUE, L-SOUE, L-OSUE, BiLOLOHA, OLOLOHA, dBitFlipPM with b = its domain). Each oracle
  instance keeps *one* protocol object over a time-stable domain with one shared dummy, and
  no amplification (math §9.5).

An oracle instance is a fixed group of users feeding one protocol: a
:class:`longldp.simulate.ReportingGroup` of the miner's population, which runs the engines
(docs/design.md §4; :mod:`longldp.apps.setvalued.miner`). A longitudinal group keeps one chain
and its memos for good; a one-shot group is given the PSFO of the current timestamp at every
report and spends the ε that PSFO claims.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from longldp import privacy
from longldp.apps.setvalued.common import OWNER
from longldp.apps.setvalued.psfo import (
    ADAPTIVE,
    PSFO,
    oneshot_plain_oracle,
    oneshot_psfo,
)
from longldp.protocols import FrequencyOracle, get_protocol_class, protocol


@dataclass(frozen=True)
class OracleSpec:
    """The frequency oracle of an app and its budget.

    Parameters
    ----------
    protocol : str, default="adaptive"
        ``"adaptive"`` or a one-shot registry name (with ``eps``), or a longitudinal registry
        name (with ``eps_perm`` and ``eps_1``; dBitFlipPM takes no ``eps_1``).
    eps : float, optional
        One-shot ε of every report.
    eps_perm, eps_1 : float, optional
        ε∞ and ε1 of a memoizing chain.
    options : dict, optional
        Extra protocol parameters: ``calibration`` (L-GRR, LOLOHA; registry default
        ``"exact"``), ``hash_pool``, dBitFlipPM's ``d``.
    """

    protocol: str = ADAPTIVE
    eps: float | None = None
    eps_perm: float | None = None
    eps_1: float | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, str):
            raise ValueError(f"{OWNER}: 'protocol' must be a protocol name; got {self.protocol!r}.")
        name = ADAPTIVE if self.protocol.strip().lower() == ADAPTIVE else None
        if name is None:
            name = get_protocol_class(self.protocol).name
        object.__setattr__(self, "protocol", name)
        object.__setattr__(self, "options", dict(self.options or {}))
        self.budget_parameters()  # checks the budget's form and values

    @property
    def longitudinal(self) -> bool:
        """True for memoizing chains."""
        return self.protocol != ADAPTIVE and get_protocol_class(self.protocol).longitudinal

    @property
    def budget(self) -> privacy.Budget:
        """The budget as given (``eps``, or ``eps_perm`` and ``eps_1``)."""
        return privacy.Budget(eps=self.eps, eps_perm=self.eps_perm, eps_1=self.eps_1)

    def budget_parameters(self) -> dict[str, float]:
        """The protocol's budget parameters, by the one parser :class:`longldp.privacy.Budget`
        (adaptive: a one-shot ``eps``); ``ValueError`` for a budget of the wrong form."""
        return _parse_budget(self.protocol, self.budget)

    def scaled(self, factor: float) -> OracleSpec:
        """The same oracle with every budget multiplied by ``factor`` (LDPMiner: 1/2)."""

        def mul(x: float | None) -> float | None:
            return None if x is None else x * factor

        return OracleSpec(
            self.protocol, mul(self.eps), mul(self.eps_perm), mul(self.eps_1), self.options
        )

    # -------------------------------------------------------------- builders
    def chain(self, size: int) -> FrequencyOracle:
        """The memoizing chain over a domain of ``size`` values (longitudinal only)."""
        return protocol(self.protocol, k=size, **self.budget_parameters(), **self.options)

    def psfo(
        self, d: int, ell: int, dummies: str = "distinct", amplify: bool | None = None
    ) -> PSFO:
        """One-shot PSFO(ℓ, FO, ε) over d real values (see :func:`oneshot_psfo`)."""
        assert self.eps is not None
        return oneshot_psfo(d, ell, self.eps, self.protocol, dummies, amplify, **self.options)

    def plain(self, size: int) -> FrequencyOracle:
        """A one-shot FO over ``size`` values (adaptive: GRR iff size < 3e^ε + 2, else OLH)."""
        assert self.eps is not None
        return oneshot_plain_oracle(size, self.eps, self.protocol, **self.options)

    @staticmethod
    def chain_psfo(chain: FrequencyOracle, d: int, ell: int) -> PSFO:
        """PSFO over a fixed chain of d real values + one shared, memoized dummy (math §9.5)."""
        return PSFO(d, ell, chain, "shared", None, False)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly record of the oracle and budget."""
        out: dict[str, Any] = {"protocol": self.protocol, "longitudinal": self.longitudinal}
        for name in ("eps", "eps_perm", "eps_1"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.options:
            out["options"] = dict(self.options)
        return out


def make_spec(
    protocol: str = ADAPTIVE,
    *,
    eps: float | None = None,
    eps_perm: float | None = None,
    eps_1: float | None = None,
    alpha: float | None = None,
    **options: Any,
) -> OracleSpec:
    """An :class:`OracleSpec`; ``alpha`` gives ε1 = α·ε∞ (0 < α < 1) instead of ``eps_1``
    (by the one budget parser, :class:`longldp.privacy.Budget`)."""
    if alpha is not None:
        budget = privacy.Budget(eps=eps, eps_perm=eps_perm, eps_1=eps_1, alpha=alpha)
        eps_1 = _parse_budget(protocol, budget).get("eps_1")
    return OracleSpec(protocol, eps, eps_perm, eps_1, options)


def _parse_budget(protocol: str, budget: privacy.Budget) -> dict[str, float]:
    """The budget parameters of oracle ``protocol`` by the one parser
    :class:`longldp.privacy.Budget` (adaptive: a one-shot ``eps``); ``ValueError`` for a
    budget of the wrong form."""
    if isinstance(protocol, str) and protocol.strip().lower() == ADAPTIVE:
        return budget.parameters(f"{OWNER}: {ADAPTIVE}", ("eps",))
    cls = get_protocol_class(protocol)
    return budget.parameters(f"{OWNER}: {cls.name}", cls.budget_params, cls.budget_note)
