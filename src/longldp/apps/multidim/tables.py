"""Tables 1 and 2 of [004] (analytic V* at n = 10⁴), regenerated from the protocol objects.

- **Table 1** ([004] §4.4): V* ([004] eq. 11) of the longitudinal protocols L-GRR (k = 2, 32,
  2¹⁰), L-OSUE, L-SUE, L-SOUE and L-OUE, one row per (α, ε∞) with α ∈ {0.6, 0.5, 0.4, 0.3,
  0.2, 0.1} (outer) and ε∞ ∈ {0.5, 1, 2, 4} (inner), ε1 = α·ε∞ (rounded to 4 decimals, as in
  the paper's code), n = 10⁴.
- **Table 2** ([004] §4.4): V* of the one-shot GRR (k = 2, 32, 2¹⁰), OUE and SUE at
  ε ∈ {0.5, 1, 2, 4}, n = 10⁴.

The seed text of the paper lost its row labels; the grid above is the one of the authors'
notebook ``papers/[4]/1_ALLOMFREE_Analysis.ipynb`` (hharcolezi/ldp-protocols-mobility-cdrs),
whose printed output equals the paper's table cell by cell. The paper prints V* rounded to 6
decimals (the k = 2¹⁰ column: 5 decimals after that rounding), except for values it shows as
integers, which are *truncated* (26706.64 → "26706", 10.69 → "10"); :func:`paper_value_agrees`
compares at that printed precision.

L-GRR uses the ``"paper"`` calibration ([004] eq. 13) by default: it is what the paper
computed (with ``"exact"`` the L-GRR columns are GRR's V* at ε1 and do not match).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from longldp import _validate as check
from longldp import privacy
from longldp.apps.multidim.collection import PAPER_CALIBRATION, build_protocol
from longldp.protocols import protocol

PAPER_N = 10_000
PAPER_EPS_PERMS = (0.5, 1.0, 2.0, 4.0)
PAPER_ALPHAS = (0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
PAPER_GRR_KS = (2, 32, 1024)
TABLE1_UE_CHAINS = ("L-OSUE", "L-SUE", "L-SOUE", "L-OUE")
TABLE2_UE = ("OUE", "SUE")

_T1_COLS = (
    "L-GRR(k=2)",
    "L-GRR(k=32)",
    "L-GRR(k=1024)",
    "L-OSUE",
    "L-SUE",
    "L-SOUE",
    "L-OUE",
)
# (α, ε∞) → the paper's printed row, in the order of _T1_COLS ([004] Table 1).
_T1_PRINTED = {
    (0.6, 0.5): "0.001103 0.980969 26706 0.004411 0.004436 0.005306 0.005549",
    (0.6, 1.0): "0.000270 0.125036 3153 0.001078 0.001103 0.001234 0.001347",
    (0.6, 2.0): "0.000062 0.006327 117 0.000247 0.000270 0.000264 0.000310",
    (0.6, 4.0): "0.000011 0.000078 0.25903 0.000044 0.000062 0.000045 0.000057",
    (0.5, 0.5): "0.001592 2.088372 60218 0.006367 0.006392 0.007336 0.007611",
    (0.5, 1.0): "0.000392 0.268074 7198 0.001567 0.001592 0.001740 0.001872",
    (0.5, 2.0): "0.000092 0.013926 281 0.000368 0.000392 0.000389 0.000447",
    (0.5, 4.0): "0.000018 0.000188 0.74088 0.000072 0.000092 0.000073 0.000092",
    (0.4, 0.5): "0.002492 4.530779 135874 0.009967 0.009992 0.011012 0.011324",
    (0.4, 1.0): "0.000617 0.586823 16443 0.002467 0.002492 0.002658 0.002812",
    (0.4, 2.0): "0.000148 0.031552 673 0.000593 0.000617 0.000617 0.000690",
    (0.4, 4.0): "0.000032 0.000484 2.12772 0.000127 0.000148 0.000128 0.000156",
    (0.3, 0.5): "0.004436 10 329836 0.017744 0.017769 0.018863 0.019214",
    (0.3, 1.0): "0.001103 1.398568 40412 0.004411 0.004436 0.004620 0.004799",
    (0.3, 2.0): "0.000270 0.078202 1737 0.001078 0.001103 0.001106 0.001198",
    (0.3, 4.0): "0.000062 0.001389 6 0.000247 0.000270 0.000248 0.000291",
    (0.2, 0.5): "0.009992 30 972656 0.039967 0.039992 0.041148 0.041536",
    (0.2, 1.0): "0.002492 4.080052 120651 0.009967 0.009992 0.010190 0.010394",
    (0.2, 2.0): "0.000617 0.237925 5443 0.002467 0.002492 0.002498 0.002610",
    (0.2, 4.0): "0.000148 0.004939 24 0.000593 0.000617 0.000595 0.000659",
    (0.1, 0.5): "0.039992 154 4941829 0.159967 0.159992 0.161191 0.161608",
    (0.1, 1.0): "0.009992 20 620584 0.039967 0.039992 0.040201 0.040424",
    (0.1, 2.0): "0.002492 1.255550 29356 0.009967 0.009992 0.010000 0.010130",
    (0.1, 4.0): "0.000617 0.030494 156 0.002467 0.002492 0.002469 0.002560",
}
_T2_COLS = ("GRR(k=2)", "GRR(k=32)", "GRR(k=1024)", "OUE", "SUE")
# ε → the paper's printed row, in the order of _T2_COLS ([004] Table 2).
_T2_PRINTED = {
    0.5: "0.000392 0.007520 0.243240 0.001567 0.001592",
    1.0: "0.000092 0.001108 0.034707 0.000368 0.000392",
    2.0: "0.000018 0.000092 0.002522 0.000072 0.000092",
    4.0: "0.000002 0.000003 0.000037 0.000008 0.000018",
}

#: The paper's printed cells: (table, row key, column) → printed text.
PAPER_PRINTED: dict[tuple[int, tuple[float, ...], str], str] = {
    **{
        (1, key, col): cell
        for key, row in _T1_PRINTED.items()
        for col, cell in zip(_T1_COLS, row.split(), strict=True)
    },
    **{
        (2, (eps,), col): cell
        for eps, row in _T2_PRINTED.items()
        for col, cell in zip(_T2_COLS, row.split(), strict=True)
    },
}


def paper_value_agrees(printed: str, value: float | None) -> bool:
    """Whether ``value`` prints as the paper's ``printed`` cell.

    A cell with decimals is V* rounded to that many decimals: it agrees when
    |value − printed| <= ½·10^(−decimals) (+1e-12 for float noise), or when the paper's own
    formatting reproduces it. That formatting rounded to 6 decimals first and then printed the
    k = 2¹⁰ column with 5 (``'%.5f' % round(v, 6)``), a double rounding: 2.1277251 becomes
    2.127725 and then "2.12772". A cell without a decimal point is V* truncated to an integer
    (the paper's display of large L-GRR values): it agrees when ⌊value⌋ = printed.
    """
    if value is None or not math.isfinite(value):
        return False
    if "." not in printed:
        return math.floor(value) == int(printed)
    decimals = len(printed.split(".")[1])
    if f"{round(value, 6):.{decimals}f}" == printed:
        return True
    return abs(value - float(printed)) <= 0.5 * 10.0**-decimals + 1e-12


@dataclass(frozen=True)
class TableRow:
    """One row of Table 1 or 2: computed V* per column beside the paper's printed cells.

    Attributes
    ----------
    table : int
        1 or 2.
    alpha : float or None
        α = ε1/ε∞ (Table 1); None in Table 2.
    eps_perm : float or None
        ε∞ (Table 1); None in Table 2.
    eps : float
        ε1 = round(α·ε∞, 4) (Table 1) or the one-shot ε (Table 2).
    columns : tuple of str
    values : tuple of (float or None)
        V* at n users per column; None where the chain cannot reach α (L-OUE, L-SOUE have a
        maximum α; the paper's code prints "NC").
    paper : tuple of (str or None)
        The paper's printed cell per column, None where the paper has none (another n, another
        grid point or a column it does not print).
    """

    table: int
    alpha: float | None
    eps_perm: float | None
    eps: float
    columns: tuple[str, ...]
    values: tuple[float | None, ...]
    paper: tuple[str | None, ...]

    @property
    def agrees(self) -> tuple[bool | None, ...]:
        """Per column: :func:`paper_value_agrees`, or None where the paper prints nothing."""
        return tuple(
            None if p is None else paper_value_agrees(p, v)
            for p, v in zip(self.paper, self.values, strict=True)
        )


@dataclass(frozen=True)
class AllomfreeTables:
    """Tables 1 and 2 of [004] as computed, with the paper's cells where they apply."""

    n: int
    calibration: str
    table1: tuple[TableRow, ...]
    table2: tuple[TableRow, ...]

    def agreement(self) -> tuple[int, int]:
        """(cells that agree with the paper, cells the paper prints), over both tables."""
        flags = [a for row in (*self.table1, *self.table2) for a in row.agrees if a is not None]
        return sum(flags), len(flags)

    def format(self) -> str:
        """Both tables as plain text: each cell "computed" or "computed (paper: cell ✓/✗)"."""
        lines: list[str] = []
        for title, rows in (
            (f"Table 1: V* of the longitudinal protocols, n = {self.n:,}", self.table1),
            (f"Table 2: V* of the one-shot protocols, n = {self.n:,}", self.table2),
        ):
            lines.append(f"{title} (L-GRR calibration: {self.calibration})")
            head = ("α", "ε∞", "ε1") if rows and rows[0].table == 1 else ("ε",)
            cols = rows[0].columns if rows else ()
            lines.append(" | ".join((*head, *cols)))
            for row in rows:
                keys = (
                    (f"{row.alpha:g}", f"{row.eps_perm:g}", f"{row.eps:g}")
                    if row.table == 1
                    else (f"{row.eps:g}",)
                )
                cells = [
                    _cell(v, p, a)
                    for v, p, a in zip(row.values, row.paper, row.agrees, strict=True)
                ]
                lines.append(" | ".join((*keys, *cells)))
            lines.append("")
        agree, total = self.agreement()
        lines.append(f"Agreement with the paper's printed cells: {agree}/{total}.")
        return "\n".join(lines)


def allomfree_tables(
    n: int = PAPER_N,
    *,
    eps_perms: Sequence[float] = PAPER_EPS_PERMS,
    alphas: Sequence[float] = PAPER_ALPHAS,
    grr_ks: Sequence[int] = PAPER_GRR_KS,
    calibration: str = PAPER_CALIBRATION,
) -> AllomfreeTables:
    """Regenerate [004] Tables 1 and 2 (§4.4) from the protocol objects.

    V* = P0(1 − P0)/(n (P1 − P0)²) ([004] eq. 11 at f = 0; eq. 2 for the one-shot protocols),
    with each protocol's (p1, q1, p2, q2): L-GRR eq. 13, L-OSUE eq. 15, the others docs/math.md §3.

    Parameters
    ----------
    n : int, default=10_000
        Users; the paper's cells are attached only at n = 10⁴.
    eps_perms : sequence of float, default=(0.5, 1, 2, 4)
        ε∞ of Table 1 and ε of Table 2.
    alphas : sequence of float, default=(0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
        α of Table 1; ε1 = round(α·ε∞, 4).
    grr_ks : sequence of int, default=(2, 32, 1024)
        Domain sizes of the L-GRR and GRR columns.
    calibration : {"paper", "exact"}, default="paper"
        L-GRR's round-2 calibration.

    Returns
    -------
    AllomfreeTables
        ``table1`` rows in the paper's order (α outer, ε∞ inner) and ``table2`` rows by ε.
    """
    n = check.integer("allomfree_tables", "n", n, minimum=1)
    calibration = check.choice(
        "allomfree_tables", "calibration", calibration, privacy.LGRR_CALIBRATIONS
    )
    ks = [check.integer("allomfree_tables", "grr_ks", k, minimum=2) for k in grr_ks]
    eps_list = [check.positive_float("allomfree_tables", "eps_perms", e) for e in eps_perms]
    alpha_list = [check.positive_float("allomfree_tables", "alphas", a, upper=1) for a in alphas]
    printed = n == PAPER_N

    cols1 = (*(f"L-GRR(k={k})" for k in ks), *TABLE1_UE_CHAINS)
    table1 = []
    for alpha in alpha_list:
        for eps_perm in eps_list:
            eps_1 = round(alpha * eps_perm, 4)
            values = [
                build_protocol("L-GRR", k, eps_perm, eps_1, calibration).approx_variance(n)
                for k in ks
            ]
            values += [_chain_vstar(name, eps_perm, eps_1, n) for name in TABLE1_UE_CHAINS]
            key = (alpha, eps_perm)
            paper = tuple(PAPER_PRINTED.get((1, key, c)) if printed else None for c in cols1)
            table1.append(TableRow(1, alpha, eps_perm, eps_1, cols1, tuple(values), paper))

    cols2 = (*(f"GRR(k={k})" for k in ks), *TABLE2_UE)
    table2 = []
    for eps in eps_list:
        values2 = [protocol("GRR", k=k, eps=eps).approx_variance(n) for k in ks]
        values2 += [protocol(name, k=2, eps=eps).approx_variance(n) for name in TABLE2_UE]
        paper = tuple(PAPER_PRINTED.get((2, (eps,), c)) if printed else None for c in cols2)
        table2.append(TableRow(2, None, None, eps, cols2, tuple(values2), paper))
    return AllomfreeTables(n, calibration, tuple(table1), tuple(table2))


def _chain_vstar(name: str, eps_perm: float, eps_1: float, n: int) -> float | None:
    """V* of a UE chain (independent of k), or None beyond the chain's maximum α."""
    try:
        return build_protocol(name, 2, eps_perm, eps_1).approx_variance(n)
    except ValueError:
        return None


def _cell(value: float | None, paper: str | None, agrees: bool | None) -> str:
    shown = "NC" if value is None else f"{value:.6g}"
    if paper is None:
        return shown
    return f"{shown} (paper: {paper} {'✓' if agrees else '✗'})"


__all__ = [
    "PAPER_ALPHAS",
    "PAPER_EPS_PERMS",
    "PAPER_GRR_KS",
    "PAPER_N",
    "PAPER_PRINTED",
    "AllomfreeTables",
    "TableRow",
    "allomfree_tables",
    "paper_value_agrees",
]
