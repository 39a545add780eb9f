"""PSFO: the padding-and-sampling frequency oracle for set-valued data (WLJ; math §9.1).

A user holds a list w of relevant values (items of the current domain, or the candidate
itemsets contained in her set). PS_ℓ pads w with dummies up to ℓ and reports one uniformly
chosen element of the padded list through a frequency oracle (FO); a list longer than ℓ is
truncated, i.e. one of its elements is chosen uniformly (math §9.1.1). The server multiplies the
FO's estimate of each real value by ℓ (math §9.1.3).

One-shot use (math §9.1.2):

- the dummies are **distinct** (⊥_1..⊥_ℓ), so the FO domain is D' = D ∪ {⊥_1..⊥_ℓ};
- GRR may then run at the amplified ε' = ln(ℓ(e^ε − 1) + 1): a padded list spreads over ℓ
  distinct outputs, so the worst output ratio is (e^{ε'} + ℓ − 1)/ℓ = e^ε. With a single
  shared dummy that argument fails (an all-dummy user puts all her mass on ⊥) and the channel
  is only ε'-LDP: :func:`psfo_channel` computes both exact channels;
- the adaptive rule picks GRR(ε') iff d < ℓ·e^ε·(4ℓ − 1) + 1, else OLH(ε) (no amplification:
  hash collisions can put all ℓ padded values in one bucket).

Longitudinal use (math §9.5) passes a memoizing chain over the time-stable domain D ∪ {⊥} with
one shared dummy and no amplification; see :mod:`longldp.apps.setvalued.oracle`.

References
----------
WLJ: T. Wang, N. Li, S. Jha, "Locally Differentially Private Frequent Itemset Mining",
IEEE S&P 2018, as reconstructed in docs/math.md §9.1–§9.2 (the paper's PDF
was not reachable; the vvv214 README errata say its Eq. (10), §V, misses the factor ℓ in two
of three terms, math §9.8.1, so it is not transcribed here).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check
from longldp import postprocess as pp
from longldp.protocols import FrequencyOracle, get_protocol_class, protocol

OWNER = "PSFO"
#: Dummy conventions: ℓ distinct dummies (one-shot) or one shared dummy (longitudinal, §5).
DUMMY_MODES = ("distinct", "shared")
#: The FO name that selects GRR(ε') or OLH(ε) by the variance rule of math §9.1.2.
ADAPTIVE = "adaptive"
#: Largest item domain for which :func:`psfo_channel` enumerates every input set.
CHANNEL_MAX_D = 12

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


# ------------------------------------------------------------------------------ privacy math


def amplified_epsilon(eps: float, ell: int) -> float:
    """ε' = ln(ℓ(e^ε − 1) + 1): the GRR budget that PS_ℓ with distinct dummies makes ε-LDP.

    Parameters
    ----------
    eps : float
        The target guarantee ε > 0 of one PSFO report.
    ell : int
        Padding length ℓ >= 1.

    Returns
    -------
    float
        ε' >= ε, with equality at ℓ = 1 (math §9.1.2).
    """
    eps = check.positive_float(OWNER, "eps", eps)
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    return math.log(ell * math.expm1(eps) + 1.0)


def adaptive_choice(d: int, ell: int, eps: float) -> str:
    """The one-shot FO of PSFO(ℓ, adaptive, ε) over d real values: "GRR" or "OLH".

    GRR(ε') iff d < ℓ·e^ε·(4ℓ − 1) + 1, else OLH(ε) (math §9.1.2; both reference codes). It
    compares Var_GRR ≈ n(d − 1 + ℓe^ε)/(e^ε − 1)² with Var_OLH ≈ 4nℓ²e^ε/(e^ε − 1)². At ℓ = 1
    it is the classic d + 1 < 3e^ε + 2, which is also the rule for a plain FO over d + 1 values
    (the length reports of SVIM step 2).
    """
    d = check.integer(OWNER, "d", d, minimum=1)
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    eps = check.positive_float(OWNER, "eps", eps)
    return "GRR" if d < ell * math.exp(eps) * (4 * ell - 1) + 1 else "OLH"


# ------------------------------------------------------------------------------ client side


def pad_and_sample(m: ArrayLike, ell: int, rng: np.random.Generator) -> IntArray:
    """PS_ℓ for many users at once: r_u uniform on [0, max(m_u, ℓ)).

    ``r_u < m_u`` selects the user's r-th relevant value (any fixed order: the choice is
    uniform); ``r_u >= m_u`` selects the dummy ⊥_{r_u − m_u + 1}. This is "draw j uniformly from
    {1..ℓ}, output w_j if j <= |w| else a dummy" for |w| <= ℓ and a uniform element of w for
    |w| > ℓ (math §9.1.1). One exact bounded-integer draw per user, no loop.

    Parameters
    ----------
    m : array_like of int
        Number of relevant values of each user, m_u >= 0.
    ell : int
        Padding length ℓ >= 1.
    rng : numpy.random.Generator
        Simulation randomness.

    Returns
    -------
    numpy.ndarray of int64
    """
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    mm = np.asarray(m, dtype=np.int64)
    if mm.size == 0:
        return np.zeros(0, dtype=np.int64)
    return rng.integers(0, np.maximum(mm, ell), dtype=np.int64)


# ------------------------------------------------------------------------------ the oracle


@dataclass(frozen=True)
class PSFO:
    """PSFO(ℓ, FO, ε) over ``d`` real values plus dummies (math §9.1).

    Codes: real values are ``0..d−1``; dummies follow. With ``dummies="distinct"`` ⊥_j is code
    ``d + j − 1`` (j = 1..ℓ, FO domain d + ℓ); with ``"shared"`` every dummy is code ``d``
    (FO domain d + 1).

    Parameters
    ----------
    d : int
        Number of real values (items, candidates, itemset slots).
    ell : int
        Padding length ℓ.
    oracle : FrequencyOracle
        The FO over ``d + n_dummies`` values (one-shot, or a memoizing chain).
    dummies : {"distinct", "shared"}
        Dummy convention.
    eps : float or None
        The per-report guarantee this PSFO claims (one-shot: ε, which for amplified GRR is
        below the oracle's own ε'); None for longitudinal use (the chain's own ε∞, ε1).
    amplified : bool
        True when the oracle is GRR at ε' (requires distinct dummies).
    """

    d: int
    ell: int
    oracle: FrequencyOracle
    dummies: str = "distinct"
    eps: float | None = None
    amplified: bool = False

    def __post_init__(self) -> None:
        check.integer(OWNER, "d", self.d, minimum=1)
        check.integer(OWNER, "ell", self.ell, minimum=1)
        mode = check.choice(OWNER, "dummies", self.dummies, DUMMY_MODES)
        object.__setattr__(self, "dummies", mode)
        if self.amplified and mode != "distinct":
            raise ValueError(
                f"{OWNER}: amplified GRR (ε') needs 'dummies' = 'distinct'; a shared dummy "
                "with ε' is not ε-LDP (math §9.1.2)."
            )
        if self.oracle.k != self.size:
            raise ValueError(
                f"{OWNER}: 'oracle' must have k = d + dummies = {self.size}; got k = "
                f"{self.oracle.k}."
            )

    @property
    def n_dummies(self) -> int:
        """ℓ distinct dummies, or 1 shared dummy."""
        return self.ell if self.dummies == "distinct" else 1

    @property
    def size(self) -> int:
        """Size of the FO domain: d + number of dummies."""
        return self.d + self.n_dummies

    def encode(self, r: IntArray, m: IntArray, real_codes: IntArray) -> IntArray:
        """FO input codes from :func:`pad_and_sample` output.

        Parameters
        ----------
        r, m : numpy.ndarray of int64
            The draw and the number of relevant values of each user.
        real_codes : numpy.ndarray of int64
            For the users with ``r < m`` (in order), the code of the chosen value.

        Returns
        -------
        numpy.ndarray of int64
            Codes in ``[0, size)``.
        """
        real = r < m
        if self.dummies == "distinct":
            out = self.d + (r - m)
        else:
            out = np.full(r.shape, self.d, dtype=np.int64)
        out[real] = real_codes
        return out

    def estimate_all(
        self,
        support: ArrayLike,
        n: int,
        postprocess: str | pp.PostProcessor | None = None,
        reportable: ArrayLike | None = None,
    ) -> FloatArray:
        """FO frequency estimates of every code (real values and dummies), fractions of n.

        Post-processing runs on the estimates of the codes a user can report (``reportable``,
        default all), which sum to 1 because each reporter sends exactly one value (math
        §9.1.3); the other entries are returned as 0 when post-processing, unchanged otherwise.
        """
        if reportable is None:
            return self.oracle.estimate(support, n, postprocess)
        raw = self.oracle.estimate(support, n, None)
        if postprocess is None:
            return raw
        idx = np.asarray(reportable, dtype=np.int64)
        if isinstance(postprocess, str) and postprocess.strip().lower() == "ibu":
            raise ValueError(
                f"{OWNER}: 'postprocess' 'ibu' needs the whole GRR channel; the reportable "
                "values are a subset of the FO domain here (use another method or the 'slots' "
                "domain)."
            )
        info = pp.ChannelInfo(P1=self.oracle.P1, P0=self.oracle.P0, n=n, grr_type=False)
        out = np.zeros_like(raw)
        out[idx] = pp.apply(postprocess, raw[idx], 1.0, info)
        return out

    def estimate(
        self,
        support: ArrayLike,
        n: int,
        postprocess: str | pp.PostProcessor | None = None,
        reportable: ArrayLike | None = None,
    ) -> FloatArray:
        """ℓ-scaled frequency estimates of the d real values, f̂(x) = ℓ·f̂_FO(x) (math §9.1.3).

        Unbiased (before post-processing) for the padded-and-truncated frequency
        (1/n) Σ_u 1[x ∈ w_u]·min(1, ℓ/|w_u|). Dummies are dropped *after* post-processing.
        Never renormalized to 1: the ℓ-scaled values sum to the mean truncated list length.
        """
        return self.ell * self.estimate_all(support, n, postprocess, reportable)[: self.d]

    def variance(self, pi: ArrayLike) -> float:
        """Exact variance of one raw ℓ-scaled estimate on a fixed population.

        ``pi[u]`` is the probability that user u's padded sample is the value estimated. A
        report supports it with probability P_u = P0 + (P1 − P0)·π_u independently over users
        (the sampling is part of the user's randomness), so
        Var = ℓ² Σ_u P_u(1 − P_u) / (n² (P1 − P0)²) (math §1.2 with per-user means).
        Valid for the oracles whose reports support a value with probability P1/P0 (GRR, UE,
        local hashing and their chains; not dBitFlipPM).
        """
        p = np.asarray(pi, dtype=np.float64)
        P1, P0 = self.oracle.P1, self.oracle.P0
        Pu = P0 + (P1 - P0) * p
        return float(self.ell**2 * np.sum(Pu * (1 - Pu)) / (p.size**2 * (P1 - P0) ** 2))

    def describe(self) -> dict[str, Any]:
        """The settings that define this PSFO, for result records."""
        info: dict[str, Any] = {
            "fo": self.oracle.name,
            "ell": self.ell,
            "dummies": self.dummies,
            "amplified": self.amplified,
            "fo_domain": self.size,
        }
        if self.eps is not None:
            info["eps"] = self.eps
        g = getattr(self.oracle, "g", None)
        if g is not None:
            info["g"] = int(g)
        return info


def oneshot_psfo(
    d: int,
    ell: int,
    eps: float,
    fo: str = ADAPTIVE,
    dummies: str = "distinct",
    amplify: bool | None = None,
    **options: Any,
) -> PSFO:
    """One-shot PSFO(ℓ, FO, ε) over d real values (math §9.1.2).

    Parameters
    ----------
    d : int
        Number of real values (dummies excluded).
    ell : int
        Padding length ℓ.
    eps : float
        Guarantee ε of one report.
    fo : str, default="adaptive"
        ``"adaptive"`` (GRR(ε') or OLH(ε) by :func:`adaptive_choice`) or a one-shot registry
        name (``"GRR"``, ``"OLH"``, ``"BLH"``, ``"OUE"``, ``"SUE"``).
    dummies : {"distinct", "shared"}, default="distinct"
    amplify : bool or None, default=None
        Run GRR at ε'. None: amplify exactly when the FO is GRR and the dummies are distinct.
        True with shared dummies raises: that variant is not ε-LDP.
    **options
        Extra protocol parameters (e.g. ``hash_pool`` for OLH/BLH).

    Returns
    -------
    PSFO
        OLH's hash range is the registry's integer argmin of V* (≈ e^ε + 1; the reference
        codes use ⌊e^ε⌋ + 1 and WLJ's summary ⌈e^ε + 1⌉, math §9.1.2).
    """
    d = check.integer(OWNER, "d", d, minimum=1)
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    eps = check.positive_float(OWNER, "eps", eps)
    mode = check.choice(OWNER, "dummies", dummies, DUMMY_MODES)
    name = adaptive_choice(d, ell, eps) if _is_adaptive(fo) else get_protocol_class(fo).name
    if get_protocol_class(name).longitudinal:
        raise ValueError(
            f"{OWNER}: 'fo' must be 'adaptive' or a one-shot oracle (GRR, OLH, BLH, OUE, SUE) "
            f"for one-shot use; got {fo!r}."
        )
    if amplify is None:
        amplify = name == "GRR" and mode == "distinct"
    if amplify and name != "GRR":
        raise ValueError(f"{OWNER}: amplification (ε') applies to GRR only; got fo = {name!r}.")
    if amplify and mode != "distinct":
        raise ValueError(
            f"{OWNER}: amplified GRR needs distinct dummies; a shared dummy with ε' is not "
            "ε-LDP (math §9.1.2)."
        )
    eps_fo = amplified_epsilon(eps, ell) if amplify else eps
    size = d + (ell if mode == "distinct" else 1)
    oracle = protocol(name, k=size, eps=eps_fo, **options)
    return PSFO(d, ell, oracle, mode, eps, bool(amplify))


def oneshot_plain_oracle(size: int, eps: float, fo: str = ADAPTIVE, **options: Any):
    """A plain one-shot FO over ``size`` values (SVIM step 2's lengths): GRR iff
    size < 3e^ε + 2, else OLH, when ``fo`` is adaptive (math §9.2 step 2)."""
    size = check.integer(OWNER, "size", size, minimum=2)
    eps = check.positive_float(OWNER, "eps", eps)
    name = adaptive_choice(size - 1, 1, eps) if _is_adaptive(fo) else get_protocol_class(fo).name
    return protocol(name, k=size, eps=eps, **options)


def _is_adaptive(fo: Any) -> bool:
    return isinstance(fo, str) and fo.strip().lower() == ADAPTIVE


# ------------------------------------------------------------------------------ exact channel


def psfo_channel(
    d: int, ell: int, eps: float, dummies: str = "distinct", amplify: bool = True
) -> tuple[list[tuple[int, ...]], FloatArray]:
    """Exact channel of PS_ℓ followed by GRR, for every input set of a small domain.

    Row s is an input set (every subset of ``range(d)``, the empty set included); column y an
    FO output (real values, then dummies). Pr[y | s] = Σ_x Pr[PS_ℓ(s) = x]·GRR(y | x), with
    GRR at ε' (``amplify``) or ε. Feed it to :func:`longldp.privacy.channel_epsilon`: with
    distinct dummies and ε' the result is ε; with one shared dummy and ε' it is ε' > ε (the
    reference prototype's error, math §9.1.2 and §9.8.4).

    Parameters
    ----------
    d : int
        Real values, 1 <= d <= 12 (2^d input sets).
    ell : int
        Padding length.
    eps : float
        Target ε.
    dummies : {"distinct", "shared"}, default="distinct"
    amplify : bool, default=True
        GRR at ε' = ln(ℓ(e^ε − 1) + 1) instead of ε.

    Returns
    -------
    sets : list of tuple of int
    channel : numpy.ndarray, shape (2^d, d + number of dummies)
    """
    d = check.integer(OWNER, "d", d, minimum=1, maximum=CHANNEL_MAX_D)
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    eps = check.positive_float(OWNER, "eps", eps)
    mode = check.choice(OWNER, "dummies", dummies, DUMMY_MODES)
    size = d + (ell if mode == "distinct" else 1)
    eps_fo = amplified_epsilon(eps, ell) if amplify else eps
    e = math.exp(eps_fo)
    grr = np.full((size, size), 1.0 / (e + size - 1))
    np.fill_diagonal(grr, e / (e + size - 1))
    sets = [s for r in range(d + 1) for s in itertools.combinations(range(d), r)]
    ps = np.zeros((len(sets), size))
    for row, s in enumerate(sets):  # 2^d tiny rows: a test/documentation helper
        m = len(s)
        width = max(m, ell)
        ps[row, list(s)] = 1.0 / width
        if m < ell:
            if mode == "distinct":
                ps[row, d : d + ell - m] = 1.0 / ell
            else:
                ps[row, d] = (ell - m) / ell
    return sets, ps @ grr


# ------------------------------------------------------------------------------ lengths


def percentile_length(theta: ArrayLike, q: float = 0.9, cap: int | None = None) -> int:
    """ℓ = min{L >= 1 : Σ_{i=1..L} θ̂_i >= q·Σ_{i>=1} θ̂_i} on the clipped θ̂ (math §9.2 step 2).

    The q-quantile of |v ∩ C| among users holding at least one candidate. Negative θ̂ are
    clipped to 0 first; if no mass is left on lengths >= 1, ℓ = 1. ``cap`` bounds ℓ (vvv214
    caps at 30; the default None caps only at the largest length, math §9.8.6).

    Parameters
    ----------
    theta : array_like, shape (m + 1,)
        θ̂_i, the estimated fraction of users with i relevant values, i = 0..m.
    q : float, default=0.9
    cap : int or None, default=None

    Returns
    -------
    int
    """
    th = np.clip(np.asarray(theta, dtype=np.float64), 0.0, None)
    if th.ndim != 1 or th.size < 2 or not np.all(np.isfinite(th)):
        raise ValueError(f"{OWNER}: 'theta' must be a finite vector of length >= 2.")
    q = check.probability(OWNER, "q", q)
    cum = np.cumsum(th[1:])
    ell = 1 if cum[-1] <= 0 else int(np.argmax(cum >= q * cum[-1])) + 1
    if cap is not None:
        ell = min(ell, check.integer(OWNER, "cap", cap, minimum=1))
    return ell


def truncation_factor(theta: ArrayLike, ell: int) -> float:
    """u(ℓ) = Σ_i i·θ̂_i / (Σ_{i<=ℓ} i·θ̂_i + ℓ·Σ_{i>ℓ} θ̂_i) on the clipped θ̂ (math §9.2 step 4).

    The true number of relevant values held divided by the number PS_ℓ credits after
    truncation (a list of length i > ℓ is credited ℓ). Equal to vvv214's additive form
    1 + Σ_{i>ℓ}(i − ℓ)θ̂_i / Σ_{x∈C} f̂(x) when Σ f̂ equals the credited total. The ratio form
    is scale-free, so θ̂ may be fractions of any group (math §9.8.7). Returns 1 when nothing is
    credited.
    """
    th = np.clip(np.asarray(theta, dtype=np.float64), 0.0, None)
    ell = check.integer(OWNER, "ell", ell, minimum=1)
    i = np.arange(th.size, dtype=np.float64)
    credited = float(np.sum(np.minimum(i, ell) * th))
    if credited <= 0:
        return 1.0
    return float(np.sum(i * th)) / credited
