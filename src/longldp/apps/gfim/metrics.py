"""GFIM's metrics (thesis §4.2), on the set-valued apps' exact ground truth.

With V the true top-k items and V̂ the output:

- precision = |V ∩ V̂|/k;
- RE = median over v ∈ V of |f̂(v) − f(v)|/f(v), with f̂(v) the algorithm's estimate of v even
  when v ∉ V̂ (``missing="estimate"``, default), or 0 for v ∉ V̂ (``missing="zero"``, the
  reading of the thesis's figures). RE can exceed 1.

Both are computed per timestamp and averaged over timestamps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from longldp import _validate as check
from longldp.apps.gfim.gfim import GFIMResult
from longldp.apps.setvalued.metrics import SetValuedTruth, precision_recall_f1, setvalued_truth

OWNER = "GFIM metrics"
MISSING = ("estimate", "zero")


def relative_error(
    f_hat: np.ndarray, f_true: np.ndarray, true_top: np.ndarray, output: np.ndarray, missing: str
) -> float:
    """Median relative error over the true top-k (see the module docstring)."""
    missing = check.choice(OWNER, "missing", missing, MISSING)
    f = f_true[true_top]
    if np.any(f <= 0):
        raise ValueError(
            f"{OWNER}: the true top-k holds items of frequency 0 (k exceeds the items held); "
            "the relative error is undefined."
        )
    est = np.asarray(f_hat, dtype=np.float64)[true_top]
    if missing == "zero":
        est = np.where(np.isin(true_top, output), est, 0.0)
    return float(np.median(np.abs(est - f) / f))


def evaluate(
    result: GFIMResult, truth: SetValuedTruth | Any, missing: str = "estimate"
) -> dict[str, Any]:
    """Precision and RE of every timestamp and their averages.

    Parameters
    ----------
    result : GFIMResult
        From GFIM or LDPMiner-SH.
    truth : SetValuedTruth or data
        :func:`longldp.apps.setvalued.metrics.setvalued_truth` of the data (or the data).
    missing : {"estimate", "zero"}, default="estimate"

    Returns
    -------
    dict
        ``precision``, ``re`` (arrays over t) and ``precision_avg``, ``re_avg``.
    """
    if not isinstance(truth, SetValuedTruth):
        truth = setvalued_truth(truth)
    if truth.tau != len(result.topk):
        raise ValueError(
            f"{OWNER}: truth has {truth.tau} timestamps, the result {len(result.topk)}."
        )
    k = result.mining.k
    prec, re = [], []
    for top, est, tt in zip(result.topk, result.estimates, truth.timestamps, strict=True):
        true_keys = tt.top_items(k)
        prec.append(precision_recall_f1(top.keys, true_keys)[0])
        true_top = np.array([x[0] for x in true_keys], dtype=np.int64)
        f_true = tt.item_counts / tt.n
        re.append(relative_error(est["f_hat"], f_true, true_top, top.items, missing))
    p, r = np.asarray(prec), np.asarray(re)
    return {"precision": p, "re": r, "precision_avg": float(p.mean()), "re_avg": float(r.mean())}
