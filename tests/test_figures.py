"""Figures a paper can use: file formats and resolution, ratio panels that separate curves
lying on each other, axis labels in words, the demo's markers, the dashboard's chart, and
help text without ``<bool>`` after flags."""

from __future__ import annotations

import re
import struct
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from longldp.cli import app
from longldp.experiments.plot import check_format, plot_results
from real_parts import CHROMIUM

CHAINS = ("L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "BiLOLOHA", "OLOLOHA", "L-GRR")
#: MSE of chain j at ε∞: (1 + 0.01·j)/ε∞² for the six close chains, 20× that for L-GRR.
FACTOR = {p: (1 + 0.01 * j) for j, p in enumerate(CHAINS[:-1])} | {"L-GRR": 20.0}


def chains_table() -> pa.Table:
    rows = [
        {
            "study": "chains",
            "kind": "standalone",
            "dataset": "zipf",
            "attribute": "value",
            "alpha": 0.4,
            "postprocess": "none",
            "protocol": proto,
            "eps_perm": eps,
            "rep": rep,
            "mse_avg": FACTOR[proto] / eps**2 * (1 + 0.001 * rep),
            "status": "ok",
        }
        for proto in CHAINS
        for eps in (0.5, 1.0, 2.0, 4.0)
        for rep in range(3)
    ]
    return pa.Table.from_pylist(rows)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The figure `plot_results` saves for `chains_table` (kept by patching savefig)."""
    from matplotlib.figure import Figure

    figures = []
    save = Figure.savefig

    def keep(self, path, *args, **kwargs):
        figures.append(self)
        return save(self, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", keep)
        plot_results(chains_table(), tmp_path_factory.mktemp("chains"))
    (fig,) = figures
    return fig


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "magic"), [("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<")])
def test_formats(tmp_path, fmt, magic):
    (path,) = plot_results(chains_table(), tmp_path, fmt=fmt)
    assert path.suffix == f".{fmt}" and path.read_bytes().startswith(magic)
    if fmt == "svg":
        assert b"<svg" in path.read_bytes()[:2000]


@pytest.mark.slow
def test_dpi_scales_the_png(tmp_path):
    (low,) = plot_results(chains_table(), tmp_path / "a", dpi=50)
    (high,) = plot_results(chains_table(), tmp_path / "b", dpi=150)
    (w1, h1), (w3, h3) = png_size(low), png_size(high)
    assert abs(w3 / w1 - 3) < 0.05 and abs(h3 / h1 - 3) < 0.05


@pytest.mark.parametrize(
    ("fmt", "dpi", "word"), [("jpg", 100, "format"), ("png", 0, "dpi"), ("pdf", 5000, "dpi")]
)
def test_bad_format_or_dpi_is_one_error_line(tmp_path, fmt, dpi, word):
    with pytest.raises(ValueError, match=f"'{word}'"):
        check_format(fmt, dpi)
    results = tmp_path / "results.parquet"
    pq.write_table(chains_table(), results)
    res = CliRunner().invoke(app, ["plot", str(results), "--format", fmt, "--dpi", str(dpi)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0]
    assert not (tmp_path / "plots").exists()  # refused before drawing anything


def test_cli_writes_the_chosen_format(tmp_path):
    results = tmp_path / "results.parquet"
    pq.write_table(chains_table(), results)
    res = CliRunner().invoke(app, ["plot", str(results), "--format", "svg", "--dpi", "200"])
    assert res.exit_code == 0, res.output
    assert [p.suffix for p in (tmp_path / "plots").iterdir()] == [".svg"]


def test_ratio_panel_separates_curves_that_lie_on_each_other(drawn):
    main, ratio = drawn.axes[0], drawn.axes[1]
    assert [ln.get_label() for ln in main.get_lines()] == list(CHAINS)
    got = {ln.get_label(): np.asarray(ln.get_ydata()) for ln in ratio.get_lines()}
    for proto in CHAINS:  # each chain over the best (L-SUE) at every ε∞
        np.testing.assert_allclose(got[proto], FACTOR[proto], rtol=1e-9)
    low, high = ratio.get_ylim()
    # zoomed on the six chains 1.00-1.05 (1% apart: 20% of the axis each); L-GRR is named
    assert low < 1 and 1.05 < high < 1.1 and ratio.get_yscale() == "linear"
    texts = [t.get_text() for t in ratio.texts]
    assert any("L-GRR" in t for t in texts)
    assert ratio.get_xlabel() and not main.get_xlabel()  # the x label sits under the ratios


def test_axis_labels_are_words(drawn):
    labels = [ax.get_xlabel() for ax in drawn.axes] + [ax.get_ylabel() for ax in drawn.axes]
    text = " ".join([*labels, drawn._suptitle.get_text()])
    for code in ("MSE_avg", "mse_avg", "eps_perm", "alpha ="):
        assert code not in text
    assert "mean squared error, averaged over time" in text and "privacy budget ε∞" in text


def test_a_title_wraps_only_between_phrases(tmp_path):
    """Two panels (the demo's two attributes) leave room for about 124 characters: the title
    breaks after "; " or ", " only, never inside "privacy budget ε∞ (of the memoized answer)"."""
    from matplotlib.figure import Figure

    two = pa.concat_tables(
        [chains_table(), chains_table().set_column(3, "attribute", pa.array(["other"] * 84))]
    )
    titles = []
    save = Figure.savefig

    def keep(self, path, *args, **kwargs):
        titles.append(self._suptitle.get_text())
        return save(self, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", keep)
        plot_results(two, tmp_path)
    (title,) = titles
    lines = title.split("\n")
    assert len(lines) >= 2 and all(len(line) <= 124 for line in lines), lines
    assert all(line.endswith((";", ",")) for line in lines[:-1]), lines
    assert "privacy budget ε∞ (of the memoized answer)" in " ".join(lines)


def test_wrap_phrases():
    from longldp.experiments.plot import wrap_phrases

    text = "s: y vs x (a = 1, b = 2); mean over 3 repetitions"
    assert wrap_phrases(text, 100) == text
    assert wrap_phrases(text, 20) == "s: y vs x (a = 1,\nb = 2);\nmean over 3 repetitions"


def test_make_demo_writes_svg_beside_png(tmp_path):
    """The plot lines of the Makefile's demo recipe, run on a small results table."""
    import shlex
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    recipe = root.joinpath("Makefile").read_text().split("\ndemo:")[1].split("\n\n")[0]
    plots = [line.strip() for line in recipe.splitlines() if "longldp plot" in line]
    assert len(plots) == 2
    (tmp_path / "demo-output").mkdir()
    pq.write_table(chains_table(), tmp_path / "demo-output" / "results.parquet")
    for line in plots:
        words = shlex.split(line.replace("$(BIN)/", ""))
        res = subprocess.run(
            [sys.executable, "-m", *words], cwd=tmp_path, capture_output=True, text=True
        )
        assert res.returncode == 0, res.stderr
    made = sorted(p.name for p in (tmp_path / "demo-output").iterdir() if p.suffix != ".parquet")
    stems = {p.rsplit(".", 1)[0] for p in made if p.endswith((".png", ".svg"))}
    assert stems and all(f"{s}.png" in made and f"{s}.svg" in made for s in stems), made


def test_demo_plot_has_a_marker_per_protocol(tmp_path):
    from matplotlib.figure import Figure

    from longldp.experiments.demo import PROTOCOLS, DemoRow, plot_demo

    rows = [
        DemoRow(label, eps, 0.4 * eps, (1 + 0.01 * j) / eps**2, 1 / eps**2, 0.0)
        for j, (label, _, _) in enumerate(PROTOCOLS)
        for eps in (0.5, 1.0, 2.0, 4.0)
    ]
    figures = []
    save = Figure.savefig
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            Figure, "savefig", lambda self, *a, **k: figures.append(self) or save(self, *a, **k)
        )
        assert plot_demo(rows, tmp_path / "demo.png").is_file()
    main = figures[0].axes[0]
    lines = main.get_lines()
    assert len(lines) == len(PROTOCOLS)
    assert len({ln.get_marker() for ln in lines}) == len(PROTOCOLS)
    assert "MSE_avg" not in main.get_ylabel()


def test_help_shows_no_bool_after_flags():
    runner = CliRunner()
    for args in (["plot", "--help"], ["run", "--help"], ["--help"]):
        res = runner.invoke(app, args, env={"COLUMNS": "140"})
        assert res.exit_code == 0 and "<bool>" not in res.output
        assert "--help" in res.output
    res = runner.invoke(app, ["plot", "--help"], env={"COLUMNS": "140"})
    assert "<int>" in res.output and "--ratios" in res.output  # value options keep their type


# ---------------------------------------------------------------------- dashboard
def dashboard(n_epochs: int) -> str:
    from longldp.server.dashboard import render_dashboard

    rng = np.random.default_rng(0)
    base = np.exp(-np.arange(20) / 4)
    base /= base.sum()
    rows = []
    for e in range(n_epochs):
        est = base + rng.normal(0, 0.01, 20)
        se = np.full(20, 0.01)
        rows.append(
            {
                "epoch": 100 + e,
                "n": 5000,
                "estimate": est.tolist(),
                "se": se.tolist(),
                "lower": (est - 1.96 * se).tolist(),
                "upper": (est + 1.96 * se).tolist(),
            }
        )
    info = {
        "name": "demo",
        "description": "",
        "protocol": {"name": "L-GRR", "params": {"k": 20}},
        "privacy": {"words": "ε∞ = 2"},
    }
    return render_dashboard(info, rows, None)


def test_dashboard_words():
    one, many = dashboard(1), dashboard(13)
    assert re.search(r'"n-epochs">1</span> epoch\.', one)
    assert re.search(r'"n-epochs">13</span> epochs\.', many)
    words = " ".join(many.split())
    assert "the 6 values with the largest mean estimate over all epochs" in words
    assert "estimated frequency (share of reports)" in words


@pytest.mark.browser
def test_dashboard_ticks_are_round_in_chromium(tmp_path):
    page = tmp_path / "dash.html"
    page.write_text(dashboard(13), encoding="utf-8")
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    y = [float(v) for v in re.findall(r'class="ytick"[^>]*>([^<]+)<', dom)]
    x = [int(v) for v in re.findall(r'class="xtick"[^>]*>([^<]+)<', dom)]
    assert len(y) >= 4 and len(x) >= 4
    step = np.diff(y)
    assert np.allclose(step, step[0])  # evenly spaced
    mantissa = step[0] / 10 ** np.floor(np.log10(step[0]))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9  # 1, 2 or 5 × 10^n
    assert all(abs(v / step[0] - round(v / step[0])) < 1e-9 for v in y)  # multiples of it
    assert np.all(np.diff(x) == x[1] - x[0]) and x[0] % (x[1] - x[0]) == 0
