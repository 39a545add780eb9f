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
    for c in ("bonferroni", "none"):  # one fit, corrected afterwards: the same detections
        np.testing.assert_array_equal(res["bh"].corrected(c).detected, res[c].detected)
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
    assert b.detected[:3].all()
    assert np.all(np.abs(b.estimate[:3] - counts) < 5 * b.std_error[:3])  # SE ≈ 220 here


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
    # one report per client: each is 1 w.p. q* or p* (PRR and IRR composed), independently,
    # so the binomial SE of the debiased share is exact
    qs, ps = proto.effective
    r = values.mean() * qs + (1 - values.mean()) * ps
    assert out["std_error"] == pytest.approx(np.sqrt(r * (1 - r) / 20_000) / (qs - ps), rel=0.02)
    assert abs(out["true"] - values.mean()) < 5 * out["std_error"]


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


@pytest.mark.slow
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
    assert np.all(np.abs(est - truth) < 5 * res.std_error[:2, :2])
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


# ---------------------------------------------------------------------- aliased candidates
def issue_setting():
    """Issue 22's setting: m = 1, k = 128, h = 2, 100 candidates s100..s199, of which s112 and
    s185 hash to the same two bits."""
    proto = ll.protocol("RAPPOR", k=128, h=2, m=1, f=0.5, p=0.5, q=0.75)
    cands = [f"s{i}" for i in range(100, 200)]
    return proto, cands, candidate_map(cands, 2, 128, 1)


def test_identical_bloom_columns_are_one_group_never_two_tests():
    proto, cands, idx = issue_setting()
    a, b = cands.index("s112"), cands.index("s185")
    assert set(idx[a, 0]) == set(idx[b, 0])  # the premise: their Bloom bits coincide
    C = proto.sample_counts(
        ["s112"], np.array([40_000]), np.random.default_rng(0), bloom_map=idx[[a]]
    )
    for procedure in ("A", "B"):
        res = decode(proto, C, cands, bloom_map=idx, procedure=procedure)
        pair = [g for g in res.groups if a in g.members]
        assert len(pair) == 1 and pair[0].members == (a, b) and pair[0].identical
        g = pair[0]
        assert g.detected and abs(g.estimate - 40_000) < (
            5 * g.std_error if procedure == "A" else 0.1 * 40_000  # B: Σβ ≤ 1 binds here
        )
        # neither string has an estimate or a test of its own
        assert np.isnan(res.estimate[[a, b]]).all() and not res.detected[[a, b]].any()
        assert "s185" not in res.detected_strings()
        rows = {r["string"]: r for r in res.table()}
        assert rows["{s112, s185}"]["aliased"] and rows["{s112, s185}"]["members"] == [
            "s112",
            "s185",
        ]
    # procedure A: one test per group; the 100 candidates hold fewer distinct hypotheses
    res = decode(proto, C, cands, bloom_map=idx)
    assert res.summary["tests"] < 100 and res.summary["aliased_groups"] == len(res.groups)
    strict = res.corrected("bonferroni", 1e-300)  # the group's test is corrected with the rest
    assert not any(g.detected for g in strict.groups) and not strict.detected.any()


def test_the_group_total_is_unbiased_with_a_calibrated_standard_error():
    proto, cands, idx = issue_setting()
    a = cands.index("s112")
    rng = np.random.default_rng(1)
    est, se = [], []
    for _ in range(60):
        C = proto.sample_counts(["s112"], np.array([40_000]), rng, bloom_map=idx[[a]])
        g = next(g for g in decode(proto, C, cands, bloom_map=idx).groups if a in g.members)
        est.append(g.estimate)
        se.append(g.std_error)
    est, se = np.array(est), np.array(se)
    sd = est.std(ddof=1)
    assert abs(est.mean() - 40_000) < 5 * sd / np.sqrt(est.size)
    # the reported SE against the spread over repetitions: the sample sd of 60 values has a
    # relative sd of 1/√(2·59) = 0.092; σ² = max(σ₀², RSS/dof) may only err on the large side
    assert 1 - 5 * 0.092 < se.mean() / sd < 1.35 + 5 * 0.092


