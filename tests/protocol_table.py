"""The parameter table shared by the statistical tests: every protocol at a small k."""

from __future__ import annotations

import numpy as np

K = 6
#: A skewed true distribution with one absent value (f = 0 exercises V*).
F = np.array([0.45, 0.25, 0.15, 0.10, 0.05, 0.0])

#: name -> (registry name, parameters): every protocol at a small k.
PROTOCOLS: dict[str, tuple[str, dict]] = {
    "GRR": ("GRR", {"eps": 1.0}),
    "SUE": ("SUE", {"eps": 1.0}),
    "OUE": ("OUE", {"eps": 1.0}),
    "BLH": ("BLH", {"eps": 1.0}),
    "OLH": ("OLH", {"eps": 1.0}),
    "SH": ("SH", {"eps": 1.0}),  # Hadamard rows as the hash family, m = 8
    "L-GRR-exact": ("L-GRR", {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "exact"}),
    "L-GRR-paper": ("L-GRR", {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "paper"}),
    "L-SUE": ("L-SUE", {"eps_perm": 2.0, "eps_1": 1.0}),
    "L-OUE": ("L-OUE", {"eps_perm": 2.0, "eps_1": 1.0}),
    "L-SOUE": ("L-SOUE", {"eps_perm": 2.0, "eps_1": 1.0}),
    "L-OSUE": ("L-OSUE", {"eps_perm": 2.0, "eps_1": 1.0}),
    "BiLOLOHA": ("BiLOLOHA", {"eps_perm": 2.0, "eps_1": 1.0}),
    "OLOLOHA": ("OLOLOHA", {"eps_perm": 2.0, "eps_1": 1.0}),  # g = 4
    "L-SH": ("L-SH", {"eps_perm": 2.0, "eps_1": 1.0}),
    "OLOLOHA-paper": ("OLOLOHA", {"eps_perm": 2.0, "eps_1": 1.0, "calibration": "paper"}),
    "dBitFlipPM-d1": ("dBitFlipPM", {"eps_perm": 2.0, "d": 1}),
    "dBitFlipPM-d3": ("dBitFlipPM", {"eps_perm": 2.0, "d": 3}),
    "RAPPOR-onehot": (
        "RAPPOR",
        {"h": 1, "m": 1, "f": 0.5, "p": 0.25, "q": 0.75, "encoder": "onehot"},
    ),
}
IDS = list(PROTOCOLS)
