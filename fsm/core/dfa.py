"""A DFA over bytes, built lazily from any source of derivatives.

A source (see `StateSource`) names states by hashable keys and gives, for a key, its
derivative row: sorted byte segments (start, end_exclusive, next_key) of the bytes that
keep the output alive. Regexes use terms as keys (`TermSource`); grammars use sets of
(parser stack, lexeme) elements. State 0 is dead; `table[s, b]` is the next state, UNKNOWN
(-1) where a row is not expanded yet. Arrays grow by doubling, so callers must read
`dfa.table` afresh after calling `expand`. See docs/automaton.md, "The lazy DFA".
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

import numpy as np

from .errors import TooLargeError
from .terms import (
    ALT,
    AND,
    BYTES,
    CONCAT,
    EMPTY,
    LAZY,
    LAZY_PROGRAMS,
    NOT,
    NOTHING,
    REPEAT,
    STR,
    Term,
    TermBuilder,
    row_target,
)

DEFAULT_MAX_STATES = 200_000
DEAD, UNKNOWN = 0, -1


class StateSource(Protocol):
    dead: Hashable  # the key of the empty language

    def row(self, key) -> tuple: ...
    # optional: def derive(self, key, byte) -> key: the row's target at byte (dead if none)
    # optional: def first(self, key) -> int: a 256-bit mask of the bytes its members may
    # start with (a superset; LazyDFA.fill leaves the row of a walk's other bytes unbuilt)
    def accepting(self, key) -> bool: ...
    def is_empty(self, key) -> bool: ...  # may be expensive; called once per new key


GUESS_MAX = 4096  # longest candidate has_guess derives along
MIN_CHARS_MAX = 4096  # terms min_chars may visit before it gives up (None)

# The lexer of JSON string characters (fsm/json/strings.py's encoding: raw UTF-8, `\\X`,
# `\\u00xx`), for counting them along bytes: CHAR_START at a character boundary, where
# any byte begins one; ESCAPE after a backslash; k > 0 while k more bytes belong to it.
CHAR_START, ESCAPE = 0, -1
_CHAR_CUTS = {CHAR_START: (0x5C, 0x5D, 0xC0, 0xE0, 0xF0), ESCAPE: (0x75, 0x76)}


def char_step(st: int, b: int) -> int:
    """The JSON character lexer's state after byte b (CHAR_START: b ended one)."""
    if st == CHAR_START:
        return ESCAPE if b == 0x5C else 3 if b >= 0xF0 else 2 if b >= 0xE0 else 1 if b >= 0xC0 else 0
    if st == ESCAPE:
        return 4 if b == 0x75 else CHAR_START
    return st - 1


