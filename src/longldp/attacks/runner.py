"""Run an attack over τ epochs: genuine users through a population, fake users beside them.

The n genuine users are one reporting group of a :class:`longldp.simulate.Population`, run by
its engine (docs/design.md §4, docs/attacks.md §6) one epoch at a time
(:meth:`~longldp.simulate.ReportingGroup.epochs`); this module defines no engine of its own.
What the fake users send follows what the population simulates:

- ``"count-level"`` (users as counts): each epoch's genuine support drawn from its true counts
  (``sample_support``); exact per epoch, O(k). The fake users' support is drawn from the law of
  their reports:
  C_f(v) ~ Bin(M_t, s̄_v) for every v, s̄ the expected support of one fake report
  (:mod:`longldp.attacks.crafting`); for one-symbol reports one multinomial (exact jointly);
  dBitFlipPM samplers ~ Bin(M_t, s̄_S) and ones | samplers ~ Bin(·, s̄_C/s̄_S). Persistent fake
  reports are drawn once and thinned (hypergeometric) when only some report. Per value this is
  the exact law; across values of one multi-support report (UE, hashing) it drops the small
  correlations between the padding bits and between the targets one hash function gathers.
- ``"per-user"`` (users as clients): genuine users memoize round 1 and keep their state over
  all epochs (``perturb_support``, exact over time); fake users are real devices whose report
  records are built (:func:`~longldp.attacks.crafting.craft_reports`) and counted by the
  server's ``support_counts``.
- ``"reports"``: the genuine epochs carry their records, and both populations' records are kept
  with device ids and epochs in a :class:`ReportLog`, the input of the defences that read
  stored reports.

The server estimates f̂ from the N_t = n + M_t reports of epoch t; the gain of target t is
f̂_t(after) − f̂_t(before) with "before" the estimate of the genuine reports alone ([CJG21] §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.attacks import crafting, kinds
from longldp.attacks.gains import VARIANTS
from longldp.attacks.threat import ThreatModel
from longldp.protocols import FrequencyOracle
from longldp.simulate import Population, check_engine

OWNER = "attacks.run_attack"


@dataclass
class ReportLog:
    """Stored reports of one collection: device id, epoch and record of every report.

    ``fake`` marks the fake devices' reports (ground truth for scoring defences; a server has no
    such column). Genuine devices are 0..n−1, fake ones n..n+m−1.
    """

    device: NDArray[np.int64]
    epoch: NDArray[np.int64]
    records: NDArray[Any]
    fake: NDArray[np.bool_]

    @staticmethod
    def concat(parts: list[ReportLog]) -> ReportLog:
        """One log of several, in order."""
        return ReportLog(
            np.concatenate([p.device for p in parts]),
            np.concatenate([p.epoch for p in parts]),
            np.concatenate([p.records for p in parts]),
            np.concatenate([p.fake for p in parts]),
        )


@dataclass
class AttackRun:
    """Estimates per epoch without and with the fake users, and the truth.

    Attributes
    ----------
    before, after, truth : arrays (τ, d)
        Genuine-only estimate, estimate over genuine + fake reports, genuine frequencies.
    fake_reports : array (τ,)
        M_t, fake reports counted at each epoch.
    """

    proto: FrequencyOracle
    targets: NDArray[np.int64]
    n: int
    m: int
    before: NDArray[np.float64]
    after: NDArray[np.float64]
    truth: NDArray[np.float64]
    fake_reports: NDArray[np.int64]
    genuine_support: NDArray[Any]
    fake_support: NDArray[Any]
    log: ReportLog | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gains(self) -> NDArray[np.float64]:
        """Δf̂ of every target at every epoch, shape (τ, r)."""
        return self.after[:, self.targets] - self.before[:, self.targets]

    @property
    def total_gain(self) -> NDArray[np.float64]:
        """G_t = Σ_T Δf̂_t per epoch, shape (τ,)."""
        return self.gains.sum(axis=1)

    @property
    def time_average_gain(self) -> float:
        """Σ_T of the gain of the time-averaged estimate (1/τ) Σ_t f̂_t."""
        return float(self.gains.mean(axis=0).sum())


def run_attack(
    proto: FrequencyOracle,
    threat: ThreatModel,
    attack: str,
    *,
    values: ArrayLike | None = None,
    counts: ArrayLike | None = None,
    variant: str = "per-epoch",
    engine: str = "count-level",
    rng: Any = None,
    hash_trials: int = crafting.HASH_TRIALS,
    postprocess: str | pp.PostProcessor | None = None,
) -> AttackRun:
    """Collect τ epochs of genuine users and fake users and estimate each epoch both ways.

    Parameters
    ----------
    proto : FrequencyOracle
    threat : ThreatModel
        Fake users (β or m), targets, join epoch, report rate.
    attack : {"RPA", "RIA", "MGA"}
    values : array (τ, n) or (n,), optional
        Genuine values per epoch (needed by the per-user and reports engines).
    counts : array (τ, k), optional
        Genuine value counts per epoch (count-level only; instead of ``values``).
    variant : {"per-epoch", "persistent", "memo-mimic"}
        Fake devices re-craft every epoch, replay one crafted report, or craft a round-1 memo
        with MGA and run round 2 honestly (chains only) (docs/attacks.md §5).
    engine : {"count-level", "per-user", "reports"}
    postprocess : post-processing applied to both estimates (e.g. a normalization defence).
    """
    attack = crafting.check_attack(attack, OWNER)
    variant = check.choice(OWNER, "variant", variant, VARIANTS)
    engine = check_engine(OWNER, engine)
    kind = kinds.attack_kind(proto, OWNER)
    if variant == "memo-mimic" and attack != "MGA":
        raise ValueError(f"{OWNER}: the 'memo-mimic' variant crafts memos with MGA; got {attack}.")
    T = threat.target_array(proto.estimate_size, OWNER)
    gen = np.random.default_rng(rng)
    vals, cnt = _population(proto, values, counts)
    tau = cnt.shape[0]
    n = int(cnt[0].sum())
    if np.any(cnt.sum(axis=1) != n):
        raise ValueError(f"{OWNER}: every epoch must hold the same n users.")
    m = threat.fakes(n)
    truth = proto.frequencies_from_counts(cnt, n)
    population = Population(n, engine, owner=OWNER)
    genuine = population.group(proto, label="genuine users")
    clients = population.simulates_clients
    fakes = _FakeDevices(proto, kind, attack, variant, T, m, threat, clients, gen, hash_trials)

    g_support = []
    f_support = []
    fake_counts = np.zeros(tau, dtype=np.int64)
    logs: list[ReportLog] = []
    epochs = genuine.epochs(gen, values=vals, counts=None if vals is not None else cnt)
    for t, epoch in enumerate(epochs):
        cg = epoch.support
        if epoch.records is not None:  # the reports are kept: log them
            logs.append(_log(np.arange(n), t, epoch.records, fake=False))
        cf, mt, frec, who = fakes.step(t)
        if frec is not None and epoch.records is not None:
            logs.append(_log(n + who, t, frec, fake=True))
        g_support.append(np.asarray(cg))
        f_support.append(np.asarray(cf))
        fake_counts[t] = mt
    gs = np.stack(g_support)
    fs = np.stack(f_support)
    before = proto.estimate(gs, n, postprocess)
    after = np.stack(
        [proto.estimate(gs[t] + fs[t], n + int(fake_counts[t]), postprocess) for t in range(tau)]
    )
    log = ReportLog.concat(logs) if logs else None
    return AttackRun(proto, T, n, m, before, after, truth, fake_counts, gs, fs, log)


def collect_reports(proto: FrequencyOracle, values: ArrayLike, rng: Any = None) -> ReportLog:
    """The stored reports of n honest devices over τ epochs (``values`` (τ, n)): each device
    memoizes as the real client does (``perturb`` with one population memo)."""
    vals, _ = _population(proto, values, None)
    assert vals is not None
    gen = np.random.default_rng(rng)
    devices = Population(vals.shape[1], "reports", owner=OWNER).group(proto)
    parts = [
        _log(np.arange(vals.shape[1]), t, epoch.records, fake=False)
        for t, epoch in enumerate(devices.epochs(gen, values=vals))
        if epoch.records is not None
    ]
    return ReportLog.concat(parts)


def _population(
    proto: FrequencyOracle, values: ArrayLike | None, counts: ArrayLike | None
) -> tuple[NDArray[np.int64] | None, NDArray[np.int64]]:
    """(values (τ, n) or None, counts (τ, k)) checked; whether counts suffice is the
    population's question (:meth:`~longldp.simulate.ReportingGroup.epochs`)."""
    if (values is None) == (counts is None):
        raise ValueError(f"{OWNER}: give exactly one of 'values' (τ × n) or 'counts' (τ × k).")
    if counts is not None:
        cnt = np.asarray(counts)
        if cnt.ndim == 1:
            cnt = cnt[None, :]
        if cnt.ndim != 2 or cnt.shape[0] < 1:
            raise ValueError(f"{OWNER}: 'counts' must have shape (tau, k); got {cnt.shape}.")
        for row in cnt:
            check.counts(OWNER, row, proto.k, "counts")
        return None, cnt.astype(np.int64)
    vals = np.asarray(values)
    if vals.ndim == 1:
        vals = vals[None, :]
    if vals.ndim != 2 or vals.shape[0] < 1 or vals.shape[1] < 1:
        raise ValueError(
            f"{OWNER}: 'values' must have shape (tau, n) with tau >= 1 and n >= 1; "
            f"got {vals.shape}."
        )
    vals = check.domain_values(OWNER, vals, proto.k)
    tau = vals.shape[0]
    offsets = np.arange(tau)[:, None] * proto.k
    cnt = np.bincount((vals + offsets).ravel(), minlength=tau * proto.k).reshape(tau, proto.k)
    return vals, cnt


