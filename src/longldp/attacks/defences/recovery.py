"""Recovery of the genuine frequencies from poisoned ones, in the style of LDPRecover.

Sun, Ye, Hu, Duan, Wo, Xu and Yang ("LDPRecover: Recovering Frequencies from Poisoning Attacks
against Local Differential Privacy", ICDE 2024) write the poisoned estimate as a mixture of a
genuine and a malicious part, learn statistics of the malicious part from properties of the
protocol, and recover the genuine part by constrained inference. Our formulation
(docs/attacks.md §8.3), from longldp's estimator: f̂ is affine in the support, so over the N
reports

    f̂ = (1 − η) f_g + η f_m,    η = m/N,                                               (R.1)

with f_m the reading of the fake reports. Given η and f_m, the genuine-frequency estimator is
f̂_g = (f̂ − η f_m)/(1 − η), projected onto the simplex (Norm-Sub, docs/math.md §5: the
least-squares constrained inference). The statistics come from

- a detector (``fake_share`` and ``fake_reading`` measured on the flagged reports), or
- the maximal-gain model of the attack on suspected targets T̂ (``targets``): f_m = φ of MGA
  against T̂ (:mod:`longldp.attacks.crafting`, the strongest attack, which LDPRecover's
  adaptive attack generalizes), with η learned from two properties of honest data:
  (i) Σ_v E f̂_v = 1, so when Σ_v φ_v ≠ 1 (hashing: MGA inflates the sum) η̂ = (Σ f̂ − 1)/(Σ φ − 1);
  (ii) otherwise (one-symbol and unary reports, where MGA pushes every non-target down by η·φ_nt
  < 0) the lower quartile of the non-target estimates is anchored at zero genuine frequency:
  η̂ = q_{ρ/2}(f̂_{v∉T̂})/φ_nt with ρ = ``rare_share`` (default ¼): if the lowest share ρ of the
  non-target items are rare (genuine frequency ≈ 0), the ρ/2-quantile of all is the median of
  the rare items' estimates, i.e. their common shift η·φ_nt plus noise of median 0 (more rare
  items than ρ over-estimate η, fewer under-estimate it).

(i) is used when its standard error √d·√V*/|Σφ − 1| is below that of (ii), √V*/|φ_nt|.

Either way η̂ is clipped to [0, ``max_share``].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.attacks import crafting, gains
from longldp.attacks.threat import check_targets
from longldp.protocols import FrequencyOracle

OWNER = "recover"


@dataclass(frozen=True)
class Recovery:
    """Recovered frequencies and the statistics used."""

    frequencies: NDArray[np.float64]
    fake_share: float
    fake_reading: NDArray[np.float64]
    learned: str  # "given", "sum" or "tail"


def recover(
    proto: FrequencyOracle,
    estimates: ArrayLike,
    *,
    targets: ArrayLike | None = None,
    fake_share: float | None = None,
    fake_reading: ArrayLike | None = None,
    max_share: float = 0.5,
    n_reports: int | None = None,
    rare_share: float = 0.25,
    hash_trials: int = crafting.HASH_TRIALS,
) -> Recovery:
    """(R.1) solved for the genuine frequencies, then projected onto the simplex.

    ``n_reports`` (N) sets the noise level σ = √V* that decides between the two ways of
    learning η; ``rare_share`` is the share ρ of non-target items the anchor assumes rare.
    """
    f = np.asarray(estimates, dtype=np.float64)
    d = proto.estimate_size
    if f.shape != (d,) or not np.all(np.isfinite(f)):
        raise ValueError(f"{OWNER}: 'estimates' must be {d} finite numbers; got {f.shape}.")
    max_share = check.positive_float(OWNER, "max_share", max_share, upper=1.0)
    if fake_reading is not None:
        phi = np.asarray(fake_reading, dtype=np.float64)
        if phi.shape != (d,):
            raise ValueError(f"{OWNER}: 'fake_reading' must have length {d}; got {phi.shape}.")
    elif targets is not None:
        T = check_targets(targets, d, OWNER)
        phi = gains.fake_reading(proto, "MGA", T, hash_trials=hash_trials)
    else:
        raise ValueError(
            f"{OWNER}: give 'fake_reading' (from a detector) or suspected 'targets' (to model "
            "the attack); got neither."
        )
    if fake_share is not None:
        eta = min(check.positive_float(OWNER, "fake_share", fake_share, upper=1.0), max_share)
        how = "given"
    else:
        noise = 0.0 if n_reports is None else math.sqrt(proto.approx_variance(n_reports))
        eta, how = _learn_share(f, phi, targets, d, noise, rare_share)
        eta = float(np.clip(eta, 0.0, max_share))
    genuine = (f - eta * phi) / (1.0 - eta)
    return Recovery(pp.norm_sub(genuine, 1.0), eta, phi, how)


def _learn_share(
    f: NDArray[np.float64],
    phi: NDArray[np.float64],
    targets: ArrayLike | None,
    d: int,
    noise: float,
    rare_share: float,
) -> tuple[float, str]:
    """η̂ from the sum (when Σφ ≠ 1) or from the rare-item anchor, whichever is less noisy:
    SE(sum) ≈ √d·σ/|Σφ − 1| (σ² = V*), SE(anchor) ≈ σ/|φ_nt|."""
    excess = float(phi.sum() - 1.0)
    others = np.ones(d, dtype=bool)
    if targets is not None:
        others[np.asarray(targets, dtype=np.int64)] = False
    phi_nt = float(np.median(phi[others]))
    sigma = noise if noise > 0 else 1.0
    se_sum = math.sqrt(d) * sigma / abs(excess) if abs(excess) > 1e-12 else math.inf
    se_tail = sigma / abs(phi_nt) if phi_nt < 0 else math.inf
    if se_sum <= se_tail and math.isfinite(se_sum):
        return (float(f.sum()) - 1.0) / excess, "sum"
    if not math.isfinite(se_tail):
        return 0.0, "none"
    # The lowest share ρ of the non-targets are taken to be the rare items; the median of the
    # rare items' estimates (the ρ/2-quantile of all) is their shift η·φ_nt plus median noise 0.
    return float(np.quantile(f[others], rare_share / 2)) / phi_nt, "tail"
