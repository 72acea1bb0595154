"""Python `re` syntax -> byte-level term (fsm/core/terms.py), with full-match semantics.

Python's own regex parser reads the pattern, so escapes, classes, flags and error
positions are exactly those of `re`; this module maps the parse tree to terms.
Lookarounds, word boundaries and inner anchors are exact; Unicode property escapes
`\\p{X}` / `\\P{X}` (General_Category) are an extension, written out as classes before
re's parser reads the pattern (python_text). Constructs that are not regular or not
taken (backreferences, conditionals, atomic groups, possessive repeats) raise RegexError
with their position. Supported syntax and limits: docs/regex.md.

    >>> from structgen.fsm.core.terms import TermBuilder
    >>> tb = TermBuilder()
    >>> t = regex_to_term(tb, r"\\d{2}-[a-z]+")
    >>> t.nullable
    False
"""
from __future__ import annotations

import re

from ..core.errors import RegexError
from ..core.terms import Term, TermBuilder
from . import charset, uprops

try:  # Python >= 3.11
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore
    import sre_parse as P  # type: ignore

_SUPPORTED_FLAGS = re.IGNORECASE | re.DOTALL | re.VERBOSE | re.ASCII | re.UNICODE | re.MULTILINE
FLAG_I, FLAG_A, FLAG_S = int(re.IGNORECASE), int(re.ASCII), int(re.DOTALL)  # ints: enum ops are slow
_CATEGORY_RE = {
    C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
    C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S",
}
_UNSUPPORTED = {
    C.GROUPREF: "backreference",
    C.GROUPREF_EXISTS: "conditional group (?(...)...)",
    C.ASSERT: "lookaround assertion",
    C.ASSERT_NOT: "negative lookaround assertion",
}
for _name, _what in (("ATOMIC_GROUP", "atomic group (?>...)"),
                     ("POSSESSIVE_REPEAT", "possessive quantifier")):
    if hasattr(C, _name):
        _UNSUPPORTED[getattr(C, _name)] = _what


def regex_to_term(tb: TermBuilder, pattern: str, flags: int = 0, lookaround: bool = True) -> Term:
    """Parse `pattern` (Python `re` syntax) into a term matching its full matches, as UTF-8.
    `lookaround=False` refuses lookarounds (a grammar's terminal: one would look past it)."""
    if isinstance(pattern, bytes):
        raise RegexError("bytes patterns are not supported; pass a str", repr(pattern), None)
    if flags & ~_SUPPORTED_FLAGS:
        raise RegexError(f"unsupported regex flags {flags & ~_SUPPORTED_FLAGS:#x} "
                         "(LOCALE and DEBUG are not supported)", pattern, None)
    words = _plain_alternation(pattern, flags)
    if words is not None:  # a word list: skip re's parser, dear on long lists
        return tb.alt(tb.literal(w.encode()) for w in words)
    text, edits = python_text(pattern, flags)
    try:
        parsed = P.parse(text, flags)
    except re.error as e:
        raise RegexError(f"invalid regex: {e.msg}", pattern, original_pos(edits, e.pos)) from None
    conv = Converter(tb, pattern, parsed)
    if not lookaround:
        return conv.sequence(parsed, int(parsed.state.flags), True, True)
    return conv.then(parsed, int(parsed.state.flags), True, True, tb.empty)


