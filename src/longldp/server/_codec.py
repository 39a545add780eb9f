"""The server's only contact with the wire format (docs/wire-format.md): split a batch into
checked records naming the first bad item, and count the support of report rows. Everything
here delegates to :mod:`longldp.protocols.wire`; this module only adapts its errors."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.protocols import FrequencyOracle, wire

ID_BYTES = wire.ID_SIZE
EPOCH_BYTES = wire.EPOCH_SIZE
#: Largest cohort an item may carry: the report archive stores cohorts as uint16.
MAX_COHORT = 0xFFFF


class BadItemError(ValueError):
    """Item ``index`` of a batch is invalid (``message`` says why)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index
        self.message = message


def report_size(proto: FrequencyOracle) -> int:
    """Bytes of one wire-format report (header + body)."""
    return proto.wire_size


def support_dtype(proto: FrequencyOracle) -> np.dtype:
    """How a collection's support is stored: little-endian int64 counts, or float64 for a
    numeric mean's sums (docs/math.md (20.3)), read from the protocol's empty support."""
    empty = np.asarray(proto.support_counts(proto.empty_records()))
    return np.dtype("<f8" if empty.dtype.kind == "f" else "<i8")


def support_of_rows(proto: FrequencyOracle, rows: NDArray[np.uint8]) -> NDArray:
    """Support counts of wire-report rows (n, wire_size) whose headers are checked."""
    return np.asarray(
        proto.support_counts(wire.decode_rows(proto, rows)), dtype=support_dtype(proto)
    ).astype(support_dtype(proto).newbyteorder("="))


def split_records(
    proto: FrequencyOracle, data: bytes
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8], NDArray]:
    """(ids (n, 16), epochs (n,), report rows (n, wire_size), decoded report records) of a
    binary batch, every header, length and body checked; :class:`BadItemError` names the first
    bad record. The decoded records are kept: the support counts are computed from them."""
    try:
        ids, epochs, rows = wire.split_records(proto, data)
        records = wire.decode_rows(proto, rows, "record")
    except wire.WireFormatError as exc:
        index = 0 if exc.index is None else exc.index
        raise BadItemError(index, str(exc)) from None
    return ids, epochs, rows, records


def json_records(proto: FrequencyOracle, body: Any) -> tuple[bytes, list[int | None]]:
    """(binary batch, cohorts) of a JSON batch; items may carry an optional ``cohort``."""
    if (
        not isinstance(body, dict)
        or set(body) != {"reports"}
        or not isinstance(body["reports"], list)
    ):
        raise BadItemError(-1, 'the body must be {"reports": [...]}.')
    stripped, cohorts = [], []
    for i, item in enumerate(body["reports"]):
        cohort = None
        if isinstance(item, dict) and "cohort" in item:
            item = dict(item)
            cohort = item.pop("cohort")
            if cohort is not None and (
                isinstance(cohort, bool)
                or not isinstance(cohort, int)
                or not 0 <= cohort <= MAX_COHORT
            ):
                raise BadItemError(
                    i, f"reports[{i}].cohort must be an integer in [0, {MAX_COHORT}]."
                )
        stripped.append(item)
        cohorts.append(cohort)
    try:
        data = wire.json_batch_to_records(proto, {"reports": stripped})
    except wire.WireFormatError as exc:
        raise BadItemError(-1 if exc.index is None else exc.index, str(exc)) from None
    return data, cohorts
