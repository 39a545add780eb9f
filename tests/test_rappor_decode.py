"""RAPPOR decoding: recovery at the nominal FDR, the paper's standard error, LASSO, procedure B,
google/rappor's files, the CLI, association, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import longldp as ll
from longldp.apps.rappor import associate, decode, decode_boolean, files, select
from longldp.cli import app
from longldp.protocols.rappor import candidate_map


def population(M_true: int = 20, M_absent: int = 20, N: int = 200_000):
    w = np.exp(-np.arange(1, M_true + 1) / 6)
    w /= w.sum()
    cands = [f"s{i}" for i in range(M_true + M_absent)]
    return cands, np.rint(w * N).astype(np.int64)


def test_decoding_recovers_strings_at_nominal_fdr():
    proto = ll.protocol("RAPPOR", k=32, h=2, m=8, f=0.5, p=0.5, q=0.75)
    cands, counts = population()
    idx = candidate_map(cands, proto.h, proto.k, proto.m)
    rng = np.random.default_rng(1)
    fdp, found_big = [], []
    for _ in range(30):
        C = proto.sample_counts(cands[:20], counts, rng, bloom_map=idx[:20])
        res = decode(proto, C, cands, bloom_map=idx, correction="bh", alpha=0.05)
        det = res.detected
        fdp.append(det[20:].sum() / max(det.sum(), 1))
        found_big.append(det[:3].all())
    # BH controls E[FDP] ≤ α·M0/M = 2.5%; 30 runs of a proportion: allow 5 SE of a 5% rate.
    assert np.mean(fdp) <= 0.05 + 5 * np.sqrt(0.05 * 0.95 / 30) / 4
    assert all(found_big)  # the three largest strings (≥ 10% each) are always found


def test_paper_standard_error_and_corrections():
    """§5.2 of the paper: the per-candidate SE ≈ √(p*(1−p*)N)/((q*−p*)√h) = 2,806 (plus the
    OLS inflation on 200 columns); Bonferroni detects no more than BH, BH no more than none."""
    proto = ll.protocol("RAPPOR", k=128, h=2, m=16, f=0.5, p=0.5, q=0.75)
    w = np.exp(-np.arange(1, 101) / 20)
    cands = [f"v{i}" for i in range(1, 201)]
    idx = candidate_map(cands, 2, 128, 16)
    rng = np.random.default_rng(0)
    C = proto.sample_counts(
        cands[:100], rng.multinomial(10**6, w / w.sum()), rng, bloom_map=idx[:100]
    )
    qs, ps = proto.effective
    paper_se = np.sqrt(ps * (1 - ps) * 1e6) / ((qs - ps) * np.sqrt(2))
    assert paper_se == pytest.approx(2806, abs=1)
    res = {
        c: decode(proto, C, cands, bloom_map=idx, correction=c)
        for c in ("bonferroni", "bh", "none")
    }
    se = res["bh"].std_error
    assert np.all((se > paper_se) & (se < 1.15 * paper_se))
    n = {c: r.detected.sum() for c, r in res.items()}
    assert n["bonferroni"] <= n["bh"] <= n["none"]
    assert res["bh"].summary["lasso"] == 0.0 and res["bh"].summary["kept"] == 200


def test_lasso_runs_when_candidates_outnumber_rows_and_procedure_b():
    proto = ll.protocol("RAPPOR", k=16, h=2, m=2, f=0.25, p=0.25, q=0.75)
    cands = [f"c{i}" for i in range(60)]  # 60 > 0.8·32
    counts = np.array([60_000, 30_000, 10_000])
    rng = np.random.default_rng(4)
    C = proto.sample_counts(cands[:3], counts, rng)
    for sel in ("lasso-cv", "lasso-sigma", "nn-lasso"):
        res = decode(proto, C, cands, selection=sel)
        assert res.summary["lasso"] == 1.0 and res.summary["kept"] < 60
        assert res.detected[0]
    b = decode(proto, C, cands, procedure="B")
    assert b.detected[0] and b.estimate[0] == pytest.approx(60_000, rel=0.2)


def test_select_corrections():
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.6])
    assert select(p, 0.05, "bonferroni").tolist() == [True, True, False, False, False]
    assert select(p, 0.05, "bh").tolist() == [True, True, False, False, False]
    assert select(p, 0.05, "none").tolist() == [True, True, True, True, False]
    assert select(np.array([0.01, 0.02, 0.03]), 0.05, "bh").all()


def test_boolean_decode():
    proto = ll.protocol("RAPPOR-boolean", m=4, f=0.5, p=0.25, q=0.75)
    rng = np.random.default_rng(2)
    values = rng.random(20_000) < 0.3
    C = proto.support_counts(proto.perturb(values, proto.new_memo(20_000), rng))
    out = decode_boolean(proto, C)
    assert abs(out["true"] - values.mean()) < 5 * out["std_error"] * 2  # PRR + IRR noise


# ---------------------------------------------------------------------- files and CLI
def test_file_round_trip_and_decode_from_files(tmp_path):
    proto = ll.protocol("RAPPOR", k=32, h=2, m=4, f=0.5, p=0.5, q=0.75)
    cands, counts = population(6, 4, 50_000)
    rng = np.random.default_rng(3)
    C = proto.sample_counts(cands[:6], counts, rng)
    files.write_params(proto, tmp_path / "params.csv")
    files.write_counts(C, tmp_path / "counts.csv", proto)
    files.write_map(cands, tmp_path / "map.csv", proto)
    back = files.read_params(tmp_path / "params.csv")
    assert back == proto
    np.testing.assert_array_equal(files.read_counts(tmp_path / "counts.csv", proto), C)
    names, idx = files.read_map(tmp_path / "map.csv", proto)
    assert names == cands
    np.testing.assert_array_equal(idx, candidate_map(cands, 2, 32, 4))
    row = (tmp_path / "map.csv").read_text().splitlines()[0].split(",")
    # google/rappor: cohort j's positions are j·k + bit + 1
    assert row[0] == "s0" and all(
        j * 32 < int(x) <= (j + 1) * 32
        for j, x in zip(np.repeat(range(4), 2), row[1:], strict=True)
    )
    direct = decode(proto, C, cands)
    via = decode(back, files.read_counts(tmp_path / "counts.csv", back), names, bloom_map=idx)
    np.testing.assert_allclose(direct.estimate, via.estimate)
    # reports CSV (sum_bits input): IRR printed MSB first
    (tmp_path / "reports.csv").write_text(
        "client,cohort,bloom,prr,irr\n1,2,x,x," + "0" * 31 + "1\n2,2,x,x,1" + "0" * 31 + "\n"
    )
    s = files.read_reports(tmp_path / "reports.csv", proto)
    assert s[2, 0] == 2 and s[2, 1] == 1 and s[2, 32] == 1 and s.sum() == 4


def test_bad_files_and_counts(tmp_path):
    proto = ll.protocol("RAPPOR", k=8, h=1, m=2, f=0.5, p=0.5, q=0.75)
    (tmp_path / "map.csv").write_text("a,3,9\nb,9,12\n")  # b names position 9 in cohort 0
    with pytest.raises(ValueError, match="bits must be in \\[0, k = 8\\)"):
        files.read_map(tmp_path / "map.csv", proto)
    bad = np.zeros((2, 9), dtype=np.int64)
    bad[0, 0], bad[0, 3] = 5, 6
    with pytest.raises(ValueError, match="cannot exceed the number of reports"):
        decode(proto, bad, ["a"])
    with pytest.raises(ValueError, match="m = 2 rows"):
        decode(proto, np.zeros((3, 9), dtype=np.int64), ["a"])
    (tmp_path / "reports.csv").write_text("h\n1,5,x,x,00000001\n")
    with pytest.raises(ValueError, match="unknown cohort 5"):
        files.read_reports(tmp_path / "reports.csv", proto)
    (tmp_path / "params.csv").write_text("k,h,m,p,q\n8,1,2,0.5,0.75\n")
    with pytest.raises(ValueError, match="header k,h,m,p,q,f"):
        files.read_params(tmp_path / "params.csv")
    with pytest.raises(ValueError, match="'correction' must be one of"):
        decode(proto, np.zeros((2, 9), dtype=np.int64), ["a"], correction="holm")


def test_cli_decode(tmp_path):
    proto = ll.protocol("RAPPOR", k=32, h=2, m=4, f=0.5, p=0.5, q=0.75)
    cands, counts = population(6, 4, 50_000)
    C = proto.sample_counts(cands[:6], counts, np.random.default_rng(5))
    files.write_params(proto, tmp_path / "params.csv")
    files.write_counts(C, tmp_path / "counts.csv", proto)
    files.write_map(cands, tmp_path / "map.csv", proto)
    runner = CliRunner()
    args = [
        "rappor",
        "decode",
        "--counts",
        str(tmp_path / "counts.csv"),
        "--params",
        str(tmp_path / "params.csv"),
    ]
    res = runner.invoke(
        app,
        [
            *args,
            "--map",
            str(tmp_path / "map.csv"),
            "--plot",
            str(tmp_path / "p.png"),
            "--out",
            str(tmp_path / "o.json"),
        ],
        env={"COLUMNS": "160"},
    )
    assert res.exit_code == 0, res.output
    assert "s0" in res.output and (tmp_path / "p.png").exists() and (tmp_path / "o.json").exists()
    bad = runner.invoke(app, [*args, "--map", str(tmp_path / "map.csv"), "--correction", "x"])
    assert bad.exit_code == 2 and "error:" in bad.output


# ---------------------------------------------------------------------- association
def test_association_em_recovers_a_dependent_joint():
    p1 = ll.protocol("RAPPOR", k=16, h=2, m=1, f=0.25, p=0.25, q=0.75)
    p2 = ll.protocol("RAPPOR-boolean", m=1, f=0.25, p=0.25, q=0.75)
    rng = np.random.default_rng(8)
    n = 6000
    a = rng.choice(["x", "y"], size=n, p=[0.6, 0.4])
    b = np.where(a == "x", rng.random(n) < 0.9, rng.random(n) < 0.2)  # strongly dependent
    r1 = p1.perturb(list(a), p1.new_memo(n), rng)
    r2 = p2.perturb(b.astype(np.int64), p2.new_memo(n), rng)
    res = associate(
        p1, r1, ["x", "y"], p2, r2, ["FALSE", "TRUE"], shares1=[0.6, 0.4], shares2=[0.5, 0.5]
    )
    truth = np.array([[0.06, 0.54], [0.32, 0.08]])
    est = res.joint[:2, :2]
    assert np.all(np.abs(est - truth) < 5 * res.std_error[:2, :2] + 0.02)
    assert res.p_value < 1e-6 and res.dof == 1 and res.rows == ["x", "y"]
    # independent variables: the χ² test does not reject (at 0.1%)
    b2 = rng.random(n) < 0.5
    r3 = p2.perturb(b2.astype(np.int64), p2.new_memo(n), rng)
    ind = associate(p1, r1, ["x", "y"], p2, r3, ["FALSE", "TRUE"], shares1=[0.6, 0.4])
    assert ind.p_value > 1e-3


def test_cli_decode_with_candidate_list_and_values_of_mixed_form(tmp_path):
    proto = ll.protocol("RAPPOR", k=16, h=2, m=2, f=0.5, p=0.5, q=0.75)
    C = proto.sample_counts(["é", "b"], np.array([30_000, 10_000]), np.random.default_rng(6))
    files.write_params(proto, tmp_path / "params.csv")
    files.write_counts(C, tmp_path / "counts.csv", proto)
    (tmp_path / "cands.txt").write_text("é\nb\nzz\n", encoding="utf-8")
    res = CliRunner().invoke(
        app,
        [
            "rappor",
            "decode",
            "--counts",
            str(tmp_path / "counts.csv"),
            "--params",
            str(tmp_path / "params.csv"),
            "--candidates",
            str(tmp_path / "cands.txt"),
        ],
        env={"COLUMNS": "160"},
    )
    assert res.exit_code == 0, res.output
    assert "é" in res.output
    # str and UTF-8 bytes of one value hash alike, whether given as a list or an object array
    a = proto.encode(["é", b"b"], [0, 1])
    b = proto.encode(np.array([b"\xc3\xa9", "b"], dtype=object), [0, 1])
    np.testing.assert_array_equal(a, b)


def test_procedure_b_solver_meets_google_rappor_constraints():
    # β ≥ 0, Σβ ≤ 1, Xβ ≤ cap: the solver's answer matches an independent SLSQP solve and
    # satisfies every constraint (to the solver's tolerance), on problems where they bind.
    from scipy.optimize import minimize

    from longldp.apps.rappor.decode import constrained_least_squares

    rng = np.random.default_rng(0)
    binding = {"sum": 0, "cap": 0}
    for _ in range(6):
        n, rows = 6, 20
        A = rng.normal(size=(rows, n))
        X = rng.random((rows, n))
        b = A @ rng.random(n) * 0.5 + rng.normal(0, 0.1, rows)
        cap = rng.uniform(0.5, 1.5, rows)
        got = constrained_least_squares(A, b, X, cap)
        constraints = [
            {"type": "ineq", "fun": lambda x: 1 - x.sum()},
            {"type": "ineq", "fun": lambda x, X=X, cap=cap: cap - X @ x},
        ]
        ref = minimize(
            lambda x, A=A, b=b: ((A @ x - b) ** 2).sum(),
            np.zeros(n),
            bounds=[(0, None)] * n,
            constraints=constraints,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        ).x
        assert np.abs(got - ref).max() < 1e-5
        assert got.min() >= 0 and got.sum() <= 1 + 1e-6 and (X @ got - cap).max() <= 1e-6
        binding["sum"] += got.sum() > 1 - 1e-5
        binding["cap"] += (X @ got - cap).max() > -1e-5
    assert binding["sum"] and binding["cap"]