def python_text(pattern: str, flags: int = 0, ecma_groups: bool = False) -> tuple[str, list]:
    """The text Python's parser reads for `pattern`, and the edits made (for original_pos):
    each Unicode property escape `\\p{X}` / `\\P{X}` (fsm/regex/uprops.py) is written out as
    its code points, `[\\U...-\\U...]` (inside a class, the members alone); with
    `ecma_groups`, ECMA named groups `(?<name>` become Python's `(?P<name>`.

    RegexError (at the escape, in `pattern`) for a property that is not a General_Category
    value, and for a property as a range endpoint (`[a-\\p{L}]`, an error in ECMA-262 too;
    Python would read a range to the last member written out)."""
    if "\\p" not in pattern and "\\P" not in pattern and not (ecma_groups and "(?<" in pattern):
        return pattern, []
    # Verbose comments are copied as they are (a `[` there opens no class); a scoped
    # (?x:...) would need the group structure to know where they are, so we refuse it
    # beside a property rather than misread a class.
    lead = _GLOBAL_FLAGS.match(pattern)
    verbose = bool(flags & re.VERBOSE) or "x" in lead.group()
    scoped = _SCOPED_VERBOSE.search(pattern)
    if scoped and not verbose and ("\\p" in pattern or "\\P" in pattern):
        raise RegexError("Unicode property escapes are not supported beside a scoped verbose "
                         "group (?x:...)", pattern, scoped.start())
    out: list[str] = []
    edits: list[tuple[int, int, int, int]] = []  # (at in text, at in pattern, len in text, len in pattern)
    size = 0  # len("".join(out))

    def put(text: str, i: int, span: int) -> None:
        nonlocal size
        if text != pattern[i:i + span]:
            edits.append((size, i, len(text), span))
        out.append(text)
        size += len(text)

    i, n, in_class, first = 0, len(pattern), False, False
    while i < n:
        c = pattern[i]
        prop = _property_escape(pattern, i)
        if in_class:
            if c == "]" and not first:
                in_class = False
                put(c, i, 1)
                i += 1
                continue
            first = False
            end = prop[0] if prop else _atom_end(pattern, i)
            if pattern.startswith("-", end) and pattern[end + 1:end + 2] not in ("]", ""):
                other = _property_escape(pattern, end + 1)
                if prop or other:
                    raise RegexError("a Unicode property escape cannot be a range endpoint",
                                     pattern, i if prop else end + 1)
                end = _atom_end(pattern, end + 1)
                put(pattern[i:end], i, end - i)
            elif prop:
                put(_members(prop[1]), i, end - i)
            else:
                put(pattern[i:end], i, end - i)
            i = end
        elif prop:
            put(f"[{_members(prop[1])}]", i, prop[0] - i)
            i = prop[0]
        elif c == "\\":
            put(pattern[i:i + 2], i, 2)
            i += 2
        elif c == "#" and verbose:
            end = pattern.find("\n", i)
            end = n if end < 0 else end + 1
            put(pattern[i:end], i, end - i)
            i = end
        elif c == "[":
            in_class = first = True
            end = i + 2 if pattern.startswith("^", i + 1) else i + 1
            put(pattern[i:end], i, end - i)
            i = end
        elif ecma_groups and pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!", ""):
            put("(?", i, 2)  # (the P is an insertion: positions after it move by one)
            put("P", i + 2, 0)
            i += 2
        else:
            put(c, i, 1)
            i += 1
    return "".join(out), edits


_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")
_SCOPED_VERBOSE = re.compile(r"\(\?[aiLmsux]*x[aiLmsux]*(?:-[aiLmsux]*)?:")


def original_pos(edits: list, pos: int | None) -> int | None:
    """A position in python_text's text, in the pattern it was made from (one inside a
    written-out escape: the escape's)."""
    if pos is None:
        return None
    shift = 0
    for at, orig, length, span in edits:
        if pos < at:
            break
        if pos < at + length:
            return orig
        shift = orig + span - (at + length)
    return pos + shift


def _atom_end(pattern: str, i: int) -> int:
    # One class member for range detection: a character or a backslash and the next
    # (a longer escape, \\x41, reads as several members: none is a `-` or a property).
    return i + 2 if pattern[i] == "\\" else i + 1


def _property_escape(pattern: str, i: int):
    """(end, code point ranges) of the `\\p{...}` / `\\P{...}` at i, else None."""
    if not pattern.startswith(("\\p", "\\P"), i):
        return None
    close = pattern.find("}", i) if pattern.startswith("{", i + 2) else -1
    if close < 0:
        raise RegexError(f"bad Unicode property escape: write {pattern[i:i + 2]}{{Name}}", pattern, i)
    try:
        ranges = uprops.property_ranges(pattern[i + 3:close])
    except ValueError as e:
        raise RegexError(str(e), pattern, i) from None
    return close + 1, charset.complement(ranges) if pattern[i + 1] == "P" else ranges


