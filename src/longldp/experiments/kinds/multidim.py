"""The ``multidim`` kind: SMP, SPL and ALLOMFREE over d attributes ([004] §5, Tables 3–4).

For every dataset, repetition, solution, ε∞ and α of the study, one cell interpolates the
dataset's attributes to τ timestamps (whole rows move together, so every user keeps a
coherent tuple), collects them with `longldp.apps.multidim.MultidimCollection` and the study's
engine *without* post-processing, then applies each post-processing of the study to the *same*
raw estimates, attribute by attribute and timestamp by timestamp, and computes [004]'s
MSE_avg (`longldp.apps.multidim.MultidimResult.mse_avg`: the MSE of each attribute against the
whole population's frequencies, averaged over the attributes and the timestamps) and the MSE of
each attribute. A cell gives one row per post-processing.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    tau = 1                             # default τ of the datasets (each may set its own)
    engine = "count-level"              # or "per-user" (default), "reports"
    calibration = "paper"               # L-GRR/LOLOHA round-2 calibration (default "paper")
    eps_perm = [0.5, 1.0, 2.0]          # ε∞ grid
    alpha = [0.3, 0.6]                  # α = ε1/ε∞ grid, each in (0, 1)
    postprocess = ["clip-renorm"]       # "none", "clip-renorm" or a longldp.postprocess name
    datasets = [{name = "adult", attributes = ["workclass", "sex"], n = 5000}]
    solutions = [
      {solution = "SMP", chain = "L-SUE", label = "SMP+L-SUE"},
      {solution = "ALLOMFREE"},                      # the paper's L-GRR/L-OSUE choice
      {solution = "SPL", chain = "L-OSUE", calibration = "exact"},
    ]

A dataset entry is that of `longldp.experiments.datasets` (a bundled table with its list of
attributes, an optional row limit ``n`` and ``tau``; or a synthetic generator, whose one
attribute is ``value``). A solution entry is ``solution`` (SMP, SPL or ALLOMFREE), ``chain``
(SMP/SPL: the longitudinal protocol every attribute uses, required; ALLOMFREE: omitted for the
paper's pair, or a list of candidate protocols), an optional ``label`` (default
``"SMP+L-SUE"``, ``"ALLOMFREE"`` ...; labels must differ) and an optional ``calibration``
overriding the study's. ε∞ goes in as ``eps_perm`` and ε1 = α·ε∞; a chain without ε1
(dBitFlipPM) runs once per ε∞ with ``alpha`` empty (null). A combination a protocol cannot
reach raises `ValueError` at construction: its rows are kept with ``status = "skipped"`` and
the message in ``skip_reason``.

Post-processing ``"clip-renorm"`` is what [004]'s code did (``SB_UE``/``SB_LGRR`` followed by
``np.nan_to_num``): clip the estimates at 0 and divide by their sum, and return zeros when no
estimate is positive (0/0 turned into 0). ``"norm-mul"`` differs only in that last case (it
returns the uniform vector); the ``degenerate`` column counts the (attribute, timestamp)
vectors where it happened, i.e. where the two differ.

Random streams (`longldp.experiments.seeding`): synthetic data ``(0, d)``; the permutations of
dataset d in repetition r ``(1, d, r)`` (only drawn when τ > 1); the assignment of users to
attributes of SMP and ALLOMFREE in repetition r ``(3, d, r)``, shared by every solution, ε∞ and
α of that repetition (common random numbers: a gain compares solutions on the same partition,
as [004]'s code did by reseeding NumPy's global generator before each repetition); the
randomizers' randomness of a cell ``(2, d, r, s, e, l)``.

[004]'s Tables 3–4 (gains of ALLOMFREE over SMP) come from a results table through
`longldp.experiments.reports.multidim` (``longldp allomfree-gains``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import longldp as ll
from longldp import postprocess as pp
from longldp import privacy
from longldp.apps.multidim import collection as md
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import parse_dataset
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, GridSpec, StudyKind
from longldp.simulate import ENGINES

__all__ = [
    "ASSIGNMENT",
    "CLIP_RENORM",
    "KIND",
    "POSTPROCESS",
    "MultidimSpec",
    "SolutionSpec",
    "clip_renorm",
    "run_cell",
]

NONE = base.NONE
#: [004]'s code's post-processing: clip at 0, renormalize, zeros when nothing is positive.
CLIP_RENORM = "clip-renorm"
#: Post-processings a study can ask for.
POSTPROCESS = (NONE, CLIP_RENORM, *pp.METHODS)
#: Namespace of the streams that assign users to attributes (SMP, ALLOMFREE).
ASSIGNMENT = 3
#: ε1 and ε∞ used to check a solution entry before any data is read.
_PROBE = {"ks": (2, 64), "eps_perm": 1.0, "alpha": 0.1}


# ---------------------------------------------------------------------------- post-processing


def clip_renorm(
    estimates: np.ndarray, total: float = 1.0, channel: pp.ChannelInfo | None = None
) -> np.ndarray:
    """Clip at 0 and rescale to ``total``; zeros when no estimate is positive ([004]'s code).

    [004]'s ``SB_UE``/``SB_LGRR`` compute ``est.clip(0) / sum(est.clip(0))`` and the caller
    applies ``np.nan_to_num``, so an all-nonpositive vector (0/0) becomes all zeros.
    `longldp.postprocess.norm_mul` returns the uniform vector instead; otherwise they agree.

    Parameters
    ----------
    estimates : numpy.ndarray, shape (k,)
        Raw frequency estimates.
    total : float, default=1.0
        Target sum.
    channel : ChannelInfo or None
        Unused (the post-processing signature).

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    pos = np.maximum(np.asarray(estimates, dtype=np.float64), 0.0)
    s = pos.sum()
    return pos * (total / s) if s > 0 else np.zeros_like(pos)


#: This kind's own post-processing, beside `longldp.postprocess.METHODS`.
_OWN = {CLIP_RENORM: clip_renorm}


class _Recorder:
    """A post-processor that changes nothing and remembers every (row, channel) it is given."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, pp.ChannelInfo | None]] = []

    def __call__(self, estimates: np.ndarray, total: float, channel: Any) -> np.ndarray:
        self.calls.append((estimates.copy(), channel))
        return estimates


def _channels(recorder: _Recorder, estimates: Sequence[np.ndarray]) -> list[pp.ChannelInfo]:
    """Each attribute's channel, from the calls of `MultidimCollection.collect` (t, then j)."""
    d, tau = len(estimates), estimates[0].shape[0]
    if len(recorder.calls) != tau * d:
        raise RuntimeError(
            f"multidim kind: expected {tau * d} post-processing calls (τ·d), got "
            f"{len(recorder.calls)}; MultidimCollection.collect changed its call order."
        )
    for i, (row, _) in enumerate(recorder.calls):
        t, j = divmod(i, d)
        if not np.array_equal(row, estimates[j][t]):
            raise RuntimeError(
                "multidim kind: post-processing calls are not in (timestamp, attribute) order."
            )
    channels = [recorder.calls[j][1] for j in range(d)]
    if any(c is None for c in channels):
        raise RuntimeError("multidim kind: a protocol gave no channel information.")
    return channels  # type: ignore[return-value]


# ---------------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class SolutionSpec:
    """A checked solution entry: label, solution, chain (or candidates) and calibration.

    Attributes
    ----------
    label : str
        Name of the line in tables and plots (the ``protocol`` column).
    solution : str
        ``"SMP"``, ``"SPL"`` or ``"ALLOMFREE"``.
    chain : str, tuple of str or None
        SMP/SPL: the protocol of every attribute. ALLOMFREE: None (the paper's L-GRR/L-OSUE)
        or the candidates.
    calibration : str
        L-GRR/LOLOHA calibration, ``"paper"`` or ``"exact"``.
    takes_eps_1 : bool
        False for a chain without a second round (dBitFlipPM): it runs once per ε∞.
    """

    label: str
    solution: str
    chain: str | tuple[str, ...] | None
    calibration: str
    takes_eps_1: bool = True

    def build(
        self, ks: Sequence[int], eps_perm: float, alpha: float | None
    ) -> md.MultidimCollection:
        """The collection of one cell (raises `ValueError` when unreachable)."""
        return md.MultidimCollection(
            tuple(ks),
            self.solution,
            eps_perm,
            alpha=alpha if self.takes_eps_1 else None,
            chain=self.chain,
            calibration=self.calibration,
        )

    @property
    def chain_text(self) -> str:
        """The chain as one string (ALLOMFREE: its candidates joined with ``/``)."""
        if self.chain is None:
            return "/".join(md.ALLOMFREE_CANDIDATES)
        return self.chain if isinstance(self.chain, str) else "/".join(self.chain)

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "label": self.label,
            "solution": self.solution,
            "chain": list(self.chain) if isinstance(self.chain, tuple) else self.chain,
            "calibration": self.calibration,
            "takes_eps_1": self.takes_eps_1,
        }

    @classmethod
    def from_json(cls, blob: Mapping[str, Any]) -> SolutionSpec:
        """Inverse of `as_json`."""
        chain = blob["chain"]
        return cls(
            label=blob["label"],
            solution=blob["solution"],
            chain=tuple(chain) if isinstance(chain, list) else chain,
            calibration=blob["calibration"],
            takes_eps_1=blob["takes_eps_1"],
        )


