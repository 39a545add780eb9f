"""The timeline-miner base: SVIM, SVSM, LDPMiner, GFIM and LDPMiner-SH written once as
``run() → step(t) → result()``.

A miner is two objects:

- its **configuration**, a frozen dataclass that mixes in :class:`TimelineMiner`: ``run(data,
  rng, engine, n_items)`` reads the data as a :class:`~longldp.apps.setvalued.common.Timeline`,
  asks :meth:`TimelineMiner.start` for a run, calls ``step(t, rng)`` for t = 0..τ−1 with one
  generator, and returns ``result(steps)``;
- its **run**, a :class:`MinerRun` subclass holding what persists over the timestamps: the
  users as a :class:`longldp.simulate.Population` (design §4) whose fixed reporting groups feed
  one oracle each (math §9.2–§9.5, §12.4), the memoizing chains of a longitudinal oracle spec,
  the candidates C and their time-stable codes (sticky slots), ℓ and u(ℓ).

The base holds the phases the miners share: one uniformly sampled item of each set through a
PSFO over the items (:meth:`MinerRun.report_items`: SVIM's G1, LDPMiner's phase 1, GFIM's
phase 1), PS_ℓ over each user's members of C (:meth:`MinerRun.report_candidates`: SVIM's G3,
LDPMiner's phase 2, GFIM's phase 2), the length distribution and the percentile rule
(:meth:`MinerRun.estimate_length`: SVIM's G2, SVSM's G4), and the result with the population's
spent budget. A subclass writes ``step`` (its own logic) and ``params_record``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.apps.setvalued.common import (
    POLICIES,
    FloatArray,
    IntArray,
    MembershipIndex,
    MiningResult,
    Timeline,
    TopK,
    sample_one_item,
    sticky_slots,
)
from longldp.apps.setvalued.oracle import OracleSpec
from longldp.apps.setvalued.psfo import (
    PSFO,
    oneshot_psfo,
    pad_and_sample,
    percentile_length,
    truncation_factor,
)
from longldp.data import SetData
from longldp.protocols import FrequencyOracle
from longldp.simulate import Population, ReportingGroup

#: Longitudinal domains of the candidates C (math §9.5): ``"items"`` their item id over I ∪ {⊥}
#: (a time-stable domain), ``"slots"`` |C| sticky slots (an item keeps its slot while in C).
DOMAINS = ("items", "slots")
#: How a PSFO codes the candidates: their ``"rank"`` in C (one-shot), or a longitudinal domain.
CANDIDATE_CODES = ("rank", *DOMAINS)
#: The miners' default engine (docs/design.md §4): the cheapest, exact per timestamp.
MINER_ENGINE = "count-level"


class TimelineMiner:
    """Mixin of a miner's frozen configuration: one ``run`` over every timestamp."""

    def run(
        self,
        data: SetData | Any,
        rng: Any = None,
        engine: str = MINER_ENGINE,
        n_items: int | None = None,
    ) -> Any:
        """Run over every timestamp of ``data``.

        Parameters
        ----------
        data : SetData, LongitudinalSets or sequence of SetData
        rng : numpy.random.Generator or seed
            One generator drives the groups, the sampling and the reports, in that order.
        engine : {"count-level", "per-user", "reports"}, default="count-level"
            docs/design.md §4; the spent budget of a memoizing chain is tracked by
            "per-user" and "reports" (:meth:`longldp.simulate.Population.budget`).
        n_items : int, optional
            The public item domain [0, n_items) (default: the data's); items outside it raise
            ``ValueError``.

        Returns
        -------
        MiningResult, or the miner's own result type (GFIM: GFIMResult)
        """
        gen = np.random.default_rng(rng)
        run = self.start(Timeline(data, n_items), engine, gen)
        return run.result([run.step(t, gen) for t in range(run.timeline.tau)])

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> MinerRun:
        """The miner's state before t = 0 (the fixed user groups are drawn here)."""
        raise NotImplementedError


@dataclass(frozen=True)
class MinerConfig(TimelineMiner):
    """The configuration SVIM, SVSM and LDPMiner share (each redefines ``params``).

    Parameters
    ----------
    k : int
        Output size.
    oracle : OracleSpec
        One-shot (ε) or longitudinal (ε∞, ε1) oracle and budget.
    params : object
        The miner's own constants (SVIMParams, SVSMParams, LDPMinerParams).
    policy : {"reestimate", "freeze"}, default="reestimate"
        Longitudinal candidates and lengths: re-estimated every timestamp, or kept from t = 0.
    postprocess : str, callable or None, default=None
        Applied to every FO's estimate vector (:mod:`longldp.postprocess`).
    """

    #: The miner's name in error messages.
    owner: ClassVar[str] = "miner"
    #: Smallest k the miner accepts (SVSM: 2, an itemset has two items).
    min_k: ClassVar[int] = 1

    k: int
    oracle: OracleSpec
    params: Any = None
    policy: str = "reestimate"
    postprocess: str | pp.PostProcessor | None = None

    def __post_init__(self) -> None:
        check_common(self, self.owner, self.min_k)


