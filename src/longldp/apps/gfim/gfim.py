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
    MiningResult,
    Timeline,
    TopK,
    split_groups,
    top_indices,
)
from longldp.apps.setvalued.ldpminer import true_length_bound
from longldp.apps.setvalued.miner import MinerRun, TimelineMiner
from longldp.apps.setvalued.oracle import OracleSpec

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
class GFIM(TimelineMiner):
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

    def start(self, timeline: Timeline, engine: str, rng: np.random.Generator) -> GFIMRun:
        """Groups G1 and G2 drawn once (half each)."""
        return GFIMRun(self, timeline, engine, rng)


class GFIMRun(MinerRun):
    """GFIM's state over timestamps: the fixed groups, their oracles and chains."""

    owner = OWNER
    dummies = "shared"

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
        super().__init__(app, timeline, app.oracle, engine)
        self.prm = prm
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
        self.groups = {"G1": self.g1, "G2": self.g2}
        self.add_groups({"phase1": self.g1, "phase2": self.g2}, {"phase1": d + 1, "phase2": d + 1})
        # chains code items by global id, so their domain is time-stable
        self.codes = "global" if self.spec.longitudinal else prm.phase2_codes

    def step(self, t: int, rng: np.random.Generator) -> tuple[TopK, dict, dict]:
        """Run timestamp t: (top-k, diagnostics, estimates)."""
        base, rows = self.timeline.rows(t)
        if base.nnz == 0:
            raise ValueError(f"{OWNER}: every set is empty at t = {t}; there is nothing to mine.")
        n1, n2 = self.g1.size, self.g2.size
        # Phase 1 (G1): sampling S-Hist over [d] with L = ℓ.
        f1, psfo1 = self.report_items("phase1", base, rows[self.g1], self.ell, rng)
        # Candidates: the k_max largest f̂1, ties to the lower id.
        cands = self.cands = top_indices(f1, self.k_max)
        # Phase 2 (G2): sampling S-Hist with L = L2 on S_u ∩ C.
        coding = "rank" if self.codes == "rank" else "items"
        f2, psfo2 = self.report_candidates("phase2", base, rows[self.g2], self.L2, coding, rng)
        # Combine on C, output.
        on_c, w = combine_estimates(f1[cands], f2, self.prm.combine, self.ell, self.L2, n1, n2)
        f_hat = f1.copy()
        f_hat[cands] = on_c
        if self.prm.output == "all":
            out = top_indices(f_hat, self.miner.k)
        else:
            out = cands[top_indices(f_hat[cands], self.miner.k)]
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
            **self.base_params(),
            "k_max": self.k_max,
            "n_groups": [int(self.g1.size), int(self.g2.size)],
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

    def result(self, steps: list[tuple[Any, ...]]) -> GFIMResult:  # type: ignore[override]
        """The mining result and every timestamp's estimates."""
        return GFIMResult(super().result(steps), tuple(s[2] for s in steps))
