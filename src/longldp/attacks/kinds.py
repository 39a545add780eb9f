"""What a fake user can send: the attack kind of a protocol, derived from its traits.

An attack crafts *reports*, so what it can do depends only on the shape of a protocol's report
and on which values a report supports (docs/math.md §1.1). The protocol trait ``report_kind``
(docs/design.md §2.1) decides it; two report kinds need one more public fact:

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
``enumerated``             ``subset``      only when the enumerated report space is the
                                           C(k, ω) subsets of a fixed size ``omega``: v is in
                                           the subset (SS); otherwise refused
=========================  ==============  ====================================================

A protocol whose kind no attack knows raises ``ValueError`` with the reason, never a silent
fallback to another kind: Bloom and boolean RAPPOR estimate per-cohort shares of set bits, not
frequencies of values (:func:`longldp.attacks.apps.promote_string` attacks the Bloom decoder
instead); an enumerated report other than a fixed-size subset is opaque to the attacks. A
protocol added to the registry is classified by its traits alone. docs/attacks.md §1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.protocols import FrequencyOracle
from longldp.protocols.base import ReportKind

KINDS = ("symbol", "unary", "subset", "hashed", "hadamard", "bucket-bits")
#: Kinds whose report is a set of values given as packed k-bit rows.
BIT_SET_KINDS = ("unary", "subset")

#: Report kinds (the protocol trait) that alone decide the attack kind.
BY_REPORT_KIND: dict[ReportKind, str] = {
    ReportKind.SYMBOL: "symbol",
    ReportKind.BITS: "unary",
    ReportKind.HASHED: "hashed",
    ReportKind.HADAMARD: "hadamard",
    ReportKind.SAMPLED_BITS: "bucket-bits",
}


def _cohort_bits_kind(proto: FrequencyOracle, owner: str) -> str:
    """RAPPOR-style (cohort, bits) reports: attackable as unary iff one-hot, one cohort."""
    if not proto.estimates_frequencies:
        raise ValueError(
            f"{owner}: '{proto.name}' estimates, per cohort, the share of clients whose encoded "
            "bit is set (estimates_frequencies is False), not a frequency vector over values, "
            "so a gain on target values is undefined; attack RAPPOR's string decoder with "
            "longldp.attacks.apps.promote_string."
        )
    encodings = proto.possible_encodings()  # type: ignore[attr-defined]
    if int(getattr(proto, "m", 1)) != 1 or not np.array_equal(
        encodings, np.eye(proto.k, dtype=bool)
    ):
        raise ValueError(
            f"{owner}: '{proto.name}' reports cohort bits whose encoding is not one-hot in one "
            "cohort; no attack knows which values such a report supports."
        )
    return "unary"


def _enumerated_kind(proto: FrequencyOracle, owner: str) -> str:
    """An enumerated report space: attackable as ``subset`` iff it is the ω-subsets of [0, k)."""
    omega = getattr(proto, "omega", None)
    if (
        isinstance(omega, int)
        and 1 <= omega < proto.k
        and proto.report_space_size() == math.comb(proto.k, omega)
    ):
        return "subset"
    raise ValueError(
        f"{owner}: '{proto.name}' has an enumerated report space that is not the subsets of a "
        "fixed size 'omega' of the domain; its reports are opaque to the attacks (no attack "
        "knows which values they support)."
    )


def attack_kind(proto: FrequencyOracle, owner: str = "attacks") -> str:
    """The attack kind of ``proto`` (one of :data:`KINDS`) from its traits; ValueError with
    the reason when no attack applies."""
    if not isinstance(proto, FrequencyOracle):
        raise ValueError(f"{owner}: 'proto' must be a protocol object; got {proto!r}.")
    rk = proto.report_kind
    if rk in BY_REPORT_KIND:
        return BY_REPORT_KIND[rk]
    if rk == ReportKind.COHORT_BITS:
        return _cohort_bits_kind(proto, owner)
    if rk == ReportKind.ENUMERATED:
        return _enumerated_kind(proto, owner)
    raise ValueError(
        f"{owner}: no attack knows report kind {str(rk)!r} of '{proto.name}'; known: "
        f"{', '.join(str(k) for k in (*BY_REPORT_KIND, ReportKind.COHORT_BITS))} and "
        "fixed-size subsets."
    )


def wrap_unary(proto: FrequencyOracle, packed: NDArray[np.uint8]) -> NDArray[Any]:
    """Packed bit rows as ``proto``'s report records (cohort-bits: cohort 0 and the bits)."""
    if proto.report_kind != ReportKind.COHORT_BITS:
        return packed
    out = np.zeros(packed.shape[0], dtype=proto.report_dtype)  # type: ignore[attr-defined]
    out["bits"] = packed
    return out


def unary_bits(proto: FrequencyOracle, reports: NDArray[Any]) -> NDArray[np.uint8]:
    """The packed bit rows of unary or subset reports (unwraps cohort-bits records)."""
    rec = np.asarray(reports)
    return rec["bits"] if rec.dtype.names else rec


def hash_range(proto: FrequencyOracle) -> int:
    """g, the number of buckets of a hashed protocol; 2 (one bit) for a Hadamard one."""
    if proto.report_kind == ReportKind.HADAMARD:
        return 2
    return int(proto.g)  # type: ignore[attr-defined]


def hadamard_rows(proto: FrequencyOracle) -> int:
    """m = 2^⌈log₂ k⌉, the Hadamard protocol's number of rows."""
    return int(proto.m)  # type: ignore[attr-defined]


def n_buckets(proto: FrequencyOracle) -> int:
    """b, dBitFlipPM's number of buckets (the length of its estimate)."""
    return int(proto.estimate_size)


def sampled_buckets(proto: FrequencyOracle) -> int:
    """d, the buckets each dBitFlipPM user answers."""
    return int(proto.d)  # type: ignore[attr-defined]


def subset_size(proto: FrequencyOracle) -> int:
    """ω, the number of values in every report of a subset protocol."""
    return int(proto.omega)  # type: ignore[attr-defined]
