"""PEM as a registered mechanism: a server-side discovery over one collection's reports.

Prefix-extending discovery ([WLJ19] §4; docs/math.md §21.6, §21.13) with Hadamard count mean
sketches as the round oracles, so that what the server accumulates is a fixed table of
integer counts: every report picks its round r uniformly (the group of devices that answers
round r is the set of reports that picked it, so one device gives one answer per report,
and no device needs the server's candidates), and sends the HCMS report of the first ℓ_r bits
of its item's code (row j, Hadamard row l, bit) with round r's public hash functions (salt
``salt + 1 + r``, as :meth:`~longldp.protocols.sketch.discovery.PrefixPlan.round_oracle`).

The support is (R, d, m + 1): per round, its rows' HCMS support (reports per row, then
S[j, c]); the estimate the (R, d, m) debiased sketches. :meth:`PEM.discover` runs the
server's rounds on a support (test, keep, extend; the kernels' ``run_rounds``) and returns the
items found with their frequencies, standard errors and intervals, each round's reports, ε,
candidates and threshold. Items are ``bits``-bit integers or, with ``alphabet``, strings of
at most ``length`` of its symbols (codes of :class:`~longldp.protocols.sketch.items.TextItems`).

Privacy: a report is HCMS at ε given its round, row and Hadamard row (all drawn independently
of the item), so ε per report and t·ε over t reports; nothing persists per device.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import sketch as formulas
from longldp.privacy.linkage import Linkage
from longldp.protocols._estimate import normal_quantile
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import bytes_to_uint, min_bytes, uint_to_bytes
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import Estimator
from longldp.protocols.hadamard import fwht, hadamard_parity
from longldp.protocols.mechanism import Mechanism
from longldp.protocols.report_kinds import ReportKind
from longldp.protocols.sketch import discovery, oracles
from longldp.protocols.sketch.items import IntegerItems, TextItems, prefix_bits
from longldp.protocols.sketch.mechanisms import AUDIT_MAX_M, _OneShotSketchKind, _set_chain
from longldp.protocols.traits import Estimand, ItemSpace

#: Most rounds a PEM collection may have.
MAX_ROUNDS = 64


@dataclass(frozen=True)
class CodedItems(ItemSpace):
    """Items with prefixes: strings of at most ``length`` symbols of ``alphabet`` or, without
    an alphabet, ``bits``-bit integers; :meth:`encode` is the one validation and coding."""

    alphabet: str | None = None
    length: int = 8

    @functools.cached_property
    def codec(self) -> TextItems | IntegerItems:
        """The items' codec."""
        if self.alphabet is None:
            return IntegerItems(64 if self.bits is None else self.bits)
        return TextItems(self.alphabet, self.length)

    @property
    def width(self) -> int:
        """Bits of a code."""
        return self.codec.width

    def describe(self) -> str:
        if self.alphabet is None:
            return super().describe()
        return f"items[text<={self.length} of {len(self.alphabet)} symbols]"

    @property
    def max_length(self) -> int:
        """The declared length of text items (symbols)."""
        return self.length

    def encode(self, owner: str, values: Any, name: str = "values") -> NDArray[np.uint64]:
        """The codes of ``values`` (one line per refusal, named by ``owner``)."""
        if self.alphabet is not None:
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise ValueError(
                    f"{owner}: '{name}' must be a sequence of strings; got {values!r}."
                )
            if not (isinstance(values, np.ndarray) and values.dtype.kind in "US"):
                values = list(values)
                bad = next((v for v in values if not isinstance(v, (str, bytes))), None)
                if bad is not None:
                    raise ValueError(f"{owner}: {name} must be str (UTF-8) or bytes; got {bad!r}.")
        try:
            return self.codec.encode(values)
        except ValueError as err:
            text = str(err).split(": ", 1)[-1].replace("'items'", f"'{name}'")
            raise ValueError(f"{owner}: {text}") from None

    def check(self, owner: str, values: Any, name: str = "values") -> Any:
        self.encode(owner, values, name)
        return values

    def as_inputs(self, codes: ArrayLike) -> Any:
        """Code c ↦ a string of the alphabet (the base-|A| digits of c + 1) or the integer c."""
        c = np.asarray(codes, dtype=np.int64).ravel()
        if self.alphabet is None:
            return c.astype(np.uint64)
        out = []
        for v in c.tolist():
            x, s = int(v) + 1, ""
            while x and len(s) < self.length:
                x, r = divmod(x - 1, len(self.alphabet))
                s = self.alphabet[r] + s
            out.append(s)
        return out


