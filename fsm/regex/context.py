"""The context of a position in a text: the class of the character before it and of the
text after it. Anchors, word boundaries and one-character lookarounds read nothing else,
so a pattern holding them stays regular wherever they stand (repeats of any count,
lookarounds): the converter (fsm/regex/looks.py) carries the class along, a finite
product. Design: docs/regex.md, "Word boundaries and anchors".

Characters fall into *atoms*: the code points that every set a pattern's assertions test
(its word characters, a newline, a lookaround's class) treats alike. A left atom is an
atom, or START (nothing before); a right atom is an atom, END (nothing after) or, where
Python's `$` is used, NLEND (the text after is exactly one newline: `$` holds before it).

An assertion (`Pred`) is the set of (left, right) atom pairs where it holds. A class is
a group of atoms that the assertions in view do not tell apart (`left_groups`,
`right_groups`); the converter splits texts by class only where one is read.
"""
from __future__ import annotations

import bisect

from . import charset

START, END, NLEND = -1, -2, -3  # atoms of no character


class Contexts:
    """The atoms of one pattern, from the code point sets its assertions test."""

    def __init__(self, sets: list, nlend: bool):
        self.nlend = nlend
        cuts = {0, charset.MAX_CP + 1}
        for s in sets:
            for lo, hi in s:
                cuts.update((lo, hi + 1))
        cuts = sorted(cuts)
        starts = [[lo for lo, _ in s] for s in sets]

        def member(s, st, cp) -> bool:
            i = bisect.bisect_right(st, cp) - 1
            return i >= 0 and s[i][1] >= cp
        by_sig: dict = {}
        for lo, nxt in zip(cuts, cuts[1:]):
            sig = tuple(member(s, st, lo) for s, st in zip(sets, starts))
            by_sig.setdefault(sig, []).append((lo, nxt - 1))
        self.ranges = [charset.normalize(r) for r in by_sig.values()]
        self.ranges = [r for r in self.ranges if r]  # (surrogates alone: no atom)
        self.chars = frozenset(range(len(self.ranges)))
        self.left = self.chars | {START}
        self.right = self.chars | ({END, NLEND} if nlend else {END})
        self.newline = self.atom_of(10)
        self._atoms: dict = {}  # code point set -> the atoms meeting it

    def atom_of(self, cp: int) -> int:
        for a, r in enumerate(self.ranges):
            i = bisect.bisect_right(r, (cp, charset.MAX_CP + 1)) - 1
            if i >= 0 and r[i][1] >= cp:
                return a
        raise AssertionError(cp)

    def atoms_meeting(self, ranges) -> frozenset:
        """The atoms holding some member of `ranges` (all of them, for a set the atoms
        refine)."""
        key = tuple(ranges)
        got = self._atoms.get(key)
        if got is None:
            got = self._atoms[key] = frozenset(a for a, r in enumerate(self.ranges) if _meet(r, key))
        return got

    def ranges_of(self, atoms) -> tuple:
        """The code points of the character atoms among `atoms`."""
        return charset.normalize(x for a in atoms if a >= 0 for x in self.ranges[a])

    def in_set(self, atom: int, ranges) -> bool:
        """Whether the character(s) of `atom` are in `ranges` (NLEND is a newline)."""
        if atom == NLEND:
            return any(lo <= 10 <= hi for lo, hi in ranges)
        return atom >= 0 and atom in self.atoms_meeting(ranges)

    def after_newline(self, right: int) -> int:
        """The right atom of "\\n" + a text whose right atom is `right`."""
        return NLEND if self.nlend and right == END else self.newline


def _meet(a, b) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


class Pred:
    """An assertion that reads one character on each side at most: `allowed[l]` is the
    set of right atoms where it holds after left atom l. `item` is its parse item (for
    error positions)."""

    __slots__ = ("item", "allowed", "left", "right")

    def __init__(self, item, allowed: dict, ctx: Contexts):
        self.item, self.allowed = item, allowed
        values = set(allowed.values())
        self.left = len(values) > 1  # it reads the character before
        self.right = any(v and v != ctx.right for v in values)  # and the text after

    @staticmethod
    def boundary(item, word, negate: bool, ctx: Contexts, in_empty: bool = True) -> Pred:
        """\\b (\\B with `negate`): a word character on one side only. `in_empty`: \\B
        holds in an empty text (not in Python's re before 3.14)."""
        words = {a for a in ctx.right if ctx.in_set(a, word)}
        allowed = {x: frozenset(r for r in ctx.right if ((r in words) != (x in words)) != negate) for x in ctx.left}
        if negate and not in_empty:
            allowed[START] = allowed[START] - {END}
        return Pred(item, allowed, ctx)

    @staticmethod
    def behind(item, ranges, negate: bool, ctx: Contexts, start: bool = False) -> Pred:
        """A one-character lookbehind (`^` with `start`: START, or a member of `ranges`)."""
        none = frozenset()
        return Pred(item, {x: ctx.right if (x == START and start or ctx.in_set(x, ranges)) != negate else none
                           for x in ctx.left}, ctx)

    @staticmethod
    def ahead(item, ranges, negate: bool, ctx: Contexts, ends=frozenset()) -> Pred:
        """A one-character lookahead (`$` and `\\Z`: holding at right atoms `ends`)."""
        ok = frozenset(r for r in ctx.right if (r in ends or ctx.in_set(r, ranges)) != negate)
        return Pred(item, dict.fromkeys(ctx.left, ok), ctx)


def left_groups(ctx: Contexts, preds, extra=()) -> list:
    """The left atoms, grouped by what `preds` allow after them (and by membership in
    each set of `extra`)."""
    by: dict = {}
    for x in sorted(ctx.left):
        sig = tuple(p.allowed[x] for p in preds if p.left) + tuple(x in s for s in extra)
        by.setdefault(sig, set()).add(x)
    return [frozenset(g) for g in by.values()]


def right_groups(ctx: Contexts, preds) -> list:
    """The right atoms, grouped by where `preds` hold before them, then split until
    "\\n" + a text of one group is always of one group (Python's `$` tells a final
    newline from another one)."""
    sig = {r: tuple(frozenset(x for x in ctx.left if r in p.allowed[x]) for p in preds if p.right)
           for r in ctx.right}
    while True:
        group = {}
        for r in sorted(ctx.right):
            group.setdefault(sig[r], len(group))
        new = {r: (sig[r], group[sig[ctx.after_newline(r)]]) for r in ctx.right}
        if len(set(new.values())) == len(set(sig.values())):
            break
        sig = new
    by: dict = {}
    for r in sorted(ctx.right):
        by.setdefault(sig[r], set()).add(r)
    return [frozenset(g) for g in by.values()]


def group_of(groups, atoms):
    """The group of `groups` holding every atom of `atoms` (None where none does: the
    classes were split more finely than needed, or not finely enough)."""
    for g in groups:
        if atoms <= g:
            return g
    return None
