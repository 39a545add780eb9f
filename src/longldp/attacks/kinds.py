"""What a fake user can send: the report kind of a protocol, read from its public behaviour.

An attack crafts *reports*, so what it can do depends only on the shape of a protocol's report
and on which values a report supports (docs/math.md §1.1). Five kinds cover the registry:

==============  =======================================  ======================================
kind            report                                   supports v when
==============  =======================================  ======================================
``symbol``      one symbol y of [0, k)                   y = v (GRR, L-GRR)
``unary``       k bits, bit-packed                       bit v is 1 (SUE, OUE, the UE chains,
                                                         RAPPOR with the one-hot encoder)
``hashed``      (hash seed or pool index, bucket)        H(v) = bucket (BLH, OLH, LOLOHA)
``hadamard``    (Hadamard row j, bit)                    popcount(j AND v) mod 2 = bit (SH, L-SH)
``bucket-bits`` d sampled buckets and d bits             bucket j sampled with bit 1
                                                         (dBitFlipPM; its estimate is per bucket)
==============  =======================================  ======================================

RAPPOR with the Bloom encoder reports Bloom bits of strings, not values: frequency attacks do
not apply to it (:func:`longldp.attacks.apps.promote_string` attacks its decoder instead).

The kind is read from a protocol's own report records (one report of a one-user population),
never from a list of protocol names, so a protocol added to the registry is classified by what
it sends. docs/attacks.md §1.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.protocols import FrequencyOracle

KINDS = ("symbol", "unary", "hashed", "hadamard", "bucket-bits")


@functools.lru_cache(maxsize=256)
def _kind_of(proto: FrequencyOracle) -> str:
    traits = getattr(proto, "report_kind", None)  # a protocol may declare it (design §2)
    if isinstance(traits, str) and traits in KINDS:
        return traits
    if getattr(proto, "encoder", "onehot") != "onehot":  # RAPPOR's Bloom or boolean encoders
        return "bloom"
    example = proto.perturb(np.zeros(1, dtype=np.int64), proto.new_memo(1), rng=0)
    rec = np.asarray(example)
    names = rec.dtype.names or ()
    if not names and np.issubdtype(rec.dtype, np.integer) and rec.ndim == 1:
        return "symbol"
    if not names and rec.dtype == np.uint8 and rec.ndim == 2:
        return "unary"
    if set(names) == {"hash_id", "bucket"}:
        return "hadamard" if hasattr(proto, "row_sums") else "hashed"
    if set(names) == {"buckets", "bits"}:
        return "bucket-bits"
    if set(names) == {"cohort", "bits"}:
        if getattr(proto, "encoder", None) == "onehot":
            return "unary"
        return "bloom"
    return "unknown"


def report_kind(proto: FrequencyOracle, owner: str = "attacks") -> str:
    """The report kind of ``proto`` (one of :data:`KINDS`); ValueError if no attack applies."""
    if not isinstance(proto, FrequencyOracle):
        raise ValueError(f"{owner}: 'proto' must be a protocol object; got {proto!r}.")
    kind = _kind_of(proto)
    if kind == "bloom":
        raise ValueError(
            f"{owner}: '{proto.name}' with the Bloom encoder reports strings' Bloom bits, so "
            "frequency attacks do not apply; use longldp.attacks.apps.promote_string."
        )
    if kind not in KINDS:
        raise ValueError(f"{owner}: no attack knows the reports of '{proto.name}'.")
    return kind


def wrap_unary(proto: FrequencyOracle, packed: NDArray[np.uint8]) -> NDArray[Any]:
    """Packed bit rows as ``proto``'s report records (RAPPOR one-hot: cohort 0 and the bits)."""
    dtype = getattr(proto, "report_dtype", None)
    if dtype is None or getattr(proto, "encoder", None) != "onehot":
        return packed
    out = np.zeros(packed.shape[0], dtype=dtype)
    out["bits"] = packed
    return out


def unary_bits(proto: FrequencyOracle, reports: NDArray[Any]) -> NDArray[np.uint8]:
    """The packed bit rows of unary reports (unwraps RAPPOR's records)."""
    rec = np.asarray(reports)
    return rec["bits"] if rec.dtype.names else rec


def hash_range(proto: FrequencyOracle) -> int:
    """g, the number of buckets of a hashed or Hadamard protocol (Hadamard: 2)."""
    return int(getattr(proto, "g", 2))


def hadamard_rows(proto: FrequencyOracle) -> int:
    """m = 2^⌈log₂ k⌉, the Hadamard protocol's number of rows."""
    return int(proto.m)  # type: ignore[attr-defined]


def n_buckets(proto: FrequencyOracle) -> int:
    """b, dBitFlipPM's number of buckets (the length of its estimate)."""
    return int(proto.estimate_size)


def sampled_buckets(proto: FrequencyOracle) -> int:
    """d, the buckets each dBitFlipPM user answers."""
    return int(proto.d)  # type: ignore[attr-defined]
