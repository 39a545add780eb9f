"""The traits every mechanism declares besides its report kind (docs/design.md §2.2).

- **input domain** (:class:`Domain`): what a user's input is and how it is checked:
  :class:`Categorical` codes [0, k) (every frequency oracle), :class:`Strings` (Bloom-filter
  RAPPOR), a :class:`Interval` [lo, hi] of reals (numeric mechanisms) and an
  :class:`ItemSpace` of strings, bytes or b-bit integers too large to list (open domains);
- **estimand** (:class:`Estimand`): what the estimate is;
- **rounds** (:class:`Rounds`): one-shot, a memo chain, or rounds planned by the server;
- **history** (:class:`History`): what a device keeps of its own past values between reports,
  when what it reports depends on them (the change-based mechanisms of docs/math.md §19).

Capabilities are read from these values, never from a protocol's name or from probing its
attributes: the engines that apply (:func:`longldp.simulate.engines_for`), the frequency tests,
post-processing, the count-level sampler, and what a device needs from the server.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy.numeric import numeric_range

# ---------------------------------------------------------------------- input domains


class Domain(ABC):
    """What a mechanism's inputs are; its :meth:`check` is the one validation of inputs.

    ``codes`` is True when inputs are integer codes [0, size): value counts (histograms) of a
    population exist, so the count-level engine and the frequency tests can apply.
    """

    #: Short name shown by ``longldp protocols`` and the generated tables.
    kind: ClassVar[str]
    #: The audits' inputs are listed values an attacker guesses among (the ASR); False for an
    #: open item space, whose audited items are a sample of values nobody listed.
    listed: ClassVar[bool] = True
    #: Inputs are integer codes in [0, size).
    codes: ClassVar[bool] = False
    #: Inputs are real numbers (an interval's): the audit's distinguishing game, which plays
    #: codes or strings, refuses them (docs/audit.md §15).
    numbers: ClassVar[bool] = False

    @property
    @abstractmethod
    def size(self) -> int | None:
        """Number of distinct inputs, or None when they cannot be listed."""

    @abstractmethod
    def check(self, owner: str, values: Any, name: str = "values") -> Any:
        """The inputs, checked: ``ValueError`` naming ``owner`` and ``name`` otherwise."""

    @abstractmethod
    def as_inputs(self, codes: ArrayLike) -> Any:
        """The inputs that integer codes stand for (tests and audits draw inputs with it)."""

    @classmethod
    def setting_params(cls, k: int) -> dict[str, Any]:
        """Constructor parameters that fix this kind of domain at a common listing setting of
        ``k`` values (``longldp protocols``, the shuffle table): none by default."""
        return {}

    @classmethod
    def audit_params(cls, k: int) -> dict[str, Any]:
        """Constructor parameters that fix this kind of domain for the audits at a setting of
        ``k`` audited inputs (``experiments/audit_table.py``): the listing's
        (:meth:`setting_params`) unless a domain whose listing is too large for the exact
        channel and the game (an open domain's sketch width) says otherwise."""
        return cls.setting_params(k)

    def describe(self) -> str:
        """One line for listings: the kind and its size or range."""
        return self.kind if self.size is None else f"{self.kind}[{self.size}]"

    @property
    def audit_size(self) -> int | None:
        """Distinct inputs :meth:`as_inputs` gives the audits (codes 0..audit_size − 1): the
        domain's size when it is listed, 2 for an interval (its ends), None otherwise."""
        return self.size if self.codes else None

    def trajectories(self, owner: str, trajectories: Any) -> NDArray:
        """(n, τ) trajectories of inputs that are not codes, checked for the privacy ledger
        (:func:`longldp.privacy.ledger`; codes are checked there): refused unless the domain
        says how (an interval's numbers)."""
        raise ValueError(
            f"{owner}: the inputs are {self.describe()}, not codes or numbers; the ledger needs "
            "(n, tau) codes or numbers."
        )


@dataclass(frozen=True)
class Categorical(Domain):
    """Integer codes [0, size) (``booleans``: False/True accepted as 0/1)."""

    n: int
    booleans: bool = False
    kind: ClassVar[str] = "categorical"
    codes: ClassVar[bool] = True

    @classmethod
    def setting_params(cls, k: int) -> dict[str, Any]:
        return {"k": k}

    @property
    def size(self) -> int:
        return self.n

    def check(self, owner: str, values: Any, name: str = "values") -> NDArray[np.int64]:
        arr = np.asarray(values)
        if self.booleans and arr.dtype == bool:
            arr = arr.astype(np.int64)
        return check.domain_values(owner, arr, self.n, name)

    def as_inputs(self, codes: ArrayLike) -> NDArray[np.int64]:
        return (
            np.asarray(codes, dtype=np.int64) % self.n
            if self.booleans
            else np.asarray(codes, dtype=np.int64)
        )


@dataclass(frozen=True)
class Strings(Domain):
    """Strings or bytes of any content (Bloom-filter RAPPOR hashes them)."""

    prefix: str = "value-"
    kind: ClassVar[str] = "strings"

    @property
    def size(self) -> None:
        return None

    def check(self, owner: str, values: Any, name: str = "values") -> list[Any]:
        vals = [values] if isinstance(values, (str, bytes)) else list(values)
        bad = next((v for v in vals if not isinstance(v, (str, bytes, np.str_, np.bytes_))), None)
        if bad is not None:
            raise ValueError(f"{owner}: '{name}' must be strings or bytes; got {bad!r}.")
        return vals

    def as_inputs(self, codes: ArrayLike) -> list[str]:
        """``"<prefix><code>"`` for every code."""
        return [f"{self.prefix}{int(c)}" for c in np.asarray(codes).ravel()]


@dataclass(frozen=True)
class Interval(Domain):
    """Reals in [lo, hi] (the numeric mechanisms).

    NaN and ±inf are always refused. A value outside [lo, hi] is refused unless ``clip`` is
    True; then it is clipped and :meth:`clip_values` says how many were (the caller reports it:
    nothing is silently clipped).
    """

    lo: float
    hi: float
    clip: bool = False
    kind: ClassVar[str] = "interval"
    numbers: ClassVar[bool] = True

    @classmethod
    def setting_params(cls, k: int) -> dict[str, Any]:
        """The unit interval [0, 1] (a listing compares budgets, not ranges)."""
        return {"lo": 0.0, "hi": 1.0}

    def __post_init__(self) -> None:
        # the one check of a declared range (finite, lo < hi, a finite width): math §20.1
        numeric_range("Interval", self.lo, self.hi)

    @property
    def size(self) -> None:
        return None

    def describe(self) -> str:
        return f"interval[{self.lo:g}, {self.hi:g}]"

    def clip_values(
        self, owner: str, values: Any, name: str = "values"
    ) -> tuple[NDArray[np.float64], int]:
        """(the values as floats, clipped to [lo, hi] when ``clip``; how many were outside)."""
        arr = np.asarray(values)
        if arr.dtype == bool or arr.dtype.kind not in "iuf":
            raise ValueError(f"{owner}: '{name}' must be real numbers; got dtype {arr.dtype}.")
        x = arr.astype(np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{owner}: '{name}' must be finite (no NaN or inf).")
        outside = (x < self.lo) | (x > self.hi)
        count = int(np.count_nonzero(outside))
        if count and not self.clip:
            bad = float(x[outside].flat[0])
            raise ValueError(
                f"{owner}: '{name}' must lie in [{self.lo:g}, {self.hi:g}] (or ask for "
                f"clipping); got {bad!r} and {count - 1} more outside."
            )
        return (np.clip(x, self.lo, self.hi) if count else x), count

    def check(self, owner: str, values: Any, name: str = "values") -> NDArray[np.float64]:
        return self.clip_values(owner, values, name)[0]

    def trajectories(self, owner: str, trajectories: Any) -> NDArray[np.float64]:
        """An (n, τ) array of numbers, τ ≥ 1, checked as :meth:`check` checks values (finite,
        in [lo, hi] unless ``clip``)."""
        arr = np.asarray(trajectories)
        if arr.ndim != 2 or arr.shape[1] < 1:
            raise ValueError(
                f"{owner}: 'trajectories' must be a 2-D (n, tau) array with tau >= 1; got "
                f"shape {arr.shape}."
            )
        return self.check(owner, arr, "trajectories")

    @property
    def audit_size(self) -> int:
        """The two ends (:meth:`as_inputs`)."""
        return 2

    def as_inputs(self, codes: ArrayLike) -> NDArray[np.float64]:
        """Codes c ↦ lo + (c mod 2)·(hi − lo): the two ends of the interval (the audit's
        most distant pair of inputs)."""
        c = np.asarray(codes, dtype=np.int64) % 2
        return self.lo + c * (self.hi - self.lo)


@dataclass(frozen=True)
class ItemSpace(Domain):
    """An open domain: strings or bytes (``bits`` None) or b-bit unsigned integers, too large to
    list (the open-domain mechanisms); the estimate is for queried items, never a full vector."""

    bits: int | None = None
    kind: ClassVar[str] = "items"
    listed: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.bits is not None:
            check.integer("ItemSpace", "bits", self.bits, minimum=1, maximum=64)

    @classmethod
    def setting_params(cls, k: int) -> dict[str, Any]:
        """A sketch of m = 1024 columns over the open item space (a listing's k values are
        not the domain here; the sketch's width is, and 1024 ≫ k keeps collisions rare)."""
        return {"m": 1024}

    @classmethod
    def audit_params(cls, k: int) -> dict[str, Any]:
        """A sketch of m = 4 columns: a report's channel over its 2^m bit patterns stays small
        enough to enumerate and to play the game on (the sketches' ε does not depend on m,
        docs/math.md §21)."""
        return {"m": 4}

    @property
    def audit_size(self) -> int:
        """Two items (:meth:`as_inputs` of codes 0 and 1): an open domain's audited pair."""
        return 2

    @property
    def size(self) -> int | None:
        return None if self.bits is None else 1 << self.bits

    def describe(self) -> str:
        return "items[bytes]" if self.bits is None else f"items[2^{self.bits}]"

    def check(self, owner: str, values: Any, name: str = "values") -> Any:
        if self.bits is None:
            return Strings().check(owner, values, name)
        arr = np.asarray(values)
        if arr.dtype == bool or arr.dtype.kind not in "iu":
            raise ValueError(f"{owner}: '{name}' must be integers; got dtype {arr.dtype}.")
        if arr.size and (arr.min() < 0 or (self.bits < 64 and int(arr.max()) >> self.bits)):
            raise ValueError(
                f"{owner}: '{name}' must be integers in [0, 2^{self.bits}); got values outside."
            )
        return arr.astype(np.uint64)

    def as_inputs(self, codes: ArrayLike) -> Any:
        c = np.asarray(codes, dtype=np.int64).ravel()
        if self.bits is None:
            return [f"item-{int(v)}".encode() for v in c]
        return c.astype(np.uint64)


# ---------------------------------------------------------------------- estimands


class Estimand(enum.StrEnum):
    """What a mechanism's estimate is (its estimator's target)."""

    #: A vector of value frequencies over the domain (fractions of n, summing to 1).
    FREQUENCIES = "frequencies"
    #: RAPPOR's per-cohort shares of clients whose encoded bit is set (m × k).
    COHORT_SHARES = "cohort-shares"
    #: The mean of a numeric attribute (with its variance in the worst case and at the data).
    MEAN = "mean"
    #: A distribution over the buckets of a numeric domain (e.g. EMS), summing to 1.
    DISTRIBUTION = "distribution"
    #: Frequencies of queried items of an open domain (no full vector exists).
    QUERIED_ITEMS = "queried-items"
    #: The frequent items of an open domain themselves, found by the server's rounds from one
    #: collection's reports (the estimator's ``discover``), with their frequencies.
    DISCOVERED_ITEMS = "discovered-items"
    #: The parts of frequencies tracked over epochs that one epoch's reports estimate (an
    #: initial histogram, net flows over dyadic nodes of time, a share of changed users, the
    #: estimates of an update round); the mechanism's ``release`` (or its kernel) combines them
    #: over epochs (the change-based mechanisms, docs/math.md §19.3–§19.5).
    CHANGE_PARTS = "change-parts"

    @property
    def frequency_vector(self) -> bool:
        """A vector of value frequencies: the frequency tests, post-processing to a total of 1
        and the count-level engine (from value counts) apply."""
        return self is Estimand.FREQUENCIES

    @property
    def on_simplex(self) -> bool:
        """The estimate is a distribution (post-processing to a total of 1 applies)."""
        return self in (Estimand.FREQUENCIES, Estimand.DISTRIBUTION)


# ---------------------------------------------------------------------- rounds


class Rounds(enum.StrEnum):
    """How a mechanism's reports are organised in time."""

    #: Every report randomized afresh, nothing kept (one-shot oracles).
    ONE_SHOT = "one-shot"
    #: Non-interactive memo chain: round 1 memoized per memo key, round 2 per report.
    MEMO_CHAIN = "memo-chain"
    #: The server plans each epoch or round (budget, who reports, candidate prefixes) and
    #: sends a device a small JSON plan before it reports (docs/design.md §2.5).
    PLANNED = "planned"

    @property
    def planned(self) -> bool:
        """The server must send a plan before each epoch or round."""
        return self is Rounds.PLANNED


# ---------------------------------------------------------------------- history


@dataclass(frozen=True)
class History:
    """What a device keeps of its own past between reports: the trait of a history-dependent
    mechanism (docs/design.md §2.5), whose report at an epoch is a function of the value *and*
    of the device's earlier values (a node's two ends, the value at the last update).

    ``fields`` names the per-device history: integer arrays with one row per device (a scalar or
    a short vector each; ``description`` says what they hold). The mechanism creates them
    (``new_history``) and advances them report by report (``history_step``); the one client
    (:class:`longldp.protocols.Client`) and the device client keep them (the device in its state
    file, across restarts), and the population path carries them per user
    (:class:`longldp.protocols._memo.PopulationMemo`'s ``history``). The history never leaves
    the device: a report carries only the randomization of its *report input*.
    """

    fields: tuple[str, ...]
    description: str

    def __post_init__(self) -> None:
        if not self.fields or not all(isinstance(f, str) and f for f in self.fields):
            raise ValueError(f"History: 'fields' must be non-empty names; got {self.fields!r}.")
