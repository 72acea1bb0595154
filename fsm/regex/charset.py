"""Sets of Unicode code points, and their UTF-8 encoding as byte-level terms.

A set is a sorted tuple of disjoint inclusive (lo, hi) ranges. Surrogates
(U+D800..U+DFFF) are never members: they have no UTF-8 encoding.

Python's `re` decides what `\\d`, `\\w`, `\\s` and case-insensitive matching mean; we ask
it directly (one C-speed scan of every code point, cached) instead of restating the
Unicode tables, so the automaton agrees with `re.fullmatch` by construction.
"""
from __future__ import annotations

import functools
import re
import unicodedata

from ..core.terms import Term, TermBuilder

MAX_CP = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
Ranges = tuple


def normalize(ranges) -> Ranges:
    """Sort, merge, and drop surrogates."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    clipped = []
    for lo, hi in out:
        if lo <= SURROGATES[1] and hi >= SURROGATES[0]:
            if lo < SURROGATES[0]:
                clipped.append((lo, SURROGATES[0] - 1))
            if hi > SURROGATES[1]:
                clipped.append((SURROGATES[1] + 1, hi))
        else:
            clipped.append((lo, hi))
    return tuple(clipped)


def complement(ranges: Ranges) -> Ranges:
    out, pos = [], 0
    for lo, hi in ranges:
        if pos < lo:
            out.append((pos, lo - 1))
        pos = hi + 1
    if pos <= MAX_CP:
        out.append((pos, MAX_CP))
    return normalize(out)


@functools.lru_cache(maxsize=1)
def _all_chars() -> str:
    return "".join(map(chr, range(MAX_CP + 1)))


@functools.lru_cache(maxsize=4096)
def by_python_re(class_regex: str, flags: int = 0) -> Ranges:
    """The code points that the one-character regex `class_regex` matches under `flags`."""
    rx = re.compile(f"(?:{class_regex})+", flags)
    return normalize((m.start(), m.end() - 1) for m in rx.finditer(_all_chars()))


_ASCII = {"d": ((48, 57),), "w": ((48, 57), (65, 90), (95, 95), (97, 122)),
          "s": ((9, 13), (32, 32))}


def category(escape: str, ascii_only: bool = False) -> Ranges | None:
    """The code points of \\d \\D \\w \\W \\s \\S as re reads them (None if unknown)."""
    from . import unicode_tables
    letter = escape[1].lower()
    if ascii_only:
        ranges = _ASCII[letter]
    elif unicode_tables.UNIDATA_VERSION == unicodedata.unidata_version:
        ranges = {"d": unicode_tables.DIGIT, "w": unicode_tables.WORD, "s": unicode_tables.SPACE}[letter]
    else:  # another Python's Unicode: let re decide (slower once)
        ranges = by_python_re(f"[\\{letter}]", 0)
    return complement(ranges) if escape[1].isupper() else ranges


def to_term(tb: TermBuilder, ranges: Ranges) -> Term:
    """The byte-level term matching the UTF-8 encoding of exactly one member."""
    memo: dict[int, Term] = {}

    def build(spec) -> Term:
        t = memo.get(id(spec))
        if t is None:
            t = memo[id(spec)] = tb.alt(
                tb.concat(tb.byte_range(lo, hi), tb.empty if tail is None else build(tail))
                for lo, hi, tail in spec)
        return t
    ranges = tuple(ranges)
    t = build(_utf8_trie(ranges))
    tb.char_ranges.setdefault(t.id, ranges)
    return t


@functools.lru_cache(maxsize=1024)
def _utf8_trie(ranges: Ranges) -> tuple:
    """UTF-8 encodings of a code point set as a byte trie: a tuple of branches
    (lo_byte, hi_byte, tail or None). Cached: \\w alone has ~700 ranges."""
    seqs: list[list[tuple[int, int]]] = []
    for lo, hi in ranges:
        _split(lo, hi, seqs)
    shared: dict = {}
    return _trie(seqs, shared)


def _trie(seqs: list, shared: dict) -> tuple:
    # Group sequences by their leading byte range so the term branches once per lead
    # byte, then merge neighbouring leads whose tails are equal (shared: one object).
    groups: dict[tuple[int, int], list] = {}
    for s in seqs:
        groups.setdefault(s[0], []).append(s[1:])
    branches: list[tuple] = []
    for (lo, hi) in sorted(groups):
        tails = [t for t in groups[(lo, hi)] if t]
        tail = _trie(tails, shared) if tails else None
        tail = shared.setdefault(tail, tail)
        if branches and branches[-1][1] + 1 == lo and branches[-1][2] is tail:
            branches[-1] = (branches[-1][0], hi, tail)
        else:
            branches.append((lo, hi, tail))
    return tuple(branches)


def _split(lo: int, hi: int, out: list) -> None:
    """Split [lo, hi] into ranges each encodable as a product of UTF-8 byte ranges."""
    if lo > hi:
        return
    for bound in (0x7F, 0x7FF, 0xFFFF):
        if lo <= bound < hi:
            _split(lo, bound, out)
            _split(bound + 1, hi, out)
            return
    if hi <= 0x7F:
        out.append([(lo, hi)])
        return
    for i in (1, 2, 3):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a, b = chr(lo).encode(), chr(hi).encode()
    out.append(list(zip(a, b)))
