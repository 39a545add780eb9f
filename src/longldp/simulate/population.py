"""The population object: n simulated users reporting over timestamps with one engine.

Every simulation of the package runs through :class:`Population` (docs/design.md §4, §9):
``longldp.simulate.simulate`` and every application (multidim, FELIP, the set-valued miners,
GFIM). A population holds n users and one engine (:mod:`longldp.simulate.engines`); its users
report through :class:`ReportingGroup` objects, each a fixed subset of the users (all of them
by default) with its own protocol and its own round-1 memos. A user may sit in several groups
(an SPL user reports every attribute; an LDPMiner user both phases): her spent budget is the
sum over her groups (sequential composition, docs/math.md §4).

- :meth:`ReportingGroup.support`: one timestamp's support counts of a group, the engine's way
  (the only place that switches on the engine);
- :meth:`Population.support`: one timestamp of every group, in group order;
- :meth:`Population.run`: every timestamp of every group. The per-user engines go timestamp by
  timestamp (the memos carry through time); the count-level engine draws all timestamps of a
  group in one call, group after group (timestamps are independent there);
- :meth:`Population.budget` and :meth:`Population.budget_by_group`: per user ``reports``,
  distinct ``memos`` and the ``epsilon`` bound (docs/math.md §4). ``memos`` and ``epsilon`` of
  a memoizing chain are None under the count-level engine, which draws no memo.

A group either has one protocol for good (its memos and per-user state are kept across all
timestamps, as a real client keeps them) or none: then every call passes a one-shot oracle,
which may change from call to call (the set-valued apps rebuild their PSFO for the current
domain and padding length), the users draw fresh per-user state at every call, and each call
spends the ε it declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.protocols import FrequencyOracle
from longldp.simulate.engines import COUNT_LEVEL, PER_USER, check_applies, check_engine

#: Per user (or per user and group): ``reports``, ``memos`` and ``epsilon`` arrays; a key is
#: None when unknown (a chain under the count-level engine).
SpentByUser = dict[str, NDArray | None]


@dataclass(frozen=True)
class Epoch:
    """One timestamp of a reporting group (:meth:`ReportingGroup.epochs`): its support counts,
    and the report records when the engine materializes them (``"reports"``; else None)."""

    support: NDArray
    records: NDArray | None


class ReportingGroup:
    """Users of a population who report through one protocol; create with :meth:`Population.group`.

    Attributes
    ----------
    population : Population
    proto : FrequencyOracle or None
        The group's protocol for all timestamps, or None (a one-shot oracle per call).
    users : numpy.ndarray of int64 or None
        The members, as indices into the population (None: every user, in order).
    n : int
        Number of members.
    label : str
    memo : PopulationMemo or None
        Round-1 memos and per-user state (per-user engines, fixed protocol).
    reports : numpy.ndarray of int64, shape (n,)
        Reports each member has sent.
    """

    def __init__(
        self,
        population: Population,
        proto: FrequencyOracle | None,
        users: NDArray[np.int64] | None,
        label: str,
    ):
        self.population = population
        self.proto = proto
        self.users = users
        self.n = population.n if users is None else int(users.size)
        self.label = label
        fixed_memo = proto is not None and population.engine != COUNT_LEVEL
        self.memo = proto.new_memo(self.n) if fixed_memo else None
        self.reports = np.zeros(self.n, dtype=np.int64)
        self._oneshot_eps = np.zeros(self.n, dtype=np.float64)

    @property
    def engine(self) -> str:
        """The population's engine."""
        return self.population.engine

    def support(
        self,
        values: ArrayLike,
        rng: Any,
        oracle: FrequencyOracle | None = None,
        eps: float | None = None,
    ) -> NDArray:
        """Support counts of one timestamp: member i reports ``values[i]`` (docs/design.md §4).

        Parameters
        ----------
        values : array_like of int, shape (n,)
            Each member's value, in member order.
        rng : numpy.random.Generator
        oracle : FrequencyOracle, optional
            Groups without a protocol: this call's one-shot oracle. Groups with one: None or
            that same protocol.
        eps : float, optional
            The ε one report of this call spends (one-shot oracle per call; default its
            ``eps``). A PSFO over amplified GRR claims less than its oracle's own ε'.

        Returns
        -------
        numpy.ndarray
            The support counts, as the server's aggregator would hold them.
        """
        proto = self._protocol(oracle, eps)
        vals = np.asarray(values)
        if vals.shape != (self.n,):
            raise ValueError(
                f"{self.population.owner}: group {self.label!r} has {self.n} users; got values "
                f"of shape {vals.shape}."
            )
        self.reports += 1
        if self.engine == COUNT_LEVEL:
            counts = np.bincount(vals, minlength=proto.domain_size)
            return proto.sample_support(counts, self.n, rng)
        # A fixed protocol keeps its memo; a one-shot oracle per call draws fresh state.
        memo = self.memo if self.proto is not None else proto.new_memo(self.n)
        if self.engine == PER_USER:
            return proto.perturb_support(vals, memo, rng)
        return proto.support_counts(proto.perturb(vals, memo, rng))

    def epochs(
        self, rng: Any, values: ArrayLike | None = None, counts: ArrayLike | None = None
    ) -> Iterator[Epoch]:
        """The group's timestamps one after the other, lazily: an :class:`Epoch` each.

        ``values`` (τ, n): each member's value at each timestamp (every engine); ``counts``
        (τ, k): their histograms instead (count-level engine only: the other engines simulate
        users one by one). Count level: the τ timestamps are drawn in one ``sample_support``
        call when the first is asked for; per-user: one ``perturb_support`` per timestamp;
        reports: one ``perturb`` per timestamp, whose records the epoch carries. Whatever the
        caller draws between two steps (fake users, say) comes after the group's draws of the
        step, as in a real collection.
        """
        owner = self.population.owner
        if (values is None) == (counts is None):
            raise ValueError(f"{owner}: give exactly one of 'values' (τ × n) or 'counts' (τ × k).")
        if counts is not None and self.engine != COUNT_LEVEL:
            raise ValueError(
                f"{owner}: engine {self.engine!r} simulates users one by one and needs "
                "'values'; 'counts' suffice only for engine 'count-level'."
            )
        proto = self._protocol(None, None)
        if self.engine == COUNT_LEVEL:
            if counts is None:
                vals = np.asarray(values)
                size = proto.domain_size
                counts = np.stack([np.bincount(np.asarray(v), minlength=size) for v in vals])
            for row in self.sample_counts(np.atleast_2d(counts), rng):
                yield Epoch(row, None)
            return
        for v in np.asarray(values):
            if self.engine == PER_USER:
                yield Epoch(self.support(v, rng), None)
                continue
            self.reports += 1
            assert self.memo is not None
            records = proto.perturb(v, self.memo, rng)
            yield Epoch(proto.support_counts(records), records)

    def sample_counts(self, counts: ArrayLike, rng: Any) -> NDArray:
        """Count-level engine: support counts of many timestamps from their true counts.

        ``counts`` has shape (τ, k): row t is the histogram of the members' values at t. The
        τ timestamps are drawn in one ``sample_support`` call (exact per timestamp).
        """
        if self.engine != COUNT_LEVEL or self.proto is None:
            raise ValueError(
                f"{self.population.owner}: sample_counts needs the count-level engine and a "
                f"group with a fixed protocol; got engine {self.engine!r}."
            )
        table = np.asarray(counts)
        self.reports += table.shape[0] if table.ndim == 2 else 1
        return self.proto.sample_support(table, self.n, rng)

    def budget(self) -> SpentByUser:
        """Per member: ``reports``, distinct ``memos`` and the ``epsilon`` bound (math §4).

        Fixed protocol: ``proto.spent_budget`` of the memos, min(t·ε1, m·ε∞) for a chain. Under
        the count-level engine no memo exists: a chain's ``memos`` and ``epsilon`` are None, a
        one-shot protocol's are 0 and t·ε. One-shot oracle per call: no memos, ``epsilon`` the
        sum of what each call declared.
        """
        if self.proto is None:
            zero = np.zeros(self.n, dtype=np.int64)
            return {"reports": self.reports, "memos": zero, "epsilon": self._oneshot_eps}
        if self.memo is not None:
            spent = self.proto.spent_budget(self.memo)
            return {"reports": self.reports, "memos": spent["memos"], "epsilon": spent["epsilon"]}
        if self.proto.longitudinal:
            return {"reports": self.reports, "memos": None, "epsilon": None}
        eps = privacy.spent_epsilon(self.reports, 0, self.proto.single_report_epsilon(), None)
        return {"reports": self.reports, "memos": np.zeros_like(self.reports), "epsilon": eps}

    def _protocol(self, oracle: FrequencyOracle | None, eps: float | None) -> FrequencyOracle:
        owner = self.population.owner
        if self.proto is not None:
            if (oracle is not None and oracle != self.proto) or eps is not None:
                raise ValueError(
                    f"{owner}: group {self.label!r} reports through {self.proto.name} at every "
                    "timestamp; pass no other oracle and no 'eps'."
                )
            return self.proto
        if oracle is None or oracle.longitudinal:
            raise ValueError(
                f"{owner}: group {self.label!r} has no fixed protocol: every call must pass a "
                f"one-shot oracle; got {oracle!r}."
            )
        check_applies(owner, self.engine, oracle)
        self._oneshot_eps += oracle.single_report_epsilon() if eps is None else eps
        return oracle


