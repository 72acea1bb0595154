"""Emptiness of schema terms (docs/json-schema.md, "Emptiness"): the term builder that
folds `X & ~X` to nothing and takes a head the parts of an intersection share out of it
(JsonTermBuilder), and the state source whose emptiness check is structural, searching
only AND/NOT parts, A* towards the shortest completion (JsonTermSource).
"""
from __future__ import annotations

import heapq
import itertools

from ..core import budget
from ..core.dfa import DEFAULT_MAX_STATES, TermSource, alphabet_of, fold
from ..core.errors import TooLargeError
from ..core.terms import (
    ALL_BYTES,
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
)
from .formats import NONEMPTY_LAZY

_NUMBER_BYTES = sum(1 << b for b in b"0123456789.eE+-")

# JsonTermBuilder.extenders reads an alternation whose branches start with at most this
# many bytes in common through its derivatives by them (every byte where more)
EXTENDERS_SHARED_MAX = 8


class JsonTermBuilder(TermBuilder):
    """TermBuilder with the Boolean simplifications schema terms need.

    The derivative of `X & ~Y` is `dX & ~dY`; where the schema's complement covers the
    same continuation (dX is dY, or dY is an alternative containing dX) the state is
    empty, and without this rule proving it takes an exhaustive search of dX's states
    (huge for nested values). Also ~nothing = anything and ~anything = nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.nonempty: set[int] = set()  # ids of AND/NOT terms known to have a member
        self._ext: dict[int, int] = {}  # term id -> extenders(term)
        self._bytes: dict[int, int | None] = {}  # term id -> the bytes of its members (None: not known)

    def intersect(self, items) -> Term:
        t = super().intersect(items)
        if t.kind != AND:
            return t
        pos = {c.id for c in t.args if c.kind != NOT}
        for c in t.args:
            if c.kind == NOT:
                y = c.args[0]
                if y.id in pos or (y.kind == ALT and any(a.id in pos for a in y.args)):
                    return self.nothing
                if y.kind == NOTHING:
                    return self.intersect(a for a in t.args if a is not c)
        return self._shared_head(t)

    def _shared_head(self, t: Term) -> Term:
        """`V R1 & ~(V R2) & ...` as `V (R1 & ~R2 & ...)`, where every part is V followed
        by something (or its complement, with at least one part that is not) and no
        string splits two ways into a member of V and a member of a tail: no byte that
        can follow a whole member of V inside a longer one (`extenders`) starts a tail.
        Then w = v r in exactly one way, and w is in `V R2` iff r is in R2.

        Overlapping oneOf branches meet so at an object's undeclared key: both go on with
        the same value, then with their own rest. Left as an intersection, each position
        inside that value (any JSON, nested) was a state of its own, and proving such a
        state empty searched them all (TooLargeError mid-output); taken out, the
        intersection waits until the value is over, and its emptiness is the tails'."""
        if all(c.kind == NOT for c in t.args):
            return t
        head, firsts = None, 0
        for c in t.args:
            x = c.args[0] if c.kind == NOT else c
            if x.kind != CONCAT or (head is not None and x.args[0] is not head):
                return t
            head = x.args[0]
            firsts |= self.first(x.args[1])
        if self.extenders(head) & firsts:
            return t
        return self.concat(head, self.intersect(self.complement(c.args[0].args[1]) if c.kind == NOT else c.args[1]
                                                for c in t.args))

    def json_value(self, t: Term) -> Term:
        """Declare t's members JSON values (no whitespace around them); returns t. Such a
        member ends plainly: only a number's bytes extend it into a longer one (a closed
        string, object or array, a literal cannot go on), whatever t's structure says
        (its keys, which alternatives start alike). So too where t holds a recursive
        reference's marker: the rule it stands for is a JSON value.
        (_Compiler.value declares every value it makes.)"""
        self._ext[t.id] = self._ext.get(t.id, ALL_BYTES) & _NUMBER_BYTES
        return t

    def extenders(self, t: Term) -> int:
        """The bytes that may follow a whole member of t inside a longer member (after
        `1` in `12`), as a 256-bit mask: a superset, every byte where not known (a
        complement, a deferred term). A JSON value has none but a number's digits,
        point and exponent: its end is plain.

        >>> tb = JsonTermBuilder()
        >>> digits = tb.repeat(tb.byte_range(0x30, 0x39), 1, None)
        >>> tb.extenders(digits) == tb.first(digits), tb.extenders(tb.seq([tb.literal(b'"'), digits, tb.literal(b'"')]))
        (True, 0)
        """
        return fold(t, self._ext, self._extenders_of)

    def _extenders_of(self, x: Term, kids: list) -> int:
        """extenders of x from its parts' (`kids`).

        A concatenation X Y: where no byte that extends X starts Y, a member x y extends
        to x' y' only with x' = x (then by Y's extenders), or with y empty and x' longer
        (by X's); else (`0*[1-9]`) any byte of its members. A repeat: its item
        concatenated with itself. An alternation: within a branch; from a nullable
        branch into any; across branches that start with the same byte b, as within
        their derivatives by b (the escapes of a JSON string's character, which all
        start with a backslash). A recursive reference's marker (byte 0xFF): every
        byte, as the marker's structure says nothing of the rule's values."""
        k = x.kind
        if k == BYTES:  # (byte 0xFF: a recursive reference's marker, schema._Compiler._marker)
            return ALL_BYTES if x.args[1] == 0xFF else 0
        if k in (STR, NOTHING, EMPTY):
            return 0
        if k == CONCAT:
            if kids[0] & self.first(x.args[1]):
                return self._members_bytes(x)
            return kids[1] | (kids[0] if x.args[1].nullable else 0)
        if k == REPEAT:
            f, (lo, hi) = self.first(x.args[0]), x.args[1:]
            if kids[0] & f:
                return self._members_bytes(x)
            return kids[0] | (f if hi is None or hi > lo else 0)
        if k == AND:  # (a member of every part, both times)
            out = ALL_BYTES
            for e in kids:
                out &= e
            return out
        if k == LAZY and x.args[0] in LAZY_PROGRAMS:
            return _lazy_extenders(x.args[0])
        if k != ALT:
            return ALL_BYTES  # NOT, a deferred LAZY
        seen, shared, out = 0, 0, 0
        for c, e in zip(x.args, kids):
            f = self.first(c)
            shared, seen, out = shared | (seen & f), seen | f, out | e
        if x.nullable:
            out |= seen
        if shared:
            if shared.bit_count() > EXTENDERS_SHARED_MAX:
                return ALL_BYTES
            self._ext[x.id] = ALL_BYTES  # (a derivative that leads back to x meanwhile: not known)
            for b in range(256):
                if shared >> b & 1:
                    out |= self.extenders(self.alt([self.derive(c, b) for c in x.args if self.first(c) >> b & 1]))
        return out

    def _members_bytes(self, x: Term) -> int:
        """The bytes x's members are made of: every byte where it has AND/NOT/LAZY parts,
        or a marker (byte 0xFF, which stands for a whole value of a recursive rule)."""
        got = fold(x, self._bytes, alphabet_of)
        return ALL_BYTES if got is None or got >> 0xFF & 1 else got

    def complement(self, x: Term) -> Term:
        if x.kind == NOTHING:
            return self.anything
        if x is self.anything:
            return self.nothing
        return super().complement(x)


