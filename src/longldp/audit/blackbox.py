"""Audit any randomizer as a black box, one report or τ reports (docs/audit.md §7–§9).

:func:`audit_randomizer` takes a plain function ``randomize(values, rng)`` (an int64 array of
inputs in [0, k) and a ``numpy.random.Generator``; one report per input, as a 2-D uint8 array
of fixed-width rows or a list of ``bytes``), draws ``trials`` reports for every audited input,
and bounds its ε from below with tests found from the reports themselves
(:mod:`longldp.audit.events`): nothing of a claimed protocol is used but the claim the bound is
held against. :func:`audit_lifetime` does the same for a stateful randomizer over τ reports
per client.

Validity (docs/audit.md §7): the trials of every input are split at random into a search half
and a held-out half; the search chooses the events, the held-out half counts them, and each of
the m held-out tests is bounded at level α/m. If the reports of distinct calls are independent
given their inputs (what an ε-LDP claim about independent users is about), the reported bound
is below the true ε with probability ≥ 1 − α = ``confidence``.

Inputs audited: every ordered pair of all k inputs for k ≤ :data:`MAX_INPUTS`. For larger k a
screening pass draws ``screen_trials`` reports of *every* input (search data only, never
counted in a bound) and keeps the four boundary inputs 0, 1, k − 2, k − 1 and the
:data:`MAX_INPUTS` − 4 inputs whose report distributions stand out most from the pooled one
(largest |z| of a byte value's or a bit's frequency); then every ordered pair of those.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from longldp import _validate as check
from longldp.audit import events as ev

#: Every ordered pair of inputs is audited up to this many inputs; above, inputs are screened.
MAX_INPUTS = 16
#: Largest number of inputs a caller may list explicitly.
MAX_LISTED_INPUTS = 64
#: Inputs handed to ``randomize`` per call.
BATCH = 1 << 20
#: A lower bound above the claim by more than this is a violation (float noise is far below).
TOLERANCE = 1e-9
#: Distinct reports (over the search trials) up to which a lifetime also counts every report
#: symbol per client.
MAX_SYMBOLS = 64
PATTERNS = ("one-value", "alternating")

Randomizer = Callable[[NDArray[np.int64], np.random.Generator], Any]
LifetimeRunner = Callable[[NDArray[np.int64], np.random.Generator], Any]


class RandomizerError(ValueError):
    """A randomizer (or an external command behind one) misbehaved; the message says how."""


@dataclass(frozen=True)
class BlackBoxResult:
    """A black-box audit: the claim, the lower bound on ε and the test that achieved it.

    ``pair`` are the two inputs of the best test (for ``pattern="alternating"``, the lifetime
    a, b, a, … against b, a, b, …), ``tp``/``fp`` its held-out counts out of ``n0``/``n1``
    held-out trials, ``outcomes`` every held-out test with its own bound (each at level
    (1 − confidence)/m, m = ``tests_evaluated``), ``tried`` the number of candidate events
    the search scored per family.
    """

    claim: float
    lower: float
    confidence: float
    pair: tuple[int, int]
    test: str
    family: str
    tp: int
    fp: int
    n0: int
    n1: int
    estimate: float
    trials: int
    inputs: tuple[int, ...]
    tests_evaluated: int
    tried: dict[str, int]
    outcomes: tuple[ev.Outcome, ...]
    report_bytes: int
    tau: int = 1
    pattern: str = "one-value"
    screened: bool = False

    @property
    def violates(self) -> bool:
        """The lower bound exceeds the claim: the claim is refuted at this confidence."""
        return self.lower > self.claim + TOLERANCE

    @property
    def alpha(self) -> float:
        """1 − confidence."""
        return 1.0 - self.confidence

    def summary(self) -> str:
        """One line: bound, claim, verdict and the test."""
        verdict = "REFUTED" if self.violates else "not refuted"
        return (
            f"ε ≥ {self.lower:.4g} at {self.confidence:.0%} (claim {self.claim:.4g}: {verdict}); "
            f"inputs {self.pair[0]} vs {self.pair[1]}, {self.family} test {self.test}: "
            f"{self.tp:,}/{self.n0:,} vs {self.fp:,}/{self.n1:,} held-out trials"
        )


# ------------------------------------------------------------------------------ reports


def report_rows(out: Any, n: int, owner: str, what: str = "randomize") -> NDArray[np.uint8]:
    """Validate what a randomizer returned for ``n`` inputs: (n, w) uint8 rows, w ≥ 1."""
    if isinstance(out, np.ndarray):
        if out.dtype != np.uint8:
            raise RandomizerError(
                f"{owner}: '{what}' must return a 2-D uint8 array or a list of bytes; got an "
                f"array of dtype {out.dtype}."
            )
        if out.ndim != 2 or out.shape[1] < 1:
            raise RandomizerError(
                f"{owner}: '{what}' must return a 2-D uint8 array (one row per input, at least "
                f"one byte wide); got shape {out.shape}."
            )
        rows = out
    elif isinstance(out, (list, tuple)):
        for i, item in enumerate(out):
            if not isinstance(item, (bytes, bytearray)):
                raise RandomizerError(
                    f"{owner}: '{what}' must return a 2-D uint8 array or a list of bytes; item "
                    f"{i} is a {type(item).__name__}."
                )
        widths = np.fromiter((len(r) for r in out), dtype=np.int64, count=len(out))
        if widths.size and np.any(widths != widths[0]):
            bad = int(np.flatnonzero(widths != widths[0])[0])
            raise RandomizerError(
                f"{owner}: '{what}' returned rows of varying width: report 0 has "
                f"{widths[0]} bytes, report {bad} has {widths[bad]}."
            )
        if widths.size and widths[0] == 0:
            raise RandomizerError(f"{owner}: '{what}' returned empty reports (0 bytes).")
        width = int(widths[0]) if widths.size else 1
        rows = np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(out), width)
    else:
        raise RandomizerError(
            f"{owner}: '{what}' must return a 2-D uint8 array or a list of bytes; got "
            f"{type(out).__name__}."
        )
    if rows.shape[0] != n:
        raise RandomizerError(f"{owner}: '{what}' returned {rows.shape[0]} reports for {n} inputs.")
    return rows


def _call(fn: Callable, args: tuple, owner: str, what: str) -> Any:
    try:
        return fn(*args)
    except RandomizerError:
        raise
    except Exception as err:
        text = " ".join(str(err).split()) or "(no message)"
        raise RandomizerError(f"{owner}: '{what}' raised {type(err).__name__}: {text}") from err


def _generator(rng: Any, owner: str) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ValueError(f"{owner}: 'rng' must be None, an int seed or a numpy Generator; got {rng!r}.")


def _confidence(owner: str, confidence: Any) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise ValueError(f"{owner}: 'confidence' must be a number in (0, 1); got {confidence!r}.")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"{owner}: 'confidence' must be a number in (0, 1); got {confidence!r}.")
    return c


def _claim(owner: str, claim: Any) -> float:
    if isinstance(claim, bool) or not isinstance(claim, numbers.Real):
        raise ValueError(f"{owner}: 'claim' must be a finite number >= 0; got {claim!r}.")
    c = float(claim)
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"{owner}: 'claim' must be a finite number >= 0; got {claim!r}.")
    return c


def _inputs(owner: str, inputs: Any, k: int, limit: int) -> tuple[int, ...]:
    vals = check.domain_values(owner, np.asarray(list(inputs)), k, "inputs")
    if vals.ndim != 1 or vals.size < 2 or vals.size > limit:
        raise ValueError(
            f"{owner}: 'inputs' must list 2 to {limit} values of [0, {k}); got {list(inputs)!r}."
        )
    if np.unique(vals).size != vals.size:
        raise ValueError(f"{owner}: 'inputs' must be distinct values; got {list(inputs)!r}.")
    return tuple(int(v) for v in vals)


def _families(
    owner: str, classifier: bool, families: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The test families to search: ``families`` (names of :data:`events.FAMILIES`) or all of
    them, without the classifier when ``classifier`` is false."""
    if families is not None:
        chosen = tuple(families)
        unknown = [f for f in chosen if f not in ev.FAMILIES]
        if unknown or not chosen:
            raise ValueError(
                f"{owner}: 'families' must name some of {', '.join(ev.FAMILIES)}; got {chosen!r}."
            )
        classifier = classifier and "classifier" in chosen
        chosen = tuple(f for f in chosen if f != "classifier" or classifier)
    else:
        chosen = ev.FAMILIES
    if not classifier:
        return tuple(f for f in chosen if f != "classifier")
    if not ev.sklearn_available():
        raise ModuleNotFoundError(
            f"{owner}: the classifier test family (DP-Sniper) needs scikit-learn: "
            "pip install 'longldp[audit]', or pass classifier=False.",
            name="sklearn",
        )
    return chosen


