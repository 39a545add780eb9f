"""The codec role: a mechanism's identity on the wire and its report bytes (docs/wire-format.md).

:class:`ReportCodec` is the public byte API of every mechanism: :meth:`~ReportCodec.spec` (JSON
that rebuilds it), :meth:`~ReportCodec.fingerprint` and :attr:`~ReportCodec.wire_header` (the
12 bytes every report starts with), :meth:`~ReportCodec.encode_reports` /
:meth:`~ReportCodec.decode_reports` (wire reports: header + fixed-width body, every header,
length and body checked). A family supplies the two body hooks:

- :meth:`ReportCodec.encode_bodies`: report records → fixed-width body rows (n, nbytes);
- :meth:`ReportCodec.decode_bodies`: body rows → report records, refusing a bad body with
  ``ValueError``.

The vectorized header and batch logic is the private leaf :mod:`longldp.protocols._codec`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.protocols import _codec


class ReportCodec:
    """Report bytes: see the module docstring for the two hooks a family writes."""

    name: ClassVar[str]
    wire_id: ClassVar[int]

    def spec(self) -> dict[str, Any]:
        """``{"name", "params"}``: JSON that rebuilds this protocol (``protocol_from_spec``)."""
        return _codec.spec_of(self)

    def fingerprint(self) -> bytes:
        """8 bytes: SHA-256 of the canonical JSON :meth:`spec`, truncated."""
        return self.wire_header[4:]

    @functools.cached_property
    def wire_header(self) -> bytes:
        """The 12-byte header of every report of this protocol (docs/wire-format.md §1)."""
        return _codec.header(self.wire_id, self.spec())

    @property
    def wire_size(self) -> int:
        """Bytes of one wire-format report (header + body)."""
        return _codec.HEADER_SIZE + self.report_nbytes

    @functools.cached_property
    def report_nbytes(self) -> int:
        """Bytes of the fixed-width body of one report."""
        me: Any = self
        return self.encode_bodies(me._make_reports(*me._example_payload())).shape[1]

    def encode_reports(self, records: ArrayLike) -> bytes:
        """Wire-format reports (header + body each) of report records, concatenated."""
        return _codec.encode_reports(self, records)

    def decode_reports(self, data: bytes | Sequence[bytes]) -> NDArray:
        """Report records of wire-format reports; every header, length and body is checked and
        the first bad item named (``ValueError``)."""
        return _codec.decode_reports(self, data)

    def empty_records(self) -> NDArray:
        """Zero report records, with their dtype and shape (an empty aggregation)."""
        return self.decode_bodies(np.zeros((0, self.report_nbytes), dtype=np.uint8))

    def check_reports(self, records: ArrayLike) -> NDArray:
        """``records`` as report records of this protocol, every field checked (``ValueError``
        otherwise): what the body codec accepts."""
        return self.decode_bodies(self.encode_bodies(np.asarray(records)))

    # ------------------------------------------------------------------ the hooks
    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        """Fixed-width body rows (n, report_nbytes) of report records (records are checked)."""
        raise NotImplementedError

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        """Report records of body rows; ``ValueError`` for a body no client can send."""
        raise NotImplementedError