def test_a_never_reported_string_is_never_significant_through_an_alias():
    """Random candidate lists in the issue's setting, one reported string that aliases at
    least one other: the never-reported strings found significant are at most what the
    Benjamini–Hochberg procedure allows (the old decoder split the count and declared the
    alias every time)."""
    proto = ll.protocol("RAPPOR", k=128, h=2, m=1, f=0.5, p=0.5, q=0.75)
    rng = np.random.default_rng(2)
    fdp, runs, trial = [], 0, 0
    while runs < 25:
        trial += 1
        cands = [f"u{trial}-{i}" for i in range(100)]
        idx = candidate_map(cands, 2, 128, 1)
        # the alias structure depends on the design and N only, not on the bit counts
        res0 = decode(proto, np.array([[40_000] + [0] * 128]), cands, bloom_map=idx, lasso=False)
        aliased = sorted({s for g in res0.groups if g.estimable for s in g.members})
        if not aliased:
            continue
        runs += 1
        true = int(rng.choice(aliased))
        C = proto.sample_counts([cands[true]], np.array([40_000]), rng, bloom_map=idx[[true]])
        res = decode(proto, C, cands, bloom_map=idx, lasso=False)
        wrong = int(res.detected.sum() - res.detected[true])
        wrong += sum(g.detected and true not in g.members for g in res.groups)
        right = sum(g.detected and true in g.members for g in res.groups)
        assert right == 1  # the reported string's group is found every time
        fdp.append(wrong / (wrong + right))
    # BH: E[FDP] ≤ α = 0.05; 25 runs of a proportion, 5 SE of a 5% rate
    assert np.mean(fdp) <= 0.05 + 5 * np.sqrt(0.05 * 0.95 / 25)


def hand_map(rows):
    """A (M, 1, 2) Bloom map written by hand: one cohort, two positions per candidate."""
    return np.array(rows, dtype=np.int64).reshape(len(rows), 1, 2)


def test_linearly_dependent_columns_form_one_group_with_an_identified_total():
    # a 4-cycle of bits (s0 + s2 = s1 + s3), a filter with one distinct bit (s4 = bit 8,
    # s5 = bits 8, 9, s6 = bit 9: s5 = s4 + s6) and six strings on bits of their own
    proto = ll.protocol("RAPPOR", k=32, h=2, m=1, f=0.5, p=0.5, q=0.75)
    cycle = [(0, 1), (1, 2), (2, 3), (3, 0)]
    collide = [(8, 8), (8, 9), (9, 9)]
    alone = [(12, 13), (14, 15), (16, 17), (18, 19), (20, 21), (22, 23)]
    idx = hand_map(cycle + collide + alone)
    cands = [f"c{i}" for i in range(len(idx))]
    truth = {0: 30_000, 5: 20_000, 7: 15_000}
    rng = np.random.default_rng(3)
    C = proto.sample_counts(
        [cands[i] for i in truth], np.array(list(truth.values())), rng, bloom_map=idx[list(truth)]
    )
    res = decode(proto, C, cands, bloom_map=idx)
    groups = {g.members: g for g in res.groups}
    assert set(groups) == {(0, 1, 2, 3), (4, 5, 6)}
    assert not any(g.identical for g in res.groups)
    # the cycle's total is identified; the collision group's total weights s4 and s6 (one bit
    # each) by 1/2, which is what the counts identify: s5's 20,000 count fully
    assert abs(groups[(0, 1, 2, 3)].estimate - 30_000) < 5 * groups[(0, 1, 2, 3)].std_error
    assert abs(groups[(4, 5, 6)].estimate - 20_000) < 5 * groups[(4, 5, 6)].std_error
    assert res.detected[7] and abs(res.estimate[7] - 15_000) < 5 * res.std_error[7]
    assert np.isnan(res.estimate[:7]).all() and not res.detected[:7].any()


