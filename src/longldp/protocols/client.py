"""One client path for every protocol: round 1 from a round-1 source, round 2 from a round-2 one.

A :class:`Client` is one user. Its per-user state (hash function, sampled buckets, cohort) is
drawn once; the round-1 memo of each distinct memo key is made once and kept; every report is
round 2 applied to the memo (a one-shot protocol randomizes afresh every report, from the
round-2 source). Where the randomness comes from is the client's choice, not the protocol's:

- round 1 (:class:`Round1Source`): :class:`DrawnRound1` draws from a generator in call order
  (simulation; the memo table must be kept); :class:`DerivedRound1` derives the per-user state
  and each memo from a device secret with HMAC-SHA256 (a device: deleting the memo table
  reproduces the same memos, docs/client.md §2); RAPPOR adds google/rappor's PRR sources
  (:mod:`longldp.protocols.rappor.client`);
- round 2: the OS CSPRNG (:class:`~longldp.protocols._rng.SecureRandom`, the default) or a
  generator (simulation).

The client talks to its protocol through the public client hooks of the mechanism role
(:class:`~longldp.protocols.mechanism.Mechanism`): ``new_client_state`` (per-user state),
``client_key`` (memo key of an input), ``client_round1``, ``client_round2``, ``client_record``
and ``example_memo``; the budget is :meth:`~longldp.protocols.mechanism.Mechanism.budget_spent`.

A history-dependent mechanism (its ``history`` trait, docs/design.md §2.5) is one-shot per
report but its report input depends on the device's past values: the client keeps the
``history`` (``new_client_history``), and each report is :meth:`Client.history_step` (what the
epoch's report would be and cost), :meth:`Client.draw` (its randomization, from the round-2
source) and :meth:`Client.advance` (the history after it); :meth:`Client.report` does the three.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from longldp import privacy
from longldp.protocols._rng import HmacRandom, RandomSource, SecureRandom

if TYPE_CHECKING:  # pragma: no cover
    from longldp.protocols.mechanism import HistoryStep, Mechanism

#: Labels of the device derivation (docs/client.md §2). A change of the derivation must bump
#: the version, so that no device ever mixes memos of two derivations.
STATE_LABEL = b"longldp/state/v1|"
ROUND1_LABEL = b"longldp/round1/v1|"


def key_bytes(key: int | bytes) -> bytes:
    """A memo key as bytes: an integer key as 8 bytes big-endian, an encoding as is."""
    return int(key).to_bytes(8, "big") if isinstance(key, (int, np.integer)) else bytes(key)


def key_text(key: int | bytes) -> str:
    """A memo key as text (what a device's state file records): decimal, or hex bytes."""
    return str(int(key)) if isinstance(key, (int, np.integer)) else bytes(key).hex()


class Round1Source(ABC):
    """Where one client's per-user state and round-1 memos come from."""

    #: True when a memo is a fixed function of the source and its key (deriving it again gives
    #: the same memo, so losing the memo table cannot be used to average round 1 away).
    reproducible: bool = False

    @abstractmethod
    def state(self, proto: Mechanism) -> dict[str, NDArray]:
        """The client's per-user state (drawn once)."""

    @abstractmethod
    def memo(self, proto: Mechanism, key: int | bytes, encoded: Any, state: dict) -> NDArray:
        """The round-1 memo of memo key ``key`` (``encoded``: what round 1 randomizes)."""


class DrawnRound1(Round1Source):
    """Round 1 and the per-user state drawn from ``rng`` in call order (simulation, tests)."""

    def __init__(self, rng: RandomSource):
        self.rng = rng

    def state(self, proto: Mechanism) -> dict[str, NDArray]:
        return proto.new_client_state(self.rng)

    def memo(self, proto: Mechanism, key: int | bytes, encoded: Any, state: dict) -> NDArray:
        return proto.client_round1(encoded, state, self.rng)


class DerivedRound1(Round1Source):
    """Round 1 derived from a device secret: each memo its own HMAC-SHA256 stream.

    - per-user state: the protocol's state draw from ``HmacRandom(secret, STATE_LABEL ‖ ctx)``;
    - the memo of key x: the protocol's round-1 draw from
      ``HmacRandom(secret, ROUND1_LABEL ‖ ctx ‖ x)``, x as 8 bytes big-endian for an integer
      key (a value, a hash bucket, a bucket) or the packed encoding (RAPPOR);
    - ctx = the protocol's 12-byte wire header ‖ len(collection) as 2 bytes ‖ collection
      (UTF-8): :meth:`context_of`.

    HMAC-SHA256 is a pseudorandom function: for a secret the server does not know, each memo has
    exactly the protocol's round-1 distribution and distinct keys give independent memos.
    """

    reproducible = True

    def __init__(self, secret: bytes, context: bytes):
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < 16:
            raise ValueError("DerivedRound1: 'secret' must be at least 16 bytes (use 32).")
        self._secret = bytes(secret)
        self.context = bytes(context)

    @staticmethod
    def context_of(proto: Mechanism, collection: str) -> bytes:
        """ctx of a device of ``collection``: wire header ‖ len(name) u16 ‖ name (UTF-8)."""
        name = collection.encode("utf-8")
        if len(name) >= 1 << 16:
            raise ValueError("DerivedRound1: the collection name is too long.")
        return proto.wire_header + len(name).to_bytes(2, "big") + name

    def state(self, proto: Mechanism) -> dict[str, NDArray]:
        return proto.new_client_state(HmacRandom(self._secret, STATE_LABEL + self.context))

    def memo(self, proto: Mechanism, key: int | bytes, encoded: Any, state: dict) -> NDArray:
        stream = HmacRandom(self._secret, ROUND1_LABEL + self.context + key_bytes(key))
        return proto.client_round1(encoded, state, stream)


class Trace(NamedTuple):
    """What a client computes for one report; only ``report`` may leave the device."""

    encoded: Any
    memo: NDArray
    report: NDArray


class Client:
    """One user's device: per-user state, a memo per distinct memo key, fresh round 2.

    Parameters
    ----------
    oracle : Mechanism
    rng : Generator or RandomSource, optional
        Both rounds from this one source, in call order (simulation). Default: the OS CSPRNG.
    round1 : Round1Source, optional
        Where round 1 and the per-user state come from (default: drawn from ``rng``).
    round2 : RandomSource, optional
        Round 2 (and every report of a one-shot protocol); default ``rng``.
    state : dict, optional
        The per-user state, instead of drawing it (e.g. a RAPPOR cohort chosen by the app).
    memo : dict, optional
        Memos to start from (:meth:`export_memo`), for a round-1 source that is not reproducible.
    """

    def __init__(
        self,
        oracle: Mechanism,
        rng: RandomSource | None = None,
        *,
        round1: Round1Source | None = None,
        round2: RandomSource | None = None,
        state: dict[str, NDArray] | None = None,
        memo: dict[bytes, bytes] | None = None,
    ):
        self.oracle = oracle
        source = SecureRandom() if rng is None else rng
        self.round2: RandomSource = source if round2 is None else round2
        self.round1: Round1Source = DrawnRound1(source) if round1 is None else round1
        self.state = self.round1.state(oracle) if state is None else state
        self._memo: dict[int | bytes, NDArray] = {}
        #: A history-dependent mechanism's history (None for every other protocol).
        self.history: dict[str, NDArray] | None = oracle.new_client_history()
        #: The epoch a history step takes when none is given (one after the last step's).
        self.next_epoch = 0
        #: ε spent by a history-dependent mechanism's reports, by its accounting.
        self.spent = 0.0
        if memo:
            template = oracle.example_memo()
            for key, raw in memo.items():
                self._memo[key] = np.frombuffer(raw, dtype=template.dtype).reshape(template.shape)
        self._reports = 0

    # ------------------------------------------------------------------ memos
    def memo_key(self, value: Any) -> int | bytes:
        """The memo key of ``value`` (a value, its hash bucket, bucket, or encoding)."""
        return self.oracle.client_key(value, self.state)[0]

    def memo_id(self, value: Any) -> str:
        """:meth:`memo_key` as text (what a device's state file records)."""
        return key_text(self.memo_key(value))

    def memo(self, value: Any) -> NDArray:
        """The round-1 memo of ``value`` (made now if new, then kept)."""
        key, encoded = self.oracle.client_key(value, self.state)
        return self._memo_of(key, encoded)

    def _memo_of(self, key: int | bytes, encoded: Any) -> NDArray:
        memo = self._memo.get(key)
        if memo is None:
            memo = self.round1.memo(self.oracle, key, encoded, self.state)
            self._memo[key] = memo
        return memo

    @property
    def memo_count(self) -> int:
        """Number of distinct round-1 memos held."""
        return len(self._memo)

    def export_memo(self) -> dict[bytes, bytes]:
        """The memo table (memo key → memo bytes), to persist when round 1 is not reproducible."""
        return {key: val.tobytes() for key, val in self._memo.items()}

    # ------------------------------------------------------------------ history
    def history_step(
        self, value: Any, epoch: int | None = None, plan: Any = None
    ) -> HistoryStep:
        """What reporting ``value`` at ``epoch`` (default: ``next_epoch``) with the server's
        ``plan`` would send and cost, from the client's history (a history-dependent mechanism);
        nothing is drawn or changed. Bad input raises ``ValueError``."""
        o = self.oracle
        if self.history is None:
            raise ValueError(f"{o.name}: its reports do not depend on a device's history.")
        o.client_key(value, self.state)  # the value, checked
        values = o.domain.check(o.name, [value])
        at = self.next_epoch if epoch is None else int(epoch)
        return o.history_step(values, self.state, self.history, np.array([at]), plan)

    def draw(self, step: HistoryStep) -> Any:
        """The report record of a history step (its report input randomized from the round-2
        source), or None when the step sends nothing."""
        if not bool(step.sends[0]):
            return None
        payload = self.oracle.client_round1(step.inputs[:1], self.state, self.round2)
        return self.oracle.client_record(payload, self.state)

    def advance(self, step: HistoryStep, epoch: int | None = None) -> None:
        """Take the history after ``step`` (made at ``epoch``, default ``next_epoch``)."""
        self.history = {name: np.array(arr) for name, arr in step.history.items()}
        self.next_epoch = (self.next_epoch if epoch is None else int(epoch)) + 1
        self.spent += float(step.costs[0])
        self._reports += int(step.sends[0])

    # ------------------------------------------------------------------ reports
    def trace(self, value: Any) -> Trace:
        """Encoding, memo and report of ``value`` (google/rappor's ``_internal_encode``)."""
        o = self.oracle
        if self.history is not None:
            raise ValueError(f"{o.name}: a history-dependent report: use report(value, epoch).")
        key, encoded = o.client_key(value, self.state)
        if o.longitudinal:
            memo = self._memo_of(key, encoded)
            report = o.client_round2(memo, self.round2)
        else:  # one-shot: round 1 afresh for every report, from the round-2 source
            memo = report = o.client_round1(encoded, self.state, self.round2)
        self._reports += 1
        return Trace(encoded, memo, report)

    def report(self, value: Any, epoch: int | None = None, plan: Any = None) -> Any:
        """Randomize ``value`` into one report record. A history-dependent mechanism reports
        at ``epoch`` (default: the one after its last) with the server's ``plan`` and returns
        None at an epoch where it sends nothing."""
        if self.history is not None:
            step = self.history_step(value, epoch, plan)
            record = self.draw(step)
            self.advance(step, epoch)
            return record
        return self.oracle.client_record(self.trace(value).report, self.state)

    def report_bytes(self, value: Any, epoch: int | None = None, plan: Any = None) -> Any:
        """:meth:`report` as one wire-format report (header + body, docs/wire-format.md), or
        None when a history-dependent mechanism sends nothing at the epoch."""
        rec = self.report(value, epoch, plan)
        if rec is None:
            return None
        return self.oracle.encode_reports(np.asarray([rec], dtype=np.asarray(rec).dtype))

    @property
    def reports(self) -> int:
        """Reports made so far."""
        return self._reports

    @property
    def spent_budget(self) -> privacy.SpentBudget:
        """Reports sent, distinct memos, and the ε bound min(t·ε1, m·ε∞) (docs/math.md §4); a
        history-dependent mechanism: what its reports cost by its accounting."""
        if self.history is not None:
            return privacy.SpentBudget(self._reports, 0, privacy.spent_total(self.spent))
        return self.oracle.budget_spent(self._reports, self.memo_count)
