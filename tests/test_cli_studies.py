"""The study commands as a user meets them: tables, plots of every kind, output folders.

Each test here failed on the main branch before issue 8 (§5): cut numbers in ``longldp run``
tables, an empty source column in ``longldp datasets``, ``longldp plot`` failing on felip and
set-valued results, single-panel figures cut off, indistinguishable lines, bands patched with
mean·1e-3, empty "()" in titles, felip workloads written to ./results/, and another study
silently mixed into an output folder beside stale plots.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from longldp.cli import app
from longldp.experiments import load_study, summarize
from longldp.experiments.kinds import get_kind
from longldp.experiments.plot import band, plot_results

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
runner = CliRunner()
NUMBER = re.compile(r"\d\.\d{3}e[+-]\d\d")


def _study(tmp: Path, source: str, **changes) -> Path:
    """A copy of a shipped study file with some top-level keys changed (smaller, renamed)."""
    with (EXPERIMENTS / source).open("rb") as f:
        doc = tomllib.load(f)
    doc.update(changes)
    lines = []
    for key, value in doc.items():
        lines.append(f"{key} = {_toml(value)}")
    path = tmp / f"{doc['name']}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    return repr(value)


def _run(args: list[str], columns: int = 100):
    return runner.invoke(app, args, env={"COLUMNS": str(columns)})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``longldp run experiments/tiny.toml`` with COLUMNS=100, output not a terminal."""
    out = tmp_path_factory.mktemp("tiny") / "out"
    result = _run(["run", str(EXPERIMENTS / "tiny.toml"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return out, result


@pytest.mark.slow
def test_run_table_respects_columns_and_never_cuts_a_number(tiny):
    out, result = tiny
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "…" not in result.stdout
    kind = get_kind("standalone")
    summary = summarize(pq.read_table(out / "results.parquet"), kind.summary_by)
    expected = [e for row in summary.rows for e in row[len(kind.summary_by) :] if NUMBER.match(e)]
    assert expected and sorted(NUMBER.findall(result.stdout)) == sorted(expected)
    # a narrower console splits the ε∞ columns over two tables instead of cutting them
    narrow = _run(["run", str(EXPERIMENTS / "tiny.toml"), "--out", str(out)], columns=60)
    assert narrow.exit_code == 0, narrow.output
    assert "(1/2)" in narrow.stdout and "(2/2)" in narrow.stdout
    assert sorted(NUMBER.findall(narrow.stdout)) == sorted(expected)


def test_datasets_shows_the_source():
    result = _run(["datasets"], columns=250)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ adult "))
    assert "UCI Adult" in row


@pytest.mark.slow
def test_other_study_into_the_same_out_is_refused_then_forced(tmp_path):
    small = {"repetitions": 1, "alpha": [0.4], "postprocess": ["none"], "eps_perm": [1.0, 4.0]}
    small["datasets"] = [{"name": "zipf", "n": 2000, "k": 20}]
    first = _study(tmp_path, "tiny.toml", **small)
    out = tmp_path / "out"
    assert _run(["run", str(first), "--out", str(out), "--workers", "1"]).exit_code == 0
    plotted = _run(["plot", str(out / "results.parquet")])
    assert plotted.exit_code == 0, plotted.output
    pngs = sorted((out / "plots").glob("*.png"))
    assert pngs
    other = _study(tmp_path, "tiny.toml", name="tiny-other", **small)
    refused = _run(["run", str(other), "--out", str(out), "--workers", "1"])
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "'tiny'" in refused.stderr
    assert "--force" in refused.stderr
    assert all(p.exists() for p in pngs)  # nothing touched
    forced = _run(["run", str(other), "--out", str(out), "--workers", "1", "--force"])
    assert forced.exit_code == 0, forced.output
    assert not any(p.exists() for p in pngs)  # no stale figure beside the new results
    table = pq.read_table(out / "results.parquet")
    assert set(table.column("study").to_pylist()) == {"tiny-other"}
    assert set(table.column("rep").to_pylist()) == {0}


@pytest.mark.slow
def test_felip_run_writes_under_out_and_plot_draws_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = _study(tmp_path, "felip_tiny.toml", repetitions=1, eps_perm=[1.0])
    assert "workload_dir" not in study.read_text()
    out = tmp_path / "X"
    result = _run(["run", str(study), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "workloads").iterdir()) == [
        "BFI-6.json",
        "BMS-POS_3_000.json",
    ]
    assert not (tmp_path / "results").exists()
    plotted = _run(["plot", str(out / "results.parquet")])
    assert plotted.exit_code == 0, plotted.output
    assert [p.name for p in (out / "plots").iterdir()] == ["mse_avg_alpha-0.1.png"]


def test_listing_felip_cells_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = load_study(EXPERIMENTS / "felip_tiny.toml")
    assert study.study_kind.cells(study)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_plot_draws_setvalued_studies(tmp_path):
    study = _study(
        tmp_path,
        "setvalued_tiny.toml",
        repetitions=1,
        apps=["svim"],
        alpha=[0.5],
        datasets=[{"name": "bms-pos-standin", "n": 1000, "label": "bms-1k"}],
    )
    out = tmp_path / "S"
    result = _run(["run", str(study), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    plotted = _run(["plot", str(out / "results.parquet")])
    assert plotted.exit_code == 0, plotted.output
    names = {p.name.split("_")[0] for p in (out / "plots").glob("*.png")}
    assert names == {"mse", "precision", "f1", "ncr"}


# --------------------------------------------------------------------------- figures

CHAINS = ("L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "L-GRR")


def _chains_table() -> pa.Table:
    """Five chains on one panel, three repetitions with a large spread (a linear t-interval
    would go below 0)."""
    rows = []
    for j, proto in enumerate(CHAINS):
        for eps in (1.0, 2.0, 4.0):
            for factor in (0.05, 1.0, 3.0):
                rows.append(
                    {
                        "study": "five-chains",
                        "dataset": "zipf",
                        "protocol": proto,
                        "eps_perm": eps,
                        "mse_avg": factor * (1 + 0.01 * j) / eps**2,
                        "status": "ok",
                    }
                )
    return pa.Table.from_pylist(rows)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The one matplotlib figure `plot_results` saves for `_chains_table`."""
    from matplotlib.figure import Figure

    figures = []
    save = Figure.savefig

    def keep(self, path, *args, **kwargs):
        figures.append(self)
        return save(self, path, *args, **kwargs)

    out = tmp_path_factory.mktemp("chains")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", keep)
        paths = plot_results(_chains_table(), out, figure_by=(), panel_by=("dataset",))
    assert len(paths) == 1 and paths[0].is_file()
    return figures[0]


def test_single_panel_keeps_title_and_legend_inside(drawn):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(drawn).get_renderer()
    box = drawn.bbox
    title = drawn._suptitle
    assert "()" not in title.get_text()
    for artist in (title, drawn.legends[0]):
        ext = artist.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1
        assert ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1


def test_chains_are_distinguishable(drawn):
    lines = drawn.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == list(CHAINS)
    assert len({ln.get_marker() for ln in lines}) == len(CHAINS)
    assert len({ln.get_linestyle() for ln in lines}) >= 3
    assert len({ln.get_fillstyle() for ln in lines}) == 2


def test_bands_are_computed_in_log_space(drawn):
    values = [0.05, 1.0, 3.0]
    mean, lo, hi = band(values, "t", log=True)
    linear = band(values, "t")
    assert linear[1] < 0 < lo  # the linear interval would leave the log axis
    assert np.isclose(lo * hi, mean**2)  # symmetric around the mean on a log axis
    assert np.isclose(hi - mean, mean * np.expm1((linear[2] - mean) / mean))
    # every band drawn is positive and is not the mean·1e-3 patch
    for poly in drawn.axes[0].collections:
        ys = poly.get_paths()[0].vertices[:, 1]
        assert np.all(ys > 0)
    means = np.array([ln.get_ydata() for ln in drawn.axes[0].get_lines()])
    lows = np.array(
        [np.sort(p.get_paths()[0].vertices[:, 1])[:3] for p in drawn.axes[0].collections]
    )
    assert not np.any(np.isclose(lows[:, :, None], means[:, None, :] * 1e-3))
