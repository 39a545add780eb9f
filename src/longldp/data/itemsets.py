"""Turn a single-valued `Table` into set-valued data: one item per attribute=value pair.

This is how Adult, Census-Income and Lending Club rows become item sets for set-valued studies
(SVIM, SVSM, GFIM, LDPMiner): the item domain is the disjoint union of the attribute domains, in
attribute order, so item ``offset[a] + v`` means "attribute ``a`` has value ``v``" and is labelled
``"a=label"``. Without exclusions every user holds exactly one item per attribute (fixed set size
``d``). Excluding uninformative values (``capital-gain=0``, ``Not in universe``, ...) removes
those items from the domain and from the sets, which gives variable set sizes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from longldp.data.containers import CODE_DTYPE, INDPTR_DTYPE, Domain, SetData, Table

__all__ = ["table_to_itemsets"]


def table_to_itemsets(
    table: Table,
    attributes: Sequence[str] | None = None,
    exclude: Mapping[str, Iterable[str | int]] | None = None,
) -> SetData:
    """Set-valued view of ``table``: user ``u`` holds the items ``"a=value"`` of its row.

    Parameters
    ----------
    table : Table
        Single-valued data.
    attributes : sequence of str, optional
        Attributes to use, in order (default: all).
    exclude : mapping of str to iterable of (str or int), optional
        Values to drop, per attribute, given by label (str) or code (int). Dropped values are
        removed from the item domain too.

    Returns
    -------
    SetData
        ``n`` sets over the item domain; labels ``"attribute=label"``.

    Raises
    ------
    ValueError
        On an unknown attribute or an excluded value that is not in its domain.
    """
    if not isinstance(table, Table):
        raise ValueError(f"table must be a Table, got {type(table).__name__}")
    attrs = list(table.attributes if attributes is None else attributes)
    unknown = [a for a in attrs if a not in table.columns]
    if unknown:
        raise ValueError(f"unknown attributes {unknown}; attributes are {list(table.attributes)}")
    exclude = dict(exclude or {})
    unknown = [a for a in exclude if a not in attrs]
    if unknown:
        raise ValueError(f"exclude names attributes that are not used: {unknown}")

    # global item id of each (attribute, code), -1 for an excluded value
    labels: list[str] = []
    maps: list[np.ndarray] = []
    for a in attrs:
        dom = table.domains[a]
        drop = np.zeros(dom.size, dtype=bool)
        for v in exclude.get(a, ()):
            code = v if isinstance(v, int | np.integer) else dom.code(v)
            if not 0 <= int(code) < dom.size:
                raise ValueError(f"excluded code {code} is outside the domain of {a!r}")
            drop[int(code)] = True
        ids = np.full(dom.size, -1, dtype=np.int64)
        keep = np.flatnonzero(~drop)
        ids[keep] = len(labels) + np.arange(keep.size)
        labels.extend(f"{a}={dom.label(int(c))}" for c in keep)
        maps.append(ids)

    n = table.n
    if not attrs:
        return SetData(
            np.zeros(n + 1, dtype=INDPTR_DTYPE),
            np.zeros(0, dtype=CODE_DTYPE),
            Domain(0),
            table.name,
        )
    items = np.stack([m[table[a]] for a, m in zip(attrs, maps, strict=True)], axis=1)
    present = items >= 0
    indptr = np.zeros(n + 1, dtype=INDPTR_DTYPE)
    np.cumsum(present.sum(axis=1), out=indptr[1:])
    # ids increase with the attribute order, so each row is already sorted
    return SetData(indptr, items[present].astype(CODE_DTYPE), Domain.of(labels), table.name)
