"""Wire format v1: self-describing reports, upload records and batches (docs/wire-format.md).

A *report* on the wire is a 12-byte header followed by the protocol's fixed-width body
(:meth:`FrequencyOracle.to_bytes`)::

    magic "LL" (2) | version u8 = 1 | protocol id u8 | parameter fingerprint (8) | body

The fingerprint is the first 8 bytes of SHA-256 over the canonical JSON encoding of the
protocol's :meth:`~FrequencyOracle.spec` (its name and every constructor parameter), so an
aggregator refuses reports of another protocol, of other parameters, of another length or of
an unknown version instead of returning wrong estimates.

An *upload record* is ``report id (16) | epoch u32 big-endian (4) | report``; a binary batch is
the concatenation of records (fixed width per collection), a JSON batch is
``{"reports": [{"id": "<32 hex>", "epoch": int, "report": "<base64>"}]}``.

Everything here is vectorized over reports: a batch is one ``frombuffer`` and one comparison of
its headers; only the error path looks for the first bad item (by bisection).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:  # pragma: no cover
    from longldp.protocols.base import FrequencyOracle

MAGIC = b"LL"
VERSION = 1
HEADER_SIZE = 12
FINGERPRINT_SIZE = 8
ID_SIZE = 16
EPOCH_SIZE = 4
MAX_EPOCH = 2**32 - 1

#: Protocol ids (one byte). Fixed forever: a new protocol takes a new id, never a used one.
#: 14 is RAPPOR with Bloom-filter reports (RAPPOR tuned by budgets is L-SUE, id 7).
PROTOCOL_IDS: dict[str, int] = {
    "GRR": 1,
    "SUE": 2,
    "OUE": 3,
    "BLH": 4,
    "OLH": 5,
    "L-GRR": 6,
    "L-SUE": 7,
    "L-OUE": 8,
    "L-SOUE": 9,
    "L-OSUE": 10,
    "BiLOLOHA": 11,
    "OLOLOHA": 12,
    "dBitFlipPM": 13,
    "RAPPOR": 14,
    "SH": 15,
    "L-SH": 16,
}
_NAMES_BY_ID = {v: k for k, v in PROTOCOL_IDS.items()}


class WireFormatError(ValueError):
    """A batch item is invalid; ``index`` is its position in the batch (None: the whole batch)."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


# ---------------------------------------------------------------------- protocol identity


def protocol_id(proto: FrequencyOracle) -> int:
    """The one-byte id of ``proto``'s protocol in :data:`PROTOCOL_IDS`."""
    try:
        return PROTOCOL_IDS[proto.name]
    except KeyError:
        raise ValueError(
            f"{proto.name}: no wire protocol id is assigned to this protocol; "
            f"assigned: {', '.join(PROTOCOL_IDS)}."
        ) from None


def spec(proto: FrequencyOracle) -> dict[str, Any]:
    """``{"name": ..., "params": {...}}``: the protocol and every constructor parameter.

    Values are normalized (float-typed parameters as floats, NumPy scalars as Python ones,
    validated forms such as a lower-cased ``calibration``), so equal protocols have equal specs.
    """
    params: dict[str, Any] = {}
    for f in dataclasses.fields(proto):  # type: ignore[arg-type]
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


def fingerprint(proto: FrequencyOracle) -> bytes:
    """First 8 bytes of SHA-256 of ``canonical_json(spec(proto))``."""
    return header(proto)[4:]


def header(proto: FrequencyOracle) -> bytes:
    """The 12 bytes every report of ``proto`` starts with (computed once per protocol object,
    which is frozen)."""
    cached = proto.__dict__.get("_wire_header")
    if cached is None:
        digest = hashlib.sha256(canonical_json(spec(proto))).digest()[:FINGERPRINT_SIZE]
        cached = MAGIC + bytes([VERSION, protocol_id(proto)]) + digest
        proto.__dict__["_wire_header"] = cached  # a cache beside the frozen fields
    return cached


