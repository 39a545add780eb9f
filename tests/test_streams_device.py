"""A w-event device (docs/streams.md): reports at the budget the server's plan gives, keeps its
window's spending in its state file across restarts, refuses a report past eps_window."""

from __future__ import annotations

import numpy as np
import pytest

import longldp as ll
from longldp.client import BudgetExceededError, DeviceClient
from longldp.protocols import wire


def test_w_event_device_keeps_its_window_across_restarts(tmp_path):
    proto = ll.protocol("LSP", k=4, eps_window=2.0, w=3)
    path = tmp_path / "device.json"
    dev = DeviceClient(path, proto, "c1")
    with pytest.raises(ValueError, match="planned by the server"):
        dev.report(1, 0)
    dev.report(1, 0, {"eps": 1.5})
    again = DeviceClient(path)  # restart: the spending comes back from the state file
    assert again.window_spent(0) == pytest.approx(1.5)
    with pytest.raises(BudgetExceededError, match="past eps_window"):
        again.report(2, 2, {"eps": 1.0})  # epochs 0..2 would hold 2.5
    assert again.spent_budget.epsilon == pytest.approx(1.5)  # nothing was spent
    again.report(2, 3, {"eps": 2.0})  # epoch 0 left the window
    assert again.window_spent(3) == pytest.approx(2.0)
    assert DeviceClient(path).spent_budget.epsilon == pytest.approx(3.5)
    # The queued reports are the collection's wire reports: its header, one GRR symbol each.
    batch = again.queue
    assert len(batch) == 2
    decoded = proto.decode_reports(batch[-1].report)
    assert decoded.shape == (1,) and 0 <= int(decoded[0]) < 4
    with pytest.raises(ValueError, match=r"'eps' must be a number in \(0, 2\]"):
        again.report(1, 9, {"eps": 3.0})


def test_w_event_device_reports_at_the_planned_budget():
    """The symbol a device sends at plan b keeps its value with GRR's probability at b."""
    import tempfile

    proto = ll.protocol("LPU", k=3, eps_window=2.0, w=2)
    keep_b = ll.protocols.GRR(k=3, eps=0.5).p1
    with tempfile.TemporaryDirectory() as d:
        dev = DeviceClient(f"{d}/s.json", proto, "c", queue_limit=10_000)
        trials = 200
        kept = 0
        for epoch in range(0, 2 * trials, 2):
            dev.report(0, epoch, {"eps": 0.5})
        for q in dev.queue:
            kept += int(proto.decode_reports(q.report)[0] == 0)
    se = np.sqrt(keep_b * (1 - keep_b) / trials)
    assert abs(kept / trials - keep_b) < 5 * se
    assert wire.PROTOCOL_IDS["LPU"] == 44