def test_a_group_that_mimics_the_intercept_is_not_identified_and_never_detected():
    # with k = 4 the filters of s0 (bits 0, 1) and s1 (bits 2, 3) add up to every bit set:
    # β0 + β1 is the intercept's direction, so not even the group's total is identified
    proto = ll.protocol("RAPPOR", k=4, h=2, m=1, f=0.5, p=0.5, q=0.75)
    idx = hand_map([(0, 1), (2, 3)])
    C = proto.sample_counts(["a"], np.array([50_000]), np.random.default_rng(4), bloom_map=idx[[0]])
    res = decode(proto, C, ["a", "b"], bloom_map=idx)
    (g,) = res.groups
    assert g.members == (0, 1) and not g.estimable and not g.detected
    assert not res.detected.any() and res.table() == []


def test_nearly_collinear_columns_are_one_group():
    # s0 and s1 share their bits in cohort 0 (49,999 reports) and differ only in cohort 1,
    # which holds a single report: a unit contrast of their shares has an SE σ₀/√λ above 1
    proto = ll.protocol("RAPPOR", k=16, h=2, m=2, f=0.5, p=0.5, q=0.75)
    idx = np.array([[[0, 1], [2, 3]], [[0, 1], [4, 5]], [[6, 7], [8, 9]]], dtype=np.int64)
    one = ll.protocol("RAPPOR", k=16, h=2, m=1, f=0.5, p=0.5, q=0.75)
    rng = np.random.default_rng(5)
    C = np.vstack(
        [
            one.sample_counts(["a"], np.array([49_999]), rng, bloom_map=idx[:1, [0]]),
            one.sample_counts(["a"], np.array([1]), rng, bloom_map=idx[:1, [1]]),
        ]
    )
    res = decode(proto, C, ["a", "b", "c"], bloom_map=idx)
    (g,) = res.groups
    assert g.members == (0, 1) and not g.identical and g.estimable and g.detected
    assert abs(g.estimate - 50_000) < 5 * g.std_error


