"""Bad input gets a ValueError naming the parameter and what is allowed; nothing is clipped."""

from __future__ import annotations

import math

import numpy as np
import pytest

import longldp as ll
from registry_cases import build, cases, takes_k, triples, two_round_chain

#: Bad values of each budget parameter and what the error says (docs/math.md §4.1).
BAD_BUDGET = {
    "eps": [
        (0.0, r"'eps' must be a finite number > 0"),
        (-1.0, r"'eps' must be a finite number > 0"),
        (math.nan, r"'eps' must be a finite number > 0"),
        (math.inf, r"'eps' must be a finite number > 0"),
        (True, r"'eps' must be"),
        ("1", r"'eps' must be"),
    ],
    "eps_perm": [
        (0.0, r"'eps_perm' must be a finite number > 0"),
        (math.nan, r"'eps_perm' must be"),
        (-2.0, r"'eps_perm' must be"),
    ],
    "eps_1": [
        (1e9, r"'eps_1' must be a finite number in \(0, "),
        (0.0, r"'eps_1' must be"),
        (math.nan, r"'eps_1' must be"),
    ],
    "eps_window": [
        (0.0, r"'eps_window' must be a finite number > 0"),
        (math.nan, r"'eps_window' must be a finite number > 0"),
        (31.0, r"'eps_window' must be a finite number > 0 and <= 30"),
    ],
    "eps_total": [
        (0.0, r"'eps_total' must be a finite number > 0"),
        (math.inf, r"'eps_total' must be a finite number > 0"),
    ],
    "eps_0": [(-1.0, r"'eps_0' must be a finite number > 0"), ("1", r"'eps_0' must be")],
    "eps_node": [(math.nan, r"'eps_node' must be a finite number > 0")],
    "f": [(1.0, r"'f' must be a number in \[0, 1\)"), (-0.1, r"'f' must be a number in")],
    "p": [(1.5, r"'p' must be a number in \[0, 1\]"), ("x", r"'p' must be")],
    "q": [(math.nan, r"'q' must be a number in \[0, 1\]")],
}


def bad_budgets():
    for cls, params, _ in triples():
        for name in cls.budget_params:
            for value, pattern in BAD_BUDGET[name]:
                yield pytest.param(cls, params, name, value, pattern, id=f"{cls.name}-{name}")


