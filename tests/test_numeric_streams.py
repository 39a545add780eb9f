"""The blocked samplers draw the documented stream (docs/client-spec.md §3.4 for one report;
for a batch each kind of uniform for the whole batch before the next): a batch crossing several
blocks equals the whole-batch formulas applied to uniforms drawn in that order, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from longldp.privacy import numeric as nm
from longldp.protocols.numeric import oneshot

N = 3 * oneshot.BLOCK + 17  # three blocks and a ragged one


def _inputs() -> np.ndarray:
    u = np.random.default_rng(0).random(N) * 2 - 1
    u[:4] = [-1.0, 1.0, 0.0, -0.5]
    return u


def _pm_whole(u, v, z, pm):
    outer = v * (pm.C + 1) - pm.C
    outer = outer + pm.width * (outer >= pm.left(u))
    return np.where(z < pm.center, v * pm.width + pm.left(u), outer)


def _laplace_whole(u, u1, u2, eps, u3=None):
    """Laplace's report from its uniforms (docs/client-spec.md §4.2): h = [2U1 ≥ 1],
    c = 1 − (2U1 − h), R = c − U2·2⁻⁵², refined by U3 (in user order) where c = 2⁻⁵²."""
    w = 2.0 * u1
    upper = w >= 1.0
    c = 1.0 - (w - upper)
    r = c - u2 * 2.0**-52
    deep = c == 2.0**-52
    assert deep.sum() == (0 if u3 is None else u3.size)
    if u3 is not None:
        r[deep] = r[deep] - u3 * 2.0**-105
    return np.log(r) * ((1.0 - 2.0 * upper) * nm.laplace_scale(eps)) + u


class _Fixed:
    """A generator that hands out given uniforms in order (and fails past their end)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values, self.at = np.asarray(values, dtype=np.float64), 0

    def random(self, size: int) -> np.ndarray:
        out = self.values[self.at : self.at + size]
        assert out.size == size, "more uniforms drawn than the stream holds"
        self.at += size
        return out.copy()


def test_laplace_refines_the_deepest_step_with_a_third_uniform():
    """U1 = 1/2 − 2⁻⁵³ or 1 − 2⁻⁵³ leaves c = 2⁻⁵² (R ≤ 2⁻⁵², exact): those users draw U3,
    after the whole batch's U2, in user order, across blocks; R then reaches 2⁻¹⁵⁸ steps."""
    u = _inputs()
    rng = np.random.default_rng(4)
    u1, u2 = rng.random(N), rng.random(N)
    at = np.array([3, oneshot.BLOCK - 1, oneshot.BLOCK, 2 * oneshot.BLOCK + 5, N - 1])
    u1[at] = [0.5 - 2.0**-53, 1.0 - 2.0**-53, 0.5 - 2.0**-53, 1.0 - 2.0**-53, 1.0 - 2.0**-53]
    u2[at[0]] = 1.0 - 2.0**-53  # the deepest R of the coarse grid, 2⁻¹⁰⁵, refined below it
    u3 = rng.random(at.size)
    eps = 2.0
    y = oneshot.laplace_sample(u, eps, _Fixed(np.concatenate([u1, u2, u3])))
    np.testing.assert_array_equal(y, _laplace_whole(u, u1, u2, eps, u3))
    r = 2.0**-105 - u3[0] * 2.0**-105  # below every value one or two uniforms give
    assert y[at[0]] == pytest.approx(u[at[0]] + np.log(r) * nm.laplace_scale(eps), rel=1e-15)
    assert y[at[0]] < u[at[0]] - 72 * nm.laplace_scale(eps)  # −ln R > 105·ln 2
    y1 = oneshot.laplace_sample(u[at[:1]], eps, _Fixed([u1[at[0]], u2[at[0]], u3[0]]))
    assert y1[0] == y[at[0]]  # one client: U1, U2, U3


@pytest.mark.parametrize("eps", [0.3, 1.0, 6.0])
def test_batches_follow_the_stream(eps):
    u = _inputs()
    t = (u + 1) / 2
    draws = np.random.default_rng(9).random(4 * N)
    pm, sw = nm.pm_params(eps), nm.sw_params(eps)
    c = nm.duchi_bound(eps)

    def run(sampler, x):
        return sampler(x, eps, np.random.default_rng(9))

    # Duchi, 1BitMean: one uniform per user
    bits = (draws[:N] < nm.duchi_threshold(eps, u)).astype(np.uint8)
    np.testing.assert_array_equal(run(oneshot.duchi_sample, u), bits)
    one = (draws[:N] < nm.duchi_threshold(eps, 2.0 * t - 1.0)).astype(np.uint8)
    np.testing.assert_array_equal(run(oneshot.onebit_sample, t), one)
    # Laplace: the batch's U1 (sign and coarse part), then its U2 (fine part), inverted
    np.testing.assert_array_equal(
        run(oneshot.laplace_sample, u), _laplace_whole(u, draws[:N], draws[N : 2 * N], eps)
    )
    # PM: the batch's positions, then its pieces
    np.testing.assert_array_equal(
        run(oneshot.pm_sample, u), _pm_whole(u, draws[:N], draws[N : 2 * N], pm)
    )
    # SW: likewise on t
    v, z = draws[:N], draws[N : 2 * N]
    outer = v - sw.b + 2 * sw.b * (v >= t)
    inner = v * (2 * sw.b) + t - sw.b
    np.testing.assert_array_equal(run(oneshot.sw_sample, t), np.where(z < sw.center, inner, outer))
    # HM: branches, signs, then PM's two uniforms for the branch's users only
    branch = np.flatnonzero(draws[:N] < nm.hm_beta(eps))
    hm = np.where(draws[N : 2 * N] < nm.duchi_threshold(eps, u), c, -c)
    k = branch.size
    if k:
        hm[branch] = _pm_whole(
            u[branch], draws[2 * N : 2 * N + k], draws[2 * N + k : 2 * N + 2 * k], pm
        )
    np.testing.assert_array_equal(run(oneshot.hm_sample, u), hm)
    assert (k > 0) == (eps > nm.hm_eps_star())


def test_shapes_and_empty_batches():
    rng = np.random.default_rng(1)
    for name in oneshot.KERNELS:
        k = oneshot.kernel(name)
        x = np.full((3, 5), 0.25)
        assert k.sample(x, 1.0, rng).shape == (3, 5)
        assert k.sample(np.zeros(0), 1.0, rng).shape == (0,)