class Population:
    """n simulated users and the engine that runs their reports (docs/design.md §4).

    Parameters
    ----------
    n : int
        Number of users, n >= 1.
    engine : {"per-user", "reports", "count-level"}, default="per-user"
    owner : str, default="simulate"
        Name that starts error messages (the application using the population).

    Examples
    --------
    >>> import numpy as np, longldp as ll
    >>> proto = ll.protocol("L-OSUE", k=4, eps_perm=2.0, eps_1=1.0)
    >>> pop = Population.of(proto, 3)
    >>> rng = np.random.default_rng(0)
    >>> pop.support([np.array([0, 1, 1])], rng)[0].shape
    (4,)
    >>> pop.budget()["reports"].tolist()
    [1, 1, 1]
    """

    def __init__(self, n: int, engine: str = PER_USER, owner: str = "simulate"):
        self.owner = owner
        self.n = check.integer(owner, "n", n, minimum=1)
        self.engine = check_engine(owner, engine)
        self.groups: list[ReportingGroup] = []

    @property
    def simulates_clients(self) -> bool:
        """Whether users are simulated one by one, as clients with memos (the per-user and
        reports engines), rather than as counts (count level)."""
        return self.engine != COUNT_LEVEL

    @classmethod
    def of(
        cls, proto: FrequencyOracle, n: int, engine: str = PER_USER, owner: str = "simulate"
    ) -> Population:
        """A population whose n users all report through ``proto`` (one group)."""
        pop = cls(n, engine, owner)
        pop.group(proto)
        return pop

    def group(
        self,
        proto: FrequencyOracle | None = None,
        users: ArrayLike | None = None,
        label: str | None = None,
    ) -> ReportingGroup:
        """Add a group of users who report through ``proto`` (see :class:`ReportingGroup`).

        ``users`` are distinct indices into [0, n) (default every user); ``proto`` None makes
        a group that is given a one-shot oracle at every call.
        """
        who = None
        if users is not None:
            who = check.domain_values(self.owner, users, self.n, "users")
            if who.ndim != 1 or who.size == 0 or np.unique(who).size != who.size:
                raise ValueError(
                    f"{self.owner}: a group's 'users' must be distinct indices in [0, {self.n}), "
                    f"at least one; got shape {who.shape}."
                )
        if proto is not None:
            check_applies(self.owner, self.engine, proto)
        group = ReportingGroup(self, proto, who, label or f"group {len(self.groups)}")
        self.groups.append(group)
        return group

    def support(self, values: Sequence[ArrayLike], rng: Any) -> list[NDArray]:
        """One timestamp: ``values[j]`` are group j's members' values; its support counts, per
        group and in group order."""
        self._check_values(values)
        return [g.support(v, rng) for g, v in zip(self.groups, values, strict=True)]

    def run(self, timestamps: Iterable[Sequence[ArrayLike]], rng: Any) -> list[NDArray]:
        """Support counts of every group at every timestamp, shape (τ, ...) per group.

        ``timestamps`` yields, for t = 0, 1, ..., one value array per group (as for
        :meth:`support`); it is read in order, lazily under the per-user engines. Per-user
        engines: timestamp after timestamp, group after group, the memos carrying over.
        Count-level: the true counts of every timestamp first, then all τ timestamps of a group
        in one draw, group after group.
        """
        if self.engine != COUNT_LEVEL:
            per_t = [self.support(values, rng) for values in timestamps]
            if not per_t:
                raise ValueError(f"{self.owner}: 'timestamps' is empty; need at least one.")
            return [np.stack(column) for column in zip(*per_t, strict=True)]
        counts: list[list[NDArray]] = [[] for _ in self.groups]
        for values in timestamps:
            self._check_values(values)
            for table, g, v in zip(counts, self.groups, values, strict=True):
                table.append(np.bincount(np.asarray(v), minlength=g.proto.domain_size))  # type: ignore[union-attr]
        if not counts or not counts[0]:
            raise ValueError(f"{self.owner}: 'timestamps' is empty; need at least one.")
        return [g.sample_counts(np.stack(c), rng) for g, c in zip(self.groups, counts, strict=True)]

    def budget(self) -> SpentByUser:
        """Per user, the sum over her groups of ``reports``, ``memos`` and ``epsilon``
        (sequential composition, docs/math.md §4).

        A key is None when any group's is unknown (a chain under the count-level engine).
        """
        return self._budget(by_group=False)

    def budget_by_group(self) -> SpentByUser:
        """Per user and group, shape (n, number of groups): 0 where a user is not a member.

        A key is None when any group's is unknown (a chain under the count-level engine).
        """
        return self._budget(by_group=True)

    def _budget(self, by_group: bool) -> SpentByUser:
        """The one loop over the groups: each member's part goes to her row (and the group's
        column when ``by_group``), added to what her other groups spent."""
        shape = (self.n, len(self.groups)) if by_group else (self.n,)
        out: SpentByUser = {
            "reports": np.zeros(shape, dtype=np.int64),
            "memos": np.zeros(shape, dtype=np.int64),
            "epsilon": np.zeros(shape, dtype=np.float64),
        }
        for j, g in enumerate(self.groups):
            rows = slice(None) if g.users is None else g.users
            where = (rows, j) if by_group else rows
            for key, part in g.budget().items():
                table = out[key]
                if part is None or table is None:
                    out[key] = None
                else:
                    table[where] += part  # users are distinct within a group
        return out

    def _check_values(self, values: Sequence[ArrayLike]) -> None:
        if len(values) != len(self.groups):
            raise ValueError(
                f"{self.owner}: one value array per group is needed ({len(self.groups)} "
                f"groups); got {len(values)}."
            )
