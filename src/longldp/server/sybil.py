"""What a crowd of surplus devices could do to a collection's estimates: the figure its page
shows beside the device count (docs/server.md, "Sybil bounds").

Whoever holds a collection's enrollment token can enroll devices up to the collection's cap,
at its enrollment rate. If the operator expects E devices and N are enrolled, the m = N − E
surplus ones may be fakes; each may send up to q reports per epoch (the quota), m·q in all,
beside at least the E genuine ones. Every estimator of the registry is affine in the support
counts, so the largest expected rise they can cause on one estimated value is the gain (18.1)
of docs/math.md §18.1 at f = 0 with every fake report reading the most one report can,

    shift = β · φ_max,   β = m·q/(E/c + m·q),

(:func:`longldp.privacy.poisoning.largest_shift`): the maximal gain attack on one target
(Cao, Jia and Gong, USENIX Security 2021, §3.4). φ_max, the largest reading of one report, is
the protocol's own estimator applied to single reports (n = 1: what one report adds), maximised
over positions and over a fixed sample of honest reports; a report that supports a position
gives the largest reading there, whatever the protocol (GRR: 1 + (k − 1)/(e^ε − 1)). c is the
number of estimate rows computed from separate reports (RAPPOR's m cohorts: each estimated
from its own cohort's reports, E/c genuine reports each; 1 for every other protocol), read from
the protocol's ``estimate_shape``. A shared-token collection counts no devices: its holders
can weigh any amount, and the page says so.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from longldp.privacy import poisoning
from longldp.protocols import FrequencyOracle
from longldp.server import db

#: Honest reports whose single readings are maximised over (users holding value 0).
SAMPLE = 64
SEED = 20260301


@functools.lru_cache(maxsize=256)
def largest_reading(proto: FrequencyOracle) -> float:
    """φ_max: the largest reading of one report on any estimated position (the protocol's
    estimator at n = 1 on the support of one report), over a fixed sample of honest reports."""
    rng = np.random.default_rng(SEED)
    reports = proto.perturb(
        proto.as_inputs(np.zeros(SAMPLE, dtype=np.int64)), proto.new_memo(SAMPLE), rng
    )
    best = -math.inf
    for i in range(SAMPLE):
        support = np.asarray(proto.support_counts(reports[i : i + 1]), dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            est = np.asarray(proto.estimate(support, 1), dtype=np.float64)
        if np.isfinite(est).any():
            best = max(best, float(np.nanmax(np.where(np.isfinite(est), est, np.nan))))
    return best


def sybil_view(proto: FrequencyOracle, auth: str, bounds: dict[str, Any], quota: int | None):
    """The page's Sybil section: devices, expected population, surplus and the largest shift
    of one estimate it could cause (JSON-ready)."""
    out: dict[str, Any] = {
        "auth": auth,
        **bounds,
        "quota": quota,
        "surplus": None,
        "largest_reading": None,
        "largest_shift": None,
    }
    if auth != db.AUTH_DEVICE:
        out["note"] = (
            "This collection takes one shared ingest token: the server counts no devices, and "
            "whoever holds the token can weigh any amount in any estimate."
        )
        return out
    expected = bounds.get("expected_devices")
    devices = int(bounds["devices"])
    if expected is None:
        out["note"] = (
            f"{devices:,} devices are enrolled (cap {bounds['max_devices']:,}). Declare the "
            "expected population (expected_devices) to see how far the devices above it could "
            "move an estimate."
        )
        return out
    surplus = max(0, devices - int(expected))
    rows = math.prod(tuple(proto.estimate_shape)[:-1])
    phi = largest_reading(proto)
    per_device = 1 if quota is None else int(quota)
    genuine = int(expected) // rows if rows > 1 else int(expected)
    shift = (
        0.0 if surplus == 0 else poisoning.largest_shift(genuine, surplus * per_device, phi)
    )
    out.update(surplus=surplus, largest_reading=phi, largest_shift=shift)
    out["note"] = (
        f"{devices:,} devices are enrolled; {int(expected):,} are expected, so {surplus:,} may "
        f"be fakes. Sending {per_device} report(s) each per epoch, they could raise one value's "
        f"estimate by up to {shift:.4g} in expectation (a fake report reads at most "
        f"{phi:.4g}; docs/math.md §18.1). Revoke devices you do not recognize (longldp "
        "devices revoke) and lower the cap or the enrollment rate."
    )
    return out
