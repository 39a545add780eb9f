"""The protocol contract shared by every frequency oracle (docs/design.md §2).

A protocol is a frozen dataclass that validates itself and exposes its chain parameters
``p1, q1, p2, q2`` (one-shot oracles: ``p2 = 1, q2 = 0``, the identity second round). This
base class writes the public methods once; each family supplies a few private hooks:

- ``_new_state(m, rng)``: per-user values drawn once and kept forever (hash function, samples);
- ``_memo_key(values, state)``: what round 1 is memoized on (value, hash bucket, bucket);
- ``_round1(keys, state, rng)`` / ``_round2(payload, rng)``: the two randomizations;
- ``_make_reports(payload, state)``: the report records a server receives;
- ``support_counts(reports)``, ``_sample_support(true_counts, n, rng)``: aggregation and its
  count-level twin;
- ``_encode`` / ``_decode``: fixed-width bytes of a report body (private: the one public byte
  format is the wire report, header + body, :meth:`FrequencyOracle.encode_reports`).

A protocol class also declares its traits as class variables (docs/design.md §2.1): ``name``,
``wire_id``, ``report_kind``, ``budget_params``, ``test_params``, ``linkage`` (and
``aliases``); the registry (:mod:`longldp.protocols._registry`), the wire codec, the audit's
dispatch, budget parsing, the shuffle routes and the common tests are derived from them.
"""

from __future__ import annotations

import enum
import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp import privacy
from longldp.privacy.linkage import Linkage
from longldp.protocols import _codec
from longldp.protocols._bitcount import BYTE_BITS, packed_column_sums  # noqa: F401  (re-exported)
from longldp.protocols._estimate import Estimate, estimate_with_se
from longldp.protocols._memo import DenseMemoStore, MemoStore, PopulationMemo, make_memo_store
from longldp.protocols._rng import RandomSource, as_random_source
from longldp.protocols.client import Client, Round1Source

#: Rows × columns handled at once when a step materializes a (users × domain) matrix.
CHUNK_CELLS = 1 << 22


