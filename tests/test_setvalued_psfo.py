"""PSFO (math §9.1): unbiasedness, exact privacy of the amplified GRR, lengths and correction.

Statistical checks use fixed seeds and tolerances of Z = 5 standard errors computed from the
exact variance of the estimator (:meth:`PSFO.variance`), never tuned.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from longldp import privacy
from longldp.apps.setvalued.common import sticky_slots
from longldp.apps.setvalued.oracle import make_spec
from longldp.apps.setvalued.psfo import (
    PSFO,
    adaptive_choice,
    amplified_epsilon,
    oneshot_psfo,
    pad_and_sample,
    percentile_length,
    psfo_channel,
    truncation_factor,
)

Z = 5.0

#: A fixed population over d = 5 values with lists of length 0..5 (ℓ = 2 truncates).
LISTS = [(), (0,), (0, 1), (0, 1, 2), (1, 3), (0, 2, 3, 4), (4,), (0, 1, 2, 3, 4), (2,), (0, 3)]
D, ELL, COPIES = 5, 2, 200


def _population() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, values, m) of COPIES copies of LISTS; and the truncated target frequency."""
    lists = LISTS * COPIES
    m = np.array([len(w) for w in lists], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(m)])
    values = np.array([x for w in lists for x in w], dtype=np.int64)
    return indptr, values, m


def _target_and_pi() -> tuple[np.ndarray, np.ndarray]:
    """t(x) = (1/n) Σ_u 1[x∈w_u]·min(1, ℓ/|w_u|) and π_u(x) = Pr[PS_ℓ(w_u) = x]."""
    lists = LISTS * COPIES
    pi = np.zeros((len(lists), D))
    for u, w in enumerate(lists):
        for x in w:
            pi[u, x] = 1.0 / max(len(w), ELL)
    return ELL * pi.mean(axis=0), pi


PSFOS = {
    "GRR-amplified": lambda: oneshot_psfo(D, ELL, 1.0, "adaptive"),
    "OLH": lambda: oneshot_psfo(D, ELL, 1.0, "OLH"),
    "OUE-shared": lambda: oneshot_psfo(D, ELL, 1.0, "OUE", dummies="shared"),
    "L-OSUE-chain": lambda: make_spec("L-OSUE", eps_perm=2.0, eps_1=1.0).chain_psfo(
        make_spec("L-OSUE", eps_perm=2.0, eps_1=1.0).chain(D + 1), D, ELL
    ),
    "L-GRR-chain": lambda: make_spec("L-GRR", eps_perm=2.0, eps_1=1.0).chain_psfo(
        make_spec("L-GRR", eps_perm=2.0, eps_1=1.0).chain(D + 1), D, ELL
    ),
}


@pytest.mark.parametrize("name", list(PSFOS))
def test_psfo_is_unbiased_for_the_padded_and_truncated_frequency(name):
    psfo = PSFOS[name]()
    if name == "GRR-amplified":
        assert psfo.oracle.name == "GRR" and psfo.amplified
    indptr, values, m = _population()
    target, pi = _target_and_pi()
    n, reps = m.size, 400
    rng = np.random.default_rng(20240)
    est = np.empty((reps, D))
    for rep in range(reps):
        r = pad_and_sample(m, ELL, rng)
        real = r < m
        codes = psfo.encode(r, m, values[indptr[:-1][real] + r[real]])
        if psfo.oracle.longitudinal:  # per-user path: a fresh population each repetition
            support = psfo.oracle.perturb_support(codes, psfo.oracle.new_memo(n), rng)
        else:
            support = psfo.oracle.sample_support(np.bincount(codes, minlength=psfo.size), n, rng)
        est[rep] = psfo.estimate(support, n)
    var = np.array([psfo.variance(pi[:, x]) for x in range(D)])
    se = np.sqrt(var / reps)
    assert np.all(np.abs(est.mean(axis=0) - target) <= Z * se), (est.mean(axis=0), target, se)
    # the sample variance agrees with the exact one (SE of a normal sample variance)
    assert np.all(np.abs(est.var(axis=0, ddof=1) - var) <= Z * var * math.sqrt(2 / (reps - 1)))