def _members(ranges) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


def caseless_literal(tb: TermBuilder, text: str) -> Term:
    """`text` under re.IGNORECASE: the term regex_to_term(re.escape(text), re.IGNORECASE)
    gives, without re's parser (a grammar's keywords: `"select"i`).

    >>> tb = TermBuilder()
    >>> caseless_literal(tb, "as") is regex_to_term(tb, "as", re.IGNORECASE)
    True
    """
    conv = Converter(tb, text)
    return tb.seq([conv.chars([(C.LITERAL, ord(c))], FLAG_I) for c in text])


# An alternation of plain words, optionally in one group: `(red|green|blue)`. Outside a
# class, a backslash before anything but an ASCII letter, a digit, `\\` or `|` escapes
# that character (those four are left to re's parser, so every `|` here is a bar).
_WORD = r"(?:[^\\.^$*+?{}\[\]|()]|\\[^A-Za-z0-9\\|])*"
_PLAIN_ALTERNATION = re.compile(
    rf"\((?:\?:|\?P<[A-Za-z_][A-Za-z0-9_]*>)?(?P<inner>{_WORD}(?:\|{_WORD})*)\)"
    rf"|(?P<bare>{_WORD}(?:\|{_WORD})*)", re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _plain_alternation(pattern: str, flags: int) -> list[str] | None:
    """The words of a pattern that only alternates plain words, else None."""
    if flags & (re.IGNORECASE | re.VERBOSE):
        return None
    m = _PLAIN_ALTERNATION.fullmatch(pattern)
    if m is None:
        return None
    body = m.group("inner") if m.group("inner") is not None else m.group("bare")
    words = body.split("|")
    if "\\" in body:
        words = [re.sub(r"\\(.)", r"\1", w, flags=re.DOTALL) for w in words]
    if _SURROGATE.search(body):
        return None  # lone surrogates: the general path refuses them
    return words


AT_BEGIN = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
AT_END = (C.AT_END, C.AT_END_STRING)
_BOUNDS = (C.AT_BOUNDARY, C.AT_NON_BOUNDARY)
_LOOKS = (C.ASSERT, C.ASSERT_NOT)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)
TERM_OP = "term"  # an op of ours: a lookbehind and the items it looks at, as (term, shortest width)


def _inner(op, av) -> list:
    """The item lists inside a parse item (a group's, a branch's, a repeat's, a lookaround's)."""
    return ([av[3]] if op == C.SUBPATTERN else av[1] if op == C.BRANCH else [av[2]] if op in _REPEATS
            else [av[1]] if op in _LOOKS else [])


def _has_look(items, behind: bool = True, ends: bool = False) -> bool:
    """Whether `items` hold a lookahead, a lookbehind (with `behind`; `^` is one), a word
    boundary (both) or a `$` (with `ends`: among lookarounds, the end of the input is
    one more thing to look at)."""
    return any(op in _LOOKS and (behind or av[0] == 1)
               or op == C.AT and (av in _BOUNDS or behind and av in AT_BEGIN or ends and av in AT_END)
               or any(_has_look(x, behind, ends) for x in _inner(op, av)) for op, av in items)


def _in_order(items, want) -> list:
    """The parse items (op, av) of a tree for which want(op, av) holds, in the order
    their groups open (the source's)."""
    out = []
    for item in items:
        op, av = item
        if want(op, av):
            out.append(item)
        for x in _inner(op, av):
            out += _in_order(x, want)
    return out


def _own_ats(items) -> None:
    """Give each anchor and word boundary of a parse tree a tuple of its own, in place
    (re's parser shares one `(AT, AT_BOUNDARY)` among all `\\b`), so that an error finds
    its place among them by identity (Converter._fail_at). Idempotent: a tree shared
    by compilations (fsm/json/strings.py's _parse) reads the same after it."""
    for k, (op, av) in enumerate(items):
        if op == C.AT:
            items[k] = (op, av)
        for x in _inner(op, av):
            _own_ats(x)


