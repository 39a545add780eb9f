"""The device client: persistence, budget and upload around the protocol's one client path.

A :class:`DeviceClient` is what an app embeds (docs/client.md). The randomization is the
protocol's own :class:`~longldp.protocols.client.Client` with round 1 derived from a device
secret (:class:`~longldp.protocols.client.DerivedRound1`) and round 2 from the OS
(:class:`~longldp.protocols.SecureRandom`); this module only adds

- a **device secret** (32 bytes from ``os.urandom``, its own file or passed by the app from a
  keystore): deleting the memo store reproduces the same memos instead of drawing new ones, so
  an app reinstall cannot be used to average the permanent response away;
- a **state file** (memo keys, reports sent, the upload queue), saved atomically after every
  change and authenticated; a corrupt, modified or foreign file is refused with ``ValueError``;
- a **budget**: the spent ε (``proto.budget_spent``: min(t·ε1, d·ε∞), or t·ε for a protocol
  that memoizes nothing) is persisted, so it stays truthful across restarts; with
  ``max_epsilon`` a report that would exceed it is refused (:class:`BudgetExceededError`);
- an **upload queue**: every report gets a 16-byte id when created (its epoch, then 12 random
  bytes: :func:`longldp.protocols.wire.new_report_id`); retries reuse it,
  so the server counts it once (:mod:`longldp.client.upload`);
- the **credentials** a server issued at enrollment (device id and secret per server URL, kept
  in the state file; :meth:`DeviceClient.credential`, docs/server.md), which the uploader uses.

Dependencies: the core (NumPy) and the standard library.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from longldp import privacy
from longldp.client import _store
from longldp.protocols import (
    Client,
    DerivedRound1,
    FrequencyOracle,
    SecureRandom,
    protocol_from_spec,
    wire,
)

log = logging.getLogger("longldp.client")

#: Default bound of the upload queue (reports); the oldest is dropped, and logged, past it.
QUEUE_LIMIT = 1000


class BudgetExceededError(ValueError):
    """A report would make the spent ε exceed the client's ``max_epsilon``."""


@dataclass(frozen=True)
class QueuedReport:
    """One report waiting for the server's acknowledgement."""

    id: bytes
    epoch: int
    report: bytes


