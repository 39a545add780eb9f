"""Black-box audits: the distinguishing game through the real client path (docs/audit.md §2–§3).

World 0 gives every client of a population the value sequence x⁰ (one value for τ reports,
or a, b, a, b, …), world 1 the sequence x¹ (the other value, or b, a, b, a, …). Each client
reports through the same code as a device (:meth:`FrequencyOracle.perturb` on a persistent
memo: ``_round1`` memoized per key, ``_round2`` per report; the reports are materialized), with
seeded or OS randomness. The auditor sees only the reports and scores each client by an attack:

- ``"lr"``: the log-likelihood ratio of all the client's reports under the *claimed* model
  (the protocol's own p1, q1, p2, q2, memo per value). For one report it is the optimal test
  (Neyman–Pearson); over τ reports it uses the memo: the reports are i.i.d. given the memo, so
  it is a function of the per-symbol or per-bit counts (docs/math.md §13.2).
- ``"majority"``: reconstruct the memo by a majority vote per bit (per symbol: the most frequent
  report) and score it with round 1's likelihood ratio; it needs no round-2 parameters.

Scores of a calibration share of the clients choose the test T = {score ≥ t}; the remaining
clients give TP and FP and the Clopper–Pearson bound of :mod:`longldp.audit.stats`.
Everything is vectorized over clients; a timestamp of n clients is one ``perturb`` call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.special import xlogy

from longldp import _validate as check
from longldp import privacy
from longldp.audit import stats
from longldp.audit.channels import memoized, report_kind, unary_count_llr
from longldp.protocols import FrequencyOracle, SecureRandom

ATTACKS = ("lr", "majority")
PATTERNS = ("one-value", "alternating")
#: Clients perturbed per ``perturb`` call (bounds the memory of a timestamp).
CHUNK = 1 << 18
#: Most outputs of an enumerated report channel the game tallies per client.
MAX_ENUMERATED = 4096
#: A lower bound above the claim by more than this is a violation (float noise is far below).
TOLERANCE = 1e-9


# ------------------------------------------------------------------------------ clients


class Reporter(Protocol):
    """A population of n black-box clients: ``report(values)`` is one timestamp's reports."""

    oracle: FrequencyOracle

    def report(self, values: NDArray[np.int64]) -> NDArray: ...


class PopulationClients:
    """n clients of ``proto`` on the vectorized client path, memos kept across reports."""

    def __init__(self, proto: FrequencyOracle, n: int, rng: Any):
        self.oracle = proto
        self._rng = rng
        self._memo = proto.new_memo(n)

    def report(self, values: NDArray[np.int64]) -> NDArray:
        return self.oracle.perturb(values, self._memo, self._rng)


class StatelessClients(PopulationClients):
    """Positive control: clients that redraw their round-1 memo at every report.

    The "longitudinal" client some libraries ship: per-user state (hash function, sampled
    buckets) is kept, the memo is not, so τ reports compose to τ·ε1 instead of saturating at ε∞.
    """

    def report(self, values: NDArray[np.int64]) -> NDArray:
        fresh = self.oracle.new_memo(self._memo.n_users)
        fresh.state, fresh.has_state = self._memo.state, self._memo.has_state
        self._memo = fresh
        return super().report(values)


class LoopClients:
    """n device clients (:meth:`FrequencyOracle.client`), called once per client per report.

    The per-trial loop the benchmark compares the vectorized game with.
    """

    def __init__(self, proto: FrequencyOracle, n: int, rng: Any):
        self.oracle = proto
        self._clients = [proto.client(rng) for _ in range(n)]

    def report(self, values: NDArray[np.int64]) -> NDArray:
        values = [v if isinstance(v, (str, bytes)) else int(v) for v in values]
        records = [c.report(v) for c, v in zip(self._clients, values, strict=True)]
        first = np.asarray(records[0])
        if first.dtype.names is not None:
            return np.array(records, dtype=first.dtype)
        return np.stack([np.asarray(r) for r in records])


CLIENTS: dict[str, Callable[[FrequencyOracle, int, Any], Reporter]] = {
    "population": PopulationClients,
    "stateless": StatelessClients,
    "loop": LoopClients,
}


# ------------------------------------------------------------------------------ tallies


