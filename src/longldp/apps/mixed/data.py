"""The bundled real data with numeric and categorical attributes of the same persons."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from longldp.apps.mixed.collection import Attribute, CategoricalAttribute, NumericAttribute
from longldp.data import load
from longldp.data.numeric import numeric_attributes, numeric_values


def mixed_table(
    dataset: str, numeric: Sequence[str] | None = None, categorical: Sequence[str] | None = None
) -> tuple[tuple[Attribute, ...], list[NDArray]]:
    """(attributes, columns) of a bundled dataset: its numeric attributes at full resolution
    with their declared ranges (``longldp.data.numeric``), then its categorical ones (codes),
    rows aligned. ``numeric`` / ``categorical`` select by name (default: all numeric, and the
    coded attributes that are not numeric ones binned)."""
    infos = {a.name: a for a in numeric_attributes(dataset)}
    num_names = list(infos) if numeric is None else list(numeric)
    table = load(dataset)
    coded = [c for c in table.columns if c not in infos]
    cat_names = coded if categorical is None else list(categorical)
    attrs: list[Attribute] = []
    cols: list[NDArray] = []
    for name in num_names:
        info = infos[name]
        attrs.append(NumericAttribute(name, info.lo, info.hi))
        cols.append(numeric_values(dataset, name))
    for name in cat_names:
        attrs.append(CategoricalAttribute(name, table.domains[name].size))
        cols.append(np.asarray(table.columns[name], dtype=np.int64))
    return tuple(attrs), cols
