"""The synthetic longitudinal comparison that ``make demo`` runs.

20,000 users hold a Zipf(1)-distributed value over k = 50; τ = 10 timestamps, each later one a
random permutation of the users' values (math §6.1). Every longitudinal protocol collects all
timestamps with the per-user engine at ε∞ ∈ {0.5, 1, 2, 4} and ε1 = 0.4·ε∞; MSE_avg ([002]
eq. 1) is reported beside the analytic mean variance it should match, and beside the MSE_avg of
the same estimates after maximum-likelihood post-processing (`longldp.postprocess.mle`,
docs/math.md §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import longldp as ll
from longldp import metrics
from longldp import postprocess as pp
from longldp.data import to_longitudinal, zipf
from longldp.simulate import simulate

N_USERS = 20_000
K = 50
TAU = 10
EPS_PERM = (0.5, 1.0, 2.0, 4.0)
ALPHA = 0.4

#: (label, registry name, extra parameters) of every longitudinal protocol in the demo.
PROTOCOLS: tuple[tuple[str, str, dict], ...] = (
    ("L-GRR", "L-GRR", {}),
    ("L-GRR (paper)", "L-GRR", {"calibration": "paper"}),
    ("L-SUE", "L-SUE", {}),
    ("L-OUE", "L-OUE", {}),
    ("L-SOUE", "L-SOUE", {}),
    ("L-OSUE", "L-OSUE", {}),
    ("BiLOLOHA", "BiLOLOHA", {}),
    ("OLOLOHA", "OLOLOHA", {}),
    ("1BitFlipPM", "dBitFlipPM", {"d": 1}),
)


@dataclass(frozen=True)
class DemoRow:
    protocol: str
    eps_perm: float
    eps_1: float
    mse_avg: float
    expected_mse: float
    max_spent_epsilon: float
    #: MSE_avg of the same estimates after `longldp.postprocess.mle` (NaN when not computed).
    mse_avg_mle: float = float("nan")


def make_proto(name: str, extra: dict, eps_perm: float) -> ll.FrequencyOracle:
    """The demo's protocol ``name`` at ε∞ (and ε1 = ``ALPHA``·ε∞ for a two-round chain)."""
    if name == "dBitFlipPM":
        return ll.protocol(name, k=K, eps_perm=eps_perm, **extra)
    return ll.protocol(name, k=K, eps_perm=eps_perm, eps_1=ALPHA * eps_perm, **extra)


def run_demo(seed: int = 2026) -> list[DemoRow]:
    """Run the grid; seeds come from one SeedSequence, spawned per cell."""
    root = np.random.SeedSequence(seed)
    data_seed, *cell_seeds = root.spawn(1 + len(PROTOCOLS) * len(EPS_PERM))
    data_rng = np.random.default_rng(data_seed)
    values = to_longitudinal(zipf(N_USERS, K, rng=data_rng), TAU, data_rng)
    rows = []
    cells = [(p, e) for p in PROTOCOLS for e in EPS_PERM]
    for (label, name, extra), eps_perm in cells:
        proto = make_proto(name, extra, eps_perm)
        keep = _KeepChannel()  # returns the raw estimates unchanged: the same draws as before
        sim = simulate(proto, values, np.random.default_rng(cell_seeds.pop(0)), postprocess=keep)
        expected = float(np.mean(proto.variance(N_USERS, sim.truth)))
        mle = np.stack([pp.mle(row, 1.0, keep.channel) for row in sim.estimates])
        rows.append(
            DemoRow(
                label,
                eps_perm,
                proto.eps_1,
                sim.mse_avg,
                expected,
                float(np.max(sim.spent_epsilon)) if sim.spent_epsilon is not None else 0.0,
                metrics.mse_avg(mle, sim.truth),
            )
        )
    return rows


class _KeepChannel:
    """A post-processing that changes nothing and remembers the channel it was given."""

    channel: pp.ChannelInfo | None = None

    def __call__(self, estimates: np.ndarray, total: float, channel: pp.ChannelInfo) -> np.ndarray:
        self.channel = channel
        return estimates


def plot_demo(rows: list[DemoRow], path: Path) -> Path:
    """MSE_avg against ε∞, one line per protocol (each with its own colour, marker and line
    style), log scale; below, each protocol's MSE_avg over the best one's at the same ε∞."""
    from matplotlib.figure import Figure

    from longldp.experiments.plot import line_styles, ratio_panel

    labels = list(dict.fromkeys(r.protocol for r in rows))
    styles = line_styles(labels)
    fig = Figure(figsize=(7.5, 6.4), dpi=120, layout="constrained")
    ax, ratio_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3.0, 1.4])
    means: dict[object, dict[float, float]] = {}
    for label in labels:
        mine = [r for r in rows if r.protocol == label]
        means[label] = {r.eps_perm: r.mse_avg for r in mine}
        ax.plot(
            [r.eps_perm for r in mine],
            [r.mse_avg for r in mine],
            ms=5,
            label=label,
            **styles[label],  # type: ignore[arg-type]
        )
    ax.set_yscale("log")
    ax.set_ylabel("mean squared error, averaged over time")
    ax.set_title(
        f"Synthetic Zipf, n = {N_USERS:,}, k = {K}, τ = {TAU} (per-user engine)", fontsize=10
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    ratio_panel(ratio_ax, means, styles, "mse_avg")
    ratio_ax.set_xlabel("privacy budget ε∞ of the memoized answer (ε1 = 0.4·ε∞)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
