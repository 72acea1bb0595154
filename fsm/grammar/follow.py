"""Terminals whose lexemes read the character after them: a `\\b`, `\\Z`, `(?m)$` or a
one-character lookahead at their end (`/if\\b/`, `/\\w+(?=\\()/`).

Such a terminal is lexed as variants, one per class of the next character
(fsm/regex/syntax.py's terminal_terms): each variant is a terminal of its own to the
lexer and the same one to the parser (its LR column is copied: `copy_columns`). After a
variant, the next lexeme starts in the variant's *family*: every terminal cut to its
lexemes that begin with a character of that class (the terminal itself where all or
none of them do, else a copy that is cut), and the output may end right after it only
where the class holds the end of the text. So the character after a lexeme is decided
where the next lexeme starts, exactly. Design: docs/grammars.md, "Terminals".
"""
from __future__ import annotations

from ..core.terms import Term, TermBuilder
from ..regex import charset


class Families:
    """Which terminals start after which: `after[i]` the family the lexemes after
    terminal i start in (0: every terminal, as written), `members[f]` the terminals of
    family f, `may_end[i]` whether the output may end right after terminal i."""

    def __init__(self, n: int):
        self.after, self.may_end = [0] * n, [True] * n
        self.members = [frozenset(range(n))]

    @property
    def plain(self) -> bool:
        """No terminal reads the character after it: one family, every terminal."""
        return len(self.members) == 1


def expand(tb: TermBuilder, names: list, terms: list, ignored: list, variants: dict):
    """The terminal lists with each variant and each cut copy appended: (names, terms,
    ignored, column: the parser's terminal of each, Families). `variants[i]` is terminal
    i's [(lexemes, None or (next characters, may end))], the first replacing terms[i]."""
    names, terms, ignored = list(names), list(terms), list(ignored)
    column = list(range(len(terms)))
    needs: dict = {}  # terminal -> (code point set, may end)
    for i, vs in variants.items():
        for k, (t, need) in enumerate(vs):
            j = i if k == 0 else len(terms)
            if k:
                names.append(names[i])
                terms.append(t)
                ignored.append(ignored[i])
                column.append(i)
            terms[j] = t
            needs[j] = need
    fam = Families(len(terms))
    ids: dict = {}  # need -> family
    for j, need in needs.items():
        if need is not None:
            fam.after[j] = ids.setdefault(need, len(ids) + 1)
            fam.may_end[j] = need[1]
    base = len(terms)
    for ranges, _end in sorted(ids, key=ids.get):  # (family 1, 2, ...)
        head = tb.concat(charset.to_term(tb, ranges), tb.anything)
        members = []
        for j in range(base):
            first = _first_chars(tb, terms[j])
            if _within(first, ranges):
                members.append(j)
            elif _meets(first, ranges):  # some lexemes begin in the class, some do not: a cut copy
                members.append(len(terms))
                names.append(names[j])
                terms.append(tb.intersect([terms[j], head]))
                ignored.append(ignored[j])
                column.append(column[j])
                fam.after.append(fam.after[j])
                fam.may_end.append(fam.may_end[j])
        fam.members.append(frozenset(members))
    fam.members[0] = frozenset(range(base))
    return names, terms, ignored, column, fam


def copy_columns(action: dict, column: list) -> None:
    """Give each variant and cut copy the LR actions of the terminal it stands for."""
    for acts in action.values():
        for j, c in enumerate(column):
            if c != j and c in acts:
                acts[j] = acts[c]


def _first_chars(tb: TermBuilder, t: Term) -> tuple:
    """The code points t's texts may begin with, a superset: each first byte's own
    characters (all of them for a lead byte; every byte for an intersection)."""
    bits, out = tb.first(t), []
    for b in range(256):
        if bits >> b & 1:
            if b < 0x80:
                out.append((b, b))
            elif 0xC2 <= b < 0xF5:
                n = 1 if b < 0xE0 else 2 if b < 0xF0 else 3
                lo = (b & (0x1F, 0x0F, 0x07)[n - 1]) << (6 * n)
                out.append((lo, lo + (1 << (6 * n)) - 1))
    return charset.normalize(out)


def _within(a, b) -> bool:
    """Whether range set a lies in range set b."""
    return all(any(lo >= x and hi <= y for x, y in b) for lo, hi in a)


def _meets(a, b) -> bool:
    return any(lo <= y and x <= hi for lo, hi in a for x, y in b)
