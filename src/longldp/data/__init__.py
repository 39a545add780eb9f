"""Data layer of longldp: containers, bundled real data, loaders, generators, interpolation.

Layering (design §1): this package imports numpy, pyarrow and ``longldp.privacy`` only.

Contents
--------
Containers (`longldp.data.containers`)
    `Domain`, `Table` (single-valued attributes), `SetData` (set-valued CSR).
Bundled real data (`longldp.data.registry`)
    `load`, `list_datasets`, `dataset_names`, `verify_checksums`; provenance in ``DATA.md``.
Public file formats (`longldp.data.fimi`)
    `read_fimi`, `write_fimi` for BMS-POS, Kosarak, retail and Quest ``.dat`` files.
Synthetic data (`longldp.data.synthetic`, `longldp.data.standins`)
    `zipf`, `uniform`, `gaussian` (+ exact ``*_probabilities``); stand-ins
    `bms_pos_standin`, `kosarak_standin`; IBM-Quest-style `quest`, `quest_from_name`.
Set-valued views of tables (`longldp.data.itemsets`)
    `table_to_itemsets` (one item per attribute=value pair).
Real strings (`longldp.data.names`)
    `seattle_pet_names` (names and counts, for RAPPOR's string studies), `english_words`
    (word frequencies, for the heavy-hitter studies).
Longitudinal interpolation (`longldp.data.longitudinal`)
    `to_longitudinal`, `permutations`, `LongitudinalTable`, `LongitudinalSets`.
Data that changes (`longldp.data.panels`, `longldp.data.streams`)
    `load_panel` (the bundled wage panel: industry and occupation of 545 men, 1980–1987);
    `changing_stream`, `change_rates` (controlled change rates: steady, periodic, bursty,
    drifting), `binary_stream`, `ldp_ids_curve` (the LDP-IDS synthetic streams).
"""

from longldp.data.containers import CODE_DTYPE, INDPTR_DTYPE, Domain, SetData, Table
from longldp.data.fimi import read_fimi, write_fimi
from longldp.data.itemsets import table_to_itemsets
from longldp.data.longitudinal import (
    LongitudinalSets,
    LongitudinalTable,
    permutations,
    to_longitudinal,
)
from longldp.data.names import english_words, seattle_pet_names
from longldp.data.panels import Panel, load_panel
from longldp.data.registry import DatasetInfo, dataset_names, list_datasets, load, verify_checksums
from longldp.data.standins import (
    BMS_POS,
    KOSARAK,
    StandinSpec,
    bms_pos_standin,
    kosarak_standin,
    quest,
    quest_from_name,
    sample_sets,
    standin,
)
from longldp.data.streams import binary_stream, change_rates, changing_stream, ldp_ids_curve
from longldp.data.synthetic import (
    gaussian,
    gaussian_probabilities,
    sample_codes,
    uniform,
    zipf,
    zipf_probabilities,
)

__all__ = [
    "BMS_POS",
    "CODE_DTYPE",
    "INDPTR_DTYPE",
    "KOSARAK",
    "DatasetInfo",
    "Domain",
    "LongitudinalSets",
    "LongitudinalTable",
    "Panel",
    "SetData",
    "StandinSpec",
    "Table",
    "binary_stream",
    "bms_pos_standin",
    "change_rates",
    "changing_stream",
    "dataset_names",
    "english_words",
    "gaussian",
    "gaussian_probabilities",
    "kosarak_standin",
    "ldp_ids_curve",
    "list_datasets",
    "load",
    "load_panel",
    "permutations",
    "quest",
    "quest_from_name",
    "read_fimi",
    "sample_codes",
    "sample_sets",
    "seattle_pet_names",
    "standin",
    "table_to_itemsets",
    "to_longitudinal",
    "uniform",
    "verify_checksums",
    "write_fimi",
    "zipf",
    "zipf_probabilities",
]
