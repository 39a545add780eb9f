"""Write the reports a simulated population would send, as an archive (bounded memory).

Users are processed in chunks: each chunk draws its values, keeps its own memos for all its
epochs (memoization is per user, and users of different chunks share nothing), and writes one
row group per epoch. Memory is bounded by the chunk, not by the population, so an archive of
10⁸ reports is written in a few hundred megabytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp.archive.layout import REPORT_ID_BYTES, ArchiveWriter
from longldp.protocols import FrequencyOracle

__all__ = ["archive_size", "population_values", "simulate_reports"]

DISTRIBUTIONS = ("zipf", "uniform")
#: Epochs are stored as uint32 (`longldp.archive.layout`).
MAX_EPOCHS = 2**32
#: Bytes an archive row takes beside its report: the 16-byte id and Parquet's per-row share
#: of the dictionary-encoded epoch and the null cohort (measured: under 2 bytes).
ROW_OVERHEAD_BYTES = 18


def archive_size(proto: FrequencyOracle, n: int, epochs: int) -> int:
    """Bytes of the archive `simulate_reports` writes for ``n`` users over ``epochs`` epochs
    (reports are stored uncompressed, so the size is known before writing)."""
    return int(n) * int(epochs) * (int(proto.wire_size) + ROW_OVERHEAD_BYTES)


def population_values(
    k: int, n: int, distribution: str, rng: np.random.Generator, zipf_s: float = 1.1
) -> NDArray[np.int64]:
    """``n`` values on [0, k): Zipf (P(v) ∝ (v+1)^-s) or uniform."""
    if distribution == "uniform":
        return rng.integers(0, k, size=n)
    if distribution == "zipf":
        weights = (np.arange(1, k + 1, dtype=np.float64)) ** -float(zipf_s)
        cdf = np.cumsum(weights / weights.sum())
        cdf[-1] = 1.0
        return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)
    raise ValueError(
        f"simulate_reports: 'distribution' must be one of {', '.join(DISTRIBUTIONS)}; "
        f"got {distribution!r}."
    )


def simulate_reports(
    proto: FrequencyOracle,
    path: str | Path,
    *,
    n: int,
    epochs: int = 1,
    distribution: str = "zipf",
    change: float = 0.0,
    chunk_users: int = 1_000_000,
    collection: str = "simulated",
    domain: int | None = None,
    rng: Any = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Simulate ``n`` users reporting at ``epochs`` epochs and write their reports to ``path``.

    Parameters
    ----------
    proto : FrequencyOracle
        The protocol every client runs (memoizing clients for longitudinal protocols).
    path : str or Path
        Archive file to write (atomically).
    n : int
        Users; each sends one report per epoch.
    epochs : int, default=1
        Collection periods.
    distribution : {"zipf", "uniform"}, default="zipf"
        Law of the users' values.
    change : float, default=0.0
        Share of users who draw a new value at each epoch after the first.
    chunk_users : int, default=1_000_000
        Users simulated at once (the memory bound and the row-group size).
    collection : str, default="simulated"
        Collection name recorded in the archive.
    domain : int, optional
        Number of distinct values (default ``proto.domain_size``). Bloom RAPPOR takes strings:
        its users hold the strings ``"v1"`` … ``"v<domain>"`` (default 100), as in the RAPPOR
        paper's §5.2 simulation.
    rng : Generator, int or None
        Simulation randomness (report ids included).
    progress : callable, optional
        Called with the number of reports written so far after every row group.

    Returns
    -------
    dict
        ``reports`` written, the ``true_counts`` per epoch (epochs × domain) and, for strings,
        the ``strings`` the values index.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"simulate_reports: 'n' must be an integer >= 1; got {n!r}.")
    if int(epochs) != epochs or not 1 <= epochs <= MAX_EPOCHS:
        raise ValueError(
            f"simulate_reports: 'epochs' must be an integer in [1, {MAX_EPOCHS}] (epochs are "
            f"stored as uint32); got {epochs!r}."
        )
    if not 0.0 <= float(change) <= 1.0:
        raise ValueError(f"simulate_reports: 'change' must be in [0, 1]; got {change!r}.")
    if int(chunk_users) != chunk_users or chunk_users < 1:
        raise ValueError(
            f"simulate_reports: 'chunk_users' must be an integer >= 1; got {chunk_users!r}."
        )
    gen = np.random.default_rng(rng)
    strings = proto.domain_size is None  # Bloom RAPPOR hashes strings
    size_of_domain = int(domain) if domain is not None else (proto.domain_size or 100)
    if size_of_domain < 1 or (not strings and size_of_domain > proto.domain_size):
        raise ValueError(
            f"simulate_reports: 'domain' must be in [1, {proto.domain_size}] for {proto.name}; "
            f"got {domain!r}."
        )
    names = (
        np.array([f"v{i + 1}" for i in range(size_of_domain)], dtype=object) if strings else None
    )
    truth = np.zeros((int(epochs), size_of_domain), dtype=np.int64)
    written = 0
    with ArchiveWriter(path, proto, collection) as writer:
        for start in range(0, int(n), int(chunk_users)):
            size = min(int(chunk_users), int(n) - start)
            values = population_values(size_of_domain, size, distribution, gen)
            memo = proto.new_memo(size)
            for epoch in range(int(epochs)):
                if epoch and change > 0:
                    movers = gen.random(size) < change
                    values = values.copy()
                    values[movers] = population_values(
                        size_of_domain, int(movers.sum()), distribution, gen
                    )
                truth[epoch] += np.bincount(values, minlength=size_of_domain)
                held = names[values] if names is not None else values
                reports = proto.perturb(held, memo, gen)
                wire = proto.encode_reports(reports)
                ids = gen.integers(0, 256, size=(size, REPORT_ID_BYTES), dtype=np.uint8)
                fields = getattr(reports, "dtype", np.dtype(np.uint8)).names or ()
                cohorts = reports["cohort"] if "cohort" in fields else None
                writer.write(epoch, ids, _wire_rows(wire, proto.wire_size), cohorts)
                written += size
                if progress is not None:
                    progress(written)
    result: dict[str, Any] = {"reports": int(n) * int(epochs), "true_counts": truth}
    if names is not None:
        result["strings"] = list(names)
    return result


def _wire_rows(wire: Any, width: int) -> NDArray[np.uint8]:
    arr = np.frombuffer(wire, dtype=np.uint8) if isinstance(wire, (bytes, bytearray)) else wire
    return np.asarray(arr, dtype=np.uint8).reshape(-1, width)
