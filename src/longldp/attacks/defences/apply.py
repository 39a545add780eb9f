"""Apply a defence to an attack run: the server's output with and without the fake users.

The gain under a defence D is D(after) − D(before): the defended estimate of all reports minus
the defended estimate of the genuine reports alone, i.e. what the fake users change in the
server's output when the server runs D either way (docs/attacks.md §8). Estimate-level
defences (normalization, recovery) apply to any engine; report-level ones (itemset detection,
memo consistency) read the stored reports and need the ``"reports"`` engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.attacks.defences import detection, memo, normalization, recovery
from longldp.attacks.runner import AttackRun, ReportLog

OWNER = "defend"
DEFENCES = ("none", "normalize", "norm-sub", "recover", "detect", "detect+recover", "memo")
REPORT_LEVEL = ("detect", "detect+recover", "memo")


def check_defence(proto: Any, defence: str, engine: str | None = None) -> str:
    """The defence name, or ValueError when it does not apply to the protocol or engine."""
    defence = check.choice(OWNER, "defence", defence, DEFENCES)
    if defence == "memo":
        memo.check_applies(proto, OWNER)
    if defence in ("detect", "detect+recover"):
        detection.check_applies(proto, OWNER)
    if defence in REPORT_LEVEL and engine is not None and engine != "reports":
        raise ValueError(
            f"{OWNER}: defence {defence!r} reads stored reports; run the attack with "
            f"engine 'reports' (got {engine!r})."
        )
    return defence


@dataclass
class Defended:
    """Defended estimates without and with the fake users, (τ, d) each, and diagnostics."""

    before: NDArray[np.float64]
    after: NDArray[np.float64]
    targets: NDArray[np.int64]
    info: dict[str, float] = field(default_factory=dict)

    @property
    def gains(self) -> NDArray[np.float64]:
        """D(after) − D(before) of every target at every epoch, (τ, r)."""
        return self.after[:, self.targets] - self.before[:, self.targets]

    @property
    def time_average_gain(self) -> float:
        """Σ_T of the defended time-averaged estimate's gain."""
        return float(self.gains.mean(axis=0).sum())


