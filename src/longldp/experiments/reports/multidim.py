"""[004]'s Tables 3–4 from a ``multidim`` results table: gains of ALLOMFREE over SMP.

`gain_table` and `format_gain_table` turn a results table into the gain of ALLOMFREE over
SMP+L-SUE and SMP+L-OUE, in %, per ε∞ and on average, beside the paper's numbers;
`plot_gains` draws them. ``longldp allomfree-gains`` runs them; without the ``longldp``
command::

    python -m longldp.experiments.reports.multidim RESULTS.parquet --out gains.md --plot gains.png
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from longldp.apps.multidim import collection as md

__all__ = [
    "PAPER_GAINS",
    "PAPER_MEANS",
    "PAPER_SETUP",
    "GainRow",
    "format_gain_table",
    "gain_table",
    "main",
    "plot_gains",
]

_EPS_GRID = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def _paper_column(*values: float) -> dict[float, float]:
    return dict(zip(_EPS_GRID, values, strict=True))


#: [004] Table 3 (α = 0.3) and Table 4 (α = 0.6): gain (%) of ALLOMFREE over SMP with L-SUE and
#: with L-OUE, per ε∞, as printed. Keyed by (dataset registry name, α) then baseline chain.
#: The paper's "Mean" row is the mean of its eight per-ε∞ gains.
PAPER_GAINS: dict[tuple[str, float], dict[str, dict[float, float]]] = {
    ("nursery", 0.3): {
        "L-SUE": _paper_column(13.51, 12.36, 19.95, 17.18, 20.70, 28.69, 36.19, 41.24),
        "L-OUE": _paper_column(20.63, 17.75, 25.86, 33.24, 35.40, 42.98, 54.02, 57.16),
    },
    ("adult", 0.3): {
        "L-SUE": _paper_column(19.03, 12.77, 8.47, 4.11, 11.93, 8.35, 18.97, 19.81),
        "L-OUE": _paper_column(27.73, 20.44, 18.01, 17.16, 22.54, 28.22, 32.02, 34.25),
    },
    ("ms-fimu", 0.3): {
        "L-SUE": _paper_column(3.03, 1.01, 4.13, 13.22, 10.41, 13.07, 14.78, 20.38),
        "L-OUE": _paper_column(5.43, 11.57, 11.55, 23.44, 22.25, 21.56, 29.10, 29.64),
    },
    ("census-income", 0.3): {
        "L-SUE": _paper_column(7.84, 9.21, 5.82, 10.06, 12.77, 17.07, 22.02, 24.99),
        "L-OUE": _paper_column(9.48, 14.08, 12.92, 20.41, 23.15, 26.21, 30.96, 35.60),
    },
    ("nursery", 0.6): {
        "L-SUE": _paper_column(17.82, 14.99, 15.88, 27.52, 39.59, 40.64, 44.39, 42.24),
        "L-OUE": _paper_column(38.84, 38.97, 41.05, 54.69, 60.96, 65.32, 68.73, 71.13),
    },
    ("adult", 0.6): {
        "L-SUE": _paper_column(10.42, 9.83, 12.90, 12.95, 23.28, 28.59, 34.85, 45.26),
        "L-OUE": _paper_column(27.46, 25.14, 28.59, 33.78, 38.50, 47.95, 50.00, 58.33),
    },
    ("ms-fimu", 0.6): {
        "L-SUE": _paper_column(6.41, 2.97, 16.00, 14.81, 17.71, 27.26, 33.69, 41.83),
        "L-OUE": _paper_column(24.79, 23.32, 30.52, 35.65, 35.34, 40.97, 50.94, 59.47),
    },
    ("census-income", 0.6): {
        "L-SUE": _paper_column(5.65, 9.79, 11.88, 18.45, 24.89, 36.12, 40.01, 45.85),
        "L-OUE": _paper_column(21.61, 25.46, 28.05, 32.31, 39.11, 44.48, 48.18, 54.44),
    },
}
#: The paper's "Mean" rows, as printed (Tables 3–4).
PAPER_MEANS: dict[tuple[str, float], dict[str, float]] = {
    ("nursery", 0.3): {"L-SUE": 23.73, "L-OUE": 35.88},
    ("adult", 0.3): {"L-SUE": 12.93, "L-OUE": 25.05},
    ("ms-fimu", 0.3): {"L-SUE": 10.00, "L-OUE": 19.32},
    ("census-income", 0.3): {"L-SUE": 13.72, "L-OUE": 21.60},
    ("nursery", 0.6): {"L-SUE": 30.38, "L-OUE": 54.96},
    ("adult", 0.6): {"L-SUE": 22.26, "L-OUE": 38.72},
    ("ms-fimu", 0.6): {"L-SUE": 20.08, "L-OUE": 37.62},
    ("census-income", 0.6): {"L-SUE": 24.08, "L-OUE": 36.70},
}
#: (n, d) of the paper's datasets ([004] §5.1): paper numbers are shown only for this setup.
PAPER_SETUP: dict[str, tuple[int, int]] = {
    "nursery": (12960, 9),
    "adult": (45222, 9),
    "ms-fimu": (88935, 6),
    "census-income": (299285, 33),
}


@dataclass(frozen=True)
class GainRow:
    """One row of the gain table: one ε∞ of one (dataset, α, post-processing), or their mean.

    Attributes
    ----------
    dataset : str
        Dataset label.
    alpha : float or None
        α = ε1/ε∞.
    postprocess : str
        Post-processing of the rows compared.
    eps_perm : float or None
        ε∞; None for the mean over the ε∞ grid (the paper's "Mean" row).
    reps : int
        Repetitions behind every mean (those present for the target and every baseline).
    mse : mapping
        Label → mean MSE_avg over the repetitions (empty in the mean row).
    gain : mapping
        Baseline label → gain (%) of the target over it:
        100·(MSE(baseline) − MSE(target))/MSE(baseline), MSEs averaged over repetitions
        first ([004] eq. 17). In the mean row: the mean of the per-ε∞ gains.
    ci : mapping
        Baseline label → half-width of a 95% normal confidence interval of the gain (delta
        method on the paired repetitions; NaN with fewer than two repetitions).
    paper : mapping
        Baseline label → the paper's printed gain, or None when the paper has no such cell.
    """

    dataset: str
    alpha: float | None
    postprocess: str
    eps_perm: float | None
    reps: int
    mse: Mapping[str, float] = field(default_factory=dict)
    gain: Mapping[str, float] = field(default_factory=dict)
    ci: Mapping[str, float] = field(default_factory=dict)
    paper: Mapping[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Flat dictionary (``mse[label]``, ``gain[label]``, ``ci[label]``, ``paper[label]``)."""
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "alpha": self.alpha,
            "postprocess": self.postprocess,
            "eps_perm": self.eps_perm,
            "reps": self.reps,
        }
        for name in ("mse", "gain", "ci", "paper"):
            for label, value in getattr(self, name).items():
                out[f"{name}[{label}]"] = value
        return out


