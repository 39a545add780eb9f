"""The estimator role: support (sufficient statistics) → estimate, variance, standard error.

:class:`Estimator` is the public API every mechanism's estimate goes through (docs/design.md
§2.1): ``estimand`` (what the estimate is), the shapes of one timestamp's support and estimate,
:meth:`~Estimator.estimate` (with optional post-processing), :meth:`~Estimator.estimate_with_se`
(the one function the server, the archive and the command line use), and the server-side
:class:`Aggregator`. A family fills in three public hooks:

- :meth:`Estimator.unbiased`: the unbiased estimate of one or many timestamps' support;
- :meth:`Estimator.estimate_variance`: its variance at a plug-in value of the estimand;
- :meth:`Estimator.postprocess_channel`: what post-processing needs to know of the channel
  (frequency estimands only).

:class:`SupportEstimator` is the frequency oracles' estimator (docs/math.md §1):
f̂ = (C/n − P0)/(P1 − P0) with the exact variance (1.2), its round-1 part and the variance of a
time average. A numeric mechanism supplies a mean estimator (estimand ``mean``), an open-domain
one an estimator of queried items; both reuse :meth:`Estimator.estimate_with_se`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp import privacy
from longldp.protocols import _codec
from longldp.protocols._estimate import Estimate, estimate_with_se
from longldp.protocols.traits import Estimand


class Estimator:
    """Support → estimate: the public API (see the module docstring for the hooks)."""

    name: ClassVar[str]
    estimand: ClassVar[Estimand]

    # ------------------------------------------------------------------ shapes
    @property
    def support_shape(self) -> tuple[int, ...]:
        """Shape of one timestamp's support counts."""
        raise NotImplementedError

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """Shape of one timestamp's estimate."""
        raise NotImplementedError

    # ------------------------------------------------------------------ hooks
    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """The unbiased estimate of ``support`` (trailing shape ``support_shape``) of n reports."""
        raise NotImplementedError

    def estimate_labels(self) -> list[str] | None:
        """What each position of the flattened estimate is, for displays (the dashboard); None:
        the generic "value v" (or "cohort j, bit i")."""
        return None

    @property
    def estimate_axes(self) -> tuple[str, ...] | None:
        """Names of the estimate's axes for displays of a position ("row j, column c" of a
        sketch), when :meth:`estimate_labels` lists none; None: the generic names."""
        return None

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Var of the unbiased estimate of one timestamp at the plug-in ``plug_in`` (the clipped
        unbiased estimate), shape of the estimate."""
        raise NotImplementedError

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        """The estimand's value at which the variance is evaluated: the unbiased estimate
        clipped to where the estimand lives (frequencies: [0, 1])."""
        with np.errstate(invalid="ignore"):
            return np.clip(raw, 0.0, 1.0)

    def accuracy_figure(self, n: int) -> tuple[str, float] | None:
        """One number that ranks mechanisms of this estimand at n users, with its name, for
        listings (``longldp protocols``): a frequency oracle's V*, a mean's worst-case variance;
        None when the estimand has no single figure (a distribution, change parts)."""
        return None

    def postprocess_channel(self, n: int) -> pp.ChannelInfo:
        """The channel as post-processing sees it (math §5): P1, P0, n, GRR-type or not."""
        raise ValueError(f"{self.name}: its estimate is not post-processed ({self.estimand}).")

    # ------------------------------------------------------------------ the public API
    def estimate(
        self, support: ArrayLike, n: int, postprocess: str | pp.PostProcessor | None = None
    ) -> NDArray[np.float64]:
        """The unbiased estimate of ``support`` (n reports), then optional post-processing.

        ``postprocess`` is a name from :data:`longldp.postprocess.METHODS` or a callable; it
        targets a total of 1 and applies to a distribution (frequencies, buckets) only.
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
        raw = self.unbiased(c, n)
        if postprocess is None:
            return raw
        if len(self.estimate_shape) != 1 or not self.estimand.on_simplex:
            raise ValueError(
                f"{self.name}: post-processing applies to a frequency vector; this estimate "
                f"has shape {self.estimate_shape} ('postprocess' must be None)."
            )
        info = self.postprocess_channel(n)
        rows = raw.reshape(-1, raw.shape[-1])
        out = np.stack([pp.apply(postprocess, row, 1.0, info) for row in rows])
        return out.reshape(raw.shape)

    def estimate_with_se(
        self,
        support: ArrayLike,
        n: int,
        postprocess: str | pp.PostProcessor | None = None,
        level: float = 0.95,
    ) -> Estimate:
        """The estimate of one timestamp with its unbiased form, standard error and ``level``
        normal interval: f̂ ∓ z·sqrt(Var(n, plug-in)) around the unbiased f̂
        (docs/math.md §1.5). The one function the server, the archive and the CLI use."""
        return estimate_with_se(self, support, n, postprocess, level)

    # ------------------------------------------------------------------ server side
    def aggregator(self) -> Aggregator:
        """A server-side accumulator of reports."""
        return Aggregator(self)

    def aggregator_from_state(self, state: dict[str, Any]) -> Aggregator:
        """An aggregator restored from :meth:`Aggregator.state` (refuses another protocol's)."""
        spec, n, support = _codec.check_state(state)
        me: Any = self
        if spec != me.spec() or state["fingerprint"] != me.fingerprint().hex():
            raise ValueError(
                f"{self.name}: the aggregator state is of {_codec.canonical_json(spec).decode()}, "
                f"not of {_codec.canonical_json(me.spec()).decode()}."
            )
        agg = Aggregator(self)
        empty = agg.support_counts
        if support.size and (support.dtype.kind == "f") != (empty.dtype.kind == "f"):
            raise ValueError(
                f"{self.name}: aggregator state 'support' must hold "
                f"{'numbers' if empty.dtype.kind == 'f' else 'integers'}; got {support.dtype}."
            )
        if support.shape != empty.shape:
            raise ValueError(
                f"{self.name}: aggregator state 'support' must have shape {empty.shape}; "
                f"got {support.shape}."
            )
        if n:
            agg._support = support.astype(empty.dtype)
            agg.n = n
        return agg


