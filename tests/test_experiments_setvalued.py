"""The ``setvalued`` study kind: SVIM, SVSM and LDPMiner studies through the runner."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from longldp.apps.setvalued.mining import mine, setvalued_truth
from longldp.cli import app
from longldp.data import load as load_data
from longldp.data import table_to_itemsets, to_longitudinal
from longldp.experiments import load_study, parse_study, run_study, seeding
from longldp.experiments.kinds import setvalued as sk
from study_helpers import run_study_cli, stable

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "setvalued_tiny.toml"
STUDIES = ("svim_seed000", "svim_svsm_seed002", "setvalued_oneshot")


@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory) -> pa.Table:
    return run_study_cli(TINY, tmp_path_factory.mktemp("tiny"), "SVSM")


@pytest.mark.slow
def test_tiny_study_rows_and_columns(tiny_table):
    expected = {f.name for f in sk.COLUMNS} | {"study", "kind", "status", "spawn_key"}
    assert expected <= set(tiny_table.column_names)
    # cells: 2 datasets × 2 reps × 3 apps × (2 chains × 2 ε∞ × 2 α + one-shot × 2 ε)
    # rows: SVSM gives two rows (itemsets and its SVIM's items), the others one
    assert tiny_table.num_rows == 2 * 2 * (1 + 2 + 1) * 10
    rows = tiny_table.to_pylist()
    assert {r["kind"] for r in rows} == {"setvalued"}
    assert {(r["app"], r["target"]) for r in rows} == {
        ("SVIM", "items"),
        ("SVSM", "items"),
        ("SVSM", "itemsets"),
        ("LDPMiner", "items"),
    }
    skipped = [r for r in rows if r["status"] == "skipped"]
    # L-OUE cannot reach α = 0.9 at ε∞ = 1; LDPMiner halves the budget (ε∞/2, ε1/2) and so
    # also misses it at ε∞ = 4 (2, 1.8)
    assert all(r["protocol"] == "L-OUE" and r["alpha"] == 0.9 for r in skipped)
    assert {(r["app"], r["target"], r["eps_perm"]) for r in skipped} == {
        ("SVIM", "items", 1.0),
        ("SVSM", "items", 1.0),
        ("SVSM", "itemsets", 1.0),
        ("LDPMiner", "items", 1.0),
        ("LDPMiner", "items", 4.0),
    }
    assert len(skipped) == 2 * 2 * 5  # datasets × reps × the five above
    assert all("L-OUE" in r["skip_reason"] and r["mse_avg"] is None for r in skipped)
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        tau = {"bms-3k": 2, "loan-2k": 3}[r["dataset"]]
        assert r["tau"] == tau
        for m in ("mse", "precision", "recall", "f1", "ncr"):
            assert len(r[f"{m}_t"]) == tau
        assert math.isclose(r["mse_avg"], float(np.mean(r["mse_t"])), rel_tol=1e-12)
        for m in ("precision", "recall", "f1", "ncr"):
            assert math.isclose(r[m], float(np.mean(r[f"{m}_t"])), rel_tol=1e-12), m
        # recall = |R∩T|/k with k true keys; F1 the harmonic mean of precision and recall
        hits = np.array(r["recall_t"]) * r["k"]
        assert np.allclose(hits, np.round(hits), rtol=0, atol=1e-9), r["recall_t"]
        for p, rc, f1 in zip(r["precision_t"], r["recall_t"], r["f1_t"], strict=True):
            assert f1 == pytest.approx(2 * p * rc / (p + rc) if p + rc else 0.0, rel=1e-12)
        if r["protocol"] == "one-shot":
            assert r["alpha"] is None and r["longitudinal"] is False
        else:
            assert math.isclose(r["eps_1"], r["alpha"] * r["eps_perm"])
    loan = [r for r in ok if r["dataset"] == "loan-2k"]
    # 35 sub grades + 5 non-zero delinquency counts; sets of 1-2 items; k = 8 <= |I|
    assert {r["n_items"] for r in loan} == {40} and {r["n"] for r in loan} == {2000}
    assert {r["k"] for r in ok} == {8}


@pytest.mark.slow
def test_tiny_row_replays_from_its_streams(tiny_table):
    row = next(
        r
        for r in tiny_table.to_pylist()
        if r["status"] == "ok" and r["app"] == "SVIM" and r["protocol"] == "L-OUE"
    )
    assert row["dataset"] == "bms-3k"
    sets = load_data("bms-pos-standin", n=3000)
    data = to_longitudinal(
        sets, 2, seeding.generator(int(row["seed_entropy"]), row["data_spawn_key"])
    )
    run = mine(
        data,
        "svim",
        k=8,
        protocol="L-OUE",
        eps_perm=row["eps_perm"],
        eps_1=row["eps_1"],
        rng=seeding.generator(int(row["seed_entropy"]), row["spawn_key"]),
        postprocess="norm-sub",
        truth=setvalued_truth(data),
    )
    assert run.summary()["items"]["mse"] == pytest.approx(row["mse_avg"], rel=1e-12)


@pytest.mark.slow
def test_results_do_not_depend_on_workers(tiny_table, tmp_path):
    two = run_study(load_study(TINY), tmp_path / "two", workers=2, progress=False)
    assert stable(pq.read_table(two.path)).equals(stable(tiny_table))


@pytest.mark.slow
def test_shipped_studies_parse():
    sizes = {}
    for name in STUDIES:
        study = load_study(ROOT / "experiments" / f"{name}.toml")
        assert study.kind == "setvalued"
        sizes[name] = len(study.study_kind.cells(study))
    reps = {n: load_study(ROOT / "experiments" / f"{n}.toml").repetitions for n in STUDIES}
    assert sizes["svim_seed000"] == 4 * reps["svim_seed000"] * 7 * 8
    assert sizes["svim_svsm_seed002"] == 4 * reps["svim_svsm_seed002"] * 2 * 5
    assert sizes["setvalued_oneshot"] == 3 * reps["setvalued_oneshot"] * 2 * 4


def test_table_to_itemsets_views_of_the_studies():
    loan = table_to_itemsets(
        load_data("lending-club"),
        ["sub_grade", "delinq_2yrs", "inq_last_6mths"],
        {"delinq_2yrs": ["0"], "inq_last_6mths": ["0"]},
    )
    assert loan.domain.size == 45 and set(np.unique(loan.lengths)) == {1, 2, 3}
    bfive = table_to_itemsets(load_data("bfi"), ["A1", "C1", "E1", "N1", "O1"])
    assert bfive.domain.size == 30 and set(np.unique(bfive.lengths)) == {5}


# --------------------------------------------------------------------------- config errors


def _tiny_doc() -> dict:
    return tomllib.loads(TINY.read_text())


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda d: d.update(apps=["svim", "fpgrowth"]), "'apps'"),
        (lambda d: d.update(k=0), "'k'"),
        (lambda d: d.update(engine="fast"), "'engine'"),
        (lambda d: d.update(policy="never"), "'policy'"),
        (lambda d: d.update(mse_reading="squared"), "'mse_reading'"),
        (lambda d: d.update(per_timestamp="yes"), "'per_timestamp'"),
        (lambda d: d.update(alpha=[0.5, 1.0]), "'alpha'"),
        (lambda d: d.pop("alpha"), "'alpha'"),
        (lambda d: d.update(postprocess=["magic"]), "'postprocess'"),
        (lambda d: d.update(colour="red"), "'colour'"),
        (lambda d: d["datasets"].append({"name": "nope"}), "'name'"),
        (lambda d: d["datasets"][0].update(n=0), "'n'"),
        (lambda d: d["datasets"][0].update(attributes=["x"]), "'attributes'"),
        (lambda d: d["datasets"][1].update(exclude={"sub_grade": ["Z9"]}), "Z9"),
        (lambda d: d["datasets"][1].update(exclude=["0"]), "'exclude'"),
        (lambda d: d["datasets"][1].update(seed=3), "'seed'"),
        (lambda d: d["datasets"][1].update(label="bms-3k"), "'datasets'"),
        (lambda d: d["protocols"].append({"name": "L-NOPE"}), "'name'"),
        (lambda d: d["protocols"][0].update(eps_perm=1.0), "'eps_perm'"),
        (lambda d: d["protocols"][1].update(calibration="wrong"), "calibration"),
        (lambda d: d["protocols"].append({"name": "L-OUE"}), "'protocols'"),
    ],
)
def test_config_errors_name_the_key(edit, key):
    doc = copy.deepcopy(_tiny_doc())
    edit(doc)
    with pytest.raises(ValueError, match=key):
        parse_study(doc, "tiny.toml")


def test_tau_is_required_somewhere():
    doc = _tiny_doc()
    doc.pop("tau")
    with pytest.raises(ValueError, match="'tau'"):
        parse_study(doc, "tiny.toml")


def test_cli_reports_config_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace('apps = ["svim"', 'apps = ["svimm"'))
    result = CliRunner().invoke(app, ["run", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "apps" in result.output