def protocol_from_spec(obj: Mapping[str, Any]) -> FrequencyOracle:
    """Rebuild a protocol from :func:`spec` output (e.g. stored by a server as JSON).

    Raises ``ValueError`` for a malformed spec, an unknown protocol or bad parameters.
    """
    from longldp.protocols import protocol  # the registry is the package, a later module

    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise ValueError(
            f"protocol spec: must be an object {{'name': str, 'params': object}}; got {obj!r:.200}."
        )
    params = obj.get("params", {})
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ValueError(f"protocol spec: 'params' must be an object; got {params!r:.200}.")
    extra = sorted(set(obj) - {"name", "params"})
    if extra:
        raise ValueError(
            f"protocol spec: unknown key(s) {', '.join(extra)}; allowed: name, params."
        )
    return protocol(obj["name"], **dict(params))


# ---------------------------------------------------------------------- reports


def wire_size(proto: FrequencyOracle) -> int:
    """Bytes of one report on the wire: header + body."""
    return HEADER_SIZE + proto.report_nbytes


def encode_reports(proto: FrequencyOracle, bodies: ArrayLike) -> bytes:
    """Header + body of each report record (as from ``perturb``), concatenated."""
    rows = proto._encode(np.asarray(bodies))
    out = np.empty((rows.shape[0], HEADER_SIZE + rows.shape[1]), dtype=np.uint8)
    out[:, :HEADER_SIZE] = np.frombuffer(header(proto), dtype=np.uint8)
    out[:, HEADER_SIZE:] = rows
    return out.tobytes()


def split_reports(proto: FrequencyOracle, data: bytes | Sequence[bytes]) -> NDArray[np.uint8]:
    """Rows (n, wire_size) of a concatenation of reports, every header and length checked
    (bodies are checked by :func:`decode_reports`)."""
    blob = _join(data)
    size = wire_size(proto)
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


def decode_reports(proto: FrequencyOracle, data: bytes | Sequence[bytes]) -> NDArray:
    """Report records of wire-format reports; ``ValueError`` naming the first bad item."""
    return decode_rows(proto, split_reports(proto, data), "report")


def decode_rows(proto: FrequencyOracle, rows: NDArray[np.uint8], what: str = "report") -> NDArray:
    """Report records from rows (n, wire_size) whose headers are already checked."""
    width = rows.shape[1] - HEADER_SIZE
    body = _fields(rows, [f"V{width}"], [HEADER_SIZE])["f0"] if width else None
    bodies = (
        np.frombuffer(body.tobytes(), dtype=np.uint8).reshape(-1, width)
        if body is not None
        else np.zeros((rows.shape[0], 0), dtype=np.uint8)
    )
    try:
        return proto._decode(bodies)
    except ValueError:
        # Bisect for the first item whose body does not decode: prefixes are monotone.
        lo, hi = 0, rows.shape[0] - 1
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                proto._decode(bodies[: mid + 1])
                lo = mid + 1
            except ValueError:
                hi = mid
        try:
            proto._decode(bodies[lo : lo + 1])
        except ValueError as item_exc:
            exc = item_exc
        raise WireFormatError(f"{proto.name}: {what} {lo} has an invalid body: {exc}", lo) from None


def _fields(rows: NDArray[np.uint8], formats: list[str], offsets: list[int]) -> NDArray:
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


def check_headers(proto: FrequencyOracle, rows: NDArray[np.uint8], what: str = "report") -> None:
    """Raise :class:`WireFormatError` naming the first row whose header is not ``proto``'s."""
    expected = np.frombuffer(header(proto), dtype=np.uint8)
    if rows.shape[0] == 0:
        return
    # Compare the 12 header bytes as one 8-byte and one 4-byte word per row, read in place
    # through a structured view (no copy); locate the first mismatch only when there is one.
    words = _fields(rows, ["<u8", "<u4"], [0, 8])
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
        other = _NAMES_BY_ID.get(h[3], "unknown")
        why = (
            f"is of protocol id {h[3]} ({other}); this aggregator's protocol {proto.name} "
            f"has id {expected[3]}"
        )
    else:
        why = (
            f"has parameter fingerprint {h[4:].hex()}, not this protocol's "
            f"{bytes(expected[4:]).hex()} ({canonical_json(spec(proto)).decode()})"
        )
    raise WireFormatError(f"{proto.name}: {what} {i} {why}.", i)


