"""``longldp heavy-hitters``: discover the frequent items of a file of items, one per line, by
PEM, TreeHist or SFP simulated at ε (docs/heavy_hitters.md, docs/math.md §21.6–§21.7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from longldp.cli._common import console, input_file, output_file


def heavy_hitters_cmd(
    items: Annotated[
        Path,
        typer.Argument(
            help="Items, one per line: UTF-8 text (with --length) or decimal integers (with "
            "--bits)."
        ),
    ],
    eps: Annotated[float, typer.Option(help="Each device's ε.")] = 4.0,
    method: Annotated[str, typer.Option(help="pem, treehist or sfp.")] = "pem",
    k: Annotated[int, typer.Option(help="Candidates kept per round (the top k).")] = 10,
    length: Annotated[int, typer.Option(help="Text: the declared length (symbols).")] = 10,
    alphabet: Annotated[
        str | None,
        typer.Option(help="Text: the alphabet (default: a–z, 0–9 and '-', the library's)."),
    ] = None,
    bits: Annotated[
        int | None, typer.Option(help="Integers of this many bits instead of text.")
    ] = None,
    select: Annotated[str, typer.Option(help="top (the k largest) or threshold.")] = "top",
    alpha: Annotated[
        float, typer.Option(help="threshold: expected false candidates per round.")
    ] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the simulated devices and rounds.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Write what was found as JSON.")] = None,
) -> None:
    """Simulate devices holding the file's items (one device per line) and find the frequent
    ones with their frequencies, standard errors and 95% intervals, and each round's devices,
    ε and candidates. An empty file, k above the domain's size, a string over the declared
    length or not in the alphabet, or bytes that are not UTF-8 are refused."""
    from longldp.apps import heavy_hitters as hh

    input_file(items, "ITEMS")
    if out is not None:
        output_file(out, "--out", (".json",))
    lines = items.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":  # the newline that ends the last line
        lines.pop()
    if bits is None:
        codec = hh.text_codec(hh.ALPHABET if alphabet is None else alphabet, length)
        values: object = [line.removesuffix(b"\r") for line in lines]
    else:
        codec = hh.integer_codec(bits)
        values = [_integer(line, i, bits) for i, line in enumerate(lines)]
    found = hh.find(
        values, eps, method=method, codec=codec, k=k, select=select, alpha=alpha, rng=seed
    )
    table = found.as_dict()
    if out is not None:
        out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    con = console()
    con.print(
        f"{found.method}: {found.n:,} devices, ε = {found.epsilon:g} per device; "
        f"{len(found.items)} item(s) found:"
    )
    for row in table["items"]:
        con.print(
            f"  {row['item']!s:>20}  {row['estimate']:.4f} ± {row['se']:.4f}  "
            f"[{row['lower']:.4f}, {row['upper']:.4f}]",
            markup=False,
        )
    for r in found.rounds:
        con.print(
            f"round {r.index} ({r.what}, {r.bits} bits): {r.users:,} devices at ε = "
            f"{r.epsilon:g}, {r.candidates:,} candidates, {r.kept} kept",
            markup=False,
        )


def _integer(line: bytes, index: int, bits: int) -> int:
    """Line ``index`` as a decimal integer in [0, 2^bits) (bits ≤ 64: the codec checks it)."""
    text = line.strip()
    if not text.isdigit() or (bits <= 64 and int(text) >> bits):
        raise ValueError(
            f"heavy-hitters: line {index + 1} must be a decimal integer in [0, 2^{bits}) (with "
            f"--bits {bits}); got {line[:40]!r}."
        )
    return int(text)


def register(app: typer.Typer) -> None:
    app.command("heavy-hitters")(heavy_hitters_cmd)