class MinerRun:
    """A miner's state over the timestamps of one dataset (see the module docstring).

    Parameters
    ----------
    miner : TimelineMiner
        The configuration (``k`` and, when the miner has them, ``policy`` and
        ``postprocess``).
    timeline : Timeline
    spec : OracleSpec
        The oracle and the budget of one report of every group.
    engine : str
    population : Population, optional
        Shared with an enclosing run (SVSM's internal SVIM); default a new one of n users.
    """

    #: The miner's name: ``MiningResult.app`` and the start of error messages.
    owner: ClassVar[str] = "miner"
    #: ``"items"`` or ``"itemsets"``.
    target: ClassVar[str] = "items"
    #: One-shot PSFO dummies: ℓ ``"distinct"`` ones (amplified GRR allowed, math §9.1.2) or one
    #: ``"shared"`` dummy without amplification (LDPMiner, sampling S-Hist).
    dummies: ClassVar[str] = "distinct"

    def __init__(
        self,
        miner: Any,
        timeline: Timeline,
        spec: OracleSpec,
        engine: str,
        population: Population | None = None,
    ):
        self.miner, self.timeline, self.spec = miner, timeline, spec
        self.population = (
            Population(timeline.n, engine, self.owner) if population is None else population
        )
        self.engine = self.population.engine
        self.postprocess: str | pp.PostProcessor | None = getattr(miner, "postprocess", None)
        #: The fixed users of each group, as recorded in the result.
        self.groups: dict[str, IntArray] = {}
        self.inst: dict[str, ReportingGroup] = {}
        self.chains: dict[str, FrequencyOracle] = {}
        self.cands: IntArray = np.zeros(0, dtype=np.int64)
        self.slots: list | None = None
        self.ell, self.u = 1, 1.0
        self.theta: FloatArray = np.zeros(0)
        self._index: tuple[SetData, bytes, MembershipIndex] | None = None

    # ------------------------------------------------------------------ groups and oracles
    def add_groups(self, users: dict[str, IntArray | None], sizes: dict[str, int]) -> None:
        """One reporting group per name, over ``users[name]`` (None: every user).

        A longitudinal spec gives each group one memoizing chain over ``sizes[name]`` values
        for good (a time-stable domain, math §9.5); a one-shot spec gives it a fresh one-shot
        oracle at every report.
        """
        for name, who in users.items():
            chain = self.spec.chain(sizes[name]) if self.spec.longitudinal else None
            if chain is not None:
                self.chains[name] = chain
            self.inst[name] = self.population.group(chain, who, name)

    def fresh(self, t: int) -> bool:
        """Whether candidates and lengths are (re-)estimated at t (policy "freeze": t = 0)."""
        return getattr(self.miner, "policy", "reestimate") == "reestimate" or t == 0

    def fo_name(self, group: str) -> str:
        """The one-shot FO of a group's PSFO (LDPMiner: one per phase)."""
        return self.spec.protocol

    def psfo(self, group: str, d: int, ell: int) -> PSFO:
        """The PSFO(ℓ) of ``group`` over d real values: its chain with one shared, memoized
        dummy (d is then the chain's), or a one-shot PSFO of the spec (math §9.1, §9.5)."""
        chain = self.chains.get(group)
        if chain is not None:
            return OracleSpec.chain_psfo(chain, chain.k - 1, ell)
        if self.dummies == "distinct":
            return self.spec.psfo(d, ell)
        assert self.spec.eps is not None
        opts = self.spec.options
        return oneshot_psfo(d, ell, self.spec.eps, self.fo_name(group), "shared", False, **opts)

    def membership(self, base: SetData) -> MembershipIndex:
        """The membership index of the current candidates C over ``base`` (cached)."""
        key = self.cands.tobytes()
        if self._index is not None and self._index[0] is base and self._index[1] == key:
            return self._index[2]
        member = np.zeros(self.timeline.d, dtype=bool)
        member[self.cands] = True
        index = MembershipIndex(base, member)
        self._index = (base, key, index)
        return index

    # ------------------------------------------------------------------ shared phases
    def report_items(
        self, group: str, base: SetData, users: IntArray, ell: int, rng: np.random.Generator
    ) -> tuple[FloatArray, PSFO]:
        """PSFO(ℓ) over the d items: each user reports one uniform item of her padded set.

        Returns f̂ of every item (ℓ-scaled, math §9.1.3) and the PSFO used.
        """
        start = base.indptr[users]
        m = base.indptr[users + 1] - start
        r = pad_and_sample(m, ell, rng)
        items, _ = sample_one_item(base, users, r)
        psfo = self.psfo(group, self.timeline.d, ell)
        codes = psfo.encode(r, m, items)
        support = self.inst[group].support(codes, rng, psfo.oracle, psfo.eps)
        return psfo.estimate(support, users.size, self.postprocess), psfo

    def report_candidates(
        self,
        group: str,
        base: SetData,
        users: IntArray,
        ell: int,
        coding: str,
        rng: np.random.Generator,
    ) -> tuple[FloatArray, PSFO]:
        """PS_ℓ over each user's members of C, coded by ``coding`` (:data:`CANDIDATE_CODES`).

        Returns f̂ of the candidates, in the order of ``self.cands``, and the PSFO used.
        """
        index = self.membership(base)
        m = index.counts(users)
        r = pad_and_sample(m, ell, rng)
        real = r < m
        items = index.pick(users[real], r[real])
        code, reportable, size = self._candidate_codes(coding)
        psfo = self.psfo(group, size, ell)
        codes = psfo.encode(r, m, items if code is None else code[items])
        support = self.inst[group].support(codes, rng, psfo.oracle, psfo.eps)
        est = psfo.estimate(support, users.size, self.postprocess, reportable)
        return est[self.cands if code is None else code[self.cands]], psfo

    def _candidate_codes(self, coding: str) -> tuple[IntArray | None, IntArray | None, int]:
        """(code of every item or None for item ids, the reportable codes, real codes)."""
        d = self.timeline.d
        if coding == "items":
            return None, np.append(self.cands, d), d
        code = np.full(d, -1, dtype=np.int64)
        if coding == "rank":
            code[self.cands] = np.arange(self.cands.size)
            return code, None, self.cands.size
        self.slots = sticky_slots(self.slots, self.cands.tolist(), self.cands.size)
        filled = [(s, x) for s, x in enumerate(self.slots) if x is not None]
        code[[x for _, x in filled]] = [s for s, _ in filled]
        return code, None, self.cands.size

    def estimate_length(
        self, group: str, lengths: IntArray, size: int, rng: np.random.Generator
    ) -> dict[str, Any]:
        """θ̂ of the users' lengths in {0..size−1} through a plain FO; sets θ̂ (clipped at 0),
        ℓ by the percentile rule and u(ℓ) (math §9.2 steps 2 and 4; ``self.prm`` holds
        ``percentile`` and ``length_cap``)."""
        chain = self.chains.get(group)
        oracle = self.spec.plain(size) if chain is None else chain
        support = self.inst[group].support(lengths, rng, oracle, self.spec.eps)
        theta = oracle.estimate(support, lengths.size, self.postprocess)
        self.theta = np.clip(theta, 0.0, None)
        prm = self.prm  # type: ignore[attr-defined]
        self.ell = percentile_length(self.theta, prm.percentile, prm.length_cap)
        self.u = truncation_factor(self.theta, self.ell)
        return {"fo": oracle.name, "fo_domain": oracle.k}

    # ------------------------------------------------------------------ one timestamp, result
    def step(self, t: int, rng: np.random.Generator) -> tuple[Any, ...]:
        """Run timestamp t: (top-k, diagnostics, ...)."""
        raise NotImplementedError

    def params_record(self) -> dict[str, Any]:
        """Every setting of the run (JSON-friendly)."""
        raise NotImplementedError

    def base_params(self) -> dict[str, Any]:
        """The settings every miner records first."""
        tl = self.timeline
        return {"app": self.owner, "k": self.miner.k, "n": tl.n, "tau": tl.tau, "n_items": tl.d}

    def result(self, steps: list[tuple[Any, ...]]) -> MiningResult:
        """The mining result: top-k and diagnostics of every step, the spent budget."""
        topk: tuple[TopK, ...] = tuple(s[0] for s in steps)
        return MiningResult(
            app=self.owner,
            target=self.target,
            k=self.miner.k,
            topk=topk,
            diagnostics=tuple(s[1] for s in steps),
            params=self.params_record(),
            groups=dict(self.groups),
            budget=self.population.budget(),
        )


