"""google/rappor's file formats, so data collected with its clients can be decoded here.

- params CSV: header ``k,h,m,p,q,f`` (optionally quoted) and one row of values;
- counts CSV: no header, m rows of ``N_j, ones of bit 0, …, ones of bit k−1``;
- map CSV: no header, one row per candidate: the string, then h·m positions
  ``j·k + bit + 1`` (cohort j = 0…m−1, h per cohort, 1-based);
- reports CSV (input of its ``sum_bits.py``): header, rows ``client, cohort, bloom, prr, irr``
  with the IRR printed most significant bit first.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.apps.rappor.decode import check_counts, check_map
from longldp.protocols.rappor import RAPPOR, RapporOneTime, candidate_map

OWNER = "rappor files"
PARAM_NAMES = ["k", "h", "m", "p", "q", "f"]


def read_params(path: str | Path, **options: object) -> RAPPOR:
    """A :class:`RAPPOR` from a params CSV (f = 0, or ``one_time=True``: one-time RAPPOR,
    :class:`RapporOneTime`; other ``options`` go to the constructor)."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    if len(rows) != 2 or [c.strip() for c in rows[0]] != PARAM_NAMES:
        raise ValueError(f"{OWNER}: {path} must hold the header k,h,m,p,q,f and one row of values.")
    try:
        k, h, m = (int(x) for x in rows[1][:3])
        p, q, f = (float(x) for x in rows[1][3:6])
    except ValueError as exc:
        raise ValueError(f"{OWNER}: {path}: bad parameter row {rows[1]} ({exc}).") from None
    if len(rows[1]) != 6:
        raise ValueError(f"{OWNER}: {path}: the parameter row must have 6 values.")
    one_time = bool(options.pop("one_time", f == 0))
    cls = RapporOneTime if one_time else RAPPOR
    return cls(k=k, h=h, m=m, f=f, p=p, q=q, **options)  # type: ignore[arg-type]


def write_params(proto: RAPPOR, path: str | Path) -> None:
    """Write ``proto``'s parameters as google/rappor's params CSV."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(PARAM_NAMES)
        w.writerow([proto.k, proto.h, proto.m, repr(proto.p), repr(proto.q), repr(proto.f)])


def read_counts(path: str | Path, proto: RAPPOR) -> NDArray[np.int64]:
    """The (m, k + 1) counts matrix, checked against ``proto``."""
    try:
        with warnings.catch_warnings():  # an empty file: our error below, not NumPy's warning
            warnings.simplefilter("ignore", UserWarning)
            data = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{OWNER}: {path}: counts must be numbers ({exc}).") from None
    if data.size == 0:
        raise ValueError(f"{OWNER}: {path}: the counts file is empty (want m rows of k + 1).")
    return check_counts(proto, data)


def write_counts(counts: ArrayLike, path: str | Path, proto: RAPPOR) -> None:
    """Write google/rappor's counts CSV (m rows: N_j, then the k bit counts), checked first."""
    c = check_counts(proto, counts)
    np.savetxt(path, c, fmt="%d", delimiter=",")


def read_map(path: str | Path, proto: RAPPOR) -> tuple[list[str], NDArray[np.int64]]:
    """Candidates and their Bloom positions (M, m, h) from a map CSV (duplicates dropped, as
    google/rappor does; an empty string is named "Empty" there and kept as "" here)."""
    names: list[str] = []
    rows: list[list[int]] = []
    seen: set[str] = set()
    width = proto.h * proto.m
    with open(path, newline="") as fh:
        for line, row in enumerate(csv.reader(fh), start=1):
            if not row:
                continue
            if len(row) != width + 1:
                raise ValueError(
                    f"{OWNER}: {path} line {line}: a map row is a string and h·m = {width} "
                    f"positions; got {len(row) - 1}."
                )
            try:
                pos = [int(x) for x in row[1:]]
            except ValueError:
                raise ValueError(
                    f"{OWNER}: {path} line {line}: positions must be integers."
                ) from None
            if row[0] in seen:
                continue
            seen.add(row[0])
            names.append(row[0])
            rows.append(pos)
    if not names:
        raise ValueError(f"{OWNER}: {path} holds no candidates.")
    flat = np.array(rows, dtype=np.int64).reshape(len(names), proto.m, proto.h)
    base = (np.arange(proto.m) * proto.k)[None, :, None]
    bits = flat - 1 - base
    bad = (bits < 0) | (bits >= proto.k)
    if bad.any():
        s, j, _ = np.argwhere(bad)[0]
        raise ValueError(
            f"{OWNER}: {path}: candidate {names[s]!r} names position {int(flat[bad][0])} in "
            f"cohort {j}, i.e. bit {int(bits[bad][0])}; bits must be in [0, k = {proto.k}) "
            f"(positions {j * proto.k + 1}..{(j + 1) * proto.k})."
        )
    return names, check_map(proto, bits, len(names))


def write_map(
    candidates: Sequence[str], path: str | Path, proto: RAPPOR, bloom_map: ArrayLike | None = None
) -> None:
    """google/rappor's map CSV of ``candidates`` (hashed here unless ``bloom_map`` is given)."""
    idx = (
        candidate_map(candidates, proto.h, proto.k, proto.m)
        if bloom_map is None
        else check_map(proto, bloom_map, len(candidates))
    )
    pos = idx + 1 + (np.arange(proto.m) * proto.k)[None, :, None]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        for name, row in zip(candidates, pos.reshape(len(candidates), -1), strict=True):
            w.writerow([name, *row.tolist()])


def read_reports(path: str | Path, proto: RAPPOR) -> NDArray[np.int64]:
    """Sum a reports CSV (client, cohort, bloom, prr, irr; IRR MSB first) into counts."""
    counts = np.zeros((proto.m, proto.k + 1), dtype=np.int64)
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        for line, row in enumerate(reader, start=2):
            if len(row) != 5:
                raise ValueError(f"{OWNER}: {path} line {line}: expected 5 columns.")
            j = int(row[1])
            if not 0 <= j < proto.m:
                raise ValueError(
                    f"{OWNER}: {path} line {line}: unknown cohort {j}; cohorts are in "
                    f"[0, m = {proto.m})."
                )
            irr = row[4].strip()
            if len(irr) != proto.k or set(irr) - {"0", "1"}:
                raise ValueError(
                    f"{OWNER}: {path} line {line}: the IRR must be {proto.k} binary digits."
                )
            counts[j, 0] += 1
            counts[j, 1:] += np.frombuffer(irr[::-1].encode(), dtype=np.uint8) - ord("0")
    return counts
