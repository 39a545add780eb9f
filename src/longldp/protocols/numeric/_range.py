"""The declared range of a numeric attribute and the checks on the values a client holds.

A numeric mechanism is defined on a bounded interval [lo, hi] declared with the collection
(docs/math.md §20.1). A value outside it is refused with a ``ValueError``; it is never clipped
silently. A caller who wants clipping asks for it (``clip=True``), and the number of clipped
values is then returned with the values (:class:`UnitValues`), so it can be reported. NaN and
infinite values are refused whether or not clipping was asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp.privacy import numeric as nm


@dataclass(frozen=True)
class UnitValues:
    """Values mapped to t ∈ [0, 1], with how many were clipped to get there (0 unless asked)."""

    t: NDArray[np.float64]
    clipped: int

    @property
    def u(self) -> NDArray[np.float64]:
        """The same values in u = 2t − 1 ∈ [−1, 1]."""
        return 2.0 * self.t - 1.0


def real_values(owner: str, values: ArrayLike, name: str = "values") -> NDArray[np.float64]:
    """A float64 array of finite real numbers; bools, complex, text, NaN and ±inf refused."""
    arr = np.asarray(values)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise check._fail(
            owner, name, "real numbers (an integer or float dtype)",
            check.Described(f"dtype {arr.dtype}"),
        )  # fmt: skip
    x = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise check._fail(
            owner, name, "finite numbers (no NaN, no ±inf)",
            check.Described(f"{float(x.ravel()[i])!r} at index {i}"),
        )  # fmt: skip
    return x


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

    def to_unit(
        self, values: ArrayLike, *, clip: bool = False, owner: str | None = None
    ) -> UnitValues:
        """t = (x − lo)/(hi − lo) for finite x in [lo, hi]; outside refused unless ``clip``."""
        who = owner or self.owner
        x = real_values(who, values)
        outside = (x < self.lo) | (x > self.hi)
        n_out = int(np.count_nonzero(outside))
        if n_out and not clip:
            i = int(np.flatnonzero(outside.ravel())[0])
            raise check._fail(
                who, "values",
                f"in the declared range [{self.lo:g}, {self.hi:g}] (pass clip=True to clip "
                "them; the number clipped is then reported)",
                check.Described(f"{float(x.ravel()[i])!r} at index {i} ({n_out} outside)"),
            )  # fmt: skip
        if n_out:
            x = np.clip(x, self.lo, self.hi)
        t = (x - self.lo) / self.width
        return UnitValues(np.clip(t, 0.0, 1.0), n_out)

    def mean_from_u(self, u_mean: ArrayLike) -> NDArray[np.float64]:
        """The mean in declared units of a mean ū in u units: lo + (hi − lo)(ū + 1)/2."""
        return self.lo + self.width * (np.asarray(u_mean, dtype=np.float64) + 1) / 2

    def variance_from_u(self, v: ArrayLike) -> NDArray[np.float64]:
        """A variance in u units, in declared units: ×((hi − lo)/2)²."""
        return np.asarray(v, dtype=np.float64) * (self.width / 2) ** 2
