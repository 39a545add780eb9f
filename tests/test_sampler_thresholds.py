"""One float expression per probability: every claim against the probabilities its sampler
actually draws with, at high budgets (docs/math.md §16.1).

A client draws every Bernoulli as ``u < t`` with u a 53-bit uniform (NumPy's ``Generator.random``
and :class:`longldp.protocols.SecureRandom` alike: u = w·2⁻⁵³), so it realizes Pr = ⌈t·2⁵³⌉/2⁵³
exactly, and the complementary branch 1 − that. This test does not read a protocol's stored
claim: it runs the real client path (``perturb`` on a population memo, both rounds) with a
generator whose uniforms record every threshold they are compared with, rebuilds the channel
from those thresholds in exact rational arithmetic, and compares its ε with the claims
(``single_report_epsilon``, ``first_round_epsilon``): a claim must never be below the
sampler's ε and must be it, up to the claims' outward rounding of 10⁻¹² (privacy.round_up).

At ε ≥ 15 the small probabilities are a few thousand grid steps or fewer, so two float
expressions of one probability (e.g. 1 − P1 from a closed form while the sampler realizes
1 − fl(P1), as subset selection did: ε = 30.0000709 realized against a claim of
30.00000000003) differ visibly there.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

import longldp as ll
from longldp import privacy
from registry_cases import CLASSES, options, sampled_items

GRID = 2**53
#: Budgets from 15 up to the largest allowed (EPS_MAX = 30).
EPSILONS = (15.0, 15.25, 19.0, 23.5, 27.75, privacy.EPS_MAX)
ALPHAS = (0.5, 0.9)
#: Claims are rounded outward by 1e-12 relative (privacy.round_up); float noise is far below.
SLACK = 2e-12


class _Uniforms(np.ndarray):
    """Uniform draws that log every comparison they take part in: ``("less", thresholds)``
    for ``u < t``, the comparison's name for anything else (which the test refuses)."""

    log: list

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):  # type: ignore[no-untyped-def]
        plain = [np.asarray(x).view(np.ndarray) if isinstance(x, _Uniforms) else x for x in inputs]
        if method == "__call__" and ufunc in (np.less, np.greater, np.less_equal, np.greater_equal):
            if ufunc is np.less and isinstance(inputs[0], _Uniforms):
                values = np.unique(np.asarray(inputs[1], dtype=np.float64)).tolist()
                _Uniforms.log.append(("less", values))
            else:
                _Uniforms.log.append((ufunc.__name__, []))
        return getattr(ufunc, method)(*plain, **kwargs)


class RecordingGenerator(np.random.Generator):
    """A NumPy generator whose ``random`` draws record their comparisons (``_Uniforms``)."""

    def random(self, size=None, dtype=np.float64, out=None):  # type: ignore[no-untyped-def]
        return np.asarray(super().random(size, dtype, out)).view(_Uniforms)


def realized(t: float) -> Fraction:
    """Pr[u < t] for u uniform on {0, 2⁻⁵³, …, 1 − 2⁻⁵³}: ⌈t·2⁵³⌉/2⁵³, exactly."""
    return Fraction(math.ceil(Fraction(t) * GRID), GRID)


