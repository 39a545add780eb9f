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
