"""The server's only contact with the wire format: split a batch into records, name the first
bad item, count support of report rows. (Temporary stand-in until the wire module lands.)"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from numpy.typing import NDArray

import longldp as ll
from longldp.protocols import FrequencyOracle

ID_BYTES = 16
EPOCH_BYTES = 4
HEADER = 12


class BadItemError(ValueError):
    """Item ``index`` of a batch is invalid (``message`` says why)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index
        self.message = message


def protocol_from_spec(spec: dict[str, Any]) -> FrequencyOracle:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError("protocol spec must be an object with a 'name' and 'params'.")
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise ValueError("protocol spec 'params' must be an object.")
    return ll.protocol(spec["name"], **params)


def spec_of(proto: FrequencyOracle) -> dict[str, Any]:
    import dataclasses

    return {
        "name": proto.name,
        "params": {f.name: getattr(proto, f.name) for f in dataclasses.fields(proto) if f.init},
    }


def protocol_id(proto: FrequencyOracle) -> int:
    return list(ll.protocols.REGISTRY).index(proto.name.lower()) + 1


def fingerprint(proto: FrequencyOracle) -> bytes:
    return hashlib.sha256(json.dumps(spec_of(proto), sort_keys=True).encode()).digest()[:8]


def header(proto: FrequencyOracle) -> bytes:
    return b"LL" + bytes([1, protocol_id(proto)]) + fingerprint(proto)


def report_size(proto: FrequencyOracle) -> int:
    return HEADER + proto.report_nbytes


def encode_reports(proto: FrequencyOracle, reports: NDArray) -> list[bytes]:
    h = header(proto)
    return [h + b for b in proto.to_bytes(reports)]


def decode_rows(proto: FrequencyOracle, rows: NDArray[np.uint8]) -> NDArray:
    """Report records from rows of wire bytes (headers already checked)."""
    return proto.from_bytes(np.ascontiguousarray(rows[:, HEADER:]).tobytes())


def support_of_rows(proto: FrequencyOracle, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    return np.asarray(proto.support_counts(decode_rows(proto, rows)), dtype=np.int64)


def split_records(
    proto: FrequencyOracle, data: bytes
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8]]:
    """(ids (n, 16), epochs (n,), report rows (n, size)) of a binary batch, or BadItemError."""
    size = report_size(proto)
    width = ID_BYTES + EPOCH_BYTES + size
    n_full, rest = divmod(len(data), width)
    arr = np.frombuffer(data, dtype=np.uint8, count=n_full * width).reshape(n_full, width)
    ids = arr[:, :ID_BYTES]
    epochs = (
        np.ascontiguousarray(arr[:, ID_BYTES : ID_BYTES + EPOCH_BYTES]).view(">u4").ravel()
    ).astype(np.int64)
    rows = arr[:, ID_BYTES + EPOCH_BYTES :]
    expected = np.frombuffer(header(proto), dtype=np.uint8)
    bad = np.flatnonzero(np.any(rows[:, :HEADER] != expected, axis=1))
    if bad.size:
        i = int(bad[0])
        h = bytes(rows[i, :HEADER])
        if h[:2] != b"LL":
            why = "does not start with the magic bytes 'LL'"
        elif h[2] != 1:
            why = f"has wire format version {h[2]}; this server reads version 1"
        elif h[3] != expected[3]:
            why = f"has protocol id {h[3]}; the collection's protocol has id {expected[3]}"
        else:
            why = "has a parameter fingerprint other than the collection's"
        raise BadItemError(i, f"report {why}.")
    try:
        decode_rows(proto, rows)
    except ValueError:
        for i in range(n_full):
            try:
                decode_rows(proto, rows[i : i + 1])
            except ValueError as exc:
                raise BadItemError(i, f"report body is invalid: {exc}") from None
        raise
    if rest:
        raise BadItemError(
            n_full,
            f"record is truncated: {rest} bytes where a record has {width} "
            f"(16-byte id, 4-byte epoch, {size}-byte report).",
        )
    return ids, epochs, rows
