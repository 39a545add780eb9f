"""Experiments: study files, the grid runner, resume, seeding, the CLI's run and plot."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.cli import app
from longldp.experiments import (
    Cell,
    StudyKind,
    load_study,
    parse_study,
    plot_results,
    register_kind,
    run_study,
    seeding,
    store,
)
from study_helpers import stable

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "tiny.toml"
REQUIRED_COLUMNS = {
    "study",
    "kind",
    "dataset",
    "attribute",
    "k",
    "n",
    "tau",
    "protocol",
    "protocol_name",
    "options",
    "eps_perm",
    "alpha",
    "eps_1",
    "postprocess",
    "engine",
    "rep",
    "status",
    "skip_reason",
    "seed_entropy",
    "spawn_key",
    "data_spawn_key",
    "mse_avg",
    "mse_per_timestamp",
    "runtime_s",
    "longldp_version",
}


def tiny_document() -> dict:
    with TINY.open("rb") as f:
        return tomllib.load(f)


def parts(out: Path) -> dict[str, int]:
    """Part file name -> modification time (ns)."""
    return {p.name: p.stat().st_mtime_ns for p in (out / store.PARTS).glob("*.parquet")}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> pa.Table:
    """The tiny study run once, uninterrupted, in this process."""
    out = tmp_path_factory.mktemp("baseline")
    report = run_study(TINY, out, workers=1, progress=False)
    return pq.read_table(report.path)


def expected_cells() -> list[tuple]:
    """(dataset, protocol label, ε∞, α, rep) of every cell of the tiny study, from its file."""
    doc = tiny_document()
    out = []
    for ds in doc["datasets"]:
        for _ in ds.get("attributes", ["value"]):
            for rep in range(doc["repetitions"]):
                for proto in doc["protocols"]:
                    takes_alpha = (
                        "eps_1" in ll.get_protocol_class(proto["name"]).__dataclass_fields__
                    )
                    for eps in doc["eps_perm"]:
                        for alpha in doc["alpha"] if takes_alpha else [None]:
                            out.append(
                                (ds["name"], proto.get("label", proto["name"]), eps, alpha, rep)
                            )
    return out


# ---------------------------------------------------------------------------------- the CLI


@pytest.mark.slow
def test_cli_run_writes_table_and_plot_writes_pngs(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(TINY), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "results.parquet" in result.output and "eps_perm=1" in result.output
    table = pq.read_table(out / "results.parquet")
    doc = tiny_document()
    cells = expected_cells()
    assert table.num_rows == len(cells) * len(doc["postprocess"])
    assert REQUIRED_COLUMNS <= set(table.column_names)
    assert table.schema.field("mse_per_timestamp").type == pa.list_(pa.float64())
    ok = [r for r in table.to_pylist() if r["status"] == "ok"]
    assert all(len(r["mse_per_timestamp"]) == r["tau"] == doc["tau"] for r in ok)
    assert all(np.isclose(r["mse_avg"], np.mean(r["mse_per_timestamp"])) for r in ok)
    assert {r["postprocess"] for r in ok} == set(doc["postprocess"])
    assert json.loads(table.schema.metadata[b"longldp"])["study"] == "tiny"

    plots = tmp_path / "plots"
    result = runner.invoke(app, ["plot", str(out / "results.parquet"), "--out", str(plots)])
    assert result.exit_code == 0, result.output
    pngs = sorted(plots.glob("*.png"))
    assert len(pngs) == len(doc["alpha"]) * len(doc["postprocess"])
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert all(str(p) in result.output.replace("\n", "") for p in pngs)


def test_cli_reports_bad_study(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace("repetitions = 2", "repetitions = 0"))
    result = CliRunner().invoke(app, ["run", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "repetitions" in result.output


# ------------------------------------------------------------------- grid and bookkeeping


def test_rows_cover_the_grid_in_order(baseline):
    pp = tiny_document()["postprocess"]
    got = [
        (r["dataset"], r["protocol"], r["eps_perm"], r["alpha"], r["rep"])
        for r in baseline.to_pylist()
    ]
    labels = {"zipf": "zipf", "adult": "adult-3k"}
    want = [(labels[d], p, e, a, r) for d, p, e, a, r in expected_cells() for _ in pp]
    assert got == want
    assert baseline.column("postprocess").to_pylist() == pp * (len(want) // len(pp))


def test_unreachable_alpha_is_recorded_as_skipped(baseline):
    rows = baseline.to_pylist()
    for r in rows:
        if r["alpha"] is None:
            continue
        try:
            ll.protocol(
                r["protocol_name"],
                k=r["k"],
                eps_perm=r["eps_perm"],
                eps_1=r["alpha"] * r["eps_perm"],
                **json.loads(r["options"]),
            )
            reachable = True
        except ValueError:
            reachable = False
        assert (r["status"] == "ok") == reachable
        if not reachable:
            assert r["mse_avg"] is None and r["mse_per_timestamp"] is None
            assert "eps_1" in r["skip_reason"] and r["protocol_name"] in r["skip_reason"]
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert skipped, "the tiny study should hold an unreachable α (L-OUE, α = 0.9)"
    assert {r["protocol_name"] for r in skipped} == {"L-OUE"}


def test_protocol_without_eps_1_runs_once_per_eps(baseline):
    rows = [r for r in baseline.to_pylist() if r["protocol_name"] == "dBitFlipPM"]
    assert rows and all(r["alpha"] is None for r in rows)
    assert all(r["status"] == "ok" and r["eps_1"] > 0 for r in rows)


def test_common_random_numbers_and_own_streams(baseline):
    rows = baseline.to_pylist()
    by_rep: dict[tuple, set] = {}
    for r in rows:
        by_rep.setdefault((r["dataset"], r["rep"]), set()).add(tuple(r["data_spawn_key"]))
    # one permutation stream per (dataset, attribute, rep), shared by every protocol, ε∞, α
    assert all(len(keys) == 1 for keys in by_rep.values())
    assert len({next(iter(k)) for k in by_rep.values()}) == len(by_rep)
    # each cell its own stream; the rows of one cell (its post-processings) share it
    cells = {r["cell_id"]: tuple(r["spawn_key"]) for r in rows}
    assert len(set(cells.values())) == len(cells)
    assert {r["seed_entropy"] for r in rows} == {str(tiny_document()["seed"])}


def test_stream_is_a_nested_spawn():
    root = np.random.SeedSequence(123)
    child = root.spawn(3)[2].spawn(4)[1].spawn(2)[0]
    np.testing.assert_array_equal(
        seeding.stream(123, (2, 1, 0)).generate_state(4), child.generate_state(4)
    )
    with pytest.raises(ValueError, match="spawn_key"):
        seeding.stream(1, (0, -1))


def test_rows_replay_from_their_seed_columns(baseline):
    """A row is reproduced from its own columns (seeding scheme of experiments.seeding), and
    every post-processing of a cell is applied to the same raw estimates."""
    from longldp.data import to_longitudinal, zipf
    from longldp.simulate import simulate

    rows = [
        r
        for r in baseline.to_pylist()
        if r["dataset"] == "zipf" and r["status"] == "ok" and r["protocol_name"] == "L-GRR"
    ]
    entropy = int(rows[0]["seed_entropy"])
    for cell_id in list(dict.fromkeys(r["cell_id"] for r in rows))[:3]:
        mine = {r["postprocess"]: r for r in rows if r["cell_id"] == cell_id}
        r = mine["none"]
        codes = zipf(r["n"], r["k"], seeding.generator(entropy, (seeding.DATA, 0)))
        values = to_longitudinal(codes, r["tau"], seeding.generator(entropy, r["data_spawn_key"]))
        proto = ll.protocol(
            "L-GRR", k=r["k"], eps_perm=r["eps_perm"], eps_1=r["eps_1"], **json.loads(r["options"])
        )
        sim = simulate(proto, values, seeding.generator(entropy, r["spawn_key"]), r["engine"])
        assert sim.mse_avg == pytest.approx(r["mse_avg"], rel=1e-12)
        fixed = np.stack([ll.postprocess.apply("algorithm-1", row) for row in sim.estimates])
        assert np.mean((fixed - sim.truth) ** 2) == pytest.approx(
            mine["algorithm-1"]["mse_avg"], rel=1e-12
        )


def test_cells_do_not_depend_on_later_grid_entries(tmp_path, baseline):
    """Dropping the last protocol keeps every other cell's id, seeds and rows."""
    doc = tiny_document()
    doc["protocols"] = doc["protocols"][:-1]
    dropped = tiny_document()["protocols"][-1].get(
        "label", tiny_document()["protocols"][-1]["name"]
    )
    report = run_study(parse_study(doc), tmp_path, workers=1, progress=False)
    small = stable(pq.read_table(report.path))
    full = stable(baseline)
    mask = [p != dropped for p in full.column("protocol").to_pylist()]
    assert small.equals(full.filter(pa.array(mask)))