class SupportEstimator(Estimator):
    """The frequency oracles' estimator: f̂ = (C/n − P0)/(P1 − P0) (docs/math.md §1).

    Equals the seeds' ((C/n − q2)/(p2 − q2) − q1)/(p1 − q1) ([002] eq. 3); its variance is
    (1.2), its round-1 part V1 and the variance of a time average V1 + (Vtot − V1)/τ (§1.4).
    """

    estimand: ClassVar[Estimand] = Estimand.FREQUENCIES
    k: int
    P1: float
    P0: float
    p2: float
    q2: float
    longitudinal: ClassVar[bool]

    @property
    def estimate_size(self) -> int:
        """Length of the estimate vector (k; dBitFlipPM: its number of buckets)."""
        return self.k

    @property
    def support_shape(self) -> tuple[int, ...]:
        return (self.k,)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """(estimate_size,) for a frequency vector."""
        return (self.estimate_size,)

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """(C/n − P0)/(P1 − P0)."""
        return (support / n - self.P0) / (self.P1 - self.P0)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """:meth:`variance` at the plug-in frequencies."""
        return self.variance(n, plug_in)

    def postprocess_channel(self, n: int) -> pp.ChannelInfo:
        return pp.ChannelInfo(P1=self.P1, P0=self.P0, n=n, grr_type=False)

    # ------------------------------------------------------------------ the estimand's truth
    def true_frequencies(self, values: ArrayLike) -> NDArray[np.float64]:
        """What the estimate targets for users holding ``values``: the value histogram / n."""
        vals = check.domain_values(self.name, values, self.k)
        counts = np.bincount(vals.ravel(), minlength=self.k)
        return self.frequencies_from_counts(counts, max(1, vals.size))

    def frequencies_from_counts(self, counts: ArrayLike, n: int) -> NDArray[np.float64]:
        """The estimate's target from value counts (…, k) of n users: counts / n."""
        return np.asarray(counts, dtype=np.float64) / n

    # ------------------------------------------------------------------ variances
    def accuracy_figure(self, n: int) -> tuple[str, float] | None:
        """V* (:meth:`approx_variance`)."""
        return "V*", self.approx_variance(n)

    def approx_variance(self, n: int) -> float:
        """V*: variance of one estimate at f = 0 (the papers' figure of merit)."""
        n = check.integer(self.name, "n", n, minimum=1)
        return privacy.approx_variance(n, self.P1, self.P0)

    def variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """Exact variance of the estimate of a value with true frequency ``f`` (array ok)."""
        n = check.integer(self.name, "n", n, minimum=1)
        return privacy.estimator_variance(n, frequencies(self.name, f), self.P1, self.P0)

    def first_round_variance(self, n: int, f: ArrayLike) -> NDArray[np.float64]:
        """V1: the part of :meth:`variance` fixed by the round-1 memos and per-user state.

        It is shared by every report of an unchanging population, so averaging τ estimates
        cannot remove it (:meth:`time_average_variance`). One-shot oracles memoize nothing: 0.
        """
        n = check.integer(self.name, "n", n, minimum=1)
        freqs = frequencies(self.name, f)
        if not self.longitudinal:
            return np.zeros_like(freqs)
        return privacy.first_round_variance(n, freqs, self.P1, self.P0, self.p2, self.q2)

    def time_average_variance(self, n: int, f: ArrayLike, tau: int) -> NDArray[np.float64]:
        """Var of the mean of τ estimates of users whose values never change: V1 + (Vtot − V1)/τ
        (:func:`longldp.privacy.time_average_variance`)."""
        return privacy.time_average_variance(
            self.variance(n, f), self.first_round_variance(n, f), tau
        )