class PrefixSketchReports(_OneShotSketchKind):
    """(round r, row j, Hadamard row l, bit) of PEM: given (r, j, l) binary randomized response
    of the parity of (l, h_{r,j}(prefix_r(x)))."""

    name: ClassVar[str] = "prefix-sketch"

    def payloads(self, proto: Any) -> int:
        return proto.rounds_count * 2 * int(proto.m)

    def per_row(self, proto: Any, values: Any = None) -> tuple[NDArray[np.float64], ...]:
        if proto.m > 1 << AUDIT_MAX_M:
            raise ValueError(f"{proto.name}: the exact audit lists R·d·m functions; use m <= 4096.")
        vals = proto.as_inputs(np.arange(proto.k)) if values is None else values
        codes = proto.domain.encode(proto.name, vals)
        rr = np.array([[proto.p1, 1 - proto.p1], [1 - proto.p1, proto.p1]])
        R = proto.rounds_count
        rows = []
        for j in range(proto.d):
            blocks = []
            for r in range(R):
                cols = proto.round_columns(r, codes)[:, j]  # (V,)
                par = hadamard_parity(cols[:, None], np.arange(proto.m)[None, :])  # (V, l)
                blocks.append(rr[par].reshape(par.shape[0], -1) / (proto.m * R))
            rows.append(np.hstack(blocks))  # columns (r, l, bit)
        return tuple(rows)

    def payload_index(self, proto: Any, reports: NDArray) -> NDArray[np.int64]:
        rep = np.asarray(reports)
        return (rep["round"].astype(np.int64) * proto.m + rep["l"]) * 2 + rep["bit"]


