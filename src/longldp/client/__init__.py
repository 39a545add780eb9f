"""The device client: randomizes on the device, keeps its memos and budget, uploads reports.

:class:`DeviceClient` (:mod:`longldp.client.device`) is what an app embeds (docs/client.md);
:mod:`longldp.client.upload` sends its queue to a collection server. Dependencies: the core
(NumPy) and the standard library (``urllib`` for HTTP).
"""

from longldp.client.device import BudgetExceededError, DeviceClient, QueuedReport

__all__ = ["BudgetExceededError", "DeviceClient", "QueuedReport"]
