"""The ``felip`` study kind: the tiny study through the CLI, workloads, workers, config errors."""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from longldp.apps.felip.queries import Workload, generate_workload
from longldp.experiments import load_study, parse_study, run_study
from longldp.experiments.kinds import felip as fk
from longldp.experiments.reports import felip as report
from study_helpers import run_study_cli, stable

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "felip_tiny.toml"
FULL = ROOT / "experiments" / "felip.toml"


def tiny_document(workloads: Path, **changes) -> dict:
    with TINY.open("rb") as f:
        doc = tomllib.load(f)
    doc["workload_dir"] = str(workloads)
    doc.update(changes)
    return doc


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[Path, pa.Table]:
    out = tmp_path_factory.mktemp("felip-tiny")
    study = out / "study.toml"
    text = TINY.read_text() + f'\nworkload_dir = "{out / "workloads"}"\n'
    study.write_text(text)
    return out, run_study_cli(study, out / "run", "OLOLOHA (paper)")


@pytest.mark.slow
def test_tiny_rows_and_columns(tiny_run):
    _, table = tiny_run
    expected = {f.name for f in fk.COLUMNS} | {"study", "kind", "status", "spawn_key"}
    assert expected <= set(table.column_names)
    # 2 datasets × 2 repetitions × 3 oracles × 2 ε∞ (α has one value; OUE has none)
    assert table.num_rows == 2 * 2 * 3 * 2
    rows = table.to_pylist()
    assert {r["kind"] for r in rows} == {"felip"}
    assert all(r["status"] == "ok" for r in rows)
    by_ds = {r["dataset"]: r for r in rows}
    assert by_ds["BFI-6"]["tau"] == 2 and by_ds["BFI-6"]["n"] == 600
    assert by_ds["BMS-POS (3,000)"]["tau"] == 3 and by_ds["BMS-POS (3,000)"]["d"] == 6
    for r in rows:
        assert len(r["mse_per_timestamp"]) == r["tau"]
        assert math.isclose(r["mse_avg"], float(np.mean(r["mse_per_timestamp"])), rel_tol=1e-12)
        assert r["m"] == r["d"] + r["d"] * (r["d"] - 1) // 2
        assert len(r["g1"]) == len(r["g2"]) == r["d"]
        assert r["lam"] == 3 and r["n_queries"] == 10
        if r["oracle"] == "OUE (one-shot, ε∞ per timestamp)":
            assert r["alpha"] is None and r["eps_1"] is None and not r["longitudinal"]
        else:
            assert r["alpha"] == 0.1 and math.isclose(r["eps_1"], 0.1 * r["eps_perm"])
    ololoha = [r for r in rows if r["oracle_name"] == "OLOLOHA"]
    assert ololoha and all(r["calibration"] == "paper" and r["hash_g"] for r in ololoha)


@pytest.mark.slow
def test_workload_saved_with_hash_in_rows(tiny_run):
    out, table = tiny_run
    for r in table.to_pylist():
        path = out / "workloads" / r["workload_file"]
        assert path.is_file()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == r["workload_sha256"]
        w = Workload.load(path)
        assert len(w.queries) == 10 and w.lam == 3 and w.dataset == r["dataset"]


@pytest.mark.slow
def test_workload_reused_on_resume(tmp_path):
    workloads = tmp_path / "workloads"
    doc = tiny_document(workloads, repetitions=1, eps_perm=[1.0])
    doc["datasets"] = doc["datasets"][:1]
    doc["oracles"] = doc["oracles"][1:2]
    study = parse_study(doc)
    first = run_study(study, tmp_path / "run", workers=1, progress=False)
    path = workloads / "BFI-6.json"
    saved = Workload.load(path)
    again = run_study(parse_study(doc), tmp_path / "run", workers=1, progress=False)
    assert again.computed == 0 and again.resumed == first.cells
    assert Workload.load(path).to_json() == saved.to_json()
    # a different (valid) saved workload is used as it is, not generated again
    table = fk._table(json.dumps(study.spec.datasets[0].as_json(), sort_keys=True))
    other = generate_workload(table, lam=3, n_queries=10, seed=99, dataset="BFI-6")
    other.save(path)
    third = run_study(parse_study(doc), tmp_path / "run", workers=1, progress=False)
    assert third.computed == first.cells
    rows = pq.read_table(third.path).to_pylist()
    assert {r["workload_sha256"] for r in rows} == {hashlib.sha256(path.read_bytes()).hexdigest()}
    # a saved workload that does not fit the study is an error naming the key
    doc_bad = tiny_document(workloads, repetitions=1, eps_perm=[1.0], n_queries=7)
    doc_bad["datasets"] = doc["datasets"]
    with pytest.raises(ValueError, match="workload_dir"):
        run_study(parse_study(doc_bad), tmp_path / "bad", workers=1, progress=False)