def _lazy_extenders(name: str) -> int:
    """JsonTermBuilder.extenders of lazy program `name`'s term (a JSON number, a
    format), in a builder of its own, once per process."""
    got = _LAZY_EXT.get(name)
    if got is None:
        tb = JsonTermBuilder()
        got = _LAZY_EXT[name] = tb.extenders(tb.load(LAZY_PROGRAMS[name]))
    return got


_LAZY_EXT: dict[str, int] = {}  # lazy program name -> _lazy_extenders


# _joined_members: how many orders of the parts' members it offers, per reading
JOIN_ORDERS_MAX = 6


def _split_members(w: bytes, in_key: bool) -> tuple[list, bytes] | None:
    """The members of the object a JSON text w is inside of (its members so far not
    shown; in_key: w begins inside a key, the first member is that key's rest) up to
    where that object closes, and the rest of w from its `}`; None if it does not."""
    out, start, depth, in_str, esc = [], 0, 0, in_key, False
    for i, b in enumerate(w):
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:  # backslash
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in b"[{":
            depth += 1
        elif depth == 0 and b in b",]}":
            if b == 0x5D:
                return None
            out.append(w[start:i])
            start = i + 1
            if b == 0x7D:
                return out, w[i:]
        elif b in b"]}":
            depth -= 1
    return None


