"""Heavy-hitter discovery over values nobody listed: PEM, TreeHist, SFP (docs/math.md §21.6–§21.9).

The user-facing layer over the kernels of :mod:`longldp.protocols.sketch.discovery`: items go in
as strings (an alphabet and a declared length: :class:`~longldp.protocols.sketch.items.TextItems`)
or as b-bit integers, the protocol runs its rounds, and the result states

- the items found, decoded, with estimated frequencies, standard errors and normal intervals;
- every round: which users answered it (a group of n_r users, or all of them), at what ε, how
  many candidates were tested, the threshold and how many were kept (:class:`Round`);
- each user's ε (PEM: one report at ε; TreeHist and SFP: two reports whose ε add up to ε,
  sequential composition, docs/math.md §4);
- for a discovery over epochs (:func:`find_over_time`), each device's spent ε from the memoized
  prefix reports, min(t·ε1, m·ε∞) (the per-memo rule of :class:`longldp.privacy.Accounting`).

Every device answers one round per collection (per epoch, over time): a round is a group of
devices and a prefix length, so devices need no candidate list (docs/math.md §21.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import sketch as formulas
from longldp.protocols._estimate import normal_quantile
from longldp.protocols.sketch import discovery as kernels
from longldp.protocols.sketch.items import IntegerItems, TextItems

METHODS = ("pem", "treehist", "sfp")
#: Default alphabet of text items: lower-case letters, digits and a few separators (37 symbols
#: plus padding: 6 bits per symbol, so 10 symbols fit a 60-bit code).
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789-"

Codec = TextItems | IntegerItems


def text_codec(alphabet: str = ALPHABET, length: int = 10) -> TextItems:
    """Strings of at most ``length`` symbols of ``alphabet`` (docs/math.md §21.1)."""
    return TextItems(alphabet, length)


def integer_codec(bits: int) -> IntegerItems:
    """Integers in [0, 2^bits)."""
    return IntegerItems(bits)


@dataclass(frozen=True)
class Round:
    """One round as it ran: who answered, at what ε, what the server tested and kept.

    Attributes
    ----------
    index : the round's number (0 first).
    what : ``"prefix"`` (PEM, TreeHist), ``"fragment"`` (SFP), or ``"item"`` (the whole-item
        report of TreeHist and SFP).
    bits : prefix (or fragment) length in bits.
    users : devices that answered it.
    epsilon : ε of each answer.
    candidates : candidates the server tested.
    threshold : the detection threshold T (−inf for top-k selection).
    kept : candidates kept.
    """

    index: int
    what: str
    bits: int
    users: int
    epsilon: float
    candidates: int
    threshold: float
    kept: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (an infinite threshold as None)."""
        out = dict(self.__dict__)
        out["threshold"] = None if not np.isfinite(self.threshold) else float(self.threshold)
        return out


