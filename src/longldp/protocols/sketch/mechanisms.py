"""The sketch oracles as registered mechanisms: CMS, HCMS, PCS, SHE, THE, L-CMS, L-HCMS.

Each class is the three roles of docs/design.md §2 over an open item space
(:class:`SketchItems`: strings of at most ``max_length`` characters, or ``bits``-bit unsigned
integers): the **mechanism** draws its reports with the kernels of
:mod:`longldp.protocols.sketch.oracles` and claims the exact ε of
:mod:`longldp.privacy.sketch` (one formula, one place); the **estimator**
(:class:`SketchEstimator`, estimand ``queried-items``) answers for the items it is asked about,
with the variance of docs/math.md (21.4) whose collision term uses Σf² estimated from the sketch
itself (docs/math.md §21.12); the **codec** writes fixed-width bodies.

Support (what the server accumulates, one timestamp): a (d, m + 1) integer table, column 0 the
reports of each row and column 1 + c the set bits of column c (CMS, PCS, THE, L-CMS) or the
Laplace sums (SHE, floats); HCMS keeps (d, 2m): the reports per (row, Hadamard row l), then
those with bit 1. The estimate (:meth:`SketchEstimator.unbiased`) is the debiased (d, m)
sketch E, whose cells sum to a queried item's f̂ = Σ_j E[j, h_j(x)] (PCS: Σ_j g_j(x)·E[j, h_j(x)]);
:meth:`SketchEstimator.query` gives f̂ of items with standard errors and intervals.

Linkage (docs/math.md §17.4): the one-shot oracles draw their row (and HCMS its Hadamard row)
afresh for every report, so nothing persists; the memoized forms keep the row J (a hash
function of the public pool of d, sent in every report: ``hash seed``), L-HCMS also its
Hadamard row l, and a memo per memo key (the column, or the parity bit).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.privacy import sketch as formulas
from longldp.privacy.channels import bit_matrix, unary_channel
from longldp.privacy.linkage import Linkage, Persistent
from longldp.protocols._estimate import Estimate, normal_quantile
from longldp.protocols._memo import DenseMemoStore, MemoStore, make_memo_store
from longldp.protocols._rng import RandomSource, as_random_source
from longldp.protocols.base import bytes_to_uint, min_bytes, uint_to_bytes
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import Aggregator, Estimator
from longldp.protocols.hadamard import fwht, hadamard_parity
from longldp.protocols.mechanism import Mechanism
from longldp.protocols.report_kinds import (
    ContinuousReport,
    ExactChannel,
    HashFamily,
    ReportKind,
)
from longldp.protocols.sketch import oracles
from longldp.protocols.sketch.items import _as_text_array, _check_lengths, text_keys
from longldp.protocols.traits import Estimand, ItemSpace

#: Largest number of columns the audits enumerate (2^m outputs per row).
AUDIT_MAX_M = 12
#: SHE's coordinates are multiples of 2^-20 in [−2^20, 2^20] (clipped there: post-processing,
#: reached with probability below e^-500 at ε ≥ 0.004): float64 (53 bits) sums them exactly
#: while a sum stays below 2^33 in absolute value, so the server's sums are associative.
SHE_GRID = 2.0**-20
SHE_LIMIT = 2.0**20


# --------------------------------------------------------------------------------------------
# The input domain
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SketchItems(ItemSpace):
    """An open item space with its declared bound: text of at most ``max_length`` characters
    (``bits`` None; str or UTF-8 bytes, no NUL) or ``bits``-bit unsigned integers.

    :meth:`keys` is the one validation and hashing of inputs: the 64-bit keys of
    docs/math.md §21.1 (text: :func:`~longldp.protocols.sketch.items.text_keys`; integers: the
    value). Every refusal is one ``ValueError`` line: no items, a string over the declared
    length, bytes that are not UTF-8, a NUL, a non-string, an integer outside [0, 2^bits).
    """

    max_length: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        check.integer("SketchItems", "max_length", self.max_length, minimum=1, maximum=1 << 16)

    def describe(self) -> str:
        if self.bits is None:
            return f"items[text<={self.max_length}]"
        return super().describe()

    def check(self, owner: str, values: Any, name: str = "values") -> Any:
        self.keys(owner, values, name)
        return values if self.bits is None else super().check(owner, values, name)

    def keys(self, owner: str, values: Any, name: str = "values") -> NDArray[np.uint64]:
        """The 64-bit keys of ``values`` (a sequence of items; a single str or bytes is one)."""
        if self.bits is not None:
            arr = np.asarray(values)
            if arr.ndim > 1:
                raise ValueError(f"{owner}: '{name}' must be 1-D; got shape {arr.shape}.")
            return np.atleast_1d(super().check(owner, arr, name)).astype(np.uint64)
        items = [values] if isinstance(values, (str, bytes)) else values
        if not isinstance(items, np.ndarray) or items.dtype.kind not in "US":
            items = list(items)
            bad = next((v for v in items if not isinstance(v, (str, bytes))), None)
            if bad is not None:
                raise ValueError(f"{owner}: {name} must be str (UTF-8) or bytes; got {bad!r}.")
        try:
            return text_keys(items, self.max_length, owner)
        except ValueError as err:
            raise ValueError(str(err).replace("'items'", f"'{name}'", 1)) from None

    def texts(self, owner: str, values: Any) -> NDArray[np.str_]:
        """Text items as a NumPy string array, checked (length, UTF-8, NUL)."""
        arr = _as_text_array(owner, values)
        _check_lengths(owner, arr, np.char.str_len(arr), self.max_length)
        return arr

    def as_inputs(self, codes: ArrayLike) -> Any:
        """Code c ↦ the text ``"item-<c>"`` (or the integer c mod 2^bits)."""
        c = np.asarray(codes, dtype=np.int64).ravel()
        if self.bits is None:
            return [f"item-{int(v)}" for v in c]
        return (
            (c.astype(np.uint64) & np.uint64((1 << self.bits) - 1))
            if self.bits < 64
            else (c.astype(np.uint64))
        )


# --------------------------------------------------------------------------------------------
# Report kinds
# --------------------------------------------------------------------------------------------


class _SketchKind(ReportKind):
    """Reports naming a row of the sketch's public hash family (d functions onto m columns)."""

    def hash_family(self, proto: Any) -> HashFamily:
        return HashFamily(proto, proto.d, proto.m)

    def _columns(self, proto: Any, values: Any = None) -> NDArray[np.int64]:
        """(V, d): the column of each audited input (``proto.k`` of them) in every row."""
        if proto.m > AUDIT_MAX_M:
            raise ValueError(
                f"{proto.name}: the exact audit enumerates 2^m outputs per row; m = {proto.m} "
                f"is more than {AUDIT_MAX_M}: use a smaller m."
            )
        vals = proto.as_inputs(np.arange(proto.k)) if values is None else values
        return proto.item_columns(vals)

    def attack_kind(self, proto: Any) -> str:
        raise ValueError(
            f"'{proto.name}' estimates queried items of an open domain (estimand "
            "'queried-items', estimates_frequencies is False), not a frequency vector over "
            "listed values, so a gain on target values is undefined; no attack knows its "
            "reports."
        )