def _looks_in_order(items) -> list:
    """The lookaround items of a parse tree, in the order their groups open."""
    return [av for _, av in _in_order(items, lambda op, av: op in _LOOKS)]


def _edges(items, tb: TermBuilder) -> tuple[int, int]:
    """The first and last places of `items` that may hold text: anchors and a lead item
    of the empty text (_search's, where the pattern begins with `^`) hold none, so the
    items around them are still at the start or the end."""
    def blank(item) -> bool:
        return item[0] == C.AT or item[0] == TERM_OP and item[1][0] is tb.empty
    first, last = 0, len(items) - 1
    while first <= last and blank(items[first]):
        first += 1
    if first > last:
        return len(items), -1
    while blank(items[last]):
        last -= 1
    return first, last


def _may_look(pattern: str) -> bool:
    """Whether a pattern may hold a lookaround, a word boundary or an anchor other than a
    leading `^` / `\\A` or a trailing `$` / `\\Z` (a cheap test of its text first)."""
    if any(x in pattern for x in ("(?=", "(?!", "(?<", "\\b", "\\B")):
        return True
    if not ("^" in pattern[1:] or "$" in pattern[:-1] or "\\A" in pattern or "\\Z" in pattern):
        return False
    ends = ((0, "^"), (0, "\\"), (len(pattern) - 1, "$"), (len(pattern) - 2, "\\"))
    return any((i, pattern[i]) not in ends for i in _construct_positions(pattern).get("anchor", ()))