class _Tally:
    """Per-client counts of the reports of one (value in world 0, value in world 1) group.

    Categorical reports (GRR-type symbols, hash buckets) count per symbol and ``a``/``b`` are
    the symbol of each candidate value per client. Bit reports (unary encodings, RAPPOR,
    dBitFlipPM) count ones per bit and ``a``/``b`` are boolean masks (n, width) of the bits
    each candidate value sets (its one-hot bit, Bloom filter in the client's cohort, or
    sampled bucket).
    """

    def __init__(self, proto: FrequencyOracle, n: int, a: Any, b: Any):
        self.proto, self.n, self.value_a, self.value_b = proto, n, a, b
        self.tau = 0  # audit_game has refused what the game cannot play (require_game)
        self.kind = report_kind(proto)
        self.bits = self.kind.statistic == "bits"
        self.channel = self.kind.symbol_channel(proto)
        width = self.kind.width(proto)
        self.counts = np.zeros((n, width), dtype=np.int32)
        self.a: NDArray = np.empty(0)
        self.b: NDArray = np.empty(0)

    def add(self, reports: NDArray) -> None:
        if self.tau == 0:
            self.a = self._target(reports, self.value_a)
            self.b = self._target(reports, self.value_b)
        observed = self.kind.observe(self.proto, reports)
        if self.bits:
            self.counts += observed
        else:
            m = self.counts.shape[1]
            flat = np.bincount(np.arange(self.n) * m + observed, minlength=self.n * m)
            self.counts += flat.reshape(self.n, m).astype(np.int32)
        self.tau += 1

    def _target(self, reports: NDArray, value: Any) -> NDArray:
        """Per client what ``value`` points at: its symbol (n,), its bit mask (n, width), or
        for an enumerated channel the channel row of the value."""
        if self.channel is not None:
            return np.asarray(value)
        inputs = [value] if self.proto.domain.audit_size is None else self.proto.as_inputs([value])
        got = self.kind.targets(self.proto, reports, inputs)
        if self.bits:
            return np.broadcast_to(got[:, 0, :], self.counts.shape)
        return np.asarray(got[:, 0])

    def pick(self, cols: NDArray[np.int64]) -> NDArray[np.int64]:
        """Counts at one column per client."""
        return self.counts[np.arange(self.n), cols].astype(np.int64)


def _score(tally: _Tally, attack: str, rng: np.random.Generator) -> NDArray[np.float64]:
    """Evidence for 'this client holds a' over 'holds b' (higher: more like world 0)."""
    p = tally.proto
    tau, p1, q1, p2, q2 = tally.tau, p.p1, p.q1, p.p2, p.q2
    kept = memoized(p)
    if tally.channel is not None:  # the log-likelihood ratio of each output
        channel = tally.channel
        r = np.log(channel[tally.a]) - np.log(channel[tally.b])
        if attack == "majority":
            mode = np.argmax(tally.counts + rng.random(tally.counts.shape) * 0.5, axis=1)
            return r[mode]
        return tally.counts @ r
    if attack == "majority" or (kept and q2 == 0.0):
        return _majority_score(tally, rng)
    if tally.bits:
        c = tally.counts
        if kept:
            r = unary_count_llr(np.arange(tau + 1), tau, p1, q1, p2, q2)[c]
        else:  # τ fresh reports per bit, each 1 w.p. P1 (bit set) or P0
            P1, P0 = p.P1, p.P0
            r = xlogy(c, P1 / P0) + xlogy(tau - c, (1 - P1) / (1 - P0))
        return np.sum(np.where(tally.a, r, 0.0) - np.where(tally.b, r, 0.0), axis=1)
    ca, cb = tally.pick(tally.a), tally.pick(tally.b)
    if not kept:
        return (ca - cb) * math.log(p1 / q1)  # one-shot: round 1 is the whole channel
    # GRR chain over m symbols: ln(q1·S + (p1 − q1)·ρ^{N_a}) − ln(same with N_b), ρ = p2/q2.
    lr = math.log(p2 / q2)
    log_s = np.logaddexp.reduce(tally.counts * lr, axis=1)
    base, gap = math.log(q1) + log_s, math.log(p1 - q1)
    return np.logaddexp(base, gap + ca * lr) - np.logaddexp(base, gap + cb * lr)