def _joined_members(cands: list) -> list[bytes]:
    """Candidates that each end the same object after their own members, as ones with
    all their members, a key once (`"a":1}]` and `"b":2}]` -> `"a":1,"b":2}]`): parts of
    an object's intersection (allOf, if/then, oneOf) that each require other keys guess
    objects with only theirs. Each text is read from outside a string and from inside
    a key (the state is unknown here: both are offered), the members in up to
    JOIN_ORDERS_MAX orders (keys may have to come in the schema's order; from inside a
    key, the first one's quote is the one open). Empty where they do not all close one
    object alike."""
    out = []
    for in_key in (False, True):
        split = [_split_members(w, in_key) for w in cands]
        if None in split or len({tail for _, tail in split}) != 1:
            continue
        lead = split[0][0][:1] == [b""]  # (after members given: each begins with a comma)
        if any((ms[:1] == [b""]) != lead for ms, _ in split):
            continue
        members, giving = {}, 0
        for ms, _ in split:
            ms = ms[1:] if lead else ms
            if in_key and ms:  # (the key under way, opened: one member as the others)
                ms = [b'"' + ms[0], *ms[1:]]
            giving += bool(ms)
            for m in ms:
                members.setdefault(m.split(b'":', 1)[0], m)
        if giving < 2:  # (one text's own members: that text, tried already)
            continue
        for order in itertools.islice(itertools.permutations(members.values()), JOIN_ORDERS_MAX):
            body = b",".join(order)
            out.append((b"," if lead else b"") + (body[1:] if in_key else body) + split[0][1])
    return list(dict.fromkeys(out))  # (both readings may give one text)


class _Reentered(Exception):
    """JsonTermSource._search_empty was asked about a term it is searching already."""


# JsonTermSource._tail_empty searches a tail apart only while fewer searches than this
# are under way (each tail's search may meet a tail of its own: arrays of arrays...)
TAIL_SEARCHES_MAX = 8

# JsonTermSource: a guessed member (TermSource.guess) of at most GUESS_FIRST_MAX bytes
# is checked before the search, a longer one after GUESS_AFTER of its steps
GUESS_FIRST_MAX, GUESS_AFTER = 64, 4


