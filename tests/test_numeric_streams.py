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
    # Laplace: one uniform, inverted
    w = 2.0 * draws[:N]
    upper = w >= 1.0
    lap = np.log1p(-(w - upper)) * ((1.0 - 2.0 * upper) * nm.laplace_scale(eps)) + u
    np.testing.assert_array_equal(run(oneshot.laplace_sample, u), lap)
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
