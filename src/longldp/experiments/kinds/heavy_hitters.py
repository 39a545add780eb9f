"""The ``heavy_hitters`` kind: discovery of values nobody listed (docs/heavy_hitters.md).

For every dataset, method, ε, n and repetition of the study, one cell draws n users' items,
runs the method's discovery (`longldp.apps.heavy_hitters.find`: PEM, TreeHist or SFP) and
scores the k items it returns against the true top k. A cell gives one row.

Study keys of this kind (besides ``name``, ``kind``, ``seed``, ``repetitions``)::

    methods = ["pem", "treehist", "sfp"]
    eps = [1.0, 2.0, 4.0, 8.0]          # each user's ε
    n = [10000, 100000, 1000000]        # users
    k = 10                              # the top k compared (and kept per round)
    select = "top"                      # or "threshold" (docs/math.md (21.6))
    fdr_alpha = 0.05                    # α of threshold selection (false items per round)
    datasets = [{name = "english-words", length = 6, label = "words"},
                {name = "zipf", bits = 48, s = 1.1, support = 100000, label = "zipf48"}]

A dataset entry is ``english-words`` (the bundled wordfreq list, `longldp.data.english_words`:
the words of at most ``length`` lower-case letters, drawn in proportion to their counts; coded
by `TextItems` over a–z, 5 bits per letter) or ``zipf`` (``support`` random ``bits``-bit values
with Zipf(``s``) weights), with an optional ``label``.

Rows: recall, precision and NCR ([WLJ19]: the true top-k items found, weighted k, …, 1 by
rank) of the k items returned; the mean absolute and relative error of the returned items that
are true items; the number of returned items nobody holds (``false_items``); each user's ε;
the rounds run and the server's candidates; the wall time. With threshold selection also the
items whose stated detection probability (docs/math.md (21.7)) is at least 0.9 and how many of
them were found.

Random streams (`longldp.experiments.seeding`): the population of dataset d in repetition r at
size n ``(1, d, r, n)`` (shared by every method and ε: common random numbers), a synthetic
dataset's support ``(0, d)``, the reports of a cell its own cell stream. SFP's sketches are
drawn from their exact count-level law (docs/math.md §21.3), the prefix rounds from the
reports.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from longldp import data as lldata
from longldp.apps import heavy_hitters as hh
from longldp.experiments import _schema as sc
from longldp.experiments import seeding
from longldp.experiments.kinds import base
from longldp.experiments.kinds.base import Cell, StudyKind

__all__ = ["COLUMNS", "KIND", "DatasetEntry", "HeavyHittersSpec", "population", "run_cell"]

LETTERS = "abcdefghijklmnopqrstuvwxyz"
_DATASETS = ("english-words", "zipf")


@dataclass(frozen=True)
class DatasetEntry(base.PlainEntry):
    """A checked dataset entry (module docstring)."""

    label: str
    name: str
    length: int = 6
    bits: int = 48
    s: float = 1.1
    support: int = 100_000


@dataclass(frozen=True, kw_only=True)
class HeavyHittersSpec:
    """The checked keys of a heavy_hitters study."""

    datasets: tuple[DatasetEntry, ...]
    methods: tuple[str, ...]
    eps: tuple[float, ...]
    n: tuple[int, ...]
    k: int
    select: str
    fdr_alpha: float


def _int_list(where: str, name: str, value: Any) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
        or len(set(value)) != len(value)
    ):
        raise sc.fail(where, name, "a non-empty list of distinct integers >= 1", value)
    return tuple(value)


KEYS: tuple[sc.Key, ...] = (
    sc.Key("methods", sc.string_list(hh.METHODS), default=hh.METHODS),
    sc.Key("eps", sc.number_list(what="ε values"), required=True),
    sc.Key("n", _int_list, required=True),
    sc.Key("k", sc.integer(1), default=10),
    sc.Key("select", sc.choice(("top", "threshold")), default="top"),
    sc.Key("fdr_alpha", sc.number(0.0), default=0.05),
    base.entries_key("datasets"),
)


def parse_dataset(where: str, table: Any) -> DatasetEntry:
    """Check one dataset entry (module docstring); ``ValueError`` naming the key."""
    keys = (
        sc.Key("name", sc.choice(_DATASETS), required=True),
        sc.Key("label", sc.string),
        sc.Key("length", sc.integer(1), default=6),
        sc.Key("bits", sc.integer(8), default=48),
        sc.Key("s", sc.number(1.0), default=1.1),
        sc.Key("support", sc.integer(2), default=100_000),
    )
    v = sc.check_table(where, table, keys)
    if v["length"] > 12:
        raise sc.fail(where, "length", "at most 12 letters (60-bit codes)", v["length"])
    if v["bits"] > 63:
        raise sc.fail(where, "bits", "at most 63", v["bits"])
    return DatasetEntry(
        v["label"] or v["name"], v["name"], v["length"], v["bits"], v["s"], v["support"]
    )


def parse(values: dict[str, Any], where: str) -> HeavyHittersSpec:
    """The checked spec (each dataset entry checked)."""
    datasets = base.parse_entries(where, values, "datasets", parse_dataset)
    base.distinct_labels(where, datasets=[d.label for d in datasets])
    if values["fdr_alpha"] >= 1:
        raise sc.fail(where, "fdr_alpha", "a number in (0, 1)", values["fdr_alpha"])
    return HeavyHittersSpec(
        datasets=datasets,
        **{k: values[k] for k in ("methods", "eps", "n", "k", "select", "fdr_alpha")},
    )


def cells(study: Any) -> list[Cell]:
    """Every cell: datasets × repetitions × n × methods × ε (module docstring)."""
    spec: HeavyHittersSpec = study.spec

    def params(v: Any, at: Any) -> dict[str, Any]:
        return {
            "dataset": v["dataset"].as_json(),
            "method": v["method"],
            "eps": v["eps"],
            "n": v["n"],
            "k": spec.k,
            "select": spec.select,
            "fdr_alpha": spec.fdr_alpha,
            "rep": v["rep"],
            "data_key": [seeding.DATA, at["dataset"]],
            "population_key": [seeding.PERMUTATION, at["dataset"], v["rep"], v["n"]],
        }

    axes: dict[str, base.Axis] = {
        "dataset": spec.datasets,
        "rep": range(study.repetitions),
        "n": spec.n,
        "method": spec.methods,
        "eps": spec.eps,
    }
    return base.grid(study, "heavy_hitters", axes, params)


@functools.lru_cache(maxsize=4)
def _words(length: int) -> tuple[tuple[str, ...], np.ndarray]:
    words, counts = lldata.english_words()
    keep = [i for i, w in enumerate(words) if len(w) <= length and set(w) <= set(LETTERS)]
    return tuple(words[i] for i in keep), np.asarray(counts, dtype=np.float64)[keep]


def population(
    ds: dict[str, Any], n: int, entropy: int, data_key: tuple, pop_key: tuple
) -> tuple[Any, Any, list[Any], np.ndarray]:
    """(codec, items of n users, the support's items, their probabilities) of a dataset."""
    rng = seeding.generator(entropy, pop_key)
    if ds["name"] == "english-words":
        words, counts = _words(ds["length"])
        p = counts / counts.sum()
        idx = rng.choice(len(words), size=n, p=p)
        return hh.text_codec(LETTERS, ds["length"]), [words[i] for i in idx], list(words), p
    support_rng = seeding.generator(entropy, data_key)
    values = np.unique(support_rng.integers(0, 1 << ds["bits"], size=ds["support"]))
    p = 1.0 / np.arange(1, values.size + 1) ** ds["s"]
    p /= p.sum()
    idx = rng.choice(values.size, size=n, p=p)
    return hh.integer_codec(ds["bits"]), values[idx].astype(np.uint64), values.tolist(), p


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """The row of one cell (a pure function of the cell)."""
    prm = cell.params
    ds, k = prm["dataset"], prm["k"]
    row: dict[str, Any] = {
        "dataset": ds["label"], "method": prm["method"], "eps": prm["eps"], "n": prm["n"],
        "k": k, "select": prm["select"], "rep": prm["rep"],
    }  # fmt: skip
    start = time.perf_counter()
    codec, items, _, _ = population(
        ds, prm["n"], cell.entropy, tuple(prm["data_key"]), tuple(prm["population_key"])
    )
    if isinstance(items, list):
        uniq, counts = np.unique(np.array(items), return_counts=True)
        freq = {str(u): c / prm["n"] for u, c in zip(uniq, counts, strict=True)}
    else:
        uniq, counts = np.unique(items, return_counts=True)
        freq = {int(u): c / prm["n"] for u, c in zip(uniq, counts, strict=True)}
    top = sorted(freq, key=lambda x: (-freq[x], x))[:k]
    opts = _options(prm["method"], codec.width)
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    got = hh.find(
        items, prm["eps"], method=prm["method"], codec=codec, k=k, select=prm["select"],
        alpha=prm["fdr_alpha"], rng=rng, **opts,
    )  # fmt: skip
    found = [str(x) if isinstance(items, list) else int(x) for x in got.items[:k]]
    row |= _scores(found, list(got.estimates[:k]), top, freq, k)
    row |= {
        "epsilon_per_user": got.epsilon,
        "rounds": len(got.rounds),
        "candidates_tested": int(sum(r.candidates for r in got.rounds)),
        "sure_items": None,
        "sure_found": None,
    }
    if prm["select"] == "threshold":
        heavy = sorted(freq, key=lambda x: -freq[x])[: 4 * k]
        prob = hh.detection_probability(
            prm["n"], [freq[x] for x in heavy], prm["eps"], codec.width,
            method=prm["method"], k=k, alpha=prm["fdr_alpha"], **opts,
        )  # fmt: skip
        sure = [x for x, q in zip(heavy, prob, strict=True) if q >= 0.9]
        row |= {"sure_items": len(sure), "sure_found": sum(x in set(found) for x in sure)}
    row["runtime_s"] = time.perf_counter() - start
    return [row]


def _options(method: str, width: int) -> dict[str, Any]:
    """Each method's round structure for a ``width``-bit code (as the user page states)."""
    if method == "pem":
        # 5-bit symbols of text: one symbol per round; integers: 4 bits per round (as the
        # benchmarks and pure-ldp's examples; 8-bit steps test 2^16 candidates in round 1, which
        # costs O(n·2^16) hash evaluations with OLH)
        return {"start": 5, "step": 5} if width % 5 == 0 else {"start": 4, "step": 4}
    if method == "treehist":
        return {"start": 0, "step": 5 if width % 5 == 0 else 4}
    frag = 10 if width % 10 == 0 else 8
    # the sketches' exact count-level law (docs/math.md §21.3) instead of m bits per user
    return {"frag_bits": frag, "hash_bits": 8, "m": 1024, "d": 64, "engine": "count-level"}


def _scores(found: list, est: list, top: list, freq: dict, k: int) -> dict[str, Any]:
    got = set(found)
    weight = {v: k - r for r, v in enumerate(top)}
    real = [(v, e) for v, e in zip(found, est, strict=True) if v in freq]
    return {
        "returned": len(found),
        "recall": len(got & set(top)) / k,
        "precision": len(got & set(top)) / max(1, len(found)),
        "ncr": sum(weight.get(v, 0) for v in got) / sum(weight.values()),
        "abs_error": float(np.mean([abs(e - freq[v]) for v, e in real])) if real else None,
        "rel_error": float(np.mean([abs(e - freq[v]) / freq[v] for v, e in real]))
        if real
        else None,
        "false_items": len(found) - len(real),
    }


COLUMNS = base.columns(
    "dataset:str method:str eps:float n:int k:int select:str rep:int returned:int "
    "recall:float precision:float ncr:float abs_error:float rel_error:float false_items:int "
    "epsilon_per_user:float rounds:int candidates_tested:int sure_items:int sure_found:int"
)

KIND = StudyKind(
    "heavy_hitters", KEYS, parse, cells, run_cell, COLUMNS,
    summary_by=("dataset", "method", "n"), pivot="eps", metric="recall",
    plot={"x": "eps", "y": "recall", "figure_by": "dataset", "panel_by": "n",
          "line_by": "method", "log_y": False},
    linear_metrics=("recall", "precision", "ncr"),
)  # fmt: skip