def draw_reports(
    randomize: Randomizer,
    inputs: Sequence[int],
    trials: int,
    gen: np.random.Generator,
    owner: str,
    batch: int = BATCH,
) -> list[NDArray[np.uint8]]:
    """``trials`` reports of every input, in a shuffled order of calls, grouped per input.

    The inputs are handed out in a random order (a uniform permutation of the ``trials``
    copies of each input), so that a randomizer whose behaviour drifts with the position of a
    call cannot align with the split into search and held-out; each report is written straight
    to its place in its input's group (the inverse permutation, no sort).
    """
    values = np.repeat(np.asarray(inputs, dtype=np.int64), trials)
    # Call position i gets copy place[i] of the repeated inputs: report i is row place[i].
    place = gen.permutation(values.size)
    values = values[place]
    grouped: NDArray[np.uint8] | None = None
    for start in range(0, values.size, batch):
        chunk = values[start : start + batch]
        out = report_rows(
            _call(randomize, (chunk.copy(), gen), owner, "randomize"), chunk.size, owner
        )
        grouped = _place_rows(
            grouped, values.size, place[start : start + chunk.size], out, owner, "'randomize'"
        )
    assert grouped is not None
    return [grouped[i * trials : (i + 1) * trials] for i in range(len(inputs))]


