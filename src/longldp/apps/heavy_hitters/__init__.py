"""Heavy hitters over values nobody listed (docs/heavy_hitters.md, docs/math.md §21).

- :func:`find`: PEM, TreeHist or SFP discovery of the top-k items and their frequencies, each
  round's users and budget stated (:class:`HeavyHitters`, :class:`Round`);
- :func:`find_over_time`: PEM over epochs with memoized prefix reports and its accounting;
- :func:`detection_probability`: the stated probability of finding an item of frequency f;
- :class:`RowStore`: a sketch's reports stored by row on ingestion, so that aggregation reads
  each row's reports contiguously (the CMS aggregation bottleneck, benchmarks/bench_sketch.py).
"""

from longldp.apps.heavy_hitters.discover import (
    ALPHABET,
    METHODS,
    HeavyHitters,
    OverTime,
    Round,
    detection_probability,
    find,
    find_over_time,
    integer_codec,
    text_codec,
)
from longldp.apps.heavy_hitters.store import RowStore

__all__ = [
    "ALPHABET",
    "METHODS",
    "HeavyHitters",
    "OverTime",
    "Round",
    "RowStore",
    "detection_probability",
    "find",
    "find_over_time",
    "integer_codec",
    "text_codec",
]