def _majority_score(tally: _Tally, rng: np.random.Generator) -> NDArray[np.float64]:
    """Memo estimate by majority vote (ties broken at random), scored by round 1."""
    counts = tally.counts.astype(np.float64)
    if tally.bits:
        memo = 2 * counts + rng.random(counts.shape) > tally.tau + 0.5
        hi, lo = (tally.proto.p1, tally.proto.q1)
        if not memoized(tally.proto):
            hi, lo = tally.proto.P1, tally.proto.P0
        r1 = np.where(memo, math.log(hi / lo), math.log((1 - hi) / (1 - lo)))
        return np.sum(np.where(tally.a, r1, 0.0) - np.where(tally.b, r1, 0.0), axis=1)
    mode = np.argmax(counts + rng.random(counts.shape) * 0.5, axis=1)
    return (mode == tally.a).astype(np.float64) - (mode == tally.b)


def value_batch(proto: FrequencyOracle, value: Any, n: int) -> Any:
    """n copies of one input, as the protocol's population path takes them: the input the
    audit code ``value`` stands for (``proto.as_inputs``; a code itself for codes), or a
    string's copies for a domain without audit codes (Bloom RAPPOR)."""
    if proto.domain.audit_size is None:  # strings (Bloom RAPPOR)
        return [value] * n
    return proto.as_inputs(np.full(n, value, dtype=np.int64))


# ------------------------------------------------------------------------------ the game


@dataclass(frozen=True)
class GameResult:
    """One black-box audit: the claim, the (1 − α) lower bound on ε and how it was obtained."""

    protocol: str
    claim: float
    lower: float
    estimate: float
    tau: int
    pattern: str
    attack: str
    clients: str
    trials: int
    alpha: float
    tp: int
    fp: int
    n_eval: int
    threshold: float

    @property
    def violates(self) -> bool:
        """The lower bound exceeds the claim: the claim is refuted at confidence 1 − α."""
        return self.lower > self.claim + TOLERANCE


def describe(proto: FrequencyOracle) -> str:
    """``NAME(k=…, …)`` with the protocol's constructor parameters."""
    import dataclasses

    params = ", ".join(
        f"{f.name}={getattr(proto, f.name)!r}"
        for f in dataclasses.fields(proto)  # type: ignore[arg-type]
        if f.init and getattr(proto, f.name) is not None
    )
    return f"{proto.name}({params})"


def claimed_epsilon(
    proto: FrequencyOracle,
    tau: int = 1,
    pattern: str = "one-value",
    eps_1: float | None = None,
    eps_perm: float | None = None,
) -> float:
    """What the protocol claims for τ reports: min(τ·ε1, m·ε∞), m = 1 or 2 memos; τ·ε one-shot.

    ``eps_1``/``eps_perm`` override the protocol's own exact figures (to audit a published claim).
    """
    e1 = proto.single_report_epsilon() if eps_1 is None else eps_1
    einf = proto.first_round_epsilon() if eps_perm is None else eps_perm
    memos = 2 if pattern == "alternating" and tau >= 2 else 1
    return privacy.spent_epsilon(tau, memos, e1, einf if memoized(proto) else None)


def game_refusal(proto: FrequencyOracle) -> str | None:
    """Why the game cannot play ``proto`` (the reason, naming the audits that apply), or None.

    The game plays codes or strings, and tallies each client's reports per symbol or bit under
    one law given the value (docs/math.md §13.2). It refuses, from the traits: a
    history-dependent mechanism (its reports follow the device's own past values, docs/design.md
    §2.5); a protocol over numbers (the numeric mechanisms, docs/audit.md §15); a continuous
    report kind (nothing to tally: the black box bins its reports); and an enumerated report
    channel of a memoizing protocol, or of more than :data:`MAX_ENUMERATED` outputs (its τ
    reports are not i.i.d. draws of that channel, or too many to tally or to list). The exact audit
    (:func:`~longldp.audit.channels.exact_epsilons`) and the black box over the wire reports
    (:func:`~longldp.audit.blackbox.audit_randomizer`, ``audit_lifetime``) may still apply.
    """
    name = proto.name
    black_box = "the black box over its wire reports (audit_randomizer; longldp audit --blackbox)"
    if proto.history is not None:
        return (
            f"{name}: its reports depend on the client's own past values (history-dependent, "
            "docs/design.md §2.5), which the distinguishing game's client model does not "
            f"describe; audit it with {black_box} and by its exact channel."
        )
    if proto.domain.numbers:
        return (
            f"{name}: the distinguishing game plays codes or strings, not numbers "
            f"({proto.domain.describe()}); audit it with exact_epsilons (outputs on cells) and "
            f"{black_box}."
        )
    kind = report_kind(proto)
    if not kind.discrete:
        return (
            f"{name}: the game tallies discrete reports; report kind {kind.name!r} is "
            f"continuous: audit it with {black_box}, which bins them."
        )
    try:
        channel = kind.symbol_channel(proto)
    except ValueError as err:  # an enumerated channel too large to list at these parameters
        return f"{name}: the game needs its enumerated channel: {err} Or audit it with {black_box}."
    if channel is None:
        return None
    width = kind.width(proto)
    if proto.longitudinal or width > MAX_ENUMERATED:
        return (
            f"{name}: the game tallies enumerated reports of one-shot protocols with at most "
            f"{MAX_ENUMERATED} outputs; this one "
            + ("memoizes its reports" if proto.longitudinal else f"has {width}")
            + f": audit it with {black_box}."
        )
    return None


