"""Report kinds: what one report is, as an object the audit, the attacks and the server ask.

Every mechanism class declares ``report_kind``, an instance of a :class:`ReportKind` subclass
(docs/design.md §2.3). The kind answers, from the mechanism's public parameters, every question
that used to be an ``isinstance`` chain in the packages above:

- its **output space** (:meth:`ReportKind.output_space_size`) and, for a discrete report, its
  **exact channel** (:meth:`ReportKind.channel`), computed from the very probabilities the
  sampler draws with (docs/math.md §13.1);
- the **attacker's view** (docs/math.md §13.2): the sufficient statistic a client's reports
  reduce to (``statistic``: one of ``width`` *symbols* per report, or ``width`` independent
  *bits*), each report's :meth:`~ReportKind.observe`, and the symbol or bit mask each candidate
  value points at (:meth:`~ReportKind.targets`, :meth:`~ReportKind.value_table`);
- what a **fake report** can do (:meth:`ReportKind.attack_kind`, docs/attacks.md §1) and, for
  reports naming a public function, the **hash family** (:class:`HashFamily`).

A family adds a kind by subclassing :class:`ReportKind` in its own module; nothing else in the
package lists the kinds. A continuous report (a float) subclasses :class:`ContinuousReport`:
it has no exact channel, and the audit runs its binned black-box game instead.

Kinds compare equal to their name (``proto.report_kind == "bits"``), and ``str(kind)`` is the
name that ``ll.protocols()`` and the generated tables show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.privacy.channels import bit_matrix, grr_matrix, unary_channel

#: Forms of the attacker's sufficient statistic.
STATISTICS = ("symbols", "bits")
#: Largest number of outputs an enumerated channel may have (2^16 unary-encoded vectors).
MAX_OUTPUTS = 1 << 16
#: Hash functions drawn from a per-user family to take the worst ε over (docs/math.md §13.1).
HASH_DRAWS = 40


@dataclass(frozen=True)
class ExactChannel:
    """The exact channel of one report: ``single[i][x, y]`` = Pr[report y | input x] given the
    i-th public per-user function (a hash function, a Hadamard row; one matrix when the report
    names none), and ``first_round`` the same for the memoized round 1 alone.

    ``exhaustive``: every function of the family is listed, each equally likely (so averages
    over them are exact); False when the family is too large and the matrices are for a sample
    of it (the worst case over the sample is then the ε of every function that is not
    degenerate, since given the function the report is the same chain).
    """

    single: tuple[NDArray[np.float64], ...]
    first_round: tuple[NDArray[np.float64], ...]
    exhaustive: bool = True


@dataclass(frozen=True)
class HashFamily:
    """The public family of per-user functions H: inputs → [0, range) that a report names by its
    hash id (local hashing, LOLOHA, the Hadamard rows, an open domain's sketch rows).

    Attributes
    ----------
    mechanism : the mechanism whose family it is (it computes H through its public methods
        ``hash_buckets``, ``hash_records`` and ``new_hash_ids``).
    size : functions in the family (a public hash pool, the Hadamard rows), or None when every
        user draws her own seed (the family cannot be listed).
    range : g, the number of buckets.
    """

    mechanism: Any
    size: int | None
    range: int

    def buckets(self, ids: ArrayLike, values: ArrayLike) -> NDArray[np.int64]:
        """H_id(v), broadcasting ``ids`` against ``values``."""
        return self.mechanism.hash_buckets(ids, values)

    def records(self, ids: ArrayLike, buckets: ArrayLike) -> NDArray:
        """Report records (hash id, bucket), as the mechanism's ``support_counts`` takes them."""
        return self.mechanism.hash_records(ids, buckets)

    def draw(self, m: int, rng: Any) -> NDArray[np.int64]:
        """Hash ids of m new users, as their clients draw them."""
        return self.mechanism.new_hash_ids(m, rng)

    def ids(self) -> NDArray[np.int64] | None:
        """Every id of a listed family, or None (per-user seeds)."""
        return None if self.size is None else np.arange(self.size, dtype=np.int64)


class ReportKind:
    """What one report is; subclasses answer for one family's reports (module docstring).

    Methods take the mechanism as their first argument (kinds are stateless singletons).
    """

    #: The kind's name (what listings show; kinds compare equal to it).
    name: ClassVar[str]
    #: False for continuous reports (a float: the audit bins them for its black-box game).
    discrete: ClassVar[bool] = True
    #: :meth:`channel` gives the exact channel (every discrete kind; a continuous kind whose
    #: densities are piecewise constant, over the cells where every input's density is).
    exact: ClassVar[bool] = True
    #: The attacker's sufficient statistic: "symbols" (one of ``width`` per report) or "bits"
    #: (``width`` independent bits per report).
    statistic: ClassVar[str]

    # -- identity
    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<report kind {self.name!r}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReportKind):
            return self.name == other.name
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    # -- sizes and the exact channel
    def output_space_size(self, proto: Any) -> int | None:
        """Number of distinct reports, or None when unbounded (per-user hash seeds)."""
        raise NotImplementedError(f"{proto.name}: report kind {self.name!r} has no output space.")

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        """The exact one-report and round-1 channels (``rng`` draws a sample of a per-user
        family of functions when it cannot be listed)."""
        raise ValueError(f"{proto.name}: report kind {self.name!r} has no exact channel.")

    # -- the attacker's view (docs/math.md §13.2)
    def width(self, proto: Any) -> int:
        """Symbols (or bits) the attacker counts per report."""
        raise NotImplementedError

    def observe(self, proto: Any, reports: NDArray) -> NDArray:
        """Per report: its symbol (n,) or its bits (n, width) as 0/1."""
        raise NotImplementedError

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray:
        """What each candidate input points at, per reporting client: the symbol (n, V) that
        supports it, or the mask (n or 1, V, width) of the bits it sets. ``values`` are V inputs
        of the mechanism's domain; ``reports`` carry the clients' public per-user state."""
        raise NotImplementedError

    def value_table(self, proto: Any) -> NDArray | None:
        """:meth:`targets` of every audited input under every function of a listed family:
        (F, V) symbols or (F, V, width) masks; None when the family cannot be listed."""
        return None

    def log_likelihoods(
        self, proto: Any, reports: Any, values: Any, memoized: bool
    ) -> NDArray[np.float64] | None:
        """(n, V) ln Pr[the τ reports of client i | input v] when the kind computes the law of
        its reports itself (the numeric kinds, docs/math.md §20), else None (the audit's own
        route over symbols and bits)."""
        return None

    def symbol_channel(self, proto: Any) -> NDArray[np.float64] | None:
        """Pr[symbol | input] when a symbol report is not keep-or-other (an enumerated channel);
        None for the chains whose symbols follow GRR's keep/other law."""
        return None

    def differing_bits(self, proto: Any) -> tuple[int, int]:
        """Bit reports: the most bits one input sets and another does not, both ways."""
        return (1, 1)

    def indistinguishable(self, proto: Any, a: Any, b: Any) -> str | None:
        """Why two inputs give reports of the same law (so no game can tell them apart), or
        None; e.g. two values of one dBitFlipPM bucket."""
        return None

    # -- attacks and hashing
    def attack_kind(self, proto: Any) -> str:
        """What a fake report of this kind can do (docs/attacks.md §1); ``ValueError`` with the
        reason when no attack applies (the attacks prefix it with their own name)."""
        raise ValueError(
            f"no attack knows report kind {self.name!r} of '{proto.name}'; its reports are "
            "opaque to the attacks."
        )

    def hash_family(self, proto: Any) -> HashFamily | None:
        """The public function family a report names, or None."""
        return None