@dataclass(frozen=True)
class HeavyHitters:
    """What a discovery found (largest estimate first), how it ran, and what it cost.

    ``items`` are decoded (str or int); ``estimates`` are fractions of all users with standard
    errors ``se`` and ``level`` normal intervals [lower, upper]; ``epsilon`` is each user's ε.
    """

    method: str
    items: list[Any]
    codes: NDArray[np.uint64]
    estimates: NDArray[np.float64]
    se: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    level: float
    rounds: tuple[Round, ...]
    epsilon: float
    n: int

    def top(self, k: int) -> list[Any]:
        """The k items of largest estimate."""
        return self.items[: check.integer("HeavyHitters", "k", k, minimum=0)]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what the CLI and the dashboard print)."""
        return {
            "method": self.method,
            "n": self.n,
            "epsilon": self.epsilon,
            "level": self.level,
            "items": [
                {
                    "item": item,
                    "estimate": float(e),
                    "se": float(s),
                    "lower": float(lo),
                    "upper": float(hi),
                }
                for item, e, s, lo, hi in zip(
                    self.items, self.estimates, self.se, self.lower, self.upper, strict=True
                )
            ],
            "rounds": [r.as_dict() for r in self.rounds],
        }


def encode(codec: Codec, items: Any) -> NDArray[np.uint64]:
    """Codes of the items (ValueError in one line for an empty set, a string over the declared
    length, a symbol outside the alphabet, non-UTF-8 bytes, an integer outside the range)."""
    return codec.encode(items)


def _selection(k: int, width: int, select: str, alpha: float) -> kernels.Selection:
    k = check.integer("heavy_hitters", "k", k, minimum=1)
    if width < 63 and k > 1 << width:
        raise ValueError(f"heavy_hitters: 'k' must be <= the domain size 2^{width}; got {k}.")
    return kernels.Selection(select, alpha, k)


def _rounds(method: str, found: kernels.Discovery, eps_each: list[float]) -> tuple[Round, ...]:
    logs = found.rounds
    out = []
    for i, log in enumerate(logs):
        last_item = method != "pem" and i == len(logs) - 1
        what = "item" if last_item else ("fragment" if method == "sfp" else "prefix")
        out.append(
            Round(
                i,
                what,
                log.bits,
                log.reports,
                eps_each[i],
                log.candidates,
                log.threshold,
                log.kept,
            )
        )
    return tuple(out)


def find(
    items: Any,
    eps: float,
    *,
    method: str = "pem",
    codec: Codec | None = None,
    k: int = 16,
    select: str = "top",
    alpha: float = 0.05,
    level: float = 0.95,
    rng: Any = None,
    **options: Any,
) -> HeavyHitters:
    """Discover the heavy hitters of users holding ``items`` (one item per user), simulated.

    Parameters
    ----------
    items : strings (with ``codec`` a :func:`text_codec`, the default) or integers (with an
        :func:`integer_codec`).
    eps : each user's ε.
    method : ``"pem"`` ([WLJ19]: users in one group per round, each at ε), ``"treehist"``
        ([BNST17]: a prefix report and a whole-item report per user, ε split by
        ``final_share``) or ``"sfp"`` ([APP17] §4: a fragment and a whole-item CMS report).
    k : the number of candidates kept per round (the top k, or at most k above the threshold).
    select : ``"top"`` (keep the k largest, as pure-ldp) or ``"threshold"`` (keep those above
        T = z_{1−α/M}·σ₀: at most α expected false candidates per round, docs/math.md (21.6)).
    options : the kernels' options (``start``, ``step``, ``oracle``, ``m``, ``d``,
        ``final_share``, ``frag_bits``, ``hash_bits``, ``word_share``, ``max_joins``, ``salt``).
    """
    method = check.choice("heavy_hitters", "method", method, METHODS)
    codec = text_codec() if codec is None else codec
    codes = encode(codec, items)
    sel = _selection(k, codec.width, select, alpha)
    gen = np.random.default_rng(rng)
    if method == "sfp":
        plan = kernels.SFPPlan(codec.width, eps, select=sel, **options)
        found = kernels.sfp_discover(plan, codes, gen, codec.valid_prefix)
        eps_word, eps_frag = formulas.split_budget("SFP", eps, plan.word_share)
        eps_each = [eps_frag] * plan.positions + [eps_word]
    else:
        maker = kernels.pem_plan if method == "pem" else kernels.treehist_plan
        plan = maker(codec.width, eps, select=sel, **options)
        found = kernels.discover(plan, codes, gen, codec.valid_prefix)
        eps_each = [plan.eps_prefix] * len(plan.lengths)
        if plan.eps_final is not None:
            eps_each.append(plan.eps_final)
    return _result(method, codec, found, _rounds(method, found, eps_each), eps, codes.size, level)


def _result(
    method: str,
    codec: Codec,
    found: kernels.Discovery,
    rounds: tuple[Round, ...],
    eps: float,
    n: int,
    level: float,
) -> HeavyHitters:
    z = normal_quantile(level)
    items = codec.decode(found.items) if found.items.size else []
    return HeavyHitters(
        method,
        list(items),
        found.items,
        found.estimates,
        found.std_errors,
        found.estimates - z * found.std_errors,
        found.estimates + z * found.std_errors,
        float(level),
        rounds,
        float(eps),
        int(n),
    )


@dataclass(frozen=True)
class OverTime:
    """A discovery per epoch and what each device spent (docs/math.md §21.9).

    ``spent`` is each device's ε after all epochs, min(t·ε1, m·ε∞) with m its distinct prefix
    memos (``memos``), by the per-memo rule of ``accounting``; ``epochs`` the per-epoch results.
    """

    epochs: tuple[HeavyHitters, ...]
    spent: NDArray[np.float64]
    memos: NDArray[np.int64]
    accounting: privacy.Accounting

    def summary(self) -> dict[str, float]:
        """Median, 99th percentile and maximum of the devices' spent ε."""
        s = self.spent
        return {
            "median": float(np.median(s)),
            "p99": float(np.quantile(s, 0.99)),
            "max": float(s.max()),
        }


def find_over_time(
    items_by_epoch: Any,
    eps_perm: float,
    eps_1: float,
    *,
    codec: Codec | None = None,
    k: int = 16,
    select: str = "top",
    alpha: float = 0.05,
    level: float = 0.95,
    rng: Any = None,
    **options: Any,
) -> OverTime:
    """PEM over τ epochs (``items_by_epoch[t][u]``: device u's item at epoch t) with memoized
    prefix reports: each device keeps its group, hash seed and a round-1 memo per hashed
    bucket of its prefix (OLOLOHA's chain at ε∞), and every epoch re-randomizes the memo at ε1
    (docs/math.md §21.9). A device whose item never changes spends at most ε∞ over all epochs.
    """
    codec = text_codec() if codec is None else codec
    rows = [encode(codec, epoch) for epoch in items_by_epoch]
    if not rows:
        raise ValueError("heavy_hitters: 'items_by_epoch' must hold at least one epoch.")
    if len({r.size for r in rows}) != 1:
        raise ValueError("heavy_hitters: every epoch must hold one item per device.")
    sel = _selection(k, codec.width, select, alpha)
    plan = kernels.pem_plan(codec.width, eps_1, select=sel, **options)
    gen = np.random.default_rng(rng)
    out = kernels.discover_over_time(plan, np.stack(rows), eps_perm, eps_1, gen, codec.valid_prefix)
    acc = privacy.Accounting.per_memo(eps_1, eps_perm)
    epochs = tuple(
        _result(
            "pem", codec, d, _rounds("pem", d, [eps_1] * len(d.rounds)), eps_1, rows[0].size, level
        )
        for d in out.epochs
    )
    return OverTime(epochs, out.spent, out.memos, acc)


def detection_probability(
    n: int,
    f: Any,
    eps: float,
    width: int,
    *,
    method: str = "pem",
    k: int = 16,
    alpha: float = 0.05,
    **options: Any,
) -> NDArray[np.float64]:
    """A lower bound on Pr[an item of frequency f is found] under threshold selection whose cap
    k does not bind (docs/math.md §21.6–§21.7)."""
    method = check.choice("heavy_hitters", "method", method, METHODS)
    sel = _selection(k, width, "threshold", alpha)
    if method == "sfp":
        return kernels.sfp_detection_probability(
            kernels.SFPPlan(width, eps, select=sel, **options), n, f
        )
    maker = kernels.pem_plan if method == "pem" else kernels.treehist_plan
    return kernels.detection_probability(maker(width, eps, select=sel, **options), n, f)