# ---------------------------------------------------------------------- upload records


def record_size(proto: FrequencyOracle) -> int:
    """Bytes of one upload record: id + epoch + report."""
    return ID_SIZE + EPOCH_SIZE + wire_size(proto)


def encode_records(
    proto: FrequencyOracle,
    ids: ArrayLike | Sequence[bytes],
    epochs: ArrayLike,
    reports: bytes | Sequence[bytes],
) -> bytes:
    """A binary batch: ``id | epoch (u32 BE) | report`` per item, concatenated.

    ``ids``: n 16-byte ids (bytes each, or a uint8 array (n, 16)); ``epochs``: n integers in
    [0, 2³²); ``reports``: n wire reports (concatenated bytes or a sequence), headers checked.
    """
    rows = split_reports(proto, reports)
    n = rows.shape[0]
    id_rows = _id_rows(ids, n)
    ep = _epochs(epochs, n)
    out = np.empty((n, record_size(proto)), dtype=np.uint8)
    out[:, :ID_SIZE] = id_rows
    out[:, ID_SIZE : ID_SIZE + EPOCH_SIZE] = ep.astype(">u4").view(np.uint8).reshape(n, 4)
    out[:, ID_SIZE + EPOCH_SIZE :] = rows
    return out.tobytes()


def split_records(
    proto: FrequencyOracle, data: bytes | Sequence[bytes]
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8]]:
    """(ids (n, 16) uint8, epochs (n,) int64, reports (n, wire_size) uint8) of a binary batch.

    Every record's report header and the batch length are checked; bodies are checked by
    :func:`decode_records` (or :func:`decode_rows`). Errors name the record index.
    """
    blob = _join(data)
    width = record_size(proto)
    n, rest = divmod(len(blob), width)
    arr = np.frombuffer(blob, dtype=np.uint8, count=n * width).reshape(n, width)
    rows = arr[:, ID_SIZE + EPOCH_SIZE :]
    check_headers(proto, rows, "record")
    if rest:
        raise WireFormatError(
            f"{proto.name}: record {n} is truncated: {rest} bytes where a record has {width} "
            f"({ID_SIZE}-byte id, {EPOCH_SIZE}-byte epoch, {wire_size(proto)}-byte report).",
            n,
        )
    ids = arr[:, :ID_SIZE]
    epochs = np.ascontiguousarray(arr[:, ID_SIZE : ID_SIZE + EPOCH_SIZE]).view(">u4").ravel()
    return ids, epochs.astype(np.int64), rows


def decode_records(
    proto: FrequencyOracle, data: bytes | Sequence[bytes]
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray]:
    """(ids, epochs, report records) of a binary batch, everything checked."""
    ids, epochs, rows = split_records(proto, data)
    return ids, epochs, decode_rows(proto, rows, "record")


def encode_json_batch(
    ids: ArrayLike | Sequence[bytes], epochs: ArrayLike, reports: Sequence[bytes]
) -> dict[str, Any]:
    """``{"reports": [{"id": hex, "epoch": int, "report": base64}, ...]}`` of n wire reports."""
    items = list(reports)
    id_rows = _id_rows(ids, len(items))
    ep = _epochs(epochs, len(items))
    return {
        "reports": [
            {
                "id": bytes(id_rows[i]).hex(),
                "epoch": int(ep[i]),
                "report": base64.b64encode(bytes(items[i])).decode("ascii"),
            }
            for i in range(len(items))
        ]
    }


