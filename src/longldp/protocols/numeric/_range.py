"""The declared range of a numeric attribute, and the map to the mechanisms' coordinates.

A numeric mechanism is defined on a bounded interval [lo, hi] declared with the collection
(docs/math.md §20.1). Values are checked by the one input domain of numeric mechanisms,
:class:`longldp.protocols.traits.Interval`: NaN and ±inf are refused, and a value outside the
range is refused unless clipping was asked for, in which case the number of clipped values is
returned with the values (:class:`UnitValues`) so that it can be reported. This module only
adds the affine maps t = (x − lo)/(hi − lo) and u = 2t − 1 and their inverses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp.privacy import numeric as nm
from longldp.protocols.traits import Interval


@dataclass(frozen=True)
class UnitValues:
    """Values mapped to t ∈ [0, 1], with how many were clipped to get there (0 unless asked)."""

    t: NDArray[np.float64]
    clipped: int

    @property
    def u(self) -> NDArray[np.float64]:
        """The same values in u = 2t − 1 ∈ [−1, 1]."""
        return 2.0 * self.t - 1.0


@dataclass(frozen=True)
class NumericRange:
    """The declared range [lo, hi] of a numeric attribute (lo < hi, both finite)."""

    lo: float
    hi: float
    owner: str = "numeric range"

    def __post_init__(self) -> None:
        lo, hi = nm.numeric_range(self.owner, self.lo, self.hi)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def width(self) -> float:
        """hi − lo."""
        return self.hi - self.lo

    def interval(self, clip: bool = False) -> Interval:
        """The input domain of this range (:class:`~longldp.protocols.traits.Interval`)."""
        return Interval(self.lo, self.hi, clip)

    def to_unit(
        self, values: ArrayLike, *, clip: bool = False, owner: str | None = None
    ) -> UnitValues:
        """t = (x − lo)/(hi − lo), the values checked by :meth:`Interval.clip_values`."""
        x, clipped = self.interval(clip).clip_values(owner or self.owner, values)
        return UnitValues(self.t_of(x), clipped)

    def t_of(self, x: ArrayLike) -> NDArray[np.float64]:
        """t of checked values (no check; clipped to [0, 1] against float rounding)."""
        return np.clip((np.asarray(x, dtype=np.float64) - self.lo) / self.width, 0.0, 1.0)

    def x_of_t(self, t: ArrayLike) -> NDArray[np.float64]:
        """The declared value of t: lo + (hi − lo)·t."""
        return self.lo + self.width * np.asarray(t, dtype=np.float64)

    def mean_from_u(self, u_mean: ArrayLike) -> NDArray[np.float64]:
        """The mean in declared units of a mean ū in u units: lo + (hi − lo)(ū + 1)/2."""
        return self.x_of_t((np.asarray(u_mean, dtype=np.float64) + 1) / 2)

    def variance_from_u(self, v: ArrayLike) -> NDArray[np.float64]:
        """A variance in u units, in declared units: ×((hi − lo)/2)²."""
        return np.asarray(v, dtype=np.float64) * (self.width / 2) ** 2
