"""Python `re` syntax -> byte-level term (fsm/core/terms.py), with full-match semantics.

Python's own regex parser reads the pattern, so escapes, classes, flags and error
positions are exactly those of `re`; this module maps the parse tree to terms.
Lookarounds, word boundaries and anchors are exact wherever they stand (their part of
the converter: looks.py); grammar terminals take the same (terminal_terms). Unicode
property escapes `\\p{X}` / `\\P{X}` (General_Category) are an extension, written out as
classes before re's parser reads the pattern (python_text). Constructs that are not
regular or not taken (backreferences, conditionals, atomic groups, possessive repeats)
raise RegexError with their position. Supported syntax and limits: docs/regex.md.

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
from .context import END, NLEND, right_groups
from .looks import Lookarounds, Side
from .tree import AT_BEGIN, AT_END, BOUNDS, TERM_OP, C, has_look, in_order, looks_in_order, own_ats

try:  # Python >= 3.11
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
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


def regex_to_term(tb: TermBuilder, pattern: str, flags: int = 0) -> Term:
    """Parse `pattern` (Python `re` syntax) into a term matching its full matches, as UTF-8."""
    parsed = _parse(pattern, flags)
    if isinstance(parsed, list):  # a word list: skip re's parser, dear on long lists
        return tb.alt(tb.literal(w.encode()) for w in parsed)
    return Converter(tb, pattern, parsed).then(parsed, int(parsed.state.flags), True, True, tb.empty)


def terminal_terms(tb: TermBuilder, pattern: str, flags: int = 0) -> list[tuple[Term, tuple | None]]:
    """A grammar terminal's lexemes, as [(lexemes, what the text after them must begin
    as)]: None where they read nothing after them, else (the code points the next
    character may be, whether the output may end there), one pair per class of that
    character that the terminal's assertions tell apart. What an assertion reads past
    the lexeme is the next lexeme's: the grammar's lexer decides one character's class
    there, no more; lookarounds inside the lexeme see it alone (docs/grammars.md,
    "Terminals"). RegexError for an assertion that reads before the lexeme, or more
    than the next character's class after it."""
    parsed = _parse(pattern, flags)
    if isinstance(parsed, list):
        return [(tb.alt(tb.literal(w.encode()) for w in parsed), None)]
    conv = Converter(tb, pattern, parsed, terminal=True)
    flags = int(parsed.state.flags)
    if not conv.looks:
        return [(conv.sequence(parsed, flags, False, False), None)]
    ctx = conv.ctx
    out: dict = {}  # lexemes -> the classes that may follow them
    for side in right_groups(ctx, [p for p in conv._preds_in(parsed) if p.right]):
        t = conv._seq(list(parsed), flags, None, None, tb.empty, Side(side, True), [])
        if not conv.read_after:  # (no assertion read past the lexemes: one term)
            return [(t, None)]
        if t is not tb.nothing:
            out[t] = out.get(t, frozenset()) | side
        if ctx.nlend and (NLEND in side) != (ctx.newline in side):  # "\n", then the end (or not)
            dollar = in_order(parsed, lambda op, av: op == C.AT and av == C.AT_END)[0]
            conv._fail_at(dollar, "a `$` at the end of a grammar terminal, which reads two characters "
                                  "after it (a final newline, then the end: write \\Z, or (?m)$),")
    return [(t, (ctx.ranges_of(side), END in side)) for t, side in out.items()] or [(tb.nothing, None)]


def _parse(pattern: str, flags: int):
    """Python's parse tree of `pattern`, or its words where it only alternates plain
    words (_plain_alternation); RegexError where it is not a regex we take."""
    if isinstance(pattern, bytes):
        raise RegexError("bytes patterns are not supported; pass a str", repr(pattern), None)
    if flags & ~_SUPPORTED_FLAGS:
        raise RegexError(f"unsupported regex flags {flags & ~_SUPPORTED_FLAGS:#x} "
                         "(LOCALE and DEBUG are not supported)", pattern, None)
    words = _plain_alternation(pattern, flags)
    if words is not None:
        return words
    text, edits = python_text(pattern, flags)
    try:
        return P.parse(text, flags)
    except re.error as e:
        raise RegexError(f"invalid regex: {e.msg}", pattern, original_pos(edits, e.pos)) from None


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
    ends = ((0, "^"), (0, "\\A"), (len(pattern) - 1, "$"), (len(pattern) - 2, "\\Z"))
    return any((i, pattern[i:i + 2] if pattern[i] == "\\" else pattern[i]) not in ends
               for i in _construct_positions(pattern).get("anchor", ()))