class JsonTermSource(TermSource):
    """TermSource whose emptiness check is an A* search for an accepting state.

    Schema terms intersect and complement big languages (nested values); a plain
    depth-first search can wander into ever deeper nesting before it finds an
    accepting state. A* with an admissible estimate (a lower bound on the length of the
    shortest member: exact for terms without AND/NOT) heads for the shortest completion,
    which for a JSON prefix is short (close what is open)."""

    def __init__(self, tb: TermBuilder, max_states: int = DEFAULT_MAX_STATES):
        super().__init__(tb, max_states)
        self._searching: set[int] = set()  # ids of the terms _search_empty is searching now

    def is_empty(self, t: Term) -> bool:
        """Structural where possible (a concatenation is empty iff a part is, an
        alternation iff all are...); a search only for AND / NOT subterms."""
        if not t.boolean:
            return t.kind == NOTHING
        empty = self._empty
        cached = empty.get(t.id)
        if cached is not None:
            return cached
        k = t.kind
        if t.id in getattr(self.tb, "nonempty", ()) or (k == LAZY and t.args[0] in NONEMPTY_LAZY):
            empty[t.id] = False
            return False
        if k == CONCAT:
            # walk the spine only down to the first part already decided (states share
            # their tails, so a new state costs its new head, not the whole document)
            spine, x = [], t
            while x.kind == CONCAT and x.boolean and x.id not in empty:
                spine.append(x)
                x = x.args[1]
            res = self.is_empty(x)
            for y in reversed(spine):
                res = res or self.is_empty(y.args[0])
                empty[y.id] = res
            return res
        elif k == ALT:  # a plain branch settles it without searching the others
            res = all(c.boolean for c in t.args) and all(self.is_empty(c) for c in t.args)
        elif k == REPEAT:
            res = t.args[1] > 0 and self.is_empty(t.args[0])
        else:
            res = self.bound_is_empty(t)
            if res is None:
                res = self._search_empty(t)
        empty[t.id] = res
        return res

    def _guess_of(self, x: Term, kids: list) -> bytes | None:
        """TermSource's candidate; for an intersection none of whose parts' candidates
        is a member, also their object members joined: parts that each require other
        keys of one object (allOf, if/then) each guess an object with only theirs. A
        joined one counts only where it is a member (`matches`: exact)."""
        w = super()._guess_of(x, kids)
        if w is not None or x.kind != AND:
            return w
        tried = [g for c, g in zip(x.args, kids) if c.kind != NOT and g]
        return next((w for w in _joined_members(tried) if self.tb.matches(x, w)), None)

    def _search_empty(self, t: Term) -> bool:
        if t.id in self._searching:
            raise _Reentered
        self._searching.add(t.id)
        try:
            return self._search(t)
        finally:
            self._searching.discard(t.id)

    def _tail_empty(self, y: Term, t: Term) -> bool | None:
        """Whether y, a state t's search reaches, is empty, where y is a plain head (no
        AND/NOT: never empty) followed by a tail: iff the tail is, decided apart (a
        value both branches of a oneOf take, then each its rest: JsonTermBuilder's
        shared heads), not by searching every position of the value. True where the
        tail is t itself: t's shortest member does not pass through y (it would end
        with a shorter one). None where deciding it would search a term that is being
        searched already, or where TAIL_SEARCHES_MAX are under way (y is then searched
        as any other state)."""
        tail = y.args[1]
        if tail is t:
            return True
        if len(self._searching) >= TAIL_SEARCHES_MAX:
            return None
        try:
            return self.is_empty(tail)
        except _Reentered:
            return None

    def _search(self, t: Term) -> bool:
        empty = self._empty
        heap = [(self.minlen(t), 0, t.id, t)]
        best = {t.id: 0}
        parent: dict[int, int] = {}
        found = None
        # a short guess first; a long one (the rest of a document, from inside a
        # string) after a few steps: a state next to one known to live is settled
        # there, where checking the guess would derive the whole document
        w, pops = self.guess(t), 0
        clock = budget.Ticker()  # (rows memoised by earlier searches build no terms: their clock)
        if w is not None and len(w) <= GUESS_FIRST_MAX and self.tb.matches(t, w):
            return False
        while heap:
            pops += 1
            clock.tick()
            if pops == GUESS_AFTER and w is not None and len(w) > GUESS_FIRST_MAX \
                    and self.tb.matches(t, w):
                return False
            _, g, _, x = heapq.heappop(heap)
            g = -g
            if best.get(x.id, g) < g:
                continue
            if x.nullable or not x.boolean or empty.get(x.id) is False:
                found = x
                break
            if x.kind == CONCAT and not x.args[0].boolean and (gone := self._tail_empty(x, t)) is not None:
                if not gone:
                    found = x
                    break
                continue  # (not derived: nothing follows an empty state)
            for _, _, y in self.tb.row(x):
                if y.kind == NOTHING or empty.get(y.id) is True:
                    continue
                g2 = g + 1
                if best.get(y.id, g2 + 1) <= g2:
                    continue
                best[y.id] = g2
                parent[y.id] = x.id
                heapq.heappush(heap, (g2 + self.minlen(y), -g2, y.id, y))
            if len(best) > self.max_states:
                raise TooLargeError(f"emptiness check exceeds max_states={self.max_states}")
        if found is None:
            for i in best:
                empty[i] = True
            return True
        i = found.id
        while True:  # every state on the path reaches acceptance
            empty[i] = False
            if i == t.id:
                break
            i = parent[i]
        return False
