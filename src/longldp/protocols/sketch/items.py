"""Open item spaces: strings and b-bit integers as 64-bit keys, and their prefixes.

Two codecs (docs/math.md §21.1):

- :class:`TextItems` (``alphabet``, ``length``): strings of at most ``length`` symbols of a
  declared alphabet, one symbol per ``w = ⌈log₂(|alphabet| + 1)⌉`` bits, left-aligned, symbol 0
  padding the end; the code of a string is an unsigned integer of ``length·w ≤ 64`` bits and
  the code of its first s symbols is ``code >> (length − s)·w``, so a prefix of a string is a
  prefix of its bits (what PEM, TreeHist and SFP extend). Decoding is exact.
- :class:`IntegerItems` (``bits``): integers in [0, 2^bits), the key being the value.

:func:`text_keys` turns arbitrary text (no alphabet, any length up to a declared bound) into a
64-bit fingerprint for the sketch oracles, which need only a key per item.

Bad input raises ``ValueError`` in one line: no items at all, a string over the declared
length, a symbol outside the alphabet, a NUL character, bytes that are not UTF-8 where text is
declared, an integer outside [0, 2^bits). Everything is vectorized over items (NumPy fixed-width
string arrays viewed as code points); only the error path looks at single items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from longldp import _validate as check

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def fmix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The SplitMix64 finalizer (Steele, Lea, Flood 2014), in place on a uint64 array."""
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _MIX1
        z ^= z >> np.uint64(27)
        z *= _MIX2
        z ^= z >> np.uint64(31)
    return z