def thresholds(proto: ll.FrequencyOracle) -> dict[str, Fraction]:
    """Run the client path twice on the same population (a chain draws round 1 and round 2 in
    the first call, round 2 alone in the second) and name every threshold its uniforms met by
    the stored parameter of its round it equals (round 1: p1, q1; round 2: p2, q2); a
    threshold equal to none fails. Returns name → realized probability."""
    rng = RecordingGenerator(np.random.PCG64(7))
    users = 16
    codes = np.arange(users) % (proto.domain_size or 4)
    memo = proto.new_memo(users)
    calls = []
    for _ in range(2):
        _Uniforms.log = []
        proto.perturb(proto.as_inputs(codes), memo, rng)
        calls.append(list(_Uniforms.log))
    if proto.longitudinal:  # the second call's comparisons end the first call too
        rounds = [calls[0][: len(calls[0]) - len(calls[1])], calls[1]]
    else:
        rounds = [calls[0], []]
    names = ({"p1": proto.p1, "q1": proto.q1}, {"p2": proto.p2, "q2": proto.q2})
    if proto.history is not None:  # two epochs (an initial and a later report): its own names
        rounds, names = [calls[0] + calls[1]], (proto.probabilities(),)
    out: dict[str, Fraction] = {}
    for events, named in zip(rounds, names, strict=True):
        for event in events:
            assert event[0] == "less", f"{proto.name}: a uniform compared by {event[0]}"
            for t in event[1]:
                hits = [k for k, v in named.items() if v == t]
                assert hits, f"{proto.name}: the sampler draws with {t!r}, no parameter holds it"
                out[hits[0]] = realized(t)
    return out


def _log(x: Fraction) -> float:
    """ln of a positive rational, accurate to float precision even when x is huge or tiny."""
    return math.log(x.numerator) - math.log(x.denominator)


def _bits_epsilon(hi: Fraction, lo: Fraction, x: int, y: int) -> float:
    """ε of independent bits, 1 w.p. ``hi`` (encoded bit set) or ``lo`` (not set), for encodings
    differing in x bits one way and y the other (the form of privacy.rappor_bits_epsilon,
    computed exactly)."""
    up = max(_log(hi / lo), _log((1 - hi) / (1 - lo)))
    down = max(_log(lo / hi), _log((1 - lo) / (1 - hi)))
    return max(x * up + y * down, y * up + x * down)


def realized_epsilons(proto: ll.FrequencyOracle) -> tuple[float, float]:
    """(ε of one report, ε of round 1) of the channel the sampler realizes."""
    t = thresholds(proto)
    kind = str(proto.report_kind)  # the kind's name (docs/design.md §2)
    if kind == "change":  # contexts enumerated by the mechanism from the realized probabilities
        channels = proto.context_channels({name: float(p) for name, p in t.items()})
        eps = max(privacy.channel_epsilon(ch) for ch in channels)
        return eps, eps
    if kind in (
        "symbol",
        "hashed",
        "hadamard",
        "sketch-hadamard",
        "memo-sketch-hadamard",
        "prefix-sketch",
    ):
        m = proto.k if kind == "symbol" else proto.g  # type: ignore[attr-defined]
        k1 = t["p1"]  # keep, else a uniform other symbol of m
        k2 = t.get("p2", Fraction(1))
        o1, o2 = (1 - k1) / (m - 1), (1 - k2) / (m - 1)
        same = k1 * k2 + (m - 1) * o1 * o2  # report = value
        other = k1 * o2 + o1 * k2 + (m - 2) * o1 * o2  # report = a given other symbol
        return _log(same / other), _log(k1 / o1)
    if kind == "sampled-bits":
        keep = t["p1"]
        per_bit = _log(keep / (1 - keep))
        return min(proto.d, 2) * per_bit, min(proto.d, 2) * per_bit  # type: ignore[attr-defined]
    if kind == "enumerated":  # v is held w.p. p1, then a uniform output of the held part or
        # of the rest (subset selection, Hadamard response): count the two parts in the channel
        held = t["p1"]
        row = proto.report_channel()[0]
        n_held, n_rest = int((row == row.max()).sum()), int((row == row.min()).sum())
        eps = _log(held * n_rest / ((1 - held) * n_held))
        return eps, eps
    # Unary encodings and RAPPOR: round 1 sets a bit w.p. a1 (encoded 1) or a0 (encoded 0);
    # round 2 reports 1 w.p. b1 (memo 1) or b0; a symmetric round 2 flips with q2 only.
    a1, a0 = t["p1"], t["q1"]  # one-time RAPPOR: PRR and IRR in one draw (q*, p*)
    if "q2" in t:
        b0 = t["q2"]
        b1 = t.get("p2", 1 - b0)
    else:
        b1, b0 = Fraction(1), Fraction(0)
    hi, lo = a1 * b1 + (1 - a1) * b0, a0 * b1 + (1 - a0) * b0
    x, y = getattr(proto, "differing_bits", (1, 1))
    return _bits_epsilon(hi, lo, x, y), _bits_epsilon(a1, a0, x, y)


