"""A kind's data and rows: data over τ, skipped and post-processed rows, MSE and Arrow columns.

`longitudinal_codes` (a dataset's attributes over τ timestamps, whole rows permuted),
`skipped_rows`, `apply_postprocess`, `postprocess_rows`, `mse_columns`, and `columns` (the
Arrow fields of a kind's rows from a compact text).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from longldp import postprocess as pp
from longldp.data.longitudinal import permutations
from longldp.experiments import seeding
from longldp.experiments.datasets import attribute_codes
from longldp.experiments.kinds.keys import NONE

__all__ = [
    "apply_postprocess",
    "columns",
    "longitudinal_codes",
    "mse_columns",
    "postprocess_rows",
    "skipped_rows",
]


@functools.lru_cache(maxsize=2)
def longitudinal_codes(
    dataset: str,
    attributes: tuple[str, ...],
    entropy: int,
    data_key: tuple[int, ...],
    perm_key: tuple[int, ...],
) -> tuple[np.ndarray, ...]:
    """Per attribute, values[τ, n] of one (dataset, repetition), cached per process.

    Timestamp 0 is the dataset; every later timestamp permutes whole rows (one permutation of
    the users per timestamp, drawn from stream ``perm_key``: `longldp.data.to_longitudinal`),
    so every user keeps a coherent tuple.

    Parameters
    ----------
    dataset : str
        ``json.dumps(DatasetSpec.as_json(), sort_keys=True)``.
    attributes : tuple of str
        The attributes wanted.
    entropy : int
        The study's base seed.
    data_key, perm_key : tuple of int
        Spawn keys of the synthetic data and of the permutations.

    Returns
    -------
    tuple of numpy.ndarray
        One read-only ``(τ, n)`` array per attribute.
    """
    spec = json.loads(dataset)
    codes = [np.asarray(attribute_codes(spec, a, entropy, data_key)) for a in attributes]
    perm = permutations(codes[0].size, spec["tau"], seeding.generator(entropy, perm_key))
    out = tuple(c[perm] for c in codes)
    for a in out:
        a.flags.writeable = False
    return out


def skipped_rows(
    base: Mapping[str, Any], column: str, values: Iterable[Any], reason: str
) -> list[dict[str, Any]]:
    """One ``status = "skipped"`` row per value of ``column``, with the reason."""
    return [{**base, column: v, "status": "skipped", "skip_reason": reason} for v in values]


def apply_postprocess(
    method: str,
    raw: np.ndarray,
    channel: pp.ChannelInfo | None,
    own: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> np.ndarray:
    """One post-processing applied to every timestamp (row) of raw estimates.

    ``"none"`` returns ``raw``; a name in ``own`` (a kind's own method) is applied row by row;
    any other name is `longldp.postprocess.apply` with total 1 and the protocol's channel.
    """
    if method == NONE:
        return raw
    if own and method in own:
        return np.stack([own[method](row) for row in raw])
    return np.stack([pp.apply(method, row, 1.0, channel) for row in raw])


def postprocess_rows(
    base: Mapping[str, Any],
    methods: Iterable[str],
    apply: Callable[[str], Any],
    score: Callable[[Any], Mapping[str, Any]],
    seconds: float,
) -> list[dict[str, Any]]:
    """One row per post-processing of the same raw estimates.

    ``apply(method)`` post-processes; a `ValueError` it raises makes a skipped row with the
    message. ``score(estimates)`` gives the metric columns. ``runtime_s`` is ``seconds`` (the
    shared simulation) plus the post-processing and scoring time of that row.
    """
    rows = []
    for method in methods:
        start = time.perf_counter()
        try:
            estimates = apply(method)
        except ValueError as err:
            rows += skipped_rows(base, "postprocess", [method], str(err))
            continue
        metrics = dict(score(estimates))
        runtime = seconds + time.perf_counter() - start
        ok = {"postprocess": method, "status": "ok", **metrics, "runtime_s": runtime}
        rows.append({**base, **ok})
    return rows


def mse_columns(per_t: np.ndarray, keep: bool = True) -> dict[str, Any]:
    """``mse_avg`` (the mean over timestamps, [002] eq. 1) and ``mse_per_timestamp``."""
    per_t = np.asarray(per_t, dtype=np.float64)
    return {
        "mse_avg": float(np.mean(per_t)),
        "mse_per_timestamp": [float(v) for v in per_t] if keep else None,
    }


_ARROW = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}


def columns(text: str) -> tuple[pa.Field, ...]:
    """Arrow fields from ``"name:type name:[type] ..."`` (types str, int, float, bool; ``[t]``
    a list of t), in order."""
    out = []
    for item in text.split():
        name, kind = item.split(":")
        listed = kind.startswith("[")
        arrow = _ARROW[kind.strip("[]")]
        out.append(pa.field(name, pa.list_(arrow) if listed else arrow))
    return tuple(out)
