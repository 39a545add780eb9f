"""Bundled datasets: row counts, domain sizes, dtypes, checksums (against DATA.md), errors."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from longldp.data import (
    CODE_DTYPE,
    INDPTR_DTYPE,
    SetData,
    Table,
    dataset_names,
    list_datasets,
    load,
    table_to_itemsets,
    verify_checksums,
)

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = resources.files("longldp.data").joinpath("bundled")

ADULT_SIZES = {
    "age": 74,
    "workclass": 7,
    "education": 16,
    "education-num": 16,
    "marital-status": 7,
    "occupation": 14,
    "relationship": 6,
    "race": 5,
    "sex": 2,
    "capital-gain": 121,
    "capital-loss": 97,
    "hours-per-week": 96,
    "native-country": 41,
    "salary": 2,
}

CENSUS_SIZES = {
    "class_of_worker": 9,
    "detailed_industry_recode": 52,
    "detailed_occupation_recode": 47,
    "education": 17,
    "enroll_in_edu_inst_last_wk": 3,
    "marital_stat": 7,
    "major_industry_code": 24,
    "major_occupation_code": 15,
    "race": 5,
    "hispanic_origin": 10,
    "sex": 2,
    "member_of_a_labor_union": 3,
    "reason_for_unemployment": 6,
    "full_or_part_time_employment_stat": 8,
    "tax_filer_stat": 6,
    "region_of_previous_residence": 6,
    "state_of_previous_residence": 51,
    "detailed_household_and_family_stat": 38,
    "detailed_household_summary_in_household": 8,
    "migration_code_change_in_msa": 10,
    "migration_code_change_in_reg": 9,
    "migration_code_move_within_reg": 10,
    "live_in_this_house_1_year_ago": 3,
    "migration_prev_res_in_sunbelt": 4,
    "family_members_under_18": 5,
    "country_of_birth_father": 43,
    "country_of_birth_mother": 43,
    "country_of_birth_self": 43,
    "citizenship": 5,
    "own_business_or_self_employed": 3,
    "fill_inc_questionnaire_for_veterans_admin": 3,
    "veterans_benefits": 3,
    "year": 2,
    "income": 2,
}

EXPECTED_N = {
    "adult": 45_222,
    "census-income": 299_285,
    "lending-club": 9_857,
    "loans-full-schema": 10_000,
    "bfi": 2_436,
    "big5": 500,
    "movielens": 671,
    "flights": 4_043,
}

BUNDLED = list(EXPECTED_N)


def manifest() -> dict:
    return json.loads(BUNDLE.joinpath("manifest.json").read_text(encoding="utf-8"))


def data_md_checksums() -> dict[str, str]:
    text = (ROOT / "DATA.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+\.parquet)` \|.*\| `([0-9a-f]{64})` \|$", text, re.M)
    return dict(rows)


@pytest.fixture(scope="module")
def loaded() -> dict[str, Table | SetData]:
    return {name: load(name) for name in BUNDLED}


@pytest.mark.parametrize("name", BUNDLED)
def test_row_counts_and_dtypes(loaded, name):
    d = loaded[name]
    assert d.n == EXPECTED_N[name]
    assert d.name == name
    if isinstance(d, Table):
        for attr in d.attributes:
            col = d[attr]
            assert col.dtype == CODE_DTYPE and col.shape == (d.n,)
            assert col.min() >= 0 and col.max() < d.domains[attr].size
            assert d.domains[attr].labels is not None
            assert not col.flags.writeable
    else:
        assert d.indptr.dtype == INDPTR_DTYPE and d.items.dtype == CODE_DTYPE
        assert d.indptr.shape == (d.n + 1,)
        assert d.domain.labels is not None


def test_adult(loaded):
    a = loaded["adult"]
    assert dict(zip(a.attributes, a.domain_sizes, strict=True)) == ADULT_SIZES
    assert a.domains["salary"].labels == ("<=50K", ">50K")
    assert a.histogram("salary").tolist() == [34_014, 11_208]
    ages = np.array([int(x) for x in a.domains["age"].labels])
    assert ages[0] == 17 and ages[-1] == 90 and np.all(np.diff(ages) > 0)
    assert "fnlwgt" not in a.attributes


def test_census_income(loaded):
    c = loaded["census-income"]
    assert dict(zip(c.attributes, c.domain_sizes, strict=True)) == CENSUS_SIZES
    assert len(c.attributes) == 34  # the 33 nominal attributes plus the label
    assert c.domains["year"].labels == ("94", "95")


def test_lending_club(loaded):
    lc = loaded["lending-club"]
    assert lc.domains["emp_length"].labels[0] == "emp_lt_1"
    assert lc.domains["emp_length"].labels[-1] == "emp_unk"
    assert lc.domains["Class"].labels == ("bad", "good")
    assert lc.domains["funded_amnt"].size == 40


def test_loans_full_schema(loaded):
    t = loaded["loans-full-schema"]
    binned = [a for a in t.attributes if t.domains[a].labels[-1].startswith(">=")]
    assert len(binned) >= 12
    assert all(2 <= k <= 64 for k in t.domain_sizes)
    assert t.domains["issue_month"].labels == ("Jan-2018", "Feb-2018", "Mar-2018")
    assert t.domains["emp_length"].labels[-1] == "NA"
    assert t.histogram("emp_length")[-1] == 817


def test_big_five(loaded):
    bfi, big5 = loaded["bfi"], loaded["big5"]
    assert len(bfi.attributes) == 25 and set(bfi.domain_sizes) == {6}
    assert len(big5.attributes) == 240 and set(big5.domain_sizes) == {5}
    assert big5.attributes[:3] == ("N1", "E2", "O3")


def test_set_valued(loaded):
    m, f = loaded["movielens"], loaded["flights"]
    assert m.nnz == 100_004 and m.domain.size == 9_066
    assert m.lengths.min() == 20 and m.lengths.max() == 2_391
    assert f.domain.size == 104 and f.lengths.min() >= 1 and f.lengths.max() == 47
    assert "JFK" not in f.domain.labels and "LAX" in f.domain.labels


def test_checksums_match_data_md_and_manifest():
    documented = data_md_checksums()
    entries = {d["file"]: d for d in manifest()["datasets"]}
    assert set(documented) == set(entries)
    for fname, sha in documented.items():
        actual = hashlib.sha256(BUNDLE.joinpath(fname).read_bytes()).hexdigest()
        assert actual == sha, fname
        assert entries[fname]["sha256"] == sha
    assert all(verify_checksums().values())


def test_bundle_is_small_and_compact():
    total = 0
    for d in manifest()["datasets"]:
        raw = BUNDLE.joinpath(d["file"]).read_bytes()
        total += len(raw)
        with BUNDLE.joinpath(d["file"]).open("rb") as f:
            schema = pq.read_schema(f)
        for field in schema:
            t = field.type.value_type if hasattr(field.type, "value_type") else field.type
            assert str(t) in {"uint8", "uint16"}, (d["file"], field.name, t)
    assert total < 15 * 1024 * 1024


def test_list_datasets_matches_load(loaded):
    infos = {i.name: i for i in list_datasets()}
    assert set(BUNDLED) <= set(infos)
    assert {"bms-pos-standin", "kosarak-standin"} <= set(infos)
    for name in BUNDLED:
        info, d = infos[name], loaded[name]
        assert info.bundled and info.n == d.n and info.provenance
        if isinstance(d, Table):
            assert info.kind == "table"
            assert info.attributes == tuple(zip(d.attributes, d.domain_sizes, strict=True))
        else:
            assert info.kind == "sets" and info.attributes == (("items", d.domain.size),)
        assert info.as_dict()["name"] == name
    assert not infos["kosarak-standin"].bundled


def test_names_are_case_insensitive():
    assert load("ADULT").n == EXPECTED_N["adult"]
    assert load("Census_Income").n == EXPECTED_N["census-income"]


def test_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match="unknown dataset 'nope'") as info:
        load("nope")
    for name in dataset_names():
        assert name in str(info.value)


def test_bad_options():
    with pytest.raises(ValueError, match="takes no options"):
        load("adult", seed=1)
    with pytest.raises(ValueError, match="unknown options"):
        load("bms-pos-standin", size=3)


def test_standin_through_load():
    s = load("kosarak-standin", n=500, seed=3)
    assert isinstance(s, SetData) and s.n == 500 and s.domain.size == 41_270


def test_adult_itemsets(loaded):
    a = loaded["adult"]
    sets = table_to_itemsets(a)
    assert sets.n == a.n and sets.domain.size == sum(ADULT_SIZES.values())
    assert np.all(sets.lengths == len(ADULT_SIZES))
    assert sets.domain.labels[0] == "age=17"
    lean = table_to_itemsets(a, exclude={"capital-gain": ["0"], "capital-loss": ["0"]})
    assert lean.domain.size == sets.domain.size - 2
    assert lean.lengths.min() == 12 and lean.lengths.max() == 13