class _OneShotSketchKind(_SketchKind):
    """A one-shot sketch report (row j, payload y): the row is uniform and independent of the
    input, so Pr[(j, y) | x] = Pr[y | h_j(x)]/d. The channel per row (:meth:`per_row`) is the
    audit's family of functions; the attacker's symbol is the pair (j, y), whose law
    (:meth:`symbol_channel`) the class enumerates."""

    statistic: ClassVar[str] = "symbols"

    def payloads(self, proto: Any) -> int:
        """Distinct payloads y of one row."""
        raise NotImplementedError

    def per_row(self, proto: Any, values: Any = None) -> tuple[NDArray[np.float64], ...]:
        """Per row j, Pr[y | x] for the audited inputs (V, payloads)."""
        raise NotImplementedError

    def payload_index(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        """The index of each report's payload in the order of :meth:`per_row`'s columns."""
        raise NotImplementedError

    def output_space_size(self, proto: Any) -> int:
        return int(proto.d) * self.payloads(proto)

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        rows = self.per_row(proto)
        return ExactChannel(rows, rows)

    def symbol_channel(self, proto: Any) -> NDArray[np.float64]:
        return np.hstack(self.per_row(proto)) / proto.d

    def width(self, proto: Any) -> int:
        return self.output_space_size(proto)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        rep = np.asarray(reports)
        return rep["hash_id"].astype(np.int64) * self.payloads(proto) + self.payload_index(
            proto, rep
        )

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.int64]:
        """The channel row of each value (the symbol channel gives its law)."""
        size = len(values) if not isinstance(values, np.ndarray) else values.size
        return np.broadcast_to(np.arange(size), (np.asarray(reports).shape[0], size))


def _bit_index(proto: Any, reports: NDArray) -> NDArray[np.int64]:
    """A packed m-bit payload as the integer of its bits, the first bit most significant (the
    lexicographic order of :func:`~longldp.privacy.channels.unary_channel`)."""
    bits = np.ascontiguousarray(np.asarray(reports)["bits"])
    if proto.m > AUDIT_MAX_M:
        raise ValueError(f"{proto.name}: the attacker's symbols are enumerated for m <= 12.")
    word = np.zeros(bits.shape[0], dtype=np.int64)
    for b in range(bits.shape[1]):
        word = (word << 8) | bits[:, b]
    return word >> (8 * bits.shape[1] - proto.m)