# ---------------------------------------------------------------------- generic kinds


class SymbolReports(ReportKind):
    """One symbol of [0, k) that supports the value it names (GRR, L-GRR)."""

    name: ClassVar[str] = "symbol"
    statistic: ClassVar[str] = "symbols"

    def output_space_size(self, proto: Any) -> int:
        return int(proto.k)

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        r1 = grr_matrix(proto.p1, proto.k)
        return ExactChannel((r1 @ grr_matrix(proto.p2, proto.k),), (r1,))

    def width(self, proto: Any) -> int:
        return int(proto.k)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return np.asarray(reports, dtype=np.int64)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.int64]:
        vals = np.atleast_1d(np.asarray(values, dtype=np.int64))
        return np.broadcast_to(vals, (np.asarray(reports).shape[0], vals.size))

    def value_table(self, proto: Any) -> NDArray[np.int64]:
        return np.arange(proto.k, dtype=np.int64)[None, :]

    def attack_kind(self, proto: Any) -> str:
        return "symbol"


class BitReports(ReportKind):
    """k independent bits, bit v supporting value v (the unary encodings)."""

    name: ClassVar[str] = "bits"
    statistic: ClassVar[str] = "bits"

    def output_space_size(self, proto: Any) -> int:
        return 2 ** int(proto.k)

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        _check_outputs(proto, 2**proto.k)
        b1 = bit_matrix(proto.p1, proto.q1)
        both = b1 @ bit_matrix(proto.p2, proto.q2)
        return ExactChannel((unary_channel(proto.k, both),), (unary_channel(proto.k, b1),))

    def width(self, proto: Any) -> int:
        return int(proto.k)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.uint8]:
        return np.unpackbits(np.asarray(reports), axis=1, count=proto.k)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.bool_]:
        vals = np.atleast_1d(np.asarray(values, dtype=np.int64))
        return (vals[:, None] == np.arange(proto.k)[None, :])[None]

    def value_table(self, proto: Any) -> NDArray[np.bool_]:
        return np.eye(proto.k, dtype=bool)[None]

    def attack_kind(self, proto: Any) -> str:
        return "unary"


