"""The parameter table shared by the statistical tests: every registered frequency oracle at a
small k, derived from the registry's test parameters (tests/registry_cases.py)."""

from __future__ import annotations

import numpy as np

from registry_cases import all_ids

K = 6
#: A skewed true distribution with one absent value (f = 0 exercises V*).
F = np.array([0.45, 0.25, 0.15, 0.10, 0.05, 0.0])

#: case id -> (registry name, parameters): every registered protocol whose estimate is a
#: frequency vector (the ``estimates_frequencies`` trait), at each of its test parameters.
PROTOCOLS: dict[str, tuple[str, dict]] = {
    cid: (cls.name, params) for cid, (cls, params) in all_ids().items() if cls.estimates_frequencies
}
IDS = list(PROTOCOLS)


def table_ids(where=None) -> list[str]:
    """The case ids of the table whose class passes ``where`` (a trait filter)."""
    from longldp.protocols import get_protocol_class

    return [
        cid
        for cid, (name, _) in PROTOCOLS.items()
        if where is None or where(get_protocol_class(name))
    ]


def representatives(where=None) -> list[str]:
    """One case id per report kind (the first registered) among those passing ``where``: for
    tests too costly to run on every protocol, every kind of report is still exercised."""
    from longldp.protocols import get_protocol_class

    seen: dict[str, str] = {}
    for cid in table_ids(where):
        seen.setdefault(str(get_protocol_class(PROTOCOLS[cid][0]).report_kind), cid)
    return list(seen.values())
