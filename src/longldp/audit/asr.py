"""Attacker success rate (ASR): how often the Bayes-optimal attacker guesses a user's value.

The figure Arcolezi et al. compare LDP protocols by (PVLDB 16(5), 2023, §4): the attacker
sees a client's reports, knows the protocol and a prior π over values, and guesses the value
of highest posterior; its success probability is

    ASR = Σ_y max_v π(v)·Pr[y | v]                                          (13.6)

over every output y (one report, or the τ reports of one client). With a uniform prior one
report of GRR gives e^ε/(e^ε + k − 1). Over τ reports a memoizing client's ASR saturates at
what its round-1 memo reveals, Σ_m max_v π(v)·Pr[m | v], while a stateless client's (memo redrawn
at every report) climbs toward 1 (docs/math.md §13.5).

:func:`attacker_success` computes it **exactly** where the channel can be enumerated:

- GRR-type chains (GRR, L-GRR): uniform prior by the sufficient statistic (the largest count of
  τ reports, a dynamic program over symbols); a given prior by enumerating count vectors;
- unary encodings (SUE, OUE, the L-UE chains, one-hot and boolean RAPPOR): bits are independent,
  so the guess is argmax_v ln π(v) + r(c_v) over per-bit counts c, whose laws are known;
- hash-based oracles with an enumerable family (SH, L-SH: the Hadamard rows; local hashing and
  LOLOHA with a public hash pool): uniform prior, averaged over the family's functions;
- dBitFlipPM: the enumerated one-report channel (no round 2: every report repeats the memo);

and by **simulation** otherwise (per-user hash seeds, Bloom-filter RAPPOR, given priors over
large count spaces): ``trials`` clients draw values from the prior and report through the
protocol's own client path (``perturb`` with a memo), the attacker takes the maximum-a-posteriori
value of :func:`longldp.audit.likelihood.log_likelihoods`, and the interval is Wilson's around
the mean success (ties shared).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp
from scipy.stats import binom, norm

from longldp import _validate as check
from longldp.audit.channels import memoized, no_round_two, report_kind
from longldp.audit.likelihood import domain_size, log_likelihoods
from longldp.audit.randomizers import protocol_inputs
from longldp.protocols import REGISTRY, FrequencyOracle

#: Largest τ of the exact dynamic programs (their cost grows as τ³).
MAX_EXACT_TAU = 200
#: Largest number of count vectors enumerated for a given prior over a GRR-type chain.
MAX_COUNT_VECTORS = 200_000
METHODS = ("auto", "exact", "simulated")


@dataclass(frozen=True)
class AttackSuccess:
    """ASR of one protocol and client model at τ reports, exact or simulated (with interval)."""

    protocol: str
    tau: int
    prior: str
    client: str
    asr: float
    low: float
    high: float
    method: str
    trials: int
    baseline: float

    @property
    def advantage(self) -> float:
        """ASR minus the best guess without reports, max_v π(v)."""
        return self.asr - self.baseline


def client_model(proto: FrequencyOracle, stateless: bool) -> str:
    """ "memoized", "stateless" or "one-shot" (what the reports of one client are)."""
    if not memoized(proto):
        return "one-shot"
    return "stateless" if stateless else "memoized"


def attacker_success(
    proto: FrequencyOracle,
    tau: int = 1,
    prior: ArrayLike | None = None,
    *,
    stateless: bool = False,
    method: str = "auto",
    trials: int = 20_000,
    confidence: float = 0.999,
    rng: Any = None,
) -> AttackSuccess:
    """The Bayes-optimal attacker's probability of guessing a client's value from τ reports.

    Parameters
    ----------
    proto : the protocol.
    tau : reports of the client (one value held for all).
    prior : probabilities of the k values (default uniform).
    stateless : the client redraws everything (memo, hash, cohort) at every report, the
        "longitudinal" client that keeps no state; default the protocol's own memoized client.
    method : "auto" (exact when the channel can be enumerated, else simulated), "exact" (a
        ValueError when it cannot) or "simulated".
    trials, confidence, rng : the simulation: clients, level of the interval, randomness.

    Returns
    -------
    AttackSuccess
    """
    owner = proto.name
    why = asr_refusal(proto)
    if why is not None:
        raise ValueError(why)
    tau = check.integer(owner, "tau", tau, minimum=1)
    method = check.choice(owner, "method", method, METHODS)
    k = domain_size(proto)
    pi = _prior(owner, prior, k)
    uniform = prior is None
    model = client_model(proto, stateless)
    value = None
    if method != "simulated":
        value = exact_asr(proto, tau, pi, uniform, model)
        if value is None and method == "exact":
            raise ValueError(
                f"{owner}: the exact ASR needs an enumerable channel; this case (τ = {tau}, "
                f"{'uniform' if uniform else 'given'} prior, {model} client) is simulated only."
            )
    label = "uniform" if uniform else "given"
    base = float(pi.max())
    if value is not None:
        return AttackSuccess(proto.name, tau, label, model, value, value, value, "exact", 0, base)
    trials = check.integer(owner, "trials", trials, minimum=10)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    mean, _ = simulate_asr(proto, tau, pi, model == "stateless", trials, gen)
    low, high = wilson_interval(mean, trials, float(norm.isf((1 - confidence) / 2)))
    return AttackSuccess(proto.name, tau, label, model, mean, low, high, "simulated", trials, base)


def asr_refusal(proto: FrequencyOracle) -> str | None:
    """Why :func:`attacker_success` cannot describe ``proto`` (the reason), or None: a
    history-dependent mechanism's reports follow the device's own past values, not one law per
    value (docs/design.md §2.5); an open item space (its domain is not ``listed``) has no
    values to guess among, only the sample of items the audits draw."""
    if not proto.input_domain.listed:
        return (
            f"{proto.name}: its inputs are an open item space, not listed values; the ASR is the "
            "chance of guessing a value among listed ones (its exact ε, the game and the black "
            "box cover it)."
        )
    if proto.history is None:
        return None
    return (
        f"{proto.name}: its reports depend on the client's own past values (a history-dependent "
        "mechanism, docs/design.md §2.5), which the ASR's client model (one value, the same "
        "report law at every report) does not describe; audit its lifetime with "
        "longldp.audit.audit_lifetime."
    )


def wilson_interval(mean: float, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval for the mean of n independent values in [0, 1]: their variance
    is at most μ(1 − μ), the binomial one, so the interval is at least as wide as needed and
    never empty when every client succeeds (Wilson, JASA 1927)."""
    z2 = z * z
    center = (mean + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def _prior(owner: str, prior: ArrayLike | None, k: int) -> NDArray[np.float64]:
    if prior is None:
        return np.full(k, 1.0 / k)
    pi = np.asarray(prior, dtype=np.float64)
    if pi.shape != (k,) or not np.all(np.isfinite(pi)) or np.any(pi < 0) or pi.sum() <= 0:
        raise ValueError(
            f"{owner}: 'prior' must be {k} non-negative probabilities; got shape {pi.shape}."
        )
    if abs(pi.sum() - 1.0) > 1e-9:
        raise ValueError(f"{owner}: 'prior' must sum to 1; got {pi.sum():.6g}.")
    return pi


# ------------------------------------------------------------------------------ simulation


def simulate_asr(
    proto: FrequencyOracle,
    tau: int,
    prior: NDArray[np.float64],
    stateless: bool,
    trials: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """(mean success, its standard error) over ``trials`` clients of the real client path."""
    k = prior.size
    values = rng.choice(k, size=trials, p=prior).astype(np.int64)
    inputs = protocol_inputs(proto, values)
    memo = proto.new_memo(trials)
    reports = []
    for _ in range(tau):
        if stateless:
            memo = proto.new_memo(trials)
        reports.append(proto.perturb(inputs, memo, rng))
    ll = log_likelihoods(proto, reports, memoized=memoized(proto) and not stateless)
    with np.errstate(divide="ignore"):
        post = ll + np.log(prior)[None, :]
    top = post.max(axis=1, keepdims=True)
    win = post >= top - 1e-9 * (1.0 + np.abs(top))
    success = win[np.arange(trials), values] / win.sum(axis=1)
    return float(success.mean()), float(success.std(ddof=1) / math.sqrt(trials))


# ------------------------------------------------------------------------------ exact


def exact_asr(
    proto: FrequencyOracle, tau: int, prior: NDArray[np.float64], uniform: bool, model: str
) -> float | None:
    """(13.6) from the enumerated channel, or None when it cannot be enumerated here.

    The report kind decides, from its statistic and its enumerable family (no class names):
    reports that repeat the memo (or one fresh report of an enumerated channel) give
    Σ_y max_v π(v)·Pr[y | v] of one report; bits whose values' encodings are one-hot, or one
    bit for two values, have count laws in closed form; GRR-type symbols over m symbols take
    the dynamic program over the counts, averaged over the functions of a listed family.
    """
    kind = report_kind(proto)
    if not kind.discrete:
        return None
    if no_round_two(proto):
        if model == "stateless" and tau > 1:
            return None
        return _one_report_asr(proto, prior)  # no round 2: τ reports of a memo repeat it
    if kind.symbol_channel(proto) is not None:  # fresh reports of an enumerated channel
        return _one_report_asr(proto, prior) if tau == 1 and not memoized(proto) else None
    chain = _model_chain(proto, model)
    table = kind.value_table(proto)
    if kind.statistic == "bits":
        if table is None or not np.array_equal(table, np.broadcast_to(table[:1], table.shape)):
            return None  # encodings that depend on per-user state (cohorts), or not listed
        masks = table[0]
        if masks.shape == (2, 1) and not masks[0, 0] and masks[1, 0]:  # one bit, two values
            d1, d0 = _count_laws(chain, tau)
            return float(np.sum(np.maximum(prior[0] * d0, prior[1] * d1)))
        if masks.shape[0] == masks.shape[1] and np.array_equal(
            masks, np.eye(masks.shape[0], dtype=bool)
        ):
            return _unary_asr(prior, chain, tau)
        return None
    if tau > MAX_EXACT_TAU or table is None:
        return None
    m = kind.width(proto)
    if kind.hash_family(proto) is not None:  # a listed family of functions into m symbols
        if not uniform or (model == "stateless" and tau > 1):
            return None  # a fresh function per report, or a prior: simulated
        srt = np.sort(table, axis=1)
        occupancy = 1 + np.count_nonzero(srt[:, 1:] != srt[:, :-1], axis=1)
        sums = {j: chain_max_sum(m, j, tau, *chain) for j in np.unique(occupancy).tolist()}
        return float(np.mean([sums[j] for j in occupancy.tolist()]) / proto.k)
    if uniform:
        return chain_max_sum(proto.k, proto.k, tau, *chain) / proto.k
    return _grr_prior_asr(prior, tau, chain)


def _one_report_asr(proto: FrequencyOracle, prior: NDArray[np.float64]) -> float | None:
    """Σ_y max_v π(v)·Pr[y | v] over the exact one-report channel (listed families only)."""
    exact = report_kind(proto).channel(proto, np.random.default_rng(0))
    if not exact.exhaustive:
        return None
    return float(np.mean([np.sum(np.max(prior[:, None] * ch, axis=0)) for ch in exact.single]))


def memo_asr(proto: FrequencyOracle, prior: ArrayLike | None = None) -> float | None:
    """ASR of the round-1 memo itself (what a memoizing client's ASR tends to as τ → ∞), from
    its enumerated channel; None when it cannot be enumerated (as :func:`exact_asr`)."""
    k = domain_size(proto)
    pi = _prior(proto.name, prior, k)
    return exact_asr(proto, 1, pi, prior is None, "memo")


def _model_chain(proto: FrequencyOracle, model: str) -> tuple[float, float, float, float]:
    """(a1, b1, a2, b2) of the client model: memo keep/other, report keep/other ("memo": the
    round-1 memo observed directly)."""
    if model == "memo":
        return 1.0, 0.0, proto.p1, proto.q1
    if model == "memoized":
        return proto.p1, proto.q1, proto.p2, proto.q2
    kind = report_kind(proto)
    if kind.statistic == "symbols":  # keep the target symbol, else each other one of m
        return 1.0, 0.0, proto.P1, (1.0 - proto.P1) / (kind.width(proto) - 1)
    return 1.0, 0.0, proto.P1, proto.P0


def chain_max_sum(m: int, j: int, tau: int, a1: float, b1: float, a2: float, b2: float) -> float:
    """Σ over the m^τ report sequences of max over j designated symbols b of Pr[sequence | b].

    The memo is b with probability a1, each other symbol with b1; each report keeps the memo
    with a2, else each other symbol with b2. With ρ = a2/b2 and N_s the count of symbol s,
    Pr[seq | b] = b2^τ·(b1·Σ_s ρ^{N_s} + (a1 − b1)·ρ^{N_b}) (docs/math.md (13.2)), and the first
    term sums to b1·m over all sequences, so

        Σ_seq max_b Pr[seq | b] = b1·m + (a1 − b1)·(m·b2)^τ·E[ρ^{M_j}],

    M_j the largest count among the j symbols when the τ reports are uniform over m symbols.
    b2 = 0 (reports repeat the memo): j·a1 + (m − j)·b1.
    """
    if b2 == 0.0:
        return j * a1 + (m - j) * b1
    log_e = _log_mean_power_of_max(m, j, tau, math.log(a2 / b2))
    return b1 * m + (a1 - b1) * math.exp(tau * math.log(m * b2) + log_e)


def _log_mean_power_of_max(m: int, j: int, tau: int, log_rho: float) -> float:
    """ln E[ρ^{max of j coordinates}] for N ~ Multinomial(τ; 1/m, …, 1/m).

    A dynamic program over the j coordinates in log space: coordinate i takes
    x ~ Binomial(r, 1/(m − i)) of the r reports not yet placed (the multinomial's chain rule),
    the state is (r, running maximum c) and carries the weight ρ^c; the remaining reports go to
    the other m − j coordinates. O(j·τ³) elementary steps, all terms positive (no cancellation).
    """
    size = tau + 1
    state = np.full((size, size), -np.inf)  # [remaining r, running max c]
    state[tau, 0] = 0.0
    r_idx = np.arange(size)
    log_choose = gammaln(r_idx + 1)[:, None] - gammaln(r_idx + 1)[None, :]
    log_choose = log_choose - gammaln(np.maximum(r_idx[:, None] - r_idx[None, :], 0) + 1)
    for i in range(j):
        p = 1.0 / (m - i)
        # lb[r, x] = ln Binomial(x; r, p), −∞ for x > r.
        with np.errstate(divide="ignore", invalid="ignore"):
            fail = 0.0 if p == 1.0 else math.log1p(-p)
            lb = log_choose + r_idx[None, :] * math.log(p)
            lb = lb + (r_idx[:, None] - r_idx[None, :]) * fail
            if p == 1.0:  # every remaining report goes to the last coordinate
                lb = np.where(r_idx[:, None] == r_idx[None, :], 0.0, -np.inf)
        lb = np.where(r_idx[None, :] <= r_idx[:, None], lb, -np.inf)
        new = np.full((size, size), -np.inf)
        for x in range(size):
            # From (r, c) with r ≥ x to (r − x, max(c, x)), weight Bin(x; r, p)·ρ^{max(c,x) − c}.
            src = state[x:, :] + lb[x:, x, None]  # rows r = x … τ
            if not np.isfinite(src).any():
                continue
            dest_rows = slice(0, size - x)
            below = src[:, :x] + log_rho * (x - np.arange(x))[None, :]  # c < x → max becomes x
            if x:
                new[dest_rows, x] = np.logaddexp(new[dest_rows, x], logsumexp(below, axis=1))
            new[dest_rows, x:] = np.logaddexp(new[dest_rows, x:], src[:, x:])
        state = new
    return float(logsumexp(state))


def _grr_prior_asr(prior: NDArray[np.float64], tau: int, chain: tuple) -> float | None:
    """Σ over count vectors N of (τ; N)·max_v π(v)·Pr[seq_N | v], enumerated when small."""
    k = prior.size
    if math.comb(tau + k - 1, k - 1) > MAX_COUNT_VECTORS:
        return None
    a1, b1, a2, b2 = chain
    counts = _compositions(tau, k)  # (C, k)
    log_coef = gammaln(tau + 1) - gammaln(counts + 1).sum(axis=1)
    if b2 == 0.0:  # reports repeat the memo: only constant sequences
        pm = np.where(np.eye(k, dtype=bool), a1, b1)
        return float(np.sum(np.max(prior[:, None] * pm, axis=0)))
    lr = math.log(a2 / b2)
    with np.errstate(divide="ignore"):
        log_s = logsumexp(counts * lr, axis=1)
        if b1 > 0:
            per_v = np.logaddexp(math.log(b1) + log_s[:, None], math.log(a1 - b1) + counts * lr)
        else:
            per_v = counts * lr
        score = np.log(prior)[None, :] + per_v + tau * math.log(b2)
    return float(np.sum(np.exp(log_coef + score.max(axis=1))))


def _compositions(total: int, parts: int) -> NDArray[np.int64]:
    """Every vector of ``parts`` non-negative integers summing to ``total`` (stars and bars)."""
    if parts == 1:
        return np.array([[total]], dtype=np.int64)
    out = []
    for first in range(total + 1):
        rest = _compositions(total - first, parts - 1)
        out.append(np.hstack([np.full((rest.shape[0], 1), first), rest]))
    return np.vstack(out)


def _count_laws(chain: tuple, tau: int) -> tuple[NDArray, NDArray]:
    """Laws of a bit's count of ones over τ reports when the true bit is 1 (D1) and 0 (D0)."""
    a1, b1, a2, b2 = chain
    c = np.arange(tau + 1)
    hi, lo = binom.pmf(c, tau, a2), binom.pmf(c, tau, b2)
    return a1 * hi + (1 - a1) * lo, b1 * hi + (1 - b1) * lo


def _unary_asr(prior: NDArray[np.float64], chain: tuple, tau: int) -> float:
    """Unary encodings: the guess is argmax_v ln π(v) + r(c_v), r = ln D1 − ln D0, with the
    true bit's count c ~ D1 and every other bit's ~ D0, independent. Ties go to the smallest
    v (any rule gives the same ASR), so v wins when every u < v scores strictly less and every
    u > v at most as much: ASR = Σ_v π(v) Σ_c D1(c) Π_{u<v} F_u^<(s) Π_{u>v} F_u^≤(s)."""
    d1, d0 = _count_laws(chain, tau)
    support = d0 > 0
    with np.errstate(divide="ignore"):
        r = np.log(d1) - np.log(d0)
        log_pi = np.log(prior)
    r0, w0 = r[support], d0[support]
    order = np.argsort(r0, kind="stable")
    r0, w0 = r0[order], w0[order]
    cum = np.concatenate([[0.0], np.cumsum(w0)])
    total = 0.0
    k = prior.size
    for v in range(k):
        if prior[v] == 0:
            continue
        s = log_pi[v] + r  # (τ+1,) score of the true bit at each count
        below = np.empty((k, s.size))
        for u in range(k):
            if u == v:
                below[u] = 1.0
                continue
            # u's score must be < (u < v) or ≤ (u > v) v's; both sides computed the same way
            # so that equal counts under equal priors tie exactly.
            side = "left" if u < v else "right"
            below[u] = cum[np.searchsorted(log_pi[u] + r0, s, side=side)]
        total += prior[v] * float(np.sum(d1 * np.prod(below, axis=0)))
    return total


# ------------------------------------------------------------------------------ registry


def registered_protocols(k: int, values: dict[str, Any]) -> list[FrequencyOracle]:
    """Every protocol of the registry at domain size k, each constructor parameter found in
    ``values`` taken from it (e.g. eps, eps_perm, eps_1, d, h, m, f, p, q); a protocol whose
    *required* parameter is missing raises, so a newly registered protocol cannot be skipped."""
    out = []
    for cls in REGISTRY.values():
        params = {}
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.name == "k":  # RAPPOR-boolean has one bit and no k
                params["k"] = k
                continue
            if f.name in values:
                params[f.name] = values[f.name]
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(
                    f"registered_protocols: {cls.name} needs '{f.name}'; give it in 'values'."
                )
        out.append(cls(**params))
    return out
