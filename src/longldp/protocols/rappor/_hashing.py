"""RAPPOR's Bloom-filter hashing and bit helpers (google/rappor's Python client).

Hashing is "rappor-md5-1byte": MD5 of the cohort as 4 bytes big-endian followed by the UTF-8
value; hash i is digest byte i mod k (h ≤ 16, k ≤ 256). Bit rows are packed big-bit-order
(bit 0 is the most significant bit of the first byte), as ``numpy.packbits``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Largest cohort the report body carries (u16).
MAX_COHORTS = 1 << 16


def as_bytes(owner: str, value: Any) -> bytes:
    """A value as bytes: bytes as is, str as UTF-8; anything else is refused."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"{owner}: values must be str (UTF-8) or bytes; got {value!r}.")


def bloom_bits(value: str | bytes, cohort: int, h: int, k: int) -> tuple[int, ...]:
    """The h Bloom bit positions of ``value`` in ``cohort`` (google/rappor's Python client).

    MD5(cohort as 4 bytes big-endian ‖ value); hash i = digest byte i mod k. Positions may
    repeat (then the filter has fewer than h ones).
    """
    digest = hashlib.md5(struct.pack(">L", cohort) + as_bytes("RAPPOR", value)).digest()
    return tuple(digest[i] % k for i in range(h))


def bloom_indices(
    values: Sequence[str | bytes], cohorts: ArrayLike, h: int, k: int
) -> NDArray[np.int64]:
    """Bloom positions for many (value, cohort) pairs, shape (n, h); one MD5 per distinct pair."""
    inv, table = bloom_pairs(values, cohorts, h, k)
    return table[inv]


def bloom_pairs(
    values: Sequence[str | bytes], cohorts: ArrayLike, h: int, k: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(index of each row's distinct (value, cohort) pair, (P, h) positions of the P pairs)."""
    coh = np.asarray(cohorts, dtype=np.int64)
    codes, uniq = value_codes(values)
    pair = codes * MAX_COHORTS + coh
    upairs, inv = np.unique(pair, return_inverse=True)
    table = np.array(
        [bloom_bits(uniq[int(p // MAX_COHORTS)], int(p % MAX_COHORTS), h, k) for p in upairs],
        dtype=np.int64,
    ).reshape(-1, h)
    return inv.ravel(), table


def candidate_map(candidates: Sequence[str | bytes], h: int, k: int, m: int) -> NDArray[np.int64]:
    """Bloom positions of every candidate in every cohort, shape (M, m, h) (M·m MD5s)."""
    prefixes = [struct.pack(">L", j) for j in range(m)]
    md5 = hashlib.md5
    digests = b"".join(
        md5(pre + b).digest()
        for b in (as_bytes("RAPPOR", c) for c in candidates)
        for pre in prefixes
    )
    raw = np.frombuffer(digests, dtype=np.uint8).reshape(len(candidates), m, 16)
    return (raw[:, :, :h].astype(np.int64)) % k


def value_codes(values: Sequence[str | bytes]) -> tuple[NDArray[np.int64], list[bytes]]:
    """Integer codes of values (by their UTF-8 bytes) and the distinct byte strings.

    Arrays of str or bytes (and object arrays of one of them) are coded by ``np.unique`` (no
    Python loop over values); only the distinct values are converted one by one.
    """
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind == "O":
        try:  # noqa: SIM105  (all str or all bytes: a fixed-width array sorts in C)
            arr = np.asarray(arr.tolist())
        except (UnicodeError, ValueError):
            pass
    if arr.ndim == 1 and arr.dtype.kind in "USO":
        try:
            uniq, inv = np.unique(arr, return_inverse=True)
        except TypeError:  # mixed types in an object array
            uniq = None
        if uniq is not None:
            distinct = [as_bytes("RAPPOR", v) for v in uniq.tolist()]
            if len(set(distinct)) == len(distinct):  # str and bytes forms of one value differ
                return inv.ravel().astype(np.int64), distinct
    seen: dict[bytes, int] = {}
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        b = as_bytes("RAPPOR", v)
        codes[i] = seen.setdefault(b, len(seen))
    return codes, list(seen)


def pack_indices(idx: NDArray[np.int64], k: int) -> NDArray[np.uint8]:
    """Packed rows with ones at the given positions (row i: idx[i, :])."""
    bits = np.zeros((idx.shape[0], k), dtype=bool)
    bits[np.arange(idx.shape[0])[:, None], idx] = True
    return np.packbits(bits, axis=1)


def bits_to_int(packed: ArrayLike, k: int) -> int:
    """One packed k-bit row as google/rappor's integer (bit i has weight 2^i)."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8).ravel(), count=k)
    return int(sum(1 << i for i in np.flatnonzero(bits)))


def int_to_bits(x: int, k: int) -> NDArray[np.uint8]:
    """Inverse of :func:`bits_to_int`: packed row (⌈k/8⌉ bytes) of a google/rappor integer."""
    if x < 0 or x >= 1 << k:
        raise ValueError(f"RAPPOR: the integer must be in [0, 2^{k}); got {x}.")
    bits = np.array([(x >> i) & 1 for i in range(k)], dtype=bool)
    return np.packbits(bits)
