"""Wire format v1: self-describing reports, upload records and batches (docs/wire-format.md).

A plain codec. A *report* is a 12-byte header followed by the protocol's fixed-width body::

    magic "LL" (2) | version u8 = 1 | protocol id u8 | parameter fingerprint (8) | body

(:meth:`~longldp.protocols.codec.ReportCodec.encode_reports` /
:meth:`~longldp.protocols.codec.ReportCodec.decode_reports`; the header, the checks and the
bisection for a bad body are :mod:`longldp.protocols._codec`, re-exported here). The
fingerprint is the first 8 bytes of SHA-256 over the canonical JSON encoding of the protocol's
:meth:`~longldp.protocols.codec.ReportCodec.spec` (its name and every constructor parameter),
so an aggregator refuses reports of another protocol, of other parameters, of another length
or of an unknown version instead of returning wrong estimates. The protocol id is the class trait
``wire_id``; :data:`PROTOCOL_IDS` is read from the registry.

An *upload record* is ``report id (16) | epoch u32 big-endian (4) | report``; a binary batch is
the concatenation of records (fixed width per collection), a JSON batch is
``{"reports": [{"id": "<32 hex>", "epoch": int, "report": "<base64>"}]}``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.protocols._codec import (
    FINGERPRINT_SIZE,
    HEADER_SIZE,
    MAGIC,
    STATE_FORMAT,
    VERSION,
    WireFormatError,
    canonical_json,
    check_headers,
    check_state,
    decode_reports,
    decode_rows,
    encode_reports,
    split_reports,
)
from longldp.protocols._codec import join as _join
from longldp.protocols._registry import PROTOCOL_IDS

if TYPE_CHECKING:  # pragma: no cover
    from longldp.protocols.base import FrequencyOracle

ID_SIZE = 16
EPOCH_SIZE = 4
MAX_EPOCH = 2**32 - 1
#: Random bytes in a report id made by longldp's clients (after the 4-byte epoch).
ID_ENTROPY = ID_SIZE - EPOCH_SIZE

__all__ = [
    "EPOCH_SIZE",
    "FINGERPRINT_SIZE",
    "HEADER_SIZE",
    "ID_ENTROPY",
    "ID_SIZE",
    "MAGIC",
    "MAX_EPOCH",
    "PROTOCOL_IDS",
    "STATE_FORMAT",
    "VERSION",
    "WireFormatError",
    "canonical_json",
    "check_headers",
    "check_state",
    "decode_records",
    "decode_reports",
    "decode_rows",
    "encode_json_batch",
    "encode_records",
    "encode_reports",
    "json_batch_to_records",
    "new_report_id",
    "record_size",
    "split_records",
    "split_reports",
]


# ---------------------------------------------------------------------- upload records


def new_report_id(epoch: int, entropy: bytes) -> bytes:
    """The id longldp's clients give a report of ``epoch``: the epoch (u32 big-endian), then
    :data:`ID_ENTROPY` (12) bytes from the CSPRNG (docs/wire-format.md §4).

    The epoch travels in the upload record anyway, so the prefix tells the server nothing new
    and links no two reports; it places one epoch's reports next to each other in the server's
    index of report ids, so that storing a batch rewrites pages of the current epoch only,
    however long the collection has run (docs/server.md, "Performance"). 96 random bits keep
    ids unique: among 10⁹ reports of one epoch, two share an id with probability below 10⁻¹¹.
    The server accepts any 16 bytes.
    """
    if not 0 <= int(epoch) <= MAX_EPOCH:
        raise ValueError(f"new_report_id: 'epoch' must be in [0, {MAX_EPOCH}]; got {epoch}.")
    if len(entropy) != ID_ENTROPY:
        raise ValueError(
            f"new_report_id: 'entropy' must be {ID_ENTROPY} bytes; got {len(entropy)}."
        )
    return int(epoch).to_bytes(EPOCH_SIZE, "big") + bytes(entropy)


def record_size(proto: FrequencyOracle) -> int:
    """Bytes of one upload record: id + epoch + report."""
    return ID_SIZE + EPOCH_SIZE + proto.wire_size


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
            f"({ID_SIZE}-byte id, {EPOCH_SIZE}-byte epoch, {proto.wire_size}-byte report).",
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
    size = proto.wire_size
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
