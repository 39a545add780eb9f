"""``longldp rappor decode``: decode google/rappor counts against a candidate map."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from longldp.cli._common import FIGURE_SUFFIXES, console, input_file, output_file

group = typer.Typer(help="RAPPOR: decode strings collected with RAPPOR.", no_args_is_help=True)


@group.command("decode")
def decode_cmd(
    counts: Annotated[Path, typer.Option(help="Counts CSV (m rows: N_j, then k bit counts).")],
    params: Annotated[Path, typer.Option(help="Params CSV (header k,h,m,p,q,f).")],
    map_file: Annotated[
        Path | None, typer.Option("--map", help="Map CSV (string, h·m 1-based positions).")
    ] = None,
    candidates: Annotated[
        Path | None, typer.Option(help="Candidate strings, one per line (hashed here).")
    ] = None,
    correction: Annotated[str, typer.Option(help="bh, bonferroni or none.")] = "bh",
    alpha: Annotated[float, typer.Option(help="Significance level.")] = 0.05,
    procedure: Annotated[str, typer.Option(help="A (the paper) or B (google/rappor).")] = "A",
    selection: Annotated[str, typer.Option(help="lasso-cv, lasso-sigma or nn-lasso.")] = (
        "lasso-cv"
    ),
    seed: Annotated[int, typer.Option(help="Seed of the CV folds / resampling.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Write every candidate's row as JSON.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Plot the detected strings to this file (.png, .pdf or .svg)."),
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows shown in the table.")] = 50,
) -> None:
    """Which candidate strings the reports hold, with counts, intervals and significance."""
    from longldp.apps.rappor import files
    from longldp.apps.rappor.decode import decode
    from longldp.apps.rappor.report import plot_estimates, rich_table

    for option, path in (
        ("--counts", counts),
        ("--params", params),
        ("--map", map_file),
        ("--candidates", candidates),
    ):
        if path is not None:
            input_file(path, option)
    if out is not None:
        output_file(out, "--out", (".json",))
    if plot is not None:
        output_file(plot, "--plot", FIGURE_SUFFIXES)
    if limit < 1:
        raise ValueError(f"'--limit' must be an integer >= 1; got {limit}.")
    proto = files.read_params(params)
    if (map_file is None) == (candidates is None):
        raise ValueError("rappor decode: give exactly one of --map and --candidates.")
    if map_file is not None:
        names, idx = files.read_map(map_file, proto)
    else:
        assert candidates is not None
        names = [s for s in candidates.read_text(encoding="utf-8").splitlines() if s]
        idx = None
    c = files.read_counts(counts, proto)
    result = decode(
        proto,
        c,
        names,
        bloom_map=idx,
        alpha=alpha,
        correction=correction,
        procedure=procedure.upper(),
        selection=selection,
        seed=seed,
    )
    console().print(rich_table(result, limit=limit))
    if out is not None:
        out.write_text(
            json.dumps({"summary": result.summary, "rows": result.table(False)}, indent=1)
        )
    if plot is not None:
        console().print(f"Plot written to {plot_estimates(result, plot)}.")


def register(app: typer.Typer) -> None:
    """Add the ``rappor`` sub-group (``longldp rappor decode``)."""
    app.add_typer(group, name="rappor")