class Converter:
    MAX_LOOK_REPEAT = 8  # a repeat with a lookahead inside is unrolled: at most this many

    def __init__(self, tb: TermBuilder, pattern: str, root=()):
        self.tb, self.pattern = tb, pattern
        self.root = root  # the whole parse tree (for a lookaround's position)
        self.looks = _may_look(pattern)  # (else the tree holds nothing that looks around)
        if self.looks:
            _own_ats(root)
        self._seen: dict[str, int] = {}

    def visit(self, kind: str) -> int:
        n = self._seen.get(kind, 0)
        self._seen[kind] = n + 1
        return n

    def fail(self, what: str, kind: str, n: int | None = None) -> None:
        # The parse tree keeps no offsets: find the n-th occurrence of this kind of
        # construct in the source (the tree is walked in source order).
        if n is None:
            n = self.visit(kind)
        positions = _construct_positions(self.pattern).get(kind, [])
        pos = positions[n] if n < len(positions) else (positions[0] if positions else None)
        raise RegexError(f"{what} is not supported in constraints", self.pattern, pos)

    def sequence(self, items, flags: int, at_start: bool, at_end: bool) -> Term:
        items = list(items)
        # Item k is "at the start" when only anchors precede it, "at the end" when
        # only anchors follow it.
        first, last = _edges(items, self.tb)
        terms, run = [], []  # runs of plain literals become one byte string
        for k, (op, av) in enumerate(items):
            if op == C.LITERAL and not flags & FLAG_I and not 0xD800 <= av <= 0xDFFF:
                run.append(chr(av))
                continue
            if run:
                terms.append(self.literal_run("".join(run)))
                run = []
            terms.append(self.node(op, av, flags, at_start and k <= first, at_end and k >= last))
        if run:
            terms.append(self.literal_run("".join(run)))
        return self.tb.seq(terms)

    def literal_run(self, text: str) -> Term:
        """Consecutive plain literal characters (subclasses change their encoding)."""
        return self.tb.literal(text.encode())

    def any_text(self) -> Term:
        """Every text (what a lookahead may see after its match; subclasses change the encoding)."""
        return self.tb.star(charset.to_term(self.tb, charset.normalize(((0, charset.MAX_CP),))))

    def end_text(self, flags: int, anchor) -> Term:
        """What may follow an end anchor: nothing, or for Python's `$` a newline (it
        matches before a final one; with MULTILINE, before any)."""
        tb = self.tb
        if anchor == C.AT_END_STRING:
            return tb.empty
        nl = tb.literal(b"\n")
        return tb.alt([tb.empty, tb.concat(nl, self.any_text()) if flags & re.MULTILINE else nl])

    def then(self, items, flags: int, at_start: bool, at_end: bool, rest: Term) -> Term:
        """`items` followed by `rest`, the texts that may follow them to the end of the
        input: what a lookahead among them sees after its place. Without lookarounds,
        sequence's term (its anchors: only at the ends)."""
        if not self.looks or not _has_look(items, ends=True):
            return self.tb.concat(self.sequence(items, flags, at_start, at_end), rest)
        return self._then(items, flags, at_start, at_end, rest)

    def _then(self, items, flags: int, at_start: bool, at_end: bool, rest: Term) -> Term:
        """then() in a pattern with lookarounds: the texts after a lookahead, or a `$`
        (the end of the input), are built first (right to left), through groups, branches
        and short repeats; a lookbehind first joins the items it looks at (_behind)."""
        tb = self.tb
        if not _has_look(items, ends=True):
            return tb.concat(self.sequence(items, flags, at_start, at_end), rest)
        items = self._behind(list(items), flags, at_start)
        first, last = _edges(items, tb)
        end = len(items)
        for i in range(len(items) - 1, -1, -1):
            if not _has_look(items[i:i + 1], ends=True):
                continue
            rest = tb.concat(self.sequence(items[i + 1:end], flags, at_start and i + 1 <= first,
                                           at_end and end - 1 >= last), rest)
            rest = self._ahead(items[i], flags, at_start and i <= first, at_end and i >= last, rest)
            end = i
        return tb.concat(self.sequence(items[:end], flags, at_start, at_end and end - 1 >= last), rest)

    def _ahead(self, item, flags: int, at_start: bool, at_end: bool, rest: Term) -> Term:
        """One item that holds a lookahead, followed by `rest`."""
        tb = self.tb
        op, av = item
        if op == C.AT:  # a `$`
            return rest if rest is tb.empty else tb.intersect([rest, self.end_text(flags, av)])
        if op in _LOOKS:  # (a lookbehind: _behind took it)
            seen = self._then(av[1], flags, False, False, self.any_text())
            return tb.intersect([rest, seen if op == C.ASSERT else tb.complement(seen)])
        if op == C.SUBPATTERN:
            _group, add, delete, sub = av
            return self._then(sub, (flags | int(add)) & ~int(delete), at_start, at_end, rest)
        if op == C.BRANCH:
            return tb.alt(self._then(b, flags, at_start, at_end, rest) for b in av[1])
        lo, hi, sub = av  # a repeat
        if not _has_look(sub, behind=False, ends=True):  # lookbehinds only: they look within each item
            once = hi == 1  # (`(?:^a)?`: its one item is where the repeat is)
            body = self._then(sub, flags, at_start and once, False, tb.empty)
            return tb.concat(tb.repeat(body, lo, None if hi == C.MAXREPEAT else hi), rest)
        if rest is tb.empty and (t := self._tempered(sub, flags, lo, hi)) is not None:
            return t
        folded = self._folded(sub, flags)
        if not _has_look(folded, behind=False, ends=True):  # (its lookaheads each saw one character)
            body = self._then(folded, flags, at_start and hi == 1, False, tb.empty)
            return tb.concat(tb.repeat(body, lo, None if hi == C.MAXREPEAT else hi), rest)
        if hi == C.MAXREPEAT or hi > self.MAX_LOOK_REPEAT:
            what = f"inside a repeat of more than {self.MAX_LOOK_REPEAT}"
            looks = [x for x in _looks_in_order(sub) if x[0] == 1]
            if looks:
                self._fail_look(looks[0], "a lookahead " + what)
            self._fail_at(next(x for x in _in_order(sub, lambda op, av: op == C.AT)),
                          "a word boundary or `$` " + what)
        more = rest  # at most hi - lo more items, then lo items before them
        for _ in range(hi - lo):
            more = tb.alt([rest, self._then(sub, flags, False, False, more)])
        for _ in range(lo):
            more = self._then(sub, flags, False, False, more)
        return more

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
                out.append((op, (*av[:3], self._folded(av[3], (flags | int(av[1])) & ~int(av[2])))))
            elif op == C.BRANCH:
                out.append((op, (av[0], [self._folded(b, flags) for b in av[1]])))
            elif op in _REPEATS:
                out.append((op, (av[0], av[1], self._folded(av[2], flags))))
            elif op in _LOOKS and av[0] == 1 and k + 1 < len(items) and (x := self._one_char(av[1], flags)) \
                    is not None and (joined := self._joined(items[k + 1], flags, x, op == C.ASSERT)) is not None:
                out += joined
                k += 1
            else:
                out.append((op, av))
            k += 1
        return out

    def _one_char(self, items, flags: int) -> Term | None:
        """The term of `items` where they are one item of one character (a literal, a
        class, `.`), else None."""
        items = list(items)
        if len(items) != 1 or items[0][0] not in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
            return None
        return self.node(*items[0], flags, False, False)

    def _joined(self, item, flags: int, look: Term, holds: bool) -> list | None:
        """The items for `item` after a one-character lookahead `look` (_folded): its
        first character meets the lookahead. None where item is no character, nor a
        repeat of one taken at least once."""
        op, av = item
        d, after = self._one_char([item], flags), []
        if d is None and op in _REPEATS and av[0] >= 1 and (d := self._one_char(av[2], flags)) is not None:
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
        if P.SubPattern(self.root.state, list(sub)).getwidth() != (1, 1):
            return None
        text = self.any_text()  # (a star: its item is one character)
        begins = self._then(sub, flags, False, False, text)
        some = tb.intersect([text, tb.complement(tb.empty)])
        bad = tb.concat(text, tb.intersect([some, tb.complement(begins)]))
        return tb.intersect([tb.repeat(text.args[0], lo, None if hi == C.MAXREPEAT else hi), tb.complement(bad)])

    def _behind(self, items: list, flags: int, at_start: bool) -> list:
        """`items` where each lookbehind and the items before it that it looks at are one
        (TERM_OP, (term, shortest width)) item: the fewest items whose shortest match is
        as long as the lookbehind's (fixed) width, so that all it sees lies in them, or
        (`at_start`: the items begin the input) all of them."""
        tb = self.tb
        out: list = []
        for item in items:
            op, av = item
            at = op == C.AT and (av in _BOUNDS or av in AT_BEGIN)  # a `^` or a word boundary: one character back
            if not at and (op not in _LOOKS or av[0] != -1):
                out.append(item)
                continue
            if not at and _has_look(av[1], ends=True):  # (what it would see lies before the input's end)
                self._fail_look(av, "a lookaround or `$` inside a lookbehind")
            need = 1 if at else av[1].getwidth()[0]
            i, width = len(out), 0
            # (back over items whose own lookbehinds look within what is joined: `(?:^|-)\b`)
            while width < need and i > 0 and out[i - 1][0] != C.AT and not _has_look(out[i - 1:i], ends=True,
                                                                                     behind=False):
                i -= 1
                x = out[i]
                width += x[1][1] if x[0] == TERM_OP else P.SubPattern(self.root.state, [x]).getwidth()[0]
            if width < need and not (i == 0 and at_start):
                what = ("a lookbehind that may look before its group or pattern starts "
                        "(or past an anchor or a lookahead)")
                if at:
                    self._fail_at(item, what.replace("a lookbehind", "a `^` or word boundary"))
                self._fail_look(av, what)
            kept = self._then(out[i:], flags, at_start and i == 0, False, tb.empty)
            if op in _LOOKS:
                seen = tb.concat(self.any_text(), self._then(av[1], flags, False, False, tb.empty))
                out[i:] = [(TERM_OP, (tb.intersect([kept, seen if op == C.ASSERT else tb.complement(seen)]), width))]
            elif av in AT_BEGIN:  # nothing before it (MULTILINE's `^`: or a newline)
                if flags & re.MULTILINE and av == C.AT_BEGINNING:
                    kept = tb.intersect([kept, tb.alt([tb.empty, tb.concat(self.any_text(), tb.literal(b"\n"))])])
                else:
                    kept = tb.empty if kept.nullable else tb.nothing
                out[i:] = [(TERM_OP, (kept, width))]
            else:  # \b: a word character on one side only (\B: on both or neither)
                word = [(C.IN, [(C.CATEGORY, C.CATEGORY_WORD)])]
                ends_word = tb.concat(self.any_text(), self.sequence(word, flags, False, False))
                sides = [(C.ASSERT_NOT, (1, word)), (C.ASSERT, (1, word))]
                if av == C.AT_NON_BOUNDARY:
                    sides.reverse()
                out[i:] = [(C.BRANCH, (None, [[(TERM_OP, (tb.intersect([kept, ends_word]), width)), sides[0]],
                                              [(TERM_OP, (tb.intersect([kept, tb.complement(ends_word)]), width)),
                                               sides[1]]]))]
        return out

    def _fail_at(self, item, what: str) -> None:
        """RegexError at the anchor or word boundary `item` (its place among the pattern's)."""
        kind = "boundary" if item[1] in _BOUNDS else "anchor"
        same = lambda op, av: op == C.AT and (av in _BOUNDS) == (kind == "boundary")  # noqa: E731
        order = [id(x) for x in _in_order(self.root, same)]  # (item is the tree's own tuple)
        self.fail(what, kind, order.index(id(item)))

    def _fail_look(self, av, what: str) -> None:
        """RegexError at the lookaround `av` (its place among the pattern's lookarounds)."""
        pos = _construct_positions(self.pattern)
        at = sorted(pos.get(_UNSUPPORTED[C.ASSERT], []) + pos.get(_UNSUPPORTED[C.ASSERT_NOT], []))
        order = [id(x) for x in _looks_in_order(self.root)]
        n = order.index(id(av)) if id(av) in order else -1
        raise RegexError(f"{what} is not supported in constraints", self.pattern,
                         at[n] if 0 <= n < len(at) else None)

    def node(self, op, av, flags: int, at_start: bool, at_end: bool) -> Term:
        tb = self.tb
        if op == TERM_OP:
            return av[0]
        if op == C.LITERAL:
            if flags & FLAG_I:
                return self.chars([(C.LITERAL, av)], flags)
            return tb.literal(chr(av).encode("utf-8", "surrogatepass")) if not 0xD800 <= av <= 0xDFFF else tb.nothing
        if op == C.NOT_LITERAL:
            return self.chars([(C.NEGATE, None), (C.LITERAL, av)], flags)
        if op == C.ANY:
            ranges = ((0, charset.MAX_CP),) if flags & FLAG_S else charset.complement(((10, 10),))
            return charset.to_term(tb, charset.normalize(ranges))
        if op == C.IN:
            return self.chars(av, flags)
        if op == C.BRANCH:
            return tb.alt(self.sequence(b, flags, at_start, at_end) for b in av[1])
        if op == C.SUBPATTERN:
            _group, add, delete, sub = av
            return self.sequence(sub, (flags | int(add)) & ~int(delete), at_start, at_end)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):  # lazy or greedy: same full matches
            lo, hi, sub = av
            once = hi == 1  # (`(?:^a)?`: its one item is where the repeat is)
            body = self.sequence(sub, flags, at_start and once, at_end and once)
            return tb.repeat(body, lo, None if hi == C.MAXREPEAT else hi)
        if op == C.AT:
            if av in _BOUNDS:  # (then() takes a pattern with one)
                self.fail("word boundary (\\b, \\B) in a grammar terminal", "boundary")
            n = self.visit("anchor")
            if av in AT_BEGIN and at_start:
                return tb.empty
            if av in AT_END and at_end:
                return tb.empty
            self.fail("an anchor (^, $, \\A, \\Z) that is not at the start or end of the pattern",
                      "anchor", n)
        if op in _UNSUPPORTED:
            self.fail(_UNSUPPORTED[op], _UNSUPPORTED[op])
        self.fail(f"regex construct {op}", str(op))
        raise AssertionError  # unreachable: fail raises

    def chars(self, items, flags: int) -> Term:
        """One character of a class given as sre items (IN's list)."""
        rel = flags & (FLAG_I | FLAG_A)
        fast = _fast_class(items, rel)
        if fast is not None:
            return charset.to_term(self.tb, fast)
        # Unicode case folding beyond ASCII: ask re itself, once per class (cached).
        return charset.to_term(self.tb, charset.by_python_re(class_regex(items), rel))


