"""Study files: read a TOML study, check every key, return a `Study`.

A study file is one TOML table. The keys every kind shares are

==============  ========  =====================================================================
key             required  meaning
==============  ========  =====================================================================
``name``        yes       the study's name (a column of the results, the default output folder)
``kind``        no        ``"standalone"`` (default) or another registered kind
``seed``        yes       base seed (integer >= 0) of every random stream of the study
``repetitions`` yes       repetitions of every cell (integer >= 1)
``description`` no        free text
==============  ========  =====================================================================

and each kind adds its own keys (``longldp.experiments.kinds.standalone`` for ``"standalone"``).
The file is read with `tomllib`; an unknown key, a missing key, an unknown dataset, attribute
or protocol, an empty grid or a bad number raises `ValueError` naming the key and what is
allowed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longldp.experiments import _schema as sc
from longldp.experiments.kinds import StudyKind, get_kind

__all__ = ["COMMON_KEYS", "Study", "load_study", "parse_study"]

COMMON_KEYS: tuple[sc.Key, ...] = (
    sc.Key("name", sc.string, required=True),
    sc.Key("kind", sc.string, default="standalone"),
    sc.Key("seed", sc.integer(0), required=True),
    sc.Key("repetitions", sc.integer(1), required=True),
    sc.Key("description", sc.optional_string, default=""),
)


@dataclass(frozen=True)
class Study:
    """A checked study: the common keys, the kind's spec and the document it came from.

    Attributes
    ----------
    name : str
        The study's name.
    kind : str
        Name of its kind (`longldp.experiments.kinds`).
    seed : int
        Base seed: entropy of the root `numpy.random.SeedSequence`.
    repetitions : int
        Repetitions of every cell.
    description : str
        Free text.
    spec : object
        What the kind's ``parse`` returned.
    document : mapping
        The TOML document as read (recorded beside the results).
    out_dir : Path or None
        The output folder of the run (set by `longldp.experiments.run_study`; None when the
        study is only parsed). Kinds that save files beside the results (the felip workloads)
        put them there.
    """

    name: str
    kind: str
    seed: int
    repetitions: int
    description: str
    spec: Any
    document: Mapping[str, Any]
    out_dir: Path | None = None

    @property
    def study_kind(self) -> StudyKind:
        """The kind object that enumerates and runs this study's cells."""
        return get_kind(self.kind)


def parse_study(document: Mapping[str, Any], where: str = "study") -> Study:
    """Check a study given as a parsed TOML document.

    Parameters
    ----------
    document : mapping
        The study's keys (what `tomllib.load` returns).
    where : str, default="study"
        Name used at the start of error messages (the file name, when read from a file).

    Returns
    -------
    Study

    Raises
    ------
    ValueError
        For any key that is unknown, missing or out of range (the message names the key and
        what is allowed).
    """
    if not isinstance(document, Mapping):
        raise ValueError(f"{where}: expected a table of keys; got {document!r}.")
    kind_name = document.get("kind", "standalone")
    if not isinstance(kind_name, str):
        raise sc.fail(where, "kind", "a string naming a kind of study", kind_name)
    try:
        kind = get_kind(kind_name.strip())
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    values = sc.check_table(where, document, (*COMMON_KEYS, *kind.keys))
    common = {k.name: values.pop(k.name) for k in COMMON_KEYS}
    spec = kind.parse(values, where)
    return Study(
        name=common["name"],
        kind=kind.name,
        seed=common["seed"],
        repetitions=common["repetitions"],
        description=common["description"],
        spec=spec,
        document=dict(document),
    )


def load_study(path: str | Path) -> Study:
    """Read and check the TOML study at ``path`` (see the module docstring for the keys)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            document = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"study file {str(p)!r} does not exist.") from None
    except IsADirectoryError:
        raise ValueError(f"study file {str(p)!r} is a folder; give a TOML file.") from None
    except PermissionError:
        raise ValueError(f"study file {str(p)!r} cannot be read (permission denied).") from None
    except UnicodeDecodeError:
        raise ValueError(f"study file {str(p)!r} is not a TOML text file (not UTF-8).") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"study file {p}: not valid TOML: {err}.") from None
    return parse_study(document, where=p.name)
