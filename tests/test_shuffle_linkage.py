"""Every shuffled central figure against the strongest analyst the reports allow (docs/math.md
§17.4, §17.7): the linkage trait checked against the real clients, the routes it leaves, and the
likelihood-ratio attack on every route of every registered protocol (longldp.audit.linkage).

Sizes come from the claims (docs/math.md §17.7): τ = 2 epochs (the smallest collection where
linking matters), n the smallest power of two from 16 at which the route's claim is at most
:data:`CLAIM_TARGET` (a claim the attack can refute with few worlds), and the worlds per kind
from :func:`longldp.audit.linkage.trials_for` of the claim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from longldp import shuffle as sh
from longldp.audit.likelihood import log_likelihoods
from longldp.audit.linkage import (
    _multiset_log_lr,
    linkage_attack,
    trials_for,
    world_scores,
)
from longldp.privacy.linkage import Linkage, Persistent
from registry_cases import build, exact_channel, triples

#: A claim the attack can refute with ⌈4·e^1.5·ln(400)⌉ = 108 worlds per kind.
CLAIM_TARGET = 1.5
#: Devices never more than this; a claim that stays above the target at every n is the local
#: ε of the tuple (nothing left to amplify), and the attack runs at :data:`TRIALS_CAP` worlds.
N_MAX = 4096
TRIALS_CAP = 1000
EPOCHS, DELTA, ALPHA = 2, 1e-3, 0.01


def _records(reports: list) -> np.ndarray:
    return np.array(reports) if np.ndim(reports[0]) == 0 else np.stack(reports)


# ----------------------------------------------------------------------------- the trait


@pytest.mark.parametrize(
    ("cls", "params"), [pytest.param(c, p, id=i) for c, p, i in triples()]
)
def test_declared_linkage_covers_what_the_reports_carry(cls, params):
    """A protocol whose trait says no field rides in its reports must send no byte that is the
    same in every report of one device and differs between devices (what a seed, row, cohort
    or bucket map does); one that declares such a field must send one (unless the field cannot
    vary at these parameters, e.g. dBitFlipPM sampling every bucket). 60 real clients, each
    holding one value for 6 reports: a noisy report agrees with itself 6 times in a row at a
    position for all 60 devices with negligible probability."""
    proto = build(cls, params, 4)
    rng = np.random.default_rng(11)
    domain = proto.domain_size or 4
    devices, reports = 60, 6
    rows = []
    for d in range(devices):
        client = proto.client(np.random.default_rng(rng.integers(2**63)))
        value = proto.as_inputs(np.array([d % domain]))[0]
        blob = proto.encode_reports(_records([client.report(value) for _ in range(reports)]))
        rows.append(np.frombuffer(blob, dtype=np.uint8).reshape(reports, proto.wire_size))
    wire = np.stack(rows)  # (devices, reports, bytes)
    constant_per_device = np.all(wire == wire[:, :1, :], axis=1).all(axis=0)
    varies_across = np.any(wire[:, 0, :] != wire[0, 0, :], axis=0)
    carried = bool(np.any(constant_per_device & varies_across))
    if not proto.linkage.linkable:
        assert not carried, f"{proto.name} sends a per-device field its linkage does not declare"
    elif not carried:
        # Declared but not observed: only a field that cannot vary here (bBitFlipPM's d = b).
        assert proto.linkage.linked_by == (Persistent.BUCKET_MAP,) and proto.d == proto.b


def test_a_client_that_sends_its_seed_is_caught():
    """The check above can fail: an L-GRR client made to append a per-device seed (as OLH's
    reports carry) shows a constant, varying field while its trait says nothing is linked."""
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    rng = np.random.default_rng(3)
    wire = []
    for d in range(40):
        seed = rng.integers(256, size=2, dtype=np.uint8)
        client = proto.client(np.random.default_rng(d))
        blobs = [proto.encode_reports(np.array([client.report(d % 4)])) for _ in range(6)]
        wire.append([np.concatenate([np.frombuffer(b, np.uint8), seed]) for b in blobs])
    wire = np.array(wire)
    constant = np.all(wire == wire[:, :1, :], axis=1).all(axis=0)
    varies = np.any(wire[:, 0, :] != wire[0, 0, :], axis=0)
    assert np.any(constant & varies) and not proto.linkage.linkable


@pytest.mark.parametrize(
    ("cls", "params"), [pytest.param(c, p, id=i) for c, p, i in triples()]
)
@pytest.mark.parametrize("memos", [1, 2])
def test_routes_follow_the_linkage(cls, params, memos):
    """docs/math.md §17.4: route tuple always; epochs only when nothing persists; memo for a
    chain unless its reports carry a field and the device holds several memos. The excluded
    routes name the field that links."""
    proto = build(cls, params, 4)
    persists = proto.linkage.persists
    sent = persists - {Persistent.MEMO}
    want = {"tuple"}
    if not persists:
        want.add("epochs")
    if Persistent.MEMO in persists and (memos == 1 or not sent):
        want.add("memo")
    summary = sh.central_summary(proto, 10_000, 4, DELTA, memos)
    assert {r.name for r in summary.routes} == want
    assert {r for r, _ in summary.excluded} == {"memo", "epochs", "tuple"} - want
    chain = Persistent.MEMO in persists
    for route, why in summary.excluded:
        linked_epochs = route == "epochs" and not chain
        linked_memos = route == "memo" and chain
        if linked_epochs or linked_memos:  # only a field in the reports excludes these
            assert any(str(f) in why for f in sent), why
        else:  # a chain's shared memo (epochs), or no memo at all (memo)
            assert "memo" in why, why
    assert summary.collection == min(r.epsilon for r in summary.routes)


def test_linked_memos_lose_the_memo_route():
    """OLOLOHA's seed links a device's two memos: no memo route, whereas L-GRR's memos, which
    nothing links, compose (docs/math.md §17.4)."""
    lgrr = sh.central_summary(ll.protocol("L-GRR", k=8, eps_perm=2, eps_1=0.8), 10**5, 50, 1e-6, 2)
    lolo = sh.central_summary(
        ll.protocol("OLOLOHA", k=8, eps_perm=2, eps_1=0.8), 10**5, 50, 1e-6, 2
    )
    assert lgrr.route == "memo" and lolo.route == "tuple"
    assert lolo.collection == pytest.approx(sh.clones_epsilon(4.0, 10**5, 1e-6), rel=1e-9)
    assert lolo.collection > lgrr.collection
    one = sh.central_summary(ll.protocol("OLOLOHA", k=8, eps_perm=2, eps_1=0.8), 10**5, 50)
    assert one.route == "memo"  # one memo: it includes the seed, the route stands


# ----------------------------------------------------------------------------- the attack


def test_the_attack_measures_shuffled_randomized_response_exactly():
    """GRR over two values at ε0 = 2, one epoch, n = 10: the analyst's view is shuffled binary
    randomized response with the others at 0, whose exact δ(ε) is known in closed form
    (shuffle.shuffled_rr_delta, docs/math.md §17.2). The likelihood-ratio test at ε must
    measure a lower bound at most that δ (it is valid) and within its statistical width of it
    (it is the optimal test), and refute a claim of half that δ."""
    proto = ll.protocol("GRR", k=2, eps=2.0)
    eps0 = proto.single_report_epsilon()
    n, eps, trials = 10, 0.5, 4000
    exact = sh.shuffled_rr_delta(eps, eps0, n)
    got = linkage_attack(proto, n, 1, eps, exact, trials=trials, rng=5)
    assert got.delta_lower <= exact and got.within_claim
    # Width: each Clopper–Pearson bound at level α/4 sits about z = 2.81 standard deviations
    # from its proportion, and the difference of proportions itself varies by σ; 5σ more.
    z = 2.81
    p1, p0 = max(got.hits[0], got.hits[2]) / trials, max(got.hits[1], got.hits[3]) / trials
    s1, s0 = math.sqrt(p1 * (1 - p1) / trials), math.sqrt(p0 * (1 - p0) / trials)
    width = z * (s1 + math.exp(eps) * s0) + 5 * math.hypot(s1, math.exp(eps) * s0)
    assert got.delta_lower >= exact - width
    false = linkage_attack(proto, n, 1, eps, exact / 2, trials=trials, rng=6)
    assert not false.within_claim and false.delta_lower > exact / 2


def _sizes(proto, route: str) -> tuple[int, float]:
    """(n, the route's claim): the smallest power of two from 16 whose claim is at most
    CLAIM_TARGET, else 16 (the claim is then the tuple's local ε: nothing to amplify)."""
    n = 16
    while True:
        routes = {r.name: r.epsilon for r in sh.central_summary(proto, n, EPOCHS, DELTA).routes}
        if routes[route] <= CLAIM_TARGET:
            return n, routes[route]
        if n >= N_MAX:
            break
        n *= 2
    routes = {r.name: r.epsilon for r in sh.central_summary(proto, 16, EPOCHS, DELTA).routes}
    return 16, routes[route]


@pytest.mark.parametrize(
    ("cls", "params", "route"),
    [
        pytest.param(c, p, r, id=f"{i}-{r}")
        for c, p, i in triples(exact_channel)
        for r in c.linkage.routes(1)
    ],
)
def test_every_central_claim_survives_the_linkage_attack(cls, params, route):
    """Each route the accounting gives a protocol, attacked by the likelihood-ratio test on the
    view the route bounds: the shuffled device tuples for routes tuple and memo (what linking
    by a persistent field yields; one memo per device), the independent epochs for route
    epochs. The measured (ε, δ) lower bounds must not exceed the claim. (A continuous report,
    SHE's floats, has no exact likelihood: the test needs the enumerated channel.)"""
    proto = build(cls, params, 3)
    n, claim = _sizes(proto, route)
    trials = trials_for(claim, ALPHA)
    if trials > TRIALS_CAP:
        # Only a claim that is the local ε of the tuple (no amplification left) needs more.
        local = proto.single_report_epsilon() * EPOCHS
        if proto.longitudinal:
            local = min(local, proto.first_round_epsilon())
        assert claim >= 0.99 * local
        trials = TRIALS_CAP
    view = "epochs" if route == "epochs" else "tuples"
    got = linkage_attack(proto, n, EPOCHS, claim, DELTA, view=view, trials=trials, rng=17)
    assert got.within_claim, got


def test_the_old_per_epoch_route_of_olh_is_violated():
    """Today's routes are attacked, and so were yesterday's: OLH's collection used to be
    bounded by composing τ per-epoch shuffles. Its reports carry the device's hash seed, so the
    analyst behind a per-epoch shuffler regroups each device's reports (done here for real on
    shuffled records), and the likelihood-ratio test on the tuples refutes that figure. At
    n = 1000, ε = 2, τ = 20 and δ = 0.05 the old figure is 2.39; the attack's 99% lower bounds
    are far above it, while the tuple route's claim (nothing left to amplify) stands."""
    proto = ll.protocol("OLH", k=2, eps=2.0)
    n, tau, delta = 1000, 20, 0.05
    old = sh.collection_bound(
        proto.single_report_epsilon(), None, n, tau, delta, linkage=Linkage()
    ).epsilon
    attack = linkage_attack(proto, n, tau, old, delta, rng=12)
    assert attack.delta_lower > delta and attack.epsilon_lower > old, attack
    new = sh.central_summary(proto, n, tau, delta).collection
    assert new > attack.epsilon_lower
    assert linkage_attack(proto, n, tau, new, delta, trials=attack.trials, rng=13).within_claim


def test_linking_by_the_seed_recovers_every_device_tuple():
    """The tuples view is what the analyst gets: per-epoch multisets of OLH records, each in a
    random order, regrouped by hash_id give back each device's tuple (the seeds are unique),
    and the attack's score computed from the regrouped tuples equals the one from the devices'."""
    proto = ll.protocol("OLH", k=2, eps=2.0)
    rng = np.random.default_rng(4)
    n, tau = 300, 5
    values = np.zeros(n, dtype=np.int64)
    values[0] = 1
    memo = proto.new_memo(n)
    epochs = [proto.perturb(values, memo, rng) for _ in range(tau)]
    shuffled = [rep[rng.permutation(n)] for rep in epochs]
    order = [np.argsort(rep["hash_id"], kind="stable") for rep in shuffled]
    linked = [rep[o] for rep, o in zip(shuffled, order, strict=True)]
    ids = linked[0]["hash_id"]
    assert np.unique(ids).size == n
    assert all(np.array_equal(rep["hash_id"], ids) for rep in linked)
    direct = _multiset_log_lr(log_likelihoods(proto, epochs, memoized=False), 1, 1, n)
    relinked = _multiset_log_lr(log_likelihoods(proto, linked, memoized=False), 1, 1, n)
    assert relinked == pytest.approx(direct, rel=1e-12)
    assert math.isfinite(float(world_scores(proto, "tuples", n, tau, 1, 1, rng)[0]))
