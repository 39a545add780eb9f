"""How much memory a collection needs on this server, from its protocol's own sizes.

A collection is refused at creation when the peak working memory of one request on it (an
ingest at the server's limits, or an estimate) exceeds the server's budget
(``Limits.max_collection_bytes``), instead of being created and then failing every ingest
(docs/server.md, "Bounds"). The sizes come from the protocol object: ``support_shape`` (the
support counts stored per epoch), ``estimate_shape``, ``wire_size``, and its report kind's
hash family says how ``support_counts`` works (local hashing: the family's size, its range g
and k; Hadamard rows: the m rows), so a registered protocol is sized by its traits, never by a
list of names. Each term is an upper bound of what the code in :mod:`longldp.server.service` and
the protocol's ``support_counts`` allocate:

- **body**: the request body, its chunks and the split id and report arrays: 3 × body bytes;
- **decoded reports**: a wire field widens at most 8-fold when decoded (bits to bytes in the
  unary encodings, one-byte buckets to int64), so at most 8 × wire_size per report, for as
  many reports as the body and the batch limit allow;
- **support counting**, by report kind: local hashing with a public pool of m hash functions
  builds an (m, k) table of hashes, its gather and the per-function bucket histogram (m, g):
  3·8·m·k + 8·m·g bytes; per-user hashing works in blocks of 2^17 hash evaluations:
  3·8·max(k, 2^17); Hadamard rows take a (row, bit) histogram and one fast Walsh–Hadamard
  transform of length m: 4·8·m; every other kind sums the decoded reports into a table of the
  support's shape and its per-row temporaries: 2·8·|support|;
- **epochs**: each epoch a request touches is read, added to and written back (3 copies of
  the support counts, 8 bytes per cell), for at most ``max_epochs_per_request`` epochs;
- **an estimate**: the support counts (each count row of the epoch, and their sum) and about
  ten float64 arrays of the estimate's shape
  (estimate, raw, SE, bounds, plug-in, variance and post-processing temporaries), plus its JSON
  answer, at most ``max_answer_values`` values of five numbers, each :data:`ANSWER_NUMBER`
  bytes at the peak (a Python float, its list slots, the JSON encoder's piece and the text);
- **a request's fixed part**: :data:`REQUEST_OVERHEAD` for the interpreter objects of one
  request that do not grow with the protocol (rows, dictionaries, the ORM's statements).

tests/test_server_protocols.py measures, with ``tracemalloc``, an ingest at the server's limits
and an estimate for every registered protocol and checks each stays within its bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from longldp.protocols import FrequencyOracle, wire

CELL = 8  # bytes of an int64 support count or a float64
#: Hash evaluations of one block of per-user hashing (lh.py's support_counts).
HASH_BLOCK = 1 << 17
#: Bytes of one number of a JSON answer at the peak of building it (measured about 120).
ANSWER_NUMBER = 160
#: Interpreter objects of one request that do not grow with the protocol (measured < 64 KiB).
REQUEST_OVERHEAD = 1 << 20


@dataclass(frozen=True)
class Footprint:
    """Bytes a collection needs: per epoch stored, and at peak for one request."""

    support_bytes: int  # stored per epoch (all its count rows)
    ingest_bytes: int
    estimate_bytes: int

    @property
    def peak_bytes(self) -> int:
        """The larger of an ingest's and an estimate's working memory."""
        return max(self.ingest_bytes, self.estimate_bytes)

    def words(self) -> str:
        """The footprint in words, for an error message or the collection's description."""
        return (
            f"{_mib(self.support_bytes)} of support counts per epoch, "
            f"{_mib(self.ingest_bytes)} to ingest one request, "
            f"{_mib(self.estimate_bytes)} to answer one estimate"
        )


def footprint(
    proto: FrequencyOracle,
    *,
    max_body_bytes: int,
    max_batch: int,
    max_epochs_per_request: int,
    max_answer_values: int,
    count_shards: int = 1,
) -> Footprint:
    """The memory ``proto``'s collection needs under the server's request limits, its counts
    split over ``count_shards`` rows per epoch (an estimate reads and sums them all)."""
    support = CELL * math.prod(proto.support_shape)
    record = wire.ID_SIZE + wire.EPOCH_SIZE + proto.wire_size
    per_request = min(max_batch, max_body_bytes // record + 1)
    decoded = per_request * 8 * proto.wire_size
    ingest = REQUEST_OVERHEAD + 3 * max_body_bytes + decoded + _counting_bytes(proto)
    ingest += 3 * support * min(max_epochs_per_request, per_request)
    values = math.prod(proto.estimate_shape)
    estimate = REQUEST_OVERHEAD + (count_shards + 1) * support + 10 * CELL * values
    estimate += 5 * ANSWER_NUMBER * min(values, max_answer_values)
    return Footprint(count_shards * support, ingest, estimate)


#: Python objects per byte of a parsed JSON body at most (dicts, strings, ints of its items).
JSON_OBJECT_FACTOR = 24


def ingest_request_bytes(
    proto: FrequencyOracle,
    body_bytes: int,
    *,
    max_batch: int,
    max_epochs_per_request: int,
    json_body: bool,
) -> int:
    """The working memory of one ingest request of ``body_bytes``: the ingest term of
    :func:`footprint` for that body, plus the parsed objects of a JSON body (the admission
    ticket of the request, :mod:`longldp.server.admission`)."""
    need = footprint(
        proto,
        max_body_bytes=max(1, body_bytes),
        max_batch=max_batch,
        max_epochs_per_request=max_epochs_per_request,
        max_answer_values=1,
    ).ingest_bytes
    return need + (JSON_OBJECT_FACTOR * body_bytes if json_body else 0)


def json_item_bytes(proto: FrequencyOracle) -> int:
    """The longest compact JSON item of ``proto``'s collection, ``{"id": "<32 hex>", "epoch":
    4294967295, "report": "<base64>", "cohort": 65535}``, doubled for whitespace: a JSON body
    is refused by its length above ``max_batch`` such items (it would hold more items than a
    batch may)."""
    b64 = 4 * ((proto.wire_size + 2) // 3)
    compact = len('{"id": "", "epoch": 4294967295, "report": "", "cohort": 65535}, ') + 32 + b64
    return 2 * compact


def _counting_bytes(proto: Any) -> int:
    """Working memory of ``support_counts`` beyond its input, by the protocol's report kind
    (see the module docstring)."""
    kind = proto.report_kind
    family = kind.hash_family(proto)
    if family is None:
        return 2 * CELL * math.prod(proto.support_shape)
    if kind == "hadamard":  # the transform over the m rows
        return 4 * CELL * int(family.size)
    if family.size is not None:  # a public pool: its (pool × k) table and bucket histograms
        return 3 * CELL * int(family.size) * proto.k + CELL * int(family.size) * family.range
    return 3 * CELL * max(proto.k, HASH_BLOCK)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"
