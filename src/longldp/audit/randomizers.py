"""Randomizers as plain functions: the package's own clients, and positive controls.

Wrappers (what a user auditing longldp's clients from outside would write):

- :func:`protocol_randomizer`: a registered protocol's client path (``perturb`` on fresh
  memos) returning its wire-format reports (docs/wire-format.md) as rows of bytes;
- :func:`protocol_lifetime`: the same over τ reports of each client, memos kept (or, with
  ``stateless=True``, every report from a fresh client).

Positive controls (docs/audit.md §10), each a NumPy randomizer written from scratch, wrong in a
way a score built from the claimed protocol does not look at; :func:`audit_randomizer` must
flag every one:

- :func:`off_by_one_unary`: OUE that also sets the bit after the true one in its report;
- :func:`leaky_value`: GRR that skips the randomization, some of the time, for one input;
- :func:`grr_wrong_for_large_k`: GRR whose keep probability is right for k ≤ 8 only;
- :func:`reused_hash_seed`: LOLOHA whose hash seed, and so its memos, are shared by all users;
- :func:`shared_memo_lifetime`: an L-GRR client with one memo slot for all values (redrawn
  whenever the value changes): alternating values compose every report;
- :func:`redrawn_memo_lifetime`: an L-GRR client that redraws its memo at every report.

References: Wang et al., USENIX Security 2017 (GRR, OUE); Arcolezi et al., EDBT 2023 (LOLOHA);
Arcolezi et al., DCN 2022 (L-GRR); docs/math.md §2–§3 for the probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import privacy
from longldp.protocols import FrequencyOracle

# ------------------------------------------------------------------------------ wrappers


def protocol_inputs(proto: FrequencyOracle, values: NDArray[np.int64]) -> Any:
    """The protocol's inputs for integer values (its domain's ``as_inputs``: the codes
    themselves, or the strings Bloom-filter RAPPOR hashes)."""
    return proto.as_inputs(values)


def audit_domain(proto: FrequencyOracle) -> int:
    """Number of distinct inputs to audit: the domain's size (boolean RAPPOR: 2), or k for a
    domain that cannot be listed (Bloom RAPPOR's strings of codes 0..k−1)."""
    return proto.domain.audit_size or proto.k


def _wire_rows(proto: FrequencyOracle, reports: NDArray, n: int) -> NDArray[np.uint8]:
    blob = proto.encode_reports(reports)
    return np.frombuffer(blob, dtype=np.uint8).reshape(n, proto.wire_size)


def protocol_randomizer(proto: FrequencyOracle) -> Callable[[NDArray, np.random.Generator], Any]:
    """``randomize(values, rng)``: one wire-format report per input, each from a fresh client
    (``proto.perturb`` on a new memo: the client path a device runs)."""

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        n = values.size
        reports = proto.perturb(protocol_inputs(proto, values), proto.new_memo(n), rng)
        return _wire_rows(proto, reports, n)

    randomize.__name__ = f"randomize_{proto.name}"
    return randomize


def protocol_lifetime(
    proto: FrequencyOracle, stateless: bool = False
) -> Callable[[NDArray, np.random.Generator], NDArray[np.uint8]]:
    """``run(values, rng)`` for :func:`~longldp.audit.blackbox.audit_lifetime`: row i of
    ``values`` are the τ inputs of client i, reported through one memo kept for all τ
    (``stateless=True``: a fresh client, memo and per-user state, for every report). A
    history-dependent mechanism's client that sends nothing at an epoch (a CHANGES-TREE
    device between its node ends: a public fact) shows an all-zero row there."""

    def run(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        n, tau = values.shape
        memo = proto.new_memo(n)
        out = np.zeros((n, tau, proto.wire_size), dtype=np.uint8)
        for t in range(tau):
            if stateless:
                memo = proto.new_memo(n)
            before = memo.reports.copy()
            reports = proto.perturb(protocol_inputs(proto, values[:, t]), memo, rng)
            sent = memo.reports > before
            out[sent, t] = _wire_rows(proto, reports, int(sent.sum()))
        return out

    return run


# ------------------------------------------------------------------------------ controls


def _grr(values: NDArray[np.int64], k: int, keep: float, rng: np.random.Generator) -> NDArray:
    """Keep the value with probability ``keep``, else a uniform other one of [0, k)."""
    shift = rng.integers(1, k, size=values.shape)
    return np.where(rng.random(values.shape) < keep, values, (values + shift) % k)


def _symbol_rows(symbols: NDArray[np.int64], k: int) -> NDArray[np.uint8]:
    width = max(1, math.ceil((k - 1).bit_length() / 8))
    return symbols.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width :].copy()


def off_by_one_unary(k: int, eps: float) -> Callable:
    """OUE (p = ½, q = 1/(e^ε + 1)) that, after randomizing, also sets the bit after the true
    one (an off-by-one index when the report is written). That bit is then always 1 for input
    v and 1 with probability q for an input v' with v' + 1 ≠ v + 1 (and v' ≠ v + 1), so "the
    bit is 0" has probability 0 under v and 1 − q under v': the true ε is infinite, while a
    score built from OUE's likelihood ratio only looks at bits v and v' (the issue's example)."""
    q = 1.0 / (math.exp(eps) + 1.0)

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        onehot = np.arange(k)[None, :] == values[:, None]
        bits = np.where(onehot, rng.random(onehot.shape) < 0.5, rng.random(onehot.shape) < q)
        bits[:, 1:] |= onehot[:, :-1]  # the bug: bit v + 1 written as 1
        return np.packbits(bits, axis=1)

    return randomize


def leaky_value(k: int, eps: float, leak: int, rate: float = 0.2) -> Callable:
    """GRR at ε that, for the one input ``leak``, reports it unrandomized with probability
    ``rate`` (a debugging branch left in): Pr[y = leak | leak] = rate + (1 − rate)·p."""
    keep = privacy.grr_probabilities(eps, k)[0]

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        out = _grr(values, k, keep, rng)
        honest = (values == leak) & (rng.random(values.shape) < rate)
        return _symbol_rows(np.where(honest, values, out), k)

    return randomize


def grr_wrong_for_large_k(k: int, eps: float) -> Callable:
    """GRR whose keep probability is computed for min(k, 8) symbols: right for k ≤ 8, too
    high for larger domains (p = e^ε/(e^ε + 7) instead of e^ε/(e^ε + k − 1))."""
    keep = (
        privacy.grr_probabilities(eps, min(k, 8))[0]
        if k > 2
        else privacy.grr_probabilities(eps, k)[0]
    )

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        return _symbol_rows(_grr(values, k, keep, rng), k)

    return randomize


def reused_hash_seed(k: int, eps_perm: float, eps_1: float, seed: int = 12345) -> Callable:
    """BiLOLOHA (L-GRR over g = 2 hash buckets) whose users all share one hash seed and derive
    their round-1 memo from it (a PRF keyed by the seed, as a device derives memos from its
    secret): every user with the same value holds the same memo, so a report is round 2 of a
    fixed memo and reveals ln(p2/q2) > ε1 about the value."""
    g = 2
    p1 = privacy.grr_probabilities(eps_perm, g)[0]
    p2 = privacy.lgrr_p2(g, eps_perm, eps_1, "exact")
    memo_rng = np.random.default_rng(seed)
    hashed = memo_rng.integers(0, g, size=k)  # H_seed(v), the same for everyone
    memo = _grr(hashed, g, p1, memo_rng)  # round 1 derived from the seed: fixed per value
    seed_bytes = np.frombuffer(int(seed).to_bytes(8, "big"), dtype=np.uint8)

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        bucket = _grr(memo[values], g, p2, rng)
        out = np.empty((values.size, 9), dtype=np.uint8)
        out[:, :8] = seed_bytes
        out[:, 8] = bucket
        return out

    return randomize


def joint_only_leak(k: int, parts: int = 3) -> Callable:
    """A randomizer that leaks only through the joint of two bytes (ε = ∞ between inputs of
    different parity, claimed as anything finite).

    Its report is ``parts`` sub-reports of two bytes: a timing byte t, uniform on [0, 16), then
    a value byte v, uniform among the 8 values of [0, 16) whose bit parity is
    parity(t) XOR (x mod 2). Every byte alone is uniform on [0, 16) whatever x, and so is every
    pair of single bits (any three of v's four bits are free), so the byte, bit, bit-pair,
    naive-Bayes and linear-classifier tests see nothing; with three parts the reports take
    16⁶ values, beyond the histogram family; the joint of (t, v) reveals x mod 2 exactly."""
    parity = np.array([bin(v).count("1") & 1 for v in range(16)], dtype=np.int64)
    by_parity = [np.flatnonzero(parity == b) for b in (0, 1)]  # 8 values each

    def randomize(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        n = values.size
        out = np.empty((n, 2 * parts), dtype=np.uint8)
        for i in range(parts):
            t = rng.integers(0, 16, size=n)
            want = parity[t] ^ (values & 1)
            pick = rng.integers(0, 8, size=n)
            v = np.where(want == 1, by_parity[1][pick], by_parity[0][pick])
            out[:, 2 * i] = t
            out[:, 2 * i + 1] = v
        return out

    del k  # every input in [0, k) is accepted; only its parity shows
    return randomize


class _LgrrPopulation:
    """n L-GRR clients over k values (round 1 keep p1, round 2 keep p2), memos per value."""

    def __init__(self, n: int, k: int, p1: float, p2: float, rng: np.random.Generator):
        self.n, self.k, self.p1, self.p2, self.rng = n, k, p1, p2, rng
        self.memo = np.full((n, k), -1, dtype=np.int64)

    def _memos(self, values: NDArray[np.int64]) -> NDArray[np.int64]:
        rows = np.arange(self.n)
        held = self.memo[rows, values]
        fresh = held < 0
        held[fresh] = _grr(values[fresh], self.k, self.p1, self.rng)
        self.memo[rows, values] = held
        return held

    def report(self, values: NDArray[np.int64]) -> NDArray[np.uint8]:
        return _symbol_rows(_grr(self._memos(values), self.k, self.p2, self.rng), self.k)


class _SharedSlot(_LgrrPopulation):
    """One memo slot per client, redrawn when the value differs from the last one."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.last = np.full(self.n, -1, dtype=np.int64)

    def _memos(self, values: NDArray[np.int64]) -> NDArray[np.int64]:
        changed = values != self.last
        self.memo[changed, 0] = _grr(values[changed], self.k, self.p1, self.rng)
        self.last = values.copy()
        return self.memo[:, 0].copy()


class _Redrawn(_LgrrPopulation):
    """The memo is redrawn at every report: τ reports compose to τ·ε1."""

    def _memos(self, values: NDArray[np.int64]) -> NDArray[np.int64]:
        return _grr(values, self.k, self.p1, self.rng)


def _lgrr_probabilities(k: int, eps_perm: float, eps_1: float) -> tuple[float, float]:
    return privacy.grr_probabilities(eps_perm, k)[0], privacy.lgrr_p2(k, eps_perm, eps_1, "exact")


def lgrr_population(k: int, eps_perm: float, eps_1: float) -> Callable:
    """Factory ``make(n, rng)`` of correct L-GRR clients (the reference for the controls)."""
    p1, p2 = _lgrr_probabilities(k, eps_perm, eps_1)
    return lambda n, rng: _LgrrPopulation(n, k, p1, p2, rng)


def shared_memo_lifetime(k: int, eps_perm: float, eps_1: float) -> Callable:
    """Factory of L-GRR clients with one memo slot shared by all values (for
    :func:`~longldp.audit.blackbox.population_lifetime`): with values a, b, a, … every report
    has a fresh memo, so τ reports cost τ·ε1, not the claimed min(τ·ε1, 2ε∞)."""
    p1, p2 = _lgrr_probabilities(k, eps_perm, eps_1)
    return lambda n, rng: _SharedSlot(n, k, p1, p2, rng)


def redrawn_memo_lifetime(k: int, eps_perm: float, eps_1: float) -> Callable:
    """Factory of L-GRR clients that redraw the memo at every report (τ·ε1 > ε∞)."""
    p1, p2 = _lgrr_probabilities(k, eps_perm, eps_1)
    return lambda n, rng: _Redrawn(n, k, p1, p2, rng)