def test_pad_and_sample_law():
    """r is uniform on [0, max(m, ℓ)) for every list length m (math §9.1.1)."""
    rng = np.random.default_rng(7)
    m = np.repeat(np.array([0, 1, 3, 6]), 20_000)
    r = pad_and_sample(m, 3, rng)
    for mm in (0, 1, 3, 6):
        sel = r[m == mm]
        width = max(mm, 3)
        counts = np.bincount(sel, minlength=width)
        assert counts.size == width
        p = 1 / width
        assert np.all(np.abs(counts / sel.size - p) <= Z * math.sqrt(p * (1 - p) / sel.size))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize(("d", "ell"), [(2, 1), (3, 2), (4, 3), (5, 2), (3, 3)])
def test_amplified_grr_is_eps_ldp_on_its_exact_channel(d, ell, eps):
    _, channel = psfo_channel(d, ell, eps, "distinct", amplify=True)
    assert np.allclose(channel.sum(axis=1), 1.0)
    got = privacy.channel_epsilon(channel)
    assert got <= eps + 1e-9
    if d >= ell + 1:  # two sets of >= ℓ items, one holding the output, attain the bound
        assert got >= eps - 1e-9


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize(("d", "ell"), [(3, 2), (4, 3), (5, 2)])
def test_shared_dummy_with_amplified_eps_is_not_eps_ldp(d, ell, eps):
    """The reference prototype's variant: one ⊥ with ε' leaks ε' > ε (math §9.1.2, §9.8.4)."""
    _, channel = psfo_channel(d, ell, eps, "shared", amplify=True)
    got = privacy.channel_epsilon(channel)
    assert got > eps + 0.1
    assert got == pytest.approx(amplified_epsilon(eps, ell), rel=1e-9)


def test_note_example_shared_dummy_ratio():
    _, channel = psfo_channel(4, 3, 1.0, "shared", amplify=True)
    ratio = math.exp(privacy.channel_epsilon(channel))
    assert ratio == pytest.approx(3 * math.expm1(1) + 1)
    root = Path(__file__).resolve().parents[1]
    said = {  # the ratio the docs print, in their words
        "docs/math.md": f"(ℓ = 3, ε = 1: {ratio:.2f} against",
        "docs/setvalued.md": f"At ℓ = 3 and ε = 1 the ratio is {ratio:.2f} instead",
    }
    for doc, words in said.items():
        assert words in " ".join((root / doc).read_text(encoding="utf-8").split()), doc


def test_constructors_refuse_the_shared_dummy_with_amplification():
    with pytest.raises(ValueError, match="not ε-LDP"):
        oneshot_psfo(4, 3, 1.0, "GRR", dummies="shared", amplify=True)
    grr = oneshot_psfo(4, 3, 1.0, "GRR").oracle
    with pytest.raises(ValueError, match="distinct"):
        PSFO(4, 3, grr, "shared", 1.0, amplified=True)


def test_adaptive_rule():
    # ℓ = 1: GRR iff d + 1 < 3e^ε + 2
    e = math.exp(1.0)
    assert adaptive_choice(int(3 * e), 1, 1.0) == "GRR"
    assert adaptive_choice(int(3 * e) + 2, 1, 1.0) == "OLH"
    bound = 4 * e * (4 * 4 - 1) + 1
    assert adaptive_choice(math.ceil(bound) - 1, 4, 1.0) == "GRR"
    assert adaptive_choice(math.ceil(bound), 4, 1.0) == "OLH"
    assert oneshot_psfo(1657, 1, 1.0).oracle.name == "OLH"
    assert not oneshot_psfo(1657, 1, 1.0).amplified


