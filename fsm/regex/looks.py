"""Lookarounds, anchors and word boundaries: the part of the regex converter
(fsm/regex/syntax.py's Converter) for patterns that look around them.

A lookahead sees the rest of the input: items are converted right to left, each
followed by `rest`, the texts that may follow it, and a lookahead is an intersection
with `rest`. A lookbehind of fixed width is joined with the items before it that it
sees (`_behind`). An assertion that reads one character on each side at most (`^`, `$`,
`\\A`, `\\Z`, `\\b`, `\\B`, a one-character lookaround: a `Pred`, fsm/regex/context.py)
only needs the class of the character before it and of the text after it: the items
before it are split by the class they end with (`left`), and `rest` is cut to the
texts of the classes it allows. That holds in repeats of any count too (`_loop`: a
linear system over the classes, solved once). Design and limits: docs/regex.md,
"Lookarounds" and "Word boundaries and anchors".
"""
from __future__ import annotations

import re
from typing import NamedTuple

from ..core.errors import RegexError
from ..core.terms import Term, minus_empty
from .context import END, NLEND, START, Contexts, Pred, group_of, left_groups, right_groups
from .tree import (
    AT_BEGIN,
    BOUNDS,
    CHARS,
    CLASS_OP,
    LOOKS,
    REPEATS,
    TERM_OP,
    C,
    edge_chars,
    flags_in,
    has_look,
    in_order,
    inner,
    min_width,
    widths,
)


class Side(NamedTuple):
    """What follows a text whose continuation is not given as a term: the right atoms
    it may begin as, and whether it is another lexeme (a grammar terminal's end) rather
    than more of the pattern (a repeat's next item)."""
    group: frozenset
    lexeme: bool


class _NeedsLeft(Exception):
    """The class of the text before a list of items was needed but is not known."""


