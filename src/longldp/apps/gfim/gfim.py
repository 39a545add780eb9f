"""GFIM: group-based frequent items mining under ε-LDP, one-shot and longitudinal.

Zhang Jun, "GFIM" (bachelor thesis in Chinese, BUPT 2018), Alg. 3 and §3.2, with the
corrections of docs/gfim.md; formulas in docs/math.md §12.4.

1. **Split.** The users are permuted once and cut into G1 (half) and G2 (the rest); each group
   reports once per timestamp at the full budget (parallel composition).
2. **Phase 1 (G1).** Sampling S-Hist with L = ℓ over the d items gives f̂1.
3. **Candidates.** C = the k_max items with the largest f̂1 (ties to the lower id).
4. **Phase 2 (G2).** Sampling S-Hist with L = L2 on S_u ∩ C, items coded by their rank in C
   (SH over k_max + 1 columns) or by global id (``phase2_codes="global"``; the longitudinal
   chains always use global ids, so their domain is time-stable). f̂2 on C.
5. **Combine** on C (f̂ = f̂1 elsewhere): ``"thesis"`` (f̂1 + (ℓ − 1)f̂2)/ℓ as printed,
   ``"ivw"`` (default) (1 − w)f̂1 + w·f̂2 with the public w = V1/(V1 + V2), V1 = ℓ²/n1,
   V2 = L2²/n2, or ``"phase2"`` (f̂2 only).
6. **Output.** The top k of f̂ over all items (printed) or over C only.

The thesis pads phase 2 to L2 = k_max (``phase2_pad="kmax"``); ``"min"`` uses
min(k_max, ℓ), which never truncates a set of at most ℓ items; an integer is also accepted.

Any oracle spec of the set-valued apps can replace SH: a one-shot name (``"SH"`` default,
or ``"OLH"``, ...) with ``eps``, or a memoizing chain (``"L-SH"``, ``"OLOLOHA"``, ``"L-OSUE"``,
...) with ``eps_perm``/``eps_1``. A chain runs over [d] ∪ {⊥} with one memoized dummy
(docs/math.md §9.5); with L-SH each user holds at most two memos per chain, so its spent budget
is at most min(t·ε1, 2·ε∞).

ℓ must be public. Default: the 90th percentile of the **true** set sizes at t = 0, as the thesis
does (non-private; harmless there because its records have a fixed length); it is recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.setvalued.common import (
    FloatArray,
    MembershipIndex,
    MiningResult,
    Timeline,
    TopK,
    sample_one_item,
    split_groups,
    top_indices,
)
from longldp.apps.setvalued.ldpminer import true_length_bound
from longldp.apps.setvalued.oracle import FOInstance, OracleSpec, population_budget
from longldp.apps.setvalued.psfo import PSFO, oneshot_psfo, pad_and_sample
from longldp.data import SetData

OWNER = "GFIM"
COMBINES = ("ivw", "thesis", "phase2")
OUTPUT_POOLS = ("all", "candidates")
PHASE2_PADS = ("kmax", "min")
PHASE2_CODES = ("rank", "global")


@dataclass(frozen=True)
class GFIMParams:
    """GFIM's options (docs/gfim.md); every one is recorded with each result.

    Parameters
    ----------
    k_max : int or None, default=None
        Number of candidates |C|; None = 2k (the thesis's experiments). Must be >= k.
    ell : int or None, default=None
        Public phase-1 length ℓ; None = the ``ell_percentile`` quantile of the true set sizes
        at t = 0 (the thesis's rule, non-private).
    ell_percentile : float, default=0.9
    phase2_pad : {"kmax", "min"} or int, default="kmax"
        L2: k_max (the thesis), min(k_max, ℓ), or a given integer >= 1.
    combine : {"ivw", "thesis", "phase2"}, default="ivw"
    output : {"all", "candidates"}, default="all"
        Pool of the final top k.
    phase2_codes : {"rank", "global"}, default="rank"
        One-shot phase-2 item codes (same variance); chains always use global ids.
    """

    k_max: int | None = None
    ell: int | None = None
    ell_percentile: float = 0.9
    phase2_pad: str | int = "kmax"
    combine: str = "ivw"
    output: str = "all"
    phase2_codes: str = "rank"

    def __post_init__(self) -> None:
        if self.k_max is not None:
            check.integer(OWNER, "k_max", self.k_max, minimum=1)
        if self.ell is not None:
            check.integer(OWNER, "ell", self.ell, minimum=1)
        check.probability(OWNER, "ell_percentile", self.ell_percentile)
        if isinstance(self.phase2_pad, str):
            pad = check.choice(OWNER, "phase2_pad", self.phase2_pad, PHASE2_PADS)
            object.__setattr__(self, "phase2_pad", pad)
        else:
            check.integer(OWNER, "phase2_pad", self.phase2_pad, minimum=1)
        for name, allowed in (
            ("combine", COMBINES),
            ("output", OUTPUT_POOLS),
            ("phase2_codes", PHASE2_CODES),
        ):
            object.__setattr__(self, name, check.choice(OWNER, name, getattr(self, name), allowed))


def combine_estimates(
    f1: FloatArray, f2: FloatArray, rule: str, ell: int, L2: int, n1: int, n2: int
) -> tuple[FloatArray, float]:
    """Combined estimate on the candidates and the weight w of f̂2 (docs/math.md §12.4).

    Parameters
    ----------
    f1, f2 : numpy.ndarray
        Phase-1 and phase-2 estimates of the candidates (same order).
    rule : {"ivw", "thesis", "phase2"}
    ell, L2 : int
        Phase-1 and phase-2 lengths.
    n1, n2 : int
        Group sizes.

    Returns
    -------
    (numpy.ndarray, float)
        (1 − w)·f̂1 + w·f̂2 and w: w = V1/(V1 + V2) with V1 = ℓ²/n1, V2 = L2²/n2 ("ivw"),
        (ℓ − 1)/ℓ ("thesis"), 1 ("phase2").
    """
    rule = check.choice(OWNER, "combine", rule, COMBINES)
    if rule == "ivw":
        v1, v2 = ell * ell / n1, L2 * L2 / n2
        w = v1 / (v1 + v2)
    elif rule == "thesis":
        w = (ell - 1) / ell
    else:
        w = 1.0
    return (1.0 - w) * np.asarray(f1) + w * np.asarray(f2), float(w)


@dataclass(frozen=True)
class GFIMResult:
    """GFIM's output: the mining result plus every estimate of every timestamp.

    Attributes
    ----------
    mining : MiningResult
        Top-k per timestamp, diagnostics, parameters, groups and spent budget.
    estimates : tuple of dict
        Per timestamp: ``f_hat`` (all d items, the combined estimate), ``f1`` (all items),
        ``candidates`` (k_max ids, best first by f̂1), ``f2`` (on the candidates), ``w``, ``L2``.
    """

    mining: MiningResult
    estimates: tuple[dict[str, Any], ...] = field(repr=False)

    @property
    def params(self) -> dict[str, Any]:
        return self.mining.params

    @property
    def topk(self) -> tuple[TopK, ...]:
        return self.mining.topk

    @property
    def budget(self) -> dict[str, Any]:
        return self.mining.budget


@dataclass(frozen=True)
class GFIM:
    """GFIM configured once, run on any set-valued data.

    Parameters
    ----------
    k : int
        Output size, 1 <= k <= d.
    oracle : OracleSpec
        The per-report budget and oracle (default SH at ε = 2); both groups use all of it.
    params : GFIMParams, optional

    Examples
    --------
    >>> from longldp.apps.gfim import GFIM, planted_sets
    >>> from longldp.apps.setvalued.oracle import OracleSpec
    >>> data = planted_sets(4000, d=64, planted=(3, 9), rng=0)
    >>> res = GFIM(2, OracleSpec("SH", eps=4.0)).run(data, rng=1)
    >>> sorted(res.topk[0].items.tolist())
    [3, 9]
    """

    k: int
    oracle: OracleSpec = field(default_factory=lambda: OracleSpec("SH", eps=2.0))
    params: GFIMParams = field(default_factory=GFIMParams)

    def __post_init__(self) -> None:
        check.integer(OWNER, "k", self.k, minimum=1)
        if not isinstance(self.oracle, OracleSpec):
            raise ValueError(f"{OWNER}: 'oracle' must be an OracleSpec; got {self.oracle!r}.")
        if self.oracle.protocol == "adaptive":
            raise ValueError(f"{OWNER}: 'oracle' must name a protocol (e.g. 'SH', 'L-SH').")
        if self.oracle.protocol == "dBitFlipPM":
            raise ValueError(f"{OWNER}: dBitFlipPM buckets the domain; it cannot rank items.")
        if not isinstance(self.params, GFIMParams):
            raise ValueError(f"{OWNER}: 'params' must be a GFIMParams; got {self.params!r}.")
        if self.params.k_max is not None and self.params.k_max < self.k:
            raise ValueError(
                f"{OWNER}: 'k_max' must be at least k = {self.k} (the output is chosen among "
                f"the candidates); got {self.params.k_max}."
            )

    def run(
        self,
        data: SetData | Any,
        rng: Any = None,
        engine: str = "count-level",
        n_items: int | None = None,
    ) -> GFIMResult:
        """Run over every timestamp of ``data`` (a SetData, LongitudinalSets or list).

        Parameters
        ----------
        data : SetData, LongitudinalSets or sequence of SetData
        rng : seed or numpy.random.Generator
        engine : {"count-level", "per-user", "reports"}, default="count-level"
            See :class:`longldp.apps.setvalued.oracle.FOInstance`; budgets of memoizing
            chains are tracked by "per-user" and "reports".
        n_items : int, optional
            The public item domain; items outside it raise ``ValueError``.
        """
        gen = np.random.default_rng(rng)
        run = GFIMRun(self, Timeline(data, n_items), engine, gen)
        steps = [run.step(t, gen) for t in range(run.timeline.tau)]
        return run.result(steps)


class GFIMRun:
    """GFIM's state over timestamps: the fixed groups, the oracle instances and chains."""

    def __init__(self, app: GFIM, timeline: Timeline, engine: str, rng: np.random.Generator):
        d, n, prm = timeline.d, timeline.n, app.params
        if app.k > d:
            raise ValueError(f"{OWNER}: 'k' must be at most the item domain size {d}; got {app.k}.")
        self.k_max = 2 * app.k if prm.k_max is None else prm.k_max
        self.k_max = min(self.k_max, d) if prm.k_max is None else self.k_max
        if self.k_max > d:
            raise ValueError(
                f"{OWNER}: 'k_max' must be at most the item domain size {d}; got {self.k_max}."
            )
        if n < 2:
            raise ValueError(f"{OWNER}: GFIM needs at least 2 users (two groups); got {n}.")
        self.app, self.timeline, self.prm, self.engine = app, timeline, prm, engine
        if prm.ell is not None:
            self.ell, self.ell_rule = prm.ell, "given"
        else:
            self.ell = true_length_bound(timeline.at(0), prm.ell_percentile)
            self.ell_rule = f"true-length {prm.ell_percentile:g} quantile (non-private)"
        if prm.phase2_pad == "kmax":
            self.L2 = self.k_max
        elif prm.phase2_pad == "min":
            self.L2 = min(self.k_max, self.ell)
        else:
            self.L2 = int(prm.phase2_pad)
        self.g1, self.g2 = split_groups(n, (0.5, 0.5), rng)
        self.inst = {
            "phase1": FOInstance("phase1", self.g1, engine),
            "phase2": FOInstance("phase2", self.g2, engine),
        }
        self.spec = app.oracle
        self.codes = "global" if self.spec.longitudinal else prm.phase2_codes
        if self.spec.longitudinal:
            self.chains = {"phase1": self.spec.chain(d + 1), "phase2": self.spec.chain(d + 1)}

    def _psfo(self, phase: str, d_real: int, L: int) -> PSFO:
        if self.spec.longitudinal:
            chain = self.chains[phase]
            return OracleSpec.chain_psfo(chain, chain.k - 1, L)
        assert self.spec.eps is not None
        return oneshot_psfo(
            d_real, L, self.spec.eps, self.spec.protocol, "shared", False, **self.spec.options
        )

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict, dict]:
        """Run timestamp t: (top-k, diagnostics, estimates)."""
        base, rows = self.timeline.rows(t)
        if base.nnz == 0:
            raise ValueError(f"{OWNER}: every set is empty at t = {t}; there is nothing to mine.")
        d, n1, n2 = self.timeline.d, self.g1.size, self.g2.size
        # Phase 1 (G1): sampling S-Hist over [d] with L = ℓ.
        rows1 = rows[self.g1]
        m1 = base.indptr[rows1 + 1] - base.indptr[rows1]
        r1 = pad_and_sample(m1, self.ell, rng)
        items1, _ = sample_one_item(base, rows1, r1)
        psfo1 = self._psfo("phase1", d, self.ell)
        support1 = self.inst["phase1"].collect(
            psfo1.oracle, psfo1.encode(r1, m1, items1), rng, psfo1.eps
        )
        f1 = psfo1.estimate(support1, n1)
        # Candidates: the k_max largest f̂1, ties to the lower id.
        cands = top_indices(f1, self.k_max)
        # Phase 2 (G2): sampling S-Hist with L = L2 on S_u ∩ C.
        member = np.zeros(d, dtype=bool)
        member[cands] = True
        index = MembershipIndex(base, member)
        rows2 = rows[self.g2]
        m2 = index.counts(rows2)
        r2 = pad_and_sample(m2, self.L2, rng)
        real = r2 < m2
        items2 = index.pick(rows2[real], r2[real])
        if self.codes == "rank":
            rank = np.full(d, -1, dtype=np.int64)
            rank[cands] = np.arange(cands.size)
            psfo2, real_codes, of_cands = (
                self._psfo("phase2", cands.size, self.L2),
                rank[items2],
                None,
            )
        else:
            psfo2, real_codes, of_cands = self._psfo("phase2", d, self.L2), items2, cands
        support2 = self.inst["phase2"].collect(
            psfo2.oracle, psfo2.encode(r2, m2, real_codes), rng, psfo2.eps
        )
        est2 = psfo2.estimate(support2, n2)
        f2 = est2 if of_cands is None else est2[of_cands]
        # Combine on C, output.
        on_c, w = combine_estimates(f1[cands], f2, self.prm.combine, self.ell, self.L2, n1, n2)
        f_hat = f1.copy()
        f_hat[cands] = on_c
        if self.prm.output == "all":
            out = top_indices(f_hat, self.app.k)
        else:
            out = cands[top_indices(f_hat[cands], self.app.k)]
        diag = {
            "t": t,
            "phase1": psfo1.describe(),
            "phase2": psfo2.describe(),
            "n_candidates": int(cands.size),
            "ell": self.ell,
            "L2": self.L2,
            "w": w,
        }
        estimates = {"f_hat": f_hat, "f1": f1, "candidates": cands, "f2": f2, "w": w, "L2": self.L2}
        return TopK(tuple((int(x),) for x in out), f_hat[out]), diag, estimates

    def params_record(self) -> dict[str, Any]:
        """Every setting of the run (JSON-friendly)."""
        return {
            "app": OWNER,
            "k": self.app.k,
            "k_max": self.k_max,
            "n": self.timeline.n,
            "n_groups": [int(self.g1.size), int(self.g2.size)],
            "tau": self.timeline.tau,
            "n_items": self.timeline.d,
            "oracle": self.spec.describe(),
            "gfim": asdict(self.prm),
            "ell": self.ell,
            "ell_rule": self.ell_rule,
            "L2": self.L2,
            "combine": self.prm.combine,
            "output": self.prm.output,
            "phase2_codes": self.codes,
            "engine": self.engine,
            "dummies": "reserved column d" + (", memoized" if self.spec.longitudinal else ""),
            "ties": "candidates and output: larger estimate first, then lower id",
        }

    def result(self, steps: list[tuple[TopK, dict, dict]]) -> GFIMResult:
        mining = MiningResult(
            app=OWNER,
            target="items",
            k=self.app.k,
            topk=tuple(s[0] for s in steps),
            diagnostics=tuple(s[1] for s in steps),
            params=self.params_record(),
            groups={"G1": self.g1, "G2": self.g2},
            budget=population_budget(self.timeline.n, list(self.inst.values())),
        )
        return GFIMResult(mining, tuple(s[2] for s in steps))
