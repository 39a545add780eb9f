"""The table of local and shuffled central privacy for every registered protocol (the one of
docs/guide/shuffling.md).

Usage: python experiments/shuffle_table.py [--n N] [--epochs T] [--delta D] > table.md

Setting: ε∞ = 2 and ε1 = 0.8 for the memoizing chains, ε = ε1 = 0.8 for one-shot oracles,
k = 74 (open item spaces: a sketch of m = 1024 columns), n = 10⁶ devices, τ = 100 epochs,
δ = 10⁻⁶, values that never change (one memo per device). Every number comes from
`longldp.shuffle.central_summary` (docs/math.md §17), whose routes follow what persists per
device (the protocols' ``linkage`` trait, its own column); tests/test_shuffle_table.py checks
that docs/guide/shuffling.md shows exactly this output.
"""

from __future__ import annotations

import argparse
from typing import Any

import longldp as ll
from longldp.shuffle import central_summary

K, EPS_PERM, EPS_1, N, EPOCHS, DELTA = 74, 2.0, 0.8, 1_000_000, 100, 1e-6


def _params(info: ll.protocols.ProtocolInfo) -> dict[str, Any]:
    """Constructor parameters of one registry row at the table's setting."""
    # k = 74 values, or a sketch of m = 1024 columns (and its default rows) over open items
    params: dict[str, Any] = {"k": K} if "k" in info.parameters else {"m": 1024}
    if "f" in info.budget_params:  # RAPPOR: (f, p, q) matched to L-SUE at (ε∞, ε1), h = m = 1
        lsue = ll.protocol("L-SUE", k=K, eps_perm=EPS_PERM, eps_1=EPS_1)
        own = {"k": K, "h": 1, "m": 1, "f": 2 * lsue.q1, "p": lsue.q2, "q": lsue.p2}
        return {name: v for name, v in own.items() if name in info.parameters}
    if not info.longitudinal:
        params["eps"] = EPS_1
    else:
        params["eps_perm"] = EPS_PERM
        if "eps_1" in info.parameters:
            params["eps_1"] = EPS_1
        if "d" in info.parameters and "k" in params:  # dBitFlipPM: one sampled bucket
            params["d"] = 1
    return params


def table(n: int = N, epochs: int = EPOCHS, delta: float = DELTA) -> str:
    """The Markdown table, one row per registered protocol (the guide's at the defaults)."""
    head = (
        "| protocol | persists per device | ε per report | ε per memo | ε device, τ epochs | "
        "shuffled ε per epoch | shuffled ε per memo | shuffled ε, whole collection | route |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for info in ll.list_protocols():
        proto = ll.protocol(info.name, **_params(info))
        s = central_summary(proto, n, epochs, delta)

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3g}"

        lines.append(
            f"| {info.name} | {s.linkage} | {fmt(s.per_report)} | {fmt(s.per_memo)} | "
            f"{fmt(s.collection_local)} | {fmt(s.per_epoch)} | {fmt(s.per_memo_shuffled)} | "
            f"{fmt(s.collection)} | {s.route} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N, help="devices per shuffle (default 10⁶)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="epochs τ (default 100)")
    parser.add_argument("--delta", type=float, default=DELTA, help="δ (default 1e-6)")
    args = parser.parse_args()
    print(table(args.n, args.epochs, args.delta))


if __name__ == "__main__":
    main()