class EnumeratedReports(ReportKind):
    """A one-shot report whose channel the mechanism enumerates itself: it provides
    ``report_space_size()``, ``report_channel()`` (Pr[report | input], computed from the
    sampler's own probabilities) and ``report_index(records)`` (the column of each report)."""

    name: ClassVar[str] = "enumerated"
    statistic: ClassVar[str] = "symbols"

    def output_space_size(self, proto: Any) -> int:
        return int(proto.report_space_size())

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        if proto.longitudinal:
            raise ValueError(f"{proto.name}: the audit enumerates one-shot reports only.")
        _check_outputs(proto, self.output_space_size(proto))
        ch = proto.report_channel()
        return ExactChannel((ch,), (ch,))

    def width(self, proto: Any) -> int:
        return self.output_space_size(proto)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return proto.report_index(reports)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.int64]:
        """The channel row of each value (the symbol channel gives its law)."""
        vals = np.atleast_1d(np.asarray(values, dtype=np.int64))
        return np.broadcast_to(vals, (np.asarray(reports).shape[0], vals.size))

    def symbol_channel(self, proto: Any) -> NDArray[np.float64]:
        return proto.report_channel()


class ContinuousReport(ReportKind):
    """Base of continuous reports (a float; numeric mechanisms, docs/math.md §20): no exact
    channel and no finite output space, so the audit refuses the exact check and bins the
    reports for its black-box game (:meth:`bin_edges`). A numeric family subclasses it with its
    codec."""

    discrete: ClassVar[bool] = False
    exact: ClassVar[bool] = False
    statistic: ClassVar[str] = "symbols"
    #: Bins of the black-box game's histogram of the reports.
    bins: ClassVar[int] = 64

    def output_space_size(self, proto: Any) -> None:
        return None

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        raise ValueError(
            f"{proto.name}: its reports are continuous (report kind {self.name!r}): no exact "
            "channel; audit it with the binned black-box game (longldp.audit.audit_randomizer)."
        )

    def report_range(self, proto: Any) -> tuple[float, float]:
        """The interval every report lies in (the mechanism's output range)."""
        raise NotImplementedError

    def bin_edges(self, proto: Any) -> NDArray[np.float64]:
        """``bins`` + 1 equal-width edges over :meth:`report_range`."""
        lo, hi = self.report_range(proto)
        return np.linspace(lo, hi, self.bins + 1)

    def width(self, proto: Any) -> int:
        return self.bins

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        """The bin of each report."""
        edges = self.bin_edges(proto)
        at = np.searchsorted(edges, np.asarray(reports), side="right") - 1
        return np.clip(at, 0, self.bins - 1)


def _check_outputs(proto: Any, size: int) -> None:
    if size > MAX_OUTPUTS:
        raise ValueError(
            f"{proto.name}: the exact audit enumerates the channel; k = {proto.k} gives {size} "
            f"outputs, more than the {MAX_OUTPUTS} allowed; use a smaller k."
        )


def hash_channel(
    proto: Any, family: HashFamily, per_bucket: tuple[NDArray, NDArray], rng: np.random.Generator
) -> ExactChannel:
    """The channel of a report (hash id, bucket): given H, Pr[y | v] = per_bucket[H(v), y].

    A listed family of at most ``HASH_DRAWS`` functions is enumerated; otherwise ``HASH_DRAWS``
    functions are drawn as the clients draw them. The id is public and independent of v, so the
    worst function is the privacy loss (docs/math.md §13.1).
    """
    values = np.arange(proto.k, dtype=np.int64)
    ids = family.ids()
    exhaustive = ids is not None and ids.size <= HASH_DRAWS
    if not exhaustive:
        ids = np.concatenate([family.draw(1, rng) for _ in range(HASH_DRAWS)])
    assert ids is not None
    tables = family.buckets(ids[:, None], values[None, :])
    single, first = per_bucket
    return ExactChannel(
        tuple(single[t] for t in tables), tuple(first[t] for t in tables), exhaustive
    )


__all__ = [
    "HASH_DRAWS",
    "MAX_OUTPUTS",
    "STATISTICS",
    "BitReports",
    "ContinuousReport",
    "EnumeratedReports",
    "ExactChannel",
    "HashFamily",
    "ReportKind",
    "SymbolReports",
    "hash_channel",
]
