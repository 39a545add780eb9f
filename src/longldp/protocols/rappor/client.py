"""RAPPOR's round-1 (PRR) sources for the one client path, and its client factory.

A RAPPOR client is the generic :class:`~longldp.protocols.client.Client` (a permanent cohort, a
memoized PRR per distinct encoding, a fresh IRR per report); ``proto.client(prr_source=…)``
chooses where the PRR comes from:

- ``"hmac"`` (:class:`RapporPrf`): a PRF of a device secret and the encoded bits,
  :class:`~longldp.protocols._rng.HmacRandom` keyed by the secret with context
  0x01 ‖ len(metric) ‖ metric ‖ cohort u16 ‖ encoding bytes, one 53-bit uniform u per bit:
  bit = 1 if u < f/2, 0 if u < f, else the encoded bit. A client that loses its memo
  reproduces the same PRR, so no averaging is possible.
- ``"table"`` (:class:`~longldp.protocols.client.DrawnRound1`): drawn from ``rng`` once per
  encoding and kept in the memo (``client.export_memo()`` / ``memo=`` persist it).
- ``"rappor-py"`` (:class:`RapporPy`): byte-exact google/rappor Python client (k ≤ 32):
  HMAC-SHA256(secret, Bloom integer as 4 bytes big-endian); digest byte i gives a fair coin
  (low bit) and a noise decision (upper 7 bits < 128·f), so the realized f is ⌈128f⌉/128
  (:meth:`RapporPy.realized_f`).

The one-time variants memoize nothing: every report is PRR then IRR drawn from the round-2
source. The cohort defaults to HMAC(secret, "cohort" ‖ metric) mod m, i.e. fixed by the secret.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import os
import struct
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.protocols._rng import HmacRandom, RandomSource, SecureRandom
from longldp.protocols.client import Client, DrawnRound1, Round1Source
from longldp.protocols.rappor._hashing import bits_to_int, int_to_bits

if TYPE_CHECKING:  # pragma: no cover
    from longldp.protocols.rappor._chain import RapporChain

PRR_SOURCES = ("hmac", "table", "rappor-py")


class _SecretPrr(Round1Source):
    """A PRR that is a fixed function of a secret, the cohort and the encoded bits."""

    reproducible = True

    def __init__(self, secret: bytes, cohort: int):
        self._secret = secret
        self.cohort = cohort

    def state(self, proto: Any) -> dict[str, NDArray]:
        return {"cohort": np.array([self.cohort], dtype=np.int64)}


class RapporPrf(_SecretPrr):
    """PRR bit i = 1 if u_i < f/2, 0 if u_i < f, else the encoded bit, with u from
    HmacRandom(secret, 0x01 ‖ len(metric) ‖ metric ‖ cohort u16 ‖ encoding bytes)."""

    def __init__(self, secret: bytes, cohort: int, metric: bytes):
        super().__init__(secret, cohort)
        self.metric = metric

    def memo(self, proto: Any, key: int | bytes, encoded: Any, state: dict) -> NDArray:
        context = (
            b"\x01"
            + bytes([len(self.metric)])
            + self.metric
            + struct.pack(">H", self.cohort)
            + bytes(key)
        )
        u = HmacRandom(self._secret, context).random(proto.k)
        b = np.unpackbits(encoded.ravel(), count=proto.k).astype(bool)
        bits = np.where(u < proto.f / 2, True, np.where(u < proto.f, False, b))
        return np.packbits(bits).reshape(1, -1)


class RapporPy(_SecretPrr):
    """google/rappor's Python client, byte for byte (k ≤ 32)."""

    def memo(self, proto: Any, key: int | bytes, encoded: Any, state: dict) -> NDArray:
        b = bits_to_int(encoded, proto.k)
        digest = hmac.new(self._secret, struct.pack(">L", b), hashlib.sha256).digest()
        threshold = proto.f * 128
        uniform = mask = 0
        for i in range(proto.k):
            byte = digest[i]
            uniform |= (byte & 1) << i
            mask |= int((byte >> 1) < threshold) << i
        return int_to_bits((b & ~mask) | (uniform & mask), proto.k).reshape(1, -1)

    @staticmethod
    def realized_f(proto: Any) -> float:
        """The PRR noise rate actually used: f quantized to ⌈128f⌉/128 (never below f)."""
        return math.ceil(proto.f * 128) / 128

    @classmethod
    def realized_epsilons(cls, proto: Any) -> tuple[float, float]:
        """(ε∞, ε1) at the realized f: never above the protocol's (the realized f ≥ f)."""
        realized = dataclasses.replace(proto, f=cls.realized_f(proto))
        return realized.first_round_epsilon(), realized.single_report_epsilon()


def rappor_client(
    proto: RapporChain,
    rng: RandomSource | None = None,
    *,
    secret: bytes | None = None,
    cohort: int | None = None,
    prr_source: str = "hmac",
    metric: bytes = b"",
    memo: dict[bytes, bytes] | None = None,
    round1: Round1Source | None = None,
    round2: RandomSource | None = None,
) -> Client:
    """One RAPPOR device (see the module docstring); ``rng`` is the IRR's source (OS CSPRNG by
    default) and, with ``prr_source="table"``, the PRR's. The secret defaults to 32 bytes of
    ``os.urandom`` (from ``rng`` when it is a Generator). ``round1`` overrides the PRR source
    (e.g. :class:`~longldp.protocols.client.DerivedRound1`: then the cohort is drawn from it)."""
    source: RandomSource = SecureRandom() if rng is None else rng
    irr = source if round2 is None else round2
    if round1 is not None:
        return Client(proto, round1=round1, round2=irr, memo=memo)
    own = proto.name
    prr = check.choice(own, "prr_source", prr_source, PRR_SOURCES)
    if prr == "rappor-py" and proto.k > 32:
        raise ValueError(f"{own}: prr_source 'rappor-py' needs k <= 32; got k = {proto.k}.")
    if secret is None:
        gen_bytes = getattr(source, "bytes", None)
        secret = gen_bytes(32) if gen_bytes is not None else os.urandom(32)
    if not isinstance(secret, bytes) or not secret:
        raise ValueError(f"{own}: 'secret' must be non-empty bytes.")
    if prr == "hmac" and len(secret) < 16:
        raise ValueError(
            f"{own}: 'secret' must be at least 16 bytes for prr_source 'hmac' (use 32 from "
            f"the OS); got {len(secret)}."
        )
    if not isinstance(metric, bytes) or len(metric) > 255:
        raise ValueError(f"{own}: 'metric' must be bytes of length <= 255.")
    if cohort is None:
        digest = hmac.new(secret, b"cohort" + metric, hashlib.sha256).digest()
        cohort = int.from_bytes(digest, "big") % proto.m
    cohort = int(proto._check_cohorts(np.array([cohort]))[0])
    state = {"cohort": np.array([cohort], dtype=np.int64)}
    sources: dict[str, Round1Source] = {
        "hmac": RapporPrf(secret, cohort, metric),
        "table": DrawnRound1(source),
        "rappor-py": RapporPy(secret, cohort),
    }
    return Client(proto, round1=sources[prr], round2=irr, state=state, memo=memo)