def check_common(app: Any, owner: str, min_k: int = 1) -> None:
    """Validate and normalize the fields of a :class:`MinerConfig` (from ``__post_init__``):
    k >= ``min_k``, the policy, the post-processing name and the oracle spec."""
    k = check.integer(owner, "k", app.k, minimum=1)
    if k < min_k:
        raise ValueError(
            f"{owner}: 'k' must be >= {min_k} (with k = 1 no itemset of size >= 2 can be a "
            f"candidate); got {k}."
        )
    policy = check.choice(owner, "policy", app.policy, POLICIES)
    if isinstance(app.postprocess, str):
        pp.get_method(app.postprocess)
    elif app.postprocess is not None and not callable(app.postprocess):
        raise ValueError(f"{owner}: 'postprocess' must be a method name, a callable or None.")
    if not isinstance(app.oracle, OracleSpec):
        raise ValueError(f"{owner}: 'oracle' must be an OracleSpec (see make_spec).")
    object.__setattr__(app, "k", k)
    object.__setattr__(app, "policy", policy)


def postprocess_name(postprocess: Any) -> str | None:
    """A post-processing as recorded in params: its name, or a callable's ``__name__``."""
    if postprocess is None or isinstance(postprocess, str):
        return postprocess
    return getattr(postprocess, "__name__", repr(postprocess))