def test_aliases_in_the_rich_table_and_the_cli(tmp_path):
    import json

    from rich.console import Console

    from longldp.apps.rappor.report import rich_table

    proto, cands, idx = issue_setting()
    a = cands.index("s112")
    C = proto.sample_counts(
        ["s112"], np.array([40_000]), np.random.default_rng(0), bloom_map=idx[[a]]
    )
    con = Console(width=200, record=True)
    con.print(rich_table(decode(proto, C, cands, bloom_map=idx)))
    text = con.export_text()
    assert "{s112, s185}" in text and "alias group" in text and "never string by string" in text
    files.write_params(proto, tmp_path / "params.csv")
    files.write_counts(C, tmp_path / "counts.csv", proto)
    (tmp_path / "cands.txt").write_text("\n".join(cands) + "\n")
    out = tmp_path / "o.json"
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
            "--out",
            str(out),
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "{s112, s185}" in res.output and "alias group" in res.output
    rows = {r["string"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["{s112, s185}"]["members"] == ["s112", "s185"] and "s185" not in rows


# ---------------------------------------------------------------------- skewed cohorts
def test_procedure_a_is_unbiased_with_skewed_cohort_sizes():
    """Cohort sizes ∝ 1..16: the fraction regression weighted by N_j (math §11.2) is unbiased
    for every string and in total; the SE matches the spread over repetitions. (Regressing
    counts, as before, gave −3.6% in total, 12 SE of the mean.)"""
    k, h, m, M = 64, 2, 16, 20
    proto = ll.protocol("RAPPOR", k=k, h=h, m=m, f=0.5, p=0.5, q=0.75)
    one = ll.protocol("RAPPOR", k=k, h=h, m=1, f=0.5, p=0.5, q=0.75)
    cands = [f"s{i}" for i in range(M + 20)]
    idx = candidate_map(cands, h, k, m)
    share = np.exp(-np.arange(M) / 5)
    share /= share.sum()
    sizes = np.arange(1, m + 1) * 200_000 // (m * (m + 1) // 2)
    per = np.rint(np.outer(share, sizes)).astype(np.int64)  # clients per string and cohort
    truth = per.sum(axis=1)
    rng = np.random.default_rng(6)
    R = 100
    est, se = np.empty((R, M)), np.empty((R, M))
    for r in range(R):
        C = np.vstack(
            [one.sample_counts(cands[:M], per[:, j], rng, bloom_map=idx[:M, [j]]) for j in range(m)]
        )
        res = decode(proto, C, cands, bloom_map=idx)
        est[r], se[r] = res.estimate[:M], res.std_error[:M]
    sd = est.std(axis=0, ddof=1)
    assert np.all(np.abs(est.mean(axis=0) - truth) < 5 * sd / np.sqrt(R))
    total = est.sum(axis=1)
    assert abs(total.mean() - truth.sum()) < 5 * total.std(ddof=1) / np.sqrt(R)
    # sd of a sample sd over R draws: 1/√(2(R − 1)) relative
    assert np.all(np.abs(se.mean(axis=0) / sd - 1) < 5 / np.sqrt(2 * (R - 1)))


# ---------------------------------------------------------------------- procedure B
def test_resample_is_google_rappors():
    """google/rappor's Resample(): noise of SD sd, then the copy's SDs are sd·√2."""
    from longldp.apps.rappor.decode import resample

    sd = np.array([0.01, 0.02, 0.05])
    y = np.array([0.1, 0.2, 0.3])
    draws = np.array([resample(y, sd, np.random.default_rng(i))[0] for i in range(4000)])
    got = draws.std(axis=0, ddof=1) / sd
    # a sample sd over 4,000 draws has a relative sd of 1/√7998 = 0.011
    assert np.all(np.abs(got - 1) < 5 / np.sqrt(2 * 3999))
    assert np.all(np.abs(draws.mean(axis=0) - y) < 5 * sd / np.sqrt(4000))
    np.testing.assert_allclose(resample(y, sd, np.random.default_rng(0))[1], sd * np.sqrt(2))


@pytest.mark.slow
def test_procedure_b_standard_errors_follow_the_resampling_rule():
    """With the data fit plus four copies perturbed with the data's own SD, the reported SE
    (sd of the five fits) is, to first order, √(0.8/1.16) = 0.83 of the estimate's spread
    over repetitions (math §11.3); adding sd·√2 instead, as longldp did, gives 1.2–1.7."""
    proto = ll.protocol("RAPPOR", k=16, h=2, m=4, f=0.5, p=0.5, q=0.75)
    cands = [f"s{i}" for i in range(12)]
    idx = candidate_map(cands, 2, 16, 4)
    counts = np.array([30_000, 20_000, 15_000, 10_000, 5_000, 2_000])
    rng = np.random.default_rng(7)
    R = 200
    est, se = np.empty((R, 6)), np.empty((R, 6))
    for r in range(R):
        C = proto.sample_counts(cands[:6], counts, rng, bloom_map=idx[:6])
        res = decode(proto, C, cands, bloom_map=idx, procedure="B", seed=r)
        est[r], se[r] = res.estimate[:6], res.std_error[:6]
    ratio = np.sqrt((se**2).mean(axis=0)) / est.std(axis=0, ddof=1)
    # relative sd of the ratio: √(1/(2R) + 1/(8R)) (the spread's sd, and the RMS of sds of
    # five fits, ~4 degrees of freedom each)
    tol = 5 * np.sqrt(0.625 / R) * np.sqrt(0.8 / 1.16)
    assert abs(ratio.mean() - np.sqrt(0.8 / 1.16)) < tol