@pytest.mark.slow
def test_worker_independence(tmp_path):
    doc = tiny_document(tmp_path / "workloads", repetitions=1)
    doc["datasets"] = doc["datasets"][:1]
    one = run_study(parse_study(doc), tmp_path / "one", workers=1, progress=False)
    two = run_study(parse_study(doc), tmp_path / "two", workers=2, progress=False)
    assert stable(pq.read_table(one.path)).equals(stable(pq.read_table(two.path)))


def test_full_study_parses():
    study = load_study(FULL)
    spec = study.spec
    assert study.kind == "felip"
    assert [d.tau for d in spec.datasets] == [260, 15, 20, 15]
    assert spec.eps_perm == (0.1, 0.5, 1.0, 1.5, 2.0) and spec.alpha == (0.1,)
    assert spec.lam == 3 and spec.n_queries == 100
    labels = [o.label for o in spec.oracles]
    assert "OLOLOHA (paper)" in labels and "OLOLOHA (exact)" in labels and "L-OSUE" in labels
    cal = {o.label: o.calibration for o in spec.oracles}
    assert cal["OLOLOHA (paper)"] == "paper" and cal["OLOLOHA (exact)"] == "exact"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"eps_perm": []}, "eps_perm"),
        ({"alpha": [1.5]}, "alpha"),
        ({"engine": "fast"}, "engine"),
        ({"calibration": "rough"}, "calibration"),
        ({"lam": 0}, "lam"),
        ({"n_queries": "many"}, "n_queries"),
        ({"bogus": 1}, "bogus"),
        ({"datasets": [{"name": "mnist"}]}, "name"),
        ({"datasets": [{"name": "bfi", "attributes": ["A1", "Z9"]}]}, "attributes"),
        ({"datasets": [{"name": "bfi", "rows": 0}]}, "rows"),
        ({"datasets": [{"name": "bfi"}, {"name": "bfi"}]}, "datasets"),
        ({"oracles": [{"oracle": "NOPE"}]}, "oracle"),
        ({"oracles": [{"oracle": 5}]}, "oracle"),
        ({"oracles": [{"oracle": "OUE", "calibration": "x"}]}, "calibration"),
        ({"oracles": [{"oracle": "OUE", "eps": 1.0}]}, "eps"),
        ({"oracles": [{"oracle": "OUE"}, {"oracle": "OUE"}]}, "oracles"),
        ({"oracles": []}, "oracles"),
    ],
)
def test_config_errors_name_the_key(tmp_path, change, key):
    doc = tiny_document(tmp_path / "w", **change)
    with pytest.raises(ValueError, match=f"'{key}'"):
        parse_study(doc)


def test_lambda_larger_than_d_names_lam(tmp_path):
    doc = tiny_document(tmp_path / "w", lam=7)
    doc["datasets"] = doc["datasets"][:1]
    with pytest.raises(ValueError, match="'lam'"):
        run_study(parse_study(doc), tmp_path / "run", workers=1, progress=False)


@pytest.mark.slow
def test_summary_and_gap_tables(tiny_run, tmp_path):
    _, table = tiny_run
    text = report.summary_markdown(table)
    assert "| BFI-6 | L-OSUE | 0.1 |" in text and "ε∞ = 2" in text
    gaps = report.gap_rows(table, "OLOLOHA (paper)", "L-OSUE")
    assert len(gaps) == 2 * 2 and all(g["reps"] == 2 for g in gaps)
    paths = report.plot_study(table, tmp_path / "plots")
    assert all(p.suffix == ".png" and p.is_file() for p in paths) and len(paths) == 3