class SketchBitReports(_OneShotSketchKind):
    """(row j, m bits): bit h_j(x) set with P1, every other with q (CMS, THE)."""

    name: ClassVar[str] = "sketch-bits"

    def payloads(self, proto: Any) -> int:
        return 2 ** int(proto.m)

    def per_row(self, proto: Any, values: Any = None) -> tuple[NDArray[np.float64], ...]:
        cols = self._columns(proto, values)
        ch = unary_channel(proto.m, bit_matrix(proto.p1, proto.q1))
        return tuple(ch[cols[:, j]] for j in range(proto.d))

    def payload_index(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return _bit_index(proto, reports)


class SignedSketchReports(_OneShotSketchKind):
    """(row j, m bits) of the private count sketch: uniform bits but for bit h_j(x), which is
    [g_j(x)·σ = +1], σ = +1 with P1. Given the row, an input is (column, sign)."""

    name: ClassVar[str] = "signed-sketch-bits"

    def payloads(self, proto: Any) -> int:
        return 2 ** int(proto.m)

    def per_row(self, proto: Any, values: Any = None) -> tuple[NDArray[np.float64], ...]:
        vals = proto.as_inputs(np.arange(proto.k)) if values is None else values
        cols = self._columns(proto, vals)
        sg = oracles.query_signs(proto.cfg, proto.item_keys(vals))
        outputs = np.array(list(itertools.product((0, 1), repeat=proto.m)), dtype=bool)
        keep = proto.p1
        rows = []
        for j in range(proto.d):
            # Pr[y | (c, s)] = ½^{m−1} · (keep if y_c = [s = +1] else 1 − keep)
            hit = outputs[:, cols[:, j]].T == (sg[:, j] > 0)[:, None]
            rows.append(np.where(hit, keep, 1 - keep) * 0.5 ** (proto.m - 1))
        return tuple(rows)

    def payload_index(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return _bit_index(proto, reports)


class HadamardSketchReports(_OneShotSketchKind):
    """(row j, Hadamard row l, bit): l uniform, the bit the parity of (l, h_j(x)) kept with P1
    (HCMS). Given the row, the payload (l, bit) has Pr = RR(bit | parity)/m."""

    name: ClassVar[str] = "sketch-hadamard"

    def payloads(self, proto: Any) -> int:
        return 2 * int(proto.m)

    def per_row(self, proto: Any, values: Any = None) -> tuple[NDArray[np.float64], ...]:
        cols = self._columns(proto, values)
        rr = np.array([[proto.p1, 1 - proto.p1], [1 - proto.p1, proto.p1]])
        rows = []
        for j in range(proto.d):
            par = hadamard_parity(cols[:, j, None], np.arange(proto.m)[None, :])  # (V, l)
            rows.append(rr[par].reshape(par.shape[0], -1) / proto.m)  # columns (l, bit)
        return tuple(rows)

    def payload_index(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        rep = np.asarray(reports)
        return rep["l"].astype(np.int64) * 2 + rep["bit"].astype(np.int64)


class MemoSketchBitReports(_SketchKind):
    """(row J, m bits) of L-CMS: the device's row is fixed; bit h_J(x) of the memo is set with
    p1, every other with q1, and each report re-draws every bit (p2, q2). The attacker counts
    each bit over a device's reports (statistic ``bits``)."""

    name: ClassVar[str] = "memo-sketch-bits"
    statistic: ClassVar[str] = "bits"

    def output_space_size(self, proto: Any) -> int:
        return int(proto.d) * 2 ** int(proto.m)

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        cols = self._columns(proto)
        b1 = bit_matrix(proto.p1, proto.q1)
        both = b1 @ bit_matrix(proto.p2, proto.q2)
        single, first = unary_channel(proto.m, both), unary_channel(proto.m, b1)
        return ExactChannel(
            tuple(single[cols[:, j]] for j in range(proto.d)),
            tuple(first[cols[:, j]] for j in range(proto.d)),
        )

    def width(self, proto: Any) -> int:
        return int(proto.m)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.uint8]:
        bits = np.ascontiguousarray(np.asarray(reports)["bits"])
        return np.unpackbits(bits, axis=1, count=proto.m)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.bool_]:
        """(n, V, m): the bit each value sets in each device's row."""
        rows = np.asarray(np.asarray(reports)["hash_id"], dtype=np.int64)
        cols = proto.item_columns(values)[:, rows].T  # (n, V)
        return cols[:, :, None] == np.arange(proto.m)[None, None, :]


class MemoHadamardSketchReports(_SketchKind):
    """(hash_id = J·m + l, bit) of L-HCMS: the device's row J and Hadamard row l are fixed, so
    the bit is binary L-GRR of the parity of (l, h_J(x)); the attacker counts the bit (two
    symbols)."""

    name: ClassVar[str] = "memo-sketch-hadamard"
    statistic: ClassVar[str] = "symbols"

    def output_space_size(self, proto: Any) -> int:
        return int(proto.d) * int(proto.m) * 2

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        cols = self._columns(proto)
        r1 = np.array([[proto.p1, 1 - proto.p1], [1 - proto.p1, proto.p1]])
        both = r1 @ np.array([[proto.p2, 1 - proto.p2], [1 - proto.p2, proto.p2]])
        single, first = [], []
        for j in range(proto.d):
            par = hadamard_parity(np.arange(proto.m)[:, None], cols[None, :, j])  # (l, V)
            single.extend(both[p] for p in par)
            first.extend(r1[p] for p in par)
        return ExactChannel(tuple(single), tuple(first))

    def width(self, proto: Any) -> int:
        return 2

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        return np.asarray(np.asarray(reports)["bit"], dtype=np.int64)

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray[np.int64]:
        """(n, V): the parity each value has for each device's (J, l)."""
        rows, l_rows = proto._row_l(np.asarray(reports))
        cols = proto.item_columns(values)[:, rows].T  # (n, V)
        return hadamard_parity(l_rows[:, None], cols)


class LaplaceSketchReports(ContinuousReport, _SketchKind):
    """(row j, m floats) of SHE: the one-hot of h_j(x) plus Laplace(2/ε) per coordinate. No
    exact channel (floats; Mironov's attack on float64 Laplace draws): the black-box game bins
    half the difference of the report's first two coordinates (:meth:`observe`)."""

    name: ClassVar[str] = "sketch-laplace"

    def report_range(self, proto: Any) -> tuple[float, float]:
        """Values beyond ±(1 + 12 b) fall in the end bins (probability < e^−12)."""
        b = formulas.she_scale(proto.eps)
        return (-1.0 - 12 * b, 1.0 + 12 * b)

    def observe(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        vals = np.asarray(reports)["values"]
        return super().observe(proto, (vals[:, 0] - vals[:, 1]) / 2)

    def log_likelihoods(
        self, proto: Any, reports: Any, values: Any, memoized: bool
    ) -> NDArray[np.float64]:
        """(n, V) Σ_t ln f(y_t | x_v) up to a constant per client: given the row j of a report,
        only the coordinate c = h_j(x) depends on the input (mean 1 there, 0 elsewhere), so
        ln f = (|y_c| − |y_c − 1|)/b + const with b = 2/ε (docs/math.md §21.4). The law of the
        Laplace floats before the rounding to the grid 2⁻²⁰ (which moves each coordinate by less
        than 2⁻²⁰: a relative change below 2⁻²⁰/b of the ratio); for the linkage attacks."""
        keys = proto.item_keys(values)
        cols = oracles.query_columns(proto.cfg, keys)  # (V, d): the item's column per row
        b = formulas.she_scale(proto.eps)
        total: Any = 0.0
        for batch in reports:
            rep = np.asarray(batch)
            rows = np.minimum(rep["hash_id"].astype(np.int64), cols.shape[1] - 1)
            y = np.take_along_axis(rep["values"], cols[:, rows].T, axis=1)  # (n, V)
            total = total + (np.abs(y) - np.abs(y - 1.0)) / b
        return np.asarray(total, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# The estimator of queried items
# --------------------------------------------------------------------------------------------


class SketchAggregator(Aggregator):
    """The server's aggregator of a sketch, with :meth:`query` for items."""

    def query(self, items: Any, level: float = 0.95) -> Estimate:
        """f̂ of ``items`` from everything added, with standard errors and intervals."""
        if self.n == 0:
            raise ValueError(f"{self.oracle.name}: no reports have been added yet.")
        return self.oracle.query(self.support_counts, self.n, items, level)


class SketchEstimator(Estimator):
    """Estimator of queried items from a sketch's support (module docstring)."""

    estimand: ClassVar[Estimand] = Estimand.QUERIED_ITEMS
    m: int
    d: int
    cfg: oracles.SketchConfig

    # -- shapes
    @property
    def support_shape(self) -> tuple[int, ...]:
        return (self.d, self.m + 1)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        return (self.d, self.m)

    @property
    def estimate_axes(self) -> tuple[str, ...] | None:
        """A cell of the debiased (d, m) sketch: its row and column."""
        return ("row", "column")

    # -- statistic
    def _table(self, support: NDArray) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(statistic per cell (…, d, m), reports per row (…, d)) of a support."""
        s = np.asarray(support, dtype=np.float64)
        return s[..., 1:], s[..., 0]

    def sketch_state(self, support: ArrayLike) -> oracles.SketchState:
        """The kernels' :class:`~longldp.protocols.sketch.oracles.SketchState` of a support."""
        table, n_rows = self._table(np.asarray(support))
        return oracles.SketchState(table, n_rows.astype(np.int64))

    @property
    def _signed(self) -> bool:
        return self.cfg.moments.signed

    # -- the estimator's hooks
    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """E[j, c] = (S[j, c]/n − P0/d)/(P1 − P0) (PCS: (S − n_j/2)/(n(P1 − ½))), so that a
        queried item's f̂ of docs/math.md (1.1) is the sum of its cells over the rows."""
        stat, n_rows = self._table(support)
        mom = self.cfg.moments
        if self._signed:
            return (stat - n_rows[..., None] / 2) / (n * mom.gap)
        return (stat / n - mom.P0 / self.d) / mom.gap

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        lo = -1.0 if self._signed else 0.0
        with np.errstate(invalid="ignore"):
            return np.clip(raw, lo, 1.0)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var of each cell of E given each row's users: n_j·v(F)/(n·(P1 − P0))², F the cell's
        share of its row's users estimated from the support (docs/math.md §21.12)."""
        stat, n_rows = self._table(support)
        share = formulas.row_shares(self.cfg.moments, stat, n_rows)
        return formulas.cell_variance(self.cfg.moments, share, n_rows) / n**2

    def postprocess_channel(self, n: int) -> pp.ChannelInfo:
        raise ValueError(
            f"{self.name}: its estimate is a sketch of queried items (estimand "
            "'queried-items'), not a frequency vector: post-processing does not apply."
        )

    # -- variances of a queried item
    def variance(self, n: int, f: ArrayLike, sum_f2: float | None = None) -> NDArray[np.float64]:
        """Var of f̂ of items of frequencies ``f`` (docs/math.md (21.4)); ``sum_f2``: Σ_y f_y²
        over every item (default: over ``f``), which the collision term (21.3) needs."""
        n = check.integer(self.name, "n", n, minimum=1)
        freqs = np.asarray(f, dtype=np.float64)
        if not np.all((freqs >= 0) & (freqs <= 1)):
            raise ValueError(f"{self.name}: 'f' must be frequencies in [0, 1]; got {f!r}.")
        if sum_f2 is not None:
            check.probability(self.name, "sum_f2", sum_f2)
        return self.cfg.moments.variance(n, freqs, sum_f2)

    def approx_variance(self, n: int) -> float:
        """V*: Var of f̂ of an item nobody holds when no item is frequent (Σf² → 0)."""
        n = check.integer(self.name, "n", n, minimum=1)
        return float(self.cfg.moments.variance(n, 0.0, 0.0))

    def accuracy_figure(self, n: int) -> tuple[str, float] | None:
        """V* of a queried item (:meth:`approx_variance`: no collisions)."""
        return "V*", self.approx_variance(n)

    # -- queried items
    def sum_f2(self, support: ArrayLike, n: int) -> float:
        """Σ_y f_y² over every item, estimated from the sketch (docs/math.md (21.13)): what the
        collision term (21.3) of a queried item's variance needs."""
        stat, n_rows = self._table(np.asarray(support))
        return formulas.sum_f2_estimate(self.cfg.moments, stat, n_rows, n)

    def query_keys(
        self, support: ArrayLike, n: int, keys: ArrayLike, level: float = 0.95
    ) -> Estimate:
        """:meth:`query` of items given by their 64-bit keys."""
        n = check.integer(self.name, "n", n, minimum=1)
        z = normal_quantile(level)
        sup = np.asarray(support)
        if sup.shape != tuple(self.support_shape):
            raise ValueError(
                f"{self.name}: 'support' must have shape {tuple(self.support_shape)}; "
                f"got {sup.shape}."
            )
        k = np.asarray(keys, dtype=np.uint64).ravel()
        raw = oracles.estimate(self.cfg, self.sketch_state(sup), k) if k.size else np.zeros(0)
        f = np.clip(raw, 0.0, 1.0)
        s2 = max(self.sum_f2(sup, n), float(np.sum(f**2)))
        se = np.sqrt(self.cfg.moments.variance(n, f, min(1.0, s2)))
        return Estimate(int(n), None, float(level), raw, raw, se, raw - z * se, raw + z * se)

    def query(self, support: ArrayLike, n: int, items: Any, level: float = 0.95) -> Estimate:
        """f̂ of each queried item (docs/math.md (1.1)) with its standard error from (21.4),
        the collision term at Σf² estimated from the sketch, and the ``level`` normal
        interval. ``items``: a sequence of items of the domain."""
        keys: Any = self.item_keys(items)  # type: ignore[attr-defined]
        return self.query_keys(support, n, keys, level)

    def aggregator(self) -> SketchAggregator:
        return SketchAggregator(self)


# --------------------------------------------------------------------------------------------
# The mechanisms
# --------------------------------------------------------------------------------------------

_KIND_OF = {
    "CMS": "cms",
    "HCMS": "hcms",
    "PCS": "pcs",
    "SHE": "she",
    "THE": "the",
    "L-CMS": "cms",
    "L-HCMS": "hcms",
}


class _Sketch(Mechanism, SketchEstimator, ReportCodec):
    """Shared machinery of the sketch mechanisms (module docstring)."""

    m: int
    d: int
    salt: int
    bits: int | None
    max_length: int
    input_domain: ClassVar[type[SketchItems]] = SketchItems
    #: One-shot reports whose rows are drawn per report (nothing persists).
    longitudinal: ClassVar[bool] = False
    _bits_dtype: ClassVar[str] = "bits"

    # -- parameters
    def _config(self, **budget: Any) -> None:
        own = self.name
        check.integer(own, "salt", self.salt, minimum=0, maximum=(1 << 63) - 1)
        if self.bits is not None:
            check.integer(own, "bits", self.bits, minimum=1, maximum=64)
        check.integer(own, "max_length", self.max_length, minimum=1, maximum=1 << 16)
        formulas.check_shape(own, self.m, self.d, True)
        cfg = oracles.SketchConfig(
            _KIND_OF[own],
            self.m,
            self.d,
            salt=self.salt,
            theta=getattr(self, "theta", None),
            **budget,
        )
        object.__setattr__(self, "cfg", cfg)

    @property
    def k(self) -> int:  # type: ignore[override]
        """Inputs the audits enumerate (``as_inputs(range(k))``): m + 1 distinct items, so that
        in every row at least two of them fall in different columns."""
        return int(self.m) + 1

    @functools.cached_property
    def domain(self) -> SketchItems:  # type: ignore[override]
        return SketchItems(self.bits, self.max_length)

    @property
    def P1(self) -> float:  # type: ignore[override]
        """E[support] of a holder (docs/math.md §21.3)."""
        return self.cfg.moments.P1

    @property
    def P0(self) -> float:  # type: ignore[override]
        """E[support] of a non-holder over the hash draw (docs/math.md §21.3)."""
        return self.cfg.moments.P0

    def single_report_epsilon(self) -> float:
        """Exact ε of one report (docs/math.md §21.4–§21.5): the randomizer's given the row."""
        return self.cfg.epsilon()

    def first_round_epsilon(self) -> float:
        """One-shot: the report's ε; memoized: round 1's (docs/math.md §21.5)."""
        if not self.longitudinal:
            return self.single_report_epsilon()
        return formulas.chain_epsilons(self.cfg.kind, self.eps_perm, self.eps_1)[0]  # type: ignore[attr-defined]

    # -- items
    def item_keys(self, items: Any) -> NDArray[np.uint64]:
        """64-bit keys of items (validated by the domain)."""
        return self.domain.keys(self.name, items)

    def item_columns(self, items: Any) -> NDArray[np.int64]:
        """(C, d): each item's column in every row."""
        return oracles.query_columns(self.cfg, self.item_keys(items))

    def hash_buckets(self, hash_ids: ArrayLike, values: Any) -> NDArray[np.int64]:
        """h_row(item) for rows ``hash_ids`` (V,) or (F, 1) against items (V,) or (1, V)."""
        ids = np.asarray(hash_ids, dtype=np.int64)
        vals = (
            values
            if not isinstance(values, np.ndarray) or values.dtype.kind in "US"
            else (values.ravel())
        )
        cols = self.item_columns(list(vals) if not isinstance(vals, np.ndarray) else vals)
        return np.take_along_axis(cols.T, np.broadcast_to(ids.reshape(-1, 1), (ids.size, 1)), 0)

    def hash_records(self, hash_ids: ArrayLike, buckets: ArrayLike) -> NDArray:
        raise ValueError(f"{self.name}: a report is more than (row, bucket); build it by perturb.")

    def new_hash_ids(self, m: int, rng: RandomSource) -> NDArray[np.int64]:
        """Rows of m new reports (one-shot) or devices (memoized), uniform on [0, d)."""
        return oracles.draw_rows(m, self.d, rng)

    # -- population path
    def _check_population_values(self, values: Any) -> tuple[Any, int]:
        keys = self.item_keys(values)
        return keys, keys.size

    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        """(memo key, round-1 input) of one item: its key (one-shot) or its column in the
        device's row (memoized)."""
        ok = (
            isinstance(value, (str, bytes))
            if self.bits is None
            else (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)))
        )
        if not ok:
            what = "a str or UTF-8 bytes" if self.bits is None else f"an int in [0, 2^{self.bits})"
            raise ValueError(f"{self.name}: 'value' must be {what}; got {value!r}.")
        keys = self.domain.keys(self.name, [value] if self.bits is None else [int(value)], "value")
        enc = self._memo_key(keys, state)
        return int(enc[0]), enc

    def _memo_key(self, values: NDArray, state: dict) -> NDArray:
        return values

    def perturb_support(
        self, values: ArrayLike, memo: Any, rng: Any = None, users: ArrayLike | None = None
    ) -> NDArray:
        """The support of ``perturb``'s reports (exact: the reports are drawn, then counted)."""
        if memo is None or memo.store is not None:
            return super().perturb_support(values, memo, rng, users)
        return self.support_counts(self.perturb(values, memo, rng, users))

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        raise ValueError(
            f"{self.name}: an open item space has no value counts to draw from; draw the "
            "support of items at count level with sample_item_support(items, rng)."
        )

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray:
        raise ValueError(f"{self.name}: no value counts (use sample_item_support).")

    def sample_item_support(self, items: Any, rng: Any = None) -> NDArray:
        """The support of one-shot reports of users holding ``items``, drawn from its exact law
        at count level (docs/math.md §21.3): rows multinomial per distinct item, then the cells'
        binomials (Gamma differences for SHE); O(U·d + d·m) for U distinct items. HCMS and the
        memoized forms have no such law: ``ValueError``."""
        if self.longitudinal or self.cfg.kind not in oracles.COUNT_LEVEL_KINDS:
            raise ValueError(
                f"{self.name}: no count-level law (docs/math.md §21.3); use perturb_support."
            )
        source = as_random_source(rng)
        keys = self.item_keys(items)
        uniq, counts = np.unique(keys, return_counts=True)
        per_row = np.asarray(source.multinomial(counts, np.full(self.d, 1.0 / self.d)))  # (U, d)
        cols = oracles.query_columns(self.cfg, uniq)  # (U, d)
        flat = np.arange(self.d)[None, :] * self.m + cols
        if self.cfg.kind == "pcs":
            neg = oracles.query_signs(self.cfg, uniq) < 0
            flat = flat + neg * self.d * self.m
            size = 2 * self.d * self.m
            cells = np.bincount(flat.ravel(), per_row.ravel(), size).reshape(2, self.d, self.m)
        else:
            size = self.d * self.m
            cells = np.bincount(flat.ravel(), per_row.ravel(), size).reshape(self.d, self.m)
        state = oracles.sample_state(self.cfg, cells.astype(np.int64), per_row.sum(axis=0), source)
        return self._support_of(state)

    def _support_of(self, state: oracles.SketchState) -> NDArray:
        out = np.empty((self.d, self.m + 1), dtype=np.asarray(state.table).dtype)
        out[:, 0] = state.n_rows
        out[:, 1:] = state.table
        return out

    # -- reports
    @property
    def _ids(self) -> int:
        """Distinct values of a report's ``hash_id`` (the sketch row; L-HCMS: row·m + l)."""
        return int(self.d)

    @functools.cached_property
    def _row_bytes(self) -> int:
        return min_bytes(self._ids - 1)

    @functools.cached_property
    def report_dtype(self) -> np.dtype:
        """The record of one report."""
        return np.dtype([("hash_id", "<i8"), ("bits", "u1", ((self.m + 7) // 8,))])

    def _records(self, hash_ids: NDArray, **fields: NDArray) -> NDArray:
        out = np.empty(np.asarray(hash_ids).size, dtype=self.report_dtype)
        out["hash_id"] = hash_ids
        for name, arr in fields.items():
            out[name] = arr
        return out

    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = np.asarray(reports)
        if rep.dtype != self.report_dtype or rep.ndim != 1:
            raise ValueError(
                f"{self.name}: 'reports' must be a 1-D array of dtype {self.report_dtype}; "
                f"got {rep.dtype} {rep.shape}."
            )
        check.domain_values(self.name, rep["hash_id"], self._ids, "reports['hash_id']")
        return rep

    def _check_padding(self, bits: NDArray[np.uint8]) -> None:
        spare = (-self.m) % 8
        if spare and bits.size and np.any(bits[:, -1] & np.uint8((1 << spare) - 1)):
            raise ValueError(
                f"{self.name}: a report sets bits beyond the m = {self.m} columns; no client "
                "sends that."
            )

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(records)
        self._check_padding(rep["bits"])
        return np.hstack([uint_to_bytes(rep["hash_id"], self._row_bytes), rep["bits"]])

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        w = self._row_bytes
        bits = np.ascontiguousarray(rows[:, w:])
        self._check_padding(bits)
        return self._check_reports(self._records(bytes_to_uint(rows[:, :w]), bits=bits))

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """(d, m + 1): reports per row, then set bits per (row, column) (the carry-save column
        sums of the kernels, all rows in one pass: ``oracles.count_bits``)."""
        rep = self._check_reports(reports)
        bits = np.ascontiguousarray(rep["bits"])
        rows = rep["hash_id"]
        out = np.zeros((self.d, self.m + 1), dtype=np.int64)
        out[:, 0] = np.bincount(rows, minlength=self.d)
        out[:, 1:] = oracles.count_bits(bits, rows, self.d, self.m)
        return out

    # -- rounds (one-shot: the row is drawn with every report)
    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray:
        k = np.asarray(keys, dtype=np.uint64)
        rows = oracles.draw_rows(k.size, self.d, rng)
        return self._one_shot(k, rows, rng)

    def _one_shot(self, keys: NDArray[np.uint64], rows: NDArray, rng: RandomSource) -> NDArray:
        (bits,) = oracles.perturb(self.cfg, keys, rows, rng)
        return self._records(rows, bits=bits)

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        raise AssertionError("one-shot")  # pragma: no cover


# ------------------------------------------------------------------------------- one-shot

#: How devices of other languages run the sketches (docs/client-spec.md; the JavaScript family
#: module clients/js/src/sketch.js). Shared cells: an item's key x (text: the SplitMix64
#: fingerprint of its code points; integers: the value), row j's column c = H_{s_j}(x) with
#: the seeds s = default_rng(SeedSequence([salt, 0x5CE7C4])).integers(0, 2⁶³, 2d).
_ONE_SHOT_STATE = "none (the row is drawn with every report)"
_ROW_STATE = "an integer J in [0, d) (the device's row)"


def _sketch_spec(chain: str, eps: str, round1: str, **more: str) -> ClientSpec:
    return ClientSpec(
        family="sketch",
        chain=chain,
        round2=more.get("round2", "1, 0"),
        eps_1=eps,
        eps_perm=more.get("eps_perm", "the same"),
        state=more.get("state", _ONE_SHOT_STATE),
        memo_key=more.get("memo_key", "the item's key x"),
        round1=round1,
        draws2=more.get("draws2", "none (one-shot)"),
    )


_BITS_ROUND1 = (
    "an integer J in [0, d), then m floats u_i: bit i = u_i < (i = c ? p1 : q1), c the "
    "column of x in row J"
)


@dataclass(frozen=True)
class CMS(_Sketch):
    """Count mean sketch ([APP17] §3.1): (row, m bits), the ±1 one-hot flipped at ε/2 per bit.

    Parameters
    ----------
    m, d : columns and rows of the sketch (public hash functions from ``salt``).
    eps : ε of one report.
    bits : None for text items (at most ``max_length`` characters), else b-bit integers.
    """

    m: int
    eps: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "CMS"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "q1 = D(1/(1 + e^(ε/2))), p1 = 1 − q1", "ρ(ln(p1(1 − q1)/(q1(1 − p1))))", _BITS_ROUND1
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 16, "d": 4, "eps": 2.0, "salt": 3}, ("apple", "pear", "apple", "é")),
        VectorCase({"m": 64, "d": 8, "eps": 1.0, "bits": 48}, (5, 2**47 + 3), suffix="bits"),
    )
    wire_id: ClassVar[int] = 60
    report_kind: ClassVar[ReportKind] = SketchBitReports()
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    #: The row is drawn afresh for every report: nothing persists per device.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps": 2.0},)

    def __post_init__(self) -> None:
        check.budget(self.name, "eps", self.eps)
        self._config(eps=self.eps)
        p, q = self.cfg.round1
        _set_chain(self, p, q, 1.0, 0.0)


@dataclass(frozen=True)
class THE(_Sketch):
    """Thresholded histogram encoding ([WAN17] §4.3) on a sketch: (row, m bits), bit h_J(x) set
    with p_θ, every other with q_θ; the exact ε is below the nominal ``eps`` (docs/math.md §21.4).

    Parameters
    ----------
    m, d, salt, bits, max_length : as :class:`CMS`.
    eps : the nominal ε of SHE's noise (Laplace(2/ε)) before the threshold.
    theta : the threshold in (0, 1) (default: the one minimising V*).
    """

    m: int
    eps: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    theta: float | None = None
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "THE"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "θ (default: the V*-optimal one, golden-section search rounded to 6 decimals); "
        "p1 = D(1 − ½e^(−(1 − θ)ε/2)), q1 = D(½e^(−θε/2))",
        "ρ(ln(p1(1 − q1)/(q1(1 − p1)))) (below the nominal ε)",
        _BITS_ROUND1,
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 16, "d": 4, "eps": 3.0}, ("fig", "kiwi", "fig")),
    )
    #: Thresholding after the noise: the exact ε of a report is below ``eps``.
    nominal_budget: ClassVar[bool] = True
    wire_id: ClassVar[int] = 64
    report_kind: ClassVar[ReportKind] = SketchBitReports()
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps": 2.0},)

    def __post_init__(self) -> None:
        check.budget(self.name, "eps", self.eps)
        if self.theta is not None:
            check.positive_float(self.name, "theta", self.theta, upper=1.0)
        self._config(eps=self.eps)
        p, q = self.cfg.round1
        _set_chain(self, p, q, 1.0, 0.0)