@dataclass(frozen=True)
class Found:
    """What :meth:`PEM.discover` found: codes and decoded items (largest estimate first),
    frequencies with standard errors and ``level`` intervals, and the rounds as run."""

    items: list[Any]
    codes: NDArray[np.uint64]
    estimates: NDArray[np.float64]
    se: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    rounds: tuple[discovery.RoundLog, ...]
    epsilon: float
    level: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the server's and the dashboard's view)."""
        return {
            "epsilon": self.epsilon,
            "level": self.level,
            "items": [
                {
                    "item": item,
                    "estimate": float(e),
                    "se": float(s),
                    "lower": float(lo),
                    "upper": float(hi),
                }
                for item, e, s, lo, hi in zip(
                    self.items, self.estimates, self.se, self.lower, self.upper, strict=True
                )
            ],
            "rounds": [
                {
                    "bits": r.bits,
                    "reports": r.reports,
                    "candidates": r.candidates,
                    "threshold": None if not np.isfinite(r.threshold) else float(r.threshold),
                    "kept": r.kept,
                }
                for r in self.rounds
            ],
        }


@dataclass(frozen=True)
class PEM(Mechanism, Estimator, ReportCodec):
    """Prefix-extending discovery ([WLJ19]) with HCMS rounds: one report per device and round
    (module docstring).

    Parameters
    ----------
    eps : ε of one report.
    bits : code width of integer items (without ``alphabet``).
    alphabet, length : text items of at most ``length`` symbols of ``alphabet``.
    start, step : the rounds' prefix lengths start + step, start + 2·step, …, the code width.
    m, d, salt : each round's HCMS (m a power of two; round r's hashes from salt + 1 + r).
    keep : candidates kept per round (top ``keep``, or at most that many above the
        threshold when ``alpha`` is given).
    alpha : None (keep the top ``keep``) or the false-candidate rate of threshold selection
        (docs/math.md (21.6)).
    """

    eps: float
    bits: int | None = 32
    alphabet: str | None = None
    length: int = 8
    start: int = 4
    step: int = 4
    m: int = 256
    d: int = 16
    salt: int = 0
    keep: int = 16
    alpha: float | None = None
    p1: float = field(init=False, repr=False)
    q1: float = field(init=False, repr=False)
    p2: float = field(init=False, repr=False)
    q2: float = field(init=False, repr=False)
    name: ClassVar[str] = "PEM"
    wire_id: ClassVar[int] = 67
    longitudinal: ClassVar[bool] = False
    report_kind: ClassVar[ReportKind] = PrefixSketchReports()
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    #: Round, row and Hadamard row drawn afresh with every report: nothing persists.
    linkage: ClassVar[Linkage] = Linkage()
    input_domain: ClassVar[type[CodedItems]] = CodedItems
    estimand: ClassVar[Estimand] = Estimand.DISCOVERED_ITEMS
    test_params: ClassVar[tuple[dict, ...]] = (
        {"eps": 2.0, "bits": None, "alphabet": "abc", "length": 3, "start": 0, "step": 2,
         "m": 8, "d": 2, "keep": 4},
    )  # fmt: skip
    client_spec: ClassVar[ClientSpec | None] = ClientSpec(
        family="pem",
        chain="p1 = D(1/(1 + e^(−ε))), q1 = 1 − p1; R rounds at ℓ_r = start + (r + 1)·step "
        "(the last one the code width)",
        round2="1, 0",
        eps_1="ρ(ln(p1/(1 − p1)))",
        eps_perm="the same",
        state="none (round, row and Hadamard row drawn with every report)",
        memo_key="the item's code x",
        round1=(
            "integers r in [0, R), J in [0, d), l in [0, m), then a float u: bit = "
            "parity(l AND c) XOR (u ≥ p1), c the column of x's first ℓ_r bits in row J of "
            "round r (salt + 1 + r)"
        ),
        draws2="none (one-shot)",
    )
    vector_cases: ClassVar[tuple[VectorCase, ...]] = (
        VectorCase({"eps": 2.0, "bits": 12, "m": 16, "d": 4}, (5, 4095, 5)),
        VectorCase(
            {"eps": 3.0, "bits": None, "alphabet": "abc", "length": 4, "m": 8, "d": 2},
            ("ab", "cab", "ab"),
            suffix="text",
        ),
    )

    def __post_init__(self) -> None:
        own = self.name
        check.budget(own, "eps", self.eps)
        if self.alphabet is None:
            check.integer(own, "bits", self.bits, minimum=1, maximum=64)
        elif self.bits is not None:
            raise ValueError(f"{own}: give 'bits' (integers) or 'alphabet' (text), not both.")
        width = self.domain.width
        formulas.prefix_lengths(width, self.start, self.step, own)
        if not (self.m >= 2 and self.m & (self.m - 1) == 0):
            raise ValueError(f"{own}: 'm' must be a power of two >= 2; got {self.m!r}.")
        formulas.check_shape(own, self.m, self.d, True)
        check.integer(own, "salt", self.salt, minimum=0, maximum=(1 << 62))
        check.integer(own, "keep", self.keep, minimum=1)
        if width < 63 and self.keep > 1 << width:  # more candidates than items: refused
            raise ValueError(
                f"{own}: 'keep' must be <= the domain size 2^{width}; got {self.keep}."
            )
        if self.alpha is not None:
            check.positive_float(own, "alpha", self.alpha, upper=1.0)
        if self.rounds_count > MAX_ROUNDS:
            raise ValueError(
                f"{own}: at most {MAX_ROUNDS} rounds; start = {self.start}, step = {self.step} "
                f"give {self.rounds_count}."
            )
        keep = formulas.rr_keep_probability(self.eps, own)
        _set_chain(self, keep, 1 - keep, 1.0, 0.0)

    # -- parameters
    @functools.cached_property
    def domain(self) -> CodedItems:  # type: ignore[override]
        return CodedItems(self.bits if self.alphabet is None else None, self.alphabet, self.length)

    @property
    def k(self) -> int:  # type: ignore[override]
        """Inputs the audits enumerate: m + 1 distinct items."""
        return int(self.m) + 1

    @property
    def g(self) -> int:
        """2: given its round, row and Hadamard row, a report is randomized response over the
        two values of the parity."""
        return 2

    @functools.cached_property
    def plan(self) -> discovery.PrefixPlan:
        """The kernels' plan of the server's rounds."""
        select = discovery.Selection(
            "top" if self.alpha is None else "threshold",
            0.05 if self.alpha is None else self.alpha,
            self.keep,
        )
        return discovery.PrefixPlan(
            self.domain.width, self.eps, self.start, self.step, select, "hcms", None,
            self.m, self.d, self.salt,
        )  # fmt: skip

    @property
    def lengths(self) -> tuple[int, ...]:
        """Prefix bits of the rounds."""
        return self.plan.lengths

    @property
    def rounds_count(self) -> int:
        """R, the number of rounds."""
        return len(formulas.prefix_lengths(self.domain.width, self.start, self.step, self.name))

    @functools.cached_property
    def round_configs(self) -> tuple[oracles.SketchConfig, ...]:
        """Each round's HCMS (its own salt)."""
        return tuple(self.plan.round_oracle(r).sketch for r in range(self.rounds_count))

    def round_columns(self, r: int, codes: ArrayLike) -> NDArray[np.int64]:
        """(C, d) columns of the codes' round-r prefixes in every row."""
        keys = prefix_bits(np.asarray(codes, dtype=np.uint64), self.domain.width, self.lengths[r])
        return oracles.query_columns(self.round_configs[r], keys)

    def single_report_epsilon(self) -> float:
        return formulas.sketch_epsilon("hcms", self.eps)

    def first_round_epsilon(self) -> float:
        return self.single_report_epsilon()

    # -- the client
    def _check_population_values(self, values: Any) -> tuple[Any, int]:
        codes = self.domain.encode(self.name, values)
        return codes, codes.size

    def client_key(self, value: Any, state: dict) -> tuple[int | bytes, Any]:
        if self.alphabet is None:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        else:
            ok = isinstance(value, (str, bytes))
        if not ok:
            what = "a str" if self.alphabet is not None else f"an int in [0, 2^{self.bits})"
            raise ValueError(f"{self.name}: 'value' must be {what}; got {value!r}.")
        codes = self.domain.encode(self.name, [value], "value")
        return int(codes[0]), codes

    @functools.cached_property
    def report_dtype(self) -> np.dtype:
        """One report: round, sketch row (``hash_id``), Hadamard row, bit."""
        return np.dtype([("round", "<i8"), ("hash_id", "<i8"), ("l", "<i8"), ("bit", "u1")])

    def _round1(self, keys: NDArray, state: dict, rng: RandomSource) -> NDArray:
        codes = np.asarray(keys, dtype=np.uint64)
        n = codes.size
        rnd = np.asarray(rng.integers(0, self.rounds_count, size=n), dtype=np.int64)
        rows = oracles.draw_rows(n, self.d, rng)
        l_rows = np.asarray(rng.integers(0, self.m, size=n), dtype=np.int64)
        kept = rng.random(n) < self.p1  # every Bernoulli drawn as u < p
        cols = np.empty(n, dtype=np.int64)
        for r in np.unique(rnd):
            who = rnd == r
            prefix = prefix_bits(codes[who], self.domain.width, self.lengths[r])
            cols[who] = oracles.columns(self.round_configs[r], prefix, rows[who])
        out = np.empty(n, dtype=self.report_dtype)
        out["round"], out["hash_id"], out["l"] = rnd, rows, l_rows
        out["bit"] = hadamard_parity(l_rows, cols) ^ ~kept
        return out

    def _sample_support(self, counts: NDArray, n: int, rng: RandomSource) -> NDArray:
        raise ValueError(f"{self.name}: no value counts over an open item space.")

    def sample_support(
        self, true_counts: ArrayLike, n: int | None = None, rng: Any = None
    ) -> NDArray:
        raise ValueError(
            f"{self.name}: an open item space has no value counts to draw from; use perturb."
        )

    def perturb_support(
        self, values: ArrayLike, memo: Any, rng: Any = None, users: ArrayLike | None = None
    ) -> NDArray:
        """The support of ``perturb``'s reports (drawn, then counted)."""
        return self.support_counts(self.perturb(values, memo, rng, users))

    # -- codec
    def _check_reports(self, reports: NDArray) -> NDArray:
        rep = np.asarray(reports)
        if rep.dtype != self.report_dtype or rep.ndim != 1:
            raise ValueError(
                f"{self.name}: 'reports' must be a 1-D array of dtype {self.report_dtype}; "
                f"got {rep.dtype} {rep.shape}."
            )
        check.domain_values(self.name, rep["round"], self.rounds_count, "reports['round']")
        check.domain_values(self.name, rep["hash_id"], self.d, "reports['hash_id'] (the row)")
        check.domain_values(self.name, rep["l"], self.m, "reports['l'] (the Hadamard row)")
        check.domain_values(self.name, rep["bit"], 2, "reports['bit']")
        return rep

    @functools.cached_property
    def _widths(self) -> tuple[int, int, int]:
        return min_bytes(self.rounds_count - 1), min_bytes(self.d - 1), min_bytes(self.m - 1)

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        rep = self._check_reports(records)
        wr, wj, wl = self._widths
        return np.hstack(
            [
                uint_to_bytes(rep["round"], wr),
                uint_to_bytes(rep["hash_id"], wj),
                uint_to_bytes(rep["l"], wl),
                rep["bit"].reshape(-1, 1),
            ]
        )

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        wr, wj, wl = self._widths
        out = np.empty(rows.shape[0], dtype=self.report_dtype)
        out["round"] = bytes_to_uint(rows[:, :wr])
        out["hash_id"] = bytes_to_uint(rows[:, wr : wr + wj])
        out["l"] = bytes_to_uint(rows[:, wr + wj : wr + wj + wl])
        out["bit"] = rows[:, wr + wj + wl]
        return self._check_reports(out)

    # -- support and estimates
    @property
    def support_shape(self) -> tuple[int, ...]:
        return (self.rounds_count, self.d, self.m + 1)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        return (self.rounds_count, self.d, self.m)

    @property
    def estimate_axes(self) -> tuple[str, ...] | None:
        """A cell of one round's debiased sketch: its round, row and column."""
        return ("round", "row", "column")

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        """(R, d, m + 1): per round, reports per row then S[j, c] (HCMS supports)."""
        rep = self._check_reports(reports)
        out = np.zeros(self.support_shape, dtype=np.int64)
        for r in range(self.rounds_count):
            who = rep["round"] == r
            state = oracles.aggregate_hcms(
                self.round_configs[r], rep["l"][who], rep["bit"][who], rep["hash_id"][who]
            )
            out[r, :, 0] = state.n_rows
            out[r, :, 1:] = (state.n_rows[:, None] + fwht(state.table)) // 2
        return out

    def _states(self, support: ArrayLike) -> list[oracles.SketchState]:
        s = np.asarray(support, dtype=np.int64)
        return [
            oracles.SketchState(fwht(2 * s[r, :, 1:] - s[r, :, :1]) // self.m, s[r, :, 0])
            for r in range(self.rounds_count)
        ]

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """Per round, the debiased sketch of its reports (math §21.12, n_r the round's reports)."""
        s = np.asarray(support, dtype=np.float64)
        mom = self.round_configs[0].moments
        n_r = np.maximum(s[..., 0].sum(axis=-1), 1.0)[..., None, None]
        return (s[..., 1:] / n_r - mom.P0 / self.d) / mom.gap

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Each cell's variance given the rows (math (21.12)), per round."""
        s = np.asarray(support, dtype=np.float64)
        mom = self.round_configs[0].moments
        n_r = np.maximum(s[..., 0].sum(axis=-1), 1.0)[..., None, None]
        share = formulas.row_shares(mom, s[..., 1:], s[..., 0])
        return formulas.cell_variance(mom, share, s[..., 0]) / n_r**2

    def variance(self, n: int, f: ArrayLike, sum_f2: float | None = None) -> NDArray[np.float64]:
        """Var of f̂ of items of frequencies ``f`` from the last round's ~n/R reports
        (docs/math.md (21.4)); ``sum_f2``: Σ_y f_y² (default: over ``f``)."""
        n = check.integer(self.name, "n", n, minimum=1)
        freqs = np.asarray(f, dtype=np.float64)
        if not np.all((freqs >= 0) & (freqs <= 1)):
            raise ValueError(f"{self.name}: 'f' must be frequencies in [0, 1]; got {f!r}.")
        mom = self.round_configs[-1].moments
        return mom.variance(max(1, n // self.rounds_count), freqs, sum_f2)

    def approx_variance(self, n: int) -> float:
        """V*: :meth:`variance` of an item nobody holds when no item is frequent (Σf² → 0)."""
        return float(self.variance(n, 0.0, 0.0))

    def accuracy_figure(self, n: int) -> tuple[str, float] | None:
        """V* of a found item's frequency (:meth:`approx_variance`: the last round's reports)."""
        return "V*", self.approx_variance(n)

    def discover(self, support: ArrayLike, n: int, level: float = 0.95) -> Found:
        """The server's rounds over a support (docs/math.md §21.6): each round's candidates
        estimated from its sketch, kept (top ``keep`` or above the threshold) and extended;
        the last round's estimates, standard errors (the collision term at Σf² ≤ 1) and
        ``level`` intervals of the items found."""
        n = check.integer(self.name, "n", n, minimum=1)
        z = normal_quantile(level)
        sup = np.asarray(support)
        if sup.shape != self.support_shape:
            raise ValueError(
                f"{self.name}: 'support' must have shape {self.support_shape}; got {sup.shape}."
            )
        states = self._states(sup)
        ns = [max(1, int(st.n)) for st in states]
        ors = [self.plan.round_oracle(r) for r in range(self.rounds_count)]
        ests = [
            (lambda c, cfg=self.round_configs[r], st=states[r]: oracles.estimate(cfg, st, c))
            if states[r].n
            else (lambda c: np.zeros(np.asarray(c).size))
            for r in range(self.rounds_count)
        ]
        kept, logs = discovery.run_rounds(self.plan, ests, ns, ors, self.domain.codec.valid_prefix)
        est = ests[-1](kept)
        order = np.argsort(-est, kind="stable")
        kept, est = kept[order], est[order]
        se = np.sqrt(ors[-1].variance(ns[-1], np.clip(est, 0.0, 1.0)))
        items = self.domain.codec.decode(kept) if kept.size else []
        return Found(list(items), kept, est, se, est - z * se, est + z * se, tuple(logs),
                     self.single_report_epsilon(), float(level))  # fmt: skip

    def aggregator(self) -> Any:
        from longldp.protocols.sketch.mechanisms import SketchAggregator

        return SketchAggregator(self)

    def query(self, support: ArrayLike, n: int, items: Any, level: float = 0.95) -> Any:
        """Discovery's view of queried items: f̂ of whole items from the last round's sketch."""
        from longldp.protocols._estimate import Estimate

        codes = self.domain.encode(self.name, items, "items")
        state = self._states(np.asarray(support))[-1]
        if state.n == 0:
            raise ValueError(f"{self.name}: the last round has no reports.")
        raw = oracles.estimate(self.round_configs[-1], state, codes)
        z = normal_quantile(level)
        se = np.sqrt(
            self.plan.round_oracle(self.rounds_count - 1).variance(state.n, np.clip(raw, 0, 1))
        )
        return Estimate(int(n), None, float(level), raw, raw, se, raw - z * se, raw + z * se)