def defend(
    run: AttackRun,
    defence: str,
    *,
    alpha: float = memo.ALPHA,
    suspected: NDArray[np.int64] | None = None,
    tests: str = "one-value",
    detect_fpr: float | None = None,
    min_share: float | None = None,
) -> Defended:
    """Run ``defence`` on both sides of ``run``.

    ``suspected`` are the items a recovery defence models as targets (default: the attack's
    true targets, an upper bound on what recovery can do; ``detect+recover`` uses the detected
    reports instead). ``tests`` chooses the memo-consistency tests (docs/attacks.md §7.1).
    Itemset detection tests pairs at ``alpha`` and flags a report from the threshold derived
    at the budget ``detect_fpr`` of honest devices (default ``alpha``), or at a fixed
    ``min_share`` of an itemset when given (docs/attacks.md §8.2).
    """
    proto = run.proto
    defence = check_defence(proto, defence)
    if defence in REPORT_LEVEL and run.log is None:
        raise ValueError(
            f"{OWNER}: defence {defence!r} needs the run's stored reports (engine 'reports')."
        )
    T = run.targets
    if defence == "none":
        return Defended(run.before, run.after, T)
    if defence in normalization.POSTPROCESSORS:
        method = normalization.postprocessor(defence)
        info = pp.ChannelInfo(P1=proto.P1, P0=proto.P0, n=run.n, grr_type=False)
        return Defended(_rows(method, run.before, info), _rows(method, run.after, info), T)
    if defence == "recover":
        targets = T if suspected is None else suspected

        def rec(rows: NDArray, sizes: NDArray) -> NDArray:
            return np.stack(
                [
                    recovery.recover(proto, r, targets=targets, n_reports=int(s)).frequencies
                    for r, s in zip(rows, sizes, strict=True)
                ]
            )

        tau = run.before.shape[0]
        return Defended(
            rec(run.before, np.full(tau, run.n)), rec(run.after, run.n + run.fake_reports), T
        )
    log = run.log
    assert log is not None
    honest = _subset(log, ~log.fake)
    epochs = np.unique(log.epoch)
    if defence == "memo":
        v_all = memo.memo_consistency(proto, log.device, log.records, alpha=alpha, tests=tests)
        v_hon = memo.memo_consistency(
            proto, honest.device, honest.records, alpha=alpha, tests=tests
        )
        after = memo.defended_estimates(proto, v_all, log.epoch, log.records, epochs)
        before = memo.defended_estimates(proto, v_hon, honest.epoch, honest.records, epochs)
        fake_dev = v_all.devices >= run.n
        return Defended(before, after, T, _rates(v_all.flagged, fake_dev, v_all.stated_fpr()))
    key = ("detect", alpha, detect_fpr, min_share)
    if key not in run.extra:  # detect and detect+recover share one detection per run
        options = {"alpha": alpha, "fpr": detect_fpr, "min_share": min_share}
        run.extra[key] = (
            detection.detect_over_epochs(proto, log.device, log.epoch, log.records, **options)[0],
            detection.detect_over_epochs(
                proto, honest.device, honest.epoch, honest.records, **options
            )[0],
        )
    flag_all, flag_hon = run.extra[key]
    after = _estimates_without(proto, log, flag_all, epochs, recover=defence != "detect")
    before = _estimates_without(proto, honest, flag_hon, epochs, recover=defence != "detect")
    dev_flag = _device_flags(log, flag_all)
    fake_dev = np.unique(log.device[log.fake])
    return Defended(
        before,
        after,
        T,
        {
            "flagged_fake": float(np.isin(fake_dev, dev_flag).mean()) if fake_dev.size else 0.0,
            "flagged_genuine": float(np.isin(np.arange(run.n), dev_flag).mean()),
        },
    )


def _rows(method: Any, rows: NDArray, info: pp.ChannelInfo) -> NDArray:
    return np.stack([pp.apply(method, r, 1.0, info) for r in rows])


def _subset(log: ReportLog, keep: NDArray[np.bool_]) -> ReportLog:
    return ReportLog(log.device[keep], log.epoch[keep], log.records[keep], log.fake[keep])


def _device_flags(log: ReportLog, flag: NDArray[np.bool_]) -> NDArray:
    return np.unique(log.device[flag])


def _rates(flagged: NDArray, fake: NDArray, fpr: float) -> dict[str, float]:
    return {
        "flagged_fake": float(flagged[fake].mean()) if fake.any() else 0.0,
        "flagged_genuine": float(flagged[~fake].mean()) if (~fake).any() else 0.0,
        "stated_fpr": float(fpr),
    }


def _estimates_without(
    proto: Any, log: ReportLog, flag: NDArray[np.bool_], epochs: NDArray, recover: bool
) -> NDArray[np.float64]:
    """Per epoch: the plain estimate of the unflagged reports, or (``recover``) the LDPRecover
    estimator with the flagged reports' share and reading as the malicious statistics."""
    out = np.zeros((epochs.size, proto.estimate_size))
    for i, t in enumerate(epochs):
        at = log.epoch == t
        keep, drop = at & ~flag, at & flag
        n_keep, n_drop = int(keep.sum()), int(drop.sum())
        if not recover or n_drop == 0:
            out[i] = proto.estimate(proto.support_counts(log.records[keep]), n_keep)
            continue
        total = n_keep + n_drop
        full = proto.estimate(proto.support_counts(log.records[at]), total)
        phi = proto.estimate(proto.support_counts(log.records[drop]), n_drop)
        out[i] = recovery.recover(
            proto, full, fake_share=n_drop / total, fake_reading=phi, max_share=0.99
        ).frequencies
    return out
