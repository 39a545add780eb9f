"""The central (shuffled) privacy of a collection, for its dashboard and its ``/privacy`` JSON.

What one device's reports reveal to an analyst who sees each epoch's reports only after a
trusted shuffler has mixed them (docs/math.md §17): :func:`longldp.shuffle.central_summary` of
the collection's protocol at n = the smallest number of reports in one of its epochs (every
epoch's shuffle holds at least that many; the figures fall as n grows, so the smallest epoch
gives a bound valid for all) and τ = the number of epochs with reports. δ is :data:`DELTA`.

The routes follow the protocol's ``linkage`` trait: when every report carries a per-device
field (a hash seed, a Hadamard row, a cohort, a bucket map), the note says that it links a
device's epochs and that the whole-collection figure never composes per-epoch shuffles
(docs/math.md §17.4).

It degrades, saying why, when there are no reports yet, when SciPy (the ``shuffle`` extra) is
not installed, and when n is so small that shuffling hides almost nothing (the shuffled ε of
one epoch within :data:`LITTLE_AMPLIFICATION` of the local ε of one report). The figures are
cached per (protocol, n, τ): computing them takes up to about a second at n = 10⁶.
"""

from __future__ import annotations

import functools
from typing import Any

from longldp.server import db

#: δ of the shuffled figures.
DELTA = 1e-6
#: Below this relative gain (shuffled ε of one epoch against the local ε of one report) the
#: page says that n is too small for the shuffled figures to mean much.
LITTLE_AMPLIFICATION = 0.01

#: Said beside every figure: what the memo budget and the shuffled figures protect.
PATTERN_NOTE = (
    "The whole-collection figures assume devices whose values change at the same epochs (one "
    "memo each here: values that do not change); for LOLOHA, dBitFlipPM and Bloom RAPPOR, whose "
    "memo key (hashed value, sampled bucket, cohort filter) depends on the device, devices "
    "whose memo keys change at the same epochs. The memo budget min(t·ε1, d·ε∞) bounds what "
    "a device's reports reveal about its values given the epochs at which they change, not "
    "those epochs; a device whose value changes is hidden only among the devices that change "
    "at the same epochs (docs/math.md §4 and §17.6). Between any two trajectories a device's "
    "reports are bounded by ε1 + (t − 1)·ε2, ε2 being round 2's own ε (docs/math.md (4.2))."
)


def _identity_note(auth: str, reports_per_epoch: int | None) -> str:
    """Who may rely on the shuffled figures, given how the collection authenticates."""
    if auth == db.AUTH_DEVICE:
        quota = (
            "one report per device and epoch, as the figures assume"
            if reports_per_epoch == 1
            else f"up to {reports_per_epoch} reports per device and epoch (the figures assume "
            "one; n counts reports, not devices)"
            if reports_per_epoch is not None
            else "no per-device quota (the figures assume one report per device and epoch; n "
            "counts reports, not devices)"
        )
        return (
            "This server enrolls devices and sees which device sent each report, so toward the "
            "server, its operators and its database only the local figures hold; the shuffled "
            "ones hold toward an analyst who receives each epoch's reports through a trusted "
            f"shuffler, stripped of device ids. The collection accepts {quota}."
        )
    return (
        "This collection takes reports under one shared token: the server does not bind them to "
        "devices and does not enforce one report per device and epoch, so n counts reports, not "
        "devices; its transport (addresses, timing) may still identify senders. The shuffled "
        "figures hold only toward an analyst who receives each epoch's reports through a "
        "trusted shuffler."
    )


def central_privacy(
    proto: Any,
    min_epoch_reports: int | None,
    epochs: int,
    auth: str,
    reports_per_epoch: int | None,
) -> dict[str, Any]:
    """The central privacy section of a collection (JSON-ready).

    ``status`` is ``"ok"``, ``"no-reports"``, ``"small-n"`` (figures given, but shuffling
    hides little at this n), ``"unavailable"`` (SciPy missing) or ``"not-offered"`` (a
    history-dependent protocol, for which no route is proven: docs/math.md §17.4); ``summary`` is
    ``central_summary(proto, n, epochs, DELTA).as_dict()`` when computed, else None; ``note``
    says what the figures mean or why they are missing.
    """
    out: dict[str, Any] = {
        "n": min_epoch_reports,
        "epochs": epochs,
        "delta": DELTA,
        "status": "ok",
        "summary": None,
        "note": "",
        "pattern_note": PATTERN_NOTE,
        "identity_note": _identity_note(auth, reports_per_epoch),
    }
    if not epochs or not min_epoch_reports:
        out["status"] = "no-reports"
        out["note"] = "No reports yet: the shuffled figures need at least one epoch with reports."
        return out
    try:
        summary = _summary(proto, int(min_epoch_reports), int(epochs))
    except ImportError:
        out["status"] = "unavailable"
        out["note"] = (
            "The shuffled figures need SciPy, which this server lacks: "
            "pip install 'longldp[shuffle]' (the 'server' extra includes it)."
        )
        return out
    except ValueError as err:  # a protocol the routes do not cover (its reports follow history)
        out["status"] = "not-offered"
        out["note"] = f"No shuffled figure for this protocol: {err}"
        return out
    out["summary"] = summary.as_dict()
    gain = 1.0 - summary.per_epoch / summary.per_report
    if gain < LITTLE_AMPLIFICATION:
        out["status"] = "small-n"
        out["note"] = (
            f"With n = {min_epoch_reports:,} reports in the smallest epoch, shuffling hides "
            f"little: one epoch's shuffled ε is within {LITTLE_AMPLIFICATION:.0%} of one "
            "report's local ε. The figures grow useful as every epoch gathers more reports."
        )
    else:
        out["note"] = (
            f"n = {min_epoch_reports:,} is the smallest number of reports in one epoch (every "
            f"epoch's shuffle holds at least that many), τ = {epochs} the epochs with reports."
        )
    linked = summary.linkage_words()  # a seed, row, cohort or bucket map in every report
    if linked:
        out["note"] += " " + linked
    return out


@functools.lru_cache(maxsize=256)
def _summary(proto: Any, n: int, epochs: int) -> Any:
    """``central_summary`` of a protocol object (a frozen dataclass, hashable), cached."""
    from longldp.shuffle import central_summary

    return central_summary(proto, n=n, epochs=epochs, delta=DELTA)