def require_game(proto: FrequencyOracle) -> None:
    """``ValueError`` with :func:`game_refusal`'s reason for a protocol the game cannot play."""
    why = game_refusal(proto)
    if why is not None:
        raise ValueError(why)


def default_inputs(proto: FrequencyOracle) -> tuple[Any, Any]:
    """Two inputs as far apart as possible: 0 and the last value of the domain (in different
    dBitFlipPM buckets; boolean RAPPOR: 0 and 1); for a protocol over strings (Bloom RAPPOR)
    the two of ``proto.as_inputs(range(32))`` whose filters differ in the most bits over the
    first 64 cohorts."""
    audit_size = proto.domain.audit_size
    if audit_size is None:
        words = list(proto.as_inputs(np.arange(32)))
        cohorts = np.arange(min(proto.m, 64))
        masks = np.stack(
            [
                np.unpackbits(proto.encode([w] * cohorts.size, cohorts), axis=1, count=proto.k)
                for w in words
            ]
        ).astype(bool)  # (words, cohorts, k)
        diff = (masks[:, None] ^ masks[None, :]).sum(axis=(2, 3))
        i, j = np.unravel_index(np.argmax(diff), diff.shape)
        return words[int(i)], words[int(j)]
    return 0, audit_size - 1


def check_inputs(proto: FrequencyOracle, inputs: tuple[Any, Any]) -> tuple[Any, Any]:
    """Validate the game's two inputs: two different values of the protocol's domain."""
    name = proto.name
    if len(inputs) != 2:
        raise ValueError(f"{name}: 'inputs' must be two values; got {inputs!r}.")
    x0, x1 = inputs
    audit_size = proto.domain.audit_size
    if audit_size is None:
        if not all(isinstance(x, (str, bytes)) for x in inputs):
            raise ValueError(f"{name}: a protocol over strings audits strings; got {inputs!r}.")
    else:
        vals = check.domain_values(name, np.array([x0, x1]), audit_size, "inputs")
        x0, x1 = int(vals[0]), int(vals[1])
    if x0 == x1:
        raise ValueError(f"{name}: 'inputs' must be two different values; got {x0!r} twice.")
    why = report_kind(proto).indistinguishable(proto, x0, x1)
    if why:
        raise ValueError(f"{name}: 'inputs' {x0} and {x1} {why}.")
    return x0, x1


