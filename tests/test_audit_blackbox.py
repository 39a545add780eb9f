"""Black-box audits of plain functions: tests found from data (docs/audit.md §7–§10).

Every seed is fixed and the trial counts small. A bound is valid at its confidence for any
randomizer, so "never refuted" of a correct protocol fails with probability at most 1 − c per
check, and these seeds pass; the positive controls are refuted by a wide margin.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import longldp as ll
from longldp.audit import (
    audit_lifetime,
    audit_randomizer,
    claimed_epsilon,
    client_lifetime,
    misencoded_unary,
    population_lifetime,
    stats,
)
from longldp.audit import blackbox as bb
from longldp.audit import events as ev
from longldp.audit import randomizers as rz
from longldp.audit.channels import exact_epsilons
from longldp.protocols import REGISTRY

#: Typical values of every constructor parameter a registered protocol may require.
EXAMPLE_PARAMS = {
    "eps": 1.0,
    "eps_perm": 2.0,
    "eps_1": 0.8,
    "eps_window": 2.0,
    "w": 4,
    "eps_total": 2.0,
    "max_votes": 2,
    "max_updates": 2,
    "eps_0": 1.0,
    "eps_node": 1.0,
    "tau": 8,
    "d": 2,
    "h": 2,
    "m": 4,
    "f": 0.5,
    "p": 0.5,
    "q": 0.75,
    "lo": 0.0,
    "hi": 1.0,
}


def example_protocol(cls: type, k: int = 4) -> ll.protocols.FrequencyOracle:
    """The registered class at a small k with typical parameters (a new required parameter
    fails here, so every protocol added to the registry is audited)."""
    required = [name for name in cls.required_parameters() if name != "k"]
    unknown = [name for name in required if name not in EXAMPLE_PARAMS]
    assert not unknown, f"{cls.name}: add example values for {unknown}"
    params = {name: EXAMPLE_PARAMS[name] for name in required}
    if cls.input_domain.kind == "items":  # a sketch's width m sets its audited inputs (m + 1)
        params["m"] = EXAMPLE_PARAMS["m"]
    if cls.name == "dBitFlipPM":
        params["b"] = 4
    if any(f.name == "k" and f.init for f in dataclasses.fields(cls)):
        params["k"] = k  # RAPPOR-boolean has one bit and no k
    return ll.protocol(cls.name, **params)


# ---------------------------------------------------------------------- correct protocols


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_client_is_never_refuted(name):
    proto = example_protocol(REGISTRY[name])
    fn = rz.protocol_randomizer(proto)
    k = rz.audit_domain(proto)
    res = audit_randomizer(
        fn,
        k=k,
        claim=proto.single_report_epsilon(),
        trials=3000,
        rng=11,
        confidence=0.99,
        classifier=name in ("oue", "l-osue"),
    )
    assert not res.violates, res.summary()
    assert res.inputs == tuple(range(k)) and res.tests_evaluated >= 1
    # Sharper than the claim: the bound never exceeds the ε of the protocol's exact channel
    # (enumerated independently of the black box, audit/channels.py); the byte-pair family
    # is part of it wherever two bytes of the report vary, so it adds no false positive. A
    # report kind without one (Laplace's unbounded density): against its claim, the density
    # ratio's supremum.
    exact = exact_epsilons(proto).single if proto.report_kind.exact else res.claim
    assert res.lower <= exact + 1e-9, res.summary()
    varying = bb._active_columns([fn(np.arange(k).repeat(50), np.random.default_rng(0))])
    assert (res.tried["byte-pair"] > 0) == (varying.size >= 2), res.tried


@pytest.mark.parametrize(("name", "params"), [("GRR", {"eps": 1.0}), ("L-OSUE", {})])
def test_the_search_has_power(name, params):
    # Data-found tests come within a few tenths of the exact ε at 20,000 trials per input.
    proto = ll.protocol(name, k=4, **(params or {"eps_perm": 2.0, "eps_1": 1.0}))
    res = audit_randomizer(
        rz.protocol_randomizer(proto),
        k=4,
        claim=proto.single_report_epsilon(),
        trials=20_000,
        rng=12,
        classifier=False,
    )
    assert not res.violates
    assert res.lower > proto.single_report_epsilon() - 0.25, res.summary()


def test_coverage_on_a_channel_with_known_epsilon():
    # GRR over two values at ε = 1: the set {y = x} attains e^ε exactly, the hardest case.
    fn = rz.protocol_randomizer(ll.protocol("GRR", k=2, eps=1.0))
    runs = [
        audit_randomizer(fn, k=2, claim=1.0, trials=400, rng=seed, classifier=False)
        for seed in range(200)
    ]
    below = sum(r.lower <= 1.0 for r in runs)
    assert below >= 0.95 * len(runs)
    # The check has teeth: the plug-in estimate overshoots often and the bound has power.
    assert sum(r.estimate > 1.0 for r in runs) > 0.2 * len(runs)
    assert np.mean([r.lower for r in runs]) > 0.3


# ---------------------------------------------------------------------- positive controls


def _wire_list(proto, reports) -> list[bytes]:
    """Each report as its own wire report (header + body)."""
    blob, size = proto.encode_reports(reports), proto.wire_size
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def _misencoded_bytes():
    """The misencoded OUE client of longldp.audit.controls, its reports as a list of bytes."""
    bad = misencoded_unary(ll.protocol("OUE", k=4, eps=1.0))
    return lambda values, rng: _wire_list(bad, bad.perturb(values, bad.new_memo(values.size), rng))


@pytest.mark.parametrize(
    ("label", "randomize", "k", "claim"),
    [
        ("off-by-one encoding", rz.off_by_one_unary(8, 1.0), 8, 1.0),
        ("leak on one value", rz.leaky_value(8, 1.0, leak=5), 8, 1.0),
        ("probability wrong for k > 8", rz.grr_wrong_for_large_k(16, 1.0), 16, 1.0),
        ("hash seed reused across users", rz.reused_hash_seed(8, 2.0, 0.8), 8, 0.8),
        ("misencoded unary (a protocol subclass)", _misencoded_bytes(), 4, 1.0),
    ],
)
def test_one_report_controls_are_flagged(label, randomize, k, claim):
    res = audit_randomizer(randomize, k=k, claim=claim, trials=5000, rng=3, classifier=False)
    assert res.violates, f"{label}: {res.summary()}"


def test_off_by_one_is_refuted_by_a_data_found_bit():
    res = audit_randomizer(rz.off_by_one_unary(8, 1.0), k=8, claim=1.0, trials=5000, rng=4)
    assert res.violates and res.lower > 4, res.summary()
    assert res.fp == 0  # an event impossible under the other input


def test_probability_wrong_only_for_some_k():
    fine = audit_randomizer(
        rz.grr_wrong_for_large_k(4, 1.0), k=4, claim=1.0, trials=5000, rng=5, classifier=False
    )
    assert not fine.violates, fine.summary()


@pytest.mark.parametrize("pattern", ["one-value", "alternating"])
def test_correct_lifetime_is_not_refuted(pattern):
    k, ep, e1, tau = 4, 1.0, 0.5, 30
    proto = ll.protocol("L-GRR", k=k, eps_perm=ep, eps_1=e1)
    claim = claimed_epsilon(proto, tau, pattern)
    for run in (rz.protocol_lifetime(proto), population_lifetime(rz.lgrr_population(k, ep, e1))):
        res = audit_lifetime(
            run,
            k=k,
            claim=claim,
            tau=tau,
            trials=3000,
            pattern=pattern,
            rng=6,
            classifier=False,
        )
        assert not res.violates, res.summary()
        assert res.lower > 0.3


@pytest.mark.parametrize(
    ("label", "factory", "pattern"),
    [
        ("memo redrawn per report", rz.redrawn_memo_lifetime, "one-value"),
        ("memo shared across values", rz.shared_memo_lifetime, "alternating"),
    ],
)
def test_lifetime_controls_are_flagged(label, factory, pattern):
    k, ep, e1, tau = 4, 1.0, 0.5, 30
    claim = claimed_epsilon(ll.protocol("L-GRR", k=k, eps_perm=ep, eps_1=e1), tau, pattern)
    res = audit_lifetime(
        population_lifetime(factory(k, ep, e1)),
        k=k,
        claim=claim,
        tau=tau,
        trials=3000,
        pattern=pattern,
        rng=7,
        classifier=False,
    )
    assert res.violates, f"{label}: {res.summary()}"


def test_stateless_library_client_is_flagged_and_the_memo_is_not():
    proto = ll.protocol("L-OSUE", k=4, eps_perm=1.0, eps_1=0.5)
    claim = claimed_epsilon(proto, 30)
    kw = {"k": 4, "claim": claim, "tau": 30, "trials": 2000, "rng": 8, "classifier": False}
    assert audit_lifetime(rz.protocol_lifetime(proto, stateless=True), **kw).violates
    assert not audit_lifetime(rz.protocol_lifetime(proto), **kw).violates


def test_single_client_factory_runs_the_same_audit():
    proto = ll.protocol("L-GRR", k=3, eps_perm=1.0, eps_1=0.5)

    class Device:
        def __init__(self, rng):
            self.client = proto.client(rng)

        def report(self, value):
            rec = self.client.report(value)
            return proto.encode_reports(np.asarray([rec]))

    res = audit_lifetime(
        client_lifetime(Device),
        k=3,
        claim=claimed_epsilon(proto, 5),
        tau=5,
        trials=300,
        rng=9,
        classifier=False,
    )
    assert not res.violates and res.trials == 300


# ---------------------------------------------------------------------- large domains


def test_large_k_screens_and_finds_a_leak_on_one_value():
    res = audit_randomizer(
        rz.leaky_value(64, 1.0, leak=37, rate=0.5),
        k=64,
        claim=1.0,
        trials=4000,
        rng=10,
        classifier=False,
    )
    assert res.screened and len(res.inputs) == 16
    assert {0, 1, 62, 63} <= set(res.inputs) and 37 in res.inputs
    assert res.violates and 37 in res.pair, res.summary()
    honest = audit_randomizer(
        rz.protocol_randomizer(ll.protocol("GRR", k=64, eps=1.0)),
        k=64,
        claim=1.0,
        trials=2000,
        rng=10,
        classifier=False,
    )
    assert honest.screened and not honest.violates


# ---------------------------------------------------------------------- bad input


def _fixed(out):
    return lambda values, rng: out(values)


@pytest.mark.parametrize(
    ("randomize", "match"),
    [
        (_fixed(lambda v: [b"ab" if i % 7 else b"abc" for i in range(v.size)]), "varying width"),
        (_fixed(lambda v: np.zeros((v.size, 2))), "dtype float64"),
        (_fixed(lambda v: np.zeros((v.size - 1, 2), np.uint8)), "reports for"),
        (_fixed(lambda v: np.zeros(v.size, np.uint8)), "2-D"),
        (_fixed(lambda v: [1] * v.size), "item 0 is a int"),
        (_fixed(lambda v: 1 / 0), "raised ZeroDivisionError"),
    ],
)
def test_bad_randomizers_are_named_in_one_line(randomize, match):
    with pytest.raises(ValueError, match=match) as info:
        audit_randomizer(randomize, k=4, claim=1.0, trials=100, rng=1, classifier=False)
    assert "\n" not in str(info.value) and str(info.value).startswith("audit_randomizer:")


def test_bad_arguments_are_refused():
    fn = rz.protocol_randomizer(ll.protocol("GRR", k=4, eps=1.0))
    for kwargs, match in (
        ({"k": 1}, "'k'"),
        ({"claim": -1.0}, "'claim'"),
        ({"trials": 5}, "'trials'"),
        ({"confidence": 1.0}, "'confidence'"),
        ({"inputs": (1, 1)}, "distinct"),
        ({"inputs": (0, 9)}, "inputs"),
        ({"search_share": 0}, "search_share"),
    ):
        args = {"k": 4, "claim": 1.0, "trials": 100, "classifier": False} | kwargs
        with pytest.raises(ValueError, match=match):
            audit_randomizer(fn, **args)
    with pytest.raises(ValueError, match="pattern"):
        audit_lifetime(
            rz.protocol_lifetime(ll.protocol("GRR", k=4, eps=1.0)),
            k=4,
            claim=1.0,
            tau=2,
            trials=100,
            pattern="zigzag",
        )


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setattr(ev, "sklearn_available", lambda: False)
    fn = rz.protocol_randomizer(ll.protocol("GRR", k=4, eps=1.0))
    with pytest.raises(ModuleNotFoundError, match=r"longldp\[audit\]"):
        audit_randomizer(fn, k=4, claim=1.0, trials=100)
    # Without the classifier the other families still run and still find most of GRR's ε = 1.
    res = audit_randomizer(fn, k=4, claim=1.0, trials=2000, classifier=False, rng=1)
    assert "classifier" not in res.tried and res.tried["column"] > 0
    assert 0.5 < res.lower <= 1.0, res.summary()


def test_constant_reports_give_a_zero_bound():
    res = audit_randomizer(
        lambda v, rng: np.zeros((v.size, 3), np.uint8),
        k=3,
        claim=0.1,
        trials=50,
        classifier=False,
    )
    assert res.lower == 0 and not res.violates and res.tests_evaluated == 0


# ---------------------------------------------------------------------- the search itself


def test_likelihood_prefixes_pick_the_neyman_pearson_set():
    # Cells with ratios 4, 1, 1/4: the best set is the first cell, found from fit counts.
    fa = np.array([[400, 200, 100]])
    fb = np.array([[100, 200, 400]])
    order, length, tp, fp, _ = ev.likelihood_prefixes(fa, fb, fa, fb, 700, 700, 2.0)
    assert list(order[0]) == [0, 1, 2] and length[0] == 1 and (tp[0], fp[0]) == (400, 100)


def test_row_keys_are_exact_for_short_rows_and_stable_for_long():
    rows = np.array([[1, 2], [2, 1], [1, 2]], dtype=np.uint8)
    keys = ev.row_keys(rows)
    assert keys[0] == keys[2] != keys[1] and keys[0] == 0x0102
    long = np.tile(np.arange(20, dtype=np.uint8), (3, 1))
    long[1, 19] = 7
    k2 = ev.row_keys(long)
    assert k2[0] == k2[2] != k2[1]


def _direct_histograms(cat: np.ndarray, width: int) -> np.ndarray:
    return np.array(
        [[np.count_nonzero(cat[:, j] == v) for v in range(width)] for j in range(cat.shape[1])]
    )


#: (dtype, columns, width): bytes in pairs (16-bit words), an odd count, small alphabets
#: paired by arithmetic, and an alphabet too wide to pair.
COLUMN_CASES = [(np.uint8, 6, 256), (np.uint8, 5, 256), (np.uint16, 7, 31), (np.uint16, 3, 300)]


@pytest.mark.parametrize(("dtype", "columns", "width"), COLUMN_CASES)
def test_column_histograms_equal_direct_counts(dtype, columns, width):
    rng = np.random.default_rng(5)
    cat = rng.integers(0, width, size=(3000, columns)).astype(dtype)
    want = _direct_histograms(cat, width)
    assert np.array_equal(ev.column_histograms(cat, [width] * columns), want)
    # A row slice of a wider array (the search halves are views).
    wide = np.hstack([cat, cat])[1000:]
    assert np.array_equal(
        ev.column_histograms(wide, [width] * 2 * columns),
        np.vstack([want, want]) - np.vstack([_direct_histograms(cat[:1000], width)] * 2),
    )


@pytest.mark.parametrize(("dtype", "columns", "width"), COLUMN_CASES)
def test_lookup_scores_equal_the_sum_of_table_entries(dtype, columns, width):
    rng = np.random.default_rng(6)
    cat = rng.integers(0, width, size=(2000, columns)).astype(dtype)
    tables = rng.normal(size=(columns, width, 3))
    want = sum(tables[j][cat[:, j]] for j in range(columns))
    got = ev.lookup_scores(cat, tables)
    assert got.shape == (2000, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_bit_counts_from_the_byte_histograms_equal_direct_counts():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 256, size=(1000, 3), dtype=np.uint8)
    want = np.unpackbits(bits, axis=1, count=21).sum(axis=0)
    hist = ev.column_histograms(bits, [256] * 3)
    assert np.array_equal(ev.bit_counts(bits, 21), want)
    assert np.array_equal(ev.bit_counts(bits, 21, hist), want)


@pytest.mark.parametrize("lifetime", [False, True])
def test_classifier_tables_give_the_fitted_linear_score(lifetime):
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(8)
    n_bits, sizes = 19, (4, 7, 3)
    layout = ev.Layout(
        sizes=sizes if lifetime else (256,) * 3,
        column_names=("a", "b", "c"),
        n_bits=n_bits,
        classify_columns=lifetime,
    )

    def world(shift: float) -> ev.Features:
        bits = np.packbits(rng.random((600, n_bits)) < 0.3 + shift, axis=1)
        if lifetime:
            cat = np.stack([rng.integers(0, s, 600) for s in sizes], axis=1).astype(np.uint16)
        else:
            cat = bits
        return ev.Features(cat, bits, None)

    train = [world(0.0), world(0.2), world(0.1)]
    model = ev.Classifier(train, layout)
    fresh = world(0.05)
    x = np.unpackbits(fresh.bits, axis=1, count=n_bits).astype(np.float64)
    if lifetime:  # the design's scaled columns v / (size − 1), in float64
        x = np.hstack([x, fresh.cat / (np.array(sizes) - 1.0)])
    want = x @ model.coef + model.intercept
    np.testing.assert_allclose(model.scores(fresh, layout), want, rtol=0, atol=1e-9)


def test_pair_cells_equal_direct_counts():
    rng = np.random.default_rng(9)
    n_bits = 11
    bits = np.packbits(rng.random((700, n_bits)) < 0.4, axis=1)
    layout = ev.Layout(sizes=(256, 256), column_names=("x", "y"), n_bits=n_bits)
    unpacked = np.unpackbits(bits, axis=1, count=n_bits).astype(np.int64)
    for chosen in (np.arange(n_bits), np.array([0, 3, 4, 10])):
        (cells,), (used,) = ev._cells([ev.Features(bits, bits, None)], layout, chosen)
        assert used == 700 and cells.shape == (4, chosen.size, chosen.size)
        x = unpacked[:, chosen]
        for cell in range(4):
            bi, bj = cell >> 1, cell & 1
            want = ((x[:, :, None] == bi) & (x[:, None, :] == bj)).sum(axis=0)
            assert np.array_equal(cells[cell], want)


def test_draw_reports_groups_every_report_with_its_input_in_a_random_call_order():
    calls: list[np.ndarray] = []

    def tagged(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        start = sum(c.size for c in calls)
        calls.append(values)
        pos = np.arange(start, start + values.size)
        return np.stack([values, pos >> 8, pos & 255], axis=1).astype(np.uint8)

    groups = bb.draw_reports(tagged, (5, 2, 9), 300, np.random.default_rng(1), "t", batch=128)
    assert [g.shape for g in groups] == [(300, 3)] * 3
    position = [g[:, 1].astype(int) * 256 + g[:, 2] for g in groups]
    for value, g in zip((5, 2, 9), groups, strict=True):
        assert np.all(g[:, 0] == value)
    assert np.array_equal(np.sort(np.concatenate(position)), np.arange(900))
    # The first (search) half of each input's reports comes from calls spread over the run.
    assert all(np.median(p[:150]) > 250 and np.median(p[:150]) < 650 for p in position)


def test_draw_lifetimes_groups_every_client_with_its_world():
    def echo(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return values.astype(np.uint8)[:, :, None]

    worlds = [np.array([1, 2, 1]), np.array([2, 1, 2])]
    groups = bb.draw_lifetimes(echo, worlds, 200, np.random.default_rng(2), "t", batch=30)
    for seq, g in zip(worlds, groups, strict=True):
        assert g.shape == (200, 3, 1) and np.all(g[:, :, 0] == seq)


def test_bonferroni_level_is_what_the_bound_uses():
    res = audit_randomizer(
        rz.off_by_one_unary(4, 1.0),
        k=4,
        claim=1.0,
        trials=400,
        rng=2,
        classifier=False,
        tests=4,
    )
    assert res.tests_evaluated <= 4
    from longldp.audit.stats import epsilon_lower_bound

    for o in res.outcomes:
        want = float(epsilon_lower_bound(o.tp, o.n0, o.fp, o.n1, res.alpha / res.tests_evaluated))
        assert o.lower == pytest.approx(want)
    assert res.lower == max(o.lower for o in res.outcomes)
    assert math.isfinite(res.lower)


def test_importing_the_audit_does_not_need_scikit_learn():
    import subprocess
    import sys

    code = "import sys, longldp.audit; print(any(m.startswith('sklearn') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_game_misses_what_the_black_box_finds():
    # The example: OUE that also sets the bit after the true one. The likelihood-ratio
    # game compares only the two inputs' own bits, so it does not refute the claim; the
    # data-found tests do.
    from longldp.audit import audit_game

    base = ll.protocol("OUE", k=8, eps=1.0)

    class OffByOne(type(base)):
        def _round1(self, keys, state, rng):
            bits = np.unpackbits(super()._round1(keys, state, rng), axis=1, count=self.k)
            nxt = keys + 1
            bits[np.flatnonzero(nxt < self.k), nxt[nxt < self.k]] = 1
            return np.packbits(bits, axis=1)

    bad = OffByOne(k=8, eps=1.0)
    assert not audit_game(bad, 20_000, rng=1).violates

    def as_bytes(values, rng):
        return _wire_list(bad, bad.perturb(values, bad.new_memo(values.size), rng))

    res = audit_randomizer(as_bytes, k=8, claim=1.0, trials=5000, rng=1, classifier=False)
    assert res.violates and res.lower > 3


# ---------------------------------------------------------------------- joint byte pairs


def test_a_joint_only_leak_is_found_from_a_few_thousand_trials():
    """A client whose every byte, bit and pair of bits is uniform whatever the input, and whose
    reports take too many values for the histogram family, leaks x mod 2 exactly in the joint
    of a timing byte and a value byte (randomizers.joint_only_leak): the byte-pair family
    refutes a claim of 1 from 2,000 trials per input, and no other family sees anything."""
    fn = rz.joint_only_leak(4)
    res = audit_randomizer(fn, k=4, claim=1.0, trials=2000, rng=3)
    assert res.violates and res.family == "byte-pair", res.summary()
    assert res.lower > 4
    others = [o for o in res.outcomes if o.family != "byte-pair"]
    assert others and all(o.lower < 1.0 for o in others)
    # Without the family the audit misses it (what the audit did before).
    families = tuple(f for f in ev.FAMILIES if f != "byte-pair")
    old = audit_randomizer(fn, k=4, claim=1.0, trials=2000, rng=3, families=families)
    assert not old.violates, old.summary()


def test_the_byte_pair_family_has_its_own_share_of_the_tests():
    """Its held-out tests are reserved (pair_share of m) and every test keeps level α/m."""
    assert [ev.pair_share(m) for m in (1, 2, 9, 10, 14, 15)] == [0, 1, 1, 2, 2, 3]
    fn = rz.joint_only_leak(2)
    res = audit_randomizer(fn, k=2, claim=1.0, trials=1000, rng=5, tests=5, classifier=False)
    pairs = [o for o in res.outcomes if o.family == "byte-pair"]
    assert len(pairs) == ev.pair_share(5) and res.tests_evaluated <= 5
    m = res.tests_evaluated
    for o in res.outcomes:
        want = float(stats.epsilon_lower_bound(o.tp, o.n0, o.fp, o.n1, res.alpha / m))
        assert o.lower == pytest.approx(want)


def test_byte_pair_events_count_what_they_say():
    rng = np.random.default_rng(2)
    cat = rng.integers(0, 256, size=(500, 3)).astype(np.uint8)
    f = ev.Features(cat, cat, None)
    layout = bb.one_report_layout(np.arange(3))
    cells = np.sort(np.unique(cat[:40, 0].astype(np.int64) * 256 + cat[:40, 2]))
    event = ev.BytePairEvent(0, 2, cells)
    direct = sum(int(a) * 256 + int(c) in set(cells.tolist()) for a, _, c in cat)
    assert event.count(f, layout) == direct >= 40
    assert "(byte 0, byte 2)" in event.describe(layout)


def test_learned_scores_choose_the_bytes_that_differ():
    """Pairs beyond the adjacent ones join the bytes the learned scores weigh most: here bytes
    1 and 4, whose distributions differ between the worlds, and not the uniform ones."""
    rng = np.random.default_rng(4)
    worlds = []
    for shift in (0, 1):
        cat = rng.integers(0, 256, size=(4000, 6)).astype(np.uint8)
        cat[:, 1] = (rng.integers(0, 4, 4000) + 4 * shift).astype(np.uint8)
        cat[:, 4] = (rng.integers(0, 8, 4000) * (1 + shift)).astype(np.uint8)
        worlds.append(ev.Features(cat, cat, None))
    layout = bb.one_report_layout(np.arange(6))
    hists = [ev.column_histograms(w.cat, layout.sizes) for w in worlds]
    model = ev.NaiveBayes(hists, [w.n for w in worlds], layout)
    weights = ev.learned_byte_weights([model], hists, [w.n for w in worlds], 6)
    assert set(np.argsort(-weights)[:2].tolist()) == {1, 4}
    chosen = ev.byte_pairs_to_join(layout, [model], hists, [w.n for w in worlds])
    assert chosen[:5] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)] and (1, 4) in chosen