def _place_rows(
    grouped: NDArray[np.uint8] | None,
    total: int,
    where: NDArray[np.int64],
    rows: NDArray,
    owner: str,
    caller: str,
) -> NDArray[np.uint8]:
    """Scatter one call's report rows to their places in ``grouped`` (allocated for ``total``
    rows on the first call); every call must give reports of the same width."""
    if grouped is None:
        grouped = np.empty((total, *rows.shape[1:]), dtype=np.uint8)
    elif rows.shape[-1] != grouped.shape[-1]:
        raise RandomizerError(
            f"{owner}: {caller} changed its report width between calls: "
            f"{grouped.shape[-1]} bytes, then {rows.shape[-1]}."
        )
    _scatter_rows(grouped, where, rows)
    return grouped


def _scatter_rows(dest: NDArray[np.uint8], where: NDArray[np.int64], rows: NDArray) -> None:
    """``dest[where] = rows`` for the leading axis, each row moved as one opaque item (a void
    view: one copy per row instead of one per byte)."""
    item = f"V{math.prod(dest.shape[1:])}"
    flat = dest.reshape(dest.shape[0], -1)
    src = np.ascontiguousarray(rows, dtype=np.uint8).reshape(rows.shape[0], -1)
    flat.view(item).ravel()[where] = src.view(item).ravel()


def _active_columns(halves: Sequence[NDArray[np.uint8]]) -> NDArray[np.int64]:
    """Byte columns that vary over the given rows (constant ones, such as a wire header, carry
    no information and are dropped before the search)."""
    lo = np.min([h.min(axis=tuple(range(h.ndim - 1))) for h in halves], axis=0)
    hi = np.max([h.max(axis=tuple(range(h.ndim - 1))) for h in halves], axis=0)
    return np.flatnonzero(lo != hi)


def one_report_features(rows: NDArray[np.uint8], active: NDArray[np.int64]) -> ev.Features:
    """A report's varying bytes as columns, bits and key."""
    if active.size and active[-1] - active[0] + 1 == active.size:  # one run: a plain slice
        body = np.ascontiguousarray(rows[:, active[0] : active[-1] + 1])
    else:
        body = np.ascontiguousarray(rows[:, active])
    return ev.Features(body, body, ev.row_keys(body))


def one_report_layout(active: NDArray[np.int64]) -> ev.Layout:
    """Column j is byte active[j] of the report; bit i is bit 8·active[i // 8] + i mod 8."""
    labels = tuple(f"bit {8 * int(active[i // 8]) + i % 8}" for i in range(8 * active.size))
    return ev.Layout(
        sizes=(256,) * active.size,
        column_names=tuple(f"byte {int(j)}" for j in active),
        n_bits=8 * active.size,
        bit_labels=labels,
        key_name="report",
        columns_are_bytes=True,
    )


# ------------------------------------------------------------------------------ one report