def audit_game(
    proto: FrequencyOracle,
    trials: int = 100_000,
    *,
    tau: int = 1,
    pattern: str = "one-value",
    attack: str = "lr",
    alpha: float = 0.01,
    inputs: tuple[int, int] | None = None,
    claim: float | None = None,
    clients: str = "population",
    calibration: float = 0.2,
    rng: Any = None,
) -> GameResult:
    """Play the distinguishing game ``trials`` times per world and bound ε from below.

    Parameters
    ----------
    proto : the protocol whose clients are audited (they are treated as black boxes).
    trials : clients per world; a share ``calibration`` chooses the test, the rest evaluates it.
    tau : reports per client (1: the one-report audit).
    pattern : ``"one-value"`` (x0 for τ reports against x1) or ``"alternating"``
        (x0, x1, x0, … against x1, x0, x1, …).
    attack : ``"lr"`` or ``"majority"`` (see the module docstring).
    alpha : 1 − confidence of the bound.
    inputs : the two values (default 0 and k − 1).
    claim : the ε to hold the bound against (default :func:`claimed_epsilon`).
    clients : ``"population"`` (vectorized client path), ``"stateless"`` (positive control:
        memo redrawn every report) or ``"loop"`` (one device client per trial, slow).
    rng : a seed, a Generator, or ``"secure"`` for the OS randomness of a real device.

    Returns
    -------
    GameResult, whose ``violates`` says whether the claim is refuted.
    """
    name = proto.name
    require_game(proto)
    trials = check.integer(name, "trials", trials, minimum=10)
    tau = check.integer(name, "tau", tau, minimum=1)
    pattern = check.choice(name, "pattern", pattern, PATTERNS)
    attack = check.choice(name, "attack", attack, ATTACKS)
    clients = check.choice(name, "clients", clients, tuple(CLIENTS))
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{name}: 'alpha' must be in (0, 1); got {alpha!r}.")
    if not 0.0 < calibration < 1.0:
        raise ValueError(f"{name}: 'calibration' must be in (0, 1); got {calibration!r}.")
    x0, x1 = check_inputs(proto, default_inputs(proto) if inputs is None else inputs)
    n_cal = max(1, round(calibration * trials))
    if n_cal >= trials:
        raise ValueError(f"{name}: 'trials' = {trials} leaves no evaluation trials.")
    source = SecureRandom() if isinstance(rng, str) and rng == "secure" else rng
    gen = source if isinstance(source, (np.random.Generator, SecureRandom)) else None
    gen = np.random.default_rng(source) if gen is None else gen
    # Tie-breaking is the auditor's own randomness, not the client's.
    tie = gen if isinstance(gen, np.random.Generator) else np.random.default_rng()
    seq0 = _sequence(x0, x1, tau, pattern)
    seq1 = _sequence(x1, x0, tau, pattern)
    s0 = _play(proto, seq0, (seq0, seq1), trials, CLIENTS[clients], attack, gen, tie)
    s1 = _play(proto, seq1, (seq0, seq1), trials, CLIENTS[clients], attack, gen, tie)
    # Orientation: world 0's scores are high; also try the mirrored test and keep the better.
    n_ev = trials - n_cal
    t_up, pred_up = stats.choose_threshold(s0[:n_cal], s1[:n_cal], alpha)
    t_dn, pred_dn = stats.choose_threshold(-s1[:n_cal], -s0[:n_cal], alpha)
    if pred_up >= pred_dn:
        tp = int(np.count_nonzero(s0[n_cal:] >= t_up))
        fp = int(np.count_nonzero(s1[n_cal:] >= t_up))
        threshold = t_up
    else:
        tp = int(np.count_nonzero(-s1[n_cal:] >= t_dn))
        fp = int(np.count_nonzero(-s0[n_cal:] >= t_dn))
        threshold = -t_dn
    lower = float(stats.epsilon_lower_bound(tp, n_ev, fp, n_ev, alpha))
    return GameResult(
        protocol=describe(proto),
        claim=claimed_epsilon(proto, tau, pattern) if claim is None else float(claim),
        lower=lower,
        estimate=stats.point_epsilon(tp, n_ev, fp, n_ev),
        tau=tau,
        pattern=pattern,
        attack=attack,
        clients=clients,
        trials=trials,
        alpha=alpha,
        tp=tp,
        fp=fp,
        n_eval=n_ev,
        threshold=threshold,
    )


def _sequence(a: Any, b: Any, tau: int, pattern: str) -> list[Any]:
    if pattern == "one-value":
        return [a] * tau
    return [a if t % 2 == 0 else b for t in range(tau)]


def _play(
    proto: FrequencyOracle,
    seq: list[Any],
    worlds: tuple[list[Any], list[Any]],
    trials: int,
    make: Callable[[FrequencyOracle, int, Any], Reporter],
    attack: str,
    rng: Any,
    tie: np.random.Generator,
) -> NDArray[np.float64]:
    """Scores of ``trials`` clients who report ``seq`` (one of the two ``worlds``' sequences).

    The statistic is one fixed function of the reports, the same in both worlds: reports are
    grouped by the (world-0 value, world-1 value) pair of their timestamp, each group is scored
    for the world-0 value against the world-1 value, and the group scores add (their memos are
    independent)."""
    scores = np.empty(trials, dtype=np.float64)
    pairs = list(zip(*worlds, strict=True))
    for start in range(0, trials, CHUNK):
        n = min(CHUNK, trials - start)
        reporter = make(proto, n, rng)
        tallies = {pair: _Tally(proto, n, *pair) for pair in sorted(set(pairs))}
        for value, pair in zip(seq, pairs, strict=True):
            tallies[pair].add(reporter.report(value_batch(proto, value, n)))
        scores[start : start + n] = sum(_score(t, attack, tie) for t in tallies.values())
    return scores
