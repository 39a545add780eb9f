"""Real strings with a heavy tail: Seattle pet names and English word frequencies (DATA.md)."""

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


WORDS_FILE = "english_words.csv"
#: SHA-256 of the bundled file, as written by scripts/extract_data.py (--only-words).
WORDS_SHA256 = "4b15e1477f242febc4370bfc0e7f6949bf5de26ef9777d1ec57e70f8a53d3031"


def english_words() -> tuple[list[str], NDArray[np.int64]]:
    """The 10,000 most frequent English words of wordfreq 3.1.1, most frequent first.

    Returns the words and their frequencies per billion words (a Zipf-like distribution over
    real strings, for the heavy-hitter studies, docs/heavy_hitters.md). Source: the ``small``
    English list of the PyPI package ``wordfreq`` (data CC BY-SA 4.0); provenance in DATA.md.
    """
    raw = resources.files("longldp.data").joinpath("bundled", WORDS_FILE).read_bytes()
    if hashlib.sha256(raw).hexdigest() != WORDS_SHA256:
        raise ValueError(f"{WORDS_FILE}: checksum mismatch (the bundled file was altered).")
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))[1:]
    return [r[0] for r in rows], np.array([int(r[1]) for r in rows], dtype=np.int64)