# Code points that an ASCII letter matches under re.IGNORECASE (Unicode), beside its
# two ASCII cases (checked against re in tests/fsm/grammar/test_grammar.py).
_CASE_EXTRA = {ord("i"): (0x130, 0x131), ord("k"): (0x212A,), ord("s"): (0x17F,)}


def _fast_class(items, rel: int):
    """Ranges of a class of literals, ranges and \\d \\w \\s categories, possibly negated,
    from tables; under IGNORECASE only when all members are ASCII letters/literals.
    None when re must decide."""
    negate = bool(items) and items[0][0] == C.NEGATE
    body = items[1:] if negate else items
    if not body or not all(o in (C.LITERAL, C.RANGE, C.CATEGORY) for o, _ in body):
        return None
    if rel & FLAG_I and any(o == C.CATEGORY for o, _ in body):
        return None
    ranges = [(a, a) if o == C.LITERAL else a for o, a in body if o != C.CATEGORY]
    for o, a in body:
        if o == C.CATEGORY:
            ranges.extend(charset.category(_CATEGORY_RE[a], bool(rel & FLAG_A)))
    if rel & FLAG_I:
        if any(hi > 0x7F for _, hi in ranges):
            return None
        extra = []
        for lo, hi in ranges:
            for c in range(lo, hi + 1):
                ch = chr(c)
                if ch.isalpha():
                    lower = ord(ch.lower())
                    extra.append((ord(ch.swapcase()), ord(ch.swapcase())))
                    if not rel & FLAG_A:
                        extra.extend((x, x) for x in _CASE_EXTRA.get(lower, ()))
        ranges += extra
    out = charset.normalize(ranges)
    return charset.complement(out) if negate else out


