"""The byte codec of reports: identity (spec, fingerprint, header) and header + body rows.

A private leaf of :mod:`longldp.protocols`: it imports no protocol module, and works on any
object exposing the protocol traits it reads (``name``, ``wire_id``, ``spec()``,
``wire_header``, ``wire_size``) and the two body hooks ``encode_bodies`` / ``decode_bodies``.
The codec role (:class:`longldp.protocols.codec.ReportCodec`) calls it for ``encode_reports``
and ``decode_reports``; the public module
:mod:`longldp.protocols.wire` re-exports it and adds upload records and JSON batches
(docs/wire-format.md).

A report on the wire is a 12-byte header followed by the protocol's fixed-width body::

    magic "LL" (2) | version u8 = 1 | protocol id u8 | parameter fingerprint (8) | body

The fingerprint is the first 8 bytes of SHA-256 over the canonical JSON of the protocol's spec
(its name and every constructor parameter). Everything is vectorized over reports: a batch is
one ``frombuffer`` and one comparison of its headers; only the error path looks for the first
bad item (by bisection).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

MAGIC = b"LL"
VERSION = 1
HEADER_SIZE = 12
FINGERPRINT_SIZE = 8
STATE_FORMAT = "longldp.aggregator/1"

#: Wire id → protocol name of every protocol class defined so far, filled as the classes are
#: created (``Mechanism.__init_subclass__``), which also refuses a reused id. Used only to
#: name a foreign protocol in an error message.
WIRE_NAMES: dict[int, str] = {}


class WireFormatError(ValueError):
    """A batch item is invalid; ``index`` is its position in the batch (None: the whole batch)."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


def claim_wire_id(wire_id: int, name: str) -> None:
    """Record that protocol ``name`` uses ``wire_id``; refuse an id already taken by another."""
    if isinstance(wire_id, bool) or not isinstance(wire_id, int) or not 1 <= wire_id <= 255:
        raise TypeError(f"{name}: 'wire_id' must be an int in [1, 255]; got {wire_id!r}.")
    other = WIRE_NAMES.get(wire_id)
    if other is not None and other != name:
        raise TypeError(f"{name}: wire id {wire_id} is already {other}'s; ids are fixed forever.")
    WIRE_NAMES[wire_id] = name


# ---------------------------------------------------------------------- identity


def spec_of(proto: Any) -> dict[str, Any]:
    """``{"name": ..., "params": {...}}``: the protocol and every constructor parameter.

    Values are normalized (float-typed parameters as floats, NumPy scalars as Python ones,
    validated forms such as a lower-cased ``calibration``), so equal protocols have equal specs.
    """
    params: dict[str, Any] = {}
    for f in dataclasses.fields(proto):
        if f.init:
            params[f.name] = _normalize(getattr(proto, f.name), str(f.type))
    return {"name": proto.name, "params": params}


def _normalize(value: Any, annotation: str) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return float(value) if "float" in annotation and "int" not in annotation else int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        return [_normalize(v, "") for v in value]
    raise ValueError(f"spec: parameter value {value!r} has no canonical JSON form.")


def canonical_json(obj: Any) -> bytes:
    """Keys sorted, no whitespace, ASCII only, floats in shortest round-trip form (``2.0``)."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def header(wire_id: int, spec: Mapping[str, Any]) -> bytes:
    """The 12 bytes every report of the protocol with this id and spec starts with."""
    digest = hashlib.sha256(canonical_json(spec)).digest()[:FINGERPRINT_SIZE]
    return MAGIC + bytes([VERSION, wire_id]) + digest


# ---------------------------------------------------------------------- reports


def encode_reports(proto: Any, records: ArrayLike) -> bytes:
    """Header + body of each report record (as from ``perturb``), concatenated."""
    rows = proto.encode_bodies(np.asarray(records))
    out = np.empty((rows.shape[0], HEADER_SIZE + rows.shape[1]), dtype=np.uint8)
    out[:, :HEADER_SIZE] = np.frombuffer(proto.wire_header, dtype=np.uint8)
    out[:, HEADER_SIZE:] = rows
    return out.tobytes()


def split_reports(proto: Any, data: bytes | Sequence[bytes]) -> NDArray[np.uint8]:
    """Rows (n, wire_size) of a concatenation of reports, every header and length checked
    (bodies are checked by :func:`decode_rows`)."""
    blob = join(data)
    size = proto.wire_size
    n, rest = divmod(len(blob), size)
    rows = np.frombuffer(blob, dtype=np.uint8, count=n * size).reshape(n, size)
    check_headers(proto, rows, "report")
    if rest:
        raise WireFormatError(
            f"{proto.name}: report {n} is truncated: {rest} bytes where a report has {size} "
            f"({HEADER_SIZE}-byte header + {size - HEADER_SIZE}-byte body).",
            n,
        )
    return rows


def decode_reports(proto: Any, data: bytes | Sequence[bytes]) -> NDArray:
    """Report records of wire-format reports; ``ValueError`` naming the first bad item."""
    return decode_rows(proto, split_reports(proto, data), "report")


def decode_rows(proto: Any, rows: NDArray[np.uint8], what: str = "report") -> NDArray:
    """Report records from rows (n, wire_size) whose headers are already checked."""
    width = rows.shape[1] - HEADER_SIZE
    body = fields(rows, [f"V{width}"], [HEADER_SIZE])["f0"] if width else None
    bodies = (
        np.frombuffer(body.tobytes(), dtype=np.uint8).reshape(-1, width)
        if body is not None
        else np.zeros((rows.shape[0], 0), dtype=np.uint8)
    )
    try:
        return proto.decode_bodies(bodies)
    except ValueError:
        # Bisect for the first item whose body does not decode: prefixes are monotone.
        lo, hi = 0, rows.shape[0] - 1
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                proto.decode_bodies(bodies[: mid + 1])
                lo = mid + 1
            except ValueError:
                hi = mid
        try:
            proto.decode_bodies(bodies[lo : lo + 1])
        except ValueError as item_exc:
            exc = item_exc
        raise WireFormatError(f"{proto.name}: {what} {lo} has an invalid body: {exc}", lo) from None


def fields(rows: NDArray[np.uint8], formats: list[str], offsets: list[int]) -> NDArray:
    """A structured view of each row of ``rows`` (n, width) with fields at byte ``offsets``;
    rows are made contiguous first if they are not."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    dtype = np.dtype(
        {
            "names": [f"f{i}" for i in range(len(formats))],
            "formats": formats,
            "offsets": offsets,
            "itemsize": rows.shape[1],
        }
    )
    return rows.reshape(-1).view(dtype)


