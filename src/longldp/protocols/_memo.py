"""Round-1 memos of a whole population, stored sparsely and looked up vectorially.

A user holds one memo per distinct memo key (a value; a hash bucket for LOLOHA; a bucket for
dBitFlipPM), created the first time the user holds it (design §4). Entries are kept sorted by
``user * key_range + key`` so that a timestamp's lookups are one ``searchsorted`` and its new
entries one ``insert``; payloads are ints (GRR chains) or bit-packed rows (UE chains).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: Largest payload table (bytes) kept dense; larger populations × domains use the sorted store.
DENSE_LIMIT = 256 * 2**20


def make_memo_store(
    n_users: int, key_range: int, payload_shape: tuple[int, ...], dtype: type
) -> MemoStore | DenseMemoStore:
    """A dense (user × key) table when it is small, else the sparse sorted store.

    Both give the same answers; the dense one makes a timestamp O(n) instead of O(M) for M
    memos held (no re-sorting), which matters at hundreds of timestamps.
    """
    cells = n_users * key_range * int(np.prod(payload_shape, dtype=np.int64))
    if cells * np.dtype(dtype).itemsize <= DENSE_LIMIT:
        return DenseMemoStore(n_users, key_range, payload_shape, dtype)
    return MemoStore(n_users, key_range, payload_shape, dtype)


class DenseMemoStore:
    """(user, key) → payload in a zero-initialised flat table (pages are touched only when used).

    Rows are addressed by ``user * key_range + key``; a multi-byte payload is viewed as one
    opaque (void) item so that a lookup is a single 1-D gather.
    """

    def __init__(self, n_users: int, key_range: int, payload_shape: tuple[int, ...], dtype: type):
        self.n_users = n_users
        self.key_range = key_range
        self._shape = payload_shape
        self._dtype = np.dtype(dtype)
        itemsize = self._dtype.itemsize * int(np.prod(payload_shape, dtype=np.int64))
        self._item = np.dtype((np.void, itemsize)) if payload_shape else self._dtype
        self._present = np.zeros(n_users * key_range, dtype=bool)
        self._payload = np.zeros(n_users * key_range, dtype=self._item)

    def __len__(self) -> int:
        return int(self._present.sum())

    def get_or_create(
        self,
        users: NDArray[np.int64],
        keys: NDArray[np.int64],
        create: Callable[[NDArray[np.bool_]], NDArray],
    ) -> NDArray:
        """As :meth:`MemoStore.get_or_create`."""
        flat = users * self.key_range + keys
        missing = ~self._present[flat]
        if missing.any():
            fresh = np.ascontiguousarray(create(missing), dtype=self._dtype)
            self._payload[flat[missing]] = fresh.view(self._item).reshape(-1)
            self._present[flat[missing]] = True
        out = self._payload[flat]
        return out.view(self._dtype).reshape(flat.size, *self._shape) if self._shape else out

    def memos_per_user(self) -> NDArray[np.int64]:
        return self._present.reshape(self.n_users, self.key_range).sum(axis=1, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return int(self._present.sum()) * self._item.itemsize


class MemoStore:
    """Sorted (user, key) → payload map, filled in batches."""

    def __init__(self, n_users: int, key_range: int, payload_shape: tuple[int, ...], dtype: type):
        self.n_users = n_users
        self.key_range = key_range
        self._keys = np.empty(0, dtype=np.int64)
        self._payload = np.empty((0, *payload_shape), dtype=dtype)

    def __len__(self) -> int:
        return int(self._keys.size)

    def get_or_create(
        self,
        users: NDArray[np.int64],
        keys: NDArray[np.int64],
        create: Callable[[NDArray[np.bool_]], NDArray],
    ) -> NDArray:
        """Payloads for ``(users[i], keys[i])``; ``create(mask)`` draws those not yet memoized.

        Each user appears at most once per call (one report per user per timestamp).
        """
        flat = users * self.key_range + keys
        pos = np.searchsorted(self._keys, flat)
        inside = pos < self._keys.size
        found = np.zeros(flat.size, dtype=bool)
        found[inside] = self._keys[pos[inside]] == flat[inside]
        out = np.empty((flat.size, *self._payload.shape[1:]), dtype=self._payload.dtype)
        out[found] = self._payload[pos[found]]
        missing = ~found
        if missing.any():
            fresh = create(missing)
            out[missing] = fresh
            order = np.argsort(flat[missing], kind="stable")
            new_keys = flat[missing][order]
            at = np.searchsorted(self._keys, new_keys)
            self._keys = np.insert(self._keys, at, new_keys)
            self._payload = np.insert(self._payload, at, fresh[order], axis=0)
        return out

    def memos_per_user(self) -> NDArray[np.int64]:
        """Number of distinct memos each user holds."""
        return np.bincount(self._keys // self.key_range, minlength=self.n_users)

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._payload.nbytes)


@dataclass
class PopulationMemo:
    """Everything a population of clients keeps between reports.

    ``store`` holds the round-1 memos (None for one-shot oracles); ``state`` holds per-user
    values drawn once and kept forever (the LOLOHA/OLH hash function, dBitFlipPM's sampled
    buckets), drawn lazily the first time a user reports (``has_state``). ``cache`` holds what
    a family derives from that state once and reuses at every report (LOLOHA: each user's
    hash buckets of the whole domain); it is a pure function of ``state``, never randomness.

    A history-dependent mechanism (its ``history`` trait, docs/design.md §2.5) also keeps each
    user's ``history`` (what her next report depends on, created by the mechanism's
    ``new_history``), the ``epochs`` each user has gone through (a user may send nothing at an
    epoch) and the ε each has ``spent`` by the mechanism's accounting, report by report.
    """

    n_users: int
    store: MemoStore | DenseMemoStore | None
    state: dict[str, NDArray] = field(default_factory=dict)
    has_state: NDArray[np.bool_] | None = None
    cache: dict[str, NDArray] = field(default_factory=dict)
    history: dict[str, NDArray] = field(default_factory=dict)
    reports: NDArray[np.int64] = field(init=False)
    epochs: NDArray[np.int64] = field(init=False)
    spent: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        self.reports = np.zeros(self.n_users, dtype=np.int64)
        self.epochs = np.zeros(self.n_users, dtype=np.int64)
        self.spent = np.zeros(self.n_users, dtype=np.float64)

    def memos_per_user(self) -> NDArray[np.int64]:
        if self.store is None:
            return np.zeros(self.n_users, dtype=np.int64)
        return self.store.memos_per_user()