def _as_text_array(owner: str, items: Any) -> NDArray[np.str_]:
    """A 1-D NumPy unicode array of the items; bytes must be UTF-8; at least one item."""
    if isinstance(items, (str, bytes)):
        raise ValueError(
            f"{owner}: 'items' must be a sequence of strings; got a single {type(items).__name__}."
        )
    if isinstance(items, np.ndarray) and items.dtype.kind == "U":
        arr = items.ravel()
    else:
        seq = list(items) if not isinstance(items, np.ndarray) else items.ravel().tolist()
        if seq and any(isinstance(v, bytes) for v in seq):
            seq = [_utf8(owner, i, v) for i, v in enumerate(seq)]
        bad = next((v for v in seq if not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"{owner}: 'items' must be str (or UTF-8 bytes); got {bad!r}.")
        arr = np.array(seq, dtype=str) if seq else np.array([], dtype="<U1")
        # NumPy drops trailing NULs when it stores str: compare the lengths to refuse them.
        if arr.size and np.any(np.char.str_len(arr) != np.fromiter(map(len, seq), np.int64)):
            raise ValueError(f"{owner}: 'items' must not contain NUL characters (U+0000).")
    if arr.size == 0:
        raise ValueError(f"{owner}: 'items' must hold at least one item; got an empty set.")
    return arr


def _utf8(owner: str, index: int, value: Any) -> Any:
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{owner}: 'items' must be text (UTF-8); item {index} is not UTF-8 ({err.reason} "
            f"at byte {err.start}): {value!r}."
        ) from None


def _code_points(arr: NDArray[np.str_]) -> NDArray[np.uint32]:
    """(n, width) code points of a fixed-width unicode array (0 after each string's end)."""
    width = max(1, arr.dtype.itemsize // 4)
    return np.ascontiguousarray(arr).view(np.uint32).reshape(arr.size, width)


def text_keys(items: Any, max_length: int, owner: str = "sketch") -> NDArray[np.uint64]:
    """64-bit fingerprints of arbitrary strings of at most ``max_length`` characters.

    key = fmix(… fmix(fmix(L·γ) + γ·(c₁ + 1)) … + γ·(c_L + 1)) over the code points c_i of the
    string (L its length), the SplitMix64 finalizer after every character: equal strings get
    equal keys, distinct ones collide with probability about 2⁻⁶⁴ per pair (docs/math.md
    §21.1). Vectorized over items; one pass per character position.
    """
    max_length = check.integer(owner, "max_length", max_length, minimum=1)
    arr = _as_text_array(owner, items)
    lengths = np.char.str_len(arr)
    _check_lengths(owner, arr, lengths, max_length)
    cps = _code_points(arr)
    with np.errstate(over="ignore"):
        h = fmix64(lengths.astype(np.uint64) * _GAMMA)
        for i in range(cps.shape[1]):
            live = lengths > i
            step = fmix64(h + (cps[:, i].astype(np.uint64) + np.uint64(1)) * _GAMMA)
            h = np.where(live, step, h)
    return h


def _check_lengths(owner: str, arr: NDArray, lengths: NDArray, max_length: int) -> None:
    if lengths.size and int(lengths.max()) > max_length:
        i = int(np.argmax(lengths > max_length))
        raise ValueError(
            f"{owner}: items must have at most {max_length} characters (the declared length); "
            f"item {i} has {int(lengths[i])}: {str(arr[i])!r}."
        )


@dataclass(frozen=True)
class TextItems:
    """Strings of at most ``length`` symbols of ``alphabet``, coded as (length·w)-bit integers.

    Symbol s ∈ [1, |alphabet|] is character alphabet[s − 1]; 0 pads the end. With w bits per
    symbol the code of "c₁…c_j" is Σ_i sym(c_i)·2^{(length − i)w}: left-aligned, so the code of
    the first s symbols is ``code >> (length − s)·w`` (:meth:`prefix`).
    """

    alphabet: str
    length: int
    symbol_bits: int = field(init=False)
    width: int = field(init=False)

    def __post_init__(self) -> None:
        owner = "TextItems"
        if not isinstance(self.alphabet, str) or not self.alphabet:
            raise ValueError(f"{owner}: 'alphabet' must be a non-empty str; got {self.alphabet!r}.")
        if len(set(self.alphabet)) != len(self.alphabet) or "\x00" in self.alphabet:
            raise ValueError(
                f"{owner}: 'alphabet' must list distinct characters, none of them NUL; "
                f"got {self.alphabet!r}."
            )
        w = len(self.alphabet).bit_length()  # ⌈log₂(|A| + 1)⌉
        check.integer(owner, "length", self.length, minimum=1, maximum=64 // w)
        object.__setattr__(self, "symbol_bits", w)
        object.__setattr__(self, "width", self.length * w)

    @property
    def table(self) -> NDArray[np.int64]:
        """Code point → symbol (−1 outside the alphabet), over [0, max code point]."""
        cps = np.fromiter(map(ord, self.alphabet), np.int64)
        out = np.full(int(cps.max()) + 1, -1, dtype=np.int64)
        out[cps] = np.arange(1, cps.size + 1)
        out[0] = 0
        return out

    def encode(self, items: Any) -> NDArray[np.uint64]:
        """Codes of the strings (vectorized); ValueError on an empty set, a string longer than
        ``length``, a character outside the alphabet, NUL or non-UTF-8 bytes."""
        owner = "TextItems"
        arr = _as_text_array(owner, items)
        lengths = np.char.str_len(arr)
        _check_lengths(owner, arr, lengths, self.length)
        cps = _code_points(arr)[:, : self.length].astype(np.int64)
        table = self.table
        inside = cps < table.size
        sym = np.where(inside, table[np.minimum(cps, table.size - 1)], -1)
        if np.any(sym < 0):
            row = int(np.argmax(np.any(sym < 0, axis=1)))
            col = int(np.argmax(sym[row] < 0))
            raise ValueError(
                f"{owner}: items must use only the characters {self.alphabet!r}; item {row} "
                f"has {chr(int(cps[row, col]))!r}: {str(arr[row])!r}."
            )
        code = np.zeros(arr.size, dtype=np.uint64)
        w = np.uint64(self.symbol_bits)
        for i in range(self.length):
            col = sym[:, i] if i < sym.shape[1] else np.zeros(arr.size, dtype=np.int64)
            code = (code << w) | col.astype(np.uint64)
        return code

    def decode(self, codes: ArrayLike, symbols: int | None = None) -> list[str]:
        """Strings of codes (of the first ``symbols`` symbols when given: decoded prefixes)."""
        s = self.length if symbols is None else symbols
        c = np.asarray(codes, dtype=np.uint64).ravel()
        w, mask = np.uint64(self.symbol_bits), np.uint64((1 << self.symbol_bits) - 1)
        chars = np.array(["", *self.alphabet], dtype=object)
        digits = np.stack(
            [(c >> (w * np.uint64(s - 1 - i))) & mask for i in range(s)], axis=1
        ).astype(np.int64)
        return ["".join(chars[row[row > 0]]) for row in digits]

    def prefix(self, codes: ArrayLike, bits: int) -> NDArray[np.uint64]:
        """The first ``bits`` bits of codes (a prefix of symbols when bits is a multiple of w)."""
        return prefix_bits(codes, self.width, bits)

    def valid_prefix(self, prefixes: ArrayLike, bits: int) -> NDArray[np.bool_]:
        """Which ``bits``-bit prefixes begin the code of some string: every whole symbol in
        [0, |alphabet|], no symbol after a padding 0, and a partial last symbol whose smallest
        completion is a symbol (a discovery prunes the other candidates: nobody holds them)."""
        c = np.asarray(prefixes, dtype=np.uint64)
        w, top = self.symbol_bits, len(self.alphabet)
        whole, rest = divmod(bits, w)
        ok = np.ones(c.shape, dtype=bool)
        ended = np.zeros(c.shape, dtype=bool)
        mask = np.uint64((1 << w) - 1)
        for i in range(whole):
            sym = (c >> np.uint64(bits - (i + 1) * w)) & mask
            ok &= (sym <= top) & ~(ended & (sym > 0))
            ended |= sym == 0
        if rest:
            part = c & np.uint64((1 << rest) - 1)
            ok &= ((part << np.uint64(w - rest)) <= top) & ~(ended & (part > 0))
        return ok


@dataclass(frozen=True)
class IntegerItems:
    """Integers in [0, 2^bits) (bits ≤ 64), the key being the value."""

    bits: int

    def __post_init__(self) -> None:
        check.integer("IntegerItems", "bits", self.bits, minimum=1, maximum=64)

    @property
    def width(self) -> int:
        """Bits per item."""
        return self.bits

    def encode(self, items: ArrayLike) -> NDArray[np.uint64]:
        """The values as uint64; ValueError on no values, a non-integer dtype or a value outside
        [0, 2^bits)."""
        owner = "IntegerItems"
        arr = np.asarray(items)
        if arr.size == 0:
            raise ValueError(f"{owner}: 'items' must hold at least one item; got an empty set.")
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(
                f"{owner}: 'items' must be integers in [0, 2^{self.bits}); got dtype {arr.dtype}."
            )
        arr = arr.ravel()
        if arr.dtype.kind == "i" and int(arr.min()) < 0:
            raise ValueError(
                f"{owner}: 'items' must be integers in [0, 2^{self.bits}); got {int(arr.min())}."
            )
        out = arr.astype(np.uint64)
        if self.bits < 64 and int(out.max()) >> self.bits:
            raise ValueError(
                f"{owner}: 'items' must be integers in [0, 2^{self.bits}); got {int(out.max())}."
            )
        return out

    def decode(self, codes: ArrayLike, symbols: int | None = None) -> list[int]:
        """The values (``symbols`` is ignored)."""
        del symbols
        return [int(c) for c in np.asarray(codes, dtype=np.uint64).ravel()]

    def prefix(self, codes: ArrayLike, bits: int) -> NDArray[np.uint64]:
        """The first ``bits`` bits of the values."""
        return prefix_bits(codes, self.bits, bits)

    def valid_prefix(self, prefixes: ArrayLike, bits: int) -> NDArray[np.bool_]:
        """Every prefix of an integer is valid."""
        return np.ones(np.shape(prefixes), dtype=bool)


def prefix_bits(codes: ArrayLike, width: int, bits: int) -> NDArray[np.uint64]:
    """The first ``bits`` of ``width``-bit codes: code >> (width − bits)."""
    c = np.asarray(codes, dtype=np.uint64)
    if not 0 <= bits <= width:
        raise ValueError(f"prefix_bits: 'bits' must be in [0, {width}]; got {bits}.")
    if bits == 0:
        return np.zeros_like(c)
    return c >> np.uint64(width - bits)
