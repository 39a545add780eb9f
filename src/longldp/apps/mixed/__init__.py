"""Mixed multidimensional collection: numeric and categorical attributes of the same users
(docs/math.md §20.10, docs/numeric.md).

:class:`MixedCollection` plans and runs a collection (Wang et al.'s sampling of attributes, SPL,
SMP, and ALLOMFREE's adaptive choice extended to numeric attributes); :func:`mixed_table` reads
the bundled real data with both kinds of attributes.
"""

from longldp.apps.mixed.collection import (
    METHODS,
    CategoricalAttribute,
    MixedCollection,
    MixedResult,
    NumericAttribute,
    numeric_chain_choice,
)
from longldp.apps.mixed.data import mixed_table

__all__ = [
    "METHODS",
    "CategoricalAttribute",
    "MixedCollection",
    "MixedResult",
    "NumericAttribute",
    "mixed_table",
    "numeric_chain_choice",
]
