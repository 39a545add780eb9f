"""THRESH, CHANGES-TREE and DDRM as registered mechanisms (docs/math.md §19.3–§19.5).

What a device of these mechanisms reports at an epoch depends on its *own past values* (the
value at the last update, a tree node's two ends), so each class declares the ``history``
trait (docs/design.md §2.5): a device keeps a small history, and each report is

1. ``history_step``: from the value, the per-device state (a tree level, an item), the history
   and the epoch (and the server's plan), the device's *report input*: a code that the report
   randomizes (a value, a node's transition a → b, a pair of node differences, a vote), what
   the report costs by the accounting (0 for a report whose law is the data-independent
   default), and the history after it;
2. ``_round1``: the randomization of report inputs, with the very samplers of the kernels
   (:func:`~longldp.protocols.streams.changes_tree.node_bits`,
   :func:`~longldp.protocols.streams.thresh.vote_bits`,
   :func:`~longldp.protocols.streams.thresh.update_reports`,
   :func:`~longldp.protocols.streams.ddrm.node_reports`,
   :func:`~longldp.protocols.streams.oracle.perturb`).

The one client (:class:`longldp.protocols.Client`) and the device client keep the history
(the device in its state file, across restarts) and the population path carries it per user,
so the per-user and reports engines run CHANGES-TREE and DDRM epoch by epoch (THRESH's rounds
are planned by the server: its simulation is its kernel, :meth:`Thresh.run`).

**A report and its channel.** Every report is a fixed-width body: a tag, then a payload. The
tag names the report's public *context* (CHANGES-TREE: the device's level, then the initial
report or a node; THRESH: a vote or an update round); the channel of one report is enumerated
per context over its report inputs (:class:`ChangeReports`), from the samplers' own (drawn)
probabilities, and the claimed ε of one report is the largest over the contexts.

**Estimates.** One epoch's reports estimate *parts* of the frequencies tracked over time
(estimand ``change-parts``): CHANGES-TREE an initial histogram and each level's node flows,
THRESH the share of changed users and an update's frequencies, DDRM each item's mean node
difference, leaf and top node. The mechanism's kernel (``run``) combines them over epochs;
CHANGES-TREE's :meth:`ChangesTree.release` does so from a series of per-epoch estimates.

**Missed epochs.** A device that is not asked at some epochs carries its last value forward
(the history is kept by "last observation carried forward"); its next report then charges the
change to that epoch. With a report at every epoch this is exactly the kernels' protocol.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp import privacy
from longldp.privacy import ledger
from longldp.privacy.channels import bit_matrix, grr_matrix, unary_channel
from longldp.privacy.linkage import Linkage, Persistent
from longldp.privacy.streams import (
    ddrm_plus_probabilities,
    ddrm_scale,
    dyadic_decomposition,
    fo_kind,
    fo_probabilities,
    rr_probabilities,
    thresh_budgets,
    thresh_vote_threshold,
    tree_levels,
    tree_node_epsilon,
    tree_node_probabilities,
)
from longldp.protocols._rng import RandomSource
from longldp.protocols.base import bytes_to_uint, min_bytes, set_derived, uint_to_bytes
from longldp.protocols.clientspec import ClientSpec, VectorCase
from longldp.protocols.codec import ReportCodec
from longldp.protocols.estimator import Estimator
from longldp.protocols.mechanism import HistoryStep, Mechanism
from longldp.protocols.report_kinds import ExactChannel, ReportKind, _check_outputs
from longldp.protocols.streams import changes_tree, ddrm, oracle, thresh
from longldp.protocols.traits import Estimand, History, Rounds


class ChangeReports(ReportKind):
    """A report of a history-dependent mechanism: a tag naming its public context, then the
    randomization of its report input. The exact channel is one matrix per context, rows the
    context's report inputs (``proto.context_channels()``, from the samplers' probabilities);
    the attacks know no such report (``attack_kind`` refuses it)."""

    name: ClassVar[str] = "change"
    statistic: ClassVar[str] = "symbols"

    def attack_kind(self, proto: Any) -> str:
        raise ValueError(
            f"no frequency attack applies to '{proto.name}': its estimate is {proto.estimand} "
            "(estimates_frequencies is False), and its reports follow each device's own past "
            "values, which the attacks' fake users do not model."
        )

    def output_space_size(self, proto: Any) -> int:
        return int(sum(ch.shape[1] for ch in proto.context_channels()))

    def channel(self, proto: Any, rng: np.random.Generator) -> ExactChannel:
        _check_outputs(proto, max(proto.context_outputs()))
        channels = proto.context_channels()
        return ExactChannel(channels, channels)

    def width(self, proto: Any) -> int:
        """The likelihood game's view (docs/math.md §13.2) is of a client whose every report
        follows one law given its value; a history-dependent client's follows its past values:
        refused, with the audits that apply."""
        raise ValueError(
            f"{proto.name}: its reports depend on the client's own past values, which the "
            "distinguishing game's client model does not describe; audit it black-box "
            "(longldp audit --blackbox, longldp.audit.audit_lifetime) and by its exact channel."
        )

    def observe(self, proto: Any, reports: NDArray) -> NDArray:
        return np.asarray(self.width(proto))

    def targets(self, proto: Any, reports: NDArray, values: Any) -> NDArray:
        return np.asarray(self.width(proto))


CHANGE_REPORTS = ChangeReports()


def fo_channel(kind: str, k: int, p: float, q: float) -> NDArray[np.float64]:
    """Pr[report | value] of one frequency-oracle report: GRR's k × k, or OUE's k × 2^k."""
    if kind == "grr":
        return grr_matrix(p, k)
    return unary_channel(k, bit_matrix(p, q))


def fo_claim(kind: str, p: float, q: float) -> float:
    """ε of one GRR (ln(P1/P0)) or OUE (ln[P1(1−P0)/(P0(1−P1))]) report, rounded outward."""
    if kind == "grr":
        return privacy.round_up(privacy.grr_report_epsilon(p, q))
    return privacy.round_up(privacy.ue_report_epsilon(p, q))


def fo_width(kind: str, k: int) -> int:
    """Bytes of one frequency-oracle report: a GRR symbol, or k packed bits."""
    return min_bytes(k - 1) if kind == "grr" else -(-k // 8)


def fo_payload(kind: str, k: int, reports: NDArray, width: int) -> NDArray[np.uint8]:
    """(m, width) bytes of frequency-oracle reports: the symbol big-endian, or packed bits."""
    out = np.zeros((len(reports), width), dtype=np.uint8)
    if kind == "grr":
        nb = min_bytes(k - 1)
        out[:, :nb] = uint_to_bytes(np.asarray(reports, dtype=np.int64), nb)
    else:
        packed = np.packbits(np.asarray(reports, dtype=bool), axis=1)
        out[:, : packed.shape[1]] = packed
    return out


def fo_check(owner: str, kind: str, k: int, payload: NDArray[np.uint8]) -> None:
    """``ValueError`` for frequency-oracle payloads no client sends (symbol ≥ k, bits past k,
    padding not zero)."""
    used = fo_width(kind, k)
    if np.any(payload[:, used:]):
        raise ValueError(f"{owner}: a report's padding bytes must be zero.")
    if kind == "grr":
        if np.any(bytes_to_uint(payload[:, :used]) >= k):
            raise ValueError(f"{owner}: a report's symbol must be in [0, {k}).")
    elif np.any(np.unpackbits(payload[:, :used], axis=1)[:, k:]):
        raise ValueError(f"{owner}: a report has bits set beyond position k = {k}.")


def fo_counts(kind: str, k: int, payload: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Support counts (k,) of frequency-oracle payloads."""
    if kind == "grr":
        symbols = bytes_to_uint(payload[:, : min_bytes(k - 1)])
        return np.bincount(symbols, minlength=k).astype(np.int64)
    bits = np.unpackbits(payload[:, : fo_width(kind, k)], axis=1, count=k)
    return bits.sum(axis=0, dtype=np.int64)


