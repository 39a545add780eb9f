"""The seven LDP-IDS methods as registered mechanisms (docs/math.md §19.2).

Each class is a frozen dataclass over the three roles (docs/design.md §2.1) whose *report* is
one GRR symbol of [0, k), the oracle LDP-IDS runs at every epoch (``oracle="grr"`` of the
kernels; the kernels' adaptive GRR/OUE choice stays available to simulations). What makes the
classes w-event is the server's plan: the rounds are ``planned`` and each epoch's plan gives a
device the budget of her report (``plan_keys = ("eps",)``; a device the plan does not ask sends
nothing). The class's own report parameters are those of its *largest* per-report budget, so
the class's channel is the most any single report can cost:

======  ==============================================================
method  largest per-report budget (``report_eps``)
======  ==============================================================
LBU     ε/w
LSP     ε
LBD     max(ε/(2w), ε/4)  (the dissimilarity report, the first publication)
LBA     ε/2               (w absorbed units of ε/(2w))
LPU     ε
LPD     ε
LPA     ε
======  ==============================================================

Budget: ``eps_window`` (ε of any w consecutive epochs) and the window ``w``; accounting
``per-window``. Simulation goes through the kernels (:mod:`longldp.protocols.streams.wevent`)
with :meth:`WEventMechanism.run`; the server side of one epoch is the kernels' decision step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import ledger
from longldp.privacy.linkage import Linkage
from longldp.privacy.streams import check_window
from longldp.protocols.base import OneShot, grr_round, set_derived
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.grr import GRR, _SymbolReports
from longldp.protocols.streams import wevent
from longldp.protocols.traits import Rounds

#: The device client's rows of every LDP-IDS method (docs/client-spec.md): a GRR report at the
#: budget b of the server's plan; the class's own channel is GRR at its largest report budget.
WEVENT_CLIENT = ClientSpec(
    family="wevent",
    chain="GRR over k at the plan's budget b (the class's own channel: b = its largest report "
    "budget, LBU ε/w, LBD max(ε/(2w), ε/4), LBA ε/2, the others ε)",
    round2="1, 0",
    eps_1="ρ(ln(P1/P0)) at the largest report budget; a report at the plan's b costs b",
    eps_perm="ρ(ln(p1/q1)) at the largest report budget",
    state="none",
    memo_key="v",
    round1='the plan {"eps": b}: y = GRR(v, k, D(1/(1 + (k−1)·e^(−b)))); refused past '
    "eps_window in any w consecutive epochs (§6.3)",
    draws2="none (one-shot)",
)


@dataclass(frozen=True)
class WEventMechanism(OneShot, _SymbolReports):
    """An LDP-IDS method: GRR reports whose per-epoch budgets the server plans (§19.2)."""

    k: int
    eps_window: float
    w: int
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    method: ClassVar[str]
    rounds: ClassVar[Rounds] = Rounds.PLANNED
    plan_keys: ClassVar[tuple[str, ...]] = ("eps",)
    budget_params: ClassVar[tuple[str, ...]] = ("eps_window",)
    budget_note: ClassVar[str] = "(ε of any w consecutive epochs; 'w' is the window)"
    test_params: ClassVar[tuple[dict, ...]] = ({"eps_window": 2.0, "w": 4},)
    client_spec: ClassVar[ClientSpec | None] = WEVENT_CLIENT

    def __post_init__(self) -> None:
        check.integer(self.name, "k", self.k, minimum=2)
        check.budget(self.name, "eps_window", self.eps_window)
        check_window(self.name, self.w)
        p, q = privacy.grr_probabilities(self.report_eps, self.k)
        set_derived(self, p1=p, q1=q)

    @property
    def eps(self) -> float:  # type: ignore[override]
        """The largest budget of one report (the class's own channel): ``report_eps``."""
        return self.report_eps

    @property
    def report_eps(self) -> float:
        """Largest per-report budget a plan of this method can ask (table above)."""
        e, w = self.eps_window, self.w
        return {
            "LBU": e / w,
            "LBD": max(e / (2 * w), e / 4),
            "LBA": e / 2,
        }.get(self.method, e)

    @property
    def accounting(self) -> privacy.Accounting:
        """At most ``eps_window`` over any w consecutive epochs (w-event; math §19.2)."""
        return privacy.Accounting(
            "per-window",
            self.single_report_epsilon(),
            window=self.w,
            eps_window=self.eps_window,
        )

    def check_plan(self, plan: Mapping[str, Any] | None) -> dict[str, Any]:
        """{"eps": b}: this epoch's report budget, 0 < b <= ``report_eps``."""
        plan = super().check_plan(plan)
        b = plan["eps"]
        if (
            isinstance(b, bool)
            or not isinstance(b, (int, float))
            or not (0 < b <= self.report_eps * (1 + 1e-12))
        ):
            raise ValueError(
                f"{self.name}: the plan's 'eps' must be a number in (0, {self.report_eps:g}] "
                f"(the method's largest report budget); got {b!r}."
            )
        return {"eps": float(b)}

    def example_plan(self, epoch: int) -> dict[str, Any]:
        """A plan valid at every epoch (round trips, examples): ε/w, or the largest report
        budget when that is smaller, so that no window of w epochs exceeds ``eps_window``."""
        return {"eps": min(self.report_eps, self.eps_window / self.w)}

    #: The methods whose plans are a public function of the epoch, which the server serves;
    #: the others' plans follow the server's decision step (the kernels' ``step``), which the
    #: collection server does not take yet (docs/streams.md, "What comes next").
    SERVED: ClassVar[tuple[str, ...]] = ("LBU", "LSP")

    def server_plan(
        self, offset: int, closed: Callable[[int], NDArray | None]
    ) -> tuple[str, dict[str, Any] | None]:
        """LBU: ε/w at every epoch; LSP: ε at every w-th epoch (offsets 0, w, 2w, …), nothing in
        between. Both plans ask a device's largest report budget, so the collection's own
        channel (``report_eps``) is the one each epoch's reports were drawn with."""
        if self.method not in self.SERVED:
            raise ValueError(
                f"{self.name}: its plans follow the server's decision from the reports "
                "(dissimilarity, absorption, which users report), which the collection server "
                f"does not take yet; it serves {' and '.join(self.SERVED)}."
            )
        if self.method == "LSP" and offset % self.w:
            return "none", None
        return "report", {"eps": self.report_eps}

    def reports_spent(
        self,
        owners: NDArray[np.int64],
        epochs: NDArray[np.int64],
        records: NDArray,
        plans: Callable[[int], Mapping[str, Any] | None],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """Each report costs its epoch's planned budget (a report at an epoch without a plan:
        the largest report budget): per device the most spent in any w consecutive epochs, and
        the sum (docs/math.md §19.2)."""
        owners = np.asarray(owners, dtype=np.int64)
        epochs = np.asarray(epochs, dtype=np.int64)
        devices, who = np.unique(owners, return_inverse=True)
        if owners.size == 0:
            empty = np.zeros(0)
            return devices, empty, empty
        planned = {int(e): plans(int(e)) for e in np.unique(epochs)}
        cost = np.array(
            [
                self.report_eps
                if planned[int(e)] is None
                else self.check_plan(planned[int(e)])["eps"]
                for e in epochs
            ]
        )
        lo = int(epochs.min())
        spend = np.zeros((devices.size, int(epochs.max()) - lo + 1))
        np.add.at(spend, (who, epochs - lo), cost)
        return devices, np.atleast_1d(ledger.window_spent(spend, self.w)), spend.sum(axis=1)

    def for_round(self, plan: Mapping[str, Any] | None) -> GRR:
        """The oracle of one report: GRR at the plan's budget."""
        return GRR(k=self.k, eps=min(self.check_plan(plan)["eps"], self.report_eps))

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: Any) -> NDArray:
        return grr_round(keys, self.k, self.p1, rng)

    def run(
        self,
        data: NDArray,
        rng: np.random.Generator,
        engine: str = "count-level",
    ) -> wevent.WEventRun:
        """Simulate the method over ``values[τ, n]`` (``per-user``) or ``counts[τ, k]``
        (``count-level``) with the kernels of :mod:`~longldp.protocols.streams.wevent`."""
        engine = check.choice(self.name, "engine", engine, ("count-level", "per-user"))
        if engine == "count-level":
            return wevent.run_counts(self.method, data, self.eps_window, self.w, rng, "grr")
        return wevent.run_users(self.method, data, self.k, self.eps_window, self.w, rng, "grr")


def _method(cls_name: str, wire: int, doc: str, case: VectorCase) -> type[WEventMechanism]:
    cls = type(
        cls_name,
        (WEventMechanism,),
        {
            "__doc__": doc,
            "__module__": __name__,
            "name": cls_name,
            "method": cls_name,
            "wire_id": wire,
            #: Nothing persists in a report: the plan names the budget, the report a symbol.
            "linkage": Linkage(),
            "vector_cases": (case,),
            "__annotations__": {},
        },
    )
    return dataclass(frozen=True)(cls)


def _plans(*budgets: float) -> tuple[dict[str, float], ...]:
    return tuple({"eps": b} for b in budgets)


# Each method's device test vectors: plans as its server would send them (LSP every w-th
# epoch, LPU once per window, LBD/LBA a dissimilarity report and publications), with
# refusals: past eps_window in a window (LSP, LPA) and past max_epsilon (LBD).
LBU = _method(
    "LBU",
    40,
    "LDP-IDS budget uniform: every epoch, every user at ε/w (§19.2).",
    VectorCase({"k": 5, "eps_window": 1.0, "w": 2}, (2, 2, 4, 0), plans=_plans(0.5, 0.5, 0.5, 0.5)),
)
LSP = _method(
    "LSP",
    41,
    "LDP-IDS sampling: every w-th epoch, every user at ε (§19.2).",
    VectorCase(
        {"k": 5, "eps_window": 1.0, "w": 2},
        (1, 3, 3, 0),
        epochs=(0, 1, 2, 4),
        plans=_plans(1.0, 1.0, 1.0, 1.0),
    ),
)
LBD = _method(
    "LBD",
    42,
    "LDP-IDS budget distribution ([REN22] §4.2; math §19.2).",
    VectorCase(
        {"k": 4, "eps_window": 2.0, "w": 4},
        (3, 3, 1, 2),
        plans=_plans(0.25, 0.5, 0.25, 0.25),
        max_epsilon=1.0,
    ),
)
LBA = _method(
    "LBA",
    43,
    "LDP-IDS budget absorption ([REN22] §4.3; math §19.2).",
    VectorCase({"k": 4, "eps_window": 2.0, "w": 4}, (0, 1, 1), plans=_plans(0.25, 1.0, 0.25)),
)
LPU = _method(
    "LPU",
    44,
    "LDP-IDS population uniform: group t mod w at ε (§19.2).",
    VectorCase(
        {"k": 6, "eps_window": 1.5, "w": 3},
        (5, 0, 2),
        epochs=(1, 4, 7),
        plans=_plans(1.5, 1.5, 1.5),
    ),
)
LPD = _method(
    "LPD",
    45,
    "LDP-IDS population distribution ([REN22] §5.2; math §19.2).",
    VectorCase(
        {"k": 3, "eps_window": 1.0, "w": 2},
        (0, 2, 2),
        epochs=(0, 3, 5),
        plans=_plans(1.0, 1.0, 1.0),
    ),
)
LPA = _method(
    "LPA",
    46,
    "LDP-IDS population absorption ([REN22] §5.3; math §19.2).",
    VectorCase(
        {"k": 8, "eps_window": 2.0, "w": 5},
        (7, 2, 4),
        epochs=(2, 7, 8),
        plans=_plans(2.0, 2.0, 0.5),
        collection="vectors-w-event",
    ),
)

#: The registered LDP-IDS classes, in the order of math §19.2.
WEVENT_CLASSES = (LBU, LSP, LBD, LBA, LPU, LPD, LPA)
