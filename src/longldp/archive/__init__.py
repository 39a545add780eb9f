"""Report archives: a Parquet layout for stored reports, a simulated-population writer, and
aggregation of archives of any size, locally (bounded memory) or on a Dask cluster.

See ``docs/scale-out.md``. This package needs pyarrow (the ``data`` or ``dask`` extra); Dask needs
``distributed`` (the ``dask`` extra).
"""

from longldp.archive.aggregate import (
    ArchiveCounts,
    aggregate_archive,
    archive_files,
    local_cluster,
    write_estimates,
)
from longldp.archive.layout import (
    ArchiveInfo,
    ArchiveWriter,
    archive_bytes,
    archive_schema,
    read_info,
    row_groups,
)
from longldp.archive.simulate import archive_size, population_values, simulate_reports

__all__ = [
    "ArchiveCounts",
    "ArchiveInfo",
    "ArchiveWriter",
    "aggregate_archive",
    "archive_bytes",
    "archive_files",
    "archive_schema",
    "archive_size",
    "local_cluster",
    "population_values",
    "read_info",
    "row_groups",
    "simulate_reports",
    "write_estimates",
]