@dataclass(frozen=True)
class PCS(_Sketch):
    """Private count sketch ([CCF04] with [BS15]'s randomizer): (row, m bits), uniform but for
    bit h_J(x), the sign g_J(x) kept with e^ε/(1 + e^ε).

    Parameters
    ----------
    m, d, salt, bits, max_length : as :class:`CMS`.
    eps : ε of one report.
    """

    m: int
    eps: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "PCS"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "p1 = D(1/(1 + e^(−ε))), q1 = 0.5",
        "ρ(ln(p1/(1 − p1)))",
        "an integer J in [0, d), m floats u_i (bit i = u_i < 0.5), then a float u: bit c = "
        "((u < p1) = (g_J(x) = +1)), g_J(x) = 1 − 2·H_{s_{d+J}}(x) over 2 buckets",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 12, "d": 3, "eps": 2.5, "salt": 5}, ("a", "b", "a")),
    )
    wire_id: ClassVar[int] = 62
    report_kind: ClassVar[ReportKind] = SignedSketchReports()
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps": 2.0},)

    def __post_init__(self) -> None:
        check.budget(self.name, "eps", self.eps)
        self._config(eps=self.eps)
        p, _ = self.cfg.round1
        # p1: the item's coordinate keeps its sign; q1: every other coordinate is 1 w.p. ½
        _set_chain(self, p, 0.5, 1.0, 0.0)