@dataclass(frozen=True, kw_only=True)
class MultidimSpec(GridSpec):
    """The checked keys of a multidim study (datasets: `DatasetSpec`)."""

    solutions: tuple[SolutionSpec, ...]
    postprocess: tuple[str, ...]
    calibration: str


KEYS: tuple[sc.Key, ...] = (
    base.tau_key(1),
    base.engine_key(ENGINES, "per-user"),
    sc.Key("calibration", sc.choice(privacy.LGRR_CALIBRATIONS), default=md.PAPER_CALIBRATION),
    base.EPS_PERM,
    base.alpha_key(required=True),
    base.postprocess_key(POSTPROCESS, CLIP_RENORM),
    base.entries_key("datasets"),
    base.entries_key("solutions"),
)


def _chain_value(where: str, name: str, value: Any) -> str | tuple[str, ...]:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, str) and v.strip() for v in value)
        and len(set(value)) == len(value)
    ):
        return tuple(v.strip() for v in value)
    raise sc.fail(where, name, "a protocol name or a list of distinct protocol names", value)


def parse_solution(where: str, table: Any, calibration: str) -> SolutionSpec:
    """Check one solution entry (see the module docstring).

    Parameters
    ----------
    where, table : str, mapping
        Location for messages (``"study.toml: solutions[1]"``) and the entry as read.
    calibration : str
        The study's calibration, used when the entry sets none.

    Returns
    -------
    SolutionSpec

    Raises
    ------
    ValueError
        Unknown key or solution, a chain that is missing, of the wrong form or not a
        longitudinal protocol.
    """
    keys = (
        sc.Key("solution", sc.choice(md.SOLUTIONS), required=True),
        sc.Key("chain", _chain_value),
        sc.Key("label", sc.string),
        sc.Key("calibration", sc.choice(privacy.LGRR_CALIBRATIONS)),
    )
    values = sc.check_table(where, table, keys)
    solution, chain = values["solution"], values["chain"]
    names = [i.name for i in ll.list_protocols() if i.longitudinal]
    allowed = "a longitudinal protocol: one of " + ", ".join(repr(n) for n in names)
    if solution == "ALLOMFREE":
        if isinstance(chain, str):
            raise sc.fail(
                where,
                "chain",
                "omitted (L-GRR/L-OSUE) or a list of candidates for ALLOMFREE",
                chain,
            )
    elif not isinstance(chain, str):
        if chain is None:
            raise ValueError(f"{where}: missing key 'chain' ({allowed}) for {solution}.")
        raise sc.fail(where, "chain", f"{allowed} for {solution}", list(chain))
    members = () if chain is None else (chain,) if isinstance(chain, str) else chain
    canonical = []
    for c in members:
        try:
            cls = ll.get_protocol_class(c)
        except ValueError:
            raise sc.fail(where, "chain", allowed, c) from None
        if not cls.longitudinal:
            raise sc.fail(where, "chain", allowed, c)
        canonical.append(cls.name)
    if isinstance(chain, str):
        chain = canonical[0]
    elif chain is not None:
        chain = tuple(canonical)
    takes = {i.name: "eps_1" in i.parameters for i in ll.list_protocols()}
    takes_eps_1 = chain is None or any(takes[c] for c in canonical)
    if solution == "ALLOMFREE":
        default_label = "ALLOMFREE" if chain is None else f"ALLOMFREE({'/'.join(canonical)})"
    else:
        default_label = f"{solution}+{chain}"
    spec = SolutionSpec(
        label=values["label"] or default_label,
        solution=solution,
        chain=chain,
        calibration=values["calibration"] or calibration,
        takes_eps_1=takes_eps_1,
    )
    try:
        spec.build(_PROBE["ks"], _PROBE["eps_perm"], _PROBE["alpha"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: bad solution: {err}") from None
    return spec


def parse(values: dict[str, Any], where: str) -> MultidimSpec:
    """Turn the checked top-level values into a `MultidimSpec` (checks each entry)."""
    datasets, solutions = base.parse_grid(
        where, values, parse_dataset, "solutions", parse_solution, values["calibration"]
    )
    for i, ds in enumerate(datasets):
        if ds.n < len(ds.attributes):
            raise sc.fail(
                f"{where}: datasets[{i}]",
                "n",
                f"at least d = {len(ds.attributes)} users (one per attribute)",
                ds.n,
            )
    return MultidimSpec(
        solutions=solutions,
        postprocess=values["postprocess"],
        calibration=values["calibration"],
        **base.grid_values(values, datasets),
    )


# ---------------------------------------------------------------------------------- cells


def cells(study: Any) -> list[Cell]:
    """Every cell of a multidim study, in table order (see the module docstring)."""
    reasons = base.SkipReasons()  # of each (dataset, solution, ε∞, α)
    spec: MultidimSpec = study.spec

    def params(v: Any, at: Any) -> dict[str, Any]:
        d, r, ds, sol = at["dataset"], v["rep"], v["dataset"], v["solution"]
        eps, alpha = v["eps_perm"], v["alpha"]
        point = (d, at["solution"], at["eps_perm"], at["alpha"])
        return {
            "dataset": ds.as_json(),
            "solution": sol.as_json(),
            "eps_perm": eps,
            "alpha": alpha,
            "eps_1": base.eps_1_at(eps, alpha),
            "rep": r,
            "engine": spec.engine,
            "postprocess": list(spec.postprocess),
            "data_key": [seeding.DATA, d],
            "permutation_key": [seeding.PERMUTATION, d, r],
            "assignment_key": [ASSIGNMENT, d, r],
            "skip_reason": reasons(point, sol.build, ds.domain_sizes, eps, alpha),
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "rep": range(study.repetitions),
        **base.budget_axes("solution", spec.solutions, spec, lambda s: s.takes_eps_1),
    }
    return base.grid(study, "multidim", axes, params)


@functools.lru_cache(maxsize=2)
def _assignment(n: int, d: int, entropy: int, key: tuple[int, ...]) -> np.ndarray:
    """The balanced partition of n users into d attributes of one repetition (cached)."""
    coll = md.MultidimCollection((2,) * d, "SMP", 1.0, alpha=0.5, chain="L-SUE")
    out = coll.assign(n, seeding.generator(entropy, key))
    out.flags.writeable = False
    return out


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Rows of one multidim cell: one per post-processing (a pure function of the cell)."""
    prm = cell.params
    ds = prm["dataset"]
    sol = SolutionSpec.from_json(prm["solution"])
    d = len(ds["attributes"])
    row = {
        "dataset": ds["label"],
        "dataset_name": ds["name"],
        "attribute": f"{d} attributes",
        "d": d,
        "ks": list(ds["domain_sizes"]),
        "n": ds["n"],
        "tau": ds["tau"],
        "protocol": sol.label,
        "solution": sol.solution,
        "chain": sol.chain_text,
        "calibration": sol.calibration,
        "eps_perm": prm["eps_perm"],
        "alpha": prm["alpha"],
        "eps_1": prm["eps_1"],
        "engine": prm["engine"],
        "rep": prm["rep"],
        "data_spawn_key": prm["permutation_key"],
        "assignment_spawn_key": prm["assignment_key"] if sol.solution != "SPL" else None,
    }
    if prm["skip_reason"] is not None:
        return base.skipped_rows(row, "postprocess", prm["postprocess"], prm["skip_reason"])
    start = time.perf_counter()
    values = base.longitudinal_codes(
        json.dumps(ds, sort_keys=True),
        tuple(ds["attributes"]),
        cell.entropy,
        tuple(prm["data_key"]),
        tuple(prm["permutation_key"]),
    )
    coll = sol.build(ds["domain_sizes"], prm["eps_perm"], prm["alpha"])
    assignment = None
    if coll.sampling:
        assignment = _assignment(ds["n"], d, cell.entropy, tuple(prm["assignment_key"]))
    recorder = _Recorder()
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    res = coll.collect(
        list(values), rng, engine=prm["engine"], postprocess=recorder, assignment=assignment
    )
    channels = _channels(recorder, res.estimates)
    eps_1 = coll.eps_1
    row |= {
        "eps_1": None if eps_1 is None else float(eps_1),
        "attribute_protocols": [p.name for p in coll.protocols],
        "degenerate": int(sum(np.sum(np.all(e <= 0, axis=1)) for e in res.estimates)),
    }

    def apply(method: str) -> tuple[np.ndarray, ...]:
        return tuple(
            base.apply_postprocess(method, raw, ch, _OWN)
            for raw, ch in zip(res.estimates, channels, strict=True)
        )

    def score(estimates: tuple[np.ndarray, ...]) -> dict[str, Any]:
        done = dataclasses.replace(res, estimates=estimates)
        return {"mse_avg": done.mse_avg, "mse_per_attribute": done.mse_per_attribute.tolist()}

    return base.postprocess_rows(row, prm["postprocess"], apply, score, time.perf_counter() - start)


_DATASET = "dataset:str dataset_name:str attribute:str d:int ks:[int] n:int tau:int"
_SOLUTION = "protocol:str solution:str chain:str calibration:str attribute_protocols:[str]"
_POINT = "eps_perm:float alpha:float eps_1:float postprocess:str engine:str rep:int"
_SEEDS = "data_spawn_key:[int] assignment_spawn_key:[int]"
_METRICS = "mse_avg:float mse_per_attribute:[float] degenerate:int"
COLUMNS = base.columns(" ".join((_DATASET, _SOLUTION, _POINT, _SEEDS, _METRICS)))

KIND = StudyKind(
    "multidim", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "protocol", "alpha", "postprocess"),
)  # fmt: skip