class DeviceClient:
    """One device's client for one collection.

    Parameters
    ----------
    state_path : path
        The state file (created if absent; refused if corrupt or foreign).
    proto : FrequencyOracle, optional
        The collection's protocol. Omitted: rebuilt from the state file, which must exist.
    collection : str, optional
        The collection's name on the server; part of the round-1 derivation, so two
        collections with equal parameters get independent memos. Omitted: the state file's
        (a new state: ``"default"``).
    secret_path : path, optional
        The device secret file (default: ``state_path`` with suffix ``.secret``), created from
        ``os.urandom`` if absent. Keep it where it outlives the state file.
    secret : bytes, optional
        The secret itself (e.g. from a platform keystore), instead of ``secret_path``.
    max_epsilon : float, optional
        Refuse any report that would make the spent ε exceed this.
    queue_limit : int
        Most reports kept unacknowledged; past it the oldest is dropped and logged.
    """

    def __init__(
        self,
        state_path: str | os.PathLike[str],
        proto: FrequencyOracle | None = None,
        collection: str | None = None,
        *,
        secret_path: str | os.PathLike[str] | None = None,
        secret: bytes | None = None,
        max_epsilon: float | None = None,
        queue_limit: int = QUEUE_LIMIT,
    ):
        self.path = Path(state_path)
        if secret is not None:
            if not isinstance(secret, bytes) or len(secret) != _store.SECRET_SIZE:
                raise ValueError(f"DeviceClient: 'secret' must be {_store.SECRET_SIZE} bytes.")
            self._secret = secret
        else:
            default = self.path.with_name(self.path.name + ".secret")
            self._secret = _store.load_or_create_secret(
                Path(secret_path) if secret_path is not None else default
            )
        if max_epsilon is not None and not (
            isinstance(max_epsilon, (int, float)) and max_epsilon > 0
        ):
            raise ValueError(f"DeviceClient: 'max_epsilon' must be positive; got {max_epsilon!r}.")
        if not isinstance(queue_limit, int) or queue_limit < 1:
            raise ValueError(
                f"DeviceClient: 'queue_limit' must be a positive int; got {queue_limit!r}."
            )
        if collection is not None and (not isinstance(collection, str) or not collection):
            raise ValueError("DeviceClient: 'collection' must be a non-empty string.")
        self.max_epsilon = None if max_epsilon is None else float(max_epsilon)
        self.queue_limit = queue_limit
        _store.remove_stale_temporaries(self.path)
        if self.path.exists():
            body = _store.load_state(self.path, self._secret)
            stored = protocol_from_spec(body["protocol"])
            if proto is not None and proto.spec() != stored.spec():
                raise ValueError(
                    f"device state {self.path}: it belongs to "
                    f"{wire.canonical_json(stored.spec()).decode()}, not to "
                    f"{wire.canonical_json(proto.spec()).decode()}; refusing it."
                )
            if collection is not None and body["collection"] != collection:
                raise ValueError(
                    f"device state {self.path}: it belongs to collection "
                    f"{body['collection']!r}, not {collection!r}; refusing it."
                )
            self.proto = stored
            self.collection = str(body["collection"])
            self._reports = int(body["reports"])
            self._memo_keys = {str(k) for k in body["memo_keys"]}
            # A planned (w-event) or history-dependent protocol: what every report cost, by
            # epoch (math §19.2, §19.6); a history-dependent one also its history.
            self._spending = [(int(e), float(b)) for e, b in body.get("spending", [])]
            history = body.get("history")
            self._dropped = int(body["dropped"])
            # Device credentials by server (docs/client-spec.md §7): kept as written.
            self._credentials = dict(body.get("credentials", {}))
            self._queue = [
                QueuedReport(bytes.fromhex(q["id"]), int(q["epoch"]), base64.b64decode(q["report"]))
                for q in body["queue"]
            ]
        else:
            if proto is None:
                raise ValueError(
                    f"DeviceClient: no state at {self.path}; pass the collection's protocol."
                )
            if proto.comparison_only:  # a research comparison, not a device's randomizer
                raise ValueError(
                    f"DeviceClient: {proto.name} is given for comparison only "
                    f"({proto.comparison_only}); no device runs it."
                )
            self.proto = proto
            self.collection = "default" if collection is None else collection
            self._reports = 0
            self._memo_keys: set[str] = set()
            self._spending: list[tuple[int, float]] = []
            history = None
            self._dropped = 0
            self._credentials: dict[str, Any] = {}
            self._queue: list[QueuedReport] = []
        context = DerivedRound1.context_of(self.proto, self.collection)
        self._client = Client(
            self.proto, round1=DerivedRound1(self._secret, context), round2=SecureRandom()
        )
        if history is not None:
            self._client.history = _history_from_json(self.proto, history)
        if not self.path.exists():
            self._save()

    # ------------------------------------------------------------------ randomization
    @property
    def user_state(self) -> dict[str, np.ndarray]:
        """The per-user protocol state (hash seed, sampled buckets, cohort), HMAC-derived."""
        return self._client.state

    def memo(self, value: Any) -> Any:
        """The round-1 payload of ``value``: HMAC-derived, the same after any restart or loss of
        the state file (one-shot protocols have none: ``ValueError``)."""
        if not self.proto.longitudinal:
            raise ValueError(f"{self.proto.name}: a one-shot protocol memoizes nothing.")
        return self._client.memo(value)

    def budget_after(self, value: Any) -> privacy.SpentBudget:
        """The spent budget if ``value`` were reported next."""
        key = self._client.memo_id(value)
        return self.proto.budget_spent(self._reports + 1, len(self._memo_keys | {key}))

    @property
    def _tracks_spending(self) -> bool:
        """Whether each report's cost is kept by epoch: a planned (w-event) protocol, whose
        plan sets it, or a history-dependent one, whose history does (math §19.2, §19.6)."""
        return self.proto.planned or self.proto.history is not None

    @property
    def history(self) -> dict[str, np.ndarray] | None:
        """A history-dependent protocol's history (a copy; None for every other protocol)."""
        held = self._client.history
        return None if held is None else {name: arr.copy() for name, arr in held.items()}

    @property
    def spent_budget(self) -> privacy.SpentBudget:
        """Reports sent t, distinct memos d and ε = min(t·ε1, d·ε∞) (one-shot: t·ε); for a
        planned (w-event) or history-dependent protocol, the sum of its reports' costs over
        the whole horizon, shown as every total is (:func:`longldp.privacy.spent_total`)."""
        if self._tracks_spending:
            total = privacy.spent_total(sum(b for _, b in self._spending))
            return privacy.SpentBudget(len(self._spending), 0, total)
        return self.proto.budget_spent(self._reports, len(self._memo_keys))

    def window_spent(self, epoch: int, extra: float = 0.0) -> float:
        """Most ε spent in a window of w consecutive epochs that contains ``epoch``, with
        ``extra`` more at ``epoch`` (a planned w-event protocol; docs/math.md §19.2)."""
        w = self.proto.accounting.window
        if w is None:
            raise ValueError(f"{self.proto.name}: its accounting has no window.")
        worst = 0.0
        for start in range(epoch - w + 1, epoch + 1):
            inside = sum(b for e, b in self._spending if start <= e < start + w)
            worst = max(worst, inside + extra)
        return worst

    def report(
        self, value: Any, epoch: int, plan: dict[str, Any] | None = None
    ) -> bytes | None:
        """Randomize ``value`` for ``epoch``, queue it, save the state; return its report id.

        A planned protocol (the LDP-IDS methods) takes the server's ``plan`` of the epoch
        (``{"eps": b}``): the report is drawn at budget b, and refused with
        :class:`BudgetExceededError` when it would make any window of w epochs containing
        ``epoch`` spend more than the protocol's ``eps_window`` (the device keeps its window's
        spending in its state file, across restarts).

        A history-dependent protocol (THRESH, CHANGES-TREE, DDRM) reports what its history
        and ``value`` give at ``epoch`` (THRESH with the server's plan of the round), keeps the
        history in its state file, and returns None at an epoch where it sends nothing (a
        CHANGES-TREE device between its node ends); epochs move forward.

        ``value`` is an int in [0, k) (RAPPOR with Bloom filters: a string). The state (reports
        sent, memos) is saved before the report can leave the device, so the budget is never
        understated. Raises :class:`BudgetExceededError` past ``max_epsilon`` (nothing is
        spent then).
        """
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            raise ValueError(f"DeviceClient: 'epoch' must be an int; got {epoch!r}.")
        if not 0 <= int(epoch) <= wire.MAX_EPOCH:
            raise ValueError(
                f"DeviceClient: 'epoch' must be in [0, {wire.MAX_EPOCH}]; got {epoch}."
            )
        key = self._client.memo_id(value)  # checks the value before anything else
        if self.proto.history is not None:
            return self._report_history(value, int(epoch), plan)
        if self.proto.planned:
            return self._report_planned(value, int(epoch), plan)
        self.proto.check_plan(plan)
        after = self.budget_after(value)
        if self.max_epsilon is not None and after.epsilon > self.max_epsilon * (1 + 1e-12):
            raise BudgetExceededError(
                f"{self.proto.name}: reporting would spend ε = {after.epsilon:.6g} in total, "
                f"past max_epsilon = {self.max_epsilon:.6g} (spent so far "
                f"{self.spent_budget.epsilon:.6g}); the report was not made."
            )
        report = self._client.report_bytes(value)

        def spend() -> None:
            if self.proto.longitudinal:
                self._memo_keys.add(key)

        return self._enqueue(int(epoch), report, spend)

    def _report_planned(self, value: Any, epoch: int, plan: dict[str, Any] | None) -> bytes:
        if plan is None:
            raise ValueError(
                f"{self.proto.name}: its rounds are planned by the server; pass the epoch's "
                f"plan (keys {', '.join(self.proto.plan_keys)})."
            )
        b = float(self.proto.check_plan(plan)["eps"])
        acc = self.proto.accounting
        worst = self.window_spent(epoch, b)
        if worst > acc.eps_window * (1 + 1e-12):
            raise BudgetExceededError(
                f"{self.proto.name}: reporting at ε = {b:.6g} in epoch {epoch} would spend "
                f"{worst:.6g} in a window of {acc.window} epochs, past eps_window = "
                f"{acc.eps_window:.6g}; the report was not made."
            )
        lifetime = self.spent_budget.epsilon + b
        if self.max_epsilon is not None and lifetime > self.max_epsilon * (1 + 1e-12):
            raise BudgetExceededError(
                f"{self.proto.name}: reporting would spend ε = {lifetime:.6g} in total, past "
                f"max_epsilon = {self.max_epsilon:.6g}; the report was not made."
            )
        # The epoch's oracle draws the report from the round-2 source (the OS; the test
        # vectors' fixed stream), as a one-shot report; the collection's codec sends it.
        one = Client(self.proto.for_round(plan), self._client.round2)
        record = one.report(value)
        report = self.proto.encode_reports(np.asarray([record], dtype=np.asarray(record).dtype))
        return self._enqueue(epoch, report, lambda: self._spending.append((epoch, b)))

    def _report_history(self, value: Any, epoch: int, plan: dict[str, Any] | None) -> bytes | None:
        if self.proto.planned and plan is None:
            raise ValueError(
                f"{self.proto.name}: its rounds are planned by the server; pass the epoch's "
                f"plan (keys {', '.join(self.proto.plan_keys)})."
            )
        step = self._client.history_step(value, epoch, plan)  # checks the epoch and the plan
        cost = float(step.costs[0])
        lifetime = self.spent_budget.epsilon + cost
        if self.max_epsilon is not None and lifetime > self.max_epsilon * (1 + 1e-12):
            raise BudgetExceededError(
                f"{self.proto.name}: reporting would spend ε = {lifetime:.6g} in total, past "
                f"max_epsilon = {self.max_epsilon:.6g}; the report was not made."
            )
        record = self._client.draw(step)  # from the round-2 source (the OS)
        if record is None:  # nothing to send at this epoch: only the history moves on
            before = self._client.history, self._client.next_epoch, self._client.spent
            self._client.advance(step, epoch)
            try:
                self._save()
            except BaseException:
                self._client.history, self._client.next_epoch, self._client.spent = before
                raise
            return None
        report = self.proto.encode_reports(np.asarray([record], dtype=np.asarray(record).dtype))

        def spend() -> None:
            self._spending.append((epoch, cost))
            self._client.advance(step, epoch)

        return self._enqueue(epoch, report, spend)

    def _enqueue(self, epoch: int, report: bytes, spend: Any) -> bytes:
        """Queue ``report``, record what it spends with ``spend()`` and save, all or nothing:
        the state (reports, memos, spending) is saved before the report can leave the device,
        and a failed save leaves no report and the budget unchanged."""
        rid = wire.new_report_id(epoch, os.urandom(wire.ID_ENTROPY))
        item = QueuedReport(rid, epoch, report)
        before = (
            self._reports,
            set(self._memo_keys),
            list(self._spending),
            list(self._queue),
            self._dropped,
        )
        client = (self._client.history, self._client.next_epoch, self._client.spent)
        spend()
        self._reports += 1
        self._queue.append(item)
        overflow = self._queue[: max(0, len(self._queue) - self.queue_limit)]
        del self._queue[: len(overflow)]
        self._dropped += len(overflow)
        try:
            self._save()
        except BaseException:
            # Not saved: the report does not exist (nothing can upload it), budget unchanged.
            (self._reports, self._memo_keys, self._spending, self._queue, self._dropped) = before
            self._client.history, self._client.next_epoch, self._client.spent = client
            raise
        for old in overflow:
            log.warning(
                "upload queue full (%d): dropped report %s of epoch %d",
                self.queue_limit,
                old.id.hex(),
                old.epoch,
            )
        return item.id

    # ------------------------------------------------------------------ queue
    @property
    def queue(self) -> list[QueuedReport]:
        """Reports not yet acknowledged, oldest first (a copy)."""
        return list(self._queue)

    @property
    def dropped(self) -> int:
        """Reports dropped so far (queue overflow or refused by the server)."""
        return self._dropped

    def batch(
        self, limit: int, skip: Collection[bytes] = ()
    ) -> tuple[list[QueuedReport], bytes]:
        """The oldest ``limit`` queued reports (those whose id is in ``skip`` left out, still
        queued) and their binary batch (docs/wire-format.md §4)."""
        queue = [q for q in self._queue if q.id not in skip] if skip else self._queue
        items = queue[:limit]
        data = wire.encode_records(
            self.proto,
            [q.id for q in items],
            np.array([q.epoch for q in items], dtype=np.int64),
            b"".join(q.report for q in items),
        )
        return items, data

    def acknowledge(self, ids: list[bytes]) -> None:
        """Remove acknowledged reports from the queue and save."""
        done = set(ids)
        self._queue = [q for q in self._queue if q.id not in done]
        self._save()

    # ------------------------------------------------------------------ identity
    def credential(self, server: str) -> tuple[int, str] | None:
        """(device id, credential) this device holds on ``server`` (its base URL), or None
        before it has enrolled there (:class:`longldp.client.upload.Uploader` enrolls it)."""
        held = self._credentials.get(server.rstrip("/"))
        return None if held is None else (int(held["device"]), str(held["credential"]))

    def set_credential(self, server: str, device: int, credential: str) -> None:
        """Keep the credential the server issued at enrollment (saved in the state file)."""
        if not isinstance(credential, str) or not credential:
            raise ValueError("DeviceClient: 'credential' must be a non-empty string.")
        self._credentials[server.rstrip("/")] = {"device": int(device), "credential": credential}
        self._save()

    def forget_credential(self, server: str) -> None:
        """Drop the credential held on ``server`` (the next upload enrolls anew)."""
        if self._credentials.pop(server.rstrip("/"), None) is not None:
            self._save()

    def drop(self, ids: list[bytes], reason: str) -> None:
        """Remove reports the server refused for good; logged with ``reason``."""
        done = set(ids)
        for q in self._queue:
            if q.id in done:
                log.warning("dropped report %s of epoch %d: %s", q.id.hex(), q.epoch, reason)
                self._dropped += 1
        self._queue = [q for q in self._queue if q.id not in done]
        self._save()

    # ------------------------------------------------------------------ persistence
    def _save(self) -> None:
        body = {
            "secret_id": _store.secret_id(self._secret),
            "collection": self.collection,
            "protocol": self.proto.spec(),
            "fingerprint": self.proto.fingerprint().hex(),
            "reports": self._reports,
            "memo_keys": sorted(self._memo_keys),
            "spent_epsilon": self.spent_budget.epsilon,
            "dropped": self._dropped,
            "credentials": self._credentials,
            "queue": [
                {
                    "id": q.id.hex(),
                    "epoch": q.epoch,
                    "report": base64.b64encode(q.report).decode("ascii"),
                }
                for q in self._queue
            ],
        }
        if self._tracks_spending:  # what each report cost, by epoch (math §19.2, §19.6)
            body["spending"] = [[e, b] for e, b in self._spending]
        if self._client.history is not None:  # a history-dependent device's history
            body["history"] = {
                name: np.asarray(arr)[0].tolist() for name, arr in self._client.history.items()
            }
        _store.save_state(self.path, self._secret, body)


def _history_from_json(proto: Any, stored: Any) -> dict[str, np.ndarray]:
    """A device's history as its state file holds it ({field: int or list of ints}), checked
    against the protocol's fields and shapes (a foreign history is refused)."""
    fresh = proto.new_client_history()
    if not isinstance(stored, dict) or set(stored) != set(fresh):
        raise ValueError(
            f"device state: its history must have the fields {sorted(fresh)} of "
            f"{proto.name}; got {stored!r:.200}."
        )
    out = {}
    for name, empty in fresh.items():
        arr = np.asarray([stored[name]])
        if arr.shape != empty.shape or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"device state: history field {name!r} is not {empty.shape} ints.")
        out[name] = arr.astype(np.int64)
    return out


__all__ = ["BudgetExceededError", "DeviceClient", "QueuedReport"]