@dataclass(frozen=True)
class SHE(_Sketch):
    """Summation with histogram encoding ([WAN17] §4.3) on a sketch: (row, m floats), the
    one-hot of h_J(x) plus Laplace(2/ε) per coordinate. For comparison: float64 Laplace draws are
    not an exact Laplace channel (Mironov, CCS 2012); THE is the deployable form.

    Parameters
    ----------
    m, d, salt, bits, max_length : as :class:`CMS`.
    eps : ε of one report.
    """

    m: int
    eps: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "SHE"
    comparison_only: ClassVar[str | None] = (
        "float64 Laplace draws are not an exact Laplace channel (Mironov, CCS 2012); THE is "
        "the deployable form of histogram encoding"
    )
    wire_id: ClassVar[int] = 63
    report_kind: ClassVar[ReportKind] = LaplaceSketchReports()
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps": 2.0},)

    def __post_init__(self) -> None:
        check.budget(self.name, "eps", self.eps)
        self._config(eps=self.eps)
        _set_chain(self, 1.0, 0.0, 1.0, 0.0)

    @functools.cached_property
    def report_dtype(self) -> np.dtype:
        return np.dtype([("hash_id", "<i8"), ("values", "<f8", (self.m,))])

    def _one_shot(self, keys: NDArray[np.uint64], rows: NDArray, rng: RandomSource) -> NDArray:
        """The Laplace-noised one-hot (clipped to ±SHE_LIMIT), rounded stochastically to the
        grid SHE_GRID: unbiased (E[round(x)] = x), post-processing (no ε spent), and it makes the
        server's float sums exact, so that shards merge to the same support as one
        aggregation."""
        (vals,) = oracles.perturb(self.cfg, keys, rows, rng)
        scaled = vals / SHE_GRID
        low = np.floor(scaled)
        up = np.asarray(rng.random(scaled.shape)) < scaled - low
        return self._records(rows, values=np.clip((low + up) * SHE_GRID, -SHE_LIMIT, SHE_LIMIT))

    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = super()._check_reports(reports)
        vals = rep["values"]
        if not np.all(np.abs(vals) <= SHE_LIMIT) or np.any(vals / SHE_GRID % 1):
            raise ValueError(
                f"{self.name}: 'reports' values must be multiples of 2^-20 in "
                f"[-2^20, 2^20] (what a client sends)."
            )
        return rep

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(records)
        vals = np.ascontiguousarray(rep["values"].astype(">f8")).view(np.uint8)
        return np.hstack(
            [uint_to_bytes(rep["hash_id"], self._row_bytes), vals.reshape(rep.size, -1)]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        w = self._row_bytes
        vals = np.ascontiguousarray(rows[:, w:]).view(">f8").astype(np.float64)
        return self._check_reports(
            self._records(bytes_to_uint(rows[:, :w]), values=vals.reshape(rows.shape[0], self.m))
        )

    def support_counts(self, reports: NDArray) -> NDArray[np.float64]:
        """(d, m + 1): reports per row, then the Laplace sums per (row, column)."""
        rep = self._check_reports(reports)
        out = np.zeros((self.d, self.m + 1))
        out[:, 0] = np.bincount(rep["hash_id"], minlength=self.d)
        np.add.at(out[:, 1:], rep["hash_id"], rep["values"])
        return out


class _HadamardSketch(_Sketch):
    """HCMS and L-HCMS: reports (row, Hadamard row l, bit). The support keeps, per row and
    column c, S[j, c] = #{u in row j: bit_u = parity(l_u, c)} = (n_j + (H·T_j)[c])/2 with
    T_j[l] = Σ_{u: l_u = l} (−1)^bit_u (docs/math.md §21.3): integers in [0, n_j], linear in
    the reports (shards add up), and T_j = H·(2S_j − n_j)/m recovers the kernels' state."""

    report_kind: ClassVar[ReportKind] = HadamardSketchReports()

    @property
    def g(self) -> int:
        """2: given the row and the Hadamard row, a report is randomized response over the two
        values of the parity (binary GRR, as L-SH's buckets)."""
        return 2

    def sketch_state(self, support: ArrayLike) -> oracles.SketchState:
        s = np.asarray(support, dtype=np.int64)
        n_rows = s[:, 0]
        table = fwht(2 * s[:, 1:] - n_rows[:, None]) // self.m
        return oracles.SketchState(table, n_rows)

    @functools.cached_property
    def report_dtype(self) -> np.dtype:
        return np.dtype([("hash_id", "<i8"), ("l", "<i8"), ("bit", "u1")])

    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = super()._check_reports(reports)
        check.domain_values(self.name, rep["l"], self.m, "reports['l'] (the Hadamard row)")
        check.domain_values(self.name, rep["bit"], 2, "reports['bit']")
        return rep

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(records)
        return np.hstack(
            [
                uint_to_bytes(rep["hash_id"], self._row_bytes),
                uint_to_bytes(rep["l"], min_bytes(self.m - 1)),
                rep["bit"].reshape(-1, 1),
            ]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        w, lw = self._row_bytes, min_bytes(self.m - 1)
        out = self._records(
            bytes_to_uint(rows[:, :w]), l=bytes_to_uint(rows[:, w : w + lw]), bit=rows[:, w + lw]
        )
        return self._check_reports(out)

    def _row_l(self, rep: NDArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(sketch row, Hadamard row) of each report."""
        return np.asarray(rep["hash_id"], dtype=np.int64), np.asarray(rep["l"], dtype=np.int64)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """(d, m + 1): reports per row, then S[j, c] (class docstring): one bincount of
        (row, l, bit) (the kernels' aggregate) and one fast Walsh–Hadamard transform per row."""
        rep = self._check_reports(reports)
        rows, l_rows = self._row_l(rep)
        state = oracles.aggregate_hcms(self.cfg, l_rows, rep["bit"], rows)
        out = np.empty((self.d, self.m + 1), dtype=np.int64)
        out[:, 0] = state.n_rows
        out[:, 1:] = (state.n_rows[:, None] + fwht(state.table)) // 2
        return out


@dataclass(frozen=True)
class HCMS(_HadamardSketch):
    """Hadamard count mean sketch ([APP17] §3.2): (row, Hadamard row l, bit), the parity of
    (l, h_J(x)) kept with e^ε/(1 + e^ε); one bit on the wire.

    Parameters
    ----------
    m : columns, a power of two; d, salt, bits, max_length : as :class:`CMS`.
    eps : ε of one report.
    """

    m: int
    eps: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "HCMS"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "p1 = D(1/(1 + e^(−ε))), q1 = 1 − p1",
        "ρ(ln(p1/(1 − p1)))",
        "integers J in [0, d) and l in [0, m), then a float u: bit = parity(l AND c) XOR (u ≥ p1)",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 16, "d": 4, "eps": 1.5, "salt": 3}, ("alpha", "beta", "alpha")),
    )
    wire_id: ClassVar[int] = 61
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    #: Row and Hadamard row drawn afresh for every report: nothing persists.
    linkage: ClassVar[Linkage] = Linkage()
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps": 2.0},)

    def __post_init__(self) -> None:
        check.budget(self.name, "eps", self.eps)
        self._config(eps=self.eps)
        p, _ = self.cfg.round1
        _set_chain(self, p, 1 - p, 1.0, 0.0)

    def _one_shot(self, keys: NDArray[np.uint64], rows: NDArray, rng: RandomSource) -> NDArray:
        l_rows, bit = oracles.perturb(self.cfg, keys, rows, rng)
        return self._records(rows, l=l_rows, bit=bit)


# ------------------------------------------------------------------------------- memoized


class _Memoized(_Sketch):
    """A memoized sketch (docs/math.md §21.5): the device keeps its row J for life; round 1 is
    memoized per memo key and every report re-randomizes the memo."""

    longitudinal: ClassVar[bool] = True
    budget_params: ClassVar[tuple[str, ...]] = ("eps_perm", "eps_1")
    eps_perm: float
    eps_1: float

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"row": oracles.draw_rows(m, self.d, rng)}

    def _columns_of(self, keys: NDArray, state: dict) -> NDArray[np.int64]:
        return oracles.columns(self.cfg, np.asarray(keys, dtype=np.uint64), state["row"])


