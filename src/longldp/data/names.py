"""Real strings with a heavy tail: the pet names of the Seattle pet licences (see DATA.md)."""

from __future__ import annotations

import csv
import hashlib
import io
from importlib import resources

import numpy as np
from numpy.typing import NDArray

PET_NAMES_FILE = "seattle_pet_names.csv"
#: SHA-256 of the bundled file, as written by scripts/extract_data.py.
PET_NAMES_SHA256 = "f98a085925a09f026dac79ed91fe49f6cb3bd786001d3d667afc553cff60b379"


def seattle_pet_names() -> tuple[list[str], NDArray[np.int64]]:
    """The 13,929 distinct names of 52,036 licensed pets (Seattle), most frequent first.

    Returns the names and their counts. Source: City of Seattle pet licences as packaged in the
    R package ``openintro`` (``seattlepets``); provenance and licence in DATA.md.
    """
    raw = resources.files("longldp.data").joinpath("bundled", PET_NAMES_FILE).read_bytes()
    if hashlib.sha256(raw).hexdigest() != PET_NAMES_SHA256:
        raise ValueError(f"{PET_NAMES_FILE}: checksum mismatch (the bundled file was altered).")
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))[1:]
    return [r[0] for r in rows], np.array([int(r[1]) for r in rows], dtype=np.int64)