def high_budget_cases():
    """Every registered class with an exact channel at each high ε (chains at α = ε1/ε∞ of
    ALPHAS when reachable; RAPPOR's own (f, p, q) set to give ε∞ = ε and ε1 = α·ε for one
    bit, h = 1)."""
    for cls in CLASSES:
        if not sampled_items(cls):  # numeric: tests/test_numeric_privacy.py; SHE: no channel
            continue
        for eps in EPSILONS:
            for alpha in (
                ALPHAS if "eps_1" in cls.budget_params or "f" in cls.budget_params else (None,)
            ):
                if "eps_1" in cls.budget_params and alpha >= cls.max_alpha(eps):
                    continue
                yield pytest.param(cls, eps, alpha, id=f"{cls.name}-{eps}-{alpha}")


def build_high(cls: type, eps: float, alpha: float | None) -> ll.FrequencyOracle:
    takes = {f.name for f in dataclasses.fields(cls) if f.init}
    # k = 3, or the other parameters of its test parameters (a sketch's m and d)
    params: dict = {"k": 3} if "k" in takes else options(cls, cls.test_params[0])
    if "f" in cls.budget_params:
        # PRR bit keeps w.p. 1 − f/2 with ln((1 − f/2)/(f/2)) = ε/2 (ε∞ = 2·that for h = 1);
        # IRR: p = 1/(e^x + 1), q = 1 − p.
        f = 2.0 / (math.exp(eps / 2) + 1.0)
        p = 1.0 / (math.exp(alpha * eps) + 1.0)
        params |= {"f": f, "p": p, "q": 1.0 - p}
        if "h" in takes:
            params["h"] = 1
        if "one-time" in cls.name:
            params["f"] = 0.0
        return cls(**params)
    budget = {"eps": eps, "eps_perm": eps, "eps_1": (alpha or 0.0) * eps, "eps_window": eps}
    budget |= {"eps_total": eps, "eps_0": eps, "eps_node": eps}
    # Required structural parameters besides the budget (a window w ...): the test ones.
    required = set(cls.required_parameters())
    params |= {
        key: v
        for key, v in cls.test_params[0].items()
        if key in required and key not in budget and key not in params
    }
    return ll.protocol(cls.name, **params, **{p: budget[p] for p in cls.budget_params})


@pytest.mark.parametrize(("cls", "eps", "alpha"), list(high_budget_cases()))
def test_claims_equal_what_the_sampler_realizes(cls, eps, alpha):
    proto = build_high(cls, eps, alpha)
    single, first = realized_epsilons(proto)
    claim_single, claim_first = proto.single_report_epsilon(), proto.first_round_epsilon()
    assert claim_single >= single, (claim_single, single)
    assert claim_single <= single * (1 + SLACK) + SLACK, (claim_single, single)
    assert claim_first >= first, (claim_first, first)
    assert claim_first <= first * (1 + SLACK) + SLACK, (claim_first, first)


def test_the_recorder_sees_a_second_expression():
    """The check can fail: subset selection whose channel reads 1 − P1 from its closed form
    while its sampler realizes 1 − fl(P1) (the bug of issue 27, k = 6, ε = 30)."""
    proto = ll.protocol("SS", k=6, eps=30.0)
    single, _ = realized_epsilons(proto)
    omega = proto.omega
    a = omega * math.exp(30.0)
    closed = (6 - omega) / (a + 6 - omega)  # the second expression of 1 − P1
    stale = math.log(proto.p1 * (6 - omega) / (closed * omega))
    assert single - stale > 5e-5  # the stale claim understated the sampler's ε
    assert proto.single_report_epsilon() == pytest.approx(single, rel=SLACK)