def _shares(counts: NDArray, m: NDArray, p: float, q: float) -> NDArray[np.float64]:
    """(C/m − q)/(p − q), NaN where m = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.asarray(counts, dtype=np.float64) / m - q) / (p - q)


@dataclass(frozen=True)
class ChangeMechanism(Mechanism, Estimator, ReportCodec):
    """Base of the change-based mechanisms: one-shot reports of a report input computed from
    the value and the device's history (module docstring). A report record is its body's row
    of bytes (tag, then payload); a mechanism whose reports carry a per-device group (its
    linkage's ``cohort``: CHANGES-TREE's level, DDRM's item) records it beside the body, as the
    field ``cohort`` the linkage names (:meth:`_cohorts` reads it from the body)."""

    longitudinal: ClassVar[bool] = False
    report_kind: ClassVar[ReportKind] = CHANGE_REPORTS
    estimand: ClassVar[Estimand] = Estimand.CHANGE_PARTS

    # -- what a class provides besides the hooks of the roles
    def probabilities(self) -> dict[str, float]:
        """Every probability its samplers compare a uniform draw with, by name (each stored as
        its draw realizes it, docs/math.md §16.1)."""
        raise NotImplementedError

    def context_channels(
        self, probabilities: Mapping[str, float] | None = None
    ) -> tuple[NDArray[np.float64], ...]:
        """One Pr[output | report input] matrix per public context, from the samplers'
        probabilities (:meth:`probabilities`, or the given ones: what a sampler realized)."""
        raise NotImplementedError

    def context_outputs(self) -> tuple[int, ...]:
        """Outputs of each context's channel (checked against the audit's limit first)."""
        raise NotImplementedError

    def change_spent(
        self, trajectories: NDArray, run: Any = None, state: Mapping[str, Any] | None = None
    ) -> NDArray[np.float64]:
        """Each user's ε over (n, τ) trajectories by the mechanism's accounting (the ledger's
        per-change rule, docs/math.md §19.6); ``run``: its kernel's public draws, or ``state``:
        the users' per-user state (a population's ``memo.state``: levels, items)."""
        raise NotImplementedError

    # -- the roles' hooks shared by the family
    def first_round_epsilon(self) -> float:
        """Nothing is memoized: the ε of one report."""
        return self.single_report_epsilon()

    @property
    def accounting(self) -> privacy.Accounting:
        """Per change: a report costs its ε only when its input is not the default (§19.6)."""
        return privacy.Accounting(
            "per-change", self.single_report_epsilon(), eps_change=self.change_epsilon
        )

    @property
    def change_epsilon(self) -> float:
        """The most one change of a user's value can cost."""
        raise NotImplementedError

    def report_costs(self, records: NDArray) -> NDArray[np.float64]:
        """The most each report can have cost, from the report alone (its context: a real
        report costs its context's ε, a default one nothing, and a server cannot tell them)."""
        raise NotImplementedError

    def reports_spent(
        self,
        owners: NDArray[np.int64],
        epochs: NDArray[np.int64],
        records: NDArray,
        plans: Callable[[int], Mapping[str, Any] | None],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """Per device, the sum of :meth:`report_costs` (an upper bound of the ledger's
        figure: the server cannot tell a report of a non-zero node, or a real vote, from the
        default's)."""
        devices, who = np.unique(np.asarray(owners, dtype=np.int64), return_inverse=True)
        spent = np.bincount(who, weights=self.report_costs(records), minlength=devices.size)
        return devices, spent, spent

    @property
    def body_size(self) -> int:
        """Bytes of one report body."""
        raise NotImplementedError

    def _sample_support(self, counts: NDArray[np.int64], n: int, rng: RandomSource) -> NDArray:
        raise ValueError(
            f"{self.name}: no count-level draw: a report depends on the user's own past "
            "values, which value counts do not hold (use the per-user or reports engine)."
        )

    def _make_reports(self, payload: NDArray, state: dict) -> NDArray:
        rows = np.asarray(payload, dtype=np.uint8).reshape(-1, self.body_size)
        if not self.linkage.record_fields:
            return rows
        out = np.empty(
            rows.shape[0], dtype=[("cohort", np.int64), ("body", np.uint8, rows.shape[1])]
        )
        out["body"] = rows
        out["cohort"] = self._cohorts(rows)
        return out

    def _cohorts(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        """The per-device group each body carries (a mechanism with a ``cohort`` linkage)."""
        raise NotImplementedError

    def _bodies(self, records: Any) -> NDArray:
        """The body rows of report records (the records themselves, or their ``body``)."""
        arr = np.asarray(records)
        return arr["body"] if arr.dtype.names else arr

    def _example_payload(self) -> tuple[NDArray, dict]:
        state = self._new_state(1, np.random.default_rng(0))
        code = np.zeros(1, dtype=np.int64)
        return self._round1(code, state, np.random.default_rng(0)), state

    def encode_bodies(self, records: NDArray) -> NDArray[np.uint8]:
        return self._check_rows(self._bodies(records))

    def decode_bodies(self, rows: NDArray[np.uint8]) -> NDArray:
        return self._make_reports(self._check_rows(rows), {})

    def _check_rows(self, rows: NDArray) -> NDArray[np.uint8]:
        arr = np.asarray(rows)
        if arr.ndim != 2 or arr.shape[1] != self.body_size or arr.dtype != np.uint8:
            raise ValueError(
                f"{self.name}: reports must be uint8 rows of {self.body_size} bytes; got "
                f"{arr.dtype} {arr.shape}."
            )
        self._check_bodies(arr)
        return arr

    def _check_bodies(self, rows: NDArray[np.uint8]) -> None:
        raise NotImplementedError

    def _check_epochs(self, epochs: NDArray, last: NDArray, horizon: int | None) -> None:
        """Epochs move forward (after the device's last) and, with a horizon, stay in it."""
        e = np.asarray(epochs, dtype=np.int64)
        if np.any(e <= last):
            bad = int(e[e <= last][0])
            raise ValueError(
                f"{self.name}: epoch {bad} does not follow the device's last epoch "
                f"{int(np.max(last))}; a device reports each epoch once, in order."
            )
        if horizon is not None and np.any(e >= horizon):
            raise ValueError(
                f"{self.name}: 'epoch' must be in [0, {horizon}) (tau = {horizon}); got "
                f"{int(e.max())}."
            )

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        """Differences live in [−1, 1] (a row of frequencies or shares is clipped by its class)."""
        with np.errstate(invalid="ignore"):
            return np.clip(raw, -1.0, 1.0)


# ------------------------------------------------------------------------------ CHANGES-TREE

CHANGES_TREE_CLIENT = ClientSpec(
    family="changes",
    chain="initial report: the adaptive oracle at ε_0 (GRR over k if k < 3e^(ε_0) + 2, else "
    "OUE); node: p = 0.5, q = D(1/(e^(ε_n/2) + 1)) per bit",
    round2="1, 0",
    eps_1="ρ(max(ε of the initial report, 2·ln(p(1 − q)/(q(1 − p)))))",
    eps_perm="ε1 (nothing is memoized)",
    state="level: an integer in [0, L), L = ⌊log₂(τ − 1)⌋ + 1",
    memo_key="v",
    round1="epoch 0: the initial report (GRR: one float u, an integer r in [0, k − 1): "
    "y = v if u < p1 else (v + 1 + r) mod k; OUE: k floats, bit_i = u_i < q1, then bit_v = u "
    "< 0.5); at a node end s of her level (s mod 2^h = 0): 2k floats u_i, bit_i = u_i < q, "
    "then if a ≠ b bit_b = u < p, bit_(k+a) = u′ < p, with a her value at s − 2^h (§6.4)",
    draws2="none (one-shot; the history is kept, §6.4)",
)


@dataclass(frozen=True)
class ChangesTree(ChangeMechanism):
    """CHANGES-TREE: the change-bounded tree protocol of Erlingsson et al. (SODA 2019), §19.4.

    Why the name: the protocol of [ERL19] for users whose data changes a bounded number of
    times has no short name in the paper; what defines it is a cost per *change* of value
    through the nodes of a dyadic *tree* over time.

    A device draws once a level h of the L = ⌊log2(τ − 1)⌋ + 1 levels (its per-device state,
    public and independent of its data, sent in every report). At epoch 0 it sends the
    adaptive oracle's report of its value at ``eps_0``; at each epoch s that ends a node of
    its level (s ≡ 0 mod 2^h) the node's difference x_s − x_{s−2^h} on 2k OUE-randomized
    bits (plus part e_b, minus part e_a; nothing for a zero node), at ``eps_node``.
    Spending: ε_0 + ε_n per non-zero node (docs/math.md (19.8)). ``tau``: the horizon
    (epochs 0..τ − 1), which sets the levels.
    """

    k: int
    eps_0: float
    eps_node: float
    tau: int
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "CHANGES-TREE"
    wire_id: ClassVar[int] = 48
    budget_params: ClassVar[tuple[str, ...]] = ("eps_0", "eps_node")
    budget_note: ClassVar[str] = "(ε_0 of the initial report, ε_node of a non-zero node)"
    test_params: ClassVar[tuple[dict, ...]] = ({"eps_0": 1.0, "eps_node": 1.0, "tau": 8},)
    #: The level rides in every report: a public group drawn once.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT)
    history: ClassVar[History | None] = History(
        ("current", "anchor", "last"),
        "current: the value at the device's last epoch (-1: none); anchor: its value at the "
        "last node end of its level (carried forward); last: that epoch (-1: none)",
    )
    client_spec: ClassVar[ClientSpec | None] = CHANGES_TREE_CLIENT

    def __post_init__(self) -> None:
        check.integer(self.name, "k", self.k, minimum=2)
        check.budget(self.name, "eps_0", self.eps_0)
        check.budget(self.name, "eps_node", self.eps_node)
        check.integer(self.name, "tau", self.tau, minimum=1)
        p, q = fo_probabilities(self.initial_kind, self.k, self.eps_0)
        set_derived(self, p1=p, q1=q)

    # -- parameters
    @functools.cached_property
    def initial_kind(self) -> str:
        """The initial report's oracle: GRR when k < 3e^ε_0 + 2, else OUE (math §19.1)."""
        return fo_kind("adaptive", self.k, self.eps_0)

    @property
    def levels(self) -> int:
        """L: the levels of the tree over epochs 1..τ − 1 (1 when τ = 1)."""
        return tree_levels(self.tau - 1) if self.tau > 1 else 1

    @property
    def node_probabilities(self) -> tuple[float, float]:
        """(p, q) of a node report's bits (drawn)."""
        return tree_node_probabilities(self.eps_node)

    @property
    def body_size(self) -> int:
        """The level, a byte 0 (initial report) or 1 (node), then 2k packed bits (≥ the
        initial report's)."""
        return 2 + -(-2 * self.k // 8)

    @property
    def change_epsilon(self) -> float:
        return float(self.eps_node)

    # -- claims
    def single_report_epsilon(self) -> float:
        """The larger of the initial report's ε and a node's 2·ln(p(1 − q)/(q(1 − p)))."""
        p, q = self.node_probabilities
        node = privacy.round_up(tree_node_epsilon(p, q))
        return max(fo_claim(self.initial_kind, self.p1, self.q1), node)

    def context_outputs(self) -> tuple[int, ...]:
        first = self.k if self.initial_kind == "grr" else 2**self.k
        return (first, 2 ** (2 * self.k))

    def probabilities(self) -> dict[str, float]:
        p, q = self.node_probabilities
        return {"p1": self.p1, "q1": self.q1, "node_p": p, "node_q": q}

    def context_channels(
        self, probabilities: Mapping[str, float] | None = None
    ) -> tuple[NDArray[np.float64], ...]:
        """The initial report (rows: the k values) and a node (rows: the k² transitions a → b,
        row a·k + b; a = b is the zero node)."""
        pr = {**self.probabilities(), **(probabilities or {})}
        k = self.k
        a, b = np.divmod(np.arange(k * k), k)
        patterns = np.zeros((k * k, 2 * k), dtype=bool)
        moved = a != b
        patterns[moved, b[moved]] = True
        patterns[moved, k + a[moved]] = True
        p1 = pr["p1"]
        q1 = (1 - p1) / (k - 1) if self.initial_kind == "grr" else pr["q1"]
        initial = fo_channel(self.initial_kind, k, p1, q1)
        node = bit_matrix(pr["node_p"], pr["node_q"])
        return (initial, unary_channel(2 * k, node, patterns))

    # -- the device
    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"level": np.asarray(rng.integers(0, self.levels, size=m), dtype=np.int64)}

    def new_history(self, m: int) -> dict[str, NDArray]:
        return {name: np.full(m, -1, dtype=np.int64) for name in ("current", "anchor", "last")}

    def history_step(
        self,
        values: NDArray,
        state: dict[str, NDArray],
        history: dict[str, NDArray],
        epochs: NDArray[np.int64],
        plan: Mapping[str, Any] | None,
    ) -> HistoryStep:
        """Epoch 0: the initial report of the value; a node end s of the device's level: the
        transition from its value at s − 2^h (carried forward) to its value now; else nothing."""
        self.check_plan(plan)
        x = np.asarray(values, dtype=np.int64)
        e = np.asarray(epochs, dtype=np.int64)
        self._check_epochs(e, history["last"], self.tau)
        size = np.left_shift(1, state["level"])
        # The anchor is the value at the last node end; one passed unobserved takes the value
        # last seen (carried forward).
        passed = ((e - 1) // size) * size > history["last"]
        anchor = np.where(passed, history["current"], history["anchor"])
        initial = e == 0
        node_end = (e >= 1) & (e % size == 0)
        node = node_end & (anchor >= 0)
        k = self.k
        inputs = np.where(initial, x, np.where(node, k + anchor * k + x, -1))
        costs = np.where(
            initial, float(self.eps_0), np.where(node & (anchor != x), float(self.eps_node), 0.0)
        )
        return HistoryStep(
            inputs.astype(np.int64),
            costs.astype(np.float64),
            {
                "current": x.copy(),
                "anchor": np.where(initial | node_end, x, anchor),
                "last": e.copy(),
            },
        )

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """Initial reports (inputs < k) through the oracle, node reports (a·k + b, shifted by k)
        through :func:`~longldp.protocols.streams.changes_tree.node_bits`."""
        keys = np.asarray(keys, dtype=np.int64)
        k, width = self.k, self.body_size - 2
        rows = np.zeros((keys.size, self.body_size), dtype=np.uint8)
        rows[:, 0] = np.asarray(state["level"])
        first = keys < k
        if first.any():
            reports = oracle.perturb(keys[first], self.initial_kind, k, self.eps_0, rng)
            rows[first, 2:] = fo_payload(self.initial_kind, k, reports, width)
        node = ~first
        if node.any():
            before, now = np.divmod(keys[node] - k, k)
            p, q = self.node_probabilities
            bits = changes_tree.node_bits(before, now, k, p, q, rng)
            rows[node, 1] = 1
            rows[node, 2:] = np.packbits(bits, axis=1)
        return rows

    # -- the codec and the estimator
    def _cohorts(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return rows[:, 0].astype(np.int64)

    def _check_bodies(self, rows: NDArray[np.uint8]) -> None:
        if np.any(rows[:, 0] >= self.levels):
            raise ValueError(f"{self.name}: a report's level must be in [0, {self.levels}).")
        if np.any(rows[:, 1] > 1):
            raise ValueError(f"{self.name}: a report's second byte must be 0 (initial) or 1.")
        first = rows[:, 1] == 0
        fo_check(self.name, self.initial_kind, self.k, rows[first, 2:])
        if np.any(np.unpackbits(rows[~first, 2:], axis=1)[:, 2 * self.k :]):
            raise ValueError(f"{self.name}: a node report has bits set beyond 2k = {2 * self.k}.")

    @property
    def support_shape(self) -> tuple[int, ...]:
        """(L + 1, 2k + 1): row 0 the initial reports, row 1 + h level h's node reports; each
        row [reports, then its support counts (k for the initial, the 2k bits of a node)]."""
        return (self.levels + 1, 2 * self.k + 1)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """(L + 1, k): row 0 f̂ at epoch 0; row 1 + h the net flow into each value over the
        node of level h that ends at this epoch (NaN where no report came)."""
        return (self.levels + 1, self.k)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        rows = self._check_rows(self._bodies(reports))
        k = self.k
        out = np.zeros(self.support_shape, dtype=np.int64)
        first = rows[:, 1] == 0
        out[0, 0] = int(first.sum())
        out[0, 1 : k + 1] = fo_counts(self.initial_kind, k, rows[first, 2:])
        tags = rows[~first, 0].astype(np.int64)
        bits = np.unpackbits(rows[~first, 2:], axis=1, count=2 * k).astype(np.int64)
        out[1:, 0] = np.bincount(tags, minlength=self.levels)
        np.add.at(out[1:, 1:], tags, bits)
        return out

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """Row 0: (C/m − P0)/(P1 − P0); a node row: plus share − minus share, each share
        (C/m − q)/(p − q)."""
        k = self.k
        c = np.asarray(support, dtype=np.float64)
        out = np.empty((*c.shape[:-1], k))
        m0 = c[..., 0:1, 0:1]
        out[..., 0:1, :] = _shares(c[..., 0:1, 1 : k + 1], m0, self.p1, self.q1)
        p, q = self.node_probabilities
        m = c[..., 1:, 0:1]
        plus, minus = _shares(c[..., 1:, 1 : k + 1], m, p, q), _shares(c[..., 1:, k + 1 :], m, p, q)
        out[..., 1:, :] = plus - minus
        return out

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        out = super().plug_in(raw)
        with np.errstate(invalid="ignore"):
            out[..., 0, :] = np.clip(out[..., 0, :], 0.0, 1.0)
        return out

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Row 0: (1.2) at the plug-in frequencies; a node: (19.9) with the numbers of
        reporters whose plus (minus) part is v estimated from the support."""
        k = self.k
        c = np.asarray(support, dtype=np.float64)
        out = np.full(self.estimate_shape, np.nan)
        m0 = c[0, 0]
        if m0 > 0:
            out[0] = privacy.estimator_variance(int(m0), plug_in[0], self.p1, self.q1)
        p, q = self.node_probabilities
        for h in range(self.levels):
            m = c[1 + h, 0]
            if m == 0:
                continue
            share = np.clip(_shares(c[1 + h, 1:], m, p, q), 0.0, 1.0)
            bit = (share * p * (1 - p) + (1 - share) * q * (1 - q)) / (m * (p - q) ** 2)
            out[1 + h] = bit[:k] + bit[k:]
        return out

    def release(self, estimates: NDArray) -> NDArray[np.float64]:
        """Frequencies at epochs 0..τ′−1 from the per-epoch estimates (τ′, L + 1, k):
        f̂(s) = f̂(0) + the node flows tiling (0, s] (docs/math.md §19.4)."""
        est = np.asarray(estimates, dtype=np.float64)
        if est.ndim != 3 or est.shape[1:] != self.estimate_shape:
            raise ValueError(
                f"{self.name}: 'estimates' must have shape (tau, {self.levels + 1}, {self.k}); "
                f"got {est.shape}."
            )
        out = np.empty((est.shape[0], self.k))
        for s in range(est.shape[0]):
            nodes = [est[end, 1 + h] for h, end in dyadic_decomposition(s)]
            out[s] = est[0, 0] + np.sum(nodes, axis=0) if nodes else est[0, 0]
        return out

    def report_costs(self, records: NDArray) -> NDArray[np.float64]:
        """ε_0 for an initial report, ε_node for a node report (zero or not: the server cannot
        tell)."""
        rows = self._check_rows(self._bodies(records))
        return np.where(rows[:, 1] == 0, float(self.eps_0), float(self.eps_node))

    # -- accounting and simulation
    def change_spent(
        self, trajectories: NDArray, run: Any = None, state: Mapping[str, Any] | None = None
    ) -> NDArray[np.float64]:
        """ε_0 + ε_n per non-zero node at the user's level ((19.8); the worst level without
        the levels of a run or of the users' state)."""
        levels = run.levels if run is not None else (None if state is None else state["level"])
        return ledger.changes_tree_spent(trajectories, self.eps_node, self.eps_0, levels)

    def run(self, values: NDArray, rng: np.random.Generator) -> changes_tree.TreeRun:
        """Simulate ``values[τ, n]`` (τ = the protocol's ``tau``) with the kernel
        (:func:`longldp.protocols.streams.changes_tree.run`)."""
        values = np.asarray(values)
        if values.ndim != 2 or values.shape[0] != self.tau:
            raise ValueError(
                f"{self.name}: 'values' must be (tau = {self.tau}, n); got shape {values.shape}."
            )
        return changes_tree.run(values, self.k, self.eps_node, self.eps_0, rng)


# ------------------------------------------------------------------------------ DDRM

DDRM_CLIENT = ClientSpec(
    family="changes",
    chain="p1 = D(1/(1 + e^(−ε))) (+1 when Δ = 1), q1 = 1 − p1 (+1 when Δ = −1), 1/2 when Δ = 0",
    round2="1, 0",
    eps_1="ρ(ln(p1/q1))",
    eps_perm="ε1 (nothing is memoized)",
    state="item j: an integer in [0, k)",
    memo_key="v",
    round1="b = [v = j]; leaf Δ = b − b(s − 1), top Δ = b − b(s − 2^ν), s = epoch + 1, ν its "
    "trailing zeros; if ν > 0 one float u: top if u < 0.5; then one float u′: +1 if u′ < "
    "Pr[+1 | Δ of the node] (§6.4)",
    draws2="none (one-shot; the history is kept, §6.4)",
)


@dataclass(frozen=True)
class DDRM(ChangeMechanism):
    """DDRM: difference trees that cost nothing without change ([XUE22]; docs/math.md §19.5).

    A device draws once an item j of [0, k) (its per-device state, sent in every report) and
    follows the bit b_s = [x_{s−1} = j]. At each epoch t (s = t + 1) it reports one node of the
    dyadic tree ending at s: the leaf, or with a fair coin when s is even the largest node
    ending at s; the node's difference Δ ∈ {−1, 0, 1} goes through a ternary randomized
    response at ``eps`` (a zero difference is a fair coin). Spending: ε per epoch at which a
    candidate node is non-zero ((19.12)). ``tau``: the horizon (epochs 0..τ − 1).
    """

    k: int
    eps: float
    tau: int
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "DDRM"
    wire_id: ClassVar[int] = 49
    budget_params: ClassVar[tuple[str, ...]] = ("eps",)
    test_params: ClassVar[tuple[dict, ...]] = ({"eps": 1.0, "tau": 8},)
    #: The item rides in every report: a public group drawn once.
    linkage: ClassVar[Linkage] = Linkage.of(Persistent.COHORT)
    history: ClassVar[History | None] = History(
        ("current", "marks", "last"),
        "current: the bit b at the device's last epoch (0: none); marks[h]: b at the last "
        "multiple of 2^h of the tree's points (carried forward); last: that epoch (-1: none)",
    )
    client_spec: ClassVar[ClientSpec | None] = DDRM_CLIENT

    def __post_init__(self) -> None:
        check.integer(self.name, "k", self.k, minimum=2)
        check.budget(self.name, "eps", self.eps)
        check.integer(self.name, "tau", self.tau, minimum=1)
        down, _, up = ddrm_plus_probabilities(self.eps)
        set_derived(self, p1=up, q1=down)

    @property
    def levels(self) -> int:
        """L: the levels of the tree over the points 1..τ."""
        return tree_levels(self.tau)

    @property
    def body_size(self) -> int:
        """The item (big-endian), then a byte: bit 1 the top node was reported, bit 0 the +1."""
        return min_bytes(self.k - 1) + 1

    @property
    def change_epsilon(self) -> float:
        """A change of the bit lies in one node per level: ε·L."""
        return float(self.eps * self.levels)

    def single_report_epsilon(self) -> float:
        """ln(p1/q1): Δ = +1 against Δ = −1 (a zero difference is a fair coin between them)."""
        return privacy.round_up(math.log(self.p1 / self.q1))

    def context_outputs(self) -> tuple[int, ...]:
        return (2, 4)

    def probabilities(self) -> dict[str, float]:
        return {"up": self.p1, "down": self.q1, "half": 0.5}

    def context_channels(
        self, probabilities: Mapping[str, float] | None = None
    ) -> tuple[NDArray[np.float64], ...]:
        """An odd point s (rows: the leaf's Δ + 1; outputs −1, +1) and an even one (rows:
        3·(leaf Δ + 1) + top Δ + 1; outputs (leaf, −1), (leaf, +1), (top, −1), (top, +1))."""
        pr = {**self.probabilities(), **(probabilities or {})}
        plus = np.array([pr["down"], pr["half"], pr["up"]])
        odd = np.stack([1 - plus, plus], axis=1)
        leaf, top = np.divmod(np.arange(9), 3)
        coin = pr["half"]
        even = np.concatenate([(1 - coin) * odd[leaf], coin * odd[top]], axis=1)
        return (odd, even)

    def _new_state(self, m: int, rng: RandomSource) -> dict[str, NDArray]:
        return {"item": np.asarray(rng.integers(0, self.k, size=m), dtype=np.int64)}

    def new_history(self, m: int) -> dict[str, NDArray]:
        return {
            "current": np.zeros(m, dtype=np.int64),
            "marks": np.zeros((m, self.levels), dtype=np.int64),
            "last": np.full(m, -1, dtype=np.int64),
        }

    def history_step(
        self,
        values: NDArray,
        state: dict[str, NDArray],
        history: dict[str, NDArray],
        epochs: NDArray[np.int64],
        plan: Mapping[str, Any] | None,
    ) -> HistoryStep:
        """Every epoch: the leaf's and (s even) the top node's differences of the item's bit."""
        self.check_plan(plan)
        x = np.asarray(values, dtype=np.int64)
        e = np.asarray(epochs, dtype=np.int64)
        self._check_epochs(e, history["last"], self.tau)
        s = e + 1
        b = (x == np.asarray(state["item"])).astype(np.int64)
        mult = np.left_shift(1, np.arange(self.levels))[None, :]
        # b at the last multiple of 2^h below s; one passed unobserved takes the last b seen.
        passed = ((s[:, None] - 1) // mult) * mult > (history["last"] + 1)[:, None]
        marks = np.where(passed, history["current"][:, None], history["marks"])
        top = np.log2(s & -s).astype(np.int64)
        rows = np.arange(s.size)
        leaf_d = b - marks[:, 0]
        top_d = np.where(top > 0, b - marks[rows, top], leaf_d)
        inputs = np.where(top > 0, 3 * (leaf_d + 1) + top_d + 1, 9 + leaf_d + 1)
        costs = np.where((leaf_d != 0) | (top_d != 0), float(self.eps), 0.0)
        return HistoryStep(
            inputs.astype(np.int64),
            costs,
            {
                "current": b,
                "marks": np.where(s[:, None] % mult == 0, b[:, None], marks),
                "last": e.copy(),
            },
        )

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """Report inputs < 9: (leaf, top) differences at an even point, with the coin; 9..11:
        the leaf's at an odd point (:func:`longldp.protocols.streams.ddrm.node_reports`)."""
        keys = np.asarray(keys, dtype=np.int64)
        even = keys < 9
        leaf = np.where(even, keys // 3, keys - 9) - 1
        top = np.where(even, keys % 3 - 1, leaf)
        use_top, up = ddrm.node_reports(leaf, top, even, self.q1, self.p1, rng)
        rows = np.zeros((keys.size, self.body_size), dtype=np.uint8)
        nb = self.body_size - 1
        rows[:, :nb] = uint_to_bytes(np.asarray(state["item"], dtype=np.int64), nb)
        rows[:, nb] = 2 * use_top + up
        return rows

    def _cohorts(self, rows: NDArray[np.uint8]) -> NDArray[np.int64]:
        return bytes_to_uint(rows[:, : self.body_size - 1])

    def _check_bodies(self, rows: NDArray[np.uint8]) -> None:
        nb = self.body_size - 1
        if np.any(bytes_to_uint(rows[:, :nb]) >= self.k):
            raise ValueError(f"{self.name}: a report's item must be in [0, {self.k}).")
        if np.any(rows[:, nb] > 3):
            raise ValueError(f"{self.name}: a report's last byte must be in [0, 4).")

    @property
    def support_shape(self) -> tuple[int, ...]:
        """(2, 2k): row 0 the leaf reports, row 1 the top-node reports; per item j, column j
        its reports and column k + j its +1 reports."""
        return (2, 2 * self.k)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """(2, k): each item's mean node difference, leaf (row 0) and top node (row 1); NaN
        where no report came. The kernel combines them over epochs ((19.11))."""
        return (2, self.k)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        rows = self._check_rows(self._bodies(reports))
        nb = self.body_size - 1
        k = self.k
        item = bytes_to_uint(rows[:, :nb])
        flags = rows[:, nb].astype(np.int64)
        top, up = flags >> 1, flags & 1
        out = np.zeros(self.support_shape, dtype=np.int64)
        for r in (0, 1):
            sel = top == r
            out[r, :k] = np.bincount(item[sel], minlength=k)
            out[r, k:] = np.bincount(item[sel], weights=up[sel], minlength=k).astype(np.int64)
        return out

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """c·(mean of the ±1 reports) with c = (e^ε + 1)/(e^ε − 1), per item and node."""
        k = self.k
        c = np.asarray(support, dtype=np.float64)
        m, ups = c[..., :k], c[..., k:]
        with np.errstate(divide="ignore", invalid="ignore"):
            return ddrm_scale(self.eps) * (2 * ups - m) / m

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """(c² − mean Δ²)/m with mean Δ² ≥ |mean Δ| taken at its lower bound |Δ̂| (so the
        standard error is conservative; docs/math.md §19.5)."""
        m = np.asarray(support, dtype=np.float64)[..., : self.k]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (ddrm_scale(self.eps) ** 2 - np.abs(plug_in)) / m
        return np.where(m > 0, out, np.nan)

    def change_spent(
        self, trajectories: NDArray, run: Any = None, state: Mapping[str, Any] | None = None
    ) -> NDArray[np.float64]:
        """ε per epoch with a non-zero candidate node ((19.12)); without the items of a run or
        of the users' state, the worst item for each user."""
        x = np.asarray(trajectories)
        items = run.items if run is not None else (None if state is None else state["item"])
        if items is not None:
            return ledger.ddrm_spent(x, items, self.eps)
        n = x.shape[0] if x.ndim == 2 else 0
        return np.max(
            [ledger.ddrm_spent(x, np.full(n, j), self.eps) for j in range(self.k)], axis=0
        )

    def report_costs(self, records: NDArray) -> NDArray[np.float64]:
        """ε for every report (its node's difference may be zero: the server cannot tell)."""
        rows = self._check_rows(self._bodies(records))
        return np.full(rows.shape[0], float(self.eps))

    def run(self, values: NDArray, rng: np.random.Generator) -> ddrm.DDRMRun:
        """Simulate ``values[τ, n]`` (τ ≤ the protocol's ``tau``) with the kernel
        (:func:`longldp.protocols.streams.ddrm.run`)."""
        values = np.asarray(values)
        if values.ndim != 2 or not 1 <= values.shape[0] <= self.tau:
            raise ValueError(
                f"{self.name}: 'values' must be (tau', n) with tau' <= {self.tau}; got shape "
                f"{values.shape}."
            )
        return ddrm.run(values, self.k, self.eps, rng)


# ------------------------------------------------------------------------------ THRESH

THRESH_CLIENT = ClientSpec(
    family="changes",
    chain="vote: p = D(1/(1 + e^(−ε_v))), q = 1 − p with ε_v = ε/(4·max_votes); update: the "
    "adaptive oracle at ε_e = ε/(4·max_updates)",
    round2="1, 0",
    eps_1="ρ(max(ln(p/q), ε of the update's oracle))",
    eps_perm="ε1 (nothing is memoized)",
    state="none",
    memo_key="v",
    round1='the plan {"round": "vote"}: one float u: 1 if u < (real ? p : q), real = v ≠ the '
    'value at the last update and votes < max_votes; {"round": "estimate"}: the oracle at ε_e '
    "of v, or of a uniform integer of [0, k) drawn first when estimates = max_updates (§6.4)",
    draws2="none (one-shot; the history is kept, §6.4)",
)


@dataclass(frozen=True)
class Thresh(ChangeMechanism):
    """THRESH: votes to update stale statistics (Joseph, Roth, Ullman, Waggoner, NeurIPS 2018).

    Rounds planned by the server (``{"round": "vote"}`` or ``{"round": "estimate"}``): at each
    epoch every device votes whether its value changed since the last update (randomized
    response of 1 at ε_vote while its vote counter has room, else of 0); when the estimated
    share of changed users exceeds z standard errors of no change the server opens an update
    round, in which every device sends the adaptive oracle's report at ε_est of its value (of a
    uniform value once its estimate counter is spent). ε_vote = ε/(4·max_votes), ε_est =
    ε/(4·max_updates) with ε = ``eps_total``: any two trajectories are ε-indistinguishable
    (docs/math.md (19.6)); a user spends at most ε/2 ((19.5)).
    """

    k: int
    eps_total: float
    max_votes: int
    max_updates: int
    z: float = 3.0
    p1: float = field(init=False)
    q1: float = field(init=False)
    p2: float = field(init=False, default=1.0)
    q2: float = field(init=False, default=0.0)
    name: ClassVar[str] = "THRESH"
    wire_id: ClassVar[int] = 47
    rounds: ClassVar[Rounds] = Rounds.PLANNED
    plan_keys: ClassVar[tuple[str, ...]] = ("round",)
    budget_params: ClassVar[tuple[str, ...]] = ("eps_total",)
    budget_note: ClassVar[str] = "(ε between any two trajectories; max_votes and max_updates)"
    test_params: ClassVar[tuple[dict, ...]] = (
        {"eps_total": 2.0, "max_votes": 2, "max_updates": 2},
    )
    #: Nothing per device rides in a report: the round is the server's, the same for all.
    linkage: ClassVar[Linkage] = Linkage()
    history: ClassVar[History | None] = History(
        ("reference", "votes", "estimates", "last_vote", "last_estimate"),
        "reference: the value at the last update (-1: none); votes, estimates: the real ones "
        "sent; last_vote, last_estimate: the epochs of the last of each (-1: none)",
    )
    client_spec: ClassVar[ClientSpec | None] = THRESH_CLIENT

    ROUNDS: ClassVar[tuple[str, ...]] = ("vote", "estimate")

    def __post_init__(self) -> None:
        check.integer(self.name, "k", self.k, minimum=2)
        check.budget(self.name, "eps_total", self.eps_total)
        check.integer(self.name, "max_votes", self.max_votes, minimum=1)
        check.integer(self.name, "max_updates", self.max_updates, minimum=1)
        check.positive_float(self.name, "z", self.z)
        p, q = fo_probabilities(self.estimate_kind, self.k, self.budgets[1])
        set_derived(self, p1=p, q1=q)

    @property
    def budgets(self) -> tuple[float, float]:
        """(ε_vote, ε_est) (docs/math.md (19.4))."""
        return thresh_budgets(self.eps_total, self.max_votes, self.max_updates)

    @functools.cached_property
    def estimate_kind(self) -> str:
        """The update's oracle: GRR when k < 3e^ε_est + 2, else OUE (math §19.1)."""
        return fo_kind("adaptive", self.k, self.budgets[1])

    @property
    def vote_probabilities(self) -> tuple[float, float]:
        """(p, q) of a vote (drawn): 1 with p for a real vote, with q = 1 − p for the default."""
        return rr_probabilities(self.budgets[0])

    @property
    def body_size(self) -> int:
        """A tag byte (0: vote, 1: update), then the vote bit or the oracle's report."""
        return 1 + max(1, fo_width(self.estimate_kind, self.k))

    @property
    def change_epsilon(self) -> float:
        """A change costs at most a real vote."""
        return float(self.budgets[0])

    def single_report_epsilon(self) -> float:
        """The larger of a vote's ln(p/q) and the update oracle's ε."""
        p, q = self.vote_probabilities
        vote = privacy.round_up(math.log(p / q))
        return max(vote, fo_claim(self.estimate_kind, self.p1, self.q1))

    def context_outputs(self) -> tuple[int, ...]:
        return (2, self.k if self.estimate_kind == "grr" else 2**self.k)

    def probabilities(self) -> dict[str, float]:
        p, q = self.vote_probabilities
        return {"vote_p": p, "vote_q": q, "p1": self.p1, "q1": self.q1}

    def context_channels(
        self, probabilities: Mapping[str, float] | None = None
    ) -> tuple[NDArray[np.float64], ...]:
        """A vote (rows: default, real; outputs 0, 1) and an update (rows: the k values, then
        the default, a fresh uniform value: the mean of the rows)."""
        pr = {**self.probabilities(), **(probabilities or {})}
        p1 = pr["p1"]
        q1 = (1 - p1) / (self.k - 1) if self.estimate_kind == "grr" else pr["q1"]
        update = fo_channel(self.estimate_kind, self.k, p1, q1)
        vote = bit_matrix(pr["vote_p"], pr["vote_q"])
        return (vote, np.vstack([update, update.mean(axis=0)]))

    # -- plans
    def check_plan(self, plan: Mapping[str, Any] | None) -> dict[str, Any]:
        """{"round": "vote"} or {"round": "estimate"}."""
        plan = super().check_plan(plan)
        if plan["round"] not in self.ROUNDS:
            raise ValueError(
                f"{self.name}: the plan's 'round' must be 'vote' or 'estimate'; got "
                f"{plan['round']!r}."
            )
        return plan

    def example_plan(self, epoch: int) -> dict[str, Any]:
        """An update at epoch 0 (there is nothing to compare with yet), votes after."""
        return {"round": "estimate" if epoch == 0 else "vote"}

    def for_round(self, plan: Mapping[str, Any] | None) -> Thresh:
        """Both rounds are this mechanism's (the tag tells them apart)."""
        self.check_plan(plan)
        return self

    def server_plan(
        self, offset: int, closed: Callable[[int], NDArray | None]
    ) -> tuple[str, dict[str, Any] | None]:
        """A collection's epochs are THRESH's rounds: even offsets 2t the votes of period t,
        odd offsets 2t + 1 its update. Offset 0 has no vote (nothing to compare with yet) and
        offset 1 always updates; a later update is opened when the vote epoch before it is
        closed and its votes call for one (:meth:`update_needed`), and pending until then."""
        offset = check.integer(self.name, "offset", offset, minimum=0)
        if offset == 0:
            return "none", None
        if offset % 2 == 0:
            return "report", {"round": "vote"}
        if offset == 1:
            return "report", {"round": "estimate"}
        votes = closed(offset - 1)
        if votes is None:
            return "pending", None
        return ("report", {"round": "estimate"}) if self.update_needed(votes) else ("none", None)

    def report_costs(self, records: NDArray) -> NDArray[np.float64]:
        """ε_vote for a vote, ε_est for an update report (real or not: the server cannot tell;
        :meth:`reports_spent` caps them by the counters)."""
        rows = self._check_rows(self._bodies(records))
        eps_vote, eps_est = self.budgets
        return np.where(rows[:, 0] == 0, eps_vote, eps_est)

    def reports_spent(
        self,
        owners: NDArray[np.int64],
        epochs: NDArray[np.int64],
        records: NDArray,
        plans: Callable[[int], Mapping[str, Any] | None],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """ε_vote·min(votes, max_votes) + ε_est·min(updates, max_updates) per device: every
        vote counted as real (the server cannot tell), capped by the device's counters; at most
        ε/2 ((19.5))."""
        rows = self._check_rows(self._bodies(records))
        devices, who = np.unique(np.asarray(owners, dtype=np.int64), return_inverse=True)
        votes = np.bincount(who, weights=rows[:, 0] == 0, minlength=devices.size)
        updates = np.bincount(who, weights=rows[:, 0] == 1, minlength=devices.size)
        eps_vote, eps_est = self.budgets
        spent = eps_vote * np.minimum(votes, self.max_votes) + eps_est * np.minimum(
            updates, self.max_updates
        )
        return devices, spent, spent

    def update_needed(self, support: NDArray) -> bool:
        """The server's decision after an epoch's votes: the estimated share of changed users
        exceeds z standard errors of no change (docs/math.md §19.3)."""
        c = np.asarray(support)
        votes = int(c[0])
        if votes == 0:
            return False
        share = float(self.unbiased(c.astype(np.float64), max(1, votes))[0])
        return share > thresh_vote_threshold(votes, self.budgets[0], self.z)

    # -- the device
    def new_history(self, m: int) -> dict[str, NDArray]:
        out = {name: np.full(m, -1, dtype=np.int64) for name in ("reference",)}
        out |= {name: np.zeros(m, dtype=np.int64) for name in ("votes", "estimates")}
        out |= {name: np.full(m, -1, dtype=np.int64) for name in ("last_vote", "last_estimate")}
        return out

    def history_step(
        self,
        values: NDArray,
        state: dict[str, NDArray],
        history: dict[str, NDArray],
        epochs: NDArray[np.int64],
        plan: Mapping[str, Any] | None,
    ) -> HistoryStep:
        """A vote (real when the value left the one of the last update and the counter has
        room) or an update report (real while the estimate counter has room). Without a plan
        (a simulation's population path): :meth:`example_plan` of the epoch."""
        x = np.asarray(values, dtype=np.int64)
        e = np.asarray(epochs, dtype=np.int64)
        if plan is None:
            if np.unique(e == 0).size > 1:
                raise ValueError(f"{self.name}: pass the plan of the epoch (devices differ).")
            plan = self.example_plan(int(e[0]) if e.size else 0)
        kind = self.check_plan(plan)["round"]
        h = dict(history)
        if kind == "vote":
            self._check_epochs(e, np.maximum(h["last_vote"], h["last_estimate"]), None)
            real = (h["reference"] >= 0) & (x != h["reference"]) & (h["votes"] < self.max_votes)
            h["votes"] = h["votes"] + real
            h["last_vote"] = e.copy()
            cost = np.where(real, self.budgets[0], 0.0)
            return HistoryStep(self.k + 1 + real.astype(np.int64), cost, h)
        self._check_epochs(e, np.maximum(h["last_estimate"], h["last_vote"] - 1), None)
        real = h["estimates"] < self.max_updates
        h["estimates"] = h["estimates"] + real
        h["reference"] = x.copy()
        h["last_estimate"] = e.copy()
        cost = np.where(real, self.budgets[1], 0.0)
        return HistoryStep(np.where(real, x, self.k).astype(np.int64), cost, h)

    def _round1(self, keys: NDArray[np.int64], state: dict, rng: RandomSource) -> NDArray:
        """Update inputs (a value, or k: the default) through
        :func:`~longldp.protocols.streams.thresh.update_reports`; votes (k + 1: default,
        k + 2: real) through :func:`~longldp.protocols.streams.thresh.vote_bits`."""
        keys = np.asarray(keys, dtype=np.int64)
        k, width = self.k, self.body_size - 1
        rows = np.zeros((keys.size, self.body_size), dtype=np.uint8)
        update = keys <= k
        if update.any():
            reports = thresh.update_reports(
                keys[update], self.estimate_kind, k, self.budgets[1], rng
            )
            rows[update, 0] = 1
            rows[update, 1:] = fo_payload(self.estimate_kind, k, reports, width)
        vote = ~update
        if vote.any():
            p, q = self.vote_probabilities
            rows[vote, 1] = thresh.vote_bits(keys[vote] == k + 2, p, q, rng)
        return rows

    def _check_bodies(self, rows: NDArray[np.uint8]) -> None:
        tag = rows[:, 0]
        if np.any(tag > 1):
            raise ValueError(f"{self.name}: a report's tag must be 0 (vote) or 1 (update).")
        votes = rows[tag == 0]
        if np.any(votes[:, 1] > 1) or np.any(votes[:, 2:]):
            raise ValueError(f"{self.name}: a vote must be one byte 0 or 1, then zeros.")
        fo_check(self.name, self.estimate_kind, self.k, rows[tag == 1, 1:])

    @property
    def support_shape(self) -> tuple[int, ...]:
        """(k + 3,): votes, votes of 1, update reports, then the updates' support counts."""
        return (self.k + 3,)

    @property
    def estimate_shape(self) -> tuple[int, ...]:
        """(k + 1,): the share of users who changed since the last update (from the votes),
        then the update's frequencies (NaN for a round without reports)."""
        return (self.k + 1,)

    def support_counts(self, reports: NDArray) -> NDArray[np.int64]:
        rows = self._check_rows(self._bodies(reports))
        vote = rows[:, 0] == 0
        out = np.zeros(self.support_shape, dtype=np.int64)
        out[0] = int(vote.sum())
        out[1] = int(rows[vote, 1].sum())
        out[2] = int((~vote).sum())
        out[3:] = fo_counts(self.estimate_kind, self.k, rows[~vote, 1:])
        return out

    def unbiased(self, support: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """ĉ = (ȳ − q)/(p − q) of the votes; f̂ = (C/m − P0)/(P1 − P0) of the update."""
        c = np.asarray(support, dtype=np.float64)
        p, q = self.vote_probabilities
        out = np.empty((*c.shape[:-1], self.k + 1))
        out[..., 0] = _shares(c[..., 1], c[..., 0], p, q)
        out[..., 1:] = _shares(c[..., 3:], c[..., 2:3], self.p1, self.q1)
        return out

    def plug_in(self, raw: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(invalid="ignore"):
            return np.clip(raw, 0.0, 1.0)

    def estimate_variance(
        self, support: NDArray, n: int, plug_in: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """The votes' RR variance ȳ(1 − ȳ)/(m(p − q)²) at ȳ = q + ĉ(p − q), and (1.2) of the
        update at the plug-in frequencies (an exhausted counter's default pulls toward
        uniform: docs/math.md §19.3)."""
        c = np.asarray(support, dtype=np.float64)
        p, q = self.vote_probabilities
        out = np.full(self.estimate_shape, np.nan)
        if c[0] > 0:
            y = q + plug_in[0] * (p - q)
            out[0] = y * (1 - y) / (c[0] * (p - q) ** 2)
        if c[2] > 0:
            out[1:] = privacy.estimator_variance(int(c[2]), plug_in[1:], self.p1, self.q1)
        return out

    def change_spent(
        self, trajectories: NDArray, run: Any = None, state: Mapping[str, Any] | None = None
    ) -> NDArray[np.float64]:
        """ε_vote·(real votes) + ε_est·(real estimates) given the run's update epochs ((19.5));
        without them the guarantee's ε/2 for every user (THRESH keeps no per-user state)."""
        x = np.asarray(trajectories)
        if run is None:
            return np.full(x.shape[0] if x.ndim == 2 else 0, self.eps_total / 2)
        eps_vote, eps_est = self.budgets
        return ledger.thresh_spent(
            x, run.updates, eps_vote, eps_est, self.max_votes, self.max_updates
        )

    def run(self, values: NDArray, rng: np.random.Generator) -> thresh.ThreshRun:
        """Simulate ``values[τ, n]`` with the kernel (:func:`longldp.protocols.streams.thresh.run`),
        whose server decides the updates as :meth:`update_needed` does."""
        return thresh.run(
            values, self.k, self.eps_total, self.max_votes, self.max_updates, rng, self.z
        )


#: The registered change-based classes, in the order of math §19.3–§19.5.
CHANGE_CLASSES = (Thresh, ChangesTree, DDRM)

__all__ = [
    "CHANGE_CLASSES",
    "CHANGE_REPORTS",
    "DDRM",
    "ChangeMechanism",
    "ChangeReports",
    "ChangesTree",
    "Thresh",
]

# A case per class for the device test vectors (docs/client-spec.md §9): set below the classes
# so that the cases can name them.
# CHANGES-TREE skips epoch 4 (a node end of the device's level): its value is carried forward.
# DDRM is refused past max_epsilon at epoch 5, and carries its bit over that epoch.
ChangesTree.vector_cases = (
    VectorCase(
        {"k": 3, "eps_0": 1.0, "eps_node": 2.0, "tau": 9},
        (0, 0, 2, 2, 1, 1, 0, 2),
        epochs=(0, 1, 2, 3, 5, 6, 7, 8),
    ),
)
DDRM.vector_cases = (
    VectorCase({"k": 4, "eps": 1.5, "tau": 8}, (1, 1, 3, 3, 1, 0, 1, 1), max_epsilon=6.0),
)
Thresh.vector_cases = (
    VectorCase(
        {"k": 5, "eps_total": 2.0, "max_votes": 1, "max_updates": 2},
        (4, 4, 1, 1, 1, 2, 2),
        epochs=(0, 1, 2, 2, 3, 4, 4),
        plans=(
            {"round": "estimate"},
            {"round": "vote"},
            {"round": "vote"},
            {"round": "estimate"},
            {"round": "vote"},
            {"round": "vote"},
            {"round": "estimate"},
        ),
    ),
)
