"""Datasets of a study: bundled tables and synthetic generators, checked and loaded.

A dataset entry of a study file is a table. For a bundled single-valued dataset
(``longldp datasets`` lists them)::

    {name = "adult", attributes = ["age", "hours-per-week"], tau = 260}
    {name = "adult", attributes = ["age"], n = 5000, label = "Adult (first 5,000)"}

``n`` keeps the first ``n`` rows. For synthetic data (one attribute, called ``"value"``)::

    {name = "zipf", n = 2000, k = 20}              # s = 1.0 by default
    {name = "uniform", n = 2000, k = 20}
    {name = "gaussian", n = 2000, k = 20, mean = 9.5, std = 3.0}

A synthetic dataset is drawn once per study from its own stream (`seeding.DATA`), so every
repetition, protocol and ε∞ sees the same timestamp-0 data, as with bundled data.

Values are the attribute's integer codes in ``[0, k)``, k being the size of its domain. The
bundled files already code a numeric attribute by its distinct values in increasing order
(``DATA.md``), so no further mapping is needed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longldp import data
from longldp.experiments import _schema as sc
from longldp.experiments import seeding

__all__ = [
    "SYNTHETIC",
    "DatasetSpec",
    "attribute_codes",
    "parse_dataset",
    "table_datasets",
]

_COMMON = (
    sc.Key("name", sc.string, required=True),
    sc.Key("label", sc.string),
    sc.Key("tau", sc.integer(1)),
)

#: Synthetic generators: name -> extra keys of its entry.
SYNTHETIC: dict[str, tuple[sc.Key, ...]] = {
    "zipf": (
        sc.Key("n", sc.integer(1), required=True),
        sc.Key("k", sc.integer(2), required=True),
        sc.Key("s", sc.number(0.0, inclusive=True), default=1.0),
    ),
    "uniform": (
        sc.Key("n", sc.integer(1), required=True),
        sc.Key("k", sc.integer(2), required=True),
    ),
    "gaussian": (
        sc.Key("n", sc.integer(1), required=True),
        sc.Key("k", sc.integer(2), required=True),
        sc.Key("mean", sc.number()),
        sc.Key("std", sc.number(lower=0.0)),
    ),
}
_SYNTHETIC_ATTRIBUTE = "value"


@dataclass(frozen=True)
class DatasetSpec:
    """A checked dataset entry.

    Attributes
    ----------
    name : str
        Registry name (``longldp.data.load``) or synthetic generator name.
    label : str
        Name shown in the results and plots (default: ``name``).
    attributes : tuple of str
        Attributes studied (``("value",)`` for synthetic data).
    domain_sizes : tuple of int
        k of each attribute.
    n : int
        Number of users.
    tau : int
        Number of timestamps.
    options : mapping
        Generator parameters (synthetic) or ``{"n": n}`` when a bundled dataset is cut.
    """

    name: str
    label: str
    attributes: tuple[str, ...]
    domain_sizes: tuple[int, ...]
    n: int
    tau: int
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        """True for generated data."""
        return self.name in SYNTHETIC

    def as_json(self) -> dict[str, Any]:
        """JSON-serializable description (part of a cell's identity)."""
        return {
            "name": self.name,
            "label": self.label,
            "attributes": list(self.attributes),
            "domain_sizes": list(self.domain_sizes),
            "n": self.n,
            "tau": self.tau,
            "options": dict(self.options),
        }


@functools.cache
def table_datasets() -> dict[str, data.DatasetInfo]:
    """Bundled single-valued datasets by name."""
    return {info.name: info for info in data.list_datasets() if info.kind == "table"}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def parse_dataset(where: str, table: Any, default_tau: int | None) -> DatasetSpec:
    """Check one dataset entry of a study file.

    Parameters
    ----------
    where : str
        Location for messages, e.g. ``"study.toml: datasets[1]"``.
    table : mapping
        The entry as read from TOML.
    default_tau : int or None
        The study's top-level ``tau``, used when the entry has none.

    Returns
    -------
    DatasetSpec

    Raises
    ------
    ValueError
        Unknown dataset or attribute, set-valued dataset, bad or unknown key, or no τ.
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {table!r}.")
    raw_name = sc.string(where, "name", table.get("name", ""))
    name = _normalise(raw_name)
    tables = table_datasets()
    if name in SYNTHETIC:
        values = sc.check_table(
            where,
            table,
            (
                *_COMMON,
                *SYNTHETIC[name],
                sc.Key("attributes", sc.string_list([_SYNTHETIC_ATTRIBUTE])),
            ),
        )
        options = {k.name: values[k.name] for k in SYNTHETIC[name] if values[k.name] is not None}
        attributes: tuple[str, ...] = (_SYNTHETIC_ATTRIBUTE,)
        sizes: tuple[int, ...] = (values["k"],)
        n = values["n"]
    elif name in tables:
        info = tables[name]
        known = dict(info.attributes)
        values = sc.check_table(
            where,
            table,
            (
                *_COMMON,
                sc.Key("attributes", sc.string_list(list(known)), required=True),
                sc.Key("n", sc.integer(1)),
            ),
        )
        attributes = values["attributes"]
        sizes = tuple(known[a] for a in attributes)
        n = info.n if values["n"] is None else values["n"]
        if n > info.n:
            raise sc.fail(where, "n", f"an integer in [1, {info.n}] (the size of {name})", n)
        options = {} if values["n"] is None else {"n": n}
    else:
        others = sorted(set(data.dataset_names()) - set(tables))
        allowed = ", ".join(repr(x) for x in [*tables, *SYNTHETIC])
        note = f" ({', '.join(others)} are set-valued)" if name in others else ""
        raise sc.fail(where, "name", f"one of {allowed}{note}", raw_name)
    tau = values["tau"] if values["tau"] is not None else default_tau
    if tau is None:
        raise ValueError(f"{where}: missing key 'tau' (give it here or at the top level).")
    return DatasetSpec(
        name=name,
        label=values["label"] or raw_name,
        attributes=attributes,
        domain_sizes=sizes,
        n=n,
        tau=tau,
        options=options,
    )


@functools.lru_cache(maxsize=4)
def _bundled(name: str) -> data.Table:
    table = data.load(name)
    assert isinstance(table, data.Table)
    return table


def attribute_codes(
    spec: Mapping[str, Any], attribute: str, entropy: int, data_key: tuple[int, ...]
) -> np.ndarray:
    """The timestamp-0 codes of one attribute of a dataset (cached per process).

    Parameters
    ----------
    spec : mapping
        `DatasetSpec.as_json` of the dataset.
    attribute : str
        One of its attributes.
    entropy : int
        The study's base seed.
    data_key : tuple of int
        Spawn key of the dataset's generation stream (used by synthetic data only).

    Returns
    -------
    numpy.ndarray
        Integer codes in ``[0, k)``, one per user (read-only).
    """
    options = spec["options"]
    if spec["name"] in SYNTHETIC:
        return _synthetic(spec["name"], tuple(sorted(options.items())), entropy, data_key)
    codes = _bundled(spec["name"])[attribute]
    return codes[: options["n"]] if "n" in options else codes


@functools.lru_cache(maxsize=4)
def _synthetic(
    name: str, options: tuple[tuple[str, Any], ...], entropy: int, data_key: tuple[int, ...]
) -> np.ndarray:
    opts = dict(options)
    rng = seeding.generator(entropy, data_key)
    n, k = opts.pop("n"), opts.pop("k")
    generate = {"zipf": data.zipf, "uniform": data.uniform, "gaussian": data.gaussian}[name]
    codes = generate(n, k, rng, **opts)
    codes.flags.writeable = False
    return codes