def row_slices(n: int, width: int) -> Iterator[slice]:
    """Row blocks of an (n × width) computation that keep each block under CHUNK_CELLS cells."""
    step = max(1, CHUNK_CELLS // max(1, width))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


class ReportKind(enum.StrEnum):
    """What one report is: the trait the audit, the codec and the aggregation dispatch on."""

    #: One symbol of [0, k) that supports the value it names (GRR, L-GRR).
    SYMBOL = "symbol"
    #: k independent bits, bit v supporting value v (the unary encodings).
    BITS = "bits"
    #: (a hash function of a public family, a bucket of [0, g)) (local hashing).
    HASHED = "hashed"
    #: (a Sylvester Hadamard row, a bit): local hashing over the Hadamard rows.
    HADAMARD = "hadamard"
    #: (d sampled buckets, one bit each) (dBitFlipPM).
    SAMPLED_BITS = "sampled-bits"
    #: (a cohort, the k bits of a randomized encoding of the value) (RAPPOR).
    COHORT_BITS = "cohort-bits"
    #: Any other one-shot report: the protocol enumerates its channel itself
    #: (``report_space_size``, ``report_channel``, ``report_index``) for the audit.
    ENUMERATED = "enumerated"


class FrequencyOracle(ABC):
    """Base of every protocol; see the module docstring for the hooks a family implements.

    Traits (class variables) every registered protocol declares:

    - ``name``: its registry name; ``aliases``: other accepted names;
    - ``longitudinal``: True for two-round memoizing chains;
    - ``wire_id``: its one-byte protocol id on the wire, fixed forever (docs/wire-format.md);
    - ``report_kind``: what a report is (:class:`ReportKind`);
    - ``budget_params``: the constructor parameters that set its privacy: ``("eps",)`` for a
      one-shot oracle, ``("eps_perm", "eps_1")`` for a chain, or its own (dBitFlipPM:
      ``("eps_perm",)``; RAPPOR: ``("f", "p", "q")``);
    - ``test_params``: a few constructor dicts (``k`` supplied by the test unless given) with
      which the common tests enroll it (as scipy.stats's ``_distr_params``);
    - ``linkage``: what persists per device and rides in its reports
      (:class:`longldp.privacy.linkage.Linkage`), from which the shuffle accounting picks its
      valid routes (docs/math.md §17.4); each registered class declares its own.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    #: True for two-round memoizing chains; one-shot oracles randomize afresh every report.
    longitudinal: ClassVar[bool]
    wire_id: ClassVar[int]
    report_kind: ClassVar[ReportKind]
    budget_params: ClassVar[tuple[str, ...]]
    #: Appended to a budget error, e.g. which protocol takes the budget that was given.
    budget_note: ClassVar[str] = ""
    test_params: ClassVar[tuple[dict[str, Any], ...]]
    linkage: ClassVar[Linkage]
    #: True when the estimate is a vector of value frequencies (false for RAPPOR's per-cohort
    #: shares of set Bloom bits): the frequency tests (unbiasedness against the true
    #: distribution, engines, post-processing) apply to it.
    estimates_frequencies: ClassVar[bool] = True
    k: int
    eps_perm: float
    eps_1: float
    p1: float
    q1: float
    p2: float
    q2: float

    @classmethod
    def max_alpha(cls, eps_perm: float) -> float:
        """Largest α = ε1/ε∞ (excluded) a two-round chain reaches at ``eps_perm``: 1 unless the
        chain's round 2 cannot reach every ε1 (L-OUE, L-SOUE: math §3.3)."""
        return 1.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "wire_id" in cls.__dict__:
            _codec.claim_wire_id(cls.wire_id, cls.name)

    # ------------------------------------------------------------------ parameters and math
    def _validate_common(self) -> None:
        """Check k and the budgets under this protocol's name, before any derivation."""
        check.integer(self.name, "k", self.k, minimum=2)
        if self.longitudinal and "eps_1" in self.__dataclass_fields__:  # type: ignore[attr-defined]
            check.chain_budgets(self.name, self.eps_perm, self.eps_1)
        elif "eps" in self.__dataclass_fields__:  # type: ignore[attr-defined]
            check.budget(self.name, "eps", self.eps)  # type: ignore[attr-defined]

    @property
    def domain_size(self) -> int | None:
        """Number of inputs: values are ints in [0, domain_size); None: strings (Bloom RAPPOR)."""
        return self.k

    def as_inputs(self, codes: ArrayLike) -> Any:
        """The inputs that integer codes in [0, domain_size) stand for (the codes themselves;
        a protocol over strings maps them to strings). Tests and audits draw inputs with it."""
        return np.asarray(codes, dtype=np.int64)

    @property
    def estimate_size(self) -> int:
        """Length of the estimate vector (k; dBitFlipPM: its number of buckets)."""
        return self.k

    @functools.cached_property
    def P1(self) -> float:
        """Probability that a report supports v when the user's value is v."""
        return privacy.chain_support(self.p1, self.q1, self.p2, self.q2)[0]

    @functools.cached_property
    def P0(self) -> float:
        """Probability that a report supports v when the user's value is not v."""
        return privacy.chain_support(self.p1, self.q1, self.p2, self.q2)[1]

    def true_frequencies(self, values: ArrayLike) -> NDArray[np.float64]:
        """What the estimate targets for users holding ``values``: the value histogram / n."""
        vals = check.domain_values(self.name, values, self.k)
        counts = np.bincount(vals.ravel(), minlength=self.k)
        return self.frequencies_from_counts(counts, max(1, vals.size))

    def frequencies_from_counts(self, counts: ArrayLike, n: int) -> NDArray[np.float64]:
        """The estimate's target from value counts (…, k) of n users: counts / n."""
        return np.asarray(counts, dtype=np.float64) / n

    def approx_variance(self, n: int) -> float:
        """V*: variance of one estimate at f = 0 (the papers' figure of merit)."""
        n = check.integer(self.name, "n", n, minimum=1)
        return privacy.approx_variance(n, self.P1, self.P0)

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """Exact variance of the estimate of a value with true frequency ``f`` (array ok)."""
        n = check.integer(self.name, "n", n, minimum=1)
        return privacy.estimator_variance(n, _frequencies(self.name, f), self.P1, self.P0)

    def first_round_variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """V1: the part of :meth:`variance` fixed by the round-1 memos and per-user state.

        It is shared by every report of an unchanging population, so averaging τ estimates
        cannot remove it (:meth:`time_average_variance`). One-shot oracles memoize nothing: 0.
        """
        n = check.integer(self.name, "n", n, minimum=1)
        freqs = _frequencies(self.name, f)
        if not self.longitudinal:
            return np.zeros_like(freqs)
        return privacy.first_round_variance(n, freqs, self.P1, self.P0, self.p2, self.q2)

    def time_average_variance(self, n: int, f: ArrayLike, tau: int) -> NDArray[np.float64]:
        """Var of the mean of τ estimates of users whose values never change: V1 + (Vtot − V1)/τ
        (:func:`longldp.privacy.time_average_variance`)."""
        return privacy.time_average_variance(
            self.variance(n, f), self.first_round_variance(n, f), tau
        )

    @abstractmethod
    def single_report_epsilon(self) -> float:
        """Worst-case ε of one report, computed from the exact composed channel."""

    def first_round_epsilon(self) -> float:
        """Worst-case ε of the memoized round 1 (what a value reported forever reveals)."""
        return self.eps_perm

    def _channel_info(self, n: int) -> pp.ChannelInfo:
        return pp.ChannelInfo(P1=self.P1, P0=self.P0, n=n, grr_type=False)

    # -- the enumerated channel (report kind ENUMERATED; the audit builds the others itself)
    def report_space_size(self) -> int:
        """Number of distinct reports (the columns of :meth:`report_channel`)."""
        raise NotImplementedError(f"{self.name}: no enumerated report channel.")

    def report_channel(self) -> NDArray[np.float64]:
        """Pr[report | input]: rows the ``domain_size`` inputs, columns every report (in the
        order of :meth:`report_index`), computed from the sampler's own probabilities, not
        from P1/P0, so that the audit checks the claims against the mechanism."""
        raise NotImplementedError(f"{self.name}: no enumerated report channel.")

    def report_index(self, reports: NDArray) -> NDArray[np.int64]:
        """The column of :meth:`report_channel` of each report record."""
        raise NotImplementedError(f"{self.name}: no enumerated report channel.")

    # ------------------------------------------------------------------ estimation
    @property
    def support_shape(self) -> tuple[int, ...]:
        """Shape of one timestamp's support counts."""
        return (self.k,)

    def estimate(
        self, support: ArrayLike, n: int, postprocess: str | pp.PostProcessor | None = None
    ) -> NDArray[np.float64]:
        """Unbiased frequencies f̂ = (C/n − P0)/(P1 − P0), then optional post-processing.

        Equals the seeds' ((C/n − q2)/(p2 − q2) − q1)/(p1 − q1) ([002] eq. 3). ``postprocess``
        is a name from :data:`longldp.postprocess.METHODS` or a callable; it targets a total of 1.
        ``support`` may carry leading batch axes (e.g. τ timestamps); each row is estimated.
        """
        n = check.integer(self.name, "n", n, minimum=1)
        c = np.asarray(support, dtype=np.float64)
        shape = self.support_shape
        if c.shape[c.ndim - len(shape) :] != shape or not np.all(np.isfinite(c)):
            raise ValueError(
                f"{self.name}: 'support' must be finite with trailing shape {shape} "
                f"(one timestamp's support counts); got shape {c.shape}."
            )
        raw = self._unbiased(c, n)
        if postprocess is None:
            return raw
        if len(self.estimate_shape) != 1:
            raise ValueError(
                f"{self.name}: post-processing applies to a frequency vector; this estimate "
                f"has shape {self.estimate_shape} ('postprocess' must be None)."
            )
        info = self._channel_info(n)
        rows = raw.reshape(-1, raw.shape[-1])
        out = np.stack([pp.apply(postprocess, row, 1.0, info) for row in rows])
        return out.reshape(raw.shape)

    def _unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        return (support / n - self.P0) / (self.P1 - self.P0)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """Shape of one timestamp's estimate: (estimate_size,) for a frequency vector."""
        return (self.estimate_size,)

    def estimate_with_se(
        self,
        support: ArrayLike,
        n: int,
        postprocess: str | pp.PostProcessor | None = None,
        level: float = 0.95,
    ) -> Estimate:
        """The estimate of one timestamp with its unbiased form, standard error and ``level``
        normal interval: f̂ ∓ z·sqrt(Var(n, clip(f̂, 0, 1))) around the unbiased f̂
        (docs/math.md §1.5). The one function the server, the archive and the CLI use."""
        return estimate_with_se(self, support, n, postprocess, level)

    def _estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var of the unbiased estimate at the plug-in frequencies (shape of the estimate)."""
        return self.variance(n, plug_in)

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        """Support counts of one timestamp drawn directly from the true counts (docs/design.md §4).

        Exactly distributed as aggregating ``perturb`` of users with these values, per
        timestamp (see each family for the joint law); cost O(k), not O(n·k). ``true_counts``
        may be a (τ, k) matrix: then τ independent timestamps are drawn at once.
        """
        counts = np.asarray(true_counts)
        if counts.ndim == 2:
            for row in counts:
                check.counts(self.name, row, self.k)
            counts = counts.astype(np.int64, copy=False)
        else:
            counts = check.counts(self.name, true_counts, self.k)
        total = counts.sum(axis=-1, keepdims=True)
        if n is not None and np.any(total != int(n)):
            raise ValueError(
                f"{self.name}: 'n' must equal sum(true_counts) = {int(total.flat[0])}; got {n}."
            )
        source = as_random_source(rng)
        if counts.ndim == 1:
            return self._sample_support(counts, int(total[0]), source)
        return self._sample_support_batch(counts, total, source)

    def _sample_support_batch(
        self, counts: NDArray[np.int64], totals: NDArray[np.int64], rng: RandomSource
    ) -> NDArray:
        """τ timestamps at once; families whose draws broadcast override this loop."""
        return np.stack(
            [self._sample_support(c, int(t[0]), rng) for c, t in zip(counts, totals, strict=True)]
        )

    # ------------------------------------------------------------------ population path
    def new_memo(self, n_users: int) -> PopulationMemo:
        """Empty client state for ``n_users`` users (round-1 memos and per-user state)."""
        n_users = check.integer(self.name, "n_users", n_users, minimum=1)
        store = self._memo_store(n_users) if self.longitudinal else None
        return PopulationMemo(n_users, store, has_state=np.zeros(n_users, dtype=bool))

    def perturb(
        self,
        values: ArrayLike,
        memo: PopulationMemo | None = None,
        rng: Any = None,
        users: ArrayLike | None = None,
    ) -> NDArray:
        """Reports of many users at once: what their clients would send (vectorized).

        ``values[i]`` is the value of user ``users[i]`` (default: user i). ``memo`` persists
        between calls; one-shot oracles may omit it (then per-user state is drawn afresh).
        """
        source = as_random_source(rng)
        memo, who, state, _, keys = self._population_step(values, memo, users, source)
        if memo.store is None:
            payload = self._round1(keys, state, source)
        else:
            payload = self._round2(self._lookup_memos(memo, who, state, keys, source), source)
        memo.reports[who] += 1
        return self._make_reports(payload, state)

    def perturb_support(
        self,
        values: ArrayLike,
        memo: PopulationMemo,
        rng: Any = None,
        users: ArrayLike | None = None,
    ) -> NDArray:
        """Support counts of ``perturb`` drawn without materializing reports (docs/design.md §4).

        Round 1 is drawn per user and memoized exactly as in :meth:`perturb`, and every piece of
        per-user state (hash function, sampled buckets) is kept for all calls; round 2 is then
        drawn from the memos without building report records (see each family's
        ``_support_from_memos``). Given the memos and the per-user state this is the exact law
        of the server's support counts, so over many calls the counts have the joint law of the
        real clients' (docs/math.md, "Variance over time"). Cost per call: O(n + k) for the GRR
        chains and dBitFlipPM, O(n·k/8) for the UE chains and LOLOHA (bit-packed rows).
        One-shot oracles use :meth:`sample_support`.
        """
        source = as_random_source(rng)
        memo, who, state, vals, keys = self._population_step(values, memo, users, source)
        if memo.store is None:
            support = self._sample_support(np.bincount(vals, minlength=self.k), who.size, source)
        else:
            payload = self._lookup_memos(memo, who, state, keys, source)
            support = self._support_from_memos(payload, vals, keys, state, source, memo, who)
        memo.reports[who] += 1
        return support

    def _population_step(
        self,
        values: ArrayLike,
        memo: PopulationMemo | None,
        users: ArrayLike | None,
        source: RandomSource,
    ) -> tuple[PopulationMemo, NDArray[np.int64], dict, NDArray[np.int64], NDArray[np.int64]]:
        """Validate one call of the population path: (memo, users, state, values, memo keys)."""
        vals = check.domain_values(self.name, values, self.k)
        if vals.ndim != 1:
            raise ValueError(f"{self.name}: 'values' must be 1-D; got shape {vals.shape}.")
        if memo is None:
            if self.longitudinal:
                raise ValueError(f"{self.name}: 'memo' is required (use new_memo(n_users)).")
            memo = self.new_memo(max(1, vals.size))
        who = _user_index(self.name, users, vals.size, memo.n_users)
        state = self._ensure_state(memo, who, source)
        return memo, who, state, vals, self._memo_key(vals, state)

    def _lookup_memos(
        self,
        memo: PopulationMemo,
        who: NDArray[np.int64],
        state: dict,
        keys: NDArray[np.int64],
        source: RandomSource,
    ) -> NDArray:
        assert memo.store is not None
        return memo.store.get_or_create(
            who, keys, lambda miss: self._round1(keys[miss], _rows(state, miss), source)
        )

    def spent_budget(self, memo: PopulationMemo) -> dict[str, NDArray]:
        """Per-user budget of a population: reports, distinct memos, min(t·ε1, m·ε∞) (§3.3)."""
        t = memo.reports
        m = memo.memos_per_user()
        eps = privacy.spent_epsilon(t, m, self.single_report_epsilon(), self._memo_epsilon())
        return {"reports": t, "memos": m, "epsilon": eps}

    def budget_spent(self, reports: int, memos: int) -> privacy.SpentBudget:
        """What one client has spent after ``reports`` reports from ``memos`` distinct memos:
        min(t·ε1, m·ε∞), or t·ε for a protocol that memoizes nothing (docs/math.md §4)."""
        return privacy.spent_budget(
            reports, memos, self.single_report_epsilon(), self._memo_epsilon()
        )

    def _memo_epsilon(self) -> float | None:
        """ε∞ of one memo, or None when nothing is memoized (every report costs ε1)."""
        return self.first_round_epsilon() if self.longitudinal else None

    def _ensure_state(self, memo: PopulationMemo, who: NDArray, rng: RandomSource) -> dict:
        assert memo.has_state is not None
        need = who[~memo.has_state[who]]
        if need.size:
            fresh = self._new_state(need.size, rng)
            for name, arr in fresh.items():
                if name not in memo.state:
                    memo.state[name] = np.zeros((memo.n_users, *arr.shape[1:]), dtype=arr.dtype)
                memo.state[name][need] = arr
            memo.has_state[need] = True
        return {name: arr[who] for name, arr in memo.state.items()}

    # ------------------------------------------------------------------ client and server
    def client(
        self,
        rng: RandomSource | None = None,
        *,
        round1: Round1Source | None = None,
        round2: RandomSource | None = None,
    ) -> Client:
        """A stateful client for one user (:class:`~longldp.protocols.client.Client`): OS
        randomness unless a Generator is passed; ``round1``/``round2`` choose each round's
        source (e.g. :class:`~longldp.protocols.client.DerivedRound1` on a device)."""
        return Client(self, rng, round1=round1, round2=round2)

    # ------------------------------------------------------------------ one client's hooks
    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        """(memo key, round-1 input) of one input of a client with per-user ``state``.

        ``value`` is checked (an int in [0, k)); the memo key is an int (the value, its hash
        bucket, its bucket), the round-1 input the (1,) array of it.
        """
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if not is_int or not 0 <= int(value) < self.k:
            raise ValueError(
                f"{self.name}: 'value' must be an int in [0, {self.k}); got {value!r}."
            )
        keys = self._memo_key(np.array([int(value)], dtype=np.int64), state)
        return int(keys[0]), keys

    def client_round1(self, encoded: Any, state: dict, rng: RandomSource) -> NDArray:
        """Round 1 of one client's input (the memo; for a one-shot protocol, the report)."""
        return self._round1(encoded, state, rng)

    def client_round2(self, memo: NDArray, rng: RandomSource) -> NDArray:
        """Round 2 of one memo: the payload of one report."""
        return self._round2(memo, rng)

    def client_record(self, payload: NDArray, state: dict) -> Any:
        """The report record a server receives for one payload."""
        return self._make_reports(payload, state)[0]

    def aggregator(self) -> Aggregator:
        """A server-side accumulator of reports."""
        return Aggregator(self)

    def aggregator_from_state(self, state: dict[str, Any]) -> Aggregator:
        """An aggregator restored from :meth:`Aggregator.state` (refuses another protocol's)."""
        spec, n, support = _codec.check_state(state)
        if spec != self.spec() or state["fingerprint"] != self.fingerprint().hex():
            raise ValueError(
                f"{self.name}: the aggregator state is of {_codec.canonical_json(spec).decode()}, "
                f"not of {_codec.canonical_json(self.spec()).decode()}."
            )
        agg = Aggregator(self)
        empty = agg.support_counts
        if support.shape != empty.shape:
            raise ValueError(
                f"{self.name}: aggregator state 'support' must have shape {empty.shape}; "
                f"got {support.shape}."
            )
        if n:
            agg._support = support.astype(empty.dtype)
            agg.n = n
        return agg

    # ------------------------------------------------------------------ wire format v1
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
        return self._encode(self._make_reports(*self._example_payload())).shape[1]

    def encode_reports(self, records: ArrayLike) -> bytes:
        """Wire-format reports (header + body each) of report records, concatenated."""
        return _codec.encode_reports(self, records)

    def decode_reports(self, data: bytes | Sequence[bytes]) -> NDArray:
        """Report records of wire-format reports; every header, length and body is checked and
        the first bad item named (``ValueError``)."""
        return _codec.decode_reports(self, data)

    # ------------------------------------------------------------------ hooks
    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.k, (), np.int64)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {}

    def _memo_key(self, values: NDArray[np.int64], state: dict) -> NDArray[np.int64]:
        return values

    @abstractmethod
    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray: ...

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return payload

    def _support_from_memos(
        self,
        payload: NDArray,
        values: NDArray[np.int64],
        keys: NDArray[np.int64],
        state: dict,
        rng: RandomSource,
        memo: PopulationMemo,
        who: NDArray[np.int64],
    ) -> NDArray:
        """Default: materialize round 2 (exact, O(n·k)); families override with count level."""
        return self.support_counts(self._make_reports(self._round2(payload, rng), state))

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        return payload

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = self._new_state(1, np.random.default_rng(0))
        return self._round1(np.zeros(1, dtype=np.int64), state, np.random.default_rng(0)), state

    @abstractmethod
    def support_counts(self, reports: NDArray) -> NDArray:
        """Support counts of a batch of reports (what the server accumulates)."""

    @abstractmethod
    def _sample_support(self, counts: NDArray[np.int64], n: int, rng: RandomSource) -> NDArray: ...

    @abstractmethod
    def _encode(self, reports: NDArray) -> NDArray[np.uint8]: ...

    @abstractmethod
    def _decode(self, rows: NDArray[np.uint8]) -> NDArray: ...