class TermSource:
    """Regex states: interned terms and their derivative rows."""

    def __init__(self, tb: TermBuilder, max_states: int = DEFAULT_MAX_STATES):
        self.tb, self.max_states = tb, max_states
        self.dead = tb.nothing
        self._empty: dict[int, bool] = {}
        self._minlen: dict[int, int] = {}
        self._radius: dict[int, int | None] = {}
        self._alphabet: dict[int, int | None] = {}
        self._guess: dict[int, bytes | None] = {}
        self._min_chars: dict[int, int | None] = {}

    def row(self, t: Term) -> tuple:
        return self.tb.row(t)

    def first(self, t: Term) -> int:
        return self.tb.first(t)

    def release(self) -> None:
        """Break the builder's reference cycles (TermBuilder.release): it will not be used
        again (TokenAutomaton.owns_source)."""
        self.tb.release()

    def derive(self, t: Term, byte: int) -> Term:
        return self.tb.derive(t, byte)

    def accepting(self, t: Term) -> bool:
        return t.nullable

    def minlen(self, t: Term) -> int:
        """A lower bound on the length of t's shortest member (exact without AND/NOT and
        deferred LAZY parts)."""
        return fold(t, self._minlen, self._minlen_of, 0)

    def _minlen_of(self, x: Term, kids: list) -> int:
        if x.kind == LAZY and (w := self.tb.members.get(x.args[0])) is not None:
            return len(w)
        return _minlen_of(x, kids)

    def min_chars(self, t: Term, st: int = CHAR_START) -> int | None:
        """The fewest JSON characters a member of t takes after lexer state st (the
        bytes that finish the character under way add none): exact, by a search over
        derivatives one character at a time (`char_targets`); a large number where t is
        empty, None where the search visits more than MIN_CHARS_MAX terms. t is made of
        JSON characters (a length bound's A: `char_bound`)."""
        if st != CHAR_START:
            got = [self.min_chars(y) for y in self.char_targets(t, st)]
            return None if None in got else min(got, default=1 << 30)
        memo = self._min_chars
        if t.id in memo:
            return memo[t.id]
        frontier, seen, k = [t], {t.id}, 0
        while frontier and not any(x.nullable for x in frontier):
            nxt = []
            for x in frontier:
                for y in self.char_targets(x, CHAR_START):
                    if y.id not in seen:
                        seen.add(y.id)
                        nxt.append(y)
            if len(seen) > MIN_CHARS_MAX:
                memo[t.id] = None
                return None
            frontier, k = nxt, k + 1
        memo[t.id] = k if frontier else 1 << 30
        return memo[t.id]

    def char_targets(self, t: Term, st: int = CHAR_START) -> list[Term]:
        """The terms t leads to at the next character boundary, from lexer state st
        (from CHAR_START: through one whole character)."""
        out, todo, seen = {}, [(t, st)], set()
        while todo:
            u, s0 = todo.pop()
            cuts = _CHAR_CUTS.get(s0, ())
            for a, b, y in self.tb.row(u):
                for p in [a] + [c for c in cuts if a < c < b]:  # (one lexer step per piece)
                    s1 = char_step(s0, p)
                    if s1 == CHAR_START:
                        out[y.id] = y
                    elif (y.id, s1) not in seen:
                        seen.add((y.id, s1))
                        todo.append((y, s1))
        return list(out.values())

    def has_guess(self, t: Term) -> bool:
        """Whether a short candidate member of t is one (False: no candidate, or it is
        not). The candidate is the shortest member of t's positive parts (of an AND,
        the longest of its parts' candidates that is a member of it: a type and an
        enum, an object and its required keys; a NOT's empty string): what a search
        would try first, without building the rows of every state on the way (a
        200-key object's row is ~200 derivatives). Checked exactly, by the derivatives
        along it."""
        w = self.guess(t)
        return w is not None and self.tb.matches(t, w)

    def guess(self, t: Term) -> bytes | None:
        """has_guess's candidate, not checked (None: none known)."""
        return fold(t, self._guess, self._guess_of, b"")

    def _guess_of(self, x: Term, kids: list) -> bytes | None:
        """has_guess's candidate for x, from its kids' (None: none known)."""
        k = x.kind
        if k == BYTES:
            return bytes((x.args[0],))
        if k == STR:
            return x.args[0]
        if k == CONCAT:
            return None if None in kids or len(kids[0]) + len(kids[1]) > GUESS_MAX else kids[0] + kids[1]
        if k == ALT:
            known = [w for w in kids if w is not None]
            return min(known, key=len) if known else None
        if k == REPEAT:
            lo = x.args[1]
            return b"" if lo == 0 else None if kids[0] is None or len(kids[0]) * lo > GUESS_MAX else kids[0] * lo
        if k == AND:  # a part's candidate that is a member (a complement's kids are not folded)
            tried = {w for c, w in zip(x.args, kids) if c.kind != NOT and w is not None} or {b""}
            return next((w for w in sorted(tried, key=len, reverse=True) if self.tb.matches(x, w)), None)
        if k == LAZY:  # a deferred term (another key of an open object) is built; a
            # format's program is not loaded for a guess (a date-time's: 1.2k entries)
            if (w := self.tb.members.get(x.args[0])) is not None:
                return w
            body = self.tb.deferred_body(x)
            return None if body is None else fold(body, self._guess, self._guess_of, b"")
        if k in (EMPTY, NOT):
            return b""
        return None  # NOTHING

    def radius(self, t: Term) -> int | None:
        """An upper bound on the shortest completion of every prefix of t's members (how
        far the end is, at most, from anywhere inside t); None for terms with AND (but
        length bounds: `length_bound`), NOT or deferred LAZY parts, whose shortest
        members are not known structurally (a lazy program's are: `_lazy_stats`).

        `[a-z]{1,63}(\\.[a-z]{1,63})*` has radius 2: a prefix is a member, or needs a
        letter, or (after a dot) one. clip_repeats uses it to drop a length bound that
        no token can reach (a hostname's 253 bytes)."""
        return fold(t, self._radius, lambda x, kids: _radius_of(x, kids, self))

    def alphabet(self, t: Term) -> int | None:
        """The bytes t's members are made of, as a 256-bit mask (bit b: byte b); None
        for terms with AND, NOT or LAZY parts."""
        return fold(t, self._alphabet, alphabet_of)

    def bound_is_empty(self, t: Term) -> bool | None:
        """Whether a length bound `A AND x{0,hi}` (`length_bound`) is empty, without a
        search: iff A's shortest member is longer than hi, where A has no AND/NOT/LAZY
        part (its shortest member is exact); iff A is, where A's radius is at most hi
        (its shortest member is no longer: a hostname within 253 bytes, whose labels are
        bounds too). None for other terms (a search decides them)."""
        if t.kind != AND:
            return None
        if (bound := length_bound(t, self)) is None:
            if (bound := char_bound(t, self)) is None:
                return None
            r = self.radius(bound[0])  # (characters of several bytes: no minlen or alphabet test)
            return self.is_empty(bound[0]) if r is not None and r <= bound[1] else None
        a, hi = bound
        if self.minlen(a) > hi:  # (a lower bound: exact without AND/NOT/LAZY parts)
            return True
        if self.alphabet(a) is not None:  # no AND/NOT/LAZY part
            return False
        r = self.radius(a)
        return self.is_empty(a) if r is not None and r <= hi else None

    def is_empty(self, t: Term) -> bool:
        """True when no string matches t (only needs a search for AND/NOT terms)."""
        if not t.boolean:
            return t.kind == 0
        cached = self._empty.get(t.id)
        if cached is not None:
            return cached
        if (res := self.bound_is_empty(t)) is not None:
            self._empty[t.id] = res
            return res
        if self.has_guess(t):
            self._empty[t.id] = False
            return False
        seen, stack, found = {t.id}, [t], False
        while stack and not found:
            x = stack.pop()
            if x.nullable:
                found = True
                break
            for _, _, y in self.tb.row(x):
                if y.id not in seen:
                    known = self._empty.get(y.id)
                    if known is False:
                        found = True
                        break
                    if known is None:
                        seen.add(y.id)
                        stack.append(y)
            if len(seen) > self.max_states:
                raise TooLargeError(f"emptiness check exceeds max_states={self.max_states}")
        if not found:  # everything explored is empty too
            for i in seen:
                self._empty[i] = True
        self._empty[t.id] = not found
        return not found