def _read_table(results: str | Path | pa.Table) -> pa.Table:
    if isinstance(results, pa.Table):
        return results
    from longldp.experiments.store import read_results

    return read_results(results)


def gain_table(
    results: str | Path | pa.Table,
    *,
    target: str = "ALLOMFREE",
    baselines: Sequence[str] = ("SMP+L-SUE", "SMP+L-OUE"),
) -> list[GainRow]:
    """[004] Tables 3–4 from a multidim results table: gains of ``target`` over ``baselines``.

    For every dataset × α × post-processing and every ε∞: the mean MSE_avg over the
    repetitions of each solution, and the gain (%) of ``target`` over each baseline,
    ``100·(MSE(baseline) − MSE(target))/MSE(baseline)`` ([004] eq. 17, printed in %); then a row
    with the mean gain over the ε∞ grid (the paper's "Mean" row). Only ``status == "ok"`` rows
    count, and only repetitions present for the target and every baseline (paired).

    Parameters
    ----------
    results : str, Path or pyarrow.Table
        ``results.parquet`` (or its folder) written by ``longldp run``, or the table.
    target : str, default="ALLOMFREE"
        Label (``protocol`` column) of the solution whose gain is measured.
    baselines : sequence of str, default=("SMP+L-SUE", "SMP+L-OUE")
        Labels of the solutions it is compared with.

    Returns
    -------
    list of GainRow
        Ordered by dataset, α, post-processing (as first seen), then ε∞ and the mean row.
        The paper's numbers are attached where the dataset is one of [004]'s with its n and d,
        the target is ALLOMFREE with the paper's candidates and a baseline is SMP with L-SUE or
        L-OUE.

    Raises
    ------
    ValueError
        A missing column, or a label absent from the table.
    """
    table = _read_table(results)
    needed = (
        "dataset", "dataset_name", "n", "d", "protocol", "solution", "chain",
        "alpha", "eps_perm", "postprocess", "rep", "status", "mse_avg",
    )  # fmt: skip
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise ValueError(f"gain_table: the results table has no column(s) {missing}.")
    labels = [target, *baselines]
    if len(set(labels)) != len(labels):
        raise ValueError(f"gain_table: 'target' and 'baselines' must differ; got {labels}.")
    cols = {c: table.column(c).to_pylist() for c in needed}
    present = set(cols["protocol"])
    absent = [x for x in labels if x not in present]
    if absent:
        raise ValueError(
            f"gain_table: no rows for {absent} in the 'protocol' column; present: "
            f"{sorted(present)}."
        )
    about: dict[str, tuple[str, str]] = {}
    data: dict[tuple, dict[str, dict[int, float]]] = {}
    setup: dict[str, tuple[str, int, int]] = {}
    order: list[tuple] = []
    for i in range(table.num_rows):
        label = cols["protocol"][i]
        if label not in labels:
            continue
        about[label] = (cols["solution"][i], cols["chain"][i])
        if cols["status"][i] != "ok" or cols["mse_avg"][i] is None:
            continue
        group = (cols["dataset"][i], cols["alpha"][i], cols["postprocess"][i])
        setup[group[0]] = (cols["dataset_name"][i], cols["n"][i], cols["d"][i])
        if group not in order:
            order.append(group)
        per_eps = data.setdefault((*group, cols["eps_perm"][i]), {})
        per_eps.setdefault(label, {})[cols["rep"][i]] = float(cols["mse_avg"][i])
    rows: list[GainRow] = []
    paper_target = about.get(target) == ("ALLOMFREE", "/".join(md.ALLOMFREE_CANDIDATES))
    for group in order:
        dataset, alpha, post = group
        name, n, d = setup[dataset]
        eps_values = sorted(k[3] for k in data if k[:3] == group)
        paper_key = (name, alpha)
        use_paper = paper_target and PAPER_SETUP.get(name) == (n, d) and paper_key in PAPER_GAINS
        # per baseline: the ε∞ where it has a gain, and each repetition's influence values
        gains_of: dict[str, list[float]] = {b: [] for b in baselines}
        eps_of: dict[str, list[float]] = {b: [] for b in baselines}
        influence: dict[str, list[dict[int, float]]] = {b: [] for b in baselines}
        for eps in eps_values:
            by_label = data[(*group, eps)]
            if target not in by_label:
                continue
            mse = {x: float(np.mean(list(by_label[x].values()))) for x in labels if x in by_label}
            gain, ci, paper = {}, {}, {}
            pairs = []
            for b in baselines:
                if b not in by_label:
                    continue
                pair = _pair_gain(by_label[target], by_label[b])
                if pair is None:
                    continue
                gain[b], ci[b], psi = pair
                pairs.append(len(psi))
                gains_of[b].append(gain[b])
                eps_of[b].append(eps)
                influence[b].append(psi)
                paper[b] = _paper_value(use_paper, paper_key, about[b], eps)
            if gain:
                rows.append(GainRow(dataset, alpha, post, eps, min(pairs), mse, gain, ci, paper))
        if not any(gains_of.values()):
            continue
        mean_gain, mean_ci, mean_paper = {}, {}, {}
        mean_reps = []
        for b in baselines:
            if not gains_of[b]:
                continue
            mean_gain[b] = float(np.mean(gains_of[b]))
            common = set.intersection(*(set(psi) for psi in influence[b]))
            mean_reps.append(len(common))
            psi_mean = np.array([np.mean([psi[r] for psi in influence[b]]) for r in common])
            mean_ci[b] = _half_width(psi_mean)
            solution, chain = about[b]
            on_grid = len(eps_of[b]) == len(_EPS_GRID) and all(
                math.isclose(x, y) for x, y in zip(eps_of[b], _EPS_GRID, strict=True)
            )
            mean_paper[b] = (
                PAPER_MEANS[paper_key].get(chain)
                if use_paper and solution == "SMP" and on_grid
                else None
            )
        rows.append(
            GainRow(dataset, alpha, post, None, min(mean_reps), {}, mean_gain, mean_ci, mean_paper)
        )
    return rows