class OneShot:
    """Mixin of the one-shot oracles: their single ε is spent by every report, no memo."""

    longitudinal: ClassVar[bool] = False
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    eps: float

    @property
    def eps_1(self) -> float:
        """Budget of one report: ε."""
        return self.eps

    @property
    def eps_perm(self) -> float:
        """One-shot oracles memoize nothing; each report spends ε."""
        return self.eps


class Aggregator:
    """Server side: accepts batches of reports incrementally, estimates on demand."""

    def __init__(self, oracle: FrequencyOracle):
        self.oracle = oracle
        self.n = 0
        self._support: NDArray | None = None

    def add(self, reports: NDArray | Sequence[Any]) -> None:
        """Add a batch of report records (as returned by ``perturb`` or ``Client.report``)."""
        batch = _as_report_array(reports)
        counts = self.oracle.support_counts(batch)
        self._support = counts if self._support is None else self._support + counts
        self.n += len(batch)

    def add_bytes(self, data: bytes | Sequence[bytes]) -> None:
        """Add wire-format reports (concatenated, or a sequence of them).

        Every item's header (version, protocol id, parameter fingerprint) and length is checked
        before anything is counted; a bad item raises ``ValueError`` naming its index.
        """
        self.add(self.oracle.decode_reports(data))

    @property
    def support_counts(self) -> NDArray:
        """Support counts of everything added (a copy)."""
        if self._support is None:
            return self.oracle.support_counts(_codec.empty_records(self.oracle))
        return self._support.copy()

    def merge(self, other: Aggregator) -> None:
        """Add another aggregator's counts (e.g. another shard); refuses other protocols."""
        if not isinstance(other, Aggregator):
            raise ValueError(f"merge: expected an Aggregator; got {type(other).__name__}.")
        if other.oracle.spec() != self.oracle.spec():
            raise ValueError(
                f"{self.oracle.name}: cannot merge counts of "
                f"{_codec.canonical_json(other.oracle.spec()).decode()} into "
                f"{_codec.canonical_json(self.oracle.spec()).decode()}."
            )
        if other.n:
            self._support = (
                other.support_counts if self._support is None else self._support + other._support
            )
            self.n += other.n

    def state(self) -> dict[str, Any]:
        """JSON-serializable counts: restore with ``proto.aggregator_from_state(state)``."""
        return {
            "format": _codec.STATE_FORMAT,
            "protocol": self.oracle.spec(),
            "fingerprint": self.oracle.fingerprint().hex(),
            "n": int(self.n),
            "support": np.asarray(self.support_counts).astype(np.int64).tolist(),
        }

    def estimate(self, postprocess: str | pp.PostProcessor | None = None) -> NDArray[np.float64]:
        """Frequencies from everything added so far."""
        if self.n == 0:
            raise ValueError(f"{self.oracle.name}: no reports have been added yet.")
        return self.oracle.estimate(self.support_counts, self.n, postprocess)

    def estimate_with_se(
        self, postprocess: str | pp.PostProcessor | None = None, level: float = 0.95
    ) -> Estimate:
        """:meth:`FrequencyOracle.estimate_with_se` of everything added so far."""
        if self.n == 0:
            raise ValueError(f"{self.oracle.name}: no reports have been added yet.")
        return self.oracle.estimate_with_se(self.support_counts, self.n, postprocess, level)