def json_batch_to_records(proto: FrequencyOracle, obj: Any) -> bytes:
    """The binary batch equivalent to a JSON batch (items checked; errors name the index)."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("reports"), list):
        raise WireFormatError('JSON batch: must be an object {"reports": [...]}.')
    size = wire_size(proto)
    parts: list[bytes] = []
    for i, item in enumerate(obj["reports"]):
        if not isinstance(item, Mapping) or set(item) != {"id", "epoch", "report"}:
            raise WireFormatError(
                f'JSON batch: reports[{i}] must be an object with exactly "id", "epoch", '
                f'"report"; got {item!r:.200}.',
                i,
            )
        rid, ep, rep = item["id"], item["epoch"], item["report"]
        if not isinstance(rid, str) or len(rid) != 2 * ID_SIZE:
            raise WireFormatError(f"JSON batch: reports[{i}].id must be 32 hex digits.", i)
        try:
            id_bytes = bytes.fromhex(rid)
        except ValueError:
            raise WireFormatError(
                f"JSON batch: reports[{i}].id must be 32 hex digits.", i
            ) from None
        if isinstance(ep, bool) or not isinstance(ep, int) or not 0 <= ep <= MAX_EPOCH:
            raise WireFormatError(
                f"JSON batch: reports[{i}].epoch must be an integer in [0, {MAX_EPOCH}].", i
            )
        if not isinstance(rep, str):
            raise WireFormatError(f"JSON batch: reports[{i}].report must be a base64 string.", i)
        try:
            body = base64.b64decode(rep, validate=True)
        except (binascii.Error, ValueError):
            raise WireFormatError(
                f"JSON batch: reports[{i}].report is not valid base64.", i
            ) from None
        if len(body) != size:
            raise WireFormatError(
                f"{proto.name}: record {i}: the report has {len(body)} bytes; a report of this "
                f"collection has {size}.",
                i,
            )
        parts.append(id_bytes + ep.to_bytes(EPOCH_SIZE, "big") + body)
    return b"".join(parts)


# ---------------------------------------------------------------------- helpers


def _join(data: bytes | bytearray | memoryview | Sequence[bytes]) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        raise ValueError("wire: reports must be bytes, not str.")
    return b"".join(bytes(d) for d in data)


def _id_rows(ids: ArrayLike | Sequence[bytes], n: int) -> NDArray[np.uint8]:
    if isinstance(ids, np.ndarray) and ids.dtype == np.uint8:
        arr = ids
    else:
        items = list(ids)  # type: ignore[arg-type]
        if not all(isinstance(x, (bytes, bytearray)) and len(x) == ID_SIZE for x in items):
            raise ValueError(f"wire: every report id must be {ID_SIZE} bytes.")
        arr = np.frombuffer(b"".join(items), dtype=np.uint8).reshape(len(items), ID_SIZE)
    if arr.shape != (n, ID_SIZE):
        raise ValueError(f"wire: 'ids' must be {n} ids of {ID_SIZE} bytes; got shape {arr.shape}.")
    return arr


def _epochs(epochs: ArrayLike, n: int) -> NDArray[np.int64]:
    ep = np.asarray(epochs)
    if ep.shape != (n,) or (n and ep.dtype.kind not in "iu"):
        raise ValueError(f"wire: 'epochs' must be {n} integers; got {ep.dtype} {ep.shape}.")
    if n and (ep.min() < 0 or ep.max() > MAX_EPOCH):
        raise ValueError(f"wire: every epoch must be in [0, {MAX_EPOCH}].")
    return ep.astype(np.int64)


# ---------------------------------------------------------------------- aggregator state

STATE_FORMAT = "longldp.aggregator/1"


def check_state(obj: Any) -> tuple[dict[str, Any], int, NDArray[np.int64]]:
    """(spec, n, support) of a serialized aggregator state, its shape checked."""
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
    if support.size and (support.dtype.kind not in "iu" or support.min() < 0 or support.max() > n):
        raise ValueError("aggregator state: 'support' must hold integers in [0, n].")
    return dict(obj["protocol"]), n, support.astype(np.int64)
