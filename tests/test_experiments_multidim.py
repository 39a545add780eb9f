"""The ``multidim`` study kind (ALLOMFREE Tables 3–4) and its gain table."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from longldp import postprocess as pp
from longldp.apps.multidim.collection import MultidimCollection
from longldp.experiments import load_study, parse_study, run_study, seeding
from longldp.experiments.kinds import multidim as mk
from longldp.experiments.reports import multidim as gains
from study_helpers import run_study_cli, stable

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments" / "allomfree_tiny.toml"
FULL = ROOT / "experiments" / "allomfree.toml"


@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory) -> pa.Table:
    return run_study_cli(TINY, tmp_path_factory.mktemp("tiny"), "ALLOMFREE")


# --------------------------------------------------------------------------- the tiny study


@pytest.mark.slow
def test_tiny_study_rows_and_columns(tiny_table):
    expected = {f.name for f in mk.COLUMNS} | {"study", "kind", "status", "spawn_key"}
    assert expected <= set(tiny_table.column_names)
    # 2 reps × (4 solutions with ε1 × 2 ε∞ × 2 α + dBitFlipPM × 2 ε∞) cells × 2 post-processings
    assert tiny_table.num_rows == 2 * (4 * 2 * 2 + 2) * 2
    rows = tiny_table.to_pylist()
    assert {r["kind"] for r in rows} == {"multidim"}
    assert {r["postprocess"] for r in rows} == {"clip-renorm", "none"}
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert skipped and all(
        r["protocol"] == "SMP+L-OUE" and r["alpha"] == 0.9 and r["eps_perm"] == 1.0 for r in skipped
    )
    assert all("L-OUE" in r["skip_reason"] for r in skipped)
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["mse_avg"] > 0 and len(r["mse_per_attribute"]) == 3 for r in ok)
    for r in ok:
        assert math.isclose(r["mse_avg"], float(np.mean(r["mse_per_attribute"])), rel_tol=1e-12)
        assert r["d"] == 3 and r["ks"] == [7, 2, 5] and r["n"] == 2000 and r["tau"] == 2
    flip = [r for r in rows if r["protocol"] == "SMP+1BitFlipPM"]
    assert flip and all(r["alpha"] is None and r["eps_1"] is None for r in flip)
    spl = [r for r in ok if r["solution"] == "SPL"]
    assert spl and all(r["assignment_spawn_key"] is None for r in spl)
    allom = [r for r in ok if r["protocol"] == "ALLOMFREE"]
    for r in allom:  # L-GRR for small domains, never worse V* than L-OSUE
        assert set(r["attribute_protocols"]) <= {"L-GRR", "L-OSUE"}
        assert r["attribute_protocols"][1] == "L-GRR"  # sex, k = 2
    # no attribute ever had all raw estimates <= 0, where clip-renorm and norm-mul differ
    assert all(r["degenerate"] == 0 for r in ok)


@pytest.mark.slow
def test_post_processings_share_the_raw_estimates(tiny_table):
    rows = [r for r in tiny_table.to_pylist() if r["status"] == "ok"]
    by_cell: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell_id"], {})[r["postprocess"]] = r
    assert all(set(v) == {"clip-renorm", "none"} for v in by_cell.values())


@pytest.mark.slow
def test_rows_replay_from_their_seeds(tiny_table):
    """A row's MSE is reproduced by MultidimCollection from its recorded streams alone."""
    study = load_study(TINY)
    row = next(
        r
        for r in tiny_table.to_pylist()
        if r["protocol"] == "ALLOMFREE" and r["postprocess"] == "none" and r["rep"] == 1
    )
    from longldp.data import load
    from longldp.data.longitudinal import permutations

    adult = load("adult")
    attrs = study.spec.datasets[0].attributes
    codes = [np.asarray(adult[a])[:2000] for a in attrs]
    perm = permutations(2000, 2, seeding.generator(int(row["seed_entropy"]), row["data_spawn_key"]))
    values = [c[perm] for c in codes]
    coll = MultidimCollection(
        tuple(row["ks"]), "ALLOMFREE", row["eps_perm"], alpha=row["alpha"], calibration="paper"
    )
    assignment = coll.assign(
        2000, seeding.generator(int(row["seed_entropy"]), row["assignment_spawn_key"])
    )
    res = coll.collect(
        values,
        seeding.generator(int(row["seed_entropy"]), row["spawn_key"]),
        engine="per-user",
        assignment=assignment,
    )
    assert math.isclose(res.mse_avg, row["mse_avg"], rel_tol=1e-12)