# --------------------------------------------------------------------- resume and workers


def test_resume_skips_finished_parts(tmp_path, baseline):
    out = tmp_path / "out"
    run_study(TINY, out, workers=1, progress=False)
    before = parts(out)
    removed = sorted(before)[::7]
    for name in removed:
        (out / store.PARTS / name).unlink()
    report = run_study(TINY, out, workers=1, progress=False)
    after = parts(out)
    assert report.computed == len(removed) and report.resumed == len(before) - len(removed)
    assert set(after) == set(before)
    assert all(after[n] == before[n] for n in before if n not in removed)
    assert stable(pq.read_table(report.path)).equals(stable(baseline))


def test_interrupted_run_leaves_whole_parts_and_resumes(tmp_path, baseline):
    out = tmp_path / "out"
    seen = []

    def stop_after_five(cell: Cell) -> None:
        seen.append(cell.cell_id)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_study(TINY, out, workers=1, progress=False, on_cell_done=stop_after_five)
    folder = out / store.PARTS
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{c}.parquet" for c in seen)
    assert not (out / store.RESULTS).exists()
    for p in folder.iterdir():
        pq.read_table(p)  # every part is whole
    kept = parts(out)
    report = run_study(TINY, out, workers=1, progress=False)
    assert report.resumed == 5
    assert all(parts(out)[n] == t for n, t in kept.items())
    assert stable(pq.read_table(report.path)).equals(stable(baseline))