class Aggregator:
    """Server side: accepts batches of reports incrementally, estimates on demand."""

    def __init__(self, oracle: Any):
        self.oracle = oracle
        self.n = 0
        self._support: NDArray | None = None

    def add(self, reports: NDArray | Sequence[Any]) -> None:
        """Add a batch of report records (as returned by ``perturb`` or ``Client.report``)."""
        batch = as_report_array(reports)
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
            return self.oracle.support_counts(self.oracle.empty_records())
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
            "support": _support_json(self.support_counts),
        }

    def estimate(self, postprocess: str | pp.PostProcessor | None = None) -> NDArray[np.float64]:
        """Frequencies from everything added so far."""
        if self.n == 0:
            raise ValueError(f"{self.oracle.name}: no reports have been added yet.")
        return self.oracle.estimate(self.support_counts, self.n, postprocess)

    def estimate_with_se(
        self, postprocess: str | pp.PostProcessor | None = None, level: float = 0.95
    ) -> Estimate:
        """:meth:`Estimator.estimate_with_se` of everything added so far."""
        if self.n == 0:
            raise ValueError(f"{self.oracle.name}: no reports have been added yet.")
        return self.oracle.estimate_with_se(self.support_counts, self.n, postprocess, level)


def _support_json(support: NDArray) -> list[Any]:
    """Support as JSON: integer counts as ints; a numeric mean's sums (floats) as floats."""
    arr = np.asarray(support)
    return (arr.astype(np.float64) if arr.dtype.kind == "f" else arr.astype(np.int64)).tolist()


def as_report_array(reports: NDArray | Sequence[Any]) -> NDArray:
    """A batch of report records as one array (a list of records stacked)."""
    if isinstance(reports, np.ndarray):
        return reports
    items = list(reports)
    if not items:
        raise ValueError("reports: an empty list has no type; pass an empty report array.")
    return np.stack([np.asarray(r) for r in items]) if np.ndim(items[0]) else np.array(items)


def frequencies(owner: str, f: ArrayLike) -> NDArray[np.float64]:
    """``f`` as frequencies in [0, 1]; ``ValueError`` otherwise."""
    arr = np.asarray(f, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{owner}: 'f' must be frequencies in [0, 1]; got {f!r}.")
    return arr