@pytest.mark.slow
def test_results_do_not_depend_on_workers(tmp_path, tiny_table):
    two = run_study(TINY, tmp_path / "two", workers=2, progress=False)
    assert stable(pq.read_table(two.path)).equals(stable(tiny_table))


@pytest.mark.slow
def test_assignment_is_shared_by_solutions_and_eps_of_a_repetition(tiny_table):
    rows = [r for r in tiny_table.to_pylist() if r["status"] == "ok" and r["solution"] != "SPL"]
    keys = {(r["rep"], tuple(r["assignment_spawn_key"])) for r in rows}
    assert keys == {(0, (mk.ASSIGNMENT, 0, 0)), (1, (mk.ASSIGNMENT, 0, 1))}
    assert len({tuple(r["spawn_key"]) for r in rows}) == len({r["cell_id"] for r in rows})


def test_full_study_is_the_paper_setup():
    assert load_study(FULL).repetitions == 100
    with FULL.open("rb") as f:
        study = parse_study(tomllib.load(f) | {"repetitions": 1}, FULL.name)
    adult, census = study.spec.datasets
    assert (adult.n, adult.domain_sizes) == (45222, (7, 16, 7, 14, 6, 5, 2, 41, 2))
    assert census.n == 299285 and len(census.attributes) == 33
    assert census.domain_sizes[:5] == (9, 52, 47, 17, 3)
    assert census.domain_sizes[-8:] == (43, 43, 43, 5, 3, 3, 3, 2)
    assert "income" not in census.attributes
    assert study.spec.eps_perm == (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
    assert study.spec.alpha == (0.3, 0.6) and study.spec.postprocess == ("clip-renorm",)
    cells = study.study_kind.cells(study)
    assert len(cells) == 2 * study.repetitions * 5 * 8 * 2
    assert all(c.params["skip_reason"] is None for c in cells[: 5 * 8 * 2])


# --------------------------------------------------------------------------- post-processing


def test_clip_renorm_is_the_papers_rule():
    f = np.array([0.5, -0.1, 0.3, 0.0])
    np.testing.assert_allclose(mk.clip_renorm(f), [0.625, 0.0, 0.375, 0.0])
    np.testing.assert_allclose(mk.clip_renorm(f), pp.norm_mul(f))
    nothing = np.array([-0.2, 0.0, -0.1])
    np.testing.assert_array_equal(mk.clip_renorm(nothing), np.zeros(3))  # nan_to_num(0/0)
    np.testing.assert_allclose(pp.norm_mul(nothing), np.full(3, 1 / 3))  # where they differ


# --------------------------------------------------------------------------- gains


def _hand_table() -> pa.Table:
    """ALLOMFREE and two baselines on two ε∞, two repetitions; Adult as in the paper."""
    mse = {
        ("ALLOMFREE", 0.5): [1.0, 3.0],
        ("SMP+L-SUE", 0.5): [2.0, 2.0],
        ("SMP+L-OUE", 0.5): [4.0, 4.0],
        ("ALLOMFREE", 1.0): [1.0, 1.0],
        ("SMP+L-SUE", 1.0): [1.0, 3.0],
        ("SMP+L-OUE", 1.0): [2.0, 2.0],
    }
    about = {
        "ALLOMFREE": ("ALLOMFREE", "L-GRR/L-OSUE"),
        "SMP+L-SUE": ("SMP", "L-SUE"),
        "SMP+L-OUE": ("SMP", "L-OUE"),
    }
    rows = []
    for (label, eps), values in mse.items():
        for rep, v in enumerate(values):
            rows.append(
                {
                    "dataset": "Adult",
                    "dataset_name": "adult",
                    "n": 45222,
                    "d": 9,
                    "protocol": label,
                    "solution": about[label][0],
                    "chain": about[label][1],
                    "alpha": 0.3,
                    "eps_perm": eps,
                    "postprocess": "clip-renorm",
                    "rep": rep,
                    "status": "ok",
                    "mse_avg": v,
                }
            )
    rows.append(rows[0] | {"status": "skipped", "mse_avg": None, "rep": 7})
    return pa.Table.from_pylist(rows)


def test_gain_table_on_a_hand_made_table():
    rows = gains.gain_table(_hand_table())
    assert [r.eps_perm for r in rows] == [0.5, 1.0, None]
    first, second, mean = rows
    # ε∞ = 0.5: means 2 (ALLOMFREE), 2 (L-SUE), 4 (L-OUE)
    assert first.mse == {"ALLOMFREE": 2.0, "SMP+L-SUE": 2.0, "SMP+L-OUE": 4.0}
    assert first.gain["SMP+L-SUE"] == pytest.approx(0.0)
    assert first.gain["SMP+L-OUE"] == pytest.approx(50.0)
    # ε∞ = 1: means 1, 2, 2 → 50% and 50%
    assert second.gain == pytest.approx({"SMP+L-SUE": 50.0, "SMP+L-OUE": 50.0})
    assert mean.gain == pytest.approx({"SMP+L-SUE": 25.0, "SMP+L-OUE": 50.0})
    assert first.reps == 2 and mean.reps == 2
    # paired delta method: ψ_r = −100 (a_r − R b_r)/B̄; at ε∞ = 0.5 vs L-SUE ψ = (50, −50)
    assert first.ci["SMP+L-SUE"] == pytest.approx(1.96 * np.std([50, -50], ddof=1) / np.sqrt(2))
    assert second.ci["SMP+L-OUE"] == pytest.approx(0.0)
    # the paper's cells for Adult, α = 0.3 (Table 3)
    assert first.paper == {"SMP+L-SUE": 19.03, "SMP+L-OUE": 27.73}
    assert second.paper == {"SMP+L-SUE": 12.77, "SMP+L-OUE": 20.44}
    assert mean.paper == {"SMP+L-SUE": None, "SMP+L-OUE": None}  # not the paper's ε∞ grid
    text = gains.format_gain_table(rows)
    assert "| 0.5 | 2 | 2 | 4 | 0.00 ± " in text
    assert "19.03 | -19.03 |" in text
    assert "| **mean** |" in text


def test_gain_table_shows_the_paper_only_for_its_setup():
    table = _hand_table()
    smaller = table.set_column(
        table.column_names.index("n"), "n", pa.array([3000] * table.num_rows)
    )
    rows = gains.gain_table(smaller)
    assert all(v is None for r in rows for v in r.paper.values())


def test_paper_means_are_the_means_of_the_printed_rows():
    for key, columns in gains.PAPER_GAINS.items():
        for chain, column in columns.items():
            assert np.mean(list(column.values())) == pytest.approx(
                gains.PAPER_MEANS[key][chain], abs=0.006
            )


def test_gain_table_errors_name_the_problem():
    with pytest.raises(ValueError, match="SMP\\+L-OSUE"):
        gains.gain_table(_hand_table(), baselines=("SMP+L-OSUE",))
    with pytest.raises(ValueError, match="no column"):
        gains.gain_table(_hand_table().drop_columns(["rep"]))


@pytest.mark.slow
def test_gain_script_writes_markdown(tmp_path, tiny_table):
    path = tmp_path / "results.parquet"
    pq.write_table(tiny_table, path)
    out = tmp_path / "gains.md"
    assert gains.main([str(path), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "### adult-2k, α = 0.3 (post-processing clip-renorm, 2 repetitions)" in text
    assert gains.main([str(tmp_path / "missing.parquet")]) == 2


# --------------------------------------------------------------------------- config errors


def _tiny_document() -> dict:
    with TINY.open("rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"solutions": [{"solution": "SMP"}]}, "chain"),
        ({"solutions": [{"solution": "SMP", "chain": "OUE"}]}, "chain"),
        ({"solutions": [{"solution": "ALLOMFREE", "chain": "L-GRR"}]}, "chain"),
        ({"solutions": [{"solution": "XYZ", "chain": "L-GRR"}]}, "solution"),
        ({"solutions": [{"solution": "SMP", "chain": "L-GRR", "eps": 1}]}, "eps"),
        (
            {
                "solutions": [
                    {"solution": "SMP", "chain": "L-GRR"},
                    {"solution": "SMP", "chain": "L-GRR"},
                ]
            },
            "solutions",
        ),
        ({"postprocess": ["clip"]}, "postprocess"),
        ({"engine": "fast"}, "engine"),
        ({"calibration": "approx"}, "calibration"),
        ({"alpha": [0.3, 1.0]}, "alpha"),
        ({"eps_perm": []}, "eps_perm"),
        ({"datasets": [{"name": "adult", "attributes": ["nope"]}]}, "attributes"),
        ({"datasets": [{"name": "adult", "attributes": ["sex", "race"], "n": 1}]}, "n"),
        ({"protocols": []}, "protocols"),
    ],
)
def test_bad_study_raises_naming_the_key(change, key):
    doc = _tiny_document() | change
    with pytest.raises(ValueError, match=f"'{key}'"):
        parse_study(doc, "tiny.toml")
