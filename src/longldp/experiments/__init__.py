"""Experiments: configurations → grids of runs → result tables → plots (docs/design.md §5).

A study is a TOML file (`load_study`); `run_study` runs its grid of cells on local processes
or a Dask cluster, saving each finished cell so that an interrupted run resumes, and writes
one Parquet table; `plot_results` draws figures from that table. Kinds of study plug in
through `longldp.experiments.kinds` (``"standalone"``: `longldp.experiments.kinds.standalone`).
See ``docs/experiments.md`` for the file format, the seeding scheme and the output columns.
"""

from longldp.experiments.config import Study, load_study, parse_study
from longldp.experiments.kinds import Cell, StudyKind, get_kind, kind_names, register_kind
from longldp.experiments.plot import plot_results, plot_study
from longldp.experiments.runner import RunReport, default_workers, run_study
from longldp.experiments.store import read_results
from longldp.experiments.summary import Summary, summarize

__all__ = [
    "Cell",
    "RunReport",
    "Study",
    "StudyKind",
    "Summary",
    "default_workers",
    "get_kind",
    "kind_names",
    "load_study",
    "parse_study",
    "plot_results",
    "plot_study",
    "read_results",
    "register_kind",
    "run_study",
    "summarize",
]