def _pair_gain(
    target: Mapping[int, float], baseline: Mapping[int, float]
) -> tuple[float, float, dict[int, float]] | None:
    """Gain (%) of ``target`` over ``baseline`` on their common repetitions.

    Returns (gain, 95% half-width, influence of each repetition) or None without a common
    repetition. gain = 100·(1 − Ā/B̄) with Ā, B̄ the mean MSE_avg over the common repetitions;
    the delta method gives its influence values ψ_r = −100·(a_r − (Ā/B̄)·b_r)/B̄, whose mean's
    standard error is that of the gain (paired: the repetitions share their assignment).
    """
    reps = sorted(set(target) & set(baseline))
    if not reps:
        return None
    a = np.array([target[r] for r in reps])
    b = np.array([baseline[r] for r in reps])
    ratio = a.mean() / b.mean()
    psi = -100.0 * (a - ratio * b) / b.mean()
    return 100.0 * (1.0 - ratio), _half_width(psi), dict(zip(reps, psi.tolist(), strict=True))


def _half_width(psi: np.ndarray) -> float:
    """1.96 standard errors of a mean whose per-repetition influence values are ``psi``."""
    if psi.size < 2:
        return math.nan
    return float(1.96 * np.std(psi, ddof=1) / math.sqrt(psi.size))