def check_headers(proto: Any, rows: NDArray[np.uint8], what: str = "report") -> None:
    """Raise :class:`WireFormatError` naming the first row whose header is not ``proto``'s."""
    expected = np.frombuffer(proto.wire_header, dtype=np.uint8)
    if rows.shape[0] == 0:
        return
    # Compare the 12 header bytes as one 8-byte and one 4-byte word per row, read in place
    # through a structured view (no copy); locate the first mismatch only when there is one.
    words = fields(rows, ["<u8", "<u4"], [0, 8])
    if np.all(words["f0"] == expected[:8].view("<u8")[0]) and np.all(
        words["f1"] == expected[8:].view("<u4")[0]
    ):
        return
    bad = np.flatnonzero(np.any(rows[:, :HEADER_SIZE] != expected, axis=1))
    i = int(bad[0])
    h = bytes(rows[i, :HEADER_SIZE])
    if h[:2] != MAGIC:
        why = f"does not start with the magic bytes 'LL' (got {h[:2].hex()})"
    elif h[2] != VERSION:
        why = f"has wire format version {h[2]}; version {VERSION} is the one this reads"
    elif h[3] != expected[3]:
        other = WIRE_NAMES.get(h[3], "unknown")
        why = (
            f"is of protocol id {h[3]} ({other}); this aggregator's protocol {proto.name} "
            f"has id {expected[3]}"
        )
    else:
        why = (
            f"has parameter fingerprint {h[4:].hex()}, not this protocol's "
            f"{bytes(expected[4:]).hex()} ({canonical_json(proto.spec()).decode()})"
        )
    raise WireFormatError(f"{proto.name}: {what} {i} {why}.", i)


def join(data: bytes | bytearray | memoryview | Sequence[bytes]) -> bytes:
    """One bytes object of a bytes-like object or a sequence of them (never a str)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        raise ValueError("wire: reports must be bytes, not str.")
    return b"".join(bytes(d) for d in data)


# ---------------------------------------------------------------------- aggregator state


def check_state(obj: Any) -> tuple[dict[str, Any], int, NDArray]:
    """(spec, n, support) of a serialized aggregator state, its shape checked: counts are
    integers in [0, n]; a numeric mean's sums (floats, docs/math.md (20.3)) finite numbers."""
    if not isinstance(obj, Mapping) or obj.get("format") != STATE_FORMAT:
        raise ValueError(f"aggregator state: must be an object with format {STATE_FORMAT!r}.")
    missing = {"protocol", "fingerprint", "n", "support"} - set(obj)
    if missing:
        raise ValueError(f"aggregator state: missing key(s) {', '.join(sorted(missing))}.")
    n = obj["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"aggregator state: 'n' must be a non-negative integer; got {n!r}.")
    try:
        support = np.asarray(obj["support"])
    except (TypeError, ValueError):
        raise ValueError("aggregator state: 'support' must be a nested list of integers.") from None
    if support.size and support.dtype.kind == "f":
        if not np.all(np.isfinite(support)):
            raise ValueError("aggregator state: 'support' must hold finite numbers.")
        return dict(obj["protocol"]), n, support.astype(np.float64)
    if support.size and (support.dtype.kind not in "iu" or support.min() < 0 or support.max() > n):
        raise ValueError("aggregator state: 'support' must hold integers in [0, n].")
    return dict(obj["protocol"]), n, support.astype(np.int64)