def class_regex(items) -> str:
    parts = []
    for op, av in items:
        if op == C.NEGATE:
            parts.insert(0, "^")
        elif op == C.LITERAL:
            parts.append(f"\\U{av:08x}")
        elif op == C.RANGE:
            parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
        elif op == C.CATEGORY:
            parts.append(_CATEGORY_RE[av])
        else:  # pragma: no cover - sre emits nothing else inside a class
            raise AssertionError(op)
    return "[" + "".join(parts) + "]"


def _construct_positions(pattern: str) -> dict[str, list[int]]:
    """Source offsets of the constructs we refuse, in order, by kind."""
    out: dict[str, list[int]] = {}
    add = lambda kind, pos: out.setdefault(kind, []).append(pos)  # noqa: E731
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if pattern.startswith(("\\p{", "\\P{"), i):  # (its name may hold no construct)
            i = pattern.find("}", i) + 1 or n
            continue
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if not in_class:
                if d in "bB":
                    add("boundary", i)
                elif d in "AZ":
                    add("anchor", i)
                elif d.isdigit() and d != "0":
                    add("backreference", i)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is a literal
                i += 1
            continue
        if c in "^$":
            add("anchor", i)
        elif pattern.startswith("(?P=", i):
            add("backreference", i)
        elif pattern.startswith("(?=", i) or pattern.startswith("(?<=", i):
            add("lookaround assertion", i)
        elif pattern.startswith("(?!", i) or pattern.startswith("(?<!", i):
            add("negative lookaround assertion", i)
        elif pattern.startswith("(?(", i):
            add("conditional group (?(...)...)", i)
        elif pattern.startswith("(?>", i):
            add("atomic group (?>...)", i)
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            add("possessive quantifier", i + 1)
        i += 1
    return out
