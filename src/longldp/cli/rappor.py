"""``longldp rappor decode``: decode google/rappor counts against a candidate map, or learn
the candidates from n-gram reports first (RAPPOR with the unknown, docs/math.md §21.10)."""

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
    ngrams: Annotated[
        Path | None,
        typer.Option(
            help="No candidate list: n-gram reports CSV (pair,cohort_a,irr_a,cohort_b,irr_b) "
            "to learn the strings from (RAPPOR with the unknown)."
        ),
    ] = None,
    ngram_params: Annotated[
        Path | None, typer.Option(help="Params CSV of the n-gram reports (default: --params).")
    ] = None,
    alphabet: Annotated[
        str, typer.Option(help="With --ngrams: the strings' alphabet.")
    ] = "abcdefghijklmnopqrstuvwxyz",
    length: Annotated[int, typer.Option(help="With --ngrams: the declared string length.")] = 8,
    ngram: Annotated[int, typer.Option(help="With --ngrams: the n-gram size.")] = 2,
    max_candidates: Annotated[
        int, typer.Option(help="With --ngrams: most candidate strings built.")
    ] = 5000,
) -> None:
    """Which candidate strings the reports hold, with counts, intervals and significance;
    without a candidate list (--ngrams), the candidates are learned from n-gram reports first."""
    from longldp.apps.rappor import files
    from longldp.apps.rappor.decode import decode
    from longldp.apps.rappor.report import plot_estimates, rich_table

    for option, path in (
        ("--counts", counts),
        ("--params", params),
        ("--map", map_file),
        ("--candidates", candidates),
        ("--ngrams", ngrams),
        ("--ngram-params", ngram_params),
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
    given = [
        o for o, v in (("--map", map_file), ("--candidates", candidates), ("--ngrams", ngrams)) if v
    ]
    if len(given) != 1:
        raise ValueError(
            "rappor decode: give exactly one of --map, --candidates and --ngrams (RAPPOR with "
            f"the unknown); got {', '.join(given) or 'none'}."
        )
    if ngrams is not None:
        _decode_unknown(
            proto,
            counts,
            ngrams,
            ngram_params,
            alphabet,
            length,
            ngram,
            max_candidates,
            correction,
            alpha,
            selection,
            seed,
            out,
            limit,
        )
        return
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


def _decode_unknown(
    proto,
    counts,
    ngrams,
    ngram_params,
    alphabet,
    length,
    ngram,
    max_candidates,
    correction,
    alpha,
    selection,
    seed,
    out,
    limit,
) -> None:
    """``--ngrams``: learn the dictionary from the n-gram reports, then decode (math §21.10)."""
    from longldp.apps.rappor import files, unknown
    from longldp.apps.rappor.report import rich_table

    scheme = unknown.NgramScheme(alphabet, length, ngram)
    gram_proto = files.read_params(ngram_params) if ngram_params is not None else proto
    col = unknown.from_files(scheme, proto, files.read_counts(counts, proto), gram_proto, ngrams)
    learned = unknown.learn(
        col,
        alpha=alpha,
        correction=correction,
        max_candidates=max_candidates,
        selection=selection,
        seed=seed,
    )
    con = console()
    con.print(
        f"Learned {len(learned.candidates)} candidate string(s) from the n-grams of "
        f"{col.pairs.size} clients"
        + (f" ({'; '.join(learned.notes)})" if learned.notes else "")
        + "."
    )
    con.print(rich_table(learned.result, limit=limit))
    if out is not None:
        out.write_text(
            json.dumps(
                {
                    "summary": learned.result.summary,
                    "rows": learned.result.table(False),
                    "candidates": learned.candidates,
                    "ngrams": {str(p): g for p, g in learned.grams.items()},
                    "notes": learned.notes,
                },
                indent=1,
            )
        )


def register(app: typer.Typer) -> None:
    """Add the ``rappor`` sub-group (``longldp rappor decode``)."""
    app.add_typer(group, name="rappor")
