"""Every bad input a newcomer tried (issue 22) gets one ``error:`` line on stderr and exit 2.

Paths, sizes, option parsing, an unreachable Dask scheduler, ``serve``'s address and database,
values that used to be accepted silently; and the things around them: SIGTERM stops
``longldp run``'s workers, the spent ε of a capped client stays at its cap, no temporary file is
left behind by a failed archive.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.cli import _common, app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "tiny.toml"
LOSUE = ["L-OSUE", "k=20", "eps_perm=2", "eps_1=0.8"]


def one_error_line(args: list[str], *, contains: str = "") -> str:
    """Run ``longldp args``; check exit 2, nothing on stdout, one ``error:`` line; return it."""
    result = runner.invoke(app, args, prog_name="longldp")
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert contains in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working folder with a sub-folder, a plain file and a binary file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("hi\n")
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 4)
    return tmp_path


@pytest.fixture
def archive(place):
    result = runner.invoke(app, ["simulate-reports", *LOSUE, "--n", "2000", "--out", "s.parquet"])
    assert result.exit_code == 0, result.output
    return place / "s.parquet"


# ------------------------------------------------------------------------ option parsing


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["run", "x.toml", "--workers", "abc"], "longldp run: Invalid value for '--workers'"),
        (["protocols", "--k", "abc"], "'--k'"),
        (["protocols", "--nosuch"], "No such option: --nosuch"),
        (["--workers", "2"], "No such option"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
        (["rappor", "nosuch"], "longldp rappor: No such command"),
        (["rappor", "decode"], "Missing option '--counts'"),
        (["aggregate"], "Missing argument"),
    ],
)
def test_usage_errors_are_one_line(args, contains):
    line = one_error_line(args, contains=contains)
    assert "--help" in line  # says where to look


def test_help_still_works():
    for args in (["--help"], ["run", "--help"], ["rappor", "decode", "--help"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "Usage" in result.stdout, result.output


def test_the_installed_command_prints_one_line():
    """The console script itself (not only the test runner) prints no box."""
    exe = Path(sys.executable).parent / "longldp"
    proc = subprocess.run(
        [str(exe), "protocols", "--k", "abc"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr


# ------------------------------------------------------------------------------ paths


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["run", "adir"], "'adir' is a folder"),
        (["run", "missing.toml"], "does not exist"),
        (["run", "random.bin"], "'random.bin' is not a TOML text file"),
        (["run", str(TINY), "--out", "afile"], "'afile' is a file; give a folder"),
        (["run", str(TINY), "--out", "afile/sub"], "'afile' is a file, not a folder"),
        (["plot", "missing.parquet"], "does not exist"),
        (["plot", "random.bin"], "random.bin"),
        (["plot", "adir", "--out", "afile"], "'afile' is a file"),
        (["demo", "--out", "afile"], "'afile' is a file; give a folder"),
        (["simulate-reports", *LOSUE, "--out", "adir"], "'adir' is a folder"),
        (["simulate-reports", *LOSUE, "--out", "s1.csv"], "must end in .parquet"),
        (["simulate-reports", *LOSUE, "--out", "afile/x.parquet"], "'afile' is a file"),
        (["aggregate", "missing.parquet"], "no such archive"),
        (["aggregate", "adir"], "holds no .parquet"),
        (["aggregate", "random.bin"], "not a readable Parquet file"),
        (["allomfree-gains", "missing.parquet"], "does not exist"),
    ],
)
def test_bad_paths_are_one_line(place, args, contains):
    one_error_line(args, contains=contains)


def test_demo_checks_out_before_running(place):
    """It used to fail with a traceback after the whole demo had run."""
    result = runner.invoke(app, ["demo", "--out", "afile"])
    assert result.exit_code == 2 and "MSE_avg" not in result.stdout


@pytest.mark.parametrize(
    ("out", "contains"),
    [("adir", "'adir' is a folder"), ("x.txt", "must end in .csv or .json")],
)
def test_aggregate_out_is_checked_before_the_work(archive, out, contains):
    one_error_line(["aggregate", str(archive), "--out", out], contains=contains)


def test_aggregate_out_in_a_missing_folder_is_created(archive):
    result = runner.invoke(app, ["aggregate", str(archive), "--out", "new/deeper/x.json"])
    assert result.exit_code == 0, result.output
    assert Path("new/deeper/x.json").is_file()


@pytest.fixture
def rappor_files(place):
    (place / "params.csv").write_text("k,h,m,p,q,f\n16,2,2,0.5,0.75,0.5\n")
    (place / "cands.txt").write_text("a\nb\n")
    np.savetxt(place / "counts.csv", np.full((2, 17), 10), fmt="%d", delimiter=",")
    (place / "empty.csv").write_text("")
    return place


@pytest.mark.parametrize(
    ("extra", "contains"),
    [
        (["--counts", "missing.csv"], "--counts: 'missing.csv' does not exist"),
        (["--counts", "adir"], "--counts: 'adir' is a folder"),
        (["--counts", "empty.csv"], "empty"),
        (["--counts", "counts.csv", "--candidates", "adir"], "--candidates: 'adir' is a folder"),
        (["--counts", "counts.csv", "--out", "adir"], "--out: 'adir' is a folder"),
        (["--counts", "counts.csv", "--limit", "-1"], "'--limit' must be an integer >= 1"),
        (["--counts", "counts.csv", "--plot", "adir"], "--plot: 'adir' is a folder"),
        (["--counts", "counts.csv", "--plot", "x.txt"], "must end in .png or .pdf or .svg"),
        (["--counts", "loop"], "--counts: 'loop' is a loop of symbolic links"),
    ],
)
def test_rappor_decode_paths_and_limit(rappor_files, extra, contains):
    os.symlink("loop", rappor_files / "loop")
    base = ["rappor", "decode", "--params", "params.csv", "--candidates", "cands.txt"]
    one_error_line([*base, *extra], contains=contains)
    assert not (rappor_files / "adir.png").exists()  # it used to write <folder>.png and exit 0


def test_rappor_decode_plots_to_the_format_its_suffix_names(rappor_files):
    base = ["rappor", "decode", "--params", "params.csv", "--candidates", "cands.txt"]
    result = runner.invoke(app, [*base, "--counts", "counts.csv", "--plot", "out/p.svg"])
    assert result.exit_code == 0, result.output
    assert "<svg" in Path("out/p.svg").read_text()[:2000]


def test_figure_suffixes_are_the_plot_formats():
    from longldp.experiments.plot import FORMATS

    assert _common.FIGURE_SUFFIXES == tuple(f".{f}" for f in FORMATS)


# ------------------------------------------------------------------------------ sizes


@pytest.fixture
def eight_gigabytes(monkeypatch):
    """Pretend the machine has 8 GB available, whatever this one has."""
    from longldp.cli import archive as archive_cli

    monkeypatch.setattr(_common, "available_memory", lambda: 8 * 10**9)
    monkeypatch.setattr(archive_cli, "available_memory", lambda: 8 * 10**9)


@pytest.mark.parametrize(
    "extra",
    [["--k", "10000000"], ["--taus", "10000000000"], ["--trials", "100000000000"]],
)
def test_audit_sizes_are_refused_up_front(eight_gigabytes, extra):
    args = ["audit", "L-OSUE", "--eps-perm", "2", "--eps-1", "1", *extra]
    one_error_line(args, contains="of memory, more than the 8 GB available")


def test_simulate_reports_sizes_are_refused_up_front(place, eight_gigabytes):
    one_error_line(["simulate-reports", *LOSUE, "--epochs", "5000000000"], contains="uint32")
    one_error_line(["simulate-reports", *LOSUE, "--n", "100000000000"], contains="free in")
    big = ["L-OSUE", "k=10000000", "eps_perm=2", "eps_1=0.8"]
    line = one_error_line(["simulate-reports", *big, "--n", "1000"], contains="per user")
    assert "lower --chunk-users to at most" in line
    assert not list(place.glob(".tmp-*")) and not Path("reports.parquet").exists()


def test_simulate_reports_within_memory_runs(place):
    big = ["L-OSUE", "k=100000", "eps_perm=2", "eps_1=0.8"]
    result = runner.invoke(app, ["simulate-reports", *big, "--n", "50", "--out", "b.parquet"])
    assert result.exit_code == 0, result.output
    from longldp.archive import read_info

    assert read_info("b.parquet").num_rows == 50


STUDY = """
name = "big"
kind = "standalone"
seed = 1
repetitions = 1
tau = 3
eps_perm = [1.0]
alpha = [0.4]
datasets = [{{name = "zipf", n = {n}, k = {k}}}]
protocols = [{{name = "{proto}"}}]
"""


@pytest.mark.parametrize(
    ("n", "k", "proto"), [(100_000_000, 20, "L-GRR"), (1000, 10_000_000, "L-OSUE")]
)
def test_run_sizes_are_refused_up_front(place, eight_gigabytes, n, k, proto):
    Path("big.toml").write_text(STUDY.format(n=n, k=k, proto=proto))
    one_error_line(["run", "big.toml", "--workers", "1"], contains="of memory")
    assert not Path("results").exists()


# ------------------------------------------------------------------------------ Dask


def test_an_unreachable_scheduler_is_one_line_and_fast(archive):
    for args in (
        ["aggregate", str(archive), "--scheduler", "tcp://127.0.0.1:1"],
        ["run", str(TINY), "--scheduler", "tcp://127.0.0.1:1"],
    ):
        one_error_line(args, contains="no Dask scheduler answers at tcp://127.0.0.1:1")


# ------------------------------------------------------------------------------ serve


def test_serve_refuses_bad_databases_addresses_and_levels(place):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        one_error_line(["serve", "--db", "x.db", "--port", str(port)], contains="already in use")
    free = str(port)
    cases = [
        (["--db", "adir"], "'adir' is a folder"),
        (["--db", "nofolder/x.db"], "'nofolder' does not exist"),
        (["--db", "random.bin"], "file is not a database"),
        (["--db", "postgresql://u:secret@127.0.0.1:1/db"], "127.0.0.1"),
        (["--host", "no-such-host.invalid"], "'--host'"),
        (["--log-level", "shouty"], "'--log-level' must be one of"),
        (["--port", "0"], "'--port' must be in [1, 65535]"),
    ]
    for extra, contains in cases:
        line = one_error_line(["serve", "--db", "ok.db", "--port", free, *extra], contains=contains)
        assert "secret" not in line  # a password in a URL is never shown


# ------------------------------------------------- the option typed, not the library's name


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["simulate-reports", *LOSUE, "--change", "2"], "'--change' must be in [0, 1]; got 2.0"),
        (["plot", "afile", "--format", "xyz"], "'--format' must be one of png, pdf, svg"),
        (["plot", "afile", "--dpi", "2"], "'--dpi' must be an integer in [20, 1200]"),
        (["serve", "--db", "x.db", "--max-batch", "0"], "'--max-batch' must be an integer"),
        (["protocols", "--k", "1"], "'--k' must be an integer >= 2; got 1"),
        (["protocols", "--n", "0"], "'--n' must be an integer >= 1; got 0"),
        (["protocols", "--alpha", "2"], "'--alpha' (= ε1/ε∞) must be in (0, 1)"),
        (["allomfree-tables", "--calibration", "x"], "'--calibration' must be one of"),
    ],
)
def test_errors_name_the_option_typed(place, args, contains):
    """A library check names its parameter (`simulate_reports: 'change'`); the line names the
    option the user typed, and no internal owner (`L-SUE`, `plot:`, `server:`) is blamed."""
    line = one_error_line(args, contains=contains)
    assert line.startswith("error: '--"), line


def test_aggregate_postprocess_is_refused_before_the_work(archive):
    one_error_line(
        ["aggregate", str(archive), "--postprocess", "xyz"],
        contains="'--postprocess' must be one of 'base-pos'",
    )


def test_a_parameter_inside_a_protocol_spec_keeps_its_owner(place):
    """``k=1`` is a word of the protocol spec, not ``--k``: the protocol is named."""
    one_error_line(
        ["simulate-reports", "L-GRR", "k=1", "eps_perm=2", "eps_1=1"],
        contains="L-GRR: 'k' must be an integer >= 2; got 1",
    )


# ---------------------------------------------------------------------- symbolic links


@pytest.fixture
def links(place):
    """``loop`` and ``loop2`` point at each other; ``dangling`` points at nothing."""
    os.symlink("loop2", place / "loop")
    os.symlink("loop", place / "loop2")
    os.symlink("nothing-here", place / "dangling")
    return place


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["run", "loop"], "STUDY: 'loop' is a loop of symbolic links"),
        (["plot", "loop"], "RESULTS: 'loop' is a loop of symbolic links"),
        (["allomfree-gains", "loop"], "RESULTS: 'loop' is a loop of symbolic links"),
        (["aggregate", "loop"], "'loop' is a loop of symbolic links"),
        (["run", str(TINY), "--out", "loop"], "--out: 'loop' is a loop of symbolic links"),
        (["simulate-reports", *LOSUE, "--out", "loop"], "--out: 'loop' is a loop of symbolic"),
        (["run", "dangling"], "'dangling' is a symbolic link to 'nothing-here', which does not"),
        (["plot", "adir", "--out", "dangling"], "'dangling' is a symbolic link to 'nothing-here'"),
        (["aggregate", "dangling"], "'dangling' is a symbolic link to 'nothing-here'"),
        (["run", "nofile.toml"], "STUDY: 'nofile.toml' does not exist"),
    ],
)
def test_symbolic_links_are_told_apart_from_missing_files(links, args, contains):
    one_error_line(args, contains=contains)


def test_an_output_file_behind_a_link_loop_is_refused(links):
    os.symlink("l2.parquet", links / "l1.parquet")
    os.symlink("l1.parquet", links / "l2.parquet")
    one_error_line(
        ["simulate-reports", *LOSUE, "--out", "l1.parquet"],
        contains="--out: 'l1.parquet' is a loop of symbolic links",
    )


# -------------------------------------------------------------- accepted silently before


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (
            ["audit", "L-OSUE", "--eps-perm", "2", "--eps-1", "1", "--claim-eps-1", "-1"],
            "'--claim-eps-1' must be a finite number > 0",
        ),
        (
            ["audit", "L-OSUE", "--eps-perm", "2", "--eps-1", "1", "--claim-eps-perm", "0"],
            "'--claim-eps-perm'",
        ),
        (["audit", "L-OSUE", "--eps-perm", "2", "--eps-1", "1", "--seed", "-1"], "'--seed'"),
        (["simulate-reports", *LOSUE, "--seed", "-1"], "'--seed'"),
        (["demo", "--seed", "-1"], "'--seed'"),
        (["simulate-reports", *LOSUE, "--collection", ""], "'--collection'"),
        (["simulate-reports", *LOSUE, "--collection", "  "], "'--collection'"),
    ],
)
def test_values_accepted_silently_before(place, args, contains):
    one_error_line(args, contains=contains)


@pytest.mark.parametrize("top", ["-1", "0"])
def test_aggregate_top_must_be_positive(archive, top):
    one_error_line(["aggregate", str(archive), "--top", top], contains="'--top'")


def test_a_failed_archive_leaves_no_temporary(tmp_path, monkeypatch):
    from longldp.archive import ArchiveWriter, simulate_reports

    proto = ll.protocol("L-OSUE", k=20, eps_perm=2.0, eps_1=0.8)
    with pytest.raises(RuntimeError), ArchiveWriter(tmp_path / "a.parquet", proto):
        raise RuntimeError("the work failed")

    def refuse(*_args):
        raise OSError("rename refused")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="rename refused"):
        simulate_reports(proto, tmp_path / "b.parquet", n=100, rng=1)
    assert list(tmp_path.iterdir()) == []


def test_a_capped_client_never_shows_more_than_its_cap(tmp_path):
    from longldp.client import BudgetExceededError, DeviceClient

    proto = ll.protocol("L-GRR", k=8, eps_perm=4.0, eps_1=1.0)
    client = DeviceClient(tmp_path / "state", proto, "c", secret=b"s" * 32, max_epsilon=3.0)
    for value in (1, 2, 3):  # three reports of three values: 3·ε1 = 3 < 3·ε∞
        client.report(value, epoch=value)
    assert client.spent_budget.epsilon == 3.0
    with pytest.raises(BudgetExceededError):
        client.report(4, epoch=4)


# ------------------------------------------------------------------------------ SIGTERM

SLOW = """
name = "slow"
kind = "standalone"
seed = 1
repetitions = 4
tau = 40
eps_perm = [1.0, 2.0]
alpha = [0.4]
datasets = [{name = "zipf", n = 200000, k = 50}]
protocols = [{name = "L-OSUE"}, {name = "L-GRR"}]
"""


def _workers(parent: psutil.Process) -> list[psutil.Process]:
    return [c for c in parent.children() if "spawn_main" in " ".join(c.cmdline())]


def test_sigterm_stops_the_workers(tmp_path):
    """SIGTERM to `longldp run --workers 2` ends both workers (they used to keep computing)."""
    (tmp_path / "slow.toml").write_text(SLOW)
    exe = Path(sys.executable).parent / "longldp"
    proc = subprocess.Popen(
        [str(exe), "run", "slow.toml", "--out", "out", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while len(_workers(parent)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    workers = _workers(parent)
    assert len(workers) == 2, "the run did not start two workers"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "interrupted" in out
    _gone, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"workers still running: {[p.pid for p in alive]}"


# ------------------------------------------------------------------ the one NAME=VALUE parser


@pytest.mark.parametrize(
    "command",
    [
        ["privacy", "L-OSUE", "k=20", "eps_perm=2", "eps_1=0.8", "--n", "1000"],
        ["simulate-reports", "L-OSUE", "k=20", "eps_perm=2", "eps_1=0.8", "--n", "10"],
    ],
    ids=["privacy", "simulate-reports"],
)
def test_every_command_parses_name_value_the_same_way(command, tmp_path, monkeypatch):
    """``privacy`` and ``simulate-reports`` take ``eps-perm=`` as ``eps_perm=`` and refuse a name
    given twice in one line (``k=8 k=9`` used to mean k = 9 for one and fail for the other)."""
    monkeypatch.chdir(tmp_path)
    dashed = [w.replace("eps_perm", "eps-perm") for w in command]
    assert runner.invoke(app, dashed, prog_name="longldp").exit_code == 0
    at = command.index("k=20")
    one_error_line([*command[: at + 1], "k=9", *command[at + 1 :]], contains="'k' is given twice")
    one_error_line([*command[:at], "eps-perm=3", *command[at:]], contains="given twice")
    one_error_line([*command[:at], "oops", *command[at:]], contains="NAME=VALUE")


def test_audit_param_takes_the_same_parser_and_refuses_what_has_an_option():
    one_error_line(["audit", "L-GRR", "--param", "k=9"], contains="option of its own (--k)")
    one_error_line(
        ["audit", "L-GRR", "--param", "calibration=paper", "--param", "calibration=exact"],
        contains="given twice",
    )
    parsed = _common.parse_assignments(["eps-perm=2", "flag=true", "x=none", "s=paper", "f=0.5"])
    assert parsed == {"eps_perm": 2, "flag": True, "x": None, "s": "paper", "f": 0.5}
