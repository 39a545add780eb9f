"""What persists per device, what it lets an analyst link, and which shuffle routes survive it.

A protocol's client may keep per-device state for its whole life: a hash seed (local hashing,
LOLOHA), a Hadamard row (SH, L-SH), a cohort (RAPPOR), the sampled buckets (dBitFlipPM), and the
round-1 memos of a memoizing chain. Every field but the memo rides in the clear in *every*
report, so an analyst who receives each epoch's reports through a shuffler still groups one
device's reports across epochs by that field (exactly, when the field is unique to the device,
as a 63-bit seed is). Each protocol class declares its :class:`Linkage` as the class variable
``linkage`` (docs/design.md §2.1); the shuffle accounting (:mod:`longldp.shuffle`) offers only
the routes that stay proven under it (docs/math.md §17.4):

- ``"memo"``: the collection is a post-processing of the shuffled multisets of memos, one per
  change-pattern group, composed over the groups: valid for a memoizing chain when the groups'
  multisets are independent shuffles, i.e. when nothing in the reports links a device's memos
  to one another or the device holds one memo (the memo then includes the fields its reports
  carry);
- ``"epochs"``: each epoch's multiset is a fresh shuffle of n reports, composed over the τ
  epochs: valid only when nothing persists, so that the epochs draw independent randomness and
  nothing links them;
- ``"tuple"``: the collection is a post-processing of the shuffled multiset of the devices'
  whole τ-tuples of reports, linked or not: valid for every protocol.

Layer: math (docs/design.md §1); imports nothing from the package but ``_validate``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from longldp import _validate as check

#: The routes of the shuffle accounting (docs/math.md §17.4), in the order they are listed.
ROUTES = ("memo", "epochs", "tuple")


class Persistent(enum.StrEnum):
    """A per-device field a client keeps for its lifetime."""

    #: The seed of the device's hash function, sent in every report (BLH, OLH, LOLOHA).
    HASH_SEED = "hash seed"
    #: The device's Hadamard row, sent in every report (SH, L-SH).
    HADAMARD_ROW = "Hadamard row"
    #: The device's cohort (its Bloom hash functions), sent in every report (RAPPOR).
    COHORT = "cohort"
    #: The buckets the device sampled once, sent in every report (dBitFlipPM).
    BUCKET_MAP = "bucket map"
    #: A round-1 memo per memo key; never sent, each report is a fresh round 2 of it.
    MEMO = "memo"

    @property
    def short(self) -> str:
        """One word for narrow tables: seed, row, cohort, buckets, memo."""
        return {"hash seed": "seed", "Hadamard row": "row", "bucket map": "buckets"}.get(
            self.value, self.value
        )

    @property
    def in_reports(self) -> bool:
        """Whether the field is sent in the clear with every report (all but the memo)."""
        return self is not Persistent.MEMO

    @property
    def record_field(self) -> str | None:
        """The report record's field that carries it (``hash_id``: a seed or a row index,
        ``cohort``, ``buckets``), by which an analyst groups a device's reports; None for the
        memo, which no report carries."""
        return {
            "hash seed": "hash_id",
            "Hadamard row": "hash_id",
            "cohort": "cohort",
            "bucket map": "buckets",
        }.get(self.value)


@dataclass(frozen=True)
class Linkage:
    """The per-device fields of a protocol's client that persist across its reports.

    ``Linkage()`` (nothing persists) is a stateless one-shot client; ``Linkage.of(MEMO)`` a
    memoizing chain whose reports carry nothing per device (L-GRR, the UE chains);
    ``Linkage.of(HASH_SEED)`` one-shot local hashing, whose every report carries the device's
    seed. :meth:`routes` names the shuffle routes proven under it (docs/math.md §17.4).
    """

    persists: frozenset[Persistent] = frozenset()

    @classmethod
    def of(cls, *fields: Persistent) -> Linkage:
        """The linkage of a client keeping ``fields``."""
        for f in fields:
            if not isinstance(f, Persistent):
                raise ValueError(f"Linkage: each field must be a Persistent; got {f!r}.")
        return cls(frozenset(fields))

    @property
    def memoized(self) -> bool:
        """The client keeps round-1 memos (a two-round chain)."""
        return Persistent.MEMO in self.persists

    @property
    def linked_by(self) -> tuple[Persistent, ...]:
        """The persistent fields every report carries, which link a device's reports."""
        return tuple(f for f in Persistent if f in self.persists and f.in_reports)

    @property
    def record_fields(self) -> tuple[str, ...]:
        """The report record's fields that carry :attr:`linked_by` (each once, in order)."""
        return tuple(dict.fromkeys(f.record_field for f in self.linked_by if f.record_field))

    @property
    def linkable(self) -> bool:
        """An analyst can group one device's reports across epochs by a field they carry."""
        return bool(self.linked_by)

    def describe(self, short: bool = False) -> str:
        """In words: ``"nothing"``, ``"memo"``, ``"hash seed"``, ``"hash seed, memo"``, … (every
        field but the memo is sent in every report); ``short``: ``"-"``, ``"seed+memo"``, …"""
        fields = [f for f in Persistent if f in self.persists]
        if short:
            return "+".join(f.short for f in fields) or "-"
        return ", ".join(map(str, fields)) or "nothing"

    def routes(self, memos: int = 1) -> tuple[str, ...]:
        """The shuffle routes proven for a device holding ``memos`` distinct memos
        (docs/math.md §17.4), in the order of :data:`ROUTES`."""
        return tuple(r for r in ROUTES if r not in self.excluded(memos))

    def excluded(self, memos: int = 1) -> dict[str, str]:
        """Route → why it is not valid under this linkage (the routes not in :meth:`routes`)."""
        memos = check.integer("Linkage.routes", "memos", memos, minimum=1)
        out: dict[str, str] = {}
        fields = " and ".join(str(f) for f in self.linked_by)
        if not self.memoized:
            out["memo"] = "the client keeps no memo"
        elif self.linkable and memos > 1:
            out["memo"] = (
                f"every report carries the device's {fields}, which links its {memos} memos: "
                "the per-memo multisets are not independent shuffles"
            )
        if self.memoized:
            out["epochs"] = "a memoizing chain's epochs share the device's memo"
        elif self.linkable:
            out["epochs"] = (
                f"every report carries the device's {fields}, which links its epochs: the "
                "analyst sees the devices' tuples, not independent shuffles"
            )
        return out
