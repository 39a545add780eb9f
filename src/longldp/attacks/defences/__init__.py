"""Defences against poisoning, run on estimates or on stored reports (docs/attacks.md §7–§8)."""

from longldp.attacks.defences.memo import (
    MemoVerdict,
    check_applies,
    defended_estimates,
    kept_law,
    law_for,
    memo_consistency,
)

__all__ = [
    "MemoVerdict",
    "check_applies",
    "defended_estimates",
    "kept_law",
    "law_for",
    "memo_consistency",
]
