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
    mse_avg_mle: float


def make_proto(name: str, extra: dict, eps_perm: float) -> ll.FrequencyOracle:
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
    """MSE_avg against ε∞, one line per protocol, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label in dict.fromkeys(r.protocol for r in rows):
        mine = [r for r in rows if r.protocol == label]
        ax.plot([r.eps_perm for r in mine], [r.mse_avg for r in mine], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("ε∞ (ε1 = 0.4·ε∞)")
    ax.set_ylabel("MSE_avg")
    ax.set_title(f"Synthetic Zipf, n = {N_USERS:,}, k = {K}, τ = {TAU} (per-user engine)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
