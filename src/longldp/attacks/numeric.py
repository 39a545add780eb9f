"""Poisoning of numeric mean estimation (docs/attacks.md §13).

After Li, Wang, Shi, Zhang, Zhao, Chen and Ren, "Fine-grained poisoning attacks to local
differential privacy protocols for mean and variance estimation", USENIX Security 2023 ([LI23]):
m fake users join n genuine ones (fake share β = m/(n + m), as
:func:`longldp.attacks.threat.fake_count` counts them) and push the server's mean estimate of a
numeric mechanism (docs/math.md §20).

- **Input poisoning** (IPA): the fakes run the honest client on chosen inputs x*, so their
  debiased reports have mean u* = 2(x* − lo)/(hi − lo) − 1 ∈ [−1, 1];
- **output poisoning** (OPA): the fakes send crafted reports whose debiased values have the mean
  ŷ* they need, anywhere in the range of debiased reports the server accepts:
  [û_min, û_max] (:func:`report_extremes`): ±C for Duchi's sign, ±C_PM for PM and HM, SW's
  [−b, 1 + b] debiased, ±1/κ for the bits of the two-round forms, and for Laplace the ends of
  its report grid, [−1, 1] widened by 20 noise scales (the mechanism itself is unbounded:
  the grid is what bounds its poisoning, math §20.12).

The server averages all n + m debiased reports, so (ours, from the estimator of math §20.1)

    E[ū̂] = (1 − β)·ū + β·ŷ,   gain = E[ū̂] − ū = β·(ŷ − ū),                          (13.1)

ŷ = u* (input) or the fakes' crafted mean (output). [LI23]'s *fine-grained* goal is a target
mean x_t: the fakes choose ŷ = (ū_t − (1 − β)·ū)/β, reachable when it lies in [−1, 1] (input)
or [û_min, û_max] (output); otherwise the closest end, the largest gain there is.
The variance estimation [LI23] also attacks is not estimated by longldp (no target there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.attacks.threat import fake_count

OWNER = "numeric poisoning"
ATTACKS = ("input", "output")


def _mean_proto(proto: Any) -> Any:
    if str(getattr(proto, "estimand", "")) != "mean":
        raise check._fail(
            OWNER, "proto", "a numeric mechanism whose estimate is a mean (docs/math.md §20)",
            check.Described(f"{proto.name} (estimand {proto.estimand})"),
        )  # fmt: skip
    return proto


def report_extremes(proto: Any) -> tuple[float, float]:
    """[û_min, û_max]: the debiased values (u units) of the lowest and highest report the
    server accepts (the ends of the report grid, math §20.12)."""
    p = _mean_proto(proto)
    return _debiased(p, _extreme_report(p, low=True)), _debiased(p, _extreme_report(p, low=False))


def _extreme_report(proto: Any, low: bool) -> NDArray:
    if proto.report_kind == "sign":
        return np.array([0 if low else 1], dtype=np.uint8)
    lo, hi = proto.report_range()
    return proto.quantize(np.array([lo if low else hi]))


def _debiased(proto: Any, reports: NDArray) -> float:
    """The mean debiased value (u units) of report records, from the protocol's own support."""
    support = np.asarray(proto.support_counts(reports), dtype=np.float64)
    s1, _ = proto._sums(support, len(reports))
    return float(s1) / len(reports)


@dataclass(frozen=True)
class MeanPoisoning:
    """One attack's plan: the fakes' count and the mean ŷ of their debiased reports (u units),
    the expected estimate (declared units) and the target when one was given."""

    attack: str
    n_fake: int
    beta: float
    fake_mean_u: float
    expected_estimate: float
    expected_gain: float
    target: float | None
    reachable: bool


def plan(
    proto: Any,
    attack: str,
    genuine_mean: float,
    n_genuine: int,
    beta: float,
    target: float | None = None,
) -> MeanPoisoning:
    """The fakes' mean ŷ for a target mean (fine-grained, [LI23]) or, without one, the largest
    upward push; the expected estimate and gain by (13.1), in declared units."""
    p = _mean_proto(proto)
    attack = check.choice(OWNER, "attack", attack, ATTACKS)
    n = check.integer(OWNER, "n_genuine", n_genuine, minimum=1)
    m = fake_count(n, beta)
    b = m / (n + m)
    half = (p.hi - p.lo) / 2
    u_bar = (float(genuine_mean) - p.lo) / half - 1.0
    low, high = (-1.0, 1.0) if attack == "input" else report_extremes(p)
    if target is None:
        want = high
    else:
        u_t = (float(target) - p.lo) / half - 1.0
        want = (u_t - (1 - b) * u_bar) / b
    reachable = target is not None and low <= want <= high
    y = min(high, max(low, want))
    est_u = (1 - b) * u_bar + b * y
    est = p.lo + half * (est_u + 1.0)
    return MeanPoisoning(attack, m, b, y, est, est - float(genuine_mean), target, reachable)


def fake_reports(proto: Any, poisoning: MeanPoisoning, rng: Any) -> NDArray:
    """The fakes' report records: honest clients on the input x* with u* = ŷ (input attack), or
    crafted reports (output attack): one bit set with probability λ = (ŷ − û_min)/(û_max −
    û_min) for sign reports, the one real report whose debiased value is ŷ otherwise."""
    p = _mean_proto(proto)
    gen = np.random.default_rng(rng)
    m = poisoning.n_fake
    if poisoning.attack == "input":
        x = p.lo + (p.hi - p.lo) * (poisoning.fake_mean_u + 1.0) / 2.0
        return p.perturb(np.full(m, x), p.new_memo(m), gen)
    if p.report_kind == "sign":  # bits: a share λ of ones, drawn so that E[share] = λ exactly
        low, high = report_extremes(p)
        lam = (poisoning.fake_mean_u - low) / (high - low)
        return (gen.random(m) < lam).astype(np.uint8)
    # real reports: every fake sends the grid report nearest the one whose debiased value is ŷ
    lo, hi = p.report_range()
    ends = p.quantize(np.array([lo, hi]))
    a = _debiased(p, ends[:1])
    slope = (_debiased(p, ends[1:]) - a) / (ends[1] - ends[0])
    return p.quantize(np.full(m, ends[0] + (poisoning.fake_mean_u - a) / slope))


def poisoned_mean(proto: Any, genuine: NDArray, fakes: NDArray) -> float:
    """The server's mean estimate (declared units) of the genuine and fake reports together."""
    p = _mean_proto(proto)
    support = p.support_counts(genuine) + p.support_counts(fakes)
    return float(p.estimate(support, len(genuine) + len(fakes))[0])
