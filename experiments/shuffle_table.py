"""The table of local and shuffled central privacy for every registered protocol (the one of
docs/guide/shuffling.md).

Usage: python experiments/shuffle_table.py [--n N] [--epochs T] [--delta D] > table.md

Setting: ε∞ = 2 and ε1 = 0.8 for the memoizing chains, ε = ε1 = 0.8 for one-shot oracles,
k = 74 (open item spaces: a sketch of m = 1024 columns), n = 10⁶ devices, τ = 100 epochs,
δ = 10⁻⁶, values that never change (one memo per device). Mechanisms whose rounds the server
plans (the LDP-IDS methods, docs/streams.md) are left out: their budget at each epoch is the
server's plan, which this fixed setting does not have. Every number comes from
`longldp.shuffle.central_summary` (docs/math.md §17), whose routes follow what persists per
device (the protocols' ``linkage`` trait, its own column); tests/test_shuffle_table.py checks
that docs/guide/shuffling.md shows exactly this output.
"""

from __future__ import annotations

import argparse

import longldp as ll
from longldp.shuffle import central_summary

K, EPS_PERM, EPS_1, N, EPOCHS, DELTA = 74, 2.0, 0.8, 1_000_000, 100, 1e-6


def table(n: int = N, epochs: int = EPOCHS, delta: float = DELTA) -> str:
    """The Markdown table, one row per registered protocol whose rounds are not planned and
    whose reports do not follow the device's history (the guide's at the defaults)."""
    head = (
        "| protocol | persists per device | ε per report | ε per memo | ε device, τ epochs | "
        "shuffled ε per epoch | shuffled ε per memo | shuffled ε, whole collection | route |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for info in ll.list_protocols():
        if info.rounds == "planned":  # per-epoch budgets come from the server's plan
            continue
        cls = ll.get_protocol_class(info.name)
        if cls.history is not None:  # no route is proven for it
            continue
        proto = ll.protocol(info.name, **cls.setting_params(K, EPS_PERM, EPS_1, EPS_1))
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