def fold(t: Term, memo: dict, combine, nullable=None) -> object:
    """combine(x, kids' values) over t's sub-terms, children first, memoized by term id
    (a loop, not recursion: terms nest deeper than Python's stack). `nullable`: the
    value of every term with the empty string, whose sub-terms are then not visited
    (an object's optional members: most of a big schema's term)."""
    v = memo.get(t.id, memo)
    if v is not memo:
        return v
    stack = [t]
    while stack:
        x = stack[-1]
        if x.id in memo:
            stack.pop()
            continue
        if nullable is not None and x.nullable:
            memo[x.id] = nullable
            stack.pop()
            continue
        k = x.kind
        kids = x.args if k == CONCAT or k == ALT or k == AND else (x.args[0],) if k == REPEAT else ()
        todo = [c for c in kids if c.id not in memo]
        if todo:  # (x stays below them: combined once they are)
            stack += todo
            continue
        stack.pop()
        memo[x.id] = combine(x, [memo[c.id] for c in kids])
    return memo[t.id]


def _lazy_stats(name: str) -> tuple[int, int | None]:
    """(shortest member's length, radius) of a lazy program (a format, a JSON string's
    character): constants, found once per process in a builder of their own, so that
    minlen is exact on them and radius known (a format within maxLength clips)."""
    got = _LAZY_STATS.get(name)
    if got is None:
        src = TermSource(TermBuilder())
        body = src.tb.load(LAZY_PROGRAMS[name])
        got = _LAZY_STATS[name] = (src.minlen(body), src.radius(body))
    return got


_LAZY_STATS: dict[str, tuple] = {}  # lazy program name -> _lazy_stats


def _minlen_of(x: Term, kids: list) -> int:
    k = x.kind
    if k == BYTES:
        return 1
    if k == STR:
        return len(x.args[0])
    if k == CONCAT:
        return kids[0] + kids[1]
    if k == ALT:
        return min(kids)
    if k == REPEAT:
        return x.args[1] * kids[0]
    if k == AND:
        return max(kids)
    if k == NOTHING:
        return 1 << 30
    if k == LAZY and x.args[0] in LAZY_PROGRAMS:
        return _lazy_stats(x.args[0])[0]
    return 0 if x.nullable else 1  # EMPTY, NOT, a deferred LAZY (a lower bound)