@pytest.mark.parametrize(("cls", "params", "name", "value", "pattern"), list(bad_budgets()))
def test_budget_values_are_refused(cls, params, name, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        build(cls, {**params, name: value}, 5)
    if cls.budget_params == ("eps_perm", "eps_1"):  # ε1 ≥ ε∞ is no chain
        with pytest.raises(ValueError, match=r"'eps_1' must be a finite number in \(0, 1\)"):
            build(cls, {**params, "eps_perm": 1.0, "eps_1": 1.0}, 5)


@pytest.mark.parametrize(("cls", "params"), cases(where=takes_k))
@pytest.mark.parametrize("k", [0, 1.0 * 5, "5", True])
def test_k_is_checked(cls, params, k):
    with pytest.raises(ValueError, match=r"'k' must be an integer"):
        build(cls, {**params, "k": k}, 5)


@pytest.mark.parametrize(
    ("cls", "params"), cases(where=lambda cls: two_round_chain(cls) and cls.max_alpha(1.0) < 1)
)
def test_unreachable_alpha(cls, params):
    alpha = (cls.max_alpha(1.0) + 1) / 2
    # UE chains: the largest α round 2 reaches (math §3.3); PM/HM memos: ε1 < ε∞/2 (20.18)
    why = r"alpha = eps_1/eps_perm <" if cls.estimates_frequencies else r"per-report ε of a"
    with pytest.raises(ValueError, match=rf"'eps_1' must be .*{why}"):
        build(cls, {**params, "eps_perm": 1.0, "eps_1": alpha}, 5)


def test_other_parameters():
    with pytest.raises(ValueError, match="'calibration' must be one of 'exact', 'paper'"):
        ll.protocol("L-GRR", k=5, eps_perm=1.0, eps_1=0.5, calibration="nope")
    with pytest.raises(ValueError, match=r"'d' must be an integer in \[1, 5\]"):
        ll.protocol("dBitFlipPM", k=5, eps_perm=1.0, d=6)
    with pytest.raises(ValueError, match=r"'b' must be an integer in \[2, 5\]"):
        ll.protocol("dBitFlipPM", k=5, eps_perm=1.0, b=9)
    with pytest.raises(ValueError, match="'hash_pool' must be an integer >= 1"):
        ll.protocol("OLH", k=5, eps=1.0, hash_pool=0)


@pytest.mark.parametrize(("cls", "params"), cases())
def test_inputs_outside_the_domain(cls, params):
    """Values outside the domain, of a wrong dtype, NaN, bools; a client's bad value; bad
    counts, n and frequencies: ValueError naming them, and nothing half-done."""
    proto = build(cls, params, 6)
    memo = proto.new_memo(3)
    rng = np.random.default_rng(0)
    size = proto.domain_size
    if proto.domain.kind == "interval":  # reals of [lo, hi]: NaN, ±inf, outside, bools refused
        lo, hi = proto.domain.lo, proto.domain.hi
        with pytest.raises(ValueError, match=r"'values' must lie in \[.*\].*ask for clipping"):
            proto.perturb(np.array([lo, hi + 1.0, hi]), memo, rng)
        for bad in (np.nan, np.inf, -np.inf):
            with pytest.raises(ValueError, match=r"'values' must be finite"):
                proto.perturb(np.array([lo, bad, hi]), memo, rng)
        with pytest.raises(ValueError, match=r"'values' must be real numbers.*bool"):
            proto.perturb(np.array([True, False, True]), memo, rng)
    elif size is None:  # strings (Bloom RAPPOR, open item spaces): anything else is refused
        with pytest.raises(ValueError, match="values must be str"):
            proto.perturb([1, 2, 3], memo, rng)
    if proto.domain.kind == "items" and size is None:  # text of a declared length (math §21.8)
        longest = proto.domain.max_length
        with pytest.raises(ValueError, match=rf"at most {longest} characters .* item 1 has"):
            proto.perturb(["a", "x" * (longest + 1), "b"], memo, rng)
        with pytest.raises(ValueError, match="item 2 is not UTF-8"):
            proto.perturb(["a", b"b", b"\xff\xfe"], memo, rng)
        with pytest.raises(ValueError, match="at least one item; got an empty set"):
            proto.perturb([], memo, rng)
        with pytest.raises(ValueError, match="NUL"):
            proto.perturb(["a\x00", "b", "c"], memo, rng)
    if size is not None:
        top = rf"'values' must be integers in \[0, {size}\); got {size}"
        with pytest.raises(ValueError, match=top):
            proto.perturb(np.array([0, size, 1]), memo, rng)
        with pytest.raises(ValueError, match=rf"'values' must be integers in \[0, {size}\)"):
            proto.perturb(np.array([0, -1, 1]), memo, rng)
        with pytest.raises(ValueError, match=r"'values' must be integers .*dtype float64"):
            proto.perturb(np.array([0.0, 1.0, 1.0]), memo, rng)
        with pytest.raises(ValueError, match=r"'values' must be integers .*dtype float64"):
            proto.perturb(np.array([0.0, np.nan, 1.0]), memo, rng)
    assert memo.reports.sum() == 0  # nothing was half-done
    client = proto.client(rng)
    if proto.domain.kind == "interval":
        bads = (proto.domain.hi + 1.0, np.nan, None, "1", True)
    else:
        bads = (size if size is not None else 3, 2.0, None)
    for bad in bads:
        with pytest.raises(ValueError, match="'value'"):
            client.report(bad)
    assert client.spent_budget.reports == 0
    with pytest.raises(ValueError):
        proto.sample_support(np.ones(5, dtype=int), rng=rng)  # wrong length, or no count level
    if cls.estimates_frequencies:
        k = proto.estimate_size
        with pytest.raises(ValueError, match="'true_counts' must be non-negative"):
            proto.sample_support(np.array([1, -1] + [0] * (proto.k - 2)), rng=rng)
        with pytest.raises(ValueError, match="'n' must equal sum"):
            proto.sample_support(np.ones(proto.k, dtype=int), n=proto.k + 1, rng=rng)
        with pytest.raises(ValueError, match="'f' must be frequencies"):
            proto.variance(100, np.full(k, 1.5))
    with pytest.raises(ValueError, match="'n' must be an integer >= 1"):
        proto.estimate(np.zeros(proto.support_shape), 0)
    with pytest.raises(ValueError, match="'support' must be finite with trailing shape"):
        proto.estimate(np.full(proto.support_shape, np.nan), 10)


def test_estimate_rejects_bad_support():
    proto = ll.protocol("L-OSUE", k=4, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'support' must be finite with trailing shape \\(4,\\)"):
        proto.estimate(np.array([1.0, np.nan, 2.0, 3.0]), 10)
    with pytest.raises(ValueError, match="'support' must be finite with trailing shape \\(4,\\)"):
        proto.estimate(np.ones(5), 10)
    with pytest.raises(ValueError, match="must be one of"):
        proto.estimate(np.ones(4), 10, postprocess="nope")


def test_aggregator_rejects_foreign_reports():
    ue = ll.protocol("L-OSUE", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match=r"'reports' must be packed bit vectors"):
        ue.aggregator().add(np.zeros((3, 5), dtype=np.uint8))
    with pytest.raises(ValueError, match="bits set beyond position k = 12"):
        ue.aggregator().add(np.full((3, 2), 255, dtype=np.uint8))
    grr = ll.protocol("L-GRR", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match=r"'reports' must be integers in \[0, 12\)"):
        grr.aggregator().add(np.array([3, 12]))
    lh = ll.protocol("BiLOLOHA", k=12, eps_perm=2.0, eps_1=1.0)
    with pytest.raises(ValueError, match="'reports' must be a 1-D array of dtype"):
        lh.aggregator().add(np.array([3, 4]))
    with pytest.raises(ValueError, match="report 0 is truncated: 10 bytes where a report has 21"):
        lh.aggregator().add_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match="no reports have been added"):
        lh.aggregator().estimate()


def test_memo_required_and_users_checked():
    proto = ll.protocol("L-GRR", k=5, eps_perm=2.0, eps_1=1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="'memo' is required"):
        proto.perturb(np.array([1, 2]), None, rng)
    memo = proto.new_memo(3)
    with pytest.raises(ValueError, match="must not repeat a user"):
        proto.perturb(np.array([1, 2]), memo, rng, users=np.array([0, 0]))
    with pytest.raises(ValueError, match=r"'users' must be integers in \[0, 3\)"):
        proto.perturb(np.array([1, 2]), memo, rng, users=np.array([0, 3]))
    with pytest.raises(ValueError, match="4 values for a memo of 3 users"):
        proto.perturb(np.array([1, 2, 3, 4]), memo, rng)
