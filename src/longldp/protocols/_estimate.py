"""One estimate with its standard error and normal interval (docs/math.md §1.5).

:meth:`Estimator.estimate_with_se` and :meth:`Aggregator.estimate_with_se` call
:func:`estimate_with_se`; the collection server, the report archive and the command line all
use it, so they agree on every number. The rule:

- ``raw`` is the unbiased estimate f̂ (never clipped);
- ``estimate`` is ``raw``, or its post-processing when a method is given (a point estimate
  only: post-processing is not linear, so no interval is stated around it);
- ``se`` = sqrt(Var(f̂)) with the protocol's exact variance (docs/math.md (1.2)) at the
  plug-in f̃ = clip(f̂, 0, 1), the only values the variance is defined on;
- ``lower``/``upper`` = f̂ ∓ z·se, z the normal quantile of the level: a Wald interval for the
  true f around the estimator it is exact for in the limit (f̂ is a linear function of binomial
  counts). Its coverage on simulated data is tested in tests/test_statistics.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class Estimate:
    """An estimate of one timestamp with its standard error and interval (same shapes).

    For a frequency oracle every array has the estimate's length (k; dBitFlipPM: its number of
    buckets); for RAPPOR's Bloom filters, shape (m, k): per cohort and bit, the share of the
    cohort's clients whose bit is set, NaN for an empty cohort.
    """

    n: int
    postprocess: str | None
    level: float
    estimate: NDArray[np.float64]
    raw: NDArray[np.float64]
    se: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: nested lists of floats, NaN (an empty cohort) as None."""
        out: dict[str, Any] = {"n": self.n, "postprocess": self.postprocess, "level": self.level}
        for name in ("estimate", "raw", "se", "lower", "upper"):
            out[name] = _json_floats(getattr(self, name))
        return out


def normal_quantile(level: float) -> float:
    """z with P(|Z| ≤ z) = ``level`` for a standard normal Z (1.959963984540054 at 0.95)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"estimate: 'level' must be a number in (0, 1); got {level!r}.")
    return NormalDist().inv_cdf(0.5 + level / 2)


def estimate_with_se(
    proto: Any, support: ArrayLike, n: int, postprocess: Any = None, level: float = 0.95
) -> Estimate:
    """The estimate of ``support`` (one timestamp's counts of n reports), its unbiased form, its
    standard error and its ``level`` normal interval (module docstring, docs/math.md §1.5)."""
    z = normal_quantile(level)
    counts = np.asarray(support)
    if counts.shape != tuple(proto.support_shape):
        raise ValueError(
            f"{proto.name}: 'support' must have shape {tuple(proto.support_shape)} (one "
            f"timestamp's support counts); got shape {counts.shape}."
        )
    raw = proto.estimate(counts, n)
    est = raw if postprocess is None else proto.estimate(counts, n, postprocess)
    plug_in = proto.plug_in(raw)
    se = np.sqrt(proto.estimate_variance(counts, n, plug_in))
    name = postprocess if postprocess is None or isinstance(postprocess, str) else "callable"
    return Estimate(int(n), name, float(level), est, raw, se, raw - z * se, raw + z * se)


def _json_floats(arr: NDArray) -> Any:
    a = np.asarray(arr, dtype=np.float64)
    if a.ndim == 0:
        x = float(a)
        return x if math.isfinite(x) else None
    return (
        [_json_floats(row) for row in a]
        if a.ndim > 1
        else [float(x) if math.isfinite(x) else None for x in a.tolist()]
    )