def alphabet_of(x: Term, kids: list) -> int | None:
    k = x.kind
    if k in (AND, NOT, LAZY) or None in kids:
        return None
    if k == BYTES:
        return (1 << (x.args[1] + 1)) - (1 << x.args[0])
    if k == STR:
        out = 0
        for b in set(x.args[0]):
            out |= 1 << b
        return out
    out = 0
    for v in kids:
        out |= v
    return out


def _radius_of(x: Term, kids: list, source) -> int | None:
    k = x.kind
    if k == LAZY and x.args[0] in LAZY_PROGRAMS:
        return _lazy_stats(x.args[0])[1]
    if k == AND and (bound := length_bound(x, source)) is not None:
        # a prefix of A AND x{0,hi}'s members is one of A's, and its shortest completion
        # in A fits within hi if any does (a hostname's labels of 1-63 bytes)
        return kids[x.args.index(bound[0])]
    if k in (AND, NOT, LAZY) or None in kids:
        return None
    if k == BYTES:
        return 1
    if k == STR:
        return len(x.args[0])
    if k == CONCAT:  # inside the head, then the tail's shortest; or inside the tail
        return max(kids[0] + source.minlen(x.args[1]), kids[1])
    if k == ALT:
        return max(kids)
    if k == REPEAT:  # the worst prefix is inside the first item, lo-1 items to go
        return kids[0] + max(0, x.args[1] - 1) * source.minlen(x.args[0])
    return 0  # EMPTY, NOTHING (no prefixes)


def length_bound(t: Term, source) -> tuple[Term, int] | None:
    """(A, hi) for an intersection `A AND x{lo,hi}` with lo 0 (or 1 and A without the
    empty string: the same) whose items x are single bytes along A's members (every
    byte of A's alphabet is a whole x, and starts no longer one): a hostname's shape
    within 253 bytes, a plain ASCII pattern within maxLength JSON characters; else None.
    A's members are then strings of x, and hi bounds their length in bytes.

    A token of at most B bytes cannot tell it from A if A's radius r (the farthest any
    prefix is from A's end) has B + r <= hi: a prefix w of A's members has one of at most
    |w| + r bytes, within the bound. So along a hostname the states of each label
    position share one mask, rather than one per byte count."""
    if len(t.args) != 2:
        return None
    for i, x in enumerate(t.args):
        if x.kind == REPEAT and x.args[2] is not None:
            a = t.args[1 - i]
            if (x.args[1] == 0 or (x.args[1] == 1 and not a.nullable)) and _byte_items(a, x.args[0], source):
                return a, x.args[2]
    return None


def char_bound(t: Term, source) -> tuple[Term, int] | None:
    """(A, hi) for a length bound `A AND x{lo,hi}` as in `length_bound`, or one whose
    items x are characters of several bytes, that the builder lists in `char_items`
    (JSON string characters: every A it bounds is made of them). A token of B bytes
    spans at most B of them, and a prefix of A's members is at most A's radius r bytes,
    so at most r characters, from an end: where B + r <= hi the bound cannot refuse a
    token A takes (clip_repeats), and A's emptiness is the bound's (bound_is_empty).
    Unlike `length_bound`, hi does not bound the members' bytes."""
    got = length_bound(t, source)
    if got is not None or len(t.args) != 2:
        return got
    for i, x in enumerate(t.args):
        if x.kind == REPEAT and x.args[2] is not None and x.args[0].id in source.tb.char_items:
            a = t.args[1 - i]
            if x.args[1] == 0 or (x.args[1] == 1 and not a.nullable):
                return a, x.args[2]
    return None


def _byte_items(a: Term, item: Term, source) -> bool:
    """Whether each byte of a's members is, alone, a whole `item` that no longer
    one starts with (any byte; a JSON character, for plain printable ASCII)."""
    tb = source.tb
    if item is tb.any_byte:
        return True
    alphabet = source.alphabet(a)
    if alphabet is None:
        return False
    whole = 0
    for s, e, y in tb.row(item):
        if y is tb.empty:
            whole |= (1 << e) - (1 << s)
    return not alphabet & ~whole


# A sparse LazyDFA computes this many cells of a row one by one (walks that meet the
# state at a byte or two) before it builds the whole row.
SPARSE_CELLS = 8


