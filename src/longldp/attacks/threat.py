"""The threat model as data: how many fake users, which targets, what they know, and when.

Cao, Jia and Gong (USENIX Security 2021, §3.1) inject m fake users beside n genuine ones; the
server cannot tell them apart and estimates over all N = n + m reports, so the fake share is
β = m/(n + m). The attacker knows the protocol's public parameters (k, ε, P1, P0, the hash
family, the chain's p1, q1, p2, q2) but not the genuine users' values or reports. Its goal is
to raise the estimates of r target items T (docs/attacks.md §2).

Over time (docs/attacks.md §5) the fake users join at an epoch and report at every later epoch
or at a random share of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.privacy import poisoning

OWNER = "ThreatModel"
#: What the attacker knows. Only the public protocol parameters are modelled.
KNOWLEDGE = ("public-parameters",)


def fake_count(n: int, beta: float) -> int:
    """m with m/(n + m) closest to β: m = round(β·n/(1 − β)) (at least 1)."""
    n = check.integer(OWNER, "n", n, minimum=1)
    beta = check.positive_float(OWNER, "beta", beta, upper=1.0)
    return max(1, round(beta * n / (1.0 - beta)))


def check_targets(targets: Any, size: int, owner: str = OWNER) -> NDArray[np.int64]:
    """Distinct target indices in [0, size), at least one (the estimate's indices)."""
    if isinstance(targets, (int, np.integer)) and not isinstance(targets, bool):
        targets = [targets]
    arr = np.asarray(targets)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{owner}: 'targets' must be a non-empty list of item indices in [0, {size}); "
            f"got {targets!r}."
        )
    vals = check.domain_values(owner, arr, size, "targets")
    if np.unique(vals).size != vals.size:
        raise ValueError(f"{owner}: 'targets' must be distinct; got {vals.tolist()}.")
    return vals


@dataclass(frozen=True)
class ThreatModel:
    """Fake users, targets, knowledge and timeline of one attack.

    Parameters
    ----------
    targets : sequence of int
        Target items T (indices of the estimate vector; dBitFlipPM: buckets), r = |T| ≥ 1.
    beta : float, optional
        Fake share m/(n + m) in (0, 1). Give ``beta`` or ``n_fake``, not both.
    n_fake : int, optional
        Number of fake users m ≥ 1.
    join_epoch : int, default 0
        First epoch at which the fake users report (longitudinal attacks).
    report_rate : float, default 1
        Share of the epochs from ``join_epoch`` on at which each fake user reports, in (0, 1]
        (each epoch independently).
    knowledge : str, default "public-parameters"
        What the attacker knows (the protocol's public parameters only).
    """

    targets: Sequence[int]
    beta: float | None = None
    n_fake: int | None = None
    join_epoch: int = 0
    report_rate: float = 1.0
    knowledge: str = "public-parameters"
    _targets: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.beta is None) == (self.n_fake is None):
            raise ValueError(
                f"{OWNER}: give exactly one of 'beta' (fake share in (0, 1)) or 'n_fake' "
                f"(number of fake users); got beta={self.beta!r}, n_fake={self.n_fake!r}."
            )
        if self.beta is not None:
            object.__setattr__(
                self, "beta", check.positive_float(OWNER, "beta", self.beta, upper=1.0)
            )
        else:
            check.integer(OWNER, "n_fake", self.n_fake, minimum=1)
        check.integer(OWNER, "join_epoch", self.join_epoch, minimum=0)
        rate = check.positive_float(OWNER, "report_rate", self.report_rate, upper=math.inf)
        if rate > 1:
            raise ValueError(f"{OWNER}: 'report_rate' must be in (0, 1]; got {self.report_rate}.")
        check.choice(OWNER, "knowledge", self.knowledge, KNOWLEDGE)
        arr = np.asarray(self.targets)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(
                f"{OWNER}: 'targets' must be a non-empty list of item indices; "
                f"got {self.targets!r}."
            )
        vals = check_targets(arr, int(arr.max()) + 1 if arr.size else 1)
        object.__setattr__(self, "_targets", tuple(int(t) for t in vals))

    @property
    def r(self) -> int:
        """Number of target items."""
        return len(self._targets)

    def target_array(self, size: int, owner: str = OWNER) -> NDArray[np.int64]:
        """The targets, checked against an estimate of length ``size``."""
        return check_targets(list(self._targets), size, owner)

    def fakes(self, n: int) -> int:
        """m for n genuine users (``n_fake``, or round(β·n/(1 − β)))."""
        if self.n_fake is not None:
            return int(self.n_fake)
        assert self.beta is not None
        return fake_count(n, self.beta)

    def share(self, n: int) -> float:
        """The realized fake share m/(n + m)."""
        return poisoning.fake_share(n, self.fakes(n))

    def active(self, tau: int) -> int:
        """Epochs (of τ) at which the fake users may report: τ − join_epoch (≥ 0)."""
        tau = check.integer(OWNER, "tau", tau, minimum=1)
        return max(0, tau - self.join_epoch)