class Lookarounds:
    """Mixin of the Converter: `then` and what it needs. The converter provides tb,
    pattern, root, looks, terminal, sequence(), node(), char_ranges(), word_ranges(),
    any_text(), end_text(), _fail_at(), _fail_look()."""

    MAX_LOOK_REPEAT = 8  # a repeat with a lookahead inside is unrolled: at most this many

    def then(self, items, flags: int, at_start: bool, at_end: bool, rest: Term) -> Term:
        """`items` followed by `rest`, the texts that may follow them to the end of the
        input: what a lookahead among them sees after its place. Without lookarounds,
        sequence's term (its anchors: only at the ends)."""
        if not self.looks or not has_look(items, ends=True):
            return self.tb.concat(self.sequence(items, flags, at_start, at_end), rest)
        left = frozenset((START,)) if at_start else None
        return self._seq(list(items), flags, left, None, rest, None, [] if rest is self.tb.empty else None)

    # -- contexts ---------------------------------------------------------------------
    @property
    def ctx(self) -> Contexts:
        """The pattern's context atoms; each assertion's Pred in self._preds (by item)."""
        c = self.__dict__.get("_ctx")
        if c is None:
            found: list = []
            self._collect(self.root, self.flags, found)
            c = self._ctx = Contexts(list(dict.fromkeys(ranges for _, ranges, _, _ in found if ranges)),
                                     any(python for _, _, python, _ in found))
            self._preds = {id(item): make(c) for item, _, _, make in found}
        return c

    def _collect(self, items, flags: int, out: list) -> None:
        """The assertions of a parse tree that read one character on each side at most:
        (item, the code point set it tests, whether it is Python's `$`, what makes its
        Pred from the pattern's Contexts)."""
        nl = ((10, 10),)
        for item in items:
            op, av = item
            if op == C.AT:
                ml = bool(flags & re.MULTILINE)
                if av in BOUNDS:
                    word, neg = self.word_ranges(flags), av == C.AT_NON_BOUNDARY
                    out.append((item, word, False, lambda c, i=item, w=word, n=neg: Pred.boundary(
                        i, w, n, c, self.NON_BOUNDARY_IN_EMPTY)))
                elif av in AT_BEGIN:
                    ranges = nl if ml and av == C.AT_BEGINNING else ()
                    out.append((item, ranges, False, lambda c, i=item, r=ranges: Pred.behind(i, r, False, c, True)))
                else:  # (an end anchor that also holds before a newline: Python's `$`)
                    python = self.end_text(flags, av) is not self.tb.empty
                    ranges = nl if ml and python else ()
                    out.append((item, nl if python else (), python, lambda c, i=item, r=ranges, p=python: Pred.ahead(
                        i, r, False, c, frozenset((END, NLEND) if p else (END,)) & c.right)))
                continue
            if op in LOOKS:
                one = self._one_char(av[1], flags, ranges=True)
                if one is not None:
                    make = Pred.ahead if av[0] == 1 else Pred.behind
                    out.append((item, one, False, lambda c, i=item, r=one, n=op == C.ASSERT_NOT, m=make: m(i, r, n, c)))
                    continue
            for x in inner(op, av):
                self._collect(x, flags_in(op, av, flags), out)

    def _pred(self, item) -> Pred | None:
        """The Pred of an assertion item (None for any other item)."""
        op = item[0]
        if op == CLASS_OP:
            return Pred(item, dict.fromkeys(self.ctx.left, item[1]), self.ctx)
        if op != C.AT and op not in LOOKS:
            return None
        self.ctx  # noqa: B018 - (builds _preds)
        return self._preds.get(id(item))

    def _preds_in(self, items) -> list:
        """The Preds of every assertion in `items`, lookarounds' bodies included."""
        return [p for p in map(self._pred, in_order(items, lambda op, av: True)) if p is not None]

    def _reach(self, items) -> tuple[list, bool]:
        """The left-reading Preds of `items` that may stand where they begin (before any
        character of theirs, or in a lookbehind that looks back there), and whether the
        items may match the empty text."""
        out: list = self._back(items, 0)
        for item in items:
            op, av = item
            p = self._pred(item)
            if p is not None:
                if p.left:
                    out.append(p)
            elif op in LOOKS:
                if av[0] == 1:  # (a lookahead's text begins here)
                    out += self._reach(av[1])[0]
            elif op in CHARS or op == TERM_OP and av[1] > 0:
                return out, False
            elif op in (C.SUBPATTERN, C.BRANCH) or op in REPEATS and av[1] > 0:
                empty = False
                for x in inner(op, av):
                    got, e = self._reach(x)
                    out += got
                    empty = empty or e
                if not (empty or op in REPEATS and av[0] == 0):
                    return out, False
        return out, True

    def _back(self, items, width: int) -> list:
        """The left-reading Preds at the start of the lookbehinds of `items` that may look
        back past where the items begin (`width`: the fewest characters before the
        items that they see)."""
        out: list = []
        for item in items:
            op, av = item
            if op in LOOKS and av[0] == -1 and self._pred(item) is None:
                got = self._reach(av[1])[0]
                if got and min_width(av[1]) + 1 > width:
                    out += got
            elif op in (C.SUBPATTERN, C.BRANCH) or op in REPEATS:
                for x in inner(op, av):
                    out += self._back(x, width)
            width += min_width([item])
        return out

    def _left_groups(self, preds, end) -> list:
        """The classes of what precedes a place that `preds` and `end` tell apart."""
        preds = [p for p in preds if p.left]
        if not preds and end is None:
            return [self.ctx.left]
        return left_groups(self.ctx, preds, [end] if end is not None else [])

    # -- items, left to right ---------------------------------------------------------
    def _seq(self, items, flags: int, left, end, rest: Term, after: Side | None, first) -> Term:
        """The texts of `items` (a list), after a text of class `left` (a group of left
        atoms; None: unknown), whose own end class is in the group `end` (None: any),
        followed by `rest`. `after` is None where `rest` runs to the input's end, else
        what follows `rest`; `first` the characters `rest` may begin with (code point
        sets; None: any)."""
        tb = self.tb
        items = self._behind(items, flags, left)
        units = _units(items)
        n = len(units)
        if n == 0:
            return self._stop(left, end, rest, [])
        reach, empty, firsts = [[]] * (n + 1), [True] * (n + 1), [first] * (n + 1)
        for k in range(n - 1, -1, -1):
            got, e = self._reach(units[k])
            reach[k] = got + reach[k + 1] if e else got
            empty[k] = e and empty[k + 1]
            f, e2 = edge_chars(units[k], flags, self.char_ranges)
            firsts[k] = None if f is None or e2 and firsts[k + 1] is None else f + firsts[k + 1] if e2 else f
        # the classes of what precedes unit k that its assertions (and `end`) tell apart,
        # those of them that the text before can end in (left to right)
        groups = [[left]] + [self._left_groups(reach[k], end if empty[k] else None) for k in range(1, n + 1)]
        zero = [len(u) == 1 and u[0][0] in LOOKS or self._pred(u[0]) is not None for u in units]
        live = [[left]]
        for k in range(n):
            live.append(self._classes_after(units[k], zero[k], flags, live[k], groups[k + 1], reach[k + 1]))
        # right to left: cur[g] is the texts of units[k + 1:] and `rest` after class g
        cur = {g: self._stop(g, end, rest, reach[n]) for g in live[n]}
        for k in range(n - 1, -1, -1):
            unit, one, new = units[k], len(groups[k + 1]) == 1, {}
            p = self._pred(unit[0]) if zero[k] else None
            for lam in live[k]:
                if zero[k]:  # (the class after is the same)
                    g = self._same(groups[k + 1], lam, reach[k + 1])
                    if p is None:
                        new[lam] = self._general_ahead(unit[0], flags, lam, cur[g], after)
                        continue
                    if p.left and lam is None:
                        self._fail_pred(p)
                    new[lam] = self._look_ahead(cur[g], p.allowed[START if lam is None else min(lam)], after,
                                                firsts[k + 1])
                    continue
                parts = []  # the unit's texts by the class they end with, each before its own
                for g in live[k + 1]:
                    if cur[g] is not tb.nothing:
                        try:
                            parts.append(self._unit(unit, flags, lam, None if one else g, cur[g], after,
                                                    firsts[k + 1]))
                        except _NeedsLeft:
                            self._fail_pred(reach[k + 1][0] if reach[k + 1] else None)
                new[lam] = tb.alt(parts)
            cur = new
        return cur[left]

    def _classes_after(self, unit: list, zero: bool, flags: int, before: list, groups: list, reach) -> list:
        """The groups among `groups` that the text of `unit` can end in after a text of
        one of the classes `before`: only those are converted (a class that cannot be
        there may need what is not known, as the text before a pattern's start)."""
        if zero:
            return list(dict.fromkeys(self._same(groups, lam, reach) for lam in before))
        last, may_be_empty = edge_chars(unit, flags, self.char_ranges, last=True)
        if last is None or may_be_empty and None in before:
            return groups
        atoms = self._atoms(last).union(*(before if may_be_empty else ()))
        return [g for g in groups if g & atoms]

    def _same(self, groups, lam, reach):
        """The group of `groups` holding the class `lam` (a zero-width item keeps it)."""
        if len(groups) == 1:
            return groups[0]
        if lam is None:
            self._fail_pred(reach[0] if reach else None)
        g = group_of(groups, lam)
        if g is None:  # pragma: no cover - a split that missed an assertion
            raise AssertionError(f"context classes {lam} and {groups} in {self.pattern!r}")
        return g

    def _stop(self, lam, end, rest: Term, reach) -> Term:
        """`rest`, where the items end here and their end class `lam` must be in `end`."""
        if end is None:
            return rest
        if lam is None:
            self._fail_pred(reach[0] if reach else None)
        return rest if lam <= end else self.tb.nothing

    def _unit(self, unit: list, flags: int, left, end, rest: Term, after, first) -> Term:
        """One unit of items that reads text (a run of plain items, a group, a branch, a
        repeat), after class `left`, its text ending in class `end`, then `rest`."""
        tb = self.tb
        op, av = unit[0]
        if len(unit) == 1 and op != TERM_OP and has_look(unit, ends=True):
            if op == C.SUBPATTERN:
                return self._seq(list(av[3]), flags_in(op, av, flags), left, end, rest, after, first)
            if op == C.BRANCH:
                return tb.alt(self._seq(list(b), flags, left, end, rest, after, first) for b in av[1])
            return self._repeat(av, flags, left, end, rest, after, first)
        t = av[0] if len(unit) == 1 and op == TERM_OP else self.sequence(unit, flags, False, False)
        last = edge_chars(unit, flags, self.char_ranges, last=True)[0]
        return tb.concat(self._ending(t, last, end, left), rest)

    # -- classes as terms -------------------------------------------------------------
    def _class(self, atoms) -> Term:
        """One character of the character atoms `atoms`."""
        key = ("class", atoms)
        t = self._terms.get(key)
        if t is None:
            ranges = self.ctx.ranges_of(atoms)
            t = self._terms[key] = self.node(C.IN, [(C.RANGE, r) for r in ranges], 0, False, False) \
                if ranges else self.tb.nothing
        return t

    def _ends_in(self, group, before) -> Term:
        """The texts after a text of class `before` (None: unknown, then the empty text
        is left out) that leave the class in `group`."""
        key = ("ends", group, before)
        t = self._terms.get(key)
        if t is None:
            tb = self.tb
            parts = [tb.concat(self.any_text(), self._class(group - {START}))]
            if before is not None and before <= group:
                parts.append(tb.empty)
            t = self._terms[key] = tb.alt(parts)
        return t

    def _ending(self, t: Term, last, group, before) -> Term:
        """The texts of t that, after a text of class `before`, end in class `group`
        (None: any); `last` the characters t's texts may end with (None: unknown)."""
        tb = self.tb
        if group is None:
            return t
        if t.nullable and before is None:
            raise _NeedsLeft
        empty_ok = t.nullable and before <= group
        if last is not None:
            atoms = self._atoms(last)
            if atoms <= group and (empty_ok or not t.nullable):
                return t
            if not atoms & group:
                return tb.empty if empty_ok else tb.nothing
        if t is self.any_text():
            return self._ends_in(group, before)
        return tb.intersect([t, self._ends_in(group, before)])

    def _atoms(self, sets) -> frozenset:
        out: frozenset = frozenset()
        for r in sets:
            out |= self.ctx.atoms_meeting(r)
        return out

    def _starts_as(self, group, after) -> Term:
        """The texts that, followed by a text of class `after` (a group of right atoms),
        begin as one of `group`'s atoms."""
        key = ("starts", group, after)
        t = self._terms.get(key)
        if t is None:
            tb, ctx = self.tb, self.ctx
            parts = [tb.empty] if after <= group else []
            chars = group & ctx.chars
            if ctx.nlend:  # "\n" alone is NLEND where nothing follows
                exact = {ctx.after_newline(a) in group for a in after}
                if len(exact) > 1:  # pragma: no cover - right_groups splits these
                    raise AssertionError(after)
                nl, more, exact = tb.literal(b"\n"), ctx.newline in group, exact.pop()
                chars = chars - {ctx.newline}
                if more or exact:
                    parts.append(tb.concat(nl, tb.anything) if more and exact else nl if exact else
                                 tb.concat(nl, tb.concat(tb.any_byte, tb.anything)))
            if chars:
                parts.append(tb.concat(self._class(chars), tb.anything))
            t = self._terms[key] = tb.alt(parts)
        return t

    def _look_ahead(self, t: Term, allowed, after: Side | None, first) -> Term:
        """The texts of t whose class, followed by `after` (None: the input's end), is
        in `allowed`; `first` the characters t's texts may begin with (None: unknown)."""
        tb, ctx = self.tb, self.ctx
        if allowed == ctx.right or t is tb.nothing:
            return t
        group = frozenset((END,)) if after is None else after.group
        if after is not None and after.lexeme and (t.nullable or ctx.nlend):
            self.read_after = True  # (a terminal's end: the next lexeme decides)
        empty_ok = t.nullable and group <= allowed
        if not allowed or t is tb.empty:
            return tb.empty if empty_ok else tb.nothing
        if first is not None:
            atoms = self._atoms(first)
            if not (ctx.nlend and ctx.newline in atoms):
                if atoms <= allowed and (empty_ok or not t.nullable):
                    return t
                if not atoms & allowed:
                    return tb.empty if empty_ok else tb.nothing
        return tb.intersect([t, self._starts_as(allowed, group)])

    # -- lookaheads ------------------------------------------------------------------
    def _general_ahead(self, item, flags: int, left, rest: Term, after: Side | None) -> Term:
        """A lookahead of more than one character before `rest`."""
        tb = self.tb
        op, av = item
        if av[0] == -1:  # pragma: no cover - _behind joined it
            raise AssertionError(item)
        if after is not None:
            if not after.lexeme:
                self._fail_look(av, "a lookahead inside a lookbehind")
            if rest.nullable:  # (it may stand at the lexeme's end: what it reads is the next lexeme's)
                self._fail_look(av, "a lookahead at the end of a grammar terminal, which reads more than the "
                                "one character after it (only a class of that character, as \\b, \\Z, "
                                "(?m)$ or a one-character lookahead read, can be decided),")
        seen = self._seq(list(av[1]), flags, left, None, self.any_text(), None, None)
        return tb.intersect([rest, seen if op == C.ASSERT else tb.complement(seen)])

    def _repeat(self, av, flags: int, left, end, rest: Term, after, first) -> Term:
        """A repeat with assertions or lookarounds inside, then `rest`."""
        tb = self.tb
        lo, hi, sub = av
        body = list(sub)
        if hi == 0:
            return self._stop(left, end, rest, self._reach(body)[0])
        generals = [x for x in in_order(body, lambda o, a: o in LOOKS and a[0] == 1)
                    if self._pred(x) is None]
        if (generals and rest is tb.empty and after is None and end is None
                and not any(p.left for p in self._preds_in(body))
                and (t := self._tempered(body, flags, lo, hi)) is not None):
            return t
        folded = self._folded(body, flags)
        generals = [x for x in in_order(folded, lambda o, a: o in LOOKS and a[0] == 1) if self._pred(x) is None]
        if hi == 1:  # (?:...)? : no loop
            parts = [self._seq(folded, flags, left, end, rest, after, first)]
            if lo == 0:
                parts.append(self._stop(left, end, rest, self._reach(body)[0]))
            return tb.alt(parts)
        if generals:  # they see the items after theirs: unrolled, or refused
            if hi != C.MAXREPEAT and hi <= self.MAX_LOOK_REPEAT:
                return self._seq(_unrolled(folded, lo, hi), flags, left, end, rest, after, first)
            self._fail_look(generals[0][1], f"a lookahead inside a repeat of more than {self.MAX_LOOK_REPEAT}")
        return self._loop(folded, flags, lo, None if hi == C.MAXREPEAT else hi, left, end, rest, after, first)

    def _loop(self, body: list, flags: int, lo: int, hi, left, end, rest: Term, after, first) -> Term:
        """body{lo,hi} (hi None: unbounded), whose assertions read one character on each
        side at most, then `rest`. An item's assertions read the class of the one before
        (its last character) and of the text after (the next items', then `rest`'s), so
        with Z[(l, r)] the texts of the items still to come and of `rest` that begin
        after class l and are of class r:
            Z[(l, r)] = Stop[(l, r)] | U M[(l, r), (l', r')] Z[(l', r')],
        M the body's non-empty texts after l that end in class l', followed by a text of
        class r', the whole of class r. Unrolled where counted, solved (Arden's lemma,
        elimination) where unbounded."""
        tb = self.tb
        preds = self._preds_in(body)
        lgroups = self._left_groups(preds, end)
        rgroups = right_groups(self.ctx, [p for p in preds if p.right])
        if len(lgroups) == 1 and len(rgroups) == 1:  # nothing read tells the items apart
            side = Side(rgroups[0], False)
            t = self._seq(body, flags, lgroups[0], None, tb.empty, side, [])
            return tb.concat(tb.repeat(t, lo, hi), self._stop(lgroups[0], end, rest, []))
        rows = lgroups + ([left] if left not in lgroups else [])
        last = edge_chars(body, flags, self.char_ranges, last=True)[0]
        head = edge_chars(body, flags, self.char_ranges)[0]
        after_rest = {r: self._look_ahead(rest, r, after, first) for r in rgroups}
        readers = [p for p in preds if p.left]
        stop = {(i, r): self._stop(i, end, after_rest[r], readers) for i in rows for r in rgroups}
        whole, step = {}, {}  # (row, r): the body's texts; (row, r, l', r'): M
        for i in rows:
            for r2 in rgroups:
                t = whole[(i, r2)] = self._seq(body, flags, i, None, tb.empty, Side(r2, False), [])
                t = minus_empty(tb, t)  # (an empty item never counts: the class stays)
                for l2 in lgroups:
                    ending = self._ending(t, last, l2, i)
                    for r in rgroups:
                        step[(i, r, l2, r2)] = self._look_ahead(ending, r, Side(r2, False), head)

        def more(z: dict, rows_) -> dict:
            return {(i, r): tb.alt([stop[(i, r)]] + [tb.concat(step[(i, r, l2, r2)], z[(l2, r2)])
                                                      for l2 in lgroups for r2 in rgroups])
                    for i in rows_ for r in rgroups}
        if hi is None:
            keys = [(l2, r2) for l2 in lgroups for r2 in rgroups]
            z = self._solve({k: {k2: step[(k[0], k[1], *k2)] for k2 in keys} for k in keys},
                            {k: stop[k] for k in keys})
            z.update(more(z, [i for i in rows if i not in lgroups]))
        else:
            z = {k: stop[k] for k in stop}
            for _ in range(hi - lo):
                z = more(z, rows)
        for _ in range(lo):  # (an empty item may count here: it keeps the class)
            z = {(i, r): tb.alt([z[(i, r)] if whole[(i, r)].nullable else tb.nothing]
                                + [tb.concat(step[(i, r, l2, r2)], z[(l2, r2)]) for l2 in lgroups for r2 in rgroups])
                 for i in rows for r in rgroups}
        return tb.alt(z[(left, r)] for r in rgroups)

    def _solve(self, m: dict, s: dict) -> dict:
        """The least solution of Z[i] = s[i] | U m[i][j] Z[j] (m's texts non-empty), by
        elimination: Z[k] = m[k][k]* (s[k] | U m[k][j] Z[j]), put into the others."""
        tb = self.tb
        m = {i: {j: t for j, t in row.items() if t is not tb.nothing} for i, row in m.items()}
        s = dict(s)
        for k in s:
            loop = m[k].pop(k, None)
            if loop is not None:
                star = tb.star(loop)
                s[k] = tb.concat(star, s[k])
                m[k] = {j: tb.concat(star, t) for j, t in m[k].items()}
            for i in s:
                a = m[i].pop(k, None) if i != k else None
                if a is None:
                    continue
                s[i] = tb.alt([s[i], tb.concat(a, s[k])])
                for j, t in m[k].items():
                    m[i][j] = tb.alt([m[i].get(j, tb.nothing), tb.concat(a, t)])
        return s

    def _folded(self, items, flags: int) -> list:
        """`items` (a new list) where a lookahead of one character, `(?!X)` or `(?=X)`,
        that an item of one character D follows (or a repeat of D, at least once) is
        one with it: D less X, or D and X (exact: the lookahead sees D's character).
        `((?!-)[a-z0-9-]+[.])+` is then a plain repeat, not one to unroll. Groups,
        branches and repeats are folded inside."""
        out, items, k = [], list(items), 0
        while k < len(items):
            op, av = items[k]
            if op == C.SUBPATTERN:  # (its own flags: `(?i:(?!a)[a-z])`)
                out.append((op, (*av[:3], self._folded(av[3], flags_in(op, av, flags)))))
            elif op == C.BRANCH:
                out.append((op, (av[0], [self._folded(b, flags) for b in av[1]])))
            elif op in REPEATS:
                out.append((op, (av[0], av[1], self._folded(av[2], flags))))
            elif op in LOOKS and av[0] == 1 and k + 1 < len(items) and (x := self._one_char(av[1], flags)) \
                    is not None and (joined := self._joined(items[k + 1], flags, x, op == C.ASSERT)) is not None:
                out += joined
                k += 1
            else:
                out.append(items[k])  # (the item itself: its Pred and error place are by identity)
            k += 1
        return out

    def _one_char(self, items, flags: int, ranges: bool = False):
        """The term (with `ranges`: the code point set) of `items` where they are one
        item of one character (a literal, a class, `.`), else None."""
        items = list(items)
        if len(items) != 1 or items[0][0] not in CHARS:
            return None
        if ranges:
            return self.char_ranges(*items[0], flags)
        return self.node(*items[0], flags, False, False)

    def _joined(self, item, flags: int, look: Term, holds: bool) -> list | None:
        """The items for `item` after a one-character lookahead `look` (_folded): its
        first character meets the lookahead. None where item is no character, nor a
        repeat of one taken at least once."""
        op, av = item
        d, after = self._one_char([item], flags), []
        if d is None and op in REPEATS and av[0] >= 1 and (d := self._one_char(av[2], flags)) is not None:
            hi = av[1] if av[1] == C.MAXREPEAT else av[1] - 1
            after = [(op, (av[0] - 1, hi, av[2]))]
        if d is None:
            return None
        tb = self.tb
        first = tb.intersect([d, look if holds else tb.complement(look)])
        return [(TERM_OP, (first, 1))] + after

    def _tempered(self, sub, flags: int, lo: int, hi: int):
        """A repeat at the input's end whose item is one character with lookaheads
        (`^((?!--).)*$`, "no `--` anywhere"): each character of the repeat begins an
        item, so the texts are lo to hi characters from each of which the rest of the
        input is one that an item may begin (G: the item followed by any text, its
        lookaheads seeing all of it), which is regular without unrolling: characters
        minus Σ* (Σ+ minus G). None for any other repeat."""
        tb = self.tb
        if widths(sub) != (1, 1):
            return None
        text = self.any_text()  # (a star: its item is one character)
        begins = self._seq(list(sub), flags, None, None, text, None, None)
        some = tb.intersect([text, tb.complement(tb.empty)])
        bad = tb.concat(text, tb.intersect([some, tb.complement(begins)]))
        return tb.intersect([tb.repeat(text.args[0], lo, None if hi == C.MAXREPEAT else hi), tb.complement(bad)])

    # -- lookbehinds ------------------------------------------------------------------
    def _behind(self, items: list, flags: int, left) -> list:
        """`items` where each lookbehind of more than one character and the items before
        it that it looks at are one (TERM_OP, (term, shortest width)) item: the fewest
        items whose shortest match is as long as the lookbehind's (fixed) width, so that
        all it sees lies in them, or (where the items begin the input) all of them.
        Assertions inside it that read the character after it make a branch per class
        of that character, each with a CLASS_OP item that the text after must meet."""
        tb = self.tb
        out: list = []
        for item in items:
            op, av = item
            if op in (C.BRANCH, C.SUBPATTERN) and (need := self._lead_need(item)) > 0:
                # (a lookbehind at the start of a group looks at the items before it: they go
                # into each of its alternatives; Python's parser makes such groups of
                # `ab(?<=b)c|ab(?<=a)d`, factoring the common `ab` out)
                i, _ = self._joined_back(out, need)
                branches = av[1] if op == C.BRANCH else [av[3]]
                out[i:] = [(C.BRANCH, (None, [out[i:] + list(b) for b in branches]))]
                continue
            if op not in LOOKS or av[0] != -1 or self._pred(item) is not None:
                out.append(item)
                continue
            body = list(av[1])
            if any(self._pred(x) is None for x in in_order(body, lambda o, a: o in LOOKS and a[0] == 1)):
                self._fail_look(av, "a lookahead inside a lookbehind")
            need = min_width(body)
            reads = bool(self._reach(body)[0])  # it reads the character before its text
            want = need + reads
            i, width = self._joined_back(out, want)
            before = left if i == 0 else None
            if width < need and not (i == 0 and left == frozenset((START,))) or reads and width < want and \
                    before is None:
                self._fail_look(av, "a lookbehind that may look before its group or pattern starts "
                                    "(or past an anchor or a lookahead)")
            kept = self._seq(out[i:], flags, before, None, tb.empty, None, [])
            rights = [p for p in self._preds_in(body) if p.right]
            sides = right_groups(self.ctx, rights) if rights else [None]
            branches = []
            for r in sides:
                parts = []
                for lam in self._left_groups(self._reach(body)[0], None) if reads else [None]:
                    pre = self.any_text() if lam is None else self._ends_in(lam, before)
                    parts.append(tb.concat(pre, self._seq(body, flags, lam, None, tb.empty,
                                                          None if r is None else Side(r, False), [])))
                seen = tb.alt(parts)
                t = tb.intersect([kept, seen if op == C.ASSERT else tb.complement(seen)])
                branches.append([(TERM_OP, (t, width))] + ([] if r is None else [(CLASS_OP, r)]))
            out[i:] = [branches[0][0]] if len(branches) == 1 else [(C.BRANCH, (None, branches))]
        return out

    def _joined_back(self, out: list, want: int) -> tuple[int, int]:
        """Where the items a lookbehind of `want` characters sees begin among `out` (the
        items before it), and their shortest width: back over items whose own
        lookarounds look within what is joined (`(?:^|-)\\b`), up to `want` characters,
        and on while the first of them reads the class of the character before it."""
        i, width = len(out), 0
        while i > 0 and (width < want or self._reach(out[i:])[0]) and out[i - 1][0] not in (C.AT, CLASS_OP) \
                and not has_look(out[i - 1:i], ends=True, behind=False):
            i -= 1
            width += min_width(out[i:i + 1])
        return i, width

    def _lead_need(self, item) -> int:
        """How many characters before a group (one that sets no flags) or a branch a
        lookbehind of more than one character at the start of one of its alternatives
        may see (0: none)."""
        op, av = item
        if op == C.SUBPATTERN and (av[1] or av[2]):
            return 0
        need = 0
        for branch in av[1] if op == C.BRANCH else [av[3]]:
            width = 0  # (the fewest characters of the alternative before x)
            for x in branch:
                if x[0] in (C.BRANCH, C.SUBPATTERN):
                    need = max(need, self._lead_need(x) - width)
                elif x[0] in LOOKS and x[1][0] == -1 and self._pred(x) is None:
                    need = max(need, min_width(x[1][1]) + bool(self._reach(x[1][1])[0]) - width)
                width += min_width([x])
        return need

    def _fail_pred(self, pred) -> None:
        """RegexError at an assertion that needs the class of what precedes its group,
        which is not known there."""
        what = ("a `^`, `\\b`, `\\B` or lookbehind at the start of a grammar terminal, which reads the "
                "text before it (the previous terminal's)" if self.terminal else
                "a `^` or word boundary that may look before its group or pattern starts "
                "(or past an anchor or a lookahead)")
        if pred is None:
            raise RegexError(f"{what} is not supported in constraints", self.pattern, None)
        op, av = pred.item
        if op == C.AT:
            self._fail_at(pred.item, what)
        self._fail_look(av, what.replace("a `^` or word boundary", "a one-character lookbehind"))


def _units(items: list) -> list:
    """`items` cut into units: each item that holds an assertion or a lookaround alone,
    the runs of the others together (one term: their literals make one string)."""
    out, run = [], []
    for item in items:
        if item[0] != TERM_OP and has_look([item], ends=True):
            if run:
                out.append(run)
                run = []
            out.append([item])
        else:
            run.append(item)
    if run:
        out.append(run)
    return out


def _unrolled(body: list, lo: int, hi: int) -> list:
    """body{lo,hi} as items: lo groups, then hi - lo nested optional ones."""
    group = (C.SUBPATTERN, (None, 0, 0, body))
    opt: list = []
    for _ in range(hi - lo):
        opt = [(C.MAX_REPEAT, (0, 1, [group] + opt))]
    return [group] * lo + opt

