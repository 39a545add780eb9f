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

`gain_table` and `format_gain_table` turn a results table into [004]'s Tables 3–4: the gain of
ALLOMFREE over SMP+L-SUE and SMP+L-OUE, in %, per ε∞ and on average, beside the paper's
numbers. Without the ``longldp`` command::

    python -m longldp.experiments.kinds.multidim RESULTS.parquet [--out gains.md] [--plot gains.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import longldp as ll
from longldp import postprocess as pp
from longldp import privacy
from longldp.apps.multidim import collection as md
from longldp.data.longitudinal import permutations
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.datasets import DatasetSpec, attribute_codes, parse_dataset
from longldp.experiments.kinds import Cell, StudyKind

__all__ = [
    "ASSIGNMENT",
    "CLIP_RENORM",
    "KIND",
    "PAPER_GAINS",
    "POSTPROCESS",
    "GainRow",
    "MultidimSpec",
    "SolutionSpec",
    "clip_renorm",
    "format_gain_table",
    "gain_table",
    "main",
    "plot_gains",
    "run_cell",
]

NONE = "none"
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


def _postprocess(method: str, raw: np.ndarray, channel: pp.ChannelInfo) -> np.ndarray:
    """One post-processing applied to every timestamp (row) of one attribute's estimates."""
    if method == NONE:
        return raw
    if method == CLIP_RENORM:
        return np.stack([clip_renorm(row) for row in raw])
    return np.stack([pp.apply(method, row, 1.0, channel) for row in raw])


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


@dataclass(frozen=True)
class MultidimSpec:
    """The checked keys of a multidim study."""

    datasets: tuple[DatasetSpec, ...]
    solutions: tuple[SolutionSpec, ...]
    eps_perm: tuple[float, ...]
    alpha: tuple[float, ...]
    postprocess: tuple[str, ...]
    engine: str
    calibration: str


KEYS: tuple[sc.Key, ...] = (
    sc.Key("tau", sc.integer(1), default=1),
    sc.Key("engine", sc.choice(md.ENGINES), default="per-user"),
    sc.Key("calibration", sc.choice(privacy.LGRR_CALIBRATIONS), default=md.PAPER_CALIBRATION),
    sc.Key("eps_perm", sc.number_list(what="ε∞ values"), required=True),
    sc.Key("alpha", sc.number_list(lower=0.0, upper=1.0, what="α values"), required=True),
    sc.Key("postprocess", sc.string_list(POSTPROCESS), default=(CLIP_RENORM,)),
    sc.Key("datasets", sc.table_list, required=True),
    sc.Key("solutions", sc.table_list, required=True),
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
    where : str
        Location for messages, e.g. ``"study.toml: solutions[1]"``.
    table : mapping
        The entry as read from TOML.
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
    datasets = tuple(
        parse_dataset(f"{where}: datasets[{i}]", t, values["tau"])
        for i, t in enumerate(values["datasets"])
    )
    solutions = tuple(
        parse_solution(f"{where}: solutions[{i}]", t, values["calibration"])
        for i, t in enumerate(values["solutions"])
    )
    for what, labels in (
        ("datasets", [d.label for d in datasets]),
        ("solutions", [s.label for s in solutions]),
    ):
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise sc.fail(where, what, "entries with distinct labels (set 'label')", dup)
    for i, ds in enumerate(datasets):
        if ds.n < len(ds.attributes):
            raise sc.fail(
                f"{where}: datasets[{i}]",
                "n",
                f"at least d = {len(ds.attributes)} users (one per attribute)",
                ds.n,
            )
    return MultidimSpec(
        datasets=datasets,
        solutions=solutions,
        eps_perm=values["eps_perm"],
        alpha=values["alpha"],
        postprocess=values["postprocess"],
        engine=values["engine"],
        calibration=values["calibration"],
    )


# ---------------------------------------------------------------------------------- cells


def _skip_reason(
    sol: SolutionSpec, ks: Sequence[int], eps_perm: float, alpha: float | None
) -> str | None:
    try:
        sol.build(ks, eps_perm, alpha)
    except ValueError as err:
        return str(err)
    return None


def cells(study: Any) -> list[Cell]:
    """Every cell of a multidim study, in table order (see the module docstring)."""
    spec: MultidimSpec = study.spec
    out: list[Cell] = []
    for d, ds in enumerate(spec.datasets):
        ds_json = ds.as_json()
        reasons: dict[tuple[int, int, int], str | None] = {}
        for r in range(study.repetitions):
            for s, sol in enumerate(spec.solutions):
                alphas = list(enumerate(spec.alpha)) if sol.takes_eps_1 else [(0, None)]
                for e, eps in enumerate(spec.eps_perm):
                    for l, alpha in alphas:
                        if (s, e, l) not in reasons:
                            reasons[s, e, l] = _skip_reason(sol, ds.domain_sizes, eps, alpha)
                        params = {
                            "dataset": ds_json,
                            "solution": sol.as_json(),
                            "eps_perm": eps,
                            "alpha": alpha,
                            "eps_1": None if alpha is None else alpha * eps,
                            "rep": r,
                            "engine": spec.engine,
                            "postprocess": list(spec.postprocess),
                            "data_key": [seeding.DATA, d],
                            "permutation_key": [seeding.PERMUTATION, d, r],
                            "assignment_key": [ASSIGNMENT, d, r],
                            "skip_reason": reasons[s, e, l],
                        }
                        key = (seeding.CELL, d, r, s, e, l)
                        out.append(Cell("multidim", study.seed, key, params, len(out)))
    return out


@functools.lru_cache(maxsize=2)
def _values(
    dataset: str, entropy: int, data_key: tuple[int, ...], perm_key: tuple[int, ...]
) -> tuple[np.ndarray, ...]:
    """Per attribute, values[τ, n] of one (dataset, repetition), cached per process."""
    spec = json.loads(dataset)
    codes = [np.asarray(attribute_codes(spec, a, entropy, data_key)) for a in spec["attributes"]]
    tau, n = spec["tau"], codes[0].size
    if tau == 1:
        out = [c[None, :] for c in codes]
    else:  # rows move as a whole: one permutation of the users per timestamp
        perm = permutations(n, tau, seeding.generator(entropy, perm_key))
        out = [c[perm] for c in codes]
    for a in out:
        a.flags.writeable = False
    return tuple(out)


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
    base = {
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
        return [
            base | {"postprocess": m, "status": "skipped", "skip_reason": prm["skip_reason"]}
            for m in prm["postprocess"]
        ]
    start = time.perf_counter()
    values = _values(
        json.dumps(ds, sort_keys=True),
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
    sim_seconds = time.perf_counter() - start
    degenerate = int(sum(np.sum(np.all(e <= 0, axis=1)) for e in res.estimates))
    eps_1 = coll.eps_1
    base |= {
        "eps_1": None if eps_1 is None else float(eps_1),
        "attribute_protocols": [p.name for p in coll.protocols],
        "degenerate": degenerate,
    }
    rows = []
    for method in prm["postprocess"]:
        start = time.perf_counter()
        try:
            estimates = tuple(
                _postprocess(method, raw, ch)
                for raw, ch in zip(res.estimates, channels, strict=True)
            )
        except ValueError as err:
            rows.append(
                base | {"postprocess": method, "status": "skipped", "skip_reason": str(err)}
            )
            continue
        done = dataclasses.replace(res, estimates=estimates)
        rows.append(
            base
            | {
                "postprocess": method,
                "status": "ok",
                "mse_avg": done.mse_avg,
                "mse_per_attribute": done.mse_per_attribute.tolist(),
                "runtime_s": sim_seconds + time.perf_counter() - start,
            }
        )
    return rows


COLUMNS: tuple[pa.Field, ...] = (
    pa.field("dataset", pa.string()),
    pa.field("dataset_name", pa.string()),
    pa.field("attribute", pa.string()),
    pa.field("d", pa.int64()),
    pa.field("ks", pa.list_(pa.int64())),
    pa.field("n", pa.int64()),
    pa.field("tau", pa.int64()),
    pa.field("protocol", pa.string()),
    pa.field("solution", pa.string()),
    pa.field("chain", pa.string()),
    pa.field("calibration", pa.string()),
    pa.field("attribute_protocols", pa.list_(pa.string())),
    pa.field("eps_perm", pa.float64()),
    pa.field("alpha", pa.float64()),
    pa.field("eps_1", pa.float64()),
    pa.field("postprocess", pa.string()),
    pa.field("engine", pa.string()),
    pa.field("rep", pa.int64()),
    pa.field("data_spawn_key", pa.list_(pa.int64())),
    pa.field("assignment_spawn_key", pa.list_(pa.int64())),
    pa.field("mse_avg", pa.float64()),
    pa.field("mse_per_attribute", pa.list_(pa.float64())),
    pa.field("degenerate", pa.int64()),
)

KIND = StudyKind(
    name="multidim",
    keys=KEYS,
    parse=parse,
    cells=cells,
    run_cell=run_cell,
    columns=COLUMNS,
    summary_by=("dataset", "protocol", "alpha", "postprocess"),
    pivot="eps_perm",
    metric="mse_avg",
)


# ---------------------------------------------------------------------------------- gains

_EPS_GRID = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def _paper_column(*values: float) -> dict[float, float]:
    return dict(zip(_EPS_GRID, values, strict=True))


#: [004] Table 3 (α = 0.3) and Table 4 (α = 0.6): gain (%) of ALLOMFREE over SMP with L-SUE and
#: with L-OUE, per ε∞, as printed. Keyed by (dataset registry name, α) then baseline chain.
#: The paper's "Mean" row is the mean of its eight per-ε∞ gains.
PAPER_GAINS: dict[tuple[str, float], dict[str, dict[float, float]]] = {
    ("nursery", 0.3): {
        "L-SUE": _paper_column(13.51, 12.36, 19.95, 17.18, 20.70, 28.69, 36.19, 41.24),
        "L-OUE": _paper_column(20.63, 17.75, 25.86, 33.24, 35.40, 42.98, 54.02, 57.16),
    },
    ("adult", 0.3): {
        "L-SUE": _paper_column(19.03, 12.77, 8.47, 4.11, 11.93, 8.35, 18.97, 19.81),
        "L-OUE": _paper_column(27.73, 20.44, 18.01, 17.16, 22.54, 28.22, 32.02, 34.25),
    },
    ("ms-fimu", 0.3): {
        "L-SUE": _paper_column(3.03, 1.01, 4.13, 13.22, 10.41, 13.07, 14.78, 20.38),
        "L-OUE": _paper_column(5.43, 11.57, 11.55, 23.44, 22.25, 21.56, 29.10, 29.64),
    },
    ("census-income", 0.3): {
        "L-SUE": _paper_column(7.84, 9.21, 5.82, 10.06, 12.77, 17.07, 22.02, 24.99),
        "L-OUE": _paper_column(9.48, 14.08, 12.92, 20.41, 23.15, 26.21, 30.96, 35.60),
    },
    ("nursery", 0.6): {
        "L-SUE": _paper_column(17.82, 14.99, 15.88, 27.52, 39.59, 40.64, 44.39, 42.24),
        "L-OUE": _paper_column(38.84, 38.97, 41.05, 54.69, 60.96, 65.32, 68.73, 71.13),
    },
    ("adult", 0.6): {
        "L-SUE": _paper_column(10.42, 9.83, 12.90, 12.95, 23.28, 28.59, 34.85, 45.26),
        "L-OUE": _paper_column(27.46, 25.14, 28.59, 33.78, 38.50, 47.95, 50.00, 58.33),
    },
    ("ms-fimu", 0.6): {
        "L-SUE": _paper_column(6.41, 2.97, 16.00, 14.81, 17.71, 27.26, 33.69, 41.83),
        "L-OUE": _paper_column(24.79, 23.32, 30.52, 35.65, 35.34, 40.97, 50.94, 59.47),
    },
    ("census-income", 0.6): {
        "L-SUE": _paper_column(5.65, 9.79, 11.88, 18.45, 24.89, 36.12, 40.01, 45.85),
        "L-OUE": _paper_column(21.61, 25.46, 28.05, 32.31, 39.11, 44.48, 48.18, 54.44),
    },
}
#: The paper's "Mean" rows, as printed (Tables 3–4).
PAPER_MEANS: dict[tuple[str, float], dict[str, float]] = {
    ("nursery", 0.3): {"L-SUE": 23.73, "L-OUE": 35.88},
    ("adult", 0.3): {"L-SUE": 12.93, "L-OUE": 25.05},
    ("ms-fimu", 0.3): {"L-SUE": 10.00, "L-OUE": 19.32},
    ("census-income", 0.3): {"L-SUE": 13.72, "L-OUE": 21.60},
    ("nursery", 0.6): {"L-SUE": 30.38, "L-OUE": 54.96},
    ("adult", 0.6): {"L-SUE": 22.26, "L-OUE": 38.72},
    ("ms-fimu", 0.6): {"L-SUE": 20.08, "L-OUE": 37.62},
    ("census-income", 0.6): {"L-SUE": 24.08, "L-OUE": 36.70},
}
#: (n, d) of the paper's datasets ([004] §5.1): paper numbers are shown only for this setup.
PAPER_SETUP: dict[str, tuple[int, int]] = {
    "nursery": (12960, 9),
    "adult": (45222, 9),
    "ms-fimu": (88935, 6),
    "census-income": (299285, 33),
}


@dataclass(frozen=True)
class GainRow:
    """One row of the gain table: one ε∞ of one (dataset, α, post-processing), or their mean.

    Attributes
    ----------
    dataset : str
        Dataset label.
    alpha : float or None
        α = ε1/ε∞.
    postprocess : str
        Post-processing of the rows compared.
    eps_perm : float or None
        ε∞; None for the mean over the ε∞ grid (the paper's "Mean" row).
    reps : int
        Repetitions behind every mean (those present for the target and every baseline).
    mse : mapping
        Label → mean MSE_avg over the repetitions (empty in the mean row).
    gain : mapping
        Baseline label → gain (%) of the target over it:
        100·(MSE(baseline) − MSE(target))/MSE(baseline), MSEs averaged over repetitions
        first ([004] eq. 17). In the mean row: the mean of the per-ε∞ gains.
    ci : mapping
        Baseline label → half-width of a 95% normal confidence interval of the gain (delta
        method on the paired repetitions; NaN with fewer than two repetitions).
    paper : mapping
        Baseline label → the paper's printed gain, or None when the paper has no such cell.
    """

    dataset: str
    alpha: float | None
    postprocess: str
    eps_perm: float | None
    reps: int
    mse: Mapping[str, float] = field(default_factory=dict)
    gain: Mapping[str, float] = field(default_factory=dict)
    ci: Mapping[str, float] = field(default_factory=dict)
    paper: Mapping[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Flat dictionary (``mse[label]``, ``gain[label]``, ``ci[label]``, ``paper[label]``)."""
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "alpha": self.alpha,
            "postprocess": self.postprocess,
            "eps_perm": self.eps_perm,
            "reps": self.reps,
        }
        for name in ("mse", "gain", "ci", "paper"):
            for label, value in getattr(self, name).items():
                out[f"{name}[{label}]"] = value
        return out


def _read_table(results: str | Path | pa.Table) -> pa.Table:
    if isinstance(results, pa.Table):
        return results
    from longldp.experiments.store import read_results

    return read_results(results)


def gain_table(
    results: str | Path | pa.Table,
    *,
    target: str = "ALLOMFREE",
    baselines: Sequence[str] = ("SMP+L-SUE", "SMP+L-OUE"),
) -> list[GainRow]:
    """[004] Tables 3–4 from a multidim results table: gains of ``target`` over ``baselines``.

    For every dataset × α × post-processing and every ε∞: the mean MSE_avg over the
    repetitions of each solution, and the gain (%) of ``target`` over each baseline,
    ``100·(MSE(baseline) − MSE(target))/MSE(baseline)`` ([004] eq. 17, printed in %); then a row
    with the mean gain over the ε∞ grid (the paper's "Mean" row). Only ``status == "ok"`` rows
    count, and only repetitions present for the target and every baseline (paired).

    Parameters
    ----------
    results : str, Path or pyarrow.Table
        ``results.parquet`` (or its folder) written by ``longldp run``, or the table.
    target : str, default="ALLOMFREE"
        Label (``protocol`` column) of the solution whose gain is measured.
    baselines : sequence of str, default=("SMP+L-SUE", "SMP+L-OUE")
        Labels of the solutions it is compared with.

    Returns
    -------
    list of GainRow
        Ordered by dataset, α, post-processing (as first seen), then ε∞ and the mean row.
        The paper's numbers are attached where the dataset is one of [004]'s with its n and d,
        the target is ALLOMFREE with the paper's candidates and a baseline is SMP with L-SUE or
        L-OUE.

    Raises
    ------
    ValueError
        A missing column, or a label absent from the table.
    """
    table = _read_table(results)
    needed = (
        "dataset", "dataset_name", "n", "d", "protocol", "solution", "chain",
        "alpha", "eps_perm", "postprocess", "rep", "status", "mse_avg",
    )  # fmt: skip
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise ValueError(f"gain_table: the results table has no column(s) {missing}.")
    labels = [target, *baselines]
    if len(set(labels)) != len(labels):
        raise ValueError(f"gain_table: 'target' and 'baselines' must differ; got {labels}.")
    cols = {c: table.column(c).to_pylist() for c in needed}
    present = set(cols["protocol"])
    absent = [x for x in labels if x not in present]
    if absent:
        raise ValueError(
            f"gain_table: no rows for {absent} in the 'protocol' column; present: "
            f"{sorted(present)}."
        )
    about: dict[str, tuple[str, str]] = {}
    data: dict[tuple, dict[str, dict[int, float]]] = {}
    setup: dict[str, tuple[str, int, int]] = {}
    order: list[tuple] = []
    for i in range(table.num_rows):
        label = cols["protocol"][i]
        if label not in labels:
            continue
        about[label] = (cols["solution"][i], cols["chain"][i])
        if cols["status"][i] != "ok" or cols["mse_avg"][i] is None:
            continue
        group = (cols["dataset"][i], cols["alpha"][i], cols["postprocess"][i])
        setup[group[0]] = (cols["dataset_name"][i], cols["n"][i], cols["d"][i])
        if group not in order:
            order.append(group)
        per_eps = data.setdefault((*group, cols["eps_perm"][i]), {})
        per_eps.setdefault(label, {})[cols["rep"][i]] = float(cols["mse_avg"][i])
    rows: list[GainRow] = []
    paper_target = about.get(target) == ("ALLOMFREE", "/".join(md.ALLOMFREE_CANDIDATES))
    for group in order:
        dataset, alpha, post = group
        name, n, d = setup[dataset]
        eps_values = sorted(k[3] for k in data if k[:3] == group)
        paper_key = (name, alpha)
        use_paper = paper_target and PAPER_SETUP.get(name) == (n, d) and paper_key in PAPER_GAINS
        # per baseline: the ε∞ where it has a gain, and each repetition's influence values
        gains_of: dict[str, list[float]] = {b: [] for b in baselines}
        eps_of: dict[str, list[float]] = {b: [] for b in baselines}
        influence: dict[str, list[dict[int, float]]] = {b: [] for b in baselines}
        for eps in eps_values:
            by_label = data[(*group, eps)]
            if target not in by_label:
                continue
            mse = {x: float(np.mean(list(by_label[x].values()))) for x in labels if x in by_label}
            gain, ci, paper = {}, {}, {}
            pairs = []
            for b in baselines:
                if b not in by_label:
                    continue
                pair = _pair_gain(by_label[target], by_label[b])
                if pair is None:
                    continue
                gain[b], ci[b], psi = pair
                pairs.append(len(psi))
                gains_of[b].append(gain[b])
                eps_of[b].append(eps)
                influence[b].append(psi)
                paper[b] = _paper_value(use_paper, paper_key, about[b], eps)
            if gain:
                rows.append(GainRow(dataset, alpha, post, eps, min(pairs), mse, gain, ci, paper))
        if not any(gains_of.values()):
            continue
        mean_gain, mean_ci, mean_paper = {}, {}, {}
        mean_reps = []
        for b in baselines:
            if not gains_of[b]:
                continue
            mean_gain[b] = float(np.mean(gains_of[b]))
            common = set.intersection(*(set(psi) for psi in influence[b]))
            mean_reps.append(len(common))
            psi_mean = np.array([np.mean([psi[r] for psi in influence[b]]) for r in common])
            mean_ci[b] = _half_width(psi_mean)
            solution, chain = about[b]
            on_grid = len(eps_of[b]) == len(_EPS_GRID) and all(
                math.isclose(x, y) for x, y in zip(eps_of[b], _EPS_GRID, strict=True)
            )
            mean_paper[b] = (
                PAPER_MEANS[paper_key].get(chain)
                if use_paper and solution == "SMP" and on_grid
                else None
            )
        rows.append(
            GainRow(dataset, alpha, post, None, min(mean_reps), {}, mean_gain, mean_ci, mean_paper)
        )
    return rows


def _pair_gain(
    target: Mapping[int, float], baseline: Mapping[int, float]
) -> tuple[float, float, dict[int, float]] | None:
    """Gain (%) of ``target`` over ``baseline`` on their common repetitions.

    Returns (gain, 95% half-width, influence of each repetition) or None without a common
    repetition. gain = 100·(1 − Ā/B̄) with Ā, B̄ the mean MSE_avg over the common repetitions;
    the delta method gives its influence values ψ_r = −100·(a_r − (Ā/B̄)·b_r)/B̄, whose mean's
    standard error is that of the gain (paired: the repetitions share their assignment).
    """
    reps = sorted(set(target) & set(baseline))
    if not reps:
        return None
    a = np.array([target[r] for r in reps])
    b = np.array([baseline[r] for r in reps])
    ratio = a.mean() / b.mean()
    psi = -100.0 * (a - ratio * b) / b.mean()
    return 100.0 * (1.0 - ratio), _half_width(psi), dict(zip(reps, psi.tolist(), strict=True))


def _half_width(psi: np.ndarray) -> float:
    """1.96 standard errors of a mean whose per-repetition influence values are ``psi``."""
    if psi.size < 2:
        return math.nan
    return float(1.96 * np.std(psi, ddof=1) / math.sqrt(psi.size))


def _paper_value(
    use: bool, key: tuple[str, float], about: tuple[str, str], eps: float
) -> float | None:
    solution, chain = about
    if not use or solution != "SMP":
        return None
    column = PAPER_GAINS[key].get(chain)
    if column is None:
        return None
    return next((v for e, v in column.items() if math.isclose(e, eps)), None)


def _num(x: float | None, fmt: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return format(x, fmt)


def format_gain_table(rows: Sequence[GainRow]) -> str:
    """The gain table as Markdown: one table per dataset × α × post-processing.

    Each table has one line per ε∞ and a "mean" line; columns: mean MSE_avg of every solution,
    then for every baseline our gain ± its 95% half-width, the paper's gain and our gain minus
    the paper's (percentage points).

    Parameters
    ----------
    rows : sequence of GainRow
        What `gain_table` returned.

    Returns
    -------
    str
    """
    if not rows:
        return "No gains: the table has no complete (target, baseline) pairs.\n"
    out: list[str] = []
    groups: dict[tuple, list[GainRow]] = {}
    for row in rows:
        groups.setdefault((row.dataset, row.alpha, row.postprocess), []).append(row)
    for (dataset, alpha, post), members in groups.items():
        labels = list(dict.fromkeys(x for r in members for x in r.mse))
        baselines = list(dict.fromkeys(b for r in members for b in r.gain))
        reps = max(r.reps for r in members)
        alpha_text = "–" if alpha is None else f"{alpha:g}"
        out.append(
            f"### {dataset}, α = {alpha_text} (post-processing {post}, {reps} repetitions)\n"
        )
        header = ["ε∞", *(f"MSE_avg {x}" for x in labels)]
        for b in baselines:
            header += [f"gain vs {b} (%)", "paper (%)", "ours − paper"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for row in members:
            cells_ = ["**mean**" if row.eps_perm is None else f"{row.eps_perm:g}"]
            cells_ += [_num(row.mse.get(x), ".4g") for x in labels]
            for b in baselines:
                g, c, p = row.gain.get(b), row.ci.get(b), row.paper.get(b)
                ours = _num(g, ".2f") + ("" if c is None or math.isnan(c) else f" ± {c:.2f}")
                diff = None if g is None or p is None else g - p
                cells_ += [ours, _num(p, ".2f"), _num(diff, "+.2f")]
            out.append("| " + " | ".join(cells_) + " |")
        out.append("")
    return "\n".join(out)


def plot_gains(rows: Sequence[GainRow], out: str | Path) -> Path:
    """Draw the per-ε∞ gains (ours with 95% bars, the paper's dashed) into one PNG.

    One panel per dataset × α × post-processing; one colour per baseline.

    Parameters
    ----------
    rows : sequence of GainRow
        What `gain_table` returned.
    out : str or Path
        The PNG file to write.

    Returns
    -------
    Path
        ``out``.
    """
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    groups: dict[tuple, list[GainRow]] = {}
    for row in rows:
        if row.eps_perm is not None:
            groups.setdefault((row.dataset, row.alpha, row.postprocess), []).append(row)
    if not groups:
        raise ValueError("plot_gains: no per-ε∞ gains to draw.")
    ncols = min(2, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig = Figure(figsize=(6.0 * ncols, 4.0 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, ((dataset, alpha, post), members) in zip(axes, groups.items(), strict=False):
        baselines = list(dict.fromkeys(b for r in members for b in r.gain))
        for i, b in enumerate(baselines):
            colour = colours[i % len(colours)]
            pts = [r for r in members if b in r.gain]
            x = [r.eps_perm for r in pts]
            y = [r.gain[b] for r in pts]
            err = [0.0 if math.isnan(r.ci[b]) else r.ci[b] for r in pts]
            ax.errorbar(x, y, yerr=err, color=colour, marker="o", capsize=3, label=f"ours vs {b}")
            paper = [(r.eps_perm, r.paper.get(b)) for r in pts if r.paper.get(b) is not None]
            if paper:
                px, py = zip(*paper, strict=True)
                ax.plot(
                    px, py, color=colour, ls="--", marker="s", mfc="none", label=f"paper vs {b}"
                )
        alpha_text = "–" if alpha is None else f"{alpha:g}"
        ax.set_title(f"{dataset}, α = {alpha_text} ({post})")
        ax.set_xlabel("ε∞")
        ax.set_ylabel("gain of ALLOMFREE (%)")
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m longldp.experiments.kinds.multidim RESULTS [--out MD] [--plot PNG]``: gain table.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0, or 2 for a bad table.
    """
    parser = argparse.ArgumentParser(
        prog="python -m longldp.experiments.kinds.multidim",
        description="Gains of ALLOMFREE over SMP+L-SUE and SMP+L-OUE ([004] Tables 3-4).",
    )
    parser.add_argument("results", type=Path, help="results.parquet of a multidim study")
    parser.add_argument("--out", type=Path, help="also write the Markdown table to this file")
    parser.add_argument("--plot", type=Path, help="also draw the per-ε∞ gains into this PNG")
    parser.add_argument("--target", default="ALLOMFREE", help="label of the target solution")
    parser.add_argument(
        "--baseline",
        action="append",
        help="label of a baseline (repeat; default SMP+L-SUE and SMP+L-OUE)",
    )
    args = parser.parse_args(argv)
    baselines = tuple(args.baseline) if args.baseline else ("SMP+L-SUE", "SMP+L-OUE")
    try:
        rows = gain_table(args.results, target=args.target, baselines=baselines)
        text = format_gain_table(rows)
        if args.plot is not None:
            plot_gains(rows, args.plot)
    except (ValueError, OSError) as err:
        print(f"error: {err}")
        return 2
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
