"""JSON string contents as byte-level terms, from the language of their *decoded* values.

Every character has exactly one encoding (the one `json.dumps(ensure_ascii=False)`
writes), so a regular language of decoded strings maps to the byte language of their
encodings by swapping each character class for its members' encodings, on Python's parse
tree of the regex (the regex front end's converter, other leaves). Intersection and
complement then agree with those of the decoded languages: `pattern` (ECMA-262 search
semantics), minLength/maxLength and `format` compose exactly. Details:
docs/json-schema.md, "Strings and pattern".
"""
from __future__ import annotations

import functools

from ..core.terms import BYTES, REPEAT, STR, Term, TermBuilder
from ..regex import charset
from ..regex.syntax import (
    AT_BEGIN,
    AT_END,
    FLAG_I,
    FLAG_S,
    TERM_OP,
    C,
    Converter,
    P,
    RegexError,
    original_pos,
    python_text,
)

_SHORT = {0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x22: b'\\"', 0x5C: b"\\\\"}
_SPECIAL = charset.normalize([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
ALL = ((0, charset.MAX_CP),)
_RAW = charset.complement(_SPECIAL)
_NON_ASCII = charset.normalize([(0x80, charset.MAX_CP)])
ECMA_SPACE = charset.normalize([(9, 13), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                                (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                                (0xFEFF, 0xFEFF)])
ECMA_DIGIT = ((0x30, 0x39),)
ECMA_WORD = charset.normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
LINE_TERMINATORS = charset.normalize([(10, 10), (13, 13), (0x2028, 0x2029)])
_CATEGORY = {
    C.CATEGORY_DIGIT: (ECMA_DIGIT, False), C.CATEGORY_NOT_DIGIT: (ECMA_DIGIT, True),
    C.CATEGORY_WORD: (ECMA_WORD, False), C.CATEGORY_NOT_WORD: (ECMA_WORD, True),
    C.CATEGORY_SPACE: (ECMA_SPACE, False), C.CATEGORY_NOT_SPACE: (ECMA_SPACE, True),
}


_PLAIN = charset.normalize([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)])  # ASCII written as itself


def _plain(cp: int) -> bool:
    return 0x20 <= cp <= 0x7F and cp != 0x22 and cp != 0x5C


def _plain_range(lo: int, hi: int) -> bool:
    """Whether every code point of lo..hi is _plain (its one byte, unescaped)."""
    return 0x20 <= lo and hi <= 0x7F and not lo <= 0x22 <= hi and not lo <= 0x5C <= hi


def encode_char(cp: int) -> bytes:
    if cp in _SHORT:
        return _SHORT[cp]
    if cp < 0x20:
        return b"\\u%04x" % cp
    return chr(cp).encode("utf-8")


def string_text(s: str) -> bytes:
    """The JSON text of the string s (canonical escapes)."""
    return b'"' + encode_string(s) + b'"'


def encode_string(s: str) -> bytes:
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return s.encode()  # nothing to escape: the usual key or enum value
    return b"".join(encode_char(ord(c)) for c in s)


def _rests_after(rests: tuple, c: int) -> tuple:
    """The rests (of a key trie node, StringTerms.not_in) that go on through character c,
    without it: the child node's rests."""
    return tuple(sorted({r[1:] for r in rests if r and ord(r[0]) == c}))


def _intersect_ranges(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


# the export of StringTerms.any_char (every JSON string character: ~600 terms to build)
_ANY_CHAR: dict[str, tuple] = {}


class StringTerms:
    """Per-builder cache of JSON string terms."""

    def __init__(self, tb: TermBuilder):
        self.tb = tb
        self._chars: dict = {}
        self._non_ascii = None
        self._escapes = None  # the 34 escaped characters' texts, as one alternation
        self._except: dict[tuple, Term] = {}  # letters -> _plain_except
        self._wide = None  # _not_in_term's branch for non-ASCII and escaped characters
        self._searches: dict[str, Term] = {}  # pattern -> search(pattern)
        self.quote = tb.literal(b'"')
        self.char_ids: set[int] = set()  # the terms `char` made: each member is one character
        prog = _ANY_CHAR.get("program")
        if prog is None:  # the first builder in the process builds it; all take it lazily (one
            # term whoever built it: the vocabulary's tables of a string's tokens are keyed by it)
            prog = _ANY_CHAR["program"] = tb.export(self.char(ALL))
        self.any_char = self._chars[charset.normalize(ALL)] = tb.lazy("json:any_char", prog)
        self.char_ids.add(self.any_char.id)
        tb.char_items.add(self.any_char.id)  # (the items of every length bound: `length`)
        self.any_chars = tb.star(self.any_char)
        self.any_string = tb.seq([self.quote, self.any_chars, self.quote])

    def char(self, ranges) -> Term:
        """One encoded character from the code point set `ranges`.

        Split at 0x80: the ASCII part is a small byte class; a set holding every non-ASCII
        code point (negated classes, "any but these ASCII characters") reuses one shared
        term instead of re-encoding a million code points, and one holding every escaped
        character reuses one alternation of their escapes."""
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and _plain(ranges[0][0]):
            t = self.tb.byte_range(ranges[0][0], ranges[0][0])  # one letter of a key
            self.char_ids.add(t.id)
            return t
        ranges = charset.normalize(ranges)
        t = self._chars.get(ranges)
        if t is None:
            tb = self.tb
            if all(_plain_range(lo, hi) for lo, hi in ranges):  # ([0-9], [A-Za-z]: their bytes as they are)
                t = tb.alt(tb.byte_range(lo, hi) for lo, hi in ranges)
            else:
                t = tb.alt(self._encoded(ranges))
                # (its structure is a function of the code points: what masks read off it is
                # kept by them, apart from charset.to_term's raw classes)
                tb.char_ranges.setdefault(t.id, ("json", ranges))
            self._chars[ranges] = t
            self.char_ids.add(t.id)
        return t

    def _encoded(self, ranges) -> list:
        """char's alternatives for a normalized set that is not plain ASCII: the raw
        characters (ASCII, then non-ASCII) and the escaped ones."""
        tb = self.tb
        raw = _intersect_ranges(ranges, _RAW)
        parts = []
        ascii_raw = _intersect_ranges(raw, ((0, 0x7F),))
        if ascii_raw:
            parts.append(charset.to_term(tb, ascii_raw))
        high = _intersect_ranges(raw, _NON_ASCII)
        if high == _NON_ASCII:
            if self._non_ascii is None:
                self._non_ascii = charset.to_term(tb, _NON_ASCII)
            parts.append(self._non_ascii)
        elif high:
            parts.append(charset.to_term(tb, high))
        special = _intersect_ranges(ranges, _SPECIAL)
        if special == _SPECIAL:  # every escape (a key's "not this letter"): one shared term
            if self._escapes is None:
                self._escapes = tb.alt(tb.literal(encode_char(c)) for lo, hi in _SPECIAL
                                       for c in range(lo, hi + 1))
            parts.append(self._escapes)
        else:
            for lo, hi in special:
                parts.extend(tb.literal(encode_char(c)) for c in range(lo, hi + 1))
        return parts

    def not_in(self, words) -> Term:
        """Contents of strings (decoded) that are none of `words`; no complement needed:
        a trie whose every node also takes any other character, then anything. Each
        node is a deferred term (TermBuilder.deferred), built when a derivative first
        reaches it: a key is a few nodes deep, while the whole trie of an object's own
        keys is hundreds (most of a large schema's compile time). A derivative by a
        plain ASCII byte does not build the node's body either (_not_in_step): a token
        of a key steps through its nodes without building them."""
        return self._not_in_node(tuple(sorted(set(words))))

    def _not_in_node(self, rests: tuple) -> Term:
        """The trie node whose excluded rests (of the words through it) are `rests`."""
        tb = self.tb
        t = tb.deferred(("json:not_in", rests), lambda: self._not_in_term(rests), "" not in rests,
                        lambda b: self._not_in_step(rests, b))
        if t.id not in tb.cofinite:
            tb.cofinite[t.id] = (tuple(encode_string(r) for r in rests), self.any_chars)
        return t

    def _not_in_term(self, rests: tuple) -> Term:
        tb = self.tb
        kids = sorted({ord(r[0]) for r in rests if r})
        parts = [] if "" in rests else [tb.empty]
        for c in kids:
            parts.append(tb.concat(self.char(((c, c),)), self._not_in_node(_rests_after(rests, c))))
        if all(_plain(c) for c in kids):
            if self._wide is None:  # a non-ASCII or escaped character, then anything: no
                # usual key's letter, so one shared branch, not ~50 alternatives per node
                self._wide = tb.concat(self.char(_SPECIAL + _NON_ASCII), self.any_chars)
            parts += [self._plain_except(tuple(kids)), self._wide]
        else:
            rest = charset.complement(charset.normalize([(c, c) for c in kids]))
            if rest:
                parts.append(tb.concat(self.char(rest), self.any_chars))
        return tb.alt(parts)

    def _not_in_step(self, rests: tuple, b: int) -> Term | None:
        """The derivative of node `rests` by a plain ASCII byte b, without its body
        (_not_in_term is dear, and a key's walk meets a new node per byte): the
        node of the rests through b, or where none goes on, anything. None for other
        bytes (a key's non-ASCII or escaped character: the body decides)."""
        if not _plain(b):
            return None
        sub = _rests_after(rests, b)
        return self._not_in_node(sub) if sub else self.any_chars

    def _plain_except(self, kids: tuple) -> Term:
        """A plain ASCII character other than `kids`, then anything (a key trie node's
        way out; the same few letters recur in most nodes)."""
        t = self._except.get(kids)
        if t is None:
            tb, out, lo = self.tb, [], 0x20
            for c in kids + (0x80,):  # the plain characters between the kids
                out += [tb.byte_range(x, y) for x, y in _intersect_ranges(((lo, c - 1),), _PLAIN)]
                lo = c + 1
            t = self._except[kids] = tb.concat(tb.alt(out), self.any_chars)
        return t

    def _one_char(self, t: Term) -> bool:
        """Whether every member of t is one encoded character: a class `char` made, plain
        ASCII bytes, or one character's text (a pattern's literal `é`)."""
        if t.id in self.char_ids:
            return True
        if t.kind == BYTES:
            return all(_plain(c) for c in range(t.args[0], t.args[1] + 1))
        if t.kind == STR:
            text = t.args[0].decode("utf-8", "replace")
            return len(text) == 1 and encode_char(ord(text)) == t.args[0]
        return False

    def quoted(self, content: Term) -> Term:
        return self.tb.seq([self.quote, content, self.quote])

    def length(self, lo: int, hi: int | None) -> Term:
        return self.tb.repeat(self.any_char, lo, hi)

    def bounded_run(self, content: Term, lo: int, hi: int | None) -> Term | None:
        """The contents of lo..hi characters (hi None: unbounded) that are also `content`,
        as one repeat where content is a run of one character class (`^[^<>]*$`,
        `^\\S+$`); None for other contents. An intersection with `length` instead counts
        characters one state at a time, each an emptiness question, where the class takes
        non-ASCII characters (`^[^<>]*$` with maxLength 255: slow steps)."""
        if content.kind != REPEAT or not self._one_char(content.args[0]):
            return None
        c, m, n = content.args
        top = hi if n is None else n if hi is None else min(hi, n)
        return self.tb.repeat(c, max(lo, m), top)

    def search(self, pattern: str) -> Term:
        """Encoded strings whose decoded value contains a match of ECMA `pattern` (once per
        pattern: an `^x-` patternProperties may stand in dozens of objects)."""
        t = self._searches.get(pattern)
        if t is None:
            t = self._searches[pattern] = _search_term(self, pattern)
        return t

    def fullmatch(self, pattern: str) -> Term:
        """Encoded strings whose decoded value fully matches `pattern` (Python syntax)."""
        parsed = _parse(pattern)
        return _JsonConverter(self, pattern, parsed).then(parsed, parsed.state.flags, True, True, self.tb.empty)


@functools.lru_cache(maxsize=1024)
def _parse(pattern: str):  # parse trees are only read: share them between compilations
    import re
    text, edits = python_text(pattern, ecma_groups=True)  # (?<name>...), \p{...}
    try:
        return P.parse(text, 0)
    except re.error as e:
        raise RegexError(f"invalid or unsupported regex: {e.msg}", pattern, original_pos(edits, e.pos)) from None


class _JsonConverter(Converter):
    def __init__(self, st: StringTerms, pattern: str, root):
        super().__init__(st.tb, pattern, root)
        self.st = st

    def literal_run(self, text: str) -> Term:
        return self.tb.literal(encode_string(text))  # JSON-escaped inside the string

    def any_text(self) -> Term:
        return self.st.any_chars

    def end_text(self, flags: int, anchor) -> Term:
        return self.tb.empty  # (ECMA's `$` is the very end)

    NON_BOUNDARY_IN_EMPTY = True  # (ECMA's \B holds in an empty string)

    def word_ranges(self, flags: int):
        return ECMA_WORD  # (ECMA's \b: ASCII word characters)

    def char_ranges(self, op, av, flags: int):
        if flags & FLAG_I and op in (C.LITERAL, C.NOT_LITERAL, C.IN):
            return charset.by_python_re(_class_regex_simple(op, av), FLAG_I)
        if op == C.LITERAL:
            return ((av, av),)
        if op == C.NOT_LITERAL:
            return charset.complement(charset.normalize([(av, av)]))
        if op == C.ANY:
            return ALL if flags & FLAG_S else charset.complement(LINE_TERMINATORS)
        return _class_ranges(av)

    def node(self, op, av, flags, at_start, at_end):
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return self.st.char(self.char_ranges(op, av, flags))
        return super().node(op, av, flags, at_start, at_end)


def _class_ranges(items):
    neg = False
    parts = []
    for op, av in items:
        if op == C.NEGATE:
            neg = True
        elif op == C.LITERAL:
            parts.append((av, av))
        elif op == C.RANGE:
            parts.append(av)
        elif op == C.CATEGORY:
            rs, inv = _CATEGORY[av]
            parts.extend(charset.complement(rs) if inv else rs)
        else:  # pragma: no cover
            raise AssertionError(op)
    out = charset.normalize(parts)
    return charset.complement(out) if neg else out


def _class_regex_simple(op, av) -> str:
    from ..regex.syntax import class_regex
    if op == C.IN:
        return class_regex(av)
    if op == C.LITERAL:
        return class_regex([(C.LITERAL, av)])
    return class_regex([(C.NEGATE, None), (C.LITERAL, av)])


def _ends(item) -> list | None:
    """The item lists a group or branch stands for, where an anchor lies inside it (a
    group that sets no flags: one list; a branch: one per alternative); else None."""
    op, av = item
    if op == C.SUBPATTERN and not av[1] and not av[2] and _anchored(av[3]):
        return [list(av[3])]
    if op == C.BRANCH and any(_anchored(b) for b in av[1]):
        return [list(b) for b in av[1]]
    return None


def _anchored(items) -> bool:
    """Whether `items` hold a `^` or `$` in a group or branch (not in a repeat)."""
    for op, av in items:
        if op == C.AT and av in AT_BEGIN + AT_END:
            return True
        if (op == C.SUBPATTERN and _anchored(av[3])) or (op == C.BRANCH and any(_anchored(b) for b in av[1])):
            return True
    return False


def _search_term(st: StringTerms, pattern: str) -> Term:
    parsed = _parse(pattern)
    return _search(st, _JsonConverter(st, pattern, parsed), parsed, parsed.state.flags)


def _search(st: StringTerms, conv, items, flags) -> Term:
    """_search_term's work on a branch (a function of the module, not a recursive
    closure: that is a reference cycle, the converter's garbage with it)."""
    tb = st.tb
    items = list(items)
    if len(items) == 1 and items[0][0] == C.BRANCH:
        return tb.alt(_search(st, conv, b, flags) for b in items[0][1][1])
    if len(items) == 1 and items[0][0] == C.SUBPATTERN:
        _g, add, delete, sub = items[0][1]
        return _search(st, conv, sub, (flags | add) & ~delete)
    for end in (0, -1):  # a group or branch at either end that holds anchors: its alternatives'
        # searches (Python factors `^a$|^b$` into `^(?:a$|b$)`: each branch ends where its `$` is)
        ways = _ends(items[end]) if items else None
        if ways is not None:
            rest = items[1:] if end == 0 else items[:-1]
            return tb.alt(_search(st, conv, way + rest if end == 0 else rest + way, flags) for way in ways)
    pre = post = st.any_chars
    if items and items[0][0] == C.AT and items[0][1] in AT_BEGIN:
        pre, items = tb.empty, items[1:]
    if items and items[-1][0] == C.AT and items[-1][1] in AT_END:
        post, items = tb.empty, items[:-1]
    # (a lookahead sees the text to the input's end, `post` too, and a lookbehind `pre`)
    return conv.then([(TERM_OP, (pre, 0))] + items, flags, True, False, post)
