"""How a user's spent ε grows: the accounting trait of a mechanism (docs/math.md §4).

Every mechanism declares one :class:`Accounting` (``proto.accounting``, docs/design.md §2.5):
the rule by which the privacy loss of one user grows with what she sends. It is a value of the
math layer so that anything below the protocols (a ledger over users' trajectories, the shuffle
accounting) can read it without importing a protocol class. The rules:

- ``"per-report"``: every report is a fresh randomization and costs ``eps_report``; t reports
  cost t·ε (one-shot oracles, one-time RAPPOR; sequential composition).
- ``"per-memo"``: a memoizing chain: t reports from m distinct round-1 memos cost
  min(t·ε1, m·ε∞) (docs/math.md (4.1); ``eps_report`` = ε1, ``eps_memo`` = ε∞). The one place
  of the rule is :func:`longldp.privacy.spent_epsilon`.
- ``"per-window"``: a stream mechanism that spends at most ``eps_window`` over any ``window``
  consecutive epochs (w-event privacy); a user's loss over a trajectory is what the ledger of
  the mechanism's family computes.
- ``"per-change"``: a mechanism that spends ``eps_change`` each time the user's value changes
  (and ``eps_report`` per report in between, often 0).

The last two are declared here so that the families of changing data fill
them in; :meth:`Accounting.spent` computes the first two and refuses the others with the name
of the ledger to use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from longldp import _validate as check

#: The accounting rules, in the order the docs list them.
RULES = ("per-report", "per-memo", "per-window", "per-change")


@dataclass(frozen=True)
class Accounting:
    """The rule by which one user's ε grows, and its constants.

    Attributes
    ----------
    rule : one of :data:`RULES`.
    eps_report : ε of one report (ε1; for ``"per-report"`` the ε of every report).
    eps_memo : ε∞ of one round-1 memo (``"per-memo"`` only), else None.
    window : epochs of a window (``"per-window"`` only), else None.
    eps_window : ε spent over any ``window`` consecutive epochs (``"per-window"`` only).
    eps_change : ε of one change of value (``"per-change"`` only).
    """

    rule: str
    eps_report: float
    eps_memo: float | None = None
    window: int | None = None
    eps_window: float | None = None
    eps_change: float | None = None

    def __post_init__(self) -> None:
        own = "Accounting"
        check.choice(own, "rule", self.rule, RULES)
        if not (isinstance(self.eps_report, (int, float)) and self.eps_report >= 0):
            raise ValueError(f"{own}: 'eps_report' must be a number >= 0; got {self.eps_report!r}.")
        need = {
            "per-report": (),
            "per-memo": ("eps_memo",),
            "per-window": ("window", "eps_window"),
            "per-change": ("eps_change",),
        }[self.rule]
        for name in ("eps_memo", "window", "eps_window", "eps_change"):
            value = getattr(self, name)
            if (name in need) != (value is not None):
                what = "is required" if name in need else "must be None"
                raise ValueError(f"{own}: '{name}' {what} for rule {self.rule!r}; got {value!r}.")
        if self.window is not None:
            check.integer(own, "window", self.window, minimum=1)

    @classmethod
    def per_report(cls, eps: float) -> Accounting:
        """Every report costs ``eps`` (nothing is memoized)."""
        return cls("per-report", float(eps))

    @classmethod
    def per_memo(cls, eps_1: float, eps_perm: float) -> Accounting:
        """A memoizing chain: min(t·ε1, m·ε∞)."""
        return cls("per-memo", float(eps_1), eps_memo=float(eps_perm))

    @property
    def memoizes(self) -> bool:
        """Whether the loss is capped by the number of distinct memos."""
        return self.rule == "per-memo"

    def spent(self, reports: Any, memos: Any = 0) -> Any:
        """ε of ``reports`` reports from ``memos`` distinct memos (scalars or arrays), by the
        one rule :func:`longldp.privacy.spent_epsilon`; ``ValueError`` for the rules whose loss
        depends on the trajectory (per window, per change: use the family's ledger)."""
        from longldp import privacy  # the package imports this module

        if self.rule == "per-report":
            return privacy.spent_epsilon(reports, 0, self.eps_report, None)
        if self.rule == "per-memo":
            return privacy.spent_epsilon(reports, memos, self.eps_report, self.eps_memo)
        raise ValueError(
            f"Accounting: the loss of rule {self.rule!r} depends on the user's trajectory "
            "(epochs, changes), not on counts of reports and memos; use the ledger of the "
            "mechanism's family."
        )

    def worst_case(self, reports: int) -> float:
        """The most ``reports`` reports can cost under this rule whatever the trajectory."""
        reports = check.integer("Accounting", "reports", reports, minimum=0)
        if self.rule in ("per-report", "per-memo"):
            return float(reports * self.eps_report)
        if self.rule == "per-window":
            assert self.window is not None and self.eps_window is not None
            return float(math.ceil(reports / self.window) * self.eps_window)
        assert self.eps_change is not None
        return float(reports * (self.eps_report + self.eps_change))