@dataclass(frozen=True)
class LCMS(_Memoized):
    """Memoized count mean sketch (docs/math.md §21.5): the device keeps its row; round 1 is
    SUE(ε∞) over the m columns, memoized per column, round 2 L-SUE's symmetric flip to ε1
    (RAPPOR's PRR/IRR with one hash and the rows as cohorts).

    Parameters
    ----------
    m, d, salt, bits, max_length : as :class:`CMS`.
    eps_perm, eps_1 : ε∞ of a memo, ε1 of one report.
    """

    m: int
    eps_perm: float
    eps_1: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "L-CMS"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "p1 = D(1/(1 + e^(−ε∞/2))), q1 = 1 − p1",
        "ρ(ln(P1(1 − P0)/(P0(1 − P1))))",
        "m floats u_i: bit i = u_i < (i = c ? p1 : q1)",
        round2="p2 = D(½(1 + tanh(ε1/4)/tanh(ε∞/4))), q2 = 1 − p2",
        eps_perm="ρ(2 ln(p1/q1))",
        state=_ROW_STATE,
        memo_key="c, the column of x in row J",
        draws2="m floats u_i: bit i = u_i < (memo_i ? p2 : q2)",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase(
            {"m": 16, "d": 4, "eps_perm": 3.0, "eps_1": 1.0, "salt": 7},
            ("apple", "apple", "pear", "apple"),
        ),
    )
    wire_id: ClassVar[int] = 65
    report_kind: ClassVar[ReportKind] = MemoSketchBitReports()
    #: The row (a function of the public pool of d, sent in every report) and the memos.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.HASH_SEED, Persistent.MEMO)
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps_perm": 2.0, "eps_1": 1.0},)

    def __post_init__(self) -> None:
        check.chain_budgets(self.name, self.eps_perm, self.eps_1)
        self._config(eps_perm=self.eps_perm, eps_1=self.eps_1)
        _set_chain(self, *self.cfg.chain)

    def _memo_key(self, values: NDArray, state: dict) -> NDArray:
        return self._columns_of(values, state)

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, self.m, ((self.m + 7) // 8,), np.uint8)

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray:
        return oracles.ue_bits(keys, self.m, self.p1, self.q1, rng)

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return oracles.rerandomize_bits(payload, self.m, self.p2, self.q2, rng)

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        return self._records(state["row"], bits=payload)


@dataclass(frozen=True)
class LHCMS(_Memoized, _HadamardSketch):
    """Memoized Hadamard count mean sketch (docs/math.md §21.5): the device keeps its row J and
    Hadamard row l; round 1 is RR(ε∞) of the parity bit, memoized per parity (two memos at
    most), round 2 the binary L-GRR to ε1 (L-SH's chain).

    Parameters
    ----------
    m : columns, a power of two; d, salt, bits, max_length : as :class:`CMS`.
    eps_perm, eps_1 : ε∞ of a memo, ε1 of one report.
    """

    m: int
    eps_perm: float
    eps_1: float
    d: int = 16
    salt: int = 0
    bits: int | None = None
    max_length: int = 64
    cfg: oracles.SketchConfig = field(init=False, repr=False, compare=False)
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "L-HCMS"
    client_spec: ClassVar[ClientSpec | None] = _sketch_spec(
        "p1 = GRR(ε∞, 2), q1 = 1 − p1",
        "ρ(ln(P1/(1 − P1)))",
        "a float u: memo = parity(l AND c) XOR (u ≥ p1)",
        round2="p2 = L-GRR's exact p2 at g = 2, q2 = 1 − p2",
        eps_perm="ρ(ln(p1/q1))",
        state="integers J in [0, d), then l in [0, m) (row and Hadamard row)",
        memo_key="parity(l AND c), c the column of x in row J",
        draws2="a float u: report = memo XOR (u ≥ p2)",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"m": 32, "d": 5, "eps_perm": 2.0, "eps_1": 0.5}, ("x", "y", "x", "x")),
    )
    wire_id: ClassVar[int] = 66
    report_kind: ClassVar[ReportKind] = MemoHadamardSketchReports()
    #: The row and the Hadamard row (sent in every report as one hash_id, J·m + l) and the memos.
    linkage: ClassVar[Linkage] = Linkage.of(
        Persistent.HASH_SEED, Persistent.HADAMARD_ROW, Persistent.MEMO
    )
    test_params: ClassVar[tuple[dict, ...]] = ({"m": 8, "d": 4, "eps_perm": 2.0, "eps_1": 1.0},)

    def __post_init__(self) -> None:
        check.chain_budgets(self.name, self.eps_perm, self.eps_1)
        self._config(eps_perm=self.eps_perm, eps_1=self.eps_1)
        _set_chain(self, *self.cfg.chain)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        rows = oracles.draw_rows(m, self.d, rng)
        return {"row": rows, "l": np.asarray(rng.integers(0, self.m, size=m), dtype=np.int64)}

    def _memo_key(self, values: NDArray, state: dict) -> NDArray:
        return hadamard_parity(state["l"], self._columns_of(values, state))

    # A report names one of the d·m public functions (row J, Hadamard row l) by its hash_id
    # J·m + l, the one field by which an analyst links a device's reports (docs/math.md §17.4).
    @property
    def _ids(self) -> int:
        return int(self.d) * int(self.m)

    @functools.cached_property
    def report_dtype(self) -> np.dtype:
        return np.dtype([("hash_id", "<i8"), ("bit", "u1")])

    def _row_l(self, rep: NDArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        ids = np.asarray(rep["hash_id"], dtype=np.int64)
        return ids // self.m, ids % self.m

    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = _Sketch._check_reports(self, reports)
        check.domain_values(self.name, rep["bit"], 2, "reports['bit']")
        return rep

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(records)
        return np.hstack(
            [uint_to_bytes(rep["hash_id"], self._row_bytes), rep["bit"].reshape(-1, 1)]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        w = self._row_bytes
        return self._check_reports(self._records(bytes_to_uint(rows[:, :w]), bit=rows[:, w]))

    def _memo_store(self, n_users: int) -> MemoStore | DenseMemoStore:
        return make_memo_store(n_users, 2, (), np.int64)  # the memo is a symbol, as L-SH's

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray:
        k = np.asarray(keys, dtype=np.int64)
        kept = rng.random(k.shape) < self.p1  # every Bernoulli drawn as u < p
        return k ^ (~kept).astype(np.int64)

    def _round2(self, payload: NDArray, rng: RandomSource) -> NDArray:
        return oracles.rerandomize_bit(payload, self.p2, rng).astype(np.int64)

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        return self._records(state["row"] * self.m + state["l"], bit=payload)


def _set_chain(obj: object, p1: float, q1: float, p2: float, q2: float) -> None:
    for name, value in (("p1", p1), ("q1", q1), ("p2", p2), ("q2", q2)):
        object.__setattr__(obj, name, float(value))


#: The registered sketch classes, in wire-id order.
SKETCH_CLASSES = (CMS, HCMS, PCS, SHE, THE, LCMS, LHCMS)

__all__ = [
    "CMS",
    "HCMS",
    "LCMS",
    "LHCMS",
    "PCS",
    "SHE",
    "SKETCH_CLASSES",
    "THE",
    "HadamardSketchReports",
    "LaplaceSketchReports",
    "MemoHadamardSketchReports",
    "MemoSketchBitReports",
    "SignedSketchReports",
    "SketchAggregator",
    "SketchBitReports",
    "SketchEstimator",
    "SketchItems",
]
