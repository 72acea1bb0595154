"""Python's regex parse trees (`re._parser`): the ops, and the walks the converter makes
over them (what an item holds, its shortest width, its first and last characters).

Items are `(op, av)` pairs as `re._parser` makes them, plus two ops of ours, made while
converting: TERM_OP, an item given as a term (lookbehinds joined with the items they
look at, a JSON search's leading text), and CLASS_OP, "the text from here starts with a
character of these context classes" (fsm/regex/context.py).
"""
from __future__ import annotations

try:  # Python >= 3.11
    import re._constants as C
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore

AT_BEGIN = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
AT_END = (C.AT_END, C.AT_END_STRING)
BOUNDS = (C.AT_BOUNDARY, C.AT_NON_BOUNDARY)
LOOKS = (C.ASSERT, C.ASSERT_NOT)
REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)
CHARS = (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY)  # the items of one character
TERM_OP = "term"    # (term, shortest width in characters)
CLASS_OP = "class"  # (frozenset of right context atoms): zero width, looks ahead one character


def inner(op, av) -> list:
    """The item lists inside a parse item (a group's, a branch's, a repeat's, a lookaround's)."""
    return ([av[3]] if op == C.SUBPATTERN else av[1] if op == C.BRANCH else [av[2]] if op in REPEATS
            else [av[1]] if op in LOOKS else [])


def has_look(items, behind: bool = True, ends: bool = False) -> bool:
    """Whether `items` hold a lookahead, a lookbehind (with `behind`; `^` is one), a word
    boundary (both) or a `$` (with `ends`: among lookarounds, the end of the input is
    one more thing to look at)."""
    return any(op in LOOKS and (behind or av[0] == 1) or op == CLASS_OP
               or op == C.AT and (av in BOUNDS or behind and av in AT_BEGIN or ends and av in AT_END)
               or any(has_look(x, behind, ends) for x in inner(op, av)) for op, av in items)


def in_order(items, want) -> list:
    """The parse items (op, av) of a tree for which want(op, av) holds, in the order
    their groups open (the source's)."""
    out = []
    for item in items:
        op, av = item
        if want(op, av):
            out.append(item)
        for x in inner(op, av):
            out += in_order(x, want)
    return out


def own_ats(items) -> None:
    """Give each anchor and word boundary of a parse tree a tuple of its own, in place
    (re's parser shares one `(AT, AT_BOUNDARY)` among all `\\b`), so that an error, and a
    context class, finds its item by identity. Idempotent: a tree shared by
    compilations (fsm/json/strings.py's _parse) reads the same after it."""
    for k, (op, av) in enumerate(items):
        if op == C.AT:
            items[k] = (op, av)
        for x in inner(op, av):
            own_ats(x)


def looks_in_order(items) -> list:
    """The lookaround items' arguments of a parse tree, in the order their groups open."""
    return [av for _, av in in_order(items, lambda op, av: op in LOOKS)]


def min_width(items) -> int:
    """The fewest characters `items` match (re's getwidth, which knows none of our ops)."""
    return widths(items)[0]


def widths(items) -> tuple[int, int | None]:
    """The fewest and the most characters `items` match (None: no bound, or a term's)."""
    lo, hi = 0, 0
    for op, av in items:
        if op in CHARS:
            a, b = 1, 1
        elif op == TERM_OP:
            a, b = av[1], None
        elif op in (C.SUBPATTERN, C.BRANCH):
            ws = [widths(x) for x in inner(op, av)]
            a, b = min(w[0] for w in ws), None if any(w[1] is None for w in ws) else max(w[1] for w in ws)
        elif op in REPEATS:
            w = widths(av[2])
            a = av[0] * w[0]
            b = 0 if av[1] == 0 or w[1] == 0 else None if w[1] is None or av[1] == C.MAXREPEAT else av[1] * w[1]
        else:  # (assertions, lookarounds: no width)
            a, b = 0, 0
        lo += a
        hi = None if hi is None or b is None else hi + b
    return lo, hi


def flags_in(op, av, flags: int) -> int:
    """The flags inside a group (its own: `(?i:...)`), else `flags`."""
    return (flags | int(av[1])) & ~int(av[2]) if op == C.SUBPATTERN else flags


def edge_chars(items, flags: int, ranges_of, last: bool = False):
    """The characters that may begin (or, with `last`, end) a match of `items`, as a
    list of code point range sets (`ranges_of(op, av, flags)` of the one-character
    items there), and whether the items match the empty text; None for the list
    where a term (TERM_OP) may stand there."""
    seq = reversed(items) if last else items
    out: list = []
    for op, av in seq:
        if op in CHARS:
            out.append(ranges_of(op, av, flags))
            return out, False
        if op == TERM_OP:
            return None, min_width([(op, av)]) == 0
        if op in (C.SUBPATTERN, C.BRANCH) or op in REPEATS and av[1] > 0:
            empty = False
            for x in inner(op, av):
                got, e = edge_chars(x, flags_in(op, av, flags), ranges_of, last)
                if got is None:
                    return None, False
                out += got
                empty = empty or e
            if not (empty or op in REPEATS and av[0] == 0):
                return out, False
    return out, True
