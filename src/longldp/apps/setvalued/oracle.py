"""Which frequency oracle the set-valued apps use, and how one oracle instance collects.

:class:`OracleSpec` names the oracle and its budget once for a whole app:

- **one-shot** (``eps``): ``"adaptive"`` (GRR(ε') with ℓ distinct dummies or OLH(ε), math §9.1.2)
  or a one-shot registry name; every PSFO is rebuilt for its current ℓ and domain;
- **longitudinal** (``eps_perm``, ``eps_1``): any memoizing chain of the registry (L-GRR, L-SUE,
  L-OUE, L-SOUE, L-OSUE, BiLOLOHA, OLOLOHA, dBitFlipPM with b = its domain). Each oracle
  instance keeps *one* protocol object over a time-stable domain with one shared dummy, and
  no amplification (math §9.5).

:class:`FOInstance` is one oracle instance: a fixed group of users feeding one protocol. Engines
(docs/design.md §4):

- ``"count-level"``: the group's histogram of FO inputs (computed exactly, see the apps) goes
  to ``sample_support``: exact per timestamp, no memo correlation across timestamps;
- ``"per-user"``: ``perturb_support`` with the instance's memo: round 1 per (user, value),
  memoized across timestamps; round 2 at count level from the memos (exact jointly over time,
  up to the LOLOHA caveat of docs/design.md §4);
- ``"reports"``: ``perturb`` then ``support_counts``: the real client and server path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.apps.setvalued.common import ENGINES, OWNER, IntArray
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
        if self.protocol == ADAPTIVE:
            return self.budget.parameters(f"{OWNER}: {ADAPTIVE}", ("eps",))
        cls = get_protocol_class(self.protocol)
        return self.budget.parameters(f"{OWNER}: {cls.name}", cls.budget_params, cls.budget_note)

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
    """An :class:`OracleSpec`; ``alpha`` gives ε1 = α·ε∞ (0 < α < 1) instead of ``eps_1``."""
    if alpha is not None:
        if eps_1 is not None:
            raise ValueError(f"{OWNER}: give 'eps_1' or 'alpha', not both.")
        a = check.positive_float(OWNER, "alpha", alpha, upper=1.0)
        eps_perm_f = check.positive_float(OWNER, "eps_perm", eps_perm)
        eps_1 = a * eps_perm_f
    return OracleSpec(protocol, eps, eps_perm, eps_1, options)


class FOInstance:
    """One oracle instance: a fixed group of users reporting through one protocol.

    Longitudinal instances must be given the same protocol object at every call (one
    time-stable domain); the memo then holds one entry per (user, memo key) across timestamps.
    """

    def __init__(self, label: str, users: IntArray, engine: str):
        self.label = label
        self.users = users
        self.engine = check.choice(OWNER, "engine", engine, ENGINES)
        self.proto: FrequencyOracle | None = None
        self.memo: Any = None
        self.reports = np.zeros(users.size, dtype=np.int64)
        self.oneshot_eps = np.zeros(users.size, dtype=np.float64)

    @property
    def n(self) -> int:
        return int(self.users.size)

    def collect(
        self, oracle: FrequencyOracle, codes: IntArray, rng: np.random.Generator, eps: float | None
    ) -> NDArray:
        """Support counts of one timestamp: every user of the group reports ``codes[i]``.

        ``eps`` is the per-report guarantee of a one-shot PSFO (ε, below an amplified GRR's
        own ε'); it is added to each user's spent budget.
        """
        if codes.shape != (self.n,):
            raise AssertionError(f"{self.label}: {codes.shape} codes for {self.n} users")
        self.reports += 1
        if not oracle.longitudinal:
            self.oneshot_eps += oracle.eps if eps is None else eps
            if self.engine == "count-level":
                return oracle.sample_support(np.bincount(codes, minlength=oracle.k), self.n, rng)
            if self.engine == "per-user":
                return oracle.perturb_support(codes, oracle.new_memo(self.n), rng)
            return oracle.support_counts(oracle.perturb(codes, None, rng))
        if self.proto is None:
            self.proto = oracle
        elif self.proto != oracle:
            raise AssertionError(f"{self.label}: a longitudinal instance changed its protocol")
        if self.engine == "count-level":
            return oracle.sample_support(np.bincount(codes, minlength=oracle.k), self.n, rng)
        if self.memo is None:
            self.memo = oracle.new_memo(self.n)
        if self.engine == "per-user":
            return oracle.perturb_support(codes, self.memo, rng)
        return oracle.support_counts(oracle.perturb(codes, self.memo, rng))

    def budget(self) -> dict[str, NDArray | None]:
        """Per group user: reports, memos (None if not tracked) and spent ε (None if unknown)."""
        if self.proto is None:
            return {
                "reports": self.reports,
                "memos": np.zeros(self.n, dtype=np.int64),
                "epsilon": self.oneshot_eps,
            }
        if self.memo is None:
            return {"reports": self.reports, "memos": None, "epsilon": None}
        spent = self.proto.spent_budget(self.memo)
        return {"reports": self.reports, "memos": spent["memos"], "epsilon": spent["epsilon"]}


def population_budget(n: int, instances: list[FOInstance]) -> dict[str, NDArray | None]:
    """Per-user totals over instances (sequential composition for users in several)."""
    out: dict[str, NDArray | None] = {
        "reports": np.zeros(n, dtype=np.int64),
        "memos": np.zeros(n, dtype=np.int64),
        "epsilon": np.zeros(n, dtype=np.float64),
    }
    for inst in instances:
        part = inst.budget()
        for key, arr in part.items():
            if arr is None or out[key] is None:
                out[key] = None
                continue
            out[key][inst.users] += arr  # type: ignore[index]  # users are distinct
    return out