class LazyDFA:
    """The DFA of a StateSource, built as walks meet its states: a row of 256 targets
    per state (UNKNOWN until computed). `sparse` (a source with a cheap `derive`, whose
    rows are dear): walks compute the cells they meet one by one, up to SPARSE_CELLS
    per row, before building the row (`fill`)."""

    def __init__(self, source: StateSource, start_key, max_states: int = DEFAULT_MAX_STATES,
                 sparse: bool = False):
        self.source, self.max_states = source, max_states
        self._derive = getattr(source, "derive", None)  # optional (see StateSource)
        self._first = getattr(source, "first", None)  # optional: a key's first bytes, a superset
        self.sparse = sparse and self._derive is not None
        self._cells: dict = {}  # state -> cells computed one by one (sparse)
        self.keys: list = []
        self._index: dict = {}
        cap = 32  # (rows of 1 KiB: a small start, as every automaton fills its table)
        self.table = np.full((cap, 256), UNKNOWN, dtype=np.int32)
        self.expanded = np.zeros(cap, dtype=bool)
        self.accepting = np.zeros(cap, dtype=bool)
        self.unexpanded = 0  # states whose row is still UNKNOWN: while 0, no walk meets one
        self.state_of(source.dead)
        self.table[DEAD] = DEAD
        self.expanded[DEAD] = True
        self.unexpanded -= 1
        self.start = self.state_of(start_key)

    @property
    def num_states(self) -> int:
        return len(self.keys)

    def state_of(self, key) -> int:
        s = self._index.get(key)
        if s is not None:
            return s
        if key != self.source.dead and self.source.is_empty(key):
            s = DEAD
        else:
            s = len(self.keys)
            if s >= self.max_states:
                raise TooLargeError(
                    f"automaton exceeds max_states={self.max_states} DFA states; simplify the "
                    "constraint (e.g. bounded repeats nested in alternations) or raise max_states")
            if s >= len(self.expanded):
                self._grow()
            self.keys.append(key)
            self.accepting[s] = self.source.accepting(key)
            self.unexpanded += 1
        self._index[key] = s
        return s

    def _grow(self) -> None:
        cap = 2 * len(self.expanded)
        table = np.full((cap, 256), UNKNOWN, dtype=np.int32)
        table[: len(self.table)] = self.table
        self.table = table
        self.expanded = np.concatenate([self.expanded, np.zeros(cap - len(self.expanded), bool)])
        self.accepting = np.concatenate([self.accepting, np.zeros(cap - len(self.accepting), bool)])

    def expand(self, s: int) -> None:
        if self.expanded[s]:
            return
        segments = [(a, b, self.state_of(k)) for a, b, k in self.source.row(self.keys[s])]
        row = self.table[s]  # read after state_of: it may have grown the table
        row[:] = DEAD
        for a, b, nxt in segments:
            row[a:b] = nxt
        self.expanded[s] = True
        self.unexpanded -= 1

    def step(self, s: int, byte: int) -> int:
        nxt = int(self.table[s, byte])
        if nxt == UNKNOWN:  # this byte's target only: a walk needs no sibling states
            key = self.keys[s]
            if self._derive is None:
                key = row_target(self.source.row(key), byte)
                key = self.source.dead if key is None else key
            else:
                key = self._derive(key, byte)
            nxt = self.state_of(key)
            self.table[s, byte] = nxt  # (state_of may have grown the table)
        return nxt

    def fill(self, s: int, cells) -> None:
        """Compute the UNKNOWN cells `cells` of row s: one by one while the row's
        budget lasts (sparse), else the whole row; none where no member of s starts
        with those bytes (they are DEAD: the row is left to a walk that needs it)."""
        if self._first is not None:
            first = self._first(self.keys[s])
            if not any(first >> c & 1 for c in cells):
                for c in cells:
                    self.table[s, c] = DEAD
                return
        if self.sparse:
            n = self._cells.get(s, 0) + len(cells)
            if n <= SPARSE_CELLS:
                self._cells[s] = n
                for c in cells:
                    self.step(s, c)
                return
        self.expand(s)

    def walk(self, s: int, data: bytes) -> int:
        """The state after `data` from s. Past the cells already known, a source with a
        `derive` has the rest derived key by key, and only the state it ends in is
        registered: a state per byte in between would cost a registration and an
        emptiness check each (a token's key after an object's optional keys)."""
        for i, b in enumerate(data):
            if s == DEAD:
                return DEAD
            nxt = int(self.table[s, b])
            if nxt == UNKNOWN:
                if self._derive is None:
                    nxt = self.step(s, b)
                else:
                    key, dead = self.keys[s], self.source.dead
                    for c in data[i:]:
                        key = self._derive(key, c)
                        if key == dead:
                            return DEAD
                    return self.state_of(key)
            s = nxt
        return s

    def live_bytes(self, s: int) -> list[int]:
        self.expand(s)
        return np.flatnonzero(self.table[s]).tolist()