# ---------------------------------------------------------------------- helpers


def _as_report_array(reports: NDArray | Sequence[Any]) -> NDArray:
    if isinstance(reports, np.ndarray):
        return reports
    items = list(reports)
    if not items:
        raise ValueError("reports: an empty list has no type; pass an empty report array.")
    return np.stack([np.asarray(r) for r in items]) if np.ndim(items[0]) else np.array(items)


def _frequencies(owner: str, f: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(f, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{owner}: 'f' must be frequencies in [0, 1]; got {f!r}.")
    return arr


def _user_index(owner: str, users: ArrayLike | None, m: int, n_users: int) -> NDArray[np.int64]:
    if users is None:
        if m > n_users:
            raise ValueError(f"{owner}: {m} values for a memo of {n_users} users.")
        return np.arange(m, dtype=np.int64)
    who = check.domain_values(owner, users, n_users, "users")
    if who.shape != (m,):
        raise ValueError(f"{owner}: 'users' must have one entry per value ({m}); got {who.shape}.")
    if np.unique(who).size != m:
        raise ValueError(f"{owner}: 'users' must not repeat a user within one call.")
    return who


def _rows(state: dict, mask: NDArray[np.bool_]) -> dict:
    return {name: arr[mask] for name, arr in state.items()}


def set_derived(obj: object, **values: float) -> None:
    """Set derived fields of a frozen dataclass from its ``__post_init__``."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


def grr_round(x: NDArray[np.int64], m: int, keep: float, rng: RandomSource) -> NDArray[np.int64]:
    """Keep x with probability ``keep``, else a uniform *other* symbol of [0, m) ([WAN17] §4.1)."""
    if x.size == 0:
        return x.copy()
    shift = rng.integers(1, m, size=x.shape) if m > 1 else np.zeros(x.shape, dtype=np.int64)
    return np.where(rng.random(x.shape) < keep, x, (x + shift) % m)


def min_bytes(max_value: int) -> int:
    """Bytes needed for an unsigned integer up to ``max_value``."""
    return max(1, math.ceil(max(1, max_value).bit_length() / 8))


def uint_to_bytes(x: NDArray, width: int) -> NDArray[np.uint8]:
    """Big-endian fixed-width bytes of non-negative integers, shape (n, width)."""
    return x.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width :]


def bytes_to_uint(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Inverse of :func:`uint_to_bytes`."""
    padded = np.zeros((rows.shape[0], 8), dtype=np.uint8)
    padded[:, 8 - rows.shape[1] :] = rows
    return padded.view(">u8").ravel().astype(np.int64)
