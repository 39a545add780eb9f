"""What a fake user can send: the attack kind of a protocol, derived from its traits.

An attack crafts *reports*, so what it can do depends only on the shape of a protocol's report
and on which values a report supports (docs/math.md §1.1). The protocol's report kind object
(docs/design.md §2.3) decides it (:meth:`longldp.protocols.ReportKind.attack_kind`); two report
kinds need one more public fact:

=========================  ==============  ====================================================
``report_kind`` trait      attack kind     supports v when
=========================  ==============  ====================================================
``symbol``                 ``symbol``      the symbol is v (GRR, L-GRR)
``bits``                   ``unary``       bit v is 1 (SUE, OUE, the UE chains)
``hashed``                 ``hashed``      H(v) = bucket (BLH, OLH, LOLOHA)
``hadamard``               ``hadamard``    popcount(j AND v) mod 2 = bit (SH, L-SH)
``sampled-bits``           ``bucket-bits`` bucket(v) sampled with bit 1 (dBitFlipPM)
``cohort-bits``            ``unary``       only when the estimate is a frequency vector
                                           (``estimates_frequencies``), there is one cohort and
                                           every possible encoding is one-hot: bit v is 1
                                           (RAPPOR-onehot); otherwise refused
``enumerated``             ``subset``      when the enumerated report space is the C(k, ω)
                                           subsets of a fixed size ``omega``: v is in the
                                           subset (SS);
``enumerated``             ``enumerated``  when the report kind lists what each output
                                           supports (``supports``, ``records``): v is in the
                                           output's support set (HR); otherwise refused
=========================  ==============  ====================================================

A protocol whose kind no attack knows raises ``ValueError`` with the reason, never a silent
fallback to another kind: Bloom and boolean RAPPOR estimate per-cohort shares of set bits, not
frequencies of values (:func:`longldp.attacks.apps.promote_string` attacks the Bloom decoder
instead); an enumerated report other than a fixed-size subset is opaque to the attacks. A
protocol added to the registry is classified by its traits alone. docs/attacks.md §1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.protocols import HashFamily, Mechanism

KINDS = ("symbol", "unary", "subset", "hashed", "hadamard", "bucket-bits", "enumerated")
#: Kinds whose report is a set of values given as packed k-bit rows.
BIT_SET_KINDS = ("unary", "subset")


def attack_kind(proto: Any, owner: str = "attacks") -> str:
    """The attack kind of ``proto`` (one of :data:`KINDS`), from its report kind
    (:meth:`longldp.protocols.ReportKind.attack_kind`); ValueError with the reason when no
    attack applies."""
    if not isinstance(proto, Mechanism):
        raise ValueError(f"{owner}: 'proto' must be a protocol object; got {proto!r}.")
    if proto.rounds.planned:  # a fake user would need the server's plan of every epoch
        raise ValueError(
            f"{owner}: {proto.name}'s rounds are planned by the server (rounds 'planned'); the "
            "attacks' engines do not plan them."
        )
    try:
        kind = proto.report_kind.attack_kind(proto)
    except ValueError as err:
        raise ValueError(f"{owner}: {err}") from None
    if kind not in KINDS:
        raise ValueError(
            f"{owner}: report kind {str(proto.report_kind)!r} of '{proto.name}' names attack "
            f"kind {kind!r}; the attacks know {', '.join(KINDS)}."
        )
    return kind


def wrap_unary(proto: Any, packed: NDArray[np.uint8]) -> NDArray[Any]:
    """Packed bit rows as ``proto``'s report records (cohort-bits: cohort 0 and the bits)."""
    empty = proto.empty_records()
    if empty.dtype.names is None:
        return packed
    out = np.zeros(packed.shape[0], dtype=empty.dtype)
    out["bits"] = packed
    return out


def unary_bits(proto: Any, reports: NDArray[Any]) -> NDArray[np.uint8]:
    """The packed bit rows of unary or subset reports (unwraps cohort-bits records)."""
    rec = np.asarray(reports)
    return rec["bits"] if rec.dtype.names else rec


def hash_family(proto: Any) -> HashFamily:
    """The public hash family of a hashed or Hadamard protocol (its report kind's)."""
    family = proto.report_kind.hash_family(proto)
    if family is None:
        raise ValueError(f"attacks: '{proto.name}' reports name no hash function.")
    return family


def hash_range(proto: Any) -> int:
    """g, the number of buckets of a hashed protocol; 2 (one bit) for a Hadamard one."""
    return hash_family(proto).range


def hadamard_rows(proto: Any) -> int:
    """m = 2^⌈log₂ k⌉, the Hadamard protocol's number of rows (its family's size)."""
    size = hash_family(proto).size
    assert size is not None
    return int(size)


def n_buckets(proto: Any) -> int:
    """b, dBitFlipPM's number of buckets (the length of its estimate)."""
    return int(proto.estimate_size)


def sampled_buckets(proto: Any) -> int:
    """d, the buckets each dBitFlipPM user answers (the bits of one report)."""
    return int(proto.report_kind.width(proto))


def subset_size(proto: Any) -> int:
    """ω, the number of values in every report of a subset protocol."""
    return int(proto.omega)