def test_failed_write_leaves_no_part(tmp_path, monkeypatch):
    def broken(table, where, **kwargs):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(store.pq, "write_table", broken)
    schema = store.schema_for([])
    with pytest.raises(OSError, match="disk full"):
        store.write_part(tmp_path, "abc", [{"study": "s"}], schema)
    assert list((tmp_path / store.PARTS).iterdir()) == []


def test_stale_temporaries_are_removed(tmp_path):
    folder = tmp_path / store.PARTS
    folder.mkdir()
    (folder / ".tmp-abc-1-deadbeef").write_bytes(b"half")
    assert store.clean_temporaries(tmp_path) == 1
    assert list(folder.iterdir()) == []


@pytest.mark.slow
def test_results_do_not_depend_on_workers(tmp_path, baseline):
    report = run_study(TINY, tmp_path, workers=2, progress=False)
    assert report.computed == report.cells
    assert stable(pq.read_table(report.path)).equals(stable(baseline))


def test_dask_executor_without_distributed_is_a_clear_error(tmp_path, monkeypatch):
    # Dask is installed wherever the suite runs (the dask extra); a None entry in sys.modules
    # makes `import distributed` raise ImportError, as on a machine without it.
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(RuntimeError, match="needs the 'distributed' package"):
        run_study(TINY, tmp_path, scheduler="tcp://127.0.0.1:1", progress=False)


# ---------------------------------------------------------------------------- validation


def _with(**changes) -> dict:
    doc = tiny_document()
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


def _dataset(**entry) -> dict:
    return _with(datasets=[entry])


def _protocol(**entry) -> dict:
    return _with(protocols=[entry])


BAD_STUDIES = {
    "unknown top-level key": (_with(epsilon=[1.0]), r"unknown key 'epsilon'; allowed keys: name"),
    "missing seed": (_with(seed=None), r"missing required key 'seed'"),
    "negative seed": (_with(seed=-3), r"key 'seed' must be an integer >= 0"),
    "zero repetitions": (_with(repetitions=0), r"key 'repetitions' must be an integer >= 1"),
    "negative repetitions": (_with(repetitions=-2), r"'repetitions' must be an integer >= 1"),
    "unknown kind": (_with(kind="no-such-kind"), r"key 'kind' must be one of 'standalone'"),
    "empty eps grid": (_with(eps_perm=[]), r"key 'eps_perm' must be a non-empty list"),
    "negative eps": (_with(eps_perm=[-1.0]), r"'eps_perm' must be a non-empty list"),
    "empty alpha grid": (_with(alpha=[]), r"key 'alpha' must be a non-empty list"),
    "alpha of 1": (_with(alpha=[0.5, 1.0]), r"'alpha' must be .* in \(0, 1\)"),
    "repeated alpha": (_with(alpha=[0.5, 0.5]), r"'alpha' must be a non-empty list of distinct"),
    "unknown engine": (_with(engine="fast"), r"key 'engine' must be one of 'per-user'"),
    "unknown post-processing": (
        _with(postprocess=["norm-foo"]),
        r"'postprocess' must be .* from 'none', 'base-pos'",
    ),
    "metrics without mse_avg": (_with(metrics=["max_spent_epsilon"]), r"includes 'mse_avg'"),
    "empty datasets": (_with(datasets=[]), r"key 'datasets' must be a non-empty list of tables"),
    "unknown dataset": (
        _dataset(name="adlt", attributes=["age"]),
        r"'name' must be one of 'adult'",
    ),
    "set-valued dataset": (_dataset(name="movielens", attributes=["items"]), r"set-valued"),
    "unknown attribute": (
        _dataset(name="adult", attributes=["agee"]),
        r"'attributes' must be a non-empty list of distinct strings from 'age'",
    ),
    "no attributes": (_dataset(name="adult"), r"missing required key 'attributes'"),
    "too many rows": (_dataset(name="bfi", attributes=["E3"], n=10**6), r"'n' must be .* 2436"),
    "synthetic without k": (_dataset(name="zipf", n=100), r"missing required key 'k'"),
    "synthetic unknown key": (_dataset(name="zipf", n=100, k=5, mean=2.0), r"unknown key 'mean'"),
    "no tau": (
        _with(tau=None, datasets=[{"name": "zipf", "n": 100, "k": 5}]),
        r"missing key 'tau'",
    ),
    "empty protocols": (_with(protocols=[]), r"key 'protocols' must be a non-empty list"),
    "unknown protocol": (_protocol(name="L-FOO"), r"key 'name' must be one of 'L-GRR'"),
    "one-shot protocol": (_protocol(name="GRR"), r"a longitudinal protocol"),
    "unknown protocol option": (
        _protocol(name="L-GRR", calib="paper"),
        r"unknown key 'calib'; allowed keys: name, label, calibration",
    ),
    "grid parameter in a protocol": (
        _protocol(name="L-GRR", eps_perm=1.0),
        r"come from the grid",
    ),
    "bad option value": (_protocol(name="L-GRR", calibration="papre"), r"bad options for L-GRR"),
    "duplicate labels": (
        _with(protocols=[{"name": "L-GRR"}, {"name": "L-GRR", "calibration": "paper"}]),
        r"'protocols' must be entries with distinct labels",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_STUDIES))