def audit_randomizer(
    randomize: Randomizer,
    *,
    k: int,
    claim: float,
    trials: int,
    rng: Any = None,
    confidence: float = 0.95,
    inputs: Sequence[int] | None = None,
    search_share: float = 0.5,
    tests: int = 10,
    classifier: bool = True,
    screen_trials: int | None = None,
    batch: int = BATCH,
    families: Sequence[str] | None = None,
) -> BlackBoxResult:
    """Bound the ε of a black-box randomizer from below; refute ``claim`` if the bound is above.

    Parameters
    ----------
    randomize : callable
        ``randomize(values, rng)``: ``values`` an int64 array of inputs in [0, k), ``rng`` a
        ``numpy.random.Generator``; returns one report per input, a 2-D uint8 array of
        fixed-width rows or a list of ``bytes``.
    k : int
        Domain size (inputs are 0 … k − 1).
    claim : float
        The ε the randomizer claims for one report.
    trials : int
        Reports drawn per audited input (half search, half held out by default).
    rng : None, int or Generator
        The auditor's randomness, also passed to ``randomize``.
    confidence : float
        1 − α: the probability that the bound is below the true ε.
    inputs : sequence of int, optional
        The inputs to compare (every ordered pair). Default: all k for k ≤ 16, else screened.
    search_share : float
        Share of each input's trials given to the search (the rest is held out).
    tests : int
        Held-out tests m (the Bonferroni correction divides α by m); the byte-pair family has
        its own share of them (:func:`longldp.audit.events.pair_share`).
    classifier : bool
        Include the scikit-learn classifier family (extra ``longldp[audit]``).
    screen_trials : int, optional
        Reports per input of the screening pass for k > 16 (default max(200, 16·trials/k)).
    batch : int
        Inputs per call of ``randomize``.
    families : sequence of str, optional
        The test families to search (names of :data:`longldp.audit.events.FAMILIES`; default
        all of them, the classifier as ``classifier`` says).

    Returns
    -------
    BlackBoxResult
        ``lower``, ``violates``, the pair and the test that achieved the bound, its counts.

    Raises
    ------
    ValueError
        Bad arguments, or a randomizer that raises, returns rows of varying width, a wrong
        dtype or the wrong number of reports (one line naming what was wrong).
    """
    owner = "audit_randomizer"
    if not callable(randomize):
        raise ValueError(f"{owner}: 'randomize' must be callable; got {type(randomize).__name__}.")
    k = check.integer(owner, "k", k, minimum=2)
    claim = _claim(owner, claim)
    trials = check.integer(owner, "trials", trials, minimum=20)
    confidence = _confidence(owner, confidence)
    tests = check.integer(owner, "tests", tests, minimum=1)
    batch = check.integer(owner, "batch", batch, minimum=1)
    share = _share(owner, search_share)
    families = _families(owner, classifier, families)
    gen = _generator(rng, owner)
    screened = False
    if inputs is not None:
        chosen = _inputs(owner, inputs, k, MAX_LISTED_INPUTS)
    elif k <= MAX_INPUTS:
        chosen = tuple(range(k))
    else:
        per_value = (
            max(200, (16 * trials) // k)
            if screen_trials is None
            else check.integer(owner, "screen_trials", screen_trials, minimum=20)
        )
        chosen = screen_inputs(randomize, k, per_value, gen, owner, batch)
        screened = True
    reports = draw_reports(randomize, chosen, trials, gen, owner, batch)
    n_search = min(trials - 1, max(1, round(share * trials)))
    search_rows = [r[:n_search] for r in reports]
    held_rows = [r[n_search:] for r in reports]
    active = _active_columns(search_rows)
    layout = one_report_layout(active)
    search_f = [one_report_features(r, active) for r in search_rows]
    held_f = [one_report_features(r, active) for r in held_rows]
    return _finish(
        owner,
        search_f,
        held_f,
        layout,
        chosen,
        [(x, x) for x in chosen],
        claim,
        confidence,
        tests,
        families,
        trials,
        reports[0].shape[1],
        1,
        "one-value",
        screened,
    )


def _share(owner: str, share: Any) -> float:
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 < share < 1:
        raise ValueError(f"{owner}: 'search_share' must be a number in (0, 1); got {share!r}.")
    return float(share)


def _finish(
    owner: str,
    search_f: list[ev.Features],
    held_f: list[ev.Features],
    layout: ev.Layout,
    inputs: tuple[int, ...],
    labels: list[tuple[int, int]],
    claim: float,
    confidence: float,
    tests: int,
    families: Sequence[str],
    trials: int,
    width: int,
    tau: int,
    pattern: str,
    screened: bool,
) -> BlackBoxResult:
    alpha = 1.0 - confidence
    pairs = ev.ordered_pairs(len(search_f))
    with ev.one_blas_thread():
        if layout.n_bits == 0 and not layout.sizes:
            found = ev.SearchReport([], dict.fromkeys(families, 0))
        else:
            found = ev.search(
                search_f, layout, pairs, alpha / tests, families=families, tests=tests
            )
        outcomes = ev.evaluate(found.candidates, held_f, layout, alpha)
    if outcomes:
        best = max(outcomes, key=lambda o: (o.lower, o.estimate))
        a, b = labels[best.a][0], labels[best.b][0]
        test, family = best.test, best.family
        tp, fp, n0, n1, lower, est = best.tp, best.fp, best.n0, best.n1, best.lower, best.estimate
    else:  # every report identical: nothing distinguishes the inputs
        a, b = inputs[0], inputs[1]
        test, family = "none (the reports never vary)", "none"
        n0 = n1 = held_f[0].n
        tp = fp = 0
        lower = est = 0.0
    return BlackBoxResult(
        claim=claim,
        lower=float(lower),
        confidence=confidence,
        pair=(a, b),
        test=test,
        family=family,
        tp=tp,
        fp=fp,
        n0=n0,
        n1=n1,
        estimate=est,
        trials=trials,
        inputs=inputs,
        tests_evaluated=len(outcomes),
        tried=found.tried,
        outcomes=tuple(outcomes),
        report_bytes=width,
        tau=tau,
        pattern=pattern,
        screened=screened,
    )


def screen_inputs(
    randomize: Randomizer,
    k: int,
    per_value: int,
    gen: np.random.Generator,
    owner: str = "audit_randomizer",
    batch: int = BATCH,
) -> tuple[int, ...]:
    """The :data:`MAX_INPUTS` inputs a k > 16 audit compares (module docstring).

    Every input gets ``per_value`` reports; each input is scored by the largest |z| of a byte
    value's or a bit's count against the pooled frequency of all inputs; the boundary inputs
    0, 1, k − 2, k − 1 are always kept (off-by-one bugs live there), the rest are the highest
    scores (ties broken at random). These reports are search data only.
    """
    rows = draw_reports(randomize, range(k), per_value, gen, owner, batch)
    active = _active_columns(rows)
    boundary = sorted({0, 1, k - 2, k - 1})
    if active.size == 0:
        rest = [v for v in gen.permutation(k).tolist() if v not in boundary]
        return tuple(sorted(boundary + rest[: MAX_INPUTS - len(boundary)]))
    feats = [one_report_features(r, active) for r in rows]
    sizes = [256] * active.size
    hists = np.stack([ev.column_histograms(f.cat, sizes) for f in feats]).astype(np.float64)
    ones = np.stack([ev.bit_counts(f.bits, 8 * active.size) for f in feats]).astype(np.float64)
    score = np.maximum(_outlier_z(hists.reshape(k, -1), per_value), _outlier_z(ones, per_value))
    score = score + gen.random(k) * 1e-9  # random order among equal scores
    score[boundary] = -np.inf
    rest = np.argsort(-score, kind="stable")[: MAX_INPUTS - len(boundary)]
    return tuple(sorted(boundary + [int(v) for v in rest]))


def _outlier_z(counts: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """max over cells of |count − n·p̄| / sd, p̄ the pooled frequency of the cell."""
    pooled = counts.sum(axis=0) / (n * counts.shape[0])
    sd = np.sqrt(n * pooled * (1 - pooled) + 1.0)
    return np.max(np.abs(counts - n * pooled) / sd, axis=1)


# ------------------------------------------------------------------------------ lifetimes


def population_lifetime(make_clients: Callable[[int, np.random.Generator], Any]) -> LifetimeRunner:
    """A lifetime runner from a factory of *populations*: ``make_clients(n, rng)`` returns an
    object whose ``report(values)`` gives one report per client (n inputs, one timestamp), its
    clients keeping whatever state they keep between calls."""

    def run(values: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.uint8]:
        owner = "audit_lifetime"
        n, tau = values.shape
        clients = _call(make_clients, (n, rng), owner, "clients")
        out: NDArray[np.uint8] | None = None
        for t in range(tau):
            step = report_rows(
                _call(clients.report, (values[:, t].copy(),), owner, "report"),
                n,
                owner,
                "report",
            )
            if out is None:
                out = np.empty((n, tau, step.shape[1]), dtype=np.uint8)
            elif step.shape[1] != out.shape[2]:
                raise RandomizerError(
                    f"{owner}: 'report' changed its report width between calls: "
                    f"{out.shape[2]} bytes, then {step.shape[1]}."
                )
            out[:, t] = step
        assert out is not None
        return out

    return run


def client_lifetime(make_client: Callable[[np.random.Generator], Any]) -> LifetimeRunner:
    """A lifetime runner from a factory of *single* clients: ``make_client(rng)`` returns an
    object whose ``report(value)`` gives one report (``bytes`` or a 1-D uint8 array). Slow: one
    Python call per report."""

    def run(values: NDArray[np.int64], rng: np.random.Generator) -> list[bytes]:
        owner = "audit_lifetime"
        out = []
        for row in values:
            client = _call(make_client, (rng,), owner, "client")
            for v in row:
                rep = _call(client.report, (int(v),), owner, "report")
                out.append(
                    bytes(np.asarray(rep, dtype=np.uint8)) if not isinstance(rep, bytes) else rep
                )
        return out

    return run


def lifetime_worlds(
    inputs: tuple[int, ...], tau: int, pattern: str
) -> tuple[list[NDArray[np.int64]], list[tuple[int, int]]]:
    """The value sequence of each world and its label (first value, second value)."""
    if pattern == "one-value":
        return [np.full(tau, x, dtype=np.int64) for x in inputs], [(x, x) for x in inputs]
    a, b = inputs
    ab = np.where(np.arange(tau) % 2 == 0, a, b).astype(np.int64)
    ba = np.where(np.arange(tau) % 2 == 0, b, a).astype(np.int64)
    return [ab, ba], [(a, b), (b, a)]


def draw_lifetimes(
    run: LifetimeRunner,
    worlds: list[NDArray[np.int64]],
    trials: int,
    gen: np.random.Generator,
    owner: str,
    batch: int = BATCH,
) -> list[NDArray[np.uint8]]:
    """(trials, τ, w) reports of every world, clients of all worlds shuffled together."""
    tau = worlds[0].size
    # As in draw_reports: client i of the calls is copy place[i] of the worlds repeated.
    place = gen.permutation(len(worlds) * trials)
    which = place // trials
    seqs = np.stack(worlds)
    grouped: NDArray[np.uint8] | None = None
    per_call = max(1, batch // tau)
    for start in range(0, which.size, per_call):
        idx = which[start : start + per_call]
        values = seqs[idx]
        got = _call(run, (values.copy(), gen), owner, "run")
        rows = _lifetime_rows(got, idx.size, tau, owner)
        grouped = _place_rows(
            grouped, which.size, place[start : start + idx.size], rows, owner, "'run'"
        )
    assert grouped is not None
    return [grouped[i * trials : (i + 1) * trials] for i in range(len(worlds))]


def _lifetime_rows(got: Any, n: int, tau: int, owner: str) -> NDArray[np.uint8]:
    if isinstance(got, np.ndarray) and got.ndim == 3:
        if got.dtype != np.uint8 or got.shape[:2] != (n, tau) or got.shape[2] < 1:
            raise RandomizerError(
                f"{owner}: 'run' must return uint8 reports of shape ({n}, {tau}, width); got "
                f"{got.dtype} {got.shape}."
            )
        return got
    flat = report_rows(got, n * tau, owner, "run")
    return flat.reshape(n, tau, flat.shape[1])


def audit_lifetime(
    run: LifetimeRunner,
    *,
    k: int,
    claim: float,
    tau: int,
    trials: int,
    pattern: str = "one-value",
    inputs: Sequence[int] | None = None,
    rng: Any = None,
    confidence: float = 0.95,
    search_share: float = 0.5,
    tests: int = 10,
    classifier: bool = True,
    batch: int = BATCH,
    families: Sequence[str] | None = None,
) -> BlackBoxResult:
    """Bound the ε of τ reports of one stateful client from below (docs/audit.md §8).

    Parameters
    ----------
    run : callable
        ``run(values, rng)``: ``values`` an (n, τ) int64 array, row i the inputs of client i
        at timestamps 0 … τ − 1; every row is a fresh client that keeps its own state across
        its τ reports. Returns the n·τ reports: a uint8 array (n, τ, width), or (n·τ, width)
        rows / a list of n·τ ``bytes`` in row order (client 0's τ reports first). Build one
        from a population factory with :func:`population_lifetime`, from a single-client
        factory with :func:`client_lifetime`, or from an external command with
        :func:`longldp.audit.exec_client.exec_lifetime`.
    k, claim, trials, rng, confidence, search_share, tests, classifier, batch, families
        As in :func:`audit_randomizer`; ``claim`` is the ε claimed for τ reports (e.g.
        min(τ·ε1, ε∞) for a memoizing chain holding one value).
    tau : int
        Reports per client.
    pattern : {"one-value", "alternating"}
        One input for all τ reports (worlds: each input), or a, b, a, … against b, a, b, ….
    inputs : sequence of int, optional
        One-value: the inputs compared (default 0 and k − 1); alternating: exactly two.

    Returns
    -------
    BlackBoxResult
        As :func:`audit_randomizer`'s, with ``tau`` and ``pattern``.

    Notes
    -----
    Each client's τ reports become one trial, described by the counts of every bit over the
    reports (and over the odd and the even reports for the alternating pattern), each bit's
    majority, the count of every report symbol when there are at most 64 distinct reports,
    and agreement statistics: the number of distinct reports, the count of the most frequent
    one (whose value is the trial's key) and the number of consecutive equal reports. The
    events are then searched and held out exactly as for one report.
    """
    owner = "audit_lifetime"
    if not callable(run):
        raise ValueError(f"{owner}: 'run' must be callable; got {type(run).__name__}.")
    k = check.integer(owner, "k", k, minimum=2)
    claim = _claim(owner, claim)
    tau = check.integer(owner, "tau", tau, minimum=1)
    trials = check.integer(owner, "trials", trials, minimum=20)
    pattern = check.choice(owner, "pattern", pattern, PATTERNS)
    confidence = _confidence(owner, confidence)
    tests = check.integer(owner, "tests", tests, minimum=1)
    batch = check.integer(owner, "batch", batch, minimum=1)
    share = _share(owner, search_share)
    families = _families(owner, classifier, families)
    gen = _generator(rng, owner)
    limit = 2 if pattern == "alternating" else MAX_INPUTS
    chosen = (0, k - 1) if inputs is None else _inputs(owner, inputs, k, limit)
    if pattern == "alternating" and len(chosen) != 2:
        raise ValueError(f"{owner}: the alternating pattern takes exactly two 'inputs'.")
    seqs, labels = lifetime_worlds(chosen, tau, pattern)
    reports = draw_lifetimes(run, seqs, trials, gen, owner, batch)
    n_search = min(trials - 1, max(1, round(share * trials)))
    search_rows = [r[:n_search] for r in reports]
    held_rows = [r[n_search:] for r in reports]
    builder = LifetimeFeatures(search_rows, tau, pattern)
    search_f = [builder.features(r) for r in search_rows]
    held_f = [builder.features(r) for r in held_rows]
    return _finish(
        owner,
        search_f,
        held_f,
        builder.layout,
        chosen,
        labels,
        claim,
        confidence,
        tests,
        families,
        trials,
        reports[0].shape[2],
        tau,
        pattern,
        False,
    )


class LifetimeFeatures:
    """Turns the τ reports of each client into one trial's features (see :func:`audit_lifetime`).

    Everything data-dependent (the varying bytes, the report symbols) is fixed from the search
    trials, so the same function is applied to the held-out trials.
    """

    def __init__(self, search_rows: Sequence[NDArray[np.uint8]], tau: int, pattern: str):
        self.tau = tau
        self.active = _active_columns(search_rows)
        self.n_bits = 8 * self.active.size
        groups = [("all reports", np.arange(tau))]
        if pattern == "alternating" and tau >= 2:
            groups += [
                ("reports 1, 3, …", np.arange(0, tau, 2)),
                ("reports 2, 4, …", np.arange(1, tau, 2)),
            ]
        self.groups = groups
        keys = [self._keys(r) for r in search_rows]
        distinct = np.unique(np.concatenate([np.unique(k_) for k_ in keys]))
        self.symbols = distinct if distinct.size <= MAX_SYMBOLS else np.zeros(0, np.uint64)
        sizes: list[int] = []
        names: list[str] = []
        bit_labels: list[str] = []
        for gname, pos in groups:
            m = pos.size
            for i in range(self.n_bits):
                bit = 8 * int(self.active[i // 8]) + i % 8
                names.append(f"ones of bit {bit} over {gname}")
                bit_labels.append(f"majority of bit {bit} over {gname}")
                sizes.append(m + 1)
            for j in range(self.symbols.size):
                names.append(f"count of report #{j} over {gname}")
                sizes.append(m + 1)
        names += ["distinct reports", "count of the modal report", "consecutive equal reports"]
        sizes += [tau + 1, tau + 1, max(1, tau)]
        self.layout = ev.Layout(
            sizes=tuple(sizes),
            column_names=tuple(names),
            n_bits=len(bit_labels),
            bit_labels=tuple(bit_labels),
            key_name="modal report",
            classify_columns=True,
        )

    def _keys(self, rows: NDArray[np.uint8]) -> NDArray[np.uint64]:
        n = rows.shape[0]
        body = rows[:, :, self.active].reshape(n * self.tau, self.active.size)
        return ev.row_keys(np.ascontiguousarray(body)).reshape(n, self.tau)

    def features(self, rows: NDArray[np.uint8]) -> ev.Features:
        """The trial features of (n, τ, width) reports: per-bit counts and majorities per group
        of reports, symbol counts, agreement statistics and the modal report as key."""
        n = rows.shape[0]
        keys = self._keys(rows)
        cols: list[NDArray] = []
        majority: list[NDArray] = []
        step = max(1, (1 << 22) // max(1, self.tau * max(1, self.n_bits)))
        for _, pos in self.groups:
            ones = np.zeros((n, self.n_bits), dtype=np.uint16)
            for start in range(0, n, step):
                block = rows[start : start + step][:, pos][:, :, self.active]
                bits = np.unpackbits(block, axis=2)  # (b, m, n_bits)
                ones[start : start + step] = bits.sum(axis=1, dtype=np.uint16)
            sym = self._symbol_counts(keys[:, pos])
            cols += [ones, sym]
            majority.append(2 * ones > pos.size)
        cols.append(self._agreement(keys))
        cat = np.hstack(cols).astype(np.uint16)
        maj = np.hstack(majority) if majority else np.zeros((n, 0), dtype=bool)
        packed = np.packbits(maj, axis=1) if maj.shape[1] else np.zeros((n, 0), np.uint8)
        return ev.Features(cat, packed, self._modal_key(keys))

    def _symbol_counts(self, keys: NDArray[np.uint64]) -> NDArray[np.uint16]:
        n = keys.shape[0]
        s = self.symbols.size
        if s == 0:
            return np.zeros((n, 0), dtype=np.uint16)
        pos = np.searchsorted(self.symbols, keys)
        pos[pos == s] = 0
        code = np.where(self.symbols[pos] == keys, pos, s)  # s: a symbol unseen in the search
        flat = np.bincount((np.arange(n)[:, None] * (s + 1) + code).ravel(), minlength=n * (s + 1))
        return flat.reshape(n, s + 1)[:, :s].astype(np.uint16)

    def _agreement(self, keys: NDArray[np.uint64]) -> NDArray[np.uint16]:
        n, tau = keys.shape
        srt = np.sort(keys, axis=1)
        change = np.ones((n, tau), dtype=bool)
        change[:, 1:] = srt[:, 1:] != srt[:, :-1]
        distinct = change.sum(axis=1)
        runs = self._run_lengths(change)
        modal = runs.max(axis=1)
        same = (keys[:, 1:] == keys[:, :-1]).sum(axis=1) if tau > 1 else np.zeros(n, np.int64)
        return np.stack([distinct, modal, same], axis=1).astype(np.uint16)

    @staticmethod
    def _run_lengths(change: NDArray[np.bool_]) -> NDArray[np.int64]:
        n, tau = change.shape
        run_id = np.cumsum(change, axis=1) - 1
        flat = np.bincount((np.arange(n)[:, None] * tau + run_id).ravel(), minlength=n * tau)
        return flat.reshape(n, tau)

    def _modal_key(self, keys: NDArray[np.uint64]) -> NDArray[np.uint64]:
        """The most frequent report of each client (ties: the smallest key)."""
        n, tau = keys.shape
        srt = np.sort(keys, axis=1)
        change = np.ones((n, tau), dtype=bool)
        change[:, 1:] = srt[:, 1:] != srt[:, :-1]
        runs = self._run_lengths(change)
        best_run = np.argmax(runs, axis=1)
        run_id = np.cumsum(change, axis=1) - 1
        first = np.argmax(run_id == best_run[:, None], axis=1)
        return srt[np.arange(n), first]
