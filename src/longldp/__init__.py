"""longldp: local differential privacy over longitudinal data.

Memoizing frequency oracles with exact privacy parameters, unbiased estimators and exact
variances; post-processing; and (in later layers) simulation engines, applications and
experiments. See docs/design.md for the layers and docs/math.md for the math.

``longldp.protocols`` is the package :mod:`longldp.protocols`, and calling it,
``ll.protocols()``, lists the registry (:func:`longldp.protocols.list_protocols`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from longldp import postprocess, privacy
from longldp import protocols as _protocols_package
from longldp.protocols import (
    FrequencyOracle,
    get_protocol_class,
    list_protocols,
    protocol,
    protocol_from_spec,
)

__version__ = "0.1.0"


class CallablePackage:
    """A package seen through the top-level package: every attribute is the package's, and
    calling it calls ``call`` (``ll.protocols()`` lists the registry). The package module itself
    stays an ordinary module (``import longldp.protocols`` and ``from longldp.protocols import
    X`` reach it directly)."""

    def __init__(self, package: ModuleType, call: Any):
        object.__setattr__(self, "_package", package)
        object.__setattr__(self, "_call", call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._package, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._package, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._package, name)

    def __dir__(self) -> list[str]:
        return dir(self._package)

    def __repr__(self) -> str:
        return f"<package {self._package.__name__!r}, callable: {self._call.__name__}()>"


#: The package :mod:`longldp.protocols`, callable: ``ll.protocols()`` lists the registry.
protocols = CallablePackage(_protocols_package, list_protocols)

__all__ = [
    "FrequencyOracle",
    "__version__",
    "get_protocol_class",
    "list_protocols",
    "postprocess",
    "privacy",
    "protocol",
    "protocol_from_spec",
    "protocols",
]