def test_bad_study_raises_naming_the_key(case):
    doc, message = BAD_STUDIES[case]
    with pytest.raises(ValueError, match=message):
        parse_study(doc)


def test_load_study_reports_file_problems(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_study(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    with pytest.raises(ValueError, match=r"broken\.toml: not valid TOML"):
        load_study(broken)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments").glob("*.toml")), ids=lambda p: p.name
)
def test_shipped_studies_are_valid(path):
    study = load_study(path)
    assert study.study_kind.cells(study)


# ------------------------------------------------------------------------ pluggable kinds


def _square_cell(cell: Cell) -> list[dict]:
    x = cell.params["x"]
    rng = seeding.generator(cell.entropy, cell.spawn_key)
    return [{"x": x, "y": x * x + rng.normal()}]


def _square_parse(values: dict, where: str) -> tuple[float, ...]:
    return values["xs"]


def _square_cells(study) -> list[Cell]:
    return [
        Cell("square", study.seed, (seeding.CELL, i, r), {"x": x}, order=i * study.repetitions + r)
        for i, x in enumerate(study.spec)
        for r in range(study.repetitions)
    ]


def test_a_new_kind_is_one_small_registration(tmp_path):
    from longldp.experiments._schema import Key, number_list

    register_kind(
        StudyKind(
            name="square",
            keys=(Key("xs", number_list(), required=True),),
            parse=_square_parse,
            cells=_square_cells,
            run_cell=_square_cell,
            columns=(pa.field("x", pa.float64()), pa.field("y", pa.float64())),
            summary_by=(),
            pivot="x",
            metric="y",
        )
    )
    study = parse_study({"name": "sq", "kind": "square", "seed": 1, "repetitions": 2, "xs": [1, 2]})
    report = run_study(study, tmp_path, workers=1, progress=False)
    table = pq.read_table(report.path)
    assert table.column("x").to_pylist() == [1.0, 1.0, 2.0, 2.0]
    assert set(table.column("kind").to_pylist()) == {"square"}
    with pytest.raises(ValueError, match="unknown key 'eps_perm'"):
        parse_study(
            {
                "name": "sq",
                "kind": "square",
                "seed": 1,
                "repetitions": 1,
                "xs": [1],
                "eps_perm": [1],
            }
        )


@pytest.mark.slow
def test_plot_draws_protocols_without_alpha_in_every_figure(tmp_path, baseline):
    paths = plot_results(baseline, tmp_path, band_kind="percentile")
    assert len(paths) == 4 and all(p.stat().st_size > 0 for p in paths)
    with pytest.raises(ValueError, match="band_kind"):
        plot_results(baseline, tmp_path, band_kind="sd")


def test_kinds_do_not_import_the_config():
    """config -> kinds only: no kind (nor the registry or the shared base) imports config."""
    import ast

    import longldp.experiments.kinds as kinds_pkg

    for path in Path(kinds_pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names] + [str(node.module)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("longldp.experiments.config") for n in names), path
