"""One RAPPOR device: a permanent cohort, a memoized PRR per distinct encoding, fresh IRR."""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import struct
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.protocols._rng import HmacRandom, RandomSource, SecureRandom
from longldp.protocols.base import Client
from longldp.protocols.rappor._chain import RapporChain
from longldp.protocols.rappor._hashing import bits_to_int, int_to_bits

PRR_SOURCES = ("hmac", "table", "rappor-py")


class Internals(NamedTuple):
    """What a client computes for one report; only ``report`` may leave the device."""

    bloom: NDArray[np.uint8]
    prr: NDArray[np.uint8]
    report: NDArray[np.uint8]


class RapporClient(Client):
    """One device: a permanent cohort, a memoized PRR per distinct encoding, fresh IRR.

    ``prr_source``:

    - ``"hmac"`` (default): the PRR is a PRF of a device secret and the encoded bits,
      :class:`~longldp.protocols._rng.HmacRandom` keyed by the secret with context
      0x01 ‖ len(metric) ‖ metric ‖ cohort u16 ‖ encoding bytes, one 53-bit uniform per bit:
      bit = 1 if u < f/2, 0 if u < f, else the encoded bit. A client that loses its memo
      reproduces the same PRR, so no averaging is possible.
    - ``"table"``: the PRR is drawn from ``rng`` once per encoding and kept in the memo
      (:meth:`export_memo` / ``memo=`` persist it).
    - ``"rappor-py"``: byte-exact google/rappor Python client (k ≤ 32): HMAC-SHA256(secret,
      Bloom integer as 4 bytes big-endian); digest byte i gives a fair coin (low bit) and a noise
      decision (upper 7 bits < 128·f), so the realized f is ⌈128f⌉/128 (:attr:`realized_f`).

    The one-time variants memoize nothing: every report is PRR then IRR drawn from ``rng``.
    The cohort defaults to HMAC(secret, "cohort" ‖ metric) mod m, i.e. fixed by the secret.
    The IRR comes from ``rng``: the OS CSPRNG unless a Generator is passed (simulation).
    The secret defaults to 32 bytes of ``os.urandom`` (from ``rng`` when it is a Generator).
    """

    def __init__(
        self,
        oracle: RapporChain,
        rng: RandomSource | None = None,
        *,
        secret: bytes | None = None,
        cohort: int | None = None,
        prr_source: str = "hmac",
        metric: bytes = b"",
        memo: dict[bytes, bytes] | None = None,
    ):
        self.oracle = oracle
        self._rng: RandomSource = SecureRandom() if rng is None else rng
        own = oracle.name
        self.prr_source = check.choice(own, "prr_source", prr_source, PRR_SOURCES)
        if self.prr_source == "rappor-py" and oracle.k > 32:
            raise ValueError(f"{own}: prr_source 'rappor-py' needs k <= 32; got k = {oracle.k}.")
        if secret is None:
            gen_bytes = getattr(self._rng, "bytes", None)
            secret = gen_bytes(32) if gen_bytes is not None else os.urandom(32)
        if not isinstance(secret, bytes) or not secret:
            raise ValueError(f"{own}: 'secret' must be non-empty bytes.")
        if self.prr_source == "hmac" and len(secret) < 16:
            raise ValueError(
                f"{own}: 'secret' must be at least 16 bytes for prr_source 'hmac' (use 32 from "
                f"the OS); got {len(secret)}."
            )
        if not isinstance(metric, bytes) or len(metric) > 255:
            raise ValueError(f"{own}: 'metric' must be bytes of length <= 255.")
        self._secret = secret
        self.metric = metric
        if cohort is None:
            digest = hmac.new(secret, b"cohort" + metric, hashlib.sha256).digest()
            cohort = int.from_bytes(digest, "big") % oracle.m
        self.cohort = int(oracle._check_cohorts(np.array([cohort]))[0])
        self._state = {"cohort": np.array([self.cohort], dtype=np.int64)}
        self._memo: dict[bytes, NDArray[np.uint8]] = {}
        for key, val in (memo or {}).items():
            self._memo[key] = np.frombuffer(val, dtype=np.uint8).reshape(1, -1).copy()
        self._reports = 0

    @property
    def realized_f(self) -> float:
        """The PRR noise rate actually used (rappor-py quantizes f to ⌈128f⌉/128)."""
        if self.prr_source == "rappor-py":
            return math.ceil(self.oracle.f * 128) / 128
        return self.oracle.f

    @property
    def realized_epsilons(self) -> tuple[float, float]:
        """(ε∞, ε1) at the realized f: never above the protocol's (the realized f ≥ f)."""
        o = self.oracle
        f = self.realized_f
        eps_1 = privacy.round_up(privacy.rappor_eps_1(o.p, o.q, f, o.h))
        if not o.longitudinal:
            return eps_1, eps_1
        return privacy.round_up(privacy.rappor_eps_inf(f, o.h)), eps_1

    def export_memo(self) -> dict[bytes, bytes]:
        """The PRR memo (encoding bytes → PRR bytes) to persist for ``prr_source="table"``."""
        return {key: val.tobytes() for key, val in self._memo.items()}

    def _prr(self, bloom: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        if not o.longitudinal:  # one-time: PRR and IRR in one fresh draw, nothing kept
            return o._round1_bits(bloom, o.P1, o.P0, self._rng)
        key = bloom.tobytes()
        memo = self._memo.get(key)
        if memo is not None:
            return memo
        if self.prr_source == "table":
            prr = o._round1_bits(bloom, o.p1, o.q1, self._rng)
        elif self.prr_source == "hmac":
            context = (
                b"\x01"
                + bytes([len(self.metric)])
                + self.metric
                + struct.pack(">H", self.cohort)
                + key
            )
            u = HmacRandom(self._secret, context).random(o.k)
            b = np.unpackbits(bloom.ravel(), count=o.k).astype(bool)
            bits = np.where(u < o.f / 2, True, np.where(u < o.f, False, b))
            prr = np.packbits(bits).reshape(1, -1)
        else:
            prr = self._rappor_py_prr(bloom)
        self._memo[key] = prr
        return prr

    def _rappor_py_prr(self, bloom: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        b = bits_to_int(bloom, o.k)
        digest = hmac.new(self._secret, struct.pack(">L", b), hashlib.sha256).digest()
        threshold = o.f * 128
        uniform = mask = 0
        for i in range(o.k):
            byte = digest[i]
            uniform |= (byte & 1) << i
            mask |= int((byte >> 1) < threshold) << i
        return int_to_bits((b & ~mask) | (uniform & mask), o.k).reshape(1, -1)

    def _irr(self, prr: NDArray[np.uint8]) -> NDArray[np.uint8]:
        o = self.oracle
        return o._round2(prr, self._rng) if o.longitudinal else prr

    def internal_report(self, value: Any) -> Internals:
        """Encoding, PRR and report of ``value`` (google/rappor's ``_internal_encode``)."""
        o = self.oracle
        bloom = o.encode([o._check_value(value)], [self.cohort])
        prr = self._prr(bloom)
        report = self._irr(prr)
        self._reports += 1
        return Internals(bloom, prr, report)

    def report(self, value: Any) -> Any:
        """One report record (cohort, bits) of ``value``."""
        bits = self.internal_report(value).report
        return self.oracle._make_reports(bits, self._state)[0]

    @property
    def memo_count(self) -> int:
        """Distinct PRRs used so far (each costs ε∞)."""
        return len(self._memo)

    @property
    def spent_budget(self) -> privacy.SpentBudget:
        """Reports t, distinct PRRs d and min(t·ε1, d·ε∞) (one-time: t·ε1)."""
        o = self.oracle
        if not o.longitudinal:
            return privacy.SpentBudget(self._reports, 0, self._reports * o.single_report_epsilon())
        return privacy.spent_budget(
            self._reports, self.memo_count, o.single_report_epsilon(), o.first_round_epsilon()
        )