def _paper_value(
    use: bool, key: tuple[str, float], about: tuple[str, str], eps: float
) -> float | None:
    solution, chain = about
    if not use or solution != "SMP":
        return None
    column = PAPER_GAINS[key].get(chain)
    if column is None:
        return None
    return next((v for e, v in column.items() if math.isclose(e, eps)), None)


def _num(x: float | None, fmt: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return format(x, fmt)


def format_gain_table(rows: Sequence[GainRow]) -> str:
    """The gain table as Markdown: one table per dataset × α × post-processing.

    Each table has one line per ε∞ and a "mean" line; columns: mean MSE_avg of every solution,
    then for every baseline our gain ± its 95% half-width, the paper's gain and our gain minus
    the paper's (percentage points).

    Parameters
    ----------
    rows : sequence of GainRow
        What `gain_table` returned.

    Returns
    -------
    str
    """
    if not rows:
        return "No gains: the table has no complete (target, baseline) pairs.\n"
    out: list[str] = []
    groups: dict[tuple, list[GainRow]] = {}
    for row in rows:
        groups.setdefault((row.dataset, row.alpha, row.postprocess), []).append(row)
    for (dataset, alpha, post), members in groups.items():
        labels = list(dict.fromkeys(x for r in members for x in r.mse))
        baselines = list(dict.fromkeys(b for r in members for b in r.gain))
        reps = max(r.reps for r in members)
        alpha_text = "–" if alpha is None else f"{alpha:g}"
        out.append(
            f"### {dataset}, α = {alpha_text} (post-processing {post}, {reps} repetitions)\n"
        )
        header = ["ε∞", *(f"MSE_avg {x}" for x in labels)]
        for b in baselines:
            header += [f"gain vs {b} (%)", "paper (%)", "ours − paper"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for row in members:
            cells_ = ["**mean**" if row.eps_perm is None else f"{row.eps_perm:g}"]
            cells_ += [_num(row.mse.get(x), ".4g") for x in labels]
            for b in baselines:
                g, c, p = row.gain.get(b), row.ci.get(b), row.paper.get(b)
                ours = _num(g, ".2f") + ("" if c is None or math.isnan(c) else f" ± {c:.2f}")
                diff = None if g is None or p is None else g - p
                cells_ += [ours, _num(p, ".2f"), _num(diff, "+.2f")]
            out.append("| " + " | ".join(cells_) + " |")
        out.append("")
    return "\n".join(out)


def plot_gains(rows: Sequence[GainRow], out: str | Path) -> Path:
    """Draw the per-ε∞ gains (ours with 95% bars, the paper's dashed) into one PNG.

    One panel per dataset × α × post-processing; one colour per baseline.

    Parameters
    ----------
    rows : sequence of GainRow
        What `gain_table` returned.
    out : str or Path
        The PNG file to write.

    Returns
    -------
    Path
        ``out``.
    """
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    groups: dict[tuple, list[GainRow]] = {}
    for row in rows:
        if row.eps_perm is not None:
            groups.setdefault((row.dataset, row.alpha, row.postprocess), []).append(row)
    if not groups:
        raise ValueError("plot_gains: no per-ε∞ gains to draw.")
    ncols = min(2, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig = Figure(figsize=(6.0 * ncols, 4.0 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, ((dataset, alpha, post), members) in zip(axes, groups.items(), strict=False):
        baselines = list(dict.fromkeys(b for r in members for b in r.gain))
        for i, b in enumerate(baselines):
            colour = colours[i % len(colours)]
            pts = [r for r in members if b in r.gain]
            x = [r.eps_perm for r in pts]
            y = [r.gain[b] for r in pts]
            err = [0.0 if math.isnan(r.ci[b]) else r.ci[b] for r in pts]
            ax.errorbar(x, y, yerr=err, color=colour, marker="o", capsize=3, label=f"ours vs {b}")
            paper = [(r.eps_perm, r.paper.get(b)) for r in pts if r.paper.get(b) is not None]
            if paper:
                px, py = zip(*paper, strict=True)
                ax.plot(
                    px, py, color=colour, ls="--", marker="s", mfc="none", label=f"paper vs {b}"
                )
        alpha_text = "–" if alpha is None else f"{alpha:g}"
        ax.set_title(f"{dataset}, α = {alpha_text} ({post})")
        ax.set_xlabel("ε∞")
        ax.set_ylabel("gain of ALLOMFREE (%)")
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m longldp.experiments.reports.multidim RESULTS [--out MD] [--plot PNG]``.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0, or 2 for a bad table.
    """
    parser = argparse.ArgumentParser(
        prog="python -m longldp.experiments.reports.multidim",
        description="Gains of ALLOMFREE over SMP+L-SUE and SMP+L-OUE ([004] Tables 3-4).",
    )
    parser.add_argument("results", type=Path, help="results.parquet of a multidim study")
    parser.add_argument("--out", type=Path, help="also write the Markdown table to this file")
    parser.add_argument("--plot", type=Path, help="also draw the per-ε∞ gains into this PNG")
    parser.add_argument("--target", default="ALLOMFREE", help="label of the target solution")
    parser.add_argument(
        "--baseline",
        action="append",
        help="label of a baseline (repeat; default SMP+L-SUE and SMP+L-OUE)",
    )
    args = parser.parse_args(argv)
    baselines = tuple(args.baseline) if args.baseline else ("SMP+L-SUE", "SMP+L-OUE")
    try:
        rows = gain_table(args.results, target=args.target, baselines=baselines)
        text = format_gain_table(rows)
        if args.plot is not None:
            plot_gains(rows, args.plot)
    except (ValueError, OSError) as err:
        print(f"error: {err}")
        return 2
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