def _log(device: NDArray[np.int64], t: int, rec: NDArray[Any], fake: bool) -> ReportLog:
    size = np.asarray(rec).shape[0]
    return ReportLog(
        device.astype(np.int64),
        np.full(size, t, dtype=np.int64),
        np.asarray(rec),
        np.full(size, fake, dtype=bool),
    )


class _FakeDevices:
    """The m fake devices over time: who reports at each epoch and what they send."""

    def __init__(
        self,
        proto: FrequencyOracle,
        kind: str,
        attack: str,
        variant: str,
        targets: NDArray[np.int64],
        m: int,
        threat: ThreatModel,
        clients: bool,
        rng: np.random.Generator,
        hash_trials: int,
    ) -> None:
        self.proto, self.kind, self.attack, self.variant = proto, kind, attack, variant
        self.T, self.m, self.threat, self.clients, self.rng = targets, m, threat, clients, rng
        self.trials = hash_trials
        if variant == "memo-mimic":
            self.mean = crafting.expected_memo_support(proto, targets, hash_trials=hash_trials)
        else:
            self.mean = crafting.expected_support(proto, attack, targets, hash_trials=hash_trials)
        self._fixed: Any = None  # persistent reports / crafted memos / RIA devices' values
        self._memo: Any = None

    def _who(self, t: int) -> NDArray[np.int64]:
        if t < self.threat.join_epoch:
            return np.zeros(0, dtype=np.int64)
        if self.threat.report_rate >= 1.0:
            return np.arange(self.m, dtype=np.int64)
        return np.flatnonzero(self.rng.random(self.m) < self.threat.report_rate)

    def step(self, t: int) -> tuple[NDArray, int, NDArray | None, NDArray[np.int64]]:
        """(support, M_t, records or None, reporting device indices) of epoch t."""
        who = self._who(t)
        if not self.clients:  # the population is counts: so are the fake users
            return self._count_level(who.size), who.size, None, who
        rec = self._records(who)
        if who.size == 0:
            return self._zero(), 0, rec, who
        return np.asarray(self.proto.support_counts(rec)), who.size, rec, who

    # -- users simulated as clients: real records
    def _records(self, who: NDArray[np.int64]) -> NDArray:
        p, gen = self.proto, self.rng
        if self.variant == "memo-mimic":
            if self._fixed is None:
                self._fixed = crafting.craft_memos(p, self.T, self.m, gen, hash_trials=self.trials)
            sub = crafting.CraftedMemos(
                self._fixed.kind,
                self._fixed.memo[who],
                None if self._fixed.hash_ids is None else self._fixed.hash_ids[who],
            )
            return crafting.memo_reports(p, sub, gen)
        if self.variant == "persistent":
            if self._fixed is None:
                self._fixed = crafting.craft_reports(
                    p, self.attack, self.T, self.m, gen, hash_trials=self.trials
                )
            return self._fixed[who]
        if self.attack == "RIA":  # a real client holding one target for ever
            if self._fixed is None:
                self._fixed = self.T[gen.integers(0, self.T.size, size=self.m)]
                if self.kind == "bucket-bits":
                    self._fixed = crafting.first_value_of_bucket(p, self._fixed)
                self._memo = p.new_memo(self.m)
            if who.size == 0:
                return crafting.craft_reports(p, "RIA", self.T, 0, gen)
            return p.perturb(self._fixed[who], self._memo, gen, users=who)
        return crafting.craft_reports(
            p, self.attack, self.T, who.size, gen, hash_trials=self.trials
        )

    def _zero(self) -> NDArray:
        return np.zeros(self.proto.support_shape, dtype=np.int64)

    # -- count level: the law of the fake reports' support
    def _count_level(self, size: int) -> NDArray:
        if self.variant == "persistent":
            if self._fixed is None:
                self._fixed = self._draw(self.m)
            if size == self.m:
                return self._fixed.copy()
            return self._thin(self._fixed, size)
        return self._draw(size)

    def _draw(self, size: int) -> NDArray:
        gen, s = self.rng, self.mean
        if self.kind == "bucket-bits":
            samplers = gen.binomial(size, s[1])
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(s[1] > 0, s[0] / np.where(s[1] > 0, s[1], 1), 0.0)
            return np.stack([gen.binomial(samplers, np.clip(share, 0, 1)), samplers])
        if self.kind == "symbol" and self.variant != "memo-mimic":
            return gen.multinomial(size, s / s.sum())
        if self.kind == "symbol":  # a round-2 report is one symbol too
            return gen.multinomial(size, s / s.sum())
        return gen.binomial(size, np.clip(s, 0.0, 1.0))

    def _thin(self, full: NDArray, size: int) -> NDArray:
        """The support of ``size`` of the m persistent reports, drawn without replacement."""
        gen = self.rng
        if self.kind == "symbol":
            return gen.multivariate_hypergeometric(full, size)
        if self.kind == "bucket-bits":
            samplers = gen.hypergeometric(full[1], self.m - full[1], size) if size else full[1] * 0
            ones = np.where(
                full[1] > 0,
                gen.hypergeometric(full[0], np.maximum(full[1] - full[0], 0), samplers)
                if size
                else 0,
                0,
            )
            return np.stack([ones, samplers])
        if size == 0:
            return np.zeros_like(full)
        return gen.hypergeometric(full, self.m - full, size)