class Converter(Lookarounds):
    """A parse tree -> terms. Leaves come from `char_ranges` and `literal_run`, texts
    from `any_text` and `end_text`: fsm/json/strings.py changes those for JSON strings.
    Lookarounds, anchors and word boundaries: fsm/regex/looks.py."""

    NON_BOUNDARY_IN_EMPTY = re.fullmatch(r"\B", "") is not None  # (False before Python 3.14)

    def __init__(self, tb: TermBuilder, pattern: str, root=(), terminal: bool = False):
        self.tb, self.pattern = tb, pattern
        self.root = root  # the whole parse tree (for a lookaround's position)
        self.flags = int(root.state.flags) if hasattr(root, "state") else 0
        # (else the tree holds nothing that looks around; a terminal's every anchor looks past it)
        self.looks = _may_look(pattern) or terminal and has_look(root, ends=True)
        if self.looks:
            own_ats(root)
        self.terminal = terminal  # a grammar terminal: what precedes and follows it is other lexemes'
        self.read_after = False  # (a terminal's assertion read the text after it: Lookarounds._look_ahead)
        self._seen: dict[str, int] = {}
        self._terms: dict = {}  # context class terms (Lookarounds)

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

    def _fail_at(self, item, what: str) -> None:
        """RegexError at the anchor or word boundary `item` (its place among the pattern's)."""
        kind = "boundary" if item[1] in BOUNDS else "anchor"
        same = lambda op, av: op == C.AT and (av in BOUNDS) == (kind == "boundary")  # noqa: E731
        order = [id(x) for x in in_order(self.root, same)]  # (item is the tree's own tuple)
        self.fail(what, kind, order.index(id(item)))

    def _fail_look(self, av, what: str) -> None:
        """RegexError at the lookaround `av` (its place among the pattern's lookarounds)."""
        pos = _construct_positions(self.pattern)
        at = sorted(pos.get(_UNSUPPORTED[C.ASSERT], []) + pos.get(_UNSUPPORTED[C.ASSERT_NOT], []))
        order = [id(x) for x in looks_in_order(self.root)]
        n = order.index(id(av)) if id(av) in order else -1
        raise RegexError(f"{what} is not supported in constraints", self.pattern,
                         at[n] if 0 <= n < len(at) else None)

    def node(self, op, av, flags: int, at_start: bool, at_end: bool) -> Term:
        tb = self.tb
        if op == TERM_OP:
            return av[0]
        if op == C.LITERAL and not flags & FLAG_I:
            return tb.literal(chr(av).encode("utf-8", "surrogatepass")) if not 0xD800 <= av <= 0xDFFF else tb.nothing
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return charset.to_term(tb, self.char_ranges(op, av, flags))
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
        if op == C.AT:  # (then() takes a pattern with any other anchor or a word boundary)
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
        return charset.to_term(self.tb, self.char_ranges(C.IN, items, flags))

    def char_ranges(self, op, av, flags: int):
        """The code points of a one-character item (a literal, a class, `.`) under `flags`."""
        if op == C.ANY:
            return charset.normalize(((0, charset.MAX_CP),) if flags & FLAG_S else charset.complement(((10, 10),)))
        items = [(C.LITERAL, av)] if op == C.LITERAL else [(C.NEGATE, None), (C.LITERAL, av)] \
            if op == C.NOT_LITERAL else av
        rel = flags & (FLAG_I | FLAG_A)
        fast = _fast_class(items, rel)
        # (Unicode case folding beyond ASCII: ask re itself, once per class, cached)
        return fast if fast is not None else charset.by_python_re(class_regex(items), rel)

    def word_ranges(self, flags: int):
        """The word characters of `\\b` and `\\B` under `flags`."""
        return charset.category(r"\w", bool(flags & FLAG_A))


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
