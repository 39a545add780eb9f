"""The mechanism role: parameters, traits, the exact claims and the samplers (docs/design.md §2).

A protocol class combines three roles, each a public API written once here and in its sibling
modules: the **mechanism** (this module: what a client does and what it costs), the
**estimator** (:mod:`longldp.protocols.estimator`: support → estimate, variance, standard error)
and the **codec** (:mod:`longldp.protocols.codec`: report bytes). A family subclasses the
three (a frequency oracle: :class:`longldp.protocols.base.FrequencyOracle`) and supplies the
hooks of its role:

- ``_new_state(m, rng)``: per-user values drawn once and kept forever (hash seed, samples);
- ``_memo_key(values, state)``: what round 1 is memoized on (value, hash bucket, bucket);
- ``_round1(keys, state, rng)`` / ``_round2(payload, rng)``: the two randomizations;
- ``_make_reports(payload, state)``: the report records a server receives;
- ``support_counts(reports)`` and ``_sample_support(true_counts, n, rng)``: aggregation and its
  count-level twin;
- :meth:`Mechanism.support_from_memos`: round 2 drawn at count level from the memos of one
  population step (the per-user engine), default: materialize the reports;
- for a history-dependent mechanism (trait ``history``): ``new_history(m)`` and
  ``history_step(values, state, history, epochs, plan)`` (:class:`HistoryStep`: each device's
  *report input*, what it costs, the history after), then ``_round1`` randomizes report inputs.

Traits (class variables) every registered mechanism declares or inherits (docs/design.md
§2.2): ``name``, ``aliases``, ``wire_id``, ``report_kind`` (a
:class:`~longldp.protocols.report_kinds.ReportKind`), ``budget_params``, ``test_params``,
``longitudinal``, ``rounds`` (:class:`~longldp.protocols.traits.Rounds`), ``linkage``
(:class:`~longldp.privacy.linkage.Linkage`), ``estimand``
(the estimator role's), ``domain`` (an instance property: a
:class:`~longldp.protocols.traits.Domain`), ``accounting`` (a
:class:`~longldp.privacy.accounting.Accounting`), ``plan_keys`` and ``history`` (a
:class:`~longldp.protocols.traits.History`, or None).
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy.linkage import Linkage
from longldp.protocols import _codec
from longldp.protocols._memo import DenseMemoStore, MemoStore, PopulationMemo, make_memo_store
from longldp.protocols._rng import RandomSource, as_random_source
from longldp.protocols.client import Client, Round1Source
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.report_kinds import ReportKind
from longldp.protocols.traits import Categorical, Domain, Estimand, History, Rounds

#: Rows × columns handled at once when a step materializes a (users × domain) matrix.
CHUNK_CELLS = 1 << 22


def row_slices(n: int, width: int) -> Iterator[slice]:
    """Row blocks of an (n × width) computation that keep each block under CHUNK_CELLS cells."""
    step = max(1, CHUNK_CELLS // max(1, width))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


@dataclass(frozen=True)
class HistoryStep:
    """One epoch of m devices of a history-dependent mechanism (docs/design.md §2.5).

    Attributes
    ----------
    inputs : (m,) int64: each device's *report input* (the code its report randomizes: a
        value, a node's transition, a vote), or -1 when the device sends nothing this epoch.
    costs : (m,) float64: the ε each report spends under the mechanism's accounting (0 for a
        report whose law is the data-independent default, and for no report).
    history : the devices' history after this epoch (same fields and shapes as before).
    """

    inputs: NDArray[np.int64]
    costs: NDArray[np.float64]
    history: dict[str, NDArray]

    @property
    def sends(self) -> NDArray[np.bool_]:
        """Which devices send a report this epoch."""
        return self.inputs >= 0


@dataclass
class PopulationStep:
    """One validated call of the population path (``perturb``, ``perturb_support``).

    Attributes
    ----------
    memo : the population's memos and per-user state.
    users : the reporting users (indices into the population).
    state : their per-user state (hash ids, sampled buckets, cohorts), one row per user.
    values : their inputs, checked.
    keys : their memo keys (what round 1 is memoized on).
    """

    memo: PopulationMemo
    users: NDArray[np.int64]
    state: dict[str, NDArray]
    values: Any
    keys: NDArray


class Mechanism(ABC):
    """What a client does and what it costs: see the module docstring for the hooks."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    #: True for memoizing chains (round 1 memoized per memo key); one-shot oracles randomize
    #: afresh every report.
    longitudinal: ClassVar[bool]
    #: How reports are organised in time; derived from ``longitudinal`` unless declared.
    rounds: ClassVar[Rounds]
    wire_id: ClassVar[int]
    report_kind: ClassVar[ReportKind]
    budget_params: ClassVar[tuple[str, ...]]
    #: Appended to a budget error, e.g. which protocol takes the budget that was given.
    budget_note: ClassVar[str] = ""
    test_params: ClassVar[tuple[dict[str, Any], ...]]
    #: What persists per device and rides in its reports (hash seed, Hadamard row, cohort,
    #: bucket map, memo), from which the shuffle routes are chosen (docs/math.md §17.4);
    #: every registered class declares its own.
    linkage: ClassVar[Linkage]
    #: The type of the input domain (its instance is :attr:`domain`): what the engines and the
    #: listings read at class level (``input_domain.codes``, ``input_domain.kind``).
    input_domain: ClassVar[type[Domain]] = Categorical
    #: What the estimate is (declared by the estimator role).
    estimand: ClassVar[Estimand]
    #: Derived from ``estimand``: the estimate is a vector of value frequencies, so the
    #: frequency tests, post-processing and the count-level engine apply.
    estimates_frequencies: ClassVar[bool]
    #: The budget parameter ``eps`` is nominal: a report's exact ε is below it (THE thresholds
    #: SHE's noisy values on the device, docs/math.md §21.4). Every claim is the exact ε.
    nominal_budget: ClassVar[bool] = False
    #: What a device of a planned mechanism needs from the server before each epoch or round
    #: (the keys of its plan); empty when nothing is planned.
    plan_keys: ClassVar[tuple[str, ...]] = ()
    #: How devices of other languages run it (docs/client-spec.md's tables, the JavaScript
    #: family module); None: no device client outside Python (:mod:`.clientspec`).
    client_spec: ClassVar[ClientSpec | None] = None
    #: Why no device runs this mechanism (it is given for comparison only: no ``client_spec``,
    #: no JavaScript family, no test vectors); None for a mechanism devices run.
    comparison_only: ClassVar[str | None] = None
    #: The device test vectors' cases of this protocol (docs/client-spec.md §9).
    vector_cases: ClassVar[tuple[VectorCase, ...]] = ()
    #: What a device keeps of its own past values when its reports depend on them (the
    #: change-based mechanisms); None: a report depends on the current value alone.
    history: ClassVar[History | None] = None
    k: int
    p1: float
    q1: float
    p2: float
    q2: float

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "wire_id" in cls.__dict__:
            _codec.claim_wire_id(cls.wire_id, cls.name)
        inherited = getattr(cls, "rounds", None)
        declared = "rounds" in cls.__dict__ or (inherited is not None and inherited.planned)
        if not declared and isinstance(getattr(cls, "longitudinal", None), bool):
            cls.rounds = Rounds.MEMO_CHAIN if cls.longitudinal else Rounds.ONE_SHOT
        estimand = getattr(cls, "estimand", None)
        if isinstance(estimand, Estimand):
            cls.estimates_frequencies = estimand.frequency_vector

    @classmethod
    def setting_params(
        cls, k: int, eps_perm: float, eps_1: float, one_shot_eps: float | None = None
    ) -> dict[str, Any]:
        """Constructor parameters at a common listing setting (``longldp protocols``, the
        shuffle table): the input domain's (k values, or the unit interval); the budget at
        ε∞ = ``eps_perm`` with ε1 = ``eps_1`` (a one-shot mechanism at ``one_shot_eps``, by
        default ``eps_perm``; :meth:`longldp.privacy.Budget.at_level`), or a budget of the
        mechanism's own single parameter (a window's ε, a lifetime's) at ``eps_perm``; every
        other required parameter (a window, a horizon, a budget of several parts) at the
        class's first test value. A mechanism whose budget takes another form overrides it."""
        params = {**cls.input_domain.setting_params(k)}
        native = [p for p in cls.budget_params if p not in privacy.BUDGET_KEYS]
        if len(native) == 1:
            params[native[0]] = eps_perm
        elif not native:
            level = eps_perm if cls.longitudinal or one_shot_eps is None else one_shot_eps
            params |= privacy.Budget.at_level(level, eps_1, cls.budget_params).given()
        for name in cls.required_parameters():
            if name not in params:
                params[name] = cls.test_params[0][name]
        return params

    @classmethod
    def required_parameters(cls) -> tuple[str, ...]:
        """The constructor parameters without a default (every one must be given)."""
        return tuple(
            f.name
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.init
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        )

    @classmethod
    def max_alpha(cls, eps_perm: float, **params: Any) -> float:
        """Largest α = ε1/ε∞ (excluded) a two-round chain reaches at ``eps_perm`` (and the
        class's other constructor ``params``, where the limit depends on them): 1 unless the
        chain's round 2 cannot reach every ε1 (L-OUE, L-SOUE: math §3.3)."""
        return 1.0

    # ------------------------------------------------------------------ parameters
    def _validate_common(self) -> None:
        """Check k and the budgets under this protocol's name, before any derivation."""
        check.integer(self.name, "k", self.k, minimum=2)
        fields = self.__dataclass_fields__  # type: ignore[attr-defined]
        if self.longitudinal and "eps_1" in fields:
            check.chain_budgets(self.name, self.eps_perm, self.eps_1)  # type: ignore[attr-defined]
        elif "eps" in fields:
            check.budget(self.name, "eps", self.eps)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ input domain
    @property
    def domain(self) -> Domain:
        """The input domain (an instance of :attr:`input_domain`): codes [0, k) unless a family
        says otherwise."""
        return Categorical(self.k)

    @property
    def domain_size(self) -> int | None:
        """Number of inputs: values are ints in [0, domain_size); None: not codes (strings)."""
        return self.domain.size if self.domain.codes else None

    def as_inputs(self, codes: ArrayLike) -> Any:
        """The inputs that integer codes stand for (:meth:`Domain.as_inputs`)."""
        return self.domain.as_inputs(codes)

    # ------------------------------------------------------------------ privacy claims
    @property
    def chain_probabilities(self) -> tuple[float, float, float, float] | None:
        """(p1, q1, p2, q2) of the two-round chain the reports follow (docs/math.md §2), for
        listings; a family whose channel is not such a chain (numbers) overrides it: None."""
        return self.p1, self.q1, self.p2, self.q2

    @functools.cached_property
    def P1(self) -> float:
        """Probability that a report supports v when the user's value is v."""
        return privacy.chain_support(self.p1, self.q1, self.p2, self.q2)[0]

    @functools.cached_property
    def P0(self) -> float:
        """Probability that a report supports v when the user's value is not v."""
        return privacy.chain_support(self.p1, self.q1, self.p2, self.q2)[1]

    @property
    def repeats_memo(self) -> bool:
        """Every report repeats the memo (no round 2: p2 = 1, q2 = 0, dBitFlipPM)."""
        return self.p2 == 1.0 and self.q2 == 0.0

    @abstractmethod
    def single_report_epsilon(self) -> float:
        """Worst-case ε of one report, computed from the exact composed channel."""

    def first_round_epsilon(self) -> float:
        """Worst-case ε of the memoized round 1 (what a value reported forever reveals)."""
        return self.eps_perm  # type: ignore[attr-defined]

    def report_slack(self) -> float:
        """How far the ε of one report as the float samplers realize it may exceed the exact
        channel's (docs/math.md §20.12); :meth:`single_report_epsilon` includes it. 0 where
        every draw compares a uniform with a stored probability (docs/math.md §16.1): the
        exact channel is the realized one."""
        return 0.0

    def memo_slack(self) -> float:
        """The same for one memo (:meth:`first_round_epsilon` includes it)."""
        return 0.0

    @property
    def accounting(self) -> privacy.Accounting:
        """How one user's ε grows (docs/math.md §4): per report (ε1) when nothing is memoized,
        else per memo, min(t·ε1, m·ε∞) with ε∞ the round-1 ε."""
        if self.longitudinal:
            return privacy.Accounting.per_memo(
                self.single_report_epsilon(), self.first_round_epsilon()
            )
        return privacy.Accounting.per_report(self.single_report_epsilon())

    def spent_budget(self, memo: PopulationMemo) -> dict[str, NDArray]:
        """Per-user budget of a population: reports, distinct memos and the ε of the
        :attr:`accounting` rule (min(t·ε1, m·ε∞) for a chain, docs/math.md §4; a
        history-dependent mechanism: the sum of what each of the user's reports cost)."""
        t = memo.reports
        m = memo.memos_per_user()
        if self.history is not None:
            return {"reports": t, "memos": m, "epsilon": memo.spent.copy()}
        return {"reports": t, "memos": m, "epsilon": self.accounting.spent(t, m)}

    def budget_spent(self, reports: int, memos: int) -> privacy.SpentBudget:
        """What one client has spent after ``reports`` reports from ``memos`` distinct memos:
        min(t·ε1, m·ε∞), or t·ε for a protocol that memoizes nothing (docs/math.md §4)."""
        acc = self.accounting
        return privacy.spent_budget(reports, memos, acc.eps_report, acc.eps_memo)

    def ledger_keys(self, trajectories: NDArray, state: Mapping[str, Any] | None = None) -> NDArray:
        """The memo key of every report of (n, τ) trajectories, for the ledger (math §19.6).

        The default: a memo per value. A family whose memo key is another function of the value
        (a bucket, a per-user hash) overrides it; without the per-user ``state`` such a family
        returns the values, whose distinct count bounds the distinct keys from above.
        """
        return np.asarray(trajectories)

    # ------------------------------------------------------------------ planned rounds
    @property
    def planned(self) -> bool:
        """Whether the server plans each epoch or round (``rounds`` is ``planned``)."""
        return self.rounds.planned

    def check_plan(self, plan: Mapping[str, Any] | None) -> dict[str, Any]:
        """The plan of one epoch or round, checked (a small JSON object with the keys
        :attr:`plan_keys`); a mechanism that plans nothing accepts only None or ``{}``."""
        if plan is None:
            plan = {}
        if not isinstance(plan, Mapping):
            raise ValueError(f"{self.name}: a plan must be a JSON object; got {plan!r:.200}.")
        unknown = sorted(set(plan) - set(self.plan_keys))
        missing = sorted(set(self.plan_keys) - set(plan))
        if unknown or missing:
            allowed = ", ".join(self.plan_keys) or "nothing (it is not planned)"
            raise ValueError(
                f"{self.name}: the plan's keys must be {allowed}; "
                f"got unknown {unknown or 'none'} and missing {missing or 'none'}."
            )
        return dict(plan)

    def example_plan(self, epoch: int) -> dict[str, Any] | None:
        """A plan a device may be given at ``epoch``, valid at every epoch (round trips, examples,
        docs); None for a mechanism that plans nothing. A planned family overrides it."""
        if self.planned:
            raise NotImplementedError(f"{self.name}: a planned mechanism gives its example plan.")
        return None

    def server_plan(
        self, offset: int, closed: Callable[[int], NDArray | None]
    ) -> tuple[str, dict[str, Any] | None]:
        """What a collection serves at its epoch ``offset`` (epochs after its first):
        ``("report", plan)`` (a planned mechanism: the epoch's plan; else None), ``("none",
        None)`` (nothing is reported at this epoch) or ``("pending", None)`` (the plan waits for
        the server's decision on an earlier epoch; ``closed(j)`` gives the support counts of
        epoch offset j once that epoch is closed, else None). A planned family overrides it;
        one whose decisions the server does not take yet raises ``ValueError`` saying so."""
        if self.planned:
            raise ValueError(f"{self.name}: the server does not plan its rounds.")
        return "report", None

    def reports_spent(
        self,
        owners: NDArray[np.int64],
        epochs: NDArray[np.int64],
        records: NDArray,
        plans: Callable[[int], Mapping[str, Any] | None],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """What each device can have spent, from what a server sees: its reports (``owners``:
        the device of each report, ``epochs``, the report ``records``) and the plans it served
        (``plans(epoch)``). Returns (devices, spent, lifetime): the devices in increasing
        order, each one's figure of the accounting (docs/math.md §19.6) and over the whole
        horizon, as upper bounds where the report alone does not tell (a real vote from a
        default one). One-shot: t·ε per device. A memo chain's needs its distinct memos, which
        only the device knows: ``ValueError``. A family of changing data overrides it."""
        devices, t = np.unique(np.asarray(owners, dtype=np.int64), return_counts=True)
        if self.accounting.rule != "per-report":
            raise ValueError(
                f"{self.name}: its spending depends on what the reports do not show (its "
                f"accounting is {self.accounting.rule}); only the device knows it."
            )
        spent = np.asarray(privacy.spent_epsilon(t, 0, self.accounting.eps_report, None))
        return devices, spent.astype(np.float64), spent.astype(np.float64)

    def for_round(self, plan: Mapping[str, Any] | None) -> Mechanism:
        """The mechanism one epoch or round's reports are drawn with, given the server's plan
        (a planned family returns a configured copy; everything else is itself)."""
        self.check_plan(plan)
        return self

    # ------------------------------------------------------------------ history
    def new_history(self, m: int) -> dict[str, NDArray]:
        """The history of m devices that have reported nothing yet (a history-dependent
        mechanism; its :attr:`history` trait names the fields)."""
        raise ValueError(f"{self.name}: its reports do not depend on a device's history.")

    def history_step(
        self,
        values: NDArray,
        state: dict[str, NDArray],
        history: dict[str, NDArray],
        epochs: NDArray[np.int64],
        plan: Mapping[str, Any] | None,
    ) -> HistoryStep:
        """One epoch of m devices: each one's report input, its cost and the history after
        (:class:`HistoryStep`), from its ``values`` (checked), per-user ``state``, ``history``
        and epoch, and the server's ``plan``. Pure: nothing is drawn or changed."""
        raise ValueError(f"{self.name}: its reports do not depend on a device's history.")

    # ------------------------------------------------------------------ population path
    def new_memo(self, n_users: int) -> PopulationMemo:
        """Empty client state for ``n_users`` users (round-1 memos, per-user state and, for a
        history-dependent mechanism, each user's history)."""
        n_users = check.integer(self.name, "n_users", n_users, minimum=1)
        store = self._memo_store(n_users) if self.longitudinal else None
        memo = PopulationMemo(n_users, store, has_state=np.zeros(n_users, dtype=bool))
        if self.history is not None:
            memo.history = self.new_history(n_users)
        return memo

    def perturb(
        self,
        values: ArrayLike,
        memo: PopulationMemo | None = None,
        rng: Any = None,
        users: ArrayLike | None = None,
        *,
        plan: Mapping[str, Any] | None = None,
    ) -> NDArray:
        """Reports of many users at once: what their clients would send (vectorized).

        ``values[i]`` is the value of user ``users[i]`` (default: user i). ``memo`` persists
        between calls; one-shot oracles may omit it (then per-user state is drawn afresh).
        ``plan``: the server's plan of this epoch (a planned mechanism: its reports are drawn
        by ``for_round(plan)``; without one, the class's own channel). A history-dependent
        mechanism takes one epoch per call and returns the reports of the users who send one
        (docs/design.md §2.5).
        """
        source = as_random_source(rng)
        if self.history is not None:
            return self._perturb_history(values, memo, users, source, plan)
        if self.planned:
            if plan is not None:
                return self.for_round(plan).perturb(values, memo, source, users)
        else:
            self.check_plan(plan)
        step = self._population_step(values, memo, users, source)
        if step.memo.store is None:
            payload = self._round1(step.keys, step.state, source)
        else:
            payload = self._round2(self._lookup_memos(step, source), source)
        step.memo.reports[step.users] += 1
        return self._make_reports(payload, step.state)

    def perturb_support(
        self,
        values: ArrayLike,
        memo: PopulationMemo,
        rng: Any = None,
        users: ArrayLike | None = None,
        *,
        plan: Mapping[str, Any] | None = None,
    ) -> NDArray:
        """Support counts of ``perturb`` drawn without materializing reports (docs/design.md §4).

        Round 1 is drawn per user and memoized exactly as in :meth:`perturb`, and every piece of
        per-user state (hash function, sampled buckets) is kept for all calls; round 2 is then
        drawn from the memos without building report records (:meth:`support_from_memos`).
        Given the memos and the per-user state this is the exact law of the server's support
        counts, so over many calls the counts have the joint law of the real clients'
        (docs/math.md, "Variance over time"). One-shot oracles use :meth:`sample_support`.
        A history-dependent mechanism aggregates the reports of :meth:`perturb` (its history
        is carried per user in ``memo``).
        """
        source = as_random_source(rng)
        if self.history is not None:
            return self.support_counts(self._perturb_history(values, memo, users, source, plan))
        if self.planned:
            if plan is not None:
                return self.for_round(plan).perturb_support(values, memo, source, users)
        else:
            self.check_plan(plan)
        step = self._population_step(values, memo, users, source)
        if step.memo.store is None:
            counts = np.bincount(step.values, minlength=self.k)
            support = self._sample_support(counts, step.users.size, source)
        else:
            support = self.support_from_memos(self._lookup_memos(step, source), step, source)
        step.memo.reports[step.users] += 1
        return support

    def support_from_memos(
        self, memos: NDArray, step: PopulationStep, rng: RandomSource
    ) -> NDArray:
        """Support counts of one round 2 drawn from the users' round-1 ``memos`` (one per user
        of ``step``), the law of ``support_counts`` of the reports it would make.

        The default builds the reports (exact, O(n·k)); a family overrides it with a count-level
        draw (binomials per bit for UE chains, keeps plus a multinomial for GRR chains, the
        per-user bucket masks of LOLOHA, docs/design.md §4)."""
        return self.support_counts(self._make_reports(self._round2(memos, rng), step.state))

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        """Support counts of one timestamp drawn directly from the true counts (docs/design.md §4).

        Exactly distributed as aggregating ``perturb`` of users with these values, per
        timestamp (see each family for the joint law); cost O(k), not O(n·k). ``true_counts``
        may be a (τ, k) matrix: then τ independent timestamps are drawn at once.
        """
        counts = np.asarray(true_counts)
        if counts.ndim == 2:
            for row in counts:
                check.counts(self.name, row, self.k)
            counts = counts.astype(np.int64, copy=False)
        else:
            counts = check.counts(self.name, true_counts, self.k)
        total = counts.sum(axis=-1, keepdims=True)
        if n is not None and np.any(total != int(n)):
            raise ValueError(
                f"{self.name}: 'n' must equal sum(true_counts) = {int(total.flat[0])}; got {n}."
            )
        source = as_random_source(rng)
        if counts.ndim == 1:
            return self._sample_support(counts, int(total[0]), source)
        return self._sample_support_batch(counts, total, source)

    def _sample_support_batch(
        self, counts: NDArray[np.int64], totals: NDArray[np.int64], rng: RandomSource
    ) -> NDArray:
        """τ timestamps at once; families whose draws broadcast override this loop."""
        return np.stack(
            [self._sample_support(c, int(t[0]), rng) for c, t in zip(counts, totals, strict=True)]
        )

    def _perturb_history(
        self,
        values: Any,
        memo: PopulationMemo | None,
        users: ArrayLike | None,
        source: RandomSource,
        plan: Mapping[str, Any] | None,
    ) -> NDArray:
        """One epoch of a history-dependent mechanism for the given users: each one's report
        input from her history (:meth:`history_step`), the reports of those who send one, and
        her history, epoch count, reports and spending carried forward in ``memo``."""
        vals, n = self._check_population_values(values)
        if memo is None:
            raise ValueError(f"{self.name}: 'memo' is required (use new_memo(n_users)).")
        who = _user_index(self.name, users, n, memo.n_users)
        state = self._ensure_state(memo, who, source)
        before = {name: arr[who] for name, arr in memo.history.items()}
        step = self.history_step(vals, state, before, memo.epochs[who], plan)
        sends = step.sends
        sent = _rows(state, sends)
        payload = self._round1(step.inputs[sends], sent, source)
        for name, arr in step.history.items():
            memo.history[name][who] = arr
        memo.epochs[who] += 1
        memo.reports[who[sends]] += 1
        memo.spent[who] += step.costs
        return self._make_reports(payload, sent)

    def _check_population_values(self, values: Any) -> tuple[Any, int]:
        """The population path's inputs, checked by the domain, and their number."""
        vals = self.domain.check(self.name, values)
        if np.ndim(vals) != 1:
            raise ValueError(f"{self.name}: 'values' must be 1-D; got shape {np.shape(vals)}.")
        return vals, len(vals)

    def _population_step(
        self,
        values: Any,
        memo: PopulationMemo | None,
        users: ArrayLike | None,
        source: RandomSource,
    ) -> PopulationStep:
        """Validate one call of the population path (:class:`PopulationStep`)."""
        vals, n = self._check_population_values(values)
        memo = self._population_memo(memo, n)
        who = _user_index(self.name, users, n, memo.n_users)
        state = self._ensure_state(memo, who, source)
        return PopulationStep(memo, who, state, *self._memo_keys(vals, memo, state))

    def _population_memo(self, memo: PopulationMemo | None, n: int) -> PopulationMemo:
        if memo is None:
            if self.longitudinal:
                raise ValueError(f"{self.name}: 'memo' is required (use new_memo(n_users)).")
            memo = self.new_memo(max(1, n))
        return memo

    def _memo_keys(self, values: Any, memo: PopulationMemo, state: dict) -> tuple[Any, NDArray]:
        """(values, memo keys) of one call."""
        return values, self._memo_key(values, state)

    def _lookup_memos(self, step: PopulationStep, source: RandomSource) -> NDArray:
        assert step.memo.store is not None
        keys, state = step.keys, step.state
        return step.memo.store.get_or_create(
            step.users, keys, lambda miss: self._round1(keys[miss], _rows(state, miss), source)
        )

    def _ensure_state(self, memo: PopulationMemo, who: NDArray, rng: RandomSource) -> dict:
        assert memo.has_state is not None
        need = who[~memo.has_state[who]]
        if need.size:
            fresh = self._new_state(need.size, rng)
            for name, arr in fresh.items():
                if name not in memo.state:
                    memo.state[name] = np.zeros((memo.n_users, *arr.shape[1:]), dtype=arr.dtype)
                memo.state[name][need] = arr
            memo.has_state[need] = True
        return {name: arr[who] for name, arr in memo.state.items()}

    # ------------------------------------------------------------------ one client
    def client(
        self,
        rng: RandomSource | None = None,
        *,
        round1: Round1Source | None = None,
        round2: RandomSource | None = None,
    ) -> Client:
        """A stateful client for one user (:class:`~longldp.protocols.client.Client`): OS
        randomness unless a Generator is passed; ``round1``/``round2`` choose each round's
        source (e.g. :class:`~longldp.protocols.client.DerivedRound1` on a device)."""
        return Client(self, rng, round1=round1, round2=round2)

    def new_client_history(self) -> dict[str, NDArray] | None:
        """One client's history before its first report (None: not history-dependent)."""
        return None if self.history is None else self.new_history(1)

    def new_client_state(self, rng: RandomSource) -> dict[str, NDArray]:
        """One client's per-user state (hash seed, sampled buckets, cohort), drawn from ``rng``."""
        return self._new_state(1, rng)

    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        """(memo key, round-1 input) of one input of a client with per-user ``state``.

        ``value`` is checked (an int in [0, k)); the memo key is an int (the value, its hash
        bucket, its bucket), the round-1 input the (1,) array of it.
        """
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if not is_int or not 0 <= int(value) < self.k:
            raise ValueError(
                f"{self.name}: 'value' must be an int in [0, {self.k}); got {value!r}."
            )
        keys = self._memo_key(np.array([int(value)], dtype=np.int64), state)
        return int(keys[0]), keys

    def client_round1(self, encoded: Any, state: dict, rng: RandomSource) -> NDArray:
        """Round 1 of one client's input (the memo; for a one-shot protocol, the report)."""
        return self._round1(encoded, state, rng)

    def client_round2(self, memo: NDArray, rng: RandomSource) -> NDArray:
        """Round 2 of one memo: the payload of one report."""
        return self._round2(memo, rng)

    def client_record(self, payload: NDArray, state: dict) -> Any:
        """The report record a server receives for one payload."""
        return self._make_reports(payload, state)[0]

    def example_memo(self) -> NDArray:
        """A round-1 payload of one client (its dtype and shape are every memo's)."""
        return self._example_payload()[0]

    # ------------------------------------------------------------------ hooks
    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.k, (), np.int64)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {}

    def _memo_key(self, values: NDArray[np.int64], state: dict) -> NDArray[np.int64]:
        return values

    @abstractmethod
    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray: ...

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return payload

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        return payload

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = self._new_state(1, np.random.default_rng(0))
        return self._round1(np.zeros(1, dtype=np.int64), state, np.random.default_rng(0)), state

    @abstractmethod
    def support_counts(self, reports: NDArray) -> NDArray:
        """Support counts of a batch of reports (what the server accumulates)."""

    @abstractmethod
    def _sample_support(self, counts: NDArray[np.int64], n: int, rng: RandomSource) -> NDArray: ...


# ---------------------------------------------------------------------- helpers


def _user_index(owner: str, users: ArrayLike | None, m: int, n_users: int) -> NDArray[np.int64]:
    if users is None:
        if m > n_users:
            raise ValueError(f"{owner}: {m} values for a memo of {n_users} users.")
        return np.arange(m, dtype=np.int64)
    who = check.domain_values(owner, users, n_users, "users")
    if who.shape != (m,):
        raise ValueError(f"{owner}: 'users' must have one entry per value ({m}); got {who.shape}.")
    if np.unique(who).size != m:
        raise ValueError(f"{owner}: 'users' must not repeat a user within one call.")
    return who


def _rows(state: dict, mask: NDArray[np.bool_]) -> dict:
    return {name: arr[mask] for name, arr in state.items()}
