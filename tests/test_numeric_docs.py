"""The examples of docs/numeric.md run as written (in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "numeric.md"


def test_numeric_page_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    est = namespace["est"]
    ages = namespace["ages"]
    # the HM estimate of the mean age is within 5 of its own standard errors of the truth
    assert abs(est.mean - ages.mean()) <= 5 * est.se  # type: ignore[attr-defined]
    # the split variance of the ages within 5 of its standard errors of their variance
    var = namespace["var"]
    assert abs(var.variance - ages.var()) <= 5 * var.se  # type: ignore[attr-defined]
