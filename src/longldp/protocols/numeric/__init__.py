"""Numeric attributes: mean and distribution estimation, one-shot and over time (docs/math.md §20).

Pure vectorized kernels (arrays in, arrays out, an explicit generator), which the registered
classes of :mod:`~longldp.protocols.numeric.mechanisms` (wire ids 50–59) call:

- :mod:`~longldp.protocols.numeric.oneshot`: Laplace, Duchi, PM, HM, SW and 1BitMean samplers,
  their debiasing, the unbiased mean with its standard error (:func:`perturb`,
  :func:`estimate_mean`, :func:`mean_variance`, :func:`worst_mean_variance`);
- :mod:`~longldp.protocols.numeric.sw`: SW's distribution estimate (exact transition matrix,
  EMS), its mean and the Wasserstein distance;
- :mod:`~longldp.protocols.numeric.chains`: the memoizing two-round forms L-1BitMean, L-PM and
  L-HM (α-point rounding, a memo per rounded value, a one-bit second round);
- :mod:`~longldp.protocols.numeric.moments`: the variance of the values from split users (one
  group reports x, the other the centred square; math §20.13);
- :class:`NumericRange`: the declared range; values outside it are refused unless clipping is
  asked for, and then counted.

The formulas (probabilities, variances, ε) are in :mod:`longldp.privacy.numeric`.
"""

from longldp.protocols.numeric import chains, moments, oneshot, sw
from longldp.protocols.numeric._range import NumericRange, UnitValues
from longldp.protocols.numeric.oneshot import (
    KERNELS,
    MeanEstimate,
    NumericKernel,
    Perturbed,
    estimate_from_sums,
    estimate_mean,
    kernel,
    mean_moments,
    mean_variance,
    perturb,
    worst_mean_variance,
)

__all__ = [
    "KERNELS",
    "MeanEstimate",
    "NumericKernel",
    "NumericRange",
    "Perturbed",
    "UnitValues",
    "chains",
    "estimate_from_sums",
    "estimate_mean",
    "kernel",
    "mean_moments",
    "mean_variance",
    "moments",
    "oneshot",
    "perturb",
    "sw",
    "worst_mean_variance",
]