def test_amplified_grr_closed_form_estimator():
    """ℓ·ĉ_FO(x) equals [(ℓe^ε + d)·C(x) − n]/(e^ε − 1) (math §9.1.3)."""
    d, ell, eps, n = 7, 3, 1.2, 1000
    psfo = oneshot_psfo(d, ell, eps, "GRR")
    support = np.random.default_rng(1).multinomial(n, np.full(d + ell, 1 / (d + ell)))
    closed = ((ell * math.exp(eps) + d) * support[:d] - n) / math.expm1(eps)
    assert np.allclose(psfo.estimate(support, n) * n, closed, rtol=1e-11)


def test_percentile_rule_uses_greater_or_equal_on_clipped_theta():
    theta = np.array([4, 1, 1, 1, 0.5, 0.5]) / 8
    assert percentile_length(theta, q=0.875) == 4  # cumulative mass hits 0.4375 exactly
    assert percentile_length(theta, q=0.9) == 5
    assert percentile_length(np.array([0.3, 0.4, -0.2, 0.3, 0.0]), q=0.5) == 1
    assert percentile_length(np.array([0.3, 0.4, -0.2, 0.3, 0.0]), q=0.6) == 3
    assert percentile_length(np.array([1.0, -0.1, 0.0]), q=0.9) == 1  # no mass at >= 1
    assert percentile_length(theta, q=0.9, cap=3) == 3


def test_truncation_correction_on_a_constructed_length_distribution():
    lengths = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 5, 6, 8, 8])
    theta = np.bincount(lengths) / lengths.size
    for ell in range(1, 10):
        # true occurrences / occurrences credited by PS_ℓ (a list of length i > ℓ gives ℓ)
        exact = lengths.sum() / np.minimum(lengths, ell).sum()
        assert truncation_factor(theta, ell) == pytest.approx(exact, rel=1e-12)
        credited = np.sum(np.minimum(np.arange(theta.size), ell) * theta)
        extra = np.sum(np.maximum(np.arange(theta.size) - ell, 0) * theta)
        assert truncation_factor(theta, ell) == pytest.approx(1 + extra / credited, rel=1e-12)
    assert truncation_factor(theta, 8) == 1.0
    noisy = theta.copy()
    noisy[3] = -0.05  # negative estimates are clipped first
    clipped = np.clip(noisy, 0, None)
    i = np.arange(theta.size)
    assert truncation_factor(noisy, 2) == pytest.approx(
        np.sum(i * clipped) / np.sum(np.minimum(i, 2) * clipped)
    )
    assert truncation_factor(np.array([1.0, 0.0]), 1) == 1.0


def test_post_processing_runs_on_the_full_histogram_before_dummies_are_dropped():
    psfo = oneshot_psfo(4, 2, 1.0, "OUE")
    n = 500
    support = np.random.default_rng(3).binomial(n, psfo.oracle.P0, size=psfo.size)
    full = psfo.estimate_all(support, n, "norm-sub")
    assert full.sum() == pytest.approx(1.0) and full.min() >= 0
    assert np.allclose(psfo.estimate(support, n, "norm-sub"), 2 * full[:4])
    # a subset of reportable codes (longitudinal items domain): post-processed over it only
    part = psfo.estimate_all(support, n, "norm-sub", reportable=[0, 2, 4])
    assert part[[1, 3, 5]].tolist() == [0.0, 0.0, 0.0]
    assert part[[0, 2, 4]].sum() == pytest.approx(1.0)


def test_sticky_slots_keep_staying_keys():
    first = sticky_slots(None, ["a", "b", "c"], 4)
    assert first == ["a", "b", "c", None]
    second = sticky_slots(first, ["c", "d", "a"], 4)
    assert second[0] == "a" and second[2] == "c" and set(second) == {"a", "c", "d", None}
    with pytest.raises(ValueError):
        sticky_slots(None, [1, 2, 3], 2)
